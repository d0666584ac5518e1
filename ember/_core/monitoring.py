"""The listeners of jax.monitoring's events (ember.monitoring) and the events ember records where it does JAX's work.

Four kinds of events, each with its listeners: plain events (`record_event(name, **kwargs)`), durations in seconds,
time spans (start and end, seconds since the epoch) and scalars. With no listener registered, recording is a test
of an empty list. ember records JAX's events where it does the same work (names as JAX 0.10.2 records them):

  /jax/core/compile/jaxpr_trace_duration          staging a jitted function to its IR (fun_name: the function's name)
  /jax/core/compile/jaxpr_to_mlir_module_duration lowering an IR to StableHLO (fun_name: the program's, "jit(f)")
  /jax/core/compile/backend_compile_duration      XLA compiling it, or loading it from the persistent cache
  each of these three as a scalar (its start time), a duration and a time span, as JAX's timer records them;
  /jax/compilation_cache/tasks_using_cache        once per process, at the first compile using the persistent cache
  /jax/compilation_cache/compile_requests_use_cache, cache_hits, cache_misses   per compile using that cache
  /jax/compilation_cache/cache_retrieval_time_sec a duration, per hit."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_EVENT = "/jax/compilation_cache/"

_event_listeners: list[Callable[..., None]] = []
_duration_listeners: list[Callable[..., None]] = []
_time_span_listeners: list[Callable[..., None]] = []
_scalar_listeners: list[Callable[..., None]] = []
_lock = threading.Lock()


def record_event(event: str, **kwargs: str | int) -> None:
    """Record an event: every event listener is called with (event, **kwargs)."""
    for listener in list(_event_listeners):
        listener(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Record how long an event took, in seconds: every duration listener is called with (event, duration,
    **kwargs)."""
    for listener in list(_duration_listeners):
        listener(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs: str | int) -> None:
    """Record when an event started and ended (seconds): every time-span listener is called with (event,
    start_time, end_time, **kwargs)."""
    for listener in list(_time_span_listeners):
        listener(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Record a scalar value: every scalar listener is called with (event, value, **kwargs)."""
    for listener in list(_scalar_listeners):
        listener(event, value, **kwargs)


def _register(listeners: list[Callable[..., None]], callback: Callable[..., None]) -> None:
    with _lock:
        listeners.append(callback)


def _unregister(listeners: list[Callable[..., None]], callback: Callable[..., None], kind: str) -> None:
    with _lock:
        if callback not in listeners:  # (JAX asserts it)
            raise AssertionError(f"unregister_{kind}: {callback!r} is not a registered {kind.replace('_', ' ')}")
        listeners.remove(callback)


def register_event_listener(callback: Callable[..., None]) -> None:
    """Call callback(event, **kwargs) at every record_event."""
    _register(_event_listeners, callback)


def register_event_duration_secs_listener(callback: Callable[..., None]) -> None:
    """Call callback(event, duration_secs, **kwargs) at every record_event_duration_secs."""
    _register(_duration_listeners, callback)


def register_event_time_span_listener(callback: Callable[..., None]) -> None:
    """Call callback(event, start_time, end_time, **kwargs) at every record_event_time_span."""
    _register(_time_span_listeners, callback)


def register_scalar_listener(callback: Callable[..., None]) -> None:
    """Call callback(event, value, **kwargs) at every record_scalar."""
    _register(_scalar_listeners, callback)


def unregister_event_listener(callback: Callable[..., None]) -> None:
    """Stop calling an event listener (AssertionError, as JAX's, for one not registered)."""
    _unregister(_event_listeners, callback, "event_listener")


def unregister_event_duration_listener(callback: Callable[..., None]) -> None:
    """Stop calling a duration listener (AssertionError, as JAX's, for one not registered)."""
    _unregister(_duration_listeners, callback, "event_duration_listener")


def unregister_event_time_span_listener(callback: Callable[..., None]) -> None:
    """Stop calling a time-span listener (AssertionError, as JAX's, for one not registered)."""
    _unregister(_time_span_listeners, callback, "event_time_span_listener")


def unregister_scalar_listener(callback: Callable[..., None]) -> None:
    """Stop calling a scalar listener (AssertionError, as JAX's, for one not registered)."""
    _unregister(_scalar_listeners, callback, "scalar_listener")


def clear_event_listeners() -> None:
    """Unregister every listener, of all four kinds (JAX 0.10.2's leaves its scalar listeners registered)."""
    with _lock:
        for listeners in (_event_listeners, _duration_listeners, _time_span_listeners, _scalar_listeners):
            listeners.clear()


def listening() -> bool:
    """Whether any listener is registered (what ember's own events cost nothing without)."""
    return bool(_event_listeners or _duration_listeners or _time_span_listeners or _scalar_listeners)


@contextlib.contextmanager
def timed(event: str, fun_name: str) -> Iterator[None]:
    """Record the with-block as JAX's compile-step timer does: its start time as a scalar when it starts, then its
    duration and its time span (fun_name with each); nothing when the block raises, nor without listeners."""
    if not listening():
        yield
        return
    start = time.time()
    record_scalar(event, start, fun_name=fun_name)
    yield
    end = time.time()
    record_event_duration_secs(event, end - start, fun_name=fun_name)
    record_event_time_span(event, start, end, fun_name=fun_name)


_cache_used: list[bool] = []


def record_cache_use() -> None:
    """A compile asks the persistent compilation cache: the per-process event the first time, then the request's."""
    if not listening():
        return
    with _lock:
        first = not _cache_used
        _cache_used[:] = [True]
    if first:
        record_event(CACHE_EVENT + "tasks_using_cache")
    record_event(CACHE_EVENT + "compile_requests_use_cache")


def reset_cache_use() -> None:
    """The next compile using the persistent cache is the process's first again (its tasks_using_cache event)."""
    with _lock:
        _cache_used.clear()


__all__ = ["CACHE_EVENT", "COMPILE_EVENT", "LOWER_EVENT", "TRACE_EVENT", "clear_event_listeners", "listening",
           "record_cache_use", "record_event", "record_event_duration_secs", "record_event_time_span",
           "record_scalar", "register_event_duration_secs_listener", "register_event_listener",
           "register_event_time_span_listener", "register_scalar_listener", "reset_cache_use", "timed",
           "unregister_event_duration_listener", "unregister_event_listener", "unregister_event_time_span_listener",
           "unregister_scalar_listener"]
