"""ember.checkpoints: pytrees of arrays (dicts, lists, Modules, optimizer states, typed keys) round-trip through
safetensors files in every dtype, the key layout is the documented one, and a mismatched load names the leaf."""
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
