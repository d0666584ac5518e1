"""ember.experimental.serialize_executable against jax.experimental.serialize_executable: the same programs
serialized and loaded by both give the same values and pytree structures; a loaded program never compiles (on one
device or partitioned over two), checks its arguments as the original does, and loads from a file in another
process; a truncated, corrupt, foreign or mismatched payload is a ValueError naming deserialize_and_load."""
import hashlib
import json
import os
import sys

import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import serialize_executable as jax_se

import ember
import ember.numpy as jnp
from ember.experimental import serialize_executable as se
from ember.sharding import Mesh, NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.dirname(__file__))
from reliability.subproc import check_python  # noqa: E402

WEIGHTS = np.array([0.5, -1.0, 2.0], np.float32)  # (closed over: a constant of the programs)


def model(np_, params, x, *, scale, mode):
    """A function of pytrees with a closed-over constant, a keyword argument and a static one."""
    h = np_.tanh(x @ params["w"] + params["b"]) * np_.asarray(WEIGHTS)
    out = {"y": h * scale, "stats": (h.sum(), h.max(axis=0))}
    return out if mode == "full" else out["y"]


def args_of(np_):
    rng = np.random.default_rng(0)
    params = {"w": np_.asarray(rng.normal(size=(4, 3)).astype(np.float32)),
              "b": np_.asarray(rng.normal(size=(3,)).astype(np.float32))}
    return params, np_.asarray(rng.normal(size=(2, 4)).astype(np.float32))


def compiled_pair(mode="full"):
    """(ember's Compiled, JAX's) of model, static mode."""
    eparams, ex = args_of(jnp)
    jparams, jx = args_of(jjnp)
    ecomp = ember.jit(lambda p, x, *, scale, mode: model(jnp, p, x, scale=scale, mode=mode),
                      static_argnames="mode").lower(eparams, ex, scale=np.float32(2.0), mode=mode).compile()
    jcomp = jax.jit(lambda p, x, *, scale, mode: model(jjnp, p, x, scale=scale, mode=mode),
                    static_argnames="mode").lower(jparams, jx, scale=np.float32(2.0), mode=mode).compile()
    return ecomp, jcomp


def jax_loaded(jcomp, devices=1):
    """JAX's round trip of jcomp (its execution_devices given: by default JAX loads onto all of its 4)."""
    payload, in_tree, out_tree = jax_se.serialize(jcomp)
    return jax_se.deserialize_and_load(payload, in_tree, out_tree, execution_devices=jax.devices()[:devices])


def _no_compiles(monkeypatch):
    """Any compile from here on fails the test: a loaded program runs its executable as loaded."""
    def refuse(*args, **kwargs):
        raise AssertionError("a loaded executable was compiled again")
    monkeypatch.setattr("ember._runtime.compiler.compile_with_cache", refuse)
    monkeypatch.setattr("ember._runtime.spmd.compile_spmd_with_cache", refuse)


@pytest.mark.parametrize("mode", ["full", "y"])
def test_round_trip_matches_jax(mode, monkeypatch):
    ecomp, jcomp = compiled_pair(mode)
    payload, in_tree, out_tree = se.serialize(ecomp)
    jpayload, jin_tree, jout_tree = jax_se.serialize(jcomp)
    assert isinstance(payload, bytes)
    assert repr(in_tree) == repr(jin_tree) and repr(out_tree) == repr(jout_tree)  # ((args), {kwargs}); results
    _no_compiles(monkeypatch)
    loaded = se.deserialize_and_load(payload, in_tree, out_tree)
    jloaded = jax_se.deserialize_and_load(jpayload, jin_tree, jout_tree, execution_devices=jax.devices()[:1])
    eparams, ex = args_of(jnp)
    jparams, jx = args_of(jjnp)
    got = loaded(eparams, ex, scale=np.float32(3.0))
    want = jloaded(jparams, jx, scale=np.float32(3.0))
    assert repr(ember.tree_util.tree_structure(got)) == repr(jax.tree_util.tree_structure(want))
    for g, w, o in zip(ember.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                       ember.tree_util.tree_leaves(ecomp(eparams, ex, scale=np.float32(3.0)))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(o))  # (the same executable: bit for bit)
    assert loaded.as_text() == ecomp.as_text()
    assert loaded.cost_analysis()["flops"] == ecomp.cost_analysis()["flops"]
    assert loaded.args_info == ecomp.args_info and loaded.in_tree == ecomp.in_tree
    assert loaded.out_info == ecomp.out_info


def test_loaded_checks_its_arguments_as_the_original():
    ecomp, _ = compiled_pair()
    loaded = se.deserialize_and_load(*se.serialize(ecomp))
    eparams, ex = args_of(jnp)
    cases = [((eparams, ex[:1]), {"scale": np.float32(1)}),  # shape
             ((eparams, ex.astype(np.int32)), {"scale": np.float32(1)}),  # dtype
             ((eparams, ex), {}),  # a keyword argument left out
             ((eparams,), {"scale": np.float32(1)})]  # an argument left out
    for args, kwargs in cases:
        with pytest.raises(TypeError) as original:
            ecomp(*args, **kwargs)
        with pytest.raises(TypeError) as restored:
            loaded(*args, **kwargs)
        assert str(restored.value) == str(original.value)


def test_donated_arguments_are_given_up_as_by_the_original():
    def f(x, y):
        return x * 2 + y
    x = np.arange(6, dtype=np.float32)
    ecomp = ember.jit(f, donate_argnums=0).lower(x, x).compile()
    jcomp = jax.jit(f, donate_argnums=0).lower(x, x).compile()
    loaded = se.deserialize_and_load(*se.serialize(ecomp))
    jloaded = jax_loaded(jcomp)
    assert [i.donated for i in loaded.args_info[0]] == [i.donated for i in jloaded.args_info[0]] == [True, False]
    a, b = jnp.asarray(x), jnp.asarray(x)
    out = loaded(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jloaded(jjnp.asarray(x), jjnp.asarray(x))))
    assert a.is_deleted() and not b.is_deleted()


def test_partitioned_over_two_devices(monkeypatch):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    def f(a, b):
        return {"sum": (a * 2 + b).sum(0), "prod": a * b}
    emesh = Mesh(np.array(ember.devices()[:2]), ("x",))
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    es, js = NamedSharding(emesh, P("x")), jax.sharding.NamedSharding(jmesh, jax.sharding.PartitionSpec("x"))
    ecomp = ember.jit(f, in_shardings=(es, es)).lower(x, x).compile()
    jcomp = jax.jit(f, in_shardings=(js, js)).lower(x, x).compile()
    payload, in_tree, out_tree = se.serialize(ecomp)
    jloaded = jax_loaded(jcomp, 2)
    _no_compiles(monkeypatch)
    loaded = se.deserialize_and_load(payload, in_tree, out_tree)
    want = jloaded(x, x)
    for args in [(x, x), (ember.device_put(x, es), ember.device_put(x, es))]:
        got = loaded(*args)
        for k in want:
            np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]))
    assert got["prod"].sharding == es
    assert loaded.input_shardings == ecomp.input_shardings
    assert loaded.as_text() == ecomp.as_text()


_CHILD = """
import json, sys
import numpy as np
import ember
from ember.experimental import serialize_executable as se
blob = open(sys.argv[1] if len(sys.argv) > 1 else {path!r}, 'rb').read()
in_tree = ember.tree_util.tree_structure((({{'b': 0, 'w': 0}}, 0), {{'scale': 0}}))
out_tree = ember.tree_util.tree_structure({{'stats': (0, 0), 'y': 0}})
loaded = se.deserialize_and_load(blob, in_tree, out_tree)
rng = np.random.default_rng(0)
params = {{'w': rng.normal(size=(4, 3)).astype(np.float32), 'b': rng.normal(size=(3,)).astype(np.float32)}}
x = rng.normal(size=(2, 4)).astype(np.float32)
out = loaded(params, x, scale=np.float32(3.0))
print("RESULT", json.dumps(ember.tree_util.tree_map(lambda v: np.asarray(v).tolist(), out)))
"""


def test_through_a_file_in_another_process(tmp_path):
    ecomp, jcomp = compiled_pair()
    path = tmp_path / "model.ember-executable"
    payload, in_tree, out_tree = se.serialize(ecomp)
    path.write_bytes(payload)
    out = check_python(_CHILD.format(path=str(path)), env={"EMBER_NUM_CPU_DEVICES": str(ember.device_count())})
    got = json.loads(out.split("RESULT", 1)[1])
    want = jax_loaded(jcomp)(*args_of(jjnp), scale=np.float32(3.0))
    assert got.keys() == want.keys() and len(got["stats"]) == len(want["stats"])
    for g, w in [(got["y"], want["y"]), *zip(got["stats"], want["stats"])]:
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w), rtol=1e-5, atol=1e-6)


def _resealed(payload, edit):
    """payload with its description edited by edit(dict) (or replaced by edit's bytes) and a valid digest (a
    foreign, not a damaged, one)."""
    head = len(se.MAGIC) + 1
    lengths = [int.from_bytes(payload[head + 8 * i:head + 8 * i + 8], "little") for i in range(3)]
    body = payload[head + 24 + 32:]
    if isinstance(edit, bytes):
        description = edit
    else:
        meta = json.loads(body[:lengths[0]])
        edit(meta)
        description = json.dumps(meta).encode()
    sections = [description, body[lengths[0]:lengths[0] + lengths[1]], body[lengths[0] + lengths[1]:]]
    new_head = se.MAGIC + bytes([se.FORMAT]) + b"".join(len(s).to_bytes(8, "little") for s in sections)
    digest = hashlib.sha256(new_head + b"".join(sections)).digest()
    return new_head + digest + b"".join(sections)


def test_damaged_foreign_and_mismatched_payloads_are_refused():
    ecomp, _ = compiled_pair()
    payload, in_tree, out_tree = se.serialize(ecomp)
    flipped = bytearray(payload)
    flipped[len(payload) // 2] ^= 0x40

    def shorter_consts(meta):
        meta["const_avals"][0][0] = [2]
    cases = {
        "truncated": [payload[:n] for n in (5, len(se.MAGIC) + 3, len(payload) // 2, len(payload) - 1)],
        "longer than its header": [payload + b"\0"],
        "corrupt": [bytes(flipped)],
        "not a serialized ember executable": [b"\x80\x04pickle", b"ember-exported\n{}"],
        "format 9": [payload[:len(se.MAGIC)] + b"\x09" + payload[len(se.MAGIC) + 1:]],
        "made by ember '0.0.0-other'": [_resealed(payload, lambda m: m.update(ember="0.0.0-other"))],
        "another PJRT plugin": [_resealed(payload, lambda m: m.update(plugin="/elsewhere/pjrt.so|0|1:2|cpu"))],
        "had 7 devices": [_resealed(payload, lambda m: m.update(device_count=7))],
        "constants are": [_resealed(payload, shorter_consts)],
        "description is not JSON": [_resealed(payload, b"[" * 100000 + b"]" * 100000),  # (nested past the stack)
                                    _resealed(payload, b"\xff{}")],
        "description is not an object": [_resealed(payload, b"[1, 2]")],
    }
    for message, blobs in cases.items():
        for blob in blobs:
            with pytest.raises(ValueError, match=r"deserialize_and_load: .*" + message):
                se.deserialize_and_load(blob, in_tree, out_tree)
    with pytest.raises(ValueError, match="deserialize_and_load: in_tree is .* but the payload was serialized with"):
        se.deserialize_and_load(payload, ember.tree_util.tree_structure(((0, 0), {})), out_tree)
    with pytest.raises(ValueError, match="deserialize_and_load: out_tree is"):
        se.deserialize_and_load(payload, in_tree, ember.tree_util.tree_structure([0, 0, 0, 0]))
    with pytest.raises(TypeError, match="deserialize_and_load: serialized must be"):
        se.deserialize_and_load("text", in_tree, out_tree)


def test_an_executable_the_plugin_cannot_load_is_a_value_error():
    ecomp, _ = compiled_pair()
    payload, in_tree, out_tree = se.serialize(ecomp)
    head = len(se.MAGIC) + 1
    lengths = [int.from_bytes(payload[head + 8 * i:head + 8 * i + 8], "little") for i in range(3)]
    start = head + 24 + 32 + lengths[0]
    garbage = bytearray(payload)
    garbage[start:start + lengths[1]] = bytes(range(256)) * (lengths[1] // 256) + b"\0" * (lengths[1] % 256)
    blob = _resealed(bytes(garbage), lambda m: None)
    with pytest.raises(ValueError, match="deserialize_and_load: the plugin could not load the executable"):
        se.deserialize_and_load(blob, in_tree, out_tree)


def test_programs_that_call_back_into_python_are_not_serialized():
    f = ember.jit(lambda x: ember.pure_callback(lambda v: np.asarray(v) + 1, ember.ShapeDtypeStruct((3,),
                                                                                                   np.float32), x))
    with pytest.raises(ValueError, match="serialize: .* calls back into Python"):
        se.serialize(f.lower(np.ones(3, np.float32)).compile())
    with pytest.raises(TypeError, match="serialize: expected a Compiled"):
        se.serialize(ember.jit(jnp.sin))
