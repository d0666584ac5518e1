"""Issue #44, trust boundaries: each fault reproduced, with the safe outcome asserted.

- a daemon thread blocked in a host callback does not hold the process's exit beyond callbacks.EXIT_WAIT_S;
- jitted updates of Refs from several threads are atomic per Ref (no lost update, no DeletedArrayError, no
  deadlock when calls take several Refs in different orders);
- profiler traces started in the same second each get their own run, written under a temporary name first;
- a checkpoint's header is checked field by field before any data is read (errors name the file and the tensor),
  and another user's stale temporary file never makes `save` fail.

The scenarios that could hang run in their own process, with a hang guard far above the expected time."""
import gzip
import json
import os
import re
import stat
import struct
import time

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import checkpoints

from subproc import run_python

# ---------------------------------------------------------------------------------------------------------------
# 1. Host callbacks: the exit waits for a blocked callback at most EXIT_WAIT_S
_BLOCKED_AT_EXIT = """
import sys, threading, time, _thread
import numpy as np
import ember, ember.numpy as enp
from ember import lax
from ember.experimental import io_callback
import ember._runtime.callbacks as runtime_callbacks
runtime_callbacks.EXIT_WAIT_S = 1.0  # (the documented deadline, shortened for the test)
entered = threading.Event()

def blocker(x):
    entered.set()
    if sys.argv[1] == "main":  # Ctrl-C while the main thread waits for the program
        threading.Timer(0.2, _thread.interrupt_main).start()
    time.sleep(3600)
    return x

spec = ember.ShapeDtypeStruct((), np.float32)
if sys.argv[1] in ("io_callback", "main"):
    f = ember.jit(lambda x: io_callback(blocker, spec, x))
    x = enp.float32(1.0)
else:  # a pure_callback in a loop after a matmul: XLA may run it on one of its own threads
    f = ember.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: ember.pure_callback(
        blocker, spec, c + (x @ x).sum(), vmap_method="sequential"), enp.float32(0)))
    x = enp.ones((256, 256), np.float32)
if sys.argv[1] == "main":
    try:
        f(x)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
else:
    threading.Thread(target=lambda: f(x), daemon=True).start()
    entered.wait()
print("main returns", flush=True)
"""


@pytest.mark.parametrize("scenario", [pytest.param("io_callback", marks=pytest.mark.slow),
                                      pytest.param("pure_callback", marks=pytest.mark.slow), "main"])
def test_a_callback_blocked_forever_does_not_hold_the_exit(scenario):
    # (the hang guard is the check: the deadline, 1 s here, plus generous slack; before, the exit waited forever)
    done = run_python(_BLOCKED_AT_EXIT.replace("sys.argv[1]", repr(scenario)), timeout=150)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("main returns\n"), done.stdout
    assert "1 program(s) still blocked in a host callback after 1 s" in done.stderr, done.stderr


def test_a_callback_that_ends_in_time_is_waited_for():
    out = run_python("""
        import threading, time
        import numpy as np
        import ember, ember.numpy as enp
        from ember.experimental import io_callback
        entered = threading.Event()
        def slow(x):
            entered.set()
            time.sleep(0.3)
            print("callback done", flush=True)
            return x
        f = ember.jit(lambda x: io_callback(slow, ember.ShapeDtypeStruct((), np.float32), x))
        threading.Thread(target=lambda: f(enp.float32(1.0)), daemon=True).start()
        entered.wait()
        print("main returns", flush=True)
    """, timeout=150)
    assert out.returncode == 0 and out.stdout == "main returns\ncallback done\n", (out.stdout, out.stderr)
    assert "blocked in a host callback" not in out.stderr


# ---------------------------------------------------------------------------------------------------------------
# 2. Refs: one jitted call at a time per Ref
_REF_THREADS = """
import threading
import ember, ember.numpy as enp
errors, seen = [], []
ref = ember.new_ref(enp.zeros((), enp.int32))

@ember.jit
def inc(r):
    r[...] += 1

inc(ref)

def work(fn, n):
    try:
        for _ in range(n):
            fn()
    except Exception as err:
        errors.append(repr(err))

def read():
    seen.append(int(ref[...]))  # an eager read, between the jitted updates

threads = [threading.Thread(target=work, args=(lambda: inc(ref), 1000)) for _ in range(4)]
threads.append(threading.Thread(target=work, args=(read, 300)))
# several Refs, taken in opposite orders by two threads, one of them closed over
a, b = ember.new_ref(enp.zeros((), enp.int32)), ember.new_ref(enp.zeros((), enp.int32))

@ember.jit
def both(x, y):
    x[...] += 1
    y[...] += 2

@ember.jit
def closed(y):
    a[...] += 1
    y[...] += 2

threads += [threading.Thread(target=work, args=(lambda: both(a, b), 300)),
            threading.Thread(target=work, args=(lambda: both(b, a), 300)),
            threading.Thread(target=work, args=(lambda: closed(b), 300))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(int(ref[...]), int(a[...]), int(b[...]), errors, seen == sorted(seen))
"""


def test_jitted_ref_updates_from_several_threads_are_atomic():
    out = run_python(_REF_THREADS, timeout=240)
    assert out.returncode == 0, out.stderr
    # a: 300 (both(a, b)) + 600 (both(b, a)) + 300 (closed); b: 600 + 300 + 600
    assert out.stdout.split("\n")[0] == "4001 1200 1500 [] True", out.stdout


# ---------------------------------------------------------------------------------------------------------------
# 3. Profiler: a run per trace, written atomically
_STAMP = "2026_01_02_03_04_05"


def _runs(log_dir):
    return sorted(p.name for p in (log_dir / "plugins" / "profile").iterdir())


def test_traces_in_one_second_each_get_their_own_run(tmp_path, monkeypatch):
    monkeypatch.setattr(ember.profiler.time, "strftime", lambda fmt: _STAMP)  # (every trace in the same second)
    earlier = tmp_path / "plugins" / "profile" / _STAMP
    earlier.mkdir(parents=True)  # another process's run of this second
    (earlier / "other.trace.json.gz").write_bytes(b"theirs")
    paths = []
    for i in range(3):
        with ember.profiler.trace(tmp_path):
            with ember.profiler.TraceAnnotation(f"trace {i}"):
                pass
        paths.append(max((p for p in (tmp_path / "plugins" / "profile").glob("*/*.trace.json.gz")),
                         key=lambda p: p.stat().st_mtime_ns))
    assert _runs(tmp_path) == [_STAMP, f"{_STAMP}_1", f"{_STAMP}_2", f"{_STAMP}_3"]
    assert (earlier / "other.trace.json.gz").read_bytes() == b"theirs"
    for i in range(3):
        files = sorted((tmp_path / "plugins" / "profile" / f"{_STAMP}_{i + 1}").iterdir())  # (no temporary left)
        (path,) = [f for f in files if re.fullmatch(r".+\.trace\.json\.gz", f.name)]
        assert all(f == path or re.fullmatch(r".+\.xplane\.pb", f.name) for f in files), files
        with gzip.open(path, "rt") as f:
            assert any(e["name"] == f"trace {i}" for e in json.load(f)["traceEvents"])


def test_a_trace_is_never_seen_half_written(tmp_path, monkeypatch):
    def fail(obj, f):
        f.write('{"displayTimeUnit": "ms", "traceEv')
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ember.profiler.json, "dump", fail)
    ember.profiler.start_trace(tmp_path)
    with pytest.raises(OSError, match="No space left"):
        ember.profiler.stop_trace()
    (run,) = _runs(tmp_path)
    assert re.fullmatch(r"\d{4}(_\d\d){5}(_\d+)?", run)  # JAX's run name
    assert list((tmp_path / "plugins" / "profile" / run).iterdir()) == []  # no partial trace, no temporary


# ---------------------------------------------------------------------------------------------------------------
# 4. Checkpoints: the header checked before any data is read; stale temporaries never block a save
def _write(path, header, data=b"", length=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


def _w(**changes):
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    entry.update(changes)
    return {"w": entry}


BAD_HEADERS = [
    # (name, header, data, words the error must contain)
    ("65 dimensions", _w(shape=[1] * 65, data_offsets=[0, 4]), 4, "tensor 'w' has 65 dimensions"),
    ("unknown dtype code", _w(dtype="Q32"), 8, "tensor 'w' has the dtype code 'Q32'"),
    ("a dtype ember does not read", _w(dtype="F8_E4M3", data_offsets=[0, 2]), 2, "dtype code 'F8_E4M3'"),
    ("negative dimension", _w(shape=[-2]), 8, "tensor 'w' has the shape [-2]"),
    ("boolean dimension", _w(shape=[True, 2]), 8, "tensor 'w' has the shape [True, 2]"),
    ("float offsets", _w(data_offsets=[0.0, 8]), 8, "tensor 'w' has the data_offsets [0.0, 8]"),
    ("offsets beyond the data", _w(data_offsets=[0, 16]), 8, "outside the file's 8 bytes of data"),
    ("reversed offsets", _w(data_offsets=[8, 0]), 8, "data_offsets [8, 0], outside"),
    ("shape and span disagree", _w(shape=[3]), 8, "tensor 'w' is F32[3], 12 bytes, but its data_offsets [0, 8]"),
    ("a huge shape", _w(shape=[2**62, 2**62]), 8, "but its data_offsets"),
    ("overlapping tensors", {**_w(), "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, "overlaps"),
    ("a gap", _w(data_offsets=[4, 12]), 12, "leaves a gap"),
    ("data after the tensors", _w(), 12, "cover 8 bytes of data, but the file has 12"),
    ("missing key", {"w": {"dtype": "F32", "shape": [2]}}, 8, "an entry is an object of dtype, shape"),
    ("extra key", _w(extra=1), 8, "an entry is an object of dtype, shape"),
    ("entry not an object", {"w": [1, 2]}, 8, "tensor 'w': an entry is an object"),
    ("metadata not str to str", {**_w(), "__metadata__": {"epoch": 3}}, 8, "does not map str to str"),
    ("a name twice", b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "w": {"dtype": "F32", '
     b'"shape": [2], "data_offsets": [0, 8]}}', 8, "names 'w' twice"),
    ("header not an object", [1, 2], 0, "a JSON list, not an object"),
    ("deeply nested", b"[" * 100000 + b"]" * 100000, 0, "not JSON"),
    ("not UTF-8", b'{"\xff": 1}', 0, "not JSON"),
]


@pytest.mark.parametrize("name,header,data,words", BAD_HEADERS, ids=[c[0] for c in BAD_HEADERS])
def test_a_bad_header_is_refused_naming_the_file(tmp_path, name, header, data, words):
    path = _write(tmp_path / "bad.safetensors", header, b"\0" * data)
    for function in (checkpoints.load, checkpoints.metadata):
        with pytest.raises(checkpoints.CheckpointError) as info:
            function(path)
        text = str(info.value)
        assert f"ember.checkpoints.{function.__name__}: {str(path)!r} is not a readable checkpoint" in text, text
        assert words in text, text


def test_a_header_length_beyond_the_limit_is_refused_before_reading(tmp_path):
    path = _write(tmp_path / "huge.safetensors", _w(), b"\0" * 8, length=2**63)
    with pytest.raises(checkpoints.CheckpointError, match="a header of 9223372036854775808 bytes"):
        checkpoints.load(path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    out = run_python(f"""
        from ember import checkpoints
        for function in (checkpoints.load, checkpoints.metadata):
            try:
                function({str(fifo)!r})
            except checkpoints.CheckpointError as err:
                print("not a regular file" in str(err))
    """, timeout=120)
    assert out.stdout == "True\nTrue\n", (out.stdout, out.stderr)


def test_every_dtype_still_round_trips_through_the_checked_reader(tmp_path):
    tree = {name: np.arange(6).reshape(2, 3).astype(name) for name in
            ("float16", "float32", "int8", "int16", "int32", "uint8", "uint16", "uint32", "bool")}
    tree.update({"bf16": np.arange(3).astype(ml_dtypes.bfloat16), "scalar": np.float32(2.5),
                 "empty": np.zeros((0, 3), np.float32), "empty2": np.zeros(0, np.int8)})
    path = tmp_path / "all.safetensors"
    checkpoints.save(path, tree)
    loaded = checkpoints.load(path)
    assert set(loaded) == set(tree)
    for name, value in tree.items():
        np.testing.assert_array_equal(np.asarray(loaded[name]), value)
        assert np.asarray(loaded[name]).dtype == np.asarray(value).dtype


def test_files_of_safetensors_own_writer_are_read(tmp_path):
    from safetensors.numpy import save_file
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(3, dtype=np.int64),
              "c": np.array([1.5], ml_dtypes.bfloat16), "d": np.zeros((0,), np.uint8)}
    for meta in (None, {"epoch": "3"}):
        save_file(arrays, str(tmp_path / "st.safetensors"), metadata=meta)
        loaded = checkpoints.load(tmp_path / "st.safetensors")
        for name, value in arrays.items():
            np.testing.assert_array_equal(np.asarray(loaded[name]).astype(value.dtype), value)
        assert checkpoints.metadata(tmp_path / "st.safetensors") == (meta or {})


def _stale(directory, uid=None):
    """A temporary file of a save whose writer died more than STALE_AFTER_S ago."""
    path = directory / f"{checkpoints.TEMP_PREFIX}999999999@{os.uname().nodename}-{'0' * 16}.tmp"
    path.write_bytes(b"partial")
    old = time.time() - checkpoints.STALE_AFTER_S - 60
    os.utime(path, (old, old))
    if uid is not None:
        os.chown(path, uid, -1)
    return path


def test_a_stale_temporary_that_cannot_be_removed_does_not_block_save(tmp_path, monkeypatch):
    stale = _stale(tmp_path)
    remove = os.remove

    def sticky_remove(path, *args, **kwargs):  # (a sticky shared directory: removing it is not allowed)
        if os.fspath(path) == str(stale):
            raise PermissionError(1, "Operation not permitted", os.fspath(path))
        return remove(path, *args, **kwargs)
    monkeypatch.setattr(checkpoints.os, "remove", sticky_remove)
    checkpoints.save(tmp_path / "c.safetensors", {"w": np.ones(2, np.float32)})
    np.testing.assert_array_equal(np.asarray(checkpoints.load(tmp_path / "c.safetensors")["w"]), np.ones(2))
    assert stale.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_another_users_stale_temporary_is_left_alone(tmp_path):
    theirs, ours = _stale(tmp_path, uid=12345), tmp_path / "ours"
    ours.mkdir()
    mine = _stale(ours)
    checkpoints.save(tmp_path / "c.safetensors", {"w": np.ones(2, np.float32)})
    checkpoints.save(ours / "c.safetensors", {"w": np.ones(2, np.float32)})
    assert theirs.exists() and os.stat(theirs).st_uid == 12345
    assert not mine.exists()  # (this user's dead writer's file is still cleaned up)


def test_a_taken_temporary_name_does_not_block_save(tmp_path, monkeypatch):
    taken = checkpoints._temporary_name()
    (tmp_path / taken).write_bytes(b"someone else's")
    os.chmod(tmp_path / taken, stat.S_IRUSR)
    names = iter([taken])
    fresh = checkpoints._temporary_name
    monkeypatch.setattr(checkpoints, "_temporary_name", lambda: next(names, None) or fresh())
    checkpoints.save(tmp_path / "c.safetensors", {"w": enp.ones(2)})
    assert (tmp_path / taken).read_bytes() == b"someone else's"
    np.testing.assert_array_equal(np.asarray(checkpoints.load(tmp_path / "c.safetensors")["w"]), np.ones(2))
