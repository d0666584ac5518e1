"""ember.checkpoints: pytrees of arrays (dicts, lists, Modules, optimizer states, typed keys) round-trip through
safetensors files in every dtype, the key layout is the documented one, and a mismatched load names the leaf.
Unreadable files, directories and failed writes raise errors naming the path; files honour the umask; a failed or
killed save keeps the old file, and its temporary file is removed (at the latest by the next save)."""
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

import ember
import ember.numpy as enp
from ember import checkpoints, nn, optim, random


def _tree():
    k1, k2 = random.split(random.key(0))
    model = nn.Sequential(nn.Linear(3, 4, key=k1), nn.relu, nn.Linear(4, 2, key=k2))
    opt = optim.adam(1e-3)
    return {"model": model, "opt_state": opt.init(model), "key": random.key(7), "step": enp.asarray(12),
            "extras": [enp.asarray(np.array([1.5, -2], ml_dtypes.bfloat16)), enp.asarray(np.float16([3.0])),
                       enp.asarray(np.array([1, 2], np.int8)), enp.asarray(np.array([True, False]))]}


def _assert_same(a, b):
    la, ta = ember.tree.flatten(a)
    lb, tb = ember.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        if isinstance(x, random.KeyArray):  # (a leaf of ember.tree, as JAX's typed keys: compare its bits)
            assert isinstance(y, random.KeyArray)
            x, y = random.key_data(x), random.key_data(y)
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_keeps_structure_dtypes_and_values(tmp_path):
    tree = _tree()
    path = tmp_path / "ckpt.safetensors"
    checkpoints.save(path, tree, metadata={"epoch": "3"})
    restored = checkpoints.load(path, target=tree)
    _assert_same(restored, tree)
    assert isinstance(restored["model"], nn.Sequential) and isinstance(restored["key"], random.KeyArray)
    assert checkpoints.metadata(path) == {"format": checkpoints.FORMAT, "epoch": "3"}
    # the restored model computes what the saved one did
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(restored["model"](x)), np.asarray(tree["model"](x)))


def test_key_layout_and_other_readers(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    checkpoints.save(path, _tree())
    raw = load_file(str(path))  # safetensors' own numpy reader
    assert {"model/layers/0/weight", "model/layers/0/bias", "model/layers/2/weight", "step", "key/0",
            "opt_state/0/count", "opt_state/0/mu/layers/0/weight", "extras/0"} <= set(raw)
    assert raw["extras/0"].dtype == ml_dtypes.bfloat16 and raw["key/0"].dtype == np.uint32
    flat = checkpoints.load(path)
    assert set(flat) == set(raw) and isinstance(flat["step"], ember.Array)


def test_mismatched_loads_name_the_leaf(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    tree = {"w": enp.zeros((2, 3), "float32"), "b": enp.zeros(3, "float32")}
    checkpoints.save(path, tree)
    with pytest.raises(ValueError, match=r"leaf 'w' is float32\[2, 3\] in the file but float32\[3, 2\] in target"):
        checkpoints.load(path, {"w": enp.zeros((3, 2), "float32"), "b": enp.zeros(3, "float32")})
    with pytest.raises(ValueError, match=r"leaf 'b' is float32\[3\] in the file but float16\[3\] in target"):
        checkpoints.load(path, {"w": enp.zeros((2, 3), "float32"), "b": enp.zeros(3, "float16")})
    with pytest.raises(ValueError, match=r"missing from the file \['c'\], in the file but not in target \['b'\]"):
        checkpoints.load(path, {"w": enp.zeros((2, 3), "float32"), "c": enp.zeros(3, "float32")})
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        checkpoints.load(tmp_path / "nope.safetensors", tree)
    with pytest.raises(ValueError, match="contains '/'"):
        checkpoints.save(path, {"a/b": enp.zeros(1)})
    with pytest.raises(TypeError, match="metadata must map str to str"):
        checkpoints.save(path, tree, metadata={"epoch": 3})
    # a failed save leaves the previous checkpoint in place
    _assert_same(checkpoints.load(path, tree), tree)


def test_resume_training_from_a_checkpoint(tmp_path):
    """Train 10 steps straight, or 5 + save + load + 5: the same parameters."""
    model = nn.Linear(3, 1, key=random.key(1))
    opt = optim.sgd(0.1, momentum=0.9)
    x = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    y = x.sum(1, keepdims=True)

    @ember.jit
    def step(model, state):
        grads = ember.grad(lambda m: enp.mean((m(x) - y) ** 2))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state

    straight = (model, opt.init(model))
    for _ in range(10):
        straight = step(*straight)
    resumed = (model, opt.init(model))
    for _ in range(5):
        resumed = step(*resumed)
    checkpoints.save(tmp_path / "c.safetensors", resumed)
    resumed = checkpoints.load(tmp_path / "c.safetensors", target=(model, opt.init(model)))
    for _ in range(5):
        resumed = step(*resumed)
    _assert_same(resumed, straight)


def test_every_dtype_is_read_back_by_safetensors(tmp_path):
    """ember writes the safetensors format itself: safetensors' own reader is the oracle."""
    rng = np.random.default_rng(0)
    tree = {name: rng.normal(size=(2, 3)).astype(name) for name in
            ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64")}
    tree.update({"bf16": rng.normal(size=5).astype(ml_dtypes.bfloat16), "bool": rng.random(4) < 0.5,
                 "scalar": np.float32(2.5), "empty": np.zeros((0, 3), np.float32),
                 "big_endian": np.arange(6, dtype=">i4").reshape(2, 3)})
    path = tmp_path / "all.safetensors"
    checkpoints.save(path, tree, metadata={"note": "x"})
    raw = load_file(str(path))
    assert set(raw) == set(tree)
    for name, value in tree.items():
        assert raw[name].dtype == np.asarray(value).dtype.newbyteorder("=") and raw[name].shape == np.shape(value)
        np.testing.assert_array_equal(raw[name], value)
    assert checkpoints.metadata(path) == {"format": checkpoints.FORMAT, "note": "x"}


def test_unreadable_files_raise_checkpoint_errors_naming_the_path(tmp_path):
    good = tmp_path / "good.safetensors"
    checkpoints.save(good, {"w": np.arange(64, dtype=np.float32)})
    data = good.read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")
    broken = {"empty": b"", "length_only": data[:8], "mid_header": data[:header // 2],
              "mid_data": data[:header + 100], "last_byte_missing": data[:-1], "not_safetensors": b"PK\x03\x04" * 40}
    for name, content in broken.items():
        path = tmp_path / f"{name}.safetensors"
        path.write_bytes(content)
        for function in (checkpoints.load, checkpoints.metadata):
            with pytest.raises(checkpoints.CheckpointError, match=rf"checkpoints.{function.__name__}: .*{name}.*"
                               "not a readable checkpoint") as info:
                function(path)
            assert isinstance(info.value, ValueError), name
    with pytest.raises(checkpoints.CheckpointError, match="not a readable checkpoint"):
        checkpoints.load(tmp_path / "mid_data.safetensors", target={"w": enp.zeros(64)})


def test_a_directory_as_the_path_is_an_os_error_naming_it(tmp_path):
    for function, args in ((checkpoints.load, ()), (checkpoints.metadata, ()), (checkpoints.save, ({"w": 1.0},))):
        with pytest.raises(IsADirectoryError, match=rf"checkpoints.{function.__name__}: .*directory") as info:
            function(tmp_path, *args)
        assert info.value.filename == str(tmp_path)
    with pytest.raises(FileNotFoundError, match="checkpoints.save: cannot create a temporary file") as info:
        checkpoints.save(tmp_path / "missing" / "c.safetensors", {"w": 1.0})
    assert info.value.filename == str(tmp_path / "missing" / "c.safetensors")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_are_created_with_the_umask_like_numpy_save(tmp_path, umask):
    old = os.umask(umask)
    try:
        checkpoints.save(tmp_path / "c.safetensors", {"w": np.ones(3)})
        np.save(tmp_path / "n.npy", np.ones(3))
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / "c.safetensors").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "n.npy").st_mode) == 0o666 & ~umask


_FAILING_SAVES = """
import json, os, resource, signal, sys
import numpy as np
from ember import checkpoints
directory = sys.argv[1]
path = os.path.join(directory, "c.safetensors")
checkpoints.save(path, {"w": np.zeros(4, np.float32)})
# a write that fails midway: the file size limit (SIGXFSZ ignored, so write() fails with EFBIG)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
try:
    checkpoints.save(path, {"w": np.ones(1 << 20, np.float32)})
except OSError as err:
    print(json.dumps({"type": type(err).__name__, "errno": err.errno, "filename": err.filename, "text": str(err),
                      "files": sorted(os.listdir(directory))}), flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
# a save killed (SIGKILL) after writing its temporary file, before renaming it into place
write_file = checkpoints._write_file
def write_and_die(*args):
    write_file(*args)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoints._write_file = write_and_die
checkpoints.save(path, {"w": np.ones(1 << 20, np.float32)})
"""


def test_failed_and_killed_saves_keep_the_old_file_and_leave_no_temporary_behind(tmp_path):
    done = subprocess.run([sys.executable, "-c", _FAILING_SAVES, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    limited = json.loads(done.stdout)
    path = str(tmp_path / "c.safetensors")
    assert limited["errno"] == errno.EFBIG and limited["filename"] == path, limited
    assert "checkpoints.save: writing the checkpoint" in limited["text"] and limited["files"] == ["c.safetensors"]
    (killed,) = [p for p in tmp_path.iterdir() if p.name.startswith(".ember-checkpoint-")]
    assert killed.stat().st_size > 4 << 20
    np.testing.assert_array_equal(np.asarray(checkpoints.load(path)["w"]), np.zeros(4))  # the old file is intact
    # the next save in the directory removes the dead writer's file and keeps those of live or unknown writers
    live = tmp_path / checkpoints._temporary_name()  # this process's: alive
    unknown_recent, unknown_old = tmp_path / ".ember-checkpoint-x1", tmp_path / ".ember-checkpoint-x2"
    for p in (live, unknown_recent, unknown_old):
        p.write_bytes(b"partial")
    old = time.time() - checkpoints.STALE_AFTER_S - 60
    os.utime(unknown_old, (old, old))
    checkpoints.save(tmp_path / "other.safetensors", {"w": np.ones(2)})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["c.safetensors", "other.safetensors", live.name, unknown_recent.name])
