"""Programs exported for a mesh (JAX's export with shardings): exported for an AbstractMesh (no devices needed: a
mesh of eight in a process of four) or a concrete one, through jit's shardings, ShapeDtypeStructs' shardings and
explicit sharding types; serialized as artifact format 2 (the mesh and the specs, checked before anything runs);
called on a mesh of as many devices (eagerly, under jit, under grad, with host arguments under set_mesh), and JAX's
error on another number of devices. The program runs as JAX code (through ember.as_jax) in a process of four CPU
devices; JAX_RESULTS is what JAX 0.10.2 printed for it. The artifact checks run here."""
import json
import re

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P
from ember._api.export import MAGIC
from ember.sharding import AbstractMesh, AxisType, NamedSharding
from reliability.subproc import program_result

PROGRAM = r"""
import ember.as_jax
ember.as_jax.install()
import json, warnings
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, NamedSharding, AbstractMesh, AxisType
warnings.simplefilter("ignore", DeprecationWarning)
results = {}
def record(name, f):
    try:
        results[name] = f()
    except (ValueError, TypeError) as err:
        results[name] = "!" + str(err).split("\n")[0]
def spec(s):
    return None if s is None else str(s.spec)
mesh = jax.make_mesh((2, 2), ("x", "y"))
am = mesh.abstract_mesh
def f(a, b):
    return jnp.tanh(a @ b).sum(1), a * 2
sa = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(am, P("x", None)))
sb = jax.ShapeDtypeStruct((4, 2), jnp.float32, sharding=NamedSharding(am, P()))
exported = jax.export.export(jax.jit(f))(sa, sb)
restored = jax.export.deserialize(exported.serialize(vjp_order=1))
a = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
b = np.linspace(0, 2, 8, dtype=np.float32).reshape(4, 2)
want = np.tanh(a @ b).sum(1)
want_grads = jax.grad(lambda u, v: f(u, v)[0].sum(), argnums=(0, 1))(a, b)
for label, e in (("exported", exported), ("restored", restored)):
    record(label + " nr_devices", lambda: e.nr_devices)
    record(label + " in_avals", lambda: [str(x) for x in e.in_avals])
    record(label + " in_shardings_jax", lambda: [spec(s) for s in e.in_shardings_jax(mesh)])
    with jax.set_mesh(mesh):
        ad, bd = jax.device_put(a, P("x", None)), jax.device_put(b, P())
        def call():
            r, r2 = e.call(ad, bd)
            assert np.allclose(r, want, atol=1e-5) and np.allclose(r2, 2 * a)
            return [str(jax.typeof(r)), spec(r.sharding), str(jax.typeof(r2))]
        record(label + " call", call)
        def jit_call():
            r, _ = jax.jit(e.call)(ad, bd)
            assert np.allclose(r, want, atol=1e-5)
            return [str(jax.typeof(r)), spec(r.sharding)]
        record(label + " jit call", jit_call)
        def grad():
            g = jax.grad(lambda u, v: e.call(u, v)[0].sum(), argnums=(0, 1))(ad, bd)
            assert all(np.allclose(x, y, atol=1e-5) for x, y in zip(g, want_grads))
            return [str(jax.typeof(t)) for t in g]
        record(label + " grad", grad)
        def host():
            r, _ = e.call(a, b)
            assert np.allclose(r, want, atol=1e-5)
            return spec(r.sharding)
        record(label + " host arguments", host)
    record(label + " outside a mesh", lambda: e.call(a, b))
    with jax.set_mesh(jax.make_mesh((2,), ("x",), devices=jax.devices()[:2])):
        record(label + " on two devices", lambda: e.call(a, b))
# an Auto mesh: jit's shardings, a shard_map and a constraint inside
auto = jax.make_mesh((4,), ("i",), axis_types=(AxisType.Auto,))
rows = NamedSharding(auto, P("i"))
def g(x):
    y = jax.shard_map(lambda blk: jax.lax.psum(blk.sum(0, keepdims=True), "i"), mesh=auto, in_specs=P("i"),
                      out_specs=P())(x)
    return jax.lax.with_sharding_constraint(x * y, rows)
auto_exported = jax.export.deserialize(jax.export.export(jax.jit(g, in_shardings=rows, out_shardings=rows))(
    jax.ShapeDtypeStruct((8, 3), jnp.float32)).serialize())
x = np.arange(24.0, dtype=np.float32).reshape(8, 3)
record("auto nr_devices", lambda: auto_exported.nr_devices)
record("auto in_shardings_jax", lambda: [spec(s) for s in auto_exported.in_shardings_jax(auto)])
def auto_call():
    r = auto_exported.call(jax.device_put(x, rows))
    assert np.allclose(r, x * x.sum(0, keepdims=True))
    return spec(r.sharding)
record("auto call", auto_call)
# exported for more devices than this process has
big = AbstractMesh((2, 4), ("d", "m"), axis_types=(AxisType.Explicit,) * 2)
wide = jax.export.export(jax.jit(lambda w: jnp.sin(w) * 2))(
    jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(big, P("d", "m"))))
wide = jax.export.deserialize(wide.serialize())
record("eight devices nr_devices", lambda: wide.nr_devices)
record("eight devices in_avals", lambda: [str(v) for v in wide.in_avals])
record("eight devices called on four", lambda: wide.call(np.ones((8, 8), np.float32)))
print("RESULT" + json.dumps(results))
"""

JAX_RESULTS = {
    'exported nr_devices': 4,
    'exported in_avals': ['float32[8@x,4]', 'float32[4,2]'],
    'exported in_shardings_jax': ["P('x', None)", 'P()'],
    'exported call': ['float32[8@x]', "P('x',)", 'float32[8@x,4]'],
    'exported jit call': ['float32[8@x]', "P('x',)"],
    'exported grad': ['float32[8@x,4]', 'float32[4,2]'],
    'exported host arguments': "P('x',)",
    'exported outside a mesh':
        '!Function f was exported for 4 devices and is called in a context with 1 devices, which is not '
        'allowed.',
    'exported on two devices':
        '!Function f was exported for 4 devices and is called in a context with 2 devices, which is not '
        'allowed.',
    'restored nr_devices': 4,
    'restored in_avals': ['float32[8@x,4]', 'float32[4,2]'],
    'restored in_shardings_jax': ["P('x', None)", 'P()'],
    'restored call': ['float32[8@x]', "P('x',)", 'float32[8@x,4]'],
    'restored jit call': ['float32[8@x]', "P('x',)"],
    'restored grad': ['float32[8@x,4]', 'float32[4,2]'],
    'restored host arguments': "P('x',)",
    'restored outside a mesh':
        '!Function f was exported for 4 devices and is called in a context with 1 devices, which is not '
        'allowed.',
    'restored on two devices':
        '!Function f was exported for 4 devices and is called in a context with 2 devices, which is not '
        'allowed.',
    'auto nr_devices': 4,
    'auto in_shardings_jax': ["P('i',)"],
    'auto call': "P('i',)",
    'eight devices nr_devices': 8,
    'eight devices in_avals': ['float32[8@d,8@m]'],
    'eight devices called on four':
        '!Function <lambda> was exported for 8 devices and is called in a context with 1 devices, which '
        'is not allowed.',
}


@pytest.fixture(scope="module")
def results():
    return program_result(PROGRAM, 4)


@pytest.mark.parametrize("name", sorted(JAX_RESULTS))
def test_as_jax(results, name):
    assert results[name] == JAX_RESULTS[name]


# --- artifact checks (format 2), in this process of two devices ------------------------------------------------
MESH = AbstractMesh((2,), ("x",), axis_types=(AxisType.Explicit,))


def _blob():
    fun = ember.jit(lambda a, b: (jnp.tanh(a) * b, a.sum()))
    split, whole = NamedSharding(MESH, P("x")), NamedSharding(MESH, P())
    exported = ember.export.export(fun)(ember.ShapeDtypeStruct((4, 3), np.float32, sharding=split),
                                        ember.ShapeDtypeStruct((4, 3), np.float32, sharding=whole))
    return exported.serialize(vjp_order=1)


def _payload(blob):
    return json.loads(blob[len(MAGIC):])


def _refused(payload, *patterns):
    with pytest.raises(ValueError) as info:
        ember.export.deserialize(MAGIC + json.dumps(payload).encode())
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), str(info.value)


def test_a_format_2_artifact_round_trips():
    payload = _payload(_blob())
    assert payload["format"] == 2 and payload["mesh"] == {"axis_names": ["x"], "axis_sizes": [2],
                                                          "axis_types": ["Explicit"]}
    assert payload["in_specs"] == [["x"], []] and payload["vjp"]["in_specs"][:2] == [["x"], []]
    restored = ember.export.deserialize(_blob())
    assert restored.nr_devices == 2 and [a.str_short() for a in restored.in_avals] == ["f32[4@x,3]", "f32[4,3]"]
    assert str(restored.in_shardings_hlo[0]) == "{devices=[2,1]0,1}"
    mesh = ember.make_mesh((2,), ("x",))
    with ember.sharding.set_mesh(mesh):
        a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
        out, total = restored.call(ember.device_put(a, P("x")), np.full((4, 3), 2, np.float32))
        np.testing.assert_allclose(np.asarray(out), np.tanh(a) * 2, rtol=1e-6)
        assert ember.typeof(out).str_short() == "f32[4@x,3]" and float(total) == pytest.approx(a.sum(), abs=1e-5)
    with pytest.raises(ValueError, match="exported for 2 devices and is called in a context with 1 devices"):
        restored.call(a, a)
    # one device's export stays format 1 (what earlier embers read)
    one = ember.export.export(ember.jit(jnp.sin))(ember.ShapeDtypeStruct((3,), np.float32))
    assert _payload(one.serialize())["format"] == 1 and one.nr_devices == 1


@pytest.mark.parametrize("change, patterns", [
    (lambda p: p["mesh"].update(axis_sizes=[1]), ["axis_sizes must be one positive size per axis, for 2 to"]),
    (lambda p: p["mesh"].update(axis_sizes=[2 ** 20]), ["axis_sizes"]),
    (lambda p: p["mesh"].update(axis_names=["x", "x"], axis_sizes=[2, 1], axis_types=["Auto"] * 2),
     ["distinct printable names"]),
    (lambda p: p["mesh"].update(axis_types=["Manual"]), ["'Explicit' or 'Auto'"]),
    (lambda p: p["mesh"].pop("axis_types"), ["its mesh lacks 'axis_types'"]),
    (lambda p: p.update(in_specs=[["z"], []]), [r"in_specs\[0\]", "not null, an axis of the mesh"]),
    (lambda p: p.update(in_specs=[["x", "x"], []]), ["each axis named once"]),
    (lambda p: p.update(in_specs=[[None, "x"], []]), ["dimension 1 of f32\\[4,3\\] does not split"]),
    (lambda p: p.update(in_specs=[[None, None, "x"], []]), ["at most 2 entries"]),
    (lambda p: p.update(in_specs=[["x"]]), ["one spec \\(or null\\) per value"]),
    (lambda p: p.pop("out_specs"), ["lacks 'out_specs'"]),
    (lambda p: p["vjp"].pop("in_specs"), ["vjp lacks 'in_specs'"]),
    (lambda p: p.update(module=p["module"].replace("num_partitions = 2", "num_partitions = 1")),
     ["mhlo.num_partitions = 2 : i32"]),
    (lambda p: p.update(module=p["module"].replace("devices=[2,1]0,1", "devices=[2,1]0,5")),
     ["not a grid of the program's 2 devices"]),
    (lambda p: p.update(module=p["module"].replace("devices=[2,1]0,1", "devices=[4,1]0,1,2,3")),
     ["not a grid of the program's 2 devices"]),
])
def test_a_crafted_format_2_artifact_is_refused(change, patterns):
    payload = _payload(_blob())
    assert "devices=[2,1]0,1" in payload["module"]
    change(payload)
    _refused(payload, *patterns)
