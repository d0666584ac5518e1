"""The context mesh (set_mesh) as JAX 0.10.2 has it: outside jit, every computation under it runs over the mesh's
devices and its results are committed there (replicated unless their types say otherwise: one None per dimension
on a mesh of Explicit axes, P() on one of Auto axes), arrays made of host values are put there, a one-device array
committed elsewhere is JAX's incompatible-devices error, a jitted function traced outside the mesh is traced again
inside it (its cache is keyed by the mesh context), and `with mesh:` (JAX's deprecated resource context) only names
the mesh of bare PartitionSpecs. The program runs as JAX code (through ember.as_jax) in a process of four CPU devices;
JAX_RESULTS is what JAX 0.10.2 printed for it on the same devices."""

import pytest

from reliability.subproc import program_result

PROGRAM = r"""
import ember.as_jax
ember.as_jax.install()
import json, warnings
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, AxisType, NamedSharding, Mesh
warnings.simplefilter("ignore", DeprecationWarning)
results = {}
def where(a):
    sh = a.sharding
    spec = str(sh.spec) if isinstance(sh, NamedSharding) else "-"
    return [type(sh).__name__, spec, bool(a.committed), sorted(d.id for d in sh.device_set)]
def record(name, f, value=None):
    try:
        out = f()
        results[name] = where(out) if hasattr(out, "sharding") else str(out)
        if value is not None:
            np.testing.assert_allclose(np.asarray(out), value, rtol=1e-6)
    except (ValueError, TypeError, RuntimeError) as err:
        results[name] = "!" + str(err).split("\n")[0]
out = jnp.ones(3)
elsewhere = jax.device_put(jnp.ones(3), jax.devices()[1])
on_first = jax.device_put(jnp.ones(3), jax.devices()[0])
double = jax.jit(lambda v: v * 2)
record("outside before", lambda: double(out), 2 * np.ones(3))
for kind in ("Explicit", "Auto"):
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(getattr(AxisType, kind),) * 2)
    with jax.set_mesh(mesh):
        k = kind + " "
        record(k + "zeros", lambda: jnp.zeros((4, 2)), np.zeros((4, 2)))
        record(k + "float arange", lambda: jnp.arange(8.0), np.arange(8.0))
        record(k + "int arange", lambda: jnp.arange(8), np.arange(8))
        record(k + "array of a list", lambda: jnp.array([1.0, 2.0]), [1.0, 2.0])
        record(k + "asarray of numpy", lambda: jnp.asarray(np.ones(3)), np.ones(3))
        record(k + "asarray of an Array", lambda: jnp.asarray(out), np.ones(3))
        record(k + "device_put of numpy", lambda: jax.device_put(np.ones(3)), np.ones(3))
        record(k + "uncommitted + 1", lambda: out + 1, 2 * np.ones(3))
        record(k + "sin", lambda: jnp.sin(out), np.sin(np.ones(3)))
        record(k + "sum", lambda: out.sum(), 3.0)
        record(k + "created + 1", lambda: jnp.zeros(3) + 1, np.ones(3))
        record(k + "normal", lambda: jax.random.normal(jax.random.key(0), (4,)))
        record(k + "key", lambda: jax.random.key(0))
        record(k + "jit creating", lambda: jax.jit(lambda: jnp.ones(2))(), np.ones(2))
        record(k + "jit of uncommitted", lambda: double(out), 2 * np.ones(3))
        record(k + "grad", lambda: jax.grad(lambda a: (a ** 2).sum())(out), 2 * np.ones(3))
        record(k + "committed elsewhere + 1", lambda: elsewhere + 1)
        record(k + "committed to device 0, sin", lambda: jnp.sin(on_first))
        record(k + "jit of committed elsewhere", lambda: double(elsewhere))
        xs = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x")))
        record(k + "split + 1", lambda: xs + 1, np.arange(8.0) + 1)
        record(k + "split sum", lambda: xs.sum(), 28.0)
record("outside after", lambda: double(out), 2 * np.ones(3))
pair = jax.make_mesh((2,), ("x",), devices=jax.devices()[2:])
with jax.set_mesh(pair):
    record("two devices: + 1", lambda: out + 1, 2 * np.ones(3))
    record("two devices: jit", lambda: double(out), 2 * np.ones(3))
auto = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
constrain = jax.jit(lambda v: jax.lax.with_sharding_constraint(v, P("x")))
with auto:
    record("with mesh: abstract mesh", lambda: jax.sharding.get_abstract_mesh().empty)
    record("with mesh: + 1", lambda: out + 1, 2 * np.ones(3))
    record("with mesh: constraint", lambda: constrain(jnp.arange(8.0)), np.arange(8.0))
with jax.set_mesh(auto):
    record("set_mesh: constraint", lambda: constrain(jnp.arange(8.0)), np.arange(8.0))
record("outside: constraint", lambda: constrain(jnp.arange(8.0)), np.arange(8.0))
print("RESULT" + json.dumps(results))
"""

# what each line recorded with JAX 0.10.2: [sharding type, spec, committed, device ids], "!" + an error's first line
JAX_RESULTS = {
    'outside before': ['SingleDeviceSharding', '-', False, [0]],
    'Explicit zeros': ['NamedSharding', 'P(None, None)', True, [0, 1, 2, 3]],
    'Explicit float arange': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit int arange': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit array of a list': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Explicit asarray of numpy': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Explicit asarray of an Array': ['SingleDeviceSharding', '-', False, [0]],
    'Explicit device_put of numpy': ['SingleDeviceSharding', '-', False, [0]],
    'Explicit uncommitted + 1': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit sin': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Explicit sum': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Explicit created + 1': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit normal': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit key': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Explicit jit creating': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit jit of uncommitted': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit grad': ['NamedSharding', 'P(None,)', True, [0, 1, 2, 3]],
    'Explicit committed elsewhere + 1':
        '!Received incompatible devices for jitted computation. Got argument x of add with shape float32[3] '
        "and with device ids [1] on platform CPU and jit's context mesh with device ids [0, 1, 2, 3] on "
        'platform CPU',
    'Explicit committed to device 0, sin':
        '!Received incompatible devices for jitted computation. Got argument x of sin with shape float32[3] '
        "and with device ids [0] on platform CPU and jit's context mesh with device ids [0, 1, 2, 3] on "
        'platform CPU',
    'Explicit jit of committed elsewhere':
        '!Received incompatible devices for jitted computation. Got argument v of <lambda> with shape '
        "float32[3] and with device ids [1] on platform CPU and jit's context mesh with device ids [0, 1, 2, "
        '3] on platform CPU',
    'Explicit split + 1': ['NamedSharding', "P('x',)", True, [0, 1, 2, 3]],
    'Explicit split sum': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto zeros': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto float arange': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto int arange': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto array of a list': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto asarray of numpy': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto asarray of an Array': ['SingleDeviceSharding', '-', False, [0]],
    'Auto device_put of numpy': ['SingleDeviceSharding', '-', False, [0]],
    'Auto uncommitted + 1': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto sin': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto sum': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto created + 1': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto normal': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto key': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto jit creating': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto jit of uncommitted': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto grad': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'Auto committed elsewhere + 1':
        '!Received incompatible devices for jitted computation. Got argument x of add with shape float32[3] '
        "and with device ids [1] on platform CPU and jit's context mesh with device ids [0, 1, 2, 3] on "
        'platform CPU',
    'Auto committed to device 0, sin':
        '!Received incompatible devices for jitted computation. Got argument x of sin with shape float32[3] '
        "and with device ids [0] on platform CPU and jit's context mesh with device ids [0, 1, 2, 3] on "
        'platform CPU',
    'Auto jit of committed elsewhere':
        '!Received incompatible devices for jitted computation. Got argument v of <lambda> with shape '
        "float32[3] and with device ids [1] on platform CPU and jit's context mesh with device ids [0, 1, 2, "
        '3] on platform CPU',
    'Auto split + 1': ['NamedSharding', "P('x',)", True, [0, 1, 2, 3]],
    'Auto split sum': ['NamedSharding', 'P()', True, [0, 1, 2, 3]],
    'outside after': ['SingleDeviceSharding', '-', False, [0]],
    'two devices: + 1': ['NamedSharding', 'P(None,)', True, [2, 3]],
    'two devices: jit': ['NamedSharding', 'P(None,)', True, [2, 3]],
    'with mesh: abstract mesh': 'True',
    'with mesh: + 1': ['SingleDeviceSharding', '-', False, [0]],
    'with mesh: constraint': ['NamedSharding', "P('x',)", True, [0, 1, 2, 3]],
    'set_mesh: constraint': ['NamedSharding', "P('x',)", True, [0, 1, 2, 3]],
    'outside: constraint':
        '!with_sharding_constraint requires a non-empty mesh in context if you are passing `PartitionSpec`s '
        'to shardings. You can define a context mesh via `jax.set_mesh(mesh)`. Alternatively, provide '
        '`Sharding`s to shardings and then the mesh context manager is not required.',
}

# where ember differs, on purpose or as a detail: ember's value
EMBER_DIFFERS = {
    # JAX's jnp.sin result is P() where its lax.add's is P(None,): ember types both as the value's type
    "Explicit sin": ["NamedSharding", "P(None,)", True, [0, 1, 2, 3]],
}


def _same_error(ours: str, theirs: str) -> bool:
    """JAX names an operand of an operation outside jit by its lax function's parameter (x), ember by position
    (args[0]); the rest of the message is JAX's."""
    return ours.replace("argument args[0] of", "argument x of") == theirs


@pytest.fixture(scope="module")
def results():
    return program_result(PROGRAM, 4)


@pytest.mark.parametrize("name", sorted(JAX_RESULTS))
def test_as_jax(results, name):
    ours = results[name]
    theirs = EMBER_DIFFERS.get(name, JAX_RESULTS[name])
    if name == "outside: constraint":  # (JAX's RuntimeError, its words but for ember's names)
        assert ours.startswith("!with_sharding_constraint requires a non-empty mesh in context if you are passing "
                               "`PartitionSpec`s to shardings"), ours
    elif isinstance(theirs, str) and theirs.startswith("!Received"):
        assert _same_error(ours, theirs), (ours, theirs)
    else:
        assert ours == theirs, (ours, theirs)
