"""JAX 0.10.2's top-level names ember adds beside its core API, against JAX: jax.ad and vjp(...).with_refs (the
Ref guide's gradient accumulation), jax.ds (dslice) indexing of arrays and Refs, jax.memory.Space in device_put,
jax.smap (single-axis shard_map), and Array.committed through placement and computation."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ember
import ember.numpy as enp


def _f(np_):
    return lambda x, y: (np_.sin(x) * y).sum()


def _accumulate(lib, np_):
    """vjp twice with the first cotangent accumulated into a Ref, the second not wanted, then both as values."""
    x, y = np_.arange(3.0), np_.array([1.0, 2.0, 3.0])
    _, vjp_fn = lib.vjp(_f(np_), x, y)
    ref = lib.new_ref(np_.zeros(3))
    first = vjp_fn.with_refs(ref, lib.ad.DontWant())(1.0)
    second = vjp_fn.with_refs(ref, lib.ad.GradValue())(2.0)
    plain = vjp_fn.with_refs(lib.ad.GradValue(), lib.ad.GradValue())(1.0)
    return first, second, plain, np.asarray(ref[...])


def test_vjp_with_refs_accumulates_as_jax():
    ours, theirs = _accumulate(ember, enp), _accumulate(jax, jjnp)
    assert ours[0] == (ember.ad.GradRef(), ember.ad.DidntWant())
    assert isinstance(ours[1][0], ember.ad.GradRef) and type(theirs[1][0]).__name__ == "GradRef"
    np.testing.assert_allclose(ours[1][1], theirs[1][1], rtol=1e-6)
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6)
    # the marks are pytrees as JAX's: GradRef/DidntWant have no leaves, GradValue/DontWant are leaves
    assert [len(ember.tree.leaves(c())) for c in (ember.ad.GradRef, ember.ad.DidntWant, ember.ad.GradValue,
                                                  ember.ad.DontWant)] == [0, 0, 1, 1]


def test_vjp_with_refs_under_jit_and_errors():
    f = _f(enp)

    @ember.jit
    def step(x, y, r):
        _, vjp_fn = ember.vjp(f, x, y)
        return vjp_fn.with_refs(r, ember.ad.DontWant())(1.0)

    x, y = enp.arange(3.0), enp.ones(3)
    r = ember.new_ref(enp.zeros(3))
    step(x, y, r)
    step(x, y, r)
    np.testing.assert_allclose(np.asarray(r[...]), 2 * np.cos(np.arange(3.0)), rtol=1e-6)
    _, vjp_fn = ember.vjp(f, x, y)
    with pytest.raises(TypeError, match="with_refs"):
        vjp_fn.with_refs(r)  # one mark per primal, as JAX (which raises a bare Exception)
    with pytest.raises(TypeError, match="GradValue"):
        vjp_fn.with_refs(1.0, ember.ad.DontWant())
    with pytest.raises(ValueError, match="Invalid shape for `addupdate`"):
        vjp_fn.with_refs(ember.new_ref(enp.zeros(2)), ember.ad.DontWant())(1.0)
    with pytest.raises(ValueError, match="Invalid dtype for `addupdate`"):
        vjp_fn.with_refs(ember.new_ref(enp.zeros(3, enp.int32)), ember.ad.DontWant())(1.0)


def _ds_cases(lib, np_):
    ds = lib.ds
    x = np_.arange(10.0)
    m = np_.arange(20.0).reshape(4, 5)
    ref = lib.new_ref(np_.arange(10.0))
    ref[ds(2, 3)] = np_.ones(3)
    ref[ds(6, 2, 2)] += np_.ones(2)
    return [x[ds(2, 3)], x[ds(8, 3)], x[ds(1, 3, 2)], x[ds(-1, 2)], x[ds(4)], x[ds(None)],
            lib.jit(lambda x, i: x[ds(i, 3)])(x, 5), lib.jit(lambda x, i: x[ds(i, 3)])(x, -2),
            lib.jit(lambda x, i: x.at[ds(i, 3)].set(0.0))(x, 5),
            m[1:, ds(1, 2)], m[..., ds(1, 2, 2)], m[None, ds(1, 2), 0],
            ref[...], lib.grad(lambda x: x[ds(2, 3)].sum())(x),
            lib.vmap(lambda x, i: x[ds(i, 2)])(m, np_.array([0, 1, 2, 3]))]


def test_ds_indexing_as_jax():
    ours, theirs = _ds_cases(ember, enp), _ds_cases(jax, jjnp)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"case {i}")
    assert ember.ds(1, 2) == ember.ds(1, 2, 1) and ember.ds(None) == slice(None)
    with pytest.raises(ValueError, match="stride"):
        ember.ds(1, 2, enp.array(1))


def test_memory_space_device_put():
    S = ember.memory.Space
    assert [s.name for s in S] == [s.name for s in jax.memory.Space]
    assert [s.value for s in S] == [s.value for s in jax.memory.Space] and repr(S.Host) == "MemorySpace.Host"
    x = enp.ones(3)
    for space in (S.Device, S.Host):
        y = ember.device_put(x, space)
        assert y.committed and y.device == ember.devices()[0]
        np.testing.assert_array_equal(np.asarray(y), np.ones(3))
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: ember.device_put(a, S.Host))(x)), np.ones(3))
    with pytest.raises(ValueError, match="MemorySpace.Any"):
        ember.device_put(x, S.Any)


def test_committed_follows_placement_as_jax():
    def flags(lib, np_):
        d = lib.devices()
        a, b = lib.device_put(np_.ones(3), d[0]), np_.zeros(3)
        return [a.committed, b.committed, (a + 1).committed, (b + 1).committed, (a + b).committed,
                lib.jit(lambda x: x * 2)(a).committed, lib.jit(lambda x: x * 2)(b).committed,
                lib.device_put(b).committed, np_.ones(3, device=d[0]).committed, a[0].committed]
    assert flags(ember, enp) == flags(jax, jjnp)
    d = ember.devices()
    a, c = ember.device_put(enp.ones(3), d[0]), ember.device_put(enp.ones(3), d[1])
    with pytest.raises(ValueError, match="incompatible devices"):
        a + c  # two committed arrays on different devices, as JAX's error
    moved = enp.zeros(3) + c  # an uncommitted one follows the committed one
    assert moved.device == d[1] and moved.committed


def _smap_run(lib, np_, mesh):
    x = np_.arange(8.0).reshape(4, 2)
    with lib.sharding.set_mesh(mesh):
        f = lib.smap(lambda a, b: a * 2 + lib.lax.axis_index("x") + b, in_axes=(0, None), out_axes=0,
                     axis_name="x")
        g = lib.smap(lambda a: lib.lax.psum(a, "x"), in_axes=1, out_axes=1, axis_name="x")
        return [f(x, 1.0), g(x), lib.jit(g)(x), lib.grad(lambda a: f(a, 1.0).sum())(x)]


def test_smap_as_jax():
    ours = _smap_run(ember, enp, ember.make_mesh((2,), ("x",)))
    theirs = _smap_run(jax, jjnp, jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,)))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="context mesh"):
        ember.smap(lambda a: a, in_axes=0, out_axes=0, axis_name="x")(enp.ones(4))
    with pytest.raises(TypeError, match="in_axes"):
        ember.smap(lambda a: a, in_axes=[0], out_axes=0, axis_name="x")
    with pytest.raises(TypeError, match="axis_name"):
        ember.smap(lambda a: a, in_axes=0, out_axes=0, axis_name=("x",))


def test_checkify_init_error():
    from ember.experimental import checkify
    from jax.experimental import checkify as jcheckify
    assert checkify.init_error.get() is None and jcheckify.init_error.get() is None
    checkify.init_error.throw()
    assert len(ember.tree.leaves(checkify.init_error)) == 1
