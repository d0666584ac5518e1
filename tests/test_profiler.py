"""ember.profiler (as jax.profiler): a trace of a training step is a valid Chrome trace (JSON, gzip) with events
for tracing, transforms, lowering, compiling, executions and transfers, and the user's annotations around them;
nothing is instrumented once the trace stops."""
import gzip
import json

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._runtime.compiler import Compiled
from ember._runtime.array import Array


def read(path):
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    assert set(trace) == {"displayTimeUnit", "traceEvents"}
    for event in trace["traceEvents"]:
        assert {"name", "ph", "pid"} <= set(event)
        if event["ph"] == "X":
            assert event["dur"] >= 0 and event["ts"] >= 0 and isinstance(event["tid"], int)
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_a_training_step_is_traced(tmp_path):
    plain_call, plain_value = Compiled.call_flat, Array._value
    w, x, y = enp.ones((8, 4)) * 0.1, enp.ones((16, 8)), enp.zeros((16, 4))
    loss = lambda w, x, y: enp.mean((enp.tanh(x @ w) - y) ** 2)  # noqa: E731
    step = ember.jit(lambda w, x, y: w - 0.1 * ember.grad(loss)(w, x, y))

    @ember.profiler.annotate_function
    def train(w):
        for i in range(3):
            with ember.profiler.StepTraceAnnotation("train step", step_num=i):
                w = step(w, x, y)
        return float(loss(w, x, y))

    with ember.profiler.trace(tmp_path):
        train(w)
    paths = list(tmp_path.glob("plugins/profile/*/*.trace.json.gz"))
    assert len(paths) == 1
    events = read(paths[0])
    by_cat = {}
    for e in events:
        by_cat.setdefault(e["cat"], []).append(e)
    assert {"trace", "transform", "lower", "compile", "execute", "transfer", "annotation"} <= set(by_cat)
    assert [e["name"] for e in by_cat["transform"]] == ["grad"]  # grad inside the step, transformed once
    assert sum(e["name"] == "jit(<lambda>)" for e in by_cat["execute"]) == 3  # one per step
    steps = [e for e in by_cat["annotation"] if e["name"] == "train step"]
    assert [e["args"]["step_num"] for e in steps] == ["0", "1", "2"]
    outer = next(e for e in by_cat["annotation"] if e["name"].endswith("train"))
    first_compile = next(e for e in by_cat["compile"] if e["name"] == "compile jit(<lambda>)")
    for inner in steps + [first_compile]:  # nested in time
        assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1
    assert steps[0]["ts"] <= first_compile["ts"] <= steps[0]["ts"] + steps[0]["dur"]
    assert Compiled.call_flat is plain_call and Array._value is plain_value  # nothing instrumented now


def test_start_and_stop(tmp_path):
    with pytest.raises(RuntimeError, match="no trace is being recorded"):
        ember.profiler.stop_trace()
    ember.profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="already being recorded"):
            ember.profiler.start_trace(tmp_path)
        np.asarray(enp.arange(3.0) * 2)
    finally:
        path = ember.profiler.stop_trace()
    assert any(e["cat"] == "execute" for e in read(path))
    with pytest.raises(NotImplementedError, match="perfetto"):
        ember.profiler.start_trace(tmp_path, create_perfetto_link=True)


def test_programs_compiled_before_the_trace_are_recorded(tmp_path):
    """Warm up, then profile (the normal use): the calls of programs compiled before start_trace are events too, one
    per call (on one device, partitioned by in_shardings, and a donating one); none are recorded after stop_trace."""
    mesh = ember.make_mesh((2,), ("x",))
    split = ember.sharding.NamedSharding(mesh, ember.sharding.PartitionSpec("x"))
    def halve(w):
        return w * 0.5 + 1.0

    def double(w):
        return w * 2.0

    def decrement(w):
        return w - 1.0
    step, split_step = ember.jit(halve), ember.jit(double, in_shardings=split)
    donating = ember.jit(decrement, donate_argnums=0)
    w = enp.ones(4)
    step(w), split_step(w), donating(enp.ones(4))  # (compiled before the trace)
    with ember.profiler.trace(tmp_path):
        for _ in range(3):
            w = step(w)
            split_step(w)
            donating(enp.ones(4))
    step(w)
    (path,) = tmp_path.glob("plugins/profile/*/*.trace.json.gz")
    executes = [e["name"] for e in read(path) if e["cat"] == "execute"]
    for name in ("jit(halve)", "jit(double)", "jit(decrement)"):
        assert executes.count(name) == 3, executes
