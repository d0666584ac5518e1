"""The persistent compilation cache (docs/compilation_cache.md): a second process loads what the first compiled;
corrupt, truncated and foreign entries are recompiled with one warning; a cache that cannot be written never fails a
compile; the directory stays within its size limit; several processes share one directory. Each scenario runs in
fresh processes (the cache is for the next process), with min_compile_time 0 so that small programs are stored."""
import os
import threading
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._runtime import compile_cache
from subproc import check_python

PROGRAM = """
    import warnings, numpy as np, ember, ember.numpy as enp
    from ember._runtime import compile_cache
    warnings.simplefilter("always")
    ember.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    step = ember.jit(lambda w, x: enp.tanh(x @ w) .sum() * 2.0 + {k})
    out = float(step(enp.ones((4, 3)), enp.ones((2, 4))))
    grads = ember.grad(lambda w: enp.sum(enp.sin(w) ** 2))(enp.ones(3))
    print("RESULT", out, np.asarray(grads).round(5).tolist())
    print("STATS", compile_cache.stats["hits"], compile_cache.stats["misses"], compile_cache.stats["stores"])
"""


def run(directory, k=0, env=None):
    out = check_python(PROGRAM.format(k=k), env={"EMBER_COMPILATION_CACHE_DIR": str(directory), **(env or {})})
    lines = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("RESULT", "STATS")))
    hits, misses, stores = map(int, lines["STATS"].split())
    return lines["RESULT"], hits, misses, stores


def entries(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(compile_cache.SUFFIX))


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    first, hits, misses, stores = run(tmp_path)
    assert hits == 0 and misses >= 2 and stores == misses  # the jit program, the grad program, eager ops
    assert len(entries(tmp_path)) == stores
    second, hits2, misses2, stores2 = run(tmp_path)
    assert second == first
    assert (hits2, misses2, stores2) == (misses, 0, 0)
    third, *_ = run(tmp_path, k=1)  # another program: a miss, and both kinds of entry live side by side
    assert third != first and len(entries(tmp_path)) > stores


def test_corrupt_truncated_and_foreign_entries_are_recompiled_with_one_warning(tmp_path):
    expected, _, misses, _ = run(tmp_path)
    names = entries(tmp_path)
    with open(tmp_path / names[0], "r+b") as f:  # a flipped byte
        data = bytearray(f.read())
        data[-1] ^= 0xFF
        f.seek(0)
        f.write(data)
    with open(tmp_path / names[1], "r+b") as f:  # truncated
        f.truncate(30)
    for name in names[2:]:  # another program's file (not ours) under the entry's name
        (tmp_path / name).write_bytes(b"PK\x03\x04 not an executable")
    (tmp_path / "notes.txt").write_text("left alone")
    done = check_python(PROGRAM.format(k=0), env={"EMBER_COMPILATION_CACHE_DIR": str(tmp_path)})
    result = next(line for line in done.splitlines() if line.startswith("RESULT"))
    assert result.split(" ", 1)[1] == expected
    hits, misses2, stores = map(int, next(line for line in done.splitlines() if line.startswith("STATS")).split()[1:])
    assert hits == 0 and misses2 == misses and stores == misses  # every entry compiled and stored again
    assert (tmp_path / "notes.txt").read_text() == "left alone"
    again, hits3, misses3, _ = run(tmp_path)  # the rewritten entries are valid
    assert again == expected and (hits3, misses3) == (misses, 0)


def test_warnings_are_given_once_per_kind(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_warned", set())
    (tmp_path / "a.ember-xla").write_bytes(b"garbage")
    (tmp_path / "b.ember-xla").write_bytes(b"garbage too")
    with pytest.warns(RuntimeWarning, match="not a valid entry") as record:
        assert compile_cache._read(str(tmp_path), "a") is None
        assert compile_cache._read(str(tmp_path), "b") is None
    assert len(record) == 1


def test_a_cache_that_cannot_be_written_never_fails_a_compile(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_warned", set())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with ember.config.override(compilation_cache_dir=str(blocker), persistent_cache_min_compile_time_secs=0):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out = ember.jit(lambda x: enp.cos(x) * 3.0 - 0.25)(enp.arange(5.0))
    assert [str(w.message) for w in record if "cannot write" in str(w.message)] and len(record) == 1
    np.testing.assert_allclose(np.asarray(out), np.cos(np.arange(5.0)) * 3.0 - 0.25, rtol=1e-6)


def test_small_or_quick_programs_are_not_stored_by_default(tmp_path):
    x = enp.ones(3)
    before = dict(compile_cache.stats)
    with ember.config.override(compilation_cache_dir=str(tmp_path)):  # min compile time: 1 s (JAX's default)
        ember.jit(lambda x: x * 7.0 + 1.5)(x)
    assert compile_cache.stats["misses"] == before["misses"] + 1 and entries(tmp_path) == []
    with ember.config.override(compilation_cache_dir=str(tmp_path), persistent_cache_min_compile_time_secs=0,
                               persistent_cache_min_entry_size_bytes=1 << 40):
        ember.jit(lambda x: x * 7.0 + 2.5)(x)
    assert compile_cache.stats["misses"] == before["misses"] + 2 and entries(tmp_path) == []


def test_the_directory_is_trimmed_least_recently_used_first(tmp_path):
    directory = str(tmp_path)
    for i, key in enumerate(["old", "middle", "new"]):
        compile_cache._write(directory, key, bytes(1000))
        os.utime(tmp_path / f"{key}.ember-xla", (1000 + i, 1000 + i))
    assert compile_cache._read(directory, "old") is not None  # a hit makes "old" the most recent
    stale = tmp_path / ".tmp-killed-writer"
    stale.write_bytes(b"x")
    os.utime(stale, (1, 1))
    with ember.config.override(compilation_cache_max_size=2500):
        compile_cache._write(directory, "newest", bytes(1000))
    assert entries(tmp_path) == ["newest.ember-xla", "old.ember-xla"] and not stale.exists()


@pytest.mark.slow  # (4.5 s; a second process by default: test_a_second_process_loads_what_the_first_compiled)
def test_processes_sharing_a_directory(tmp_path):
    results = []

    def worker(k):
        results.append(run(tmp_path, k=k % 2)[0])
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len(set(results)) == 2
    for name in entries(tmp_path):  # every entry complete and valid
        data = (tmp_path / name).read_bytes()
        assert compile_cache._read(str(tmp_path), name[:-len(compile_cache.SUFFIX)]) == data[compile_cache._HEADER:]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_the_options_take_jax_names_and_environment_variables(tmp_path):
    assert ember.config.compilation_cache_dir is None  # off by default
    with ember.config.override(jax_compilation_cache_dir=tmp_path):
        assert ember.config.compilation_cache_dir == str(tmp_path)
    for bad in [("compilation_cache_max_size", -2), ("persistent_cache_min_compile_time_secs", -1.0),
                ("compilation_cache_dir", 3)]:
        with pytest.raises(ValueError, match=bad[0]):
            ember.config.update(*bad)
    out = check_python("import ember; print(ember.config.compilation_cache_dir)",
                       env={"JAX_COMPILATION_CACHE_DIR": str(tmp_path)})
    assert out.strip() == str(tmp_path)


SHARDED = """
    import numpy as np, ember
    from ember._runtime import compile_cache
    from ember.sharding import Mesh, NamedSharding, PartitionSpec as P
    ember.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    mesh = Mesh(np.array(ember.devices()[:2]), ("x",))
    split = NamedSharding(mesh, P("x"))
    step = ember.jit(lambda w: (w * 3.0 + 1.0, (w * w).sum()), in_shardings=split)
    w = ember.device_put(np.arange(8, dtype=np.float32), split)
    for _ in range(12):  # (enough calls that the small program also runs as one program per device)
        out, total = step(w)
    print("RESULT", np.asarray(out).tolist(), float(total), out.sharding.spec)
    print("STATS", compile_cache.stats["hits"], compile_cache.stats["misses"], compile_cache.stats["stores"])
"""


def test_a_program_partitioned_over_devices_is_loaded_by_the_next_process(tmp_path):
    """A program XLA's SPMD partitioner splits (and its partitions, compiled one per device when it is small) goes
    through the cache like any other: the second process compiles nothing for it."""
    def run_sharded():
        out = check_python(SHARDED, env={"EMBER_COMPILATION_CACHE_DIR": str(tmp_path), "EMBER_NUM_CPU_DEVICES": "2"})
        lines = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("RESULT", "STATS")))
        return lines["RESULT"], tuple(map(int, lines["STATS"].split()))
    first, (hits, misses, stores) = run_sharded()
    assert hits == 0 and misses >= 1 and stores == misses
    second, (hits2, misses2, stores2) = run_sharded()
    assert second == first and (hits2, misses2, stores2) == (misses, 0, 0)


def test_an_spmd_executable_loads_only_onto_its_own_devices():
    from ember._runtime.pjrt import PjrtError
    from ember.sharding import Mesh, NamedSharding, PartitionSpec as P
    devices = ember.devices()[:2]
    if len(devices) < 2:
        pytest.skip("needs two devices")
    split = NamedSharding(Mesh(np.array(devices), ("x",)), P("x"))
    lowered = ember.jit(lambda w: w * 2.0, in_shardings=split).lower(np.ones(8, np.float32))
    client = devices[0].client
    text = lowered.as_text()
    executable = client.compile_spmd(text, list(devices), [True])
    payload = executable.serialize()
    assert client.deserialize(payload, text, list(devices)).devices == list(devices)
    with pytest.raises(PjrtError, match="cannot run on devices"):
        client.deserialize(payload, text, [devices[0]])
