"""ember.experimental.profiler.get_profiled_instructions_proto against JAX's (XLA's converter): the same profile
files read by both, a GPU profile written for the test (the costs: the mean duration of each instruction on the
device planes, the async line skipped) and ember's own CPU profile (empty, as JAX's on the CPU); the errors."""
import os

import numpy as np
import pytest

import jax.experimental.profiler as jax_profiler

import ember
import ember.numpy as enp
from ember._runtime.xla_proto import fields, messages
from ember._runtime.xspace import encode
from ember.experimental.profiler import get_profiled_instructions_proto


def _costs(data):
    """{name: cost_us} of a serialized ProfiledInstructionsProto."""
    out = {}
    for cost in messages(fields(data), 1, "costs"):
        item = fields(cost)
        name = item[1][-1].decode()
        out[name] = np.frombuffer(int(item[2][-1]).to_bytes(8, "little"), np.float64)[0]
    return out


def _gpu_xspace():
    stat_metadata = {1: {"id": 1, "name": "hlo_op"}, 2: {"id": 2, "name": "hlo_module"},
                     3: {"id": 3, "name": "program_id"}, 4: {"id": 4, "name": "other"}}
    event_metadata = {
        10: {"id": 10, "name": "fusion.1", "stats": [{"metadata_id": 1, "str_value": "fusion.1"},
                                                     {"metadata_id": 2, "str_value": "jit_f"}]},
        11: {"id": 11, "name": "dot.2"},  # (its hlo stats on the events)
        12: {"id": 12, "name": "memcpy"},  # (no hlo_op: not an instruction)
        13: {"id": 13, "name": "all-reduce.3", "stats": [{"metadata_id": 1, "str_value": "all-reduce.3"},
                                                         {"metadata_id": 2, "str_value": "jit_f"}]}}

    def event(metadata_id, duration_ps, stats=()):
        return {"metadata_id": metadata_id, "offset_ps": 1000, "duration_ps": duration_ps, "stats": list(stats)}
    dot_stats = [{"metadata_id": 1, "str_value": "dot.2"}, {"metadata_id": 2, "str_value": "jit_f"},
                 {"metadata_id": 3, "int64_value": 7}]
    stream = {"id": 1, "name": "Stream #1", "timestamp_ns": 5,
              "events": [event(10, 3_000_000), event(10, 5_000_000), event(11, 2_500_000, dot_stats),
                         event(12, 9_000_000, [{"metadata_id": 4, "int64_value": 1}])]}
    asynchronous = {"id": 2, "name": "Async XLA Ops", "display_name": "Async XLA Ops",
                    "events": [event(13, 40_000_000)]}
    gpu = {"id": 1, "name": "/device:GPU:0", "lines": [stream, asynchronous], "event_metadata": event_metadata,
           "stat_metadata": stat_metadata}
    host = {"id": 2, "name": "/host:CPU", "lines": [{"id": 3, "name": "python", "events": [event(10, 10**9)]}],
            "event_metadata": event_metadata, "stat_metadata": stat_metadata}
    return encode("XSpace", {"planes": [host, gpu], "hostnames": ["vm"]})


def test_gpu_profile_costs_as_jax(tmp_path):
    (tmp_path / "vm.xplane.pb").write_bytes(_gpu_xspace())
    (tmp_path / "vm.trace.json.gz").write_bytes(b"")
    got, want = get_profiled_instructions_proto(tmp_path), jax_profiler.get_profiled_instructions_proto(
        str(tmp_path))
    assert _costs(got) == _costs(want) == {"fusion.1": 4.0, "dot.2": 2.5}
    (tmp_path / "other.xplane.pb").write_bytes(_gpu_xspace())  # (a second host: the durations of both)
    assert _costs(get_profiled_instructions_proto(tmp_path)) == _costs(
        jax_profiler.get_profiled_instructions_proto(str(tmp_path)))


def test_a_cpu_profile_is_empty_as_jax(tmp_path):
    with ember.profiler.trace(str(tmp_path)):
        ember.jit(lambda x: enp.sin(x) @ x)(enp.ones((16, 16))).block_until_ready()
    run = tmp_path / "plugins" / "profile"
    run = run / os.listdir(run)[0]
    assert any("xplane.pb" in name for name in os.listdir(run))
    assert get_profiled_instructions_proto(run) == jax_profiler.get_profiled_instructions_proto(str(run)) == b""
    assert get_profiled_instructions_proto(tmp_path) == b""  # (no xplane file directly inside: nothing read)


def test_errors(tmp_path):
    with pytest.raises(ember.errors.JaxRuntimeError, match="NOT_FOUND: .*missing"):
        get_profiled_instructions_proto(tmp_path / "missing")
    with pytest.raises(Exception, match="NOT_FOUND"):
        jax_profiler.get_profiled_instructions_proto(str(tmp_path / "missing"))
    with pytest.raises(ember.errors.JaxRuntimeError, match="NOT_FOUND: Could not find file under"):
        get_profiled_instructions_proto(tmp_path)
    (tmp_path / "bad.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(ValueError, match="bad.xplane.pb is not a valid XSpace"):
        get_profiled_instructions_proto(tmp_path)
