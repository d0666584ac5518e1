"""ember.monitoring against jax.monitoring: the listener API (registering, recording, unregistering, clearing), and
the events ember records where it does JAX's work: a jitted function's trace, lowering and compile, with JAX's names
and arguments in JAX's order; the persistent compilation cache's requests, misses and hits."""
import numpy as np
import pytest

import jax
import jax.monitoring

import ember
import ember.monitoring as monitoring


@pytest.fixture
def recorded():
    """Every event any listener hears while the test runs, as (kind, name, kwargs); listeners removed after."""
    events = []
    listeners = [(monitoring.register_event_listener, monitoring.unregister_event_listener,
                  lambda e, **k: events.append(("event", e, k))),
                 (monitoring.register_event_duration_secs_listener, monitoring.unregister_event_duration_listener,
                  lambda e, d, **k: events.append(("duration", e, k))),
                 (monitoring.register_event_time_span_listener, monitoring.unregister_event_time_span_listener,
                  lambda e, s, t, **k: events.append(("span", e, k))),
                 (monitoring.register_scalar_listener, monitoring.unregister_scalar_listener,
                  lambda e, v, **k: events.append(("scalar", e, k)))]
    for register, _, listener in listeners:
        register(listener)
    yield events
    for _, unregister, listener in listeners:
        unregister(listener)


def _jax_events(fn, *args):
    """The events JAX records for fn's jit (the listeners registered, and removed, around it)."""
    events = []
    listeners = [(jax.monitoring.register_event_listener, jax.monitoring.unregister_event_listener,
                  lambda e, **k: events.append(("event", e, k))),
                 (jax.monitoring.register_event_duration_secs_listener,
                  jax.monitoring.unregister_event_duration_listener,
                  lambda e, d, **k: events.append(("duration", e, k))),
                 (jax.monitoring.register_event_time_span_listener, jax.monitoring.unregister_event_time_span_listener,
                  lambda e, s, t, **k: events.append(("span", e, k))),
                 (jax.monitoring.register_scalar_listener, jax.monitoring.unregister_scalar_listener,
                  lambda e, v, **k: events.append(("scalar", e, k)))]
    for register, _, listener in listeners:
        register(listener)
    try:
        jax.jit(fn)(*args)
    finally:
        for _, unregister, listener in listeners:
            unregister(listener)
    return events


def test_the_compile_steps_of_a_jitted_function_as_jax(recorded):
    def scaled_sum(x):
        return (x * 2).sum()

    x = np.arange(6.0, dtype=np.float32)
    ember.jit(scaled_sum)(x)
    mine = [e for e in recorded if e[2].get("fun_name") in ("scaled_sum", "jit(scaled_sum)")]
    theirs = [e for e in _jax_events(scaled_sum, x) if e[2].get("fun_name") in ("scaled_sum", "jit(scaled_sum)")]
    assert mine == theirs
    assert len(mine) == 9  # trace, lowering, compile: a scalar (the start time), a duration and a time span each
    recorded.clear()
    ember.jit(scaled_sum)(x)  # compiled already: nothing
    assert recorded == []


def test_values_the_listeners_receive(recorded):
    spans, durations = [], []

    def on_span(event, start, end, **kwargs):
        spans.append((event, start, end, kwargs))

    def on_duration(event, duration, **kwargs):
        durations.append((event, duration))

    monitoring.register_event_time_span_listener(on_span)
    monitoring.register_event_duration_secs_listener(on_duration)
    try:
        ember.jit(lambda v: v - 1)(np.ones(2, np.float32))
    finally:
        monitoring.unregister_event_time_span_listener(on_span)
        monitoring.unregister_event_duration_listener(on_duration)
    assert [s[0] for s in spans] == ["/jax/core/compile/jaxpr_trace_duration",
                                     "/jax/core/compile/jaxpr_to_mlir_module_duration",
                                     "/jax/core/compile/backend_compile_duration"]
    for (_, start, end, _), (_, duration) in zip(spans, durations):
        assert 1e9 < start <= end and end - start == pytest.approx(duration)


def test_the_persistent_cache_events(recorded, tmp_path):
    with ember.config.override(compilation_cache_dir=str(tmp_path), persistent_cache_min_compile_time_secs=0,
                               persistent_cache_min_entry_size_bytes=0):
        def through_cache(v):
            return v * 7 + 1

        ember.jit(through_cache)(np.ones(3, np.float32))
        names = [e[1] for e in recorded if e[0] == "event"]
        assert names[-2:] == ["/jax/compilation_cache/compile_requests_use_cache",
                              "/jax/compilation_cache/cache_misses"]
        recorded.clear()
        ember.clear_caches()
        ember.jit(through_cache)(np.ones(3, np.float32))
        assert [e[1] for e in recorded if e[0] == "event"] == ["/jax/compilation_cache/compile_requests_use_cache",
                                                               "/jax/compilation_cache/cache_hits"]
        assert ("duration", "/jax/compilation_cache/cache_retrieval_time_sec", {}) in recorded


def test_the_listener_api_as_jax():
    for module in (monitoring, jax.monitoring):
        heard = []

        def listener(event, **kwargs):
            heard.append((event, kwargs))

        def scalar(event, value, **kwargs):
            heard.append((event, value, kwargs))

        module.register_event_listener(listener)
        module.register_scalar_listener(scalar)
        module.record_event("/my/event", step=3, phase="train")
        module.record_scalar("/my/loss", 0.5, step=3)
        module.record_event_duration_secs("/my/duration", 1.5)  # (no duration listener: nobody hears it)
        module.unregister_event_listener(listener)
        module.unregister_scalar_listener(scalar)
        module.record_event("/my/event")
        assert heard == [("/my/event", {"step": 3, "phase": "train"}), ("/my/loss", 0.5, {"step": 3})]
        with pytest.raises(AssertionError):
            module.unregister_event_listener(listener)
        with pytest.raises(AssertionError):
            module.unregister_event_time_span_listener(listener)


def test_clear_event_listeners():
    heard = []
    monitoring.register_event_listener(lambda e, **k: heard.append(e))
    monitoring.register_event_duration_secs_listener(lambda e, d, **k: heard.append(e))
    monitoring.register_scalar_listener(lambda e, v, **k: heard.append(e))
    monitoring.clear_event_listeners()
    monitoring.record_event("/a")
    monitoring.record_event_duration_secs("/b", 1.0)
    monitoring.record_scalar("/c", 1.0)  # (cleared too: JAX 0.10.2's clear leaves scalar listeners registered)
    assert heard == []


def test_names_match_jax():
    public = sorted(n for n in dir(jax.monitoring) if not n.startswith("_"))
    assert sorted(monitoring.__all__) == public
    assert all(callable(getattr(monitoring, name)) for name in public)
