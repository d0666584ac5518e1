"""ember.experimental.shard_alike against jax.experimental.shard_alike: values, and the shardings XLA's partitioner
gives the results of jitted functions over a mesh of 2 CPU devices (tests/conftest.py gives ember two; JAX's mesh
is its first two of four) where one value is sharded and the other replicated or unspecified, eagerly, under grad
(the cotangents tied), jvp and vmap; the errors for leaves of different shapes and trees of different structures.
The rules are checked by the oracle harness too (tests/prims/test_sharding_prims.py, the shard_alike cases)."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import NamedSharding, P
from ember._prims.sharding import shard_alike_p
from ember.experimental.shard_alike import shard_alike
from ember.sharding import Mesh
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

if len(ember.devices()) < 2:  # (conftest asks for two)
    pytest.skip("needs two CPU devices", allow_module_level=True)
MESH = Mesh(np.array(ember.devices()[:2]), ("x",))
X = np.arange(32, dtype=np.float32).reshape(8, 4) / 7


def jax_mesh():
    import jax
    return jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))


def _spec(a, NamedSharding_):
    """An array's sharding as the spec of a NamedSharding, one entry per dimension."""
    s = a.sharding
    assert isinstance(s, NamedSharding_), s
    return tuple(s.spec) + (None,) * (a.ndim - len(s.spec))


def _partitioned(lib, lnp, NamedSharding_, mesh, P_, shard_alike_):
    """(name, the results' specs, their values) of shard_alike in programs partitioned over mesh, each with one
    value sharded and the other not; controls without shard_alike show what XLA picks untied."""
    rows = lib.device_put(X, NamedSharding_(mesh, P_("x")))
    cols = lib.device_put(X, NamedSharding_(mesh, P_(None, "x")))
    replicated = lib.device_put(X, NamedSharding_(mesh, P_()))
    found = []

    def record(name, arrays):
        arrays = list(arrays)
        found.append((name, [_spec(a, NamedSharding_) for a in arrays], [np.asarray(a) for a in arrays]))

    record("unspecified_tied_to_rows", lib.jit(lambda a, b: shard_alike_(a, b * 2))(rows, X))
    record("control_untied", lib.jit(lambda a, b: (a, b * 2))(rows, X))
    record("replicated_tied_to_columns", lib.jit(lambda a, b: shard_alike_(lnp.sin(a), b))(replicated, cols))
    record("eager", shard_alike_(rows, X))

    # reverse mode: a's cotangent is the sharded s, b's a constant; tied, b's comes out split as s
    def loss(a, b, s):
        u, v = shard_alike_(a, b)
        return (u * s).sum() + (v * 3.0).sum()
    record("grad", lib.jit(lib.grad(loss, argnums=(0, 1)))(X, X, cols))
    record("grad_control", lib.jit(lib.grad(lambda a, b, s: (a * s).sum() + (b * 3.0).sum(), argnums=(0, 1)))(
        X, X, cols))
    record("jvp_tangents", lib.jit(lambda a, b, ta, tb: lib.jvp(shard_alike_, (a, b), (ta, tb))[1])(X, X, rows, X))
    # vmap: batched at different dimensions (b's moved to a's), and one unbatched (broadcast along the batch)
    record("vmap_0_1", lib.jit(lib.vmap(shard_alike_, in_axes=(0, 1)))(rows, X.T))
    record("vmap_none_0", lib.jit(lib.vmap(shard_alike_, in_axes=(None, 0)))(X[0], cols))
    pairs = lib.jit(shard_alike_)({"p": rows, "q": X[:, 0]},
                                  {"p": X, "q": lib.device_put(X[:, 1], NamedSharding_(mesh, P_("x")))})
    record("tree", [v for pair in pairs for v in pair.values()])
    return found


def test_shardings_and_values_as_jax():
    from jax.experimental.shard_alike import shard_alike as jax_shard_alike
    import jax
    got = _partitioned(ember, enp, NamedSharding, MESH, P, shard_alike)
    want = jax_result(lambda: _partitioned(jax, jax.numpy, jax.sharding.NamedSharding, jax_mesh(), jax.P,
                                           jax_shard_alike))
    assert [(n, s) for n, s, _ in got] == [(n, s) for n, s, _ in want]
    for (name, _, values), (_, _, expected) in zip(got, want):
        for v, w in zip(values, expected):
            np.testing.assert_allclose(v, w, rtol=1e-6, err_msg=name)
    specs = {name: s for name, s, _ in got}
    # the tie is what splits the other value (the controls leave it replicated)
    assert specs["unspecified_tied_to_rows"] == [("x", None)] * 2 and specs["control_untied"][1] == (None, None)
    assert specs["grad"] == [(None, "x")] * 2 and specs["grad_control"][1] == (None, None)
    assert specs["replicated_tied_to_columns"] == [(None, "x")] * 2


def test_lowered_as_a_shard_group_over_several_devices_and_nothing_on_one():
    rows = ember.device_put(X, NamedSharding(MESH, P("x")))
    f = ember.jit(lambda a, b, c, d: (shard_alike(a, b), shard_alike(c, d)))
    text = f.lower(rows, X, X, X).as_text()
    assert text.count('"{unknown shard_as 0}"') == 2 and text.count('"{unknown shard_as 1}"') == 2
    assert "shard_as" not in f.lower(X, X, X, X).as_text()  # (one device: the identity)
    # inside a shard_map body values are each device's blocks: nothing is tied there, the values pass through
    body = ember.shard_map(lambda u, v: shard_alike(u, v)[1] * 2, mesh=MESH, in_specs=(P("x"), P("x")),
                           out_specs=P("x"))
    np.testing.assert_array_equal(ember.jit(body)(rows, X), X * 2)
    assert "shard_as" not in ember.jit(body).lower(rows, X).as_text()


def test_values_types_and_nesting():
    a, b = shard_alike(X, np.arange(32, dtype=np.int32).reshape(8, 4))  # (dtypes may differ, as in JAX)
    np.testing.assert_array_equal(a, X)
    assert b.dtype == np.int32 and (a.shape, b.shape) == ((8, 4), (8, 4))
    (p, q), (r, s) = ember.jit(lambda t, u: shard_alike(t, u))((X, X[0]), (X + 1, X[1]))
    np.testing.assert_array_equal(r, X + 1)
    np.testing.assert_array_equal(s, X[1])
    # second derivatives go through the tied tangents' and cotangents' rules: d2/da2 sum(a * a * b) = diag(2 b)
    def cubic(a, b):
        u, v = shard_alike(a, b)
        return (u * u * v).sum()
    np.testing.assert_allclose(ember.jit(ember.hessian(cubic))(X[0], X[1]), np.diag(2 * X[1]), rtol=1e-6)
    # complex values, tied over the mesh (tests/test_complex.py lists shard_alike among the primitives that take them)
    z = (X + 1j * X[::-1]).astype(np.complex64)
    sharded = ember.device_put(z, NamedSharding(MESH, P("x")))
    u, v = ember.jit(lambda t, w: shard_alike(t, w * 2))(sharded, z)
    np.testing.assert_array_equal(u, z)
    np.testing.assert_array_equal(v, z * 2)
    assert v.dtype == np.complex64 and _spec(v, NamedSharding) == ("x", None)


def _errors(shard_alike_, jit, lnp):
    """The first sentence of each error, eagerly and under jit: leaves of different shapes, trees of different
    structures (without the API's name that ember's messages start with)."""
    found = []
    for x, y in [(lnp.ones((8, 4)), lnp.ones((4, 8))), ({"a": lnp.ones(3)}, {"a": lnp.ones(2)}),
                 ((lnp.ones(3),), [lnp.ones(3)])]:
        for f in (shard_alike_, jit(shard_alike_)):
            with pytest.raises(ValueError) as info:
                f(x, y)
            found.append(str(info.value).removeprefix("shard_alike: ").split(". ")[0])
    return found


def test_errors_as_jax():
    import jax
    from jax.experimental.shard_alike import shard_alike as jax_shard_alike
    got = _errors(shard_alike, ember.jit, enp)
    assert got == jax_result(lambda: _errors(jax_shard_alike, jax.jit, jax.numpy)), got
    with pytest.raises(ValueError, match=r"shard_alike: .*`x` leaf shape: \(8, 4\) and `y` leaf shape: \(4, 8\)"):
        ember.jit(shard_alike)(np.ones((8, 4)), np.ones((4, 8)))
    with pytest.raises(ValueError, match=r"shard_alike: Trees should be equal"):
        shard_alike((X,), [X])
    # the primitive checks its operands too (bound directly, or staged by a transformation)
    with pytest.raises(ValueError, match=r"shard_alike: .*\(3,\) and `y` leaf shape: \(2,\)"):
        ember.jit(shard_alike_p.bind)(np.ones(3), np.ones(2))
