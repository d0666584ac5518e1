"""Buffer donation (jit's donate_argnums / donate_argnames, as JAX's): the program writes its outputs into the
donated buffers, the donated Arrays are deleted, an unusable donation warns, and nothing anyone can still see
changes (an Array with a live numpy view, or passed twice, is copied and the copy donated)."""
import warnings

import jax
import numpy as np
import pytest

import ember
import ember.numpy as enp


def address(x):
    """Where an Array's data lives (without keeping a view of it)."""
    handle, addr, counted = x._buffer.share_memory("test")
    x._buffer.unshare_memory(handle, counted)
    return addr


def sgd(params, moms, grads, lr):
    moms = {k: 0.9 * moms[k] + grads[k] for k in params}
    return {k: params[k] - lr * moms[k] for k in params}, moms


def state(np_):
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((16, 8)).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32)}
    moms = {k: np.zeros_like(v) for k, v in params.items()}
    grads = {k: np.full_like(v, 0.5) for k, v in params.items()}
    return ({k: np_.asarray(v) for k, v in params.items()}, {k: np_.asarray(v) for k, v in moms.items()},
            {k: np_.asarray(v) for k, v in grads.items()})


@pytest.mark.parametrize("how", ["argnums", "argnames", "aot"])
def test_donated_buffers_hold_the_outputs_and_the_arrays_are_deleted(how):
    params, moms, grads = state(enp)
    before = {k: address(v) for k, v in params.items()}
    if how == "argnums":
        step = ember.jit(sgd, donate_argnums=(0, 1))
    elif how == "argnames":
        step = ember.jit(sgd, donate_argnames=("params", "moms"))
    else:
        step = ember.jit(sgd, donate_argnums=(0, 1)).lower(params, moms, grads, 0.1).compile()
        assert step.memory_analysis().alias_size_in_bytes == 2 * 4 * (16 * 8 + 8)
    new_params, new_moms = step(params, moms, grads, 0.1)
    jp, jm, jg = state(jax.numpy)
    want_params, want_moms = jax.jit(sgd, donate_argnums=(0, 1))(jp, jm, jg, 0.1)
    for k in want_params:
        np.testing.assert_allclose(np.asarray(new_params[k]), np.asarray(want_params[k]), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(new_moms[k]), np.asarray(want_moms[k]), rtol=1e-6)
    assert all(v.is_deleted() for v in list(params.values()) + list(moms.values()))
    assert not any(v.is_deleted() for v in grads.values())
    new_addresses = {address(v) for v in list(new_params.values()) + list(new_moms.values())}
    assert set(before.values()) <= new_addresses  # the outputs live where the donated inputs did
    with pytest.raises(RuntimeError, match="deleted"):
        params["w"] + 1


def test_the_fast_path_donates_on_every_call():
    step = ember.jit(sgd, donate_argnums=(0, 1))
    params, moms, grads = state(enp)
    for _ in range(3):
        old = params
        params, moms = step(params, moms, grads, 0.1)
        assert old["w"].is_deleted() and not params["w"].is_deleted()


def test_an_unusable_donation_warns_and_keeps_the_array():
    x, y = enp.ones(3), enp.ones(2)
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: f32\[3\]"):
        total, doubled = ember.jit(lambda a, b: (a.sum(), b * 2), donate_argnums=(0, 1))(x, y)
    assert not x.is_deleted() and y.is_deleted()
    np.testing.assert_array_equal(np.asarray(doubled), [2, 2])
    with pytest.warns(UserWarning, match="not usable"):  # an argument the program does not read
        ember.jit(lambda a, b: b + 1, donate_argnums=0)(enp.ones(2), enp.ones(2))


def test_arrays_others_can_see_are_copied_not_donated():
    step = ember.jit(lambda a: a * 2.0, donate_argnums=0)
    x = enp.arange(4.0)
    view = np.asarray(x)  # a view of x's memory, alive
    out = step(x)
    assert not x.is_deleted()
    np.testing.assert_array_equal(view, [0, 1, 2, 3])  # unchanged: the program wrote into a copy
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 4, 6])
    twice = ember.jit(lambda a, b: a + b, donate_argnums=0)
    y = enp.ones(3)
    np.testing.assert_array_equal(np.asarray(twice(y, y)), [2, 2, 2])
    assert not y.is_deleted()
    z = np.ones(3, np.float32)  # numpy and Python values are uploaded; the user's array is untouched
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: a + 1, donate_argnums=0)(z)), [2, 2, 2])
    np.testing.assert_array_equal(z, [1, 1, 1])


def test_donation_inside_another_transformation_is_ignored():
    step = ember.jit(lambda a: a * 2.0, donate_argnums=0)
    x = enp.ones(3)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: step(a) + 1)(x)), [3, 3, 3])
    assert not x.is_deleted()
    g = ember.grad(lambda a: step(a).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [2, 2, 2])
    assert not x.is_deleted()


def test_bad_donation_arguments():
    with pytest.raises(ValueError, match="both static and donated"):
        ember.jit(lambda x: x, static_argnums=0, donate_argnums=0)
    with pytest.raises(ValueError, match=r"donate_argnums=\(3,\) includes 3"):
        ember.jit(lambda x: x, donate_argnums=3)
    with pytest.raises(ValueError, match=r"donate_argnames \['y'\] are not parameters"):
        ember.jit(lambda x: x, donate_argnames="y")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a usable donation says nothing
        ember.jit(lambda x: x + 1, donate_argnums=0)(enp.ones(2))


def test_a_donated_buffer_is_reused_in_place():
    """unsafe_buffer_pointer (jax.Array's) shows the result living in the donated argument's buffer; an argument
    not donated keeps its own."""
    x, y = enp.array(0.0), enp.array(1.0)
    px, py = x.unsafe_buffer_pointer(), y.unsafe_buffer_pointer()
    out = ember.jit(lambda x, y: x + y, donate_argnums=0)(x, y)
    assert x.is_deleted() and out.unsafe_buffer_pointer() == px
    assert not y.is_deleted() and y.unsafe_buffer_pointer() == py != px


def test_the_donated_buffer_goes_to_the_first_output_of_its_type():
    """A donated argument is aliased to the first output of its shape and dtype (as JAX pairs them), also behind
    outputs of other types (equinox's filter_jit returns an int marker first)."""
    x = enp.array(0.0)
    px = x.unsafe_buffer_pointer()
    f = ember.jit(lambda d, s: (enp.array(0), {"y": d["x"] + 1.0, "z": d["x"] * 2.0}), donate_argnums=0,
                  static_argnums=1)
    marker, out = f({"x": x}, "static")
    assert x.is_deleted() and out["y"].unsafe_buffer_pointer() == px and float(out["z"]) == 0.0
    assert "tf.aliasing_output = 1" in f.lower({"x": enp.array(0.0)}, "static").as_text()


def test_donation_composes_with_refs_shardings_and_aot():
    """One compile pipeline for every call: a donating jit of a function that makes and uses its own Ref (its
    discharge is the program: "new_ref has no lowering rule" before), one that takes a Ref beside a donated
    argument, and donation with sharded arguments, in_shardings and lower().compile() (silently dropped before).
    As JAX's: a donated argument whose own buffers the call takes is deleted; one split for the call (an Array on
    one device given to in_shardings) is copied and kept."""
    mesh = ember.make_mesh((2,), ("x",))
    split = ember.sharding.NamedSharding(mesh, ember.sharding.PartitionSpec("x"))

    def with_own_ref(x):
        r = ember.new_ref(enp.zeros(4))
        r[...] = x * 2
        return r[...] + 1

    x = enp.ones(4)
    np.testing.assert_array_equal(np.asarray(ember.jit(with_own_ref, donate_argnums=0)(x)), [3, 3, 3, 3])
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(ember.jit(with_own_ref, in_shardings=split)(enp.ones(4))), [3] * 4)

    ref, x = ember.new_ref(enp.zeros(4)), enp.ones(4)

    def accumulate(r, v):
        r[...] += v
        return v * 3
    np.testing.assert_array_equal(np.asarray(ember.jit(accumulate, donate_argnums=1)(ref, x)), [3, 3, 3, 3])
    assert x.is_deleted() and np.asarray(ref[...]).tolist() == [1, 1, 1, 1]

    double = lambda a: a * 2  # noqa: E731
    sharded = ember.device_put(enp.arange(4.0), split)
    out = ember.jit(double, donate_argnums=0)(sharded)
    assert sharded.is_deleted() and out.sharding == split and np.asarray(out).tolist() == [0, 2, 4, 6]
    sharded = ember.device_put(enp.arange(4.0), split)
    out = ember.jit(double, donate_argnums=0, in_shardings=split)(sharded)
    assert sharded.is_deleted() and np.asarray(out).tolist() == [0, 2, 4, 6]
    one_device = enp.arange(4.0)
    out = ember.jit(double, donate_argnums=0, in_shardings=split)(one_device)
    assert not one_device.is_deleted() and out.sharding == split  # (split for the call: a copy was given up)
    sharded = ember.device_put(enp.arange(4.0), split)
    lowered = ember.jit(double, donate_argnums=0, in_shardings=split).lower(sharded)
    assert "tf.aliasing_output = 0" in lowered.as_text()  # (the partitioned module aliases it)
    compiled = lowered.compile()
    out = compiled(sharded)
    assert sharded.is_deleted() and np.asarray(out).tolist() == [0, 2, 4, 6]
    with pytest.raises(RuntimeError, match="deleted"):
        compiled(sharded)


def test_pmap_donates_as_jax():
    """pmap(donate_argnums=...) was accepted and never read: the mapped results of an earlier pmap, taken as they
    are, are given up (deleted); an array split for the call is a copy, kept (JAX 0.10.2 does the same)."""
    double = ember.pmap(lambda a: a * 2, donate_argnums=0)
    x = enp.ones((2, 3))
    y = double(x)
    assert not x.is_deleted()
    z = double(y)
    assert y.is_deleted() and np.asarray(z).tolist() == [[4.0] * 3] * 2
    keep = ember.pmap(lambda a, b: a + b, donate_argnums=1)
    w = keep(z, z * 1)
    assert not z.is_deleted() and np.asarray(w).tolist() == [[8.0] * 3] * 2
