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


# ---------------------------------------------------------------------------------------------------------------
# XSpace profiles (ProfileData), device memory profiles, the server (against jax.profiler)
TEXT_PROTO = r'''# an XSpace in the protobuf text format
planes { id: 7 name: "/host:CPU"
  lines { id: 3 display_id: 4 name: "main" display_name: "Main" timestamp_ns: 1000 duration_ps: 99
    events { metadata_id: 1 offset_ps: 5000 duration_ps: 2500
             stats { metadata_id: 2 int64_value: -4 } stats { metadata_id: 3 str_value: "h\"i\001\x41" }
             stats { metadata_id: 4 double_value: 1.5e3 } stats { metadata_id: 5 uint64_value: 18446744073709551615 }
             stats { metadata_id: 6 ref_value: 3 } stats { metadata_id: 7, bytes_value: "\001" } }
    events { metadata_id: 9 num_occurrences: 3 duration_ps: 10 } }
  event_metadata { key: 1 value { id: 1 name: "ev" display_name: "EV" stats { metadata_id: 2 int64_value: 5 } } }
  stat_metadata { key: 2 value { id: 2 name: "i" } } stat_metadata { key: 3 value { id: 3 name: "s" } }
  stat_metadata { key: 4 value { id: 4 name: "d" } } stat_metadata { key: 5 value { id: 5 name: "u" } }
  stat_metadata { key: 6 value { id: 6 name: "r" } } stat_metadata: < key: 7 value: < id: 7 name: "b" > >
  stats { metadata_id: 2 int64_value: 12 } }
planes { name: "second" }
hostnames: "h"'''


def view(data):
    """A ProfileData (ember's or JAX's) as plain values: planes, their stats, lines, events."""
    return [(p.name, list(p.stats), [(line.name, [(e.name, e.start_ns, e.duration_ns, e.end_ns, list(e.stats))
                                                  for e in line.events]) for line in p.lines]) for p in data.planes]


def test_profile_data_reads_xspace_as_jax():
    import jax.profiler
    ours, theirs = ember.profiler.ProfileData, jax.profiler.ProfileData
    want = view(theirs.from_text_proto(TEXT_PROTO))
    assert view(ours.from_text_proto(TEXT_PROTO)) == want
    assert view(ours.from_serialized_xspace(theirs.text_proto_to_serialized_xspace(TEXT_PROTO))) == want
    assert view(theirs.from_serialized_xspace(ours.text_proto_to_serialized_xspace(TEXT_PROTO))) == want
    assert want[0][2][0][1][0][4][4] == ("r", "s")  # (a reference stat reads as the name it refers to)
    data = ours.from_text_proto(TEXT_PROTO)
    assert data.find_plane_with_name("second").name == "second" and data.find_plane_with_name("x") is None
    with pytest.raises(ValueError):
        ours.from_serialized_xspace(b"\x0a\xff\xff")
    with pytest.raises(ValueError, match="XSpace has no field 'plane'"):
        ours.from_text_proto('plane { name: "x" }')
    with pytest.raises(NotImplementedError):
        ours.from_raw_cpp_ptr(None)


def test_a_trace_is_also_an_xspace_file_jax_reads(tmp_path):
    import jax.profiler
    with ember.profiler.trace(tmp_path, profiler_options=ember.profiler.ProfileOptions()):
        with ember.profiler.TraceAnnotation("my step", n=1):
            ember.jit(lambda v: v * 3.0)(np.ones(4, np.float32)).block_until_ready()
    (path,) = tmp_path.glob("plugins/profile/*/*.xplane.pb")
    ours = view(ember.profiler.ProfileData.from_file(path))
    assert ours == view(jax.profiler.ProfileData.from_file(str(path)))
    (plane,) = ours
    assert plane[0] == "/host:CPU"
    events = {e[0]: e for _, line_events in plane[2] for e in line_events}
    assert events["my step"][4] == [("n", "1")] and events["my step"][2] > 0
    assert any(name.startswith("compile jit(") for name in events)
    chrome = {e["name"] for e in read(next(tmp_path.glob("plugins/profile/*/*.trace.json.gz")))}
    assert chrome == set(events)


def test_device_memory_profile_is_pprof_of_the_live_arrays(tmp_path):
    from ember._runtime.xla_proto import fields, ints
    keep = enp.ones((123,), enp.float32)  # noqa: F841  (alive while the profile is taken)
    profile = fields(gzip.decompress(ember.profiler.device_memory_profile()))
    strings = [s.decode() for s in profile[6]]
    assert [[strings[i] for i in ints(fields(t)[1]) + ints(fields(t)[2])] for t in profile[1]] == \
        [["allocations", "count"], ["space", "bytes"]]
    functions = {ints(fields(f)[1])[0]: strings[ints(fields(f)[2])[0]] for f in profile[5]}
    found = {functions[ints(fields(s)[1])[0]]: ints(fields(s)[2]) for s in profile[2]}
    assert found["f32[123] array"] == [1, 123 * 4]
    ember.profiler.save_device_memory_profile(tmp_path / "memory.prof")
    assert gzip.decompress((tmp_path / "memory.prof").read_bytes())[:1] == b"\x0a"


def test_options_and_the_server_as_ember_can():
    import jax.profiler
    ours, theirs = ember.profiler.ProfileOptions(), jax.profiler.ProfileOptions()
    for name in ("host_tracer_level", "python_tracer_level", "start_timestamp_ns", "duration_ms",
                 "include_dataset_ops", "raise_error_on_start_failure", "advanced_configuration",
                 "enable_hlo_proto", "repository_path", "session_id"):
        assert getattr(ours, name) == getattr(theirs, name), name
    with pytest.raises(NotImplementedError, match="gRPC"):
        ember.profiler.start_server(9999)
    with pytest.raises(ValueError, match="No active profiler server"):
        ember.profiler.stop_server()
    with pytest.raises(RuntimeError, match="cannot register"):
        ember.profiler.register_subprocess(1, 9999)
    with pytest.raises(TypeError, match="profiler_options"):
        ember.profiler.start_trace("/nonexistent", profiler_options={})
    assert [n for n in dir(jax.profiler) if not n.startswith("_") and not hasattr(ember.profiler, n)] == []
