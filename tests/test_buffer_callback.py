"""ember.experimental.buffer_callback against jax.experimental.buffer_callback: the same callback run by both,
eagerly and under jit, with pytrees of arguments and results, aliases, vmap methods, loops and branches; the
refusals (derivatives, vmap without a method, bad aliases) JAX's; effects kept or dropped as JAX keeps them."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.experimental import buffer_callback as jax_bc

import ember
from ember import lax
from ember.experimental import buffer_callback as bc

F32 = np.float32


def _both(make, *args, jit=False):
    """make(module, ShapeDtypeStruct) -> a function; its results from ember's and JAX's modules on args."""
    e = make(bc, ember.ShapeDtypeStruct)
    j = make(jax_bc, jax.ShapeDtypeStruct)
    if jit:
        e, j = ember.jit(e), jax.jit(j)
    return e(*args), j(*args)


def _add_one(ctx, out, x):
    np.asarray(out)[...] = np.asarray(x) + 1


@pytest.mark.parametrize("jit", [False, True])
def test_fills_results_in_place_as_jax(jit):
    x = np.arange(6, dtype=F32).reshape(2, 3)
    got, want = _both(lambda m, S: m.buffer_callback(_add_one, S((2, 3), jnp.float32)), x, jit=jit)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert got.dtype == want.dtype == np.float32


def test_the_callback_sees_what_jax_gives_it():
    seen = {}

    def look(ctx, out, x, y, *, scale):
        seen.setdefault("calls", []).append(dict(
            stage=ctx.stage.name, out=(type(out).__name__, out.shape, np.dtype(out.dtype).name, out.ndim,
                                       out.writeable),
            x=(type(x).__name__, sorted(x)), y=(y.shape, y.writeable), scale=scale.shape))
        np.asarray(out)[...] = np.asarray(x["a"]) * np.asarray(scale) + np.asarray(y).sum()

    args = ({"a": np.ones(3, F32), "b": np.int32(2)}, np.arange(4, dtype=F32))
    got, want = _both(lambda m, S: lambda x, y: m.buffer_callback(look, S((3,), jnp.float32))(x, y, scale=F32(3)),
                      *args, jit=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    ember_call, jax_call = seen["calls"]
    assert ember_call == jax_call
    assert ember_call["stage"] == "EXECUTE" and ember_call["out"][-1] is True and ember_call["y"][-1] is False


@pytest.mark.parametrize("dtype", ["complex64", "bfloat16", "int8", "bool", "int4", "float8_e5m2"])
def test_dtypes_pass_through_as_jax(dtype):
    x = (np.arange(4) * (1 + 2j) if dtype == "complex64" else np.arange(4) % 2).astype(jnp.dtype(dtype))

    def conj(ctx, out, a):
        value = np.asarray(a)
        np.asarray(out)[...] = np.conj(value) if value.dtype.kind == "c" else value[::-1]
    got, want = _both(lambda m, S: m.buffer_callback(conj, S((4,), jnp.dtype(dtype))), x, jit=True)
    assert got.dtype == want.dtype
    expected = np.conj(x) if dtype == "complex64" else x[::-1]
    np.testing.assert_array_equal(np.asarray(got), expected)
    if dtype != "int4":  # (JAX 0.10.2's Buffer of an int4 result is XLA's packed memory seen one element a byte: its
        np.testing.assert_array_equal(np.asarray(want), expected)  # results are garbage; ember's unpacks and packs)


def test_pytree_results_and_unwritten_results():
    def fill(ctx, out, x):
        a, (b, c) = out
        np.asarray(a)[...] = np.asarray(x)[:2].astype(np.int32)
        np.asarray(b)[...] = 2.5

    def make(m, S):
        return m.buffer_callback(fill, (S((2,), jnp.int32), (S((), jnp.float32), S((2, 2), jnp.float32))))
    got = ember.jit(make(bc, ember.ShapeDtypeStruct))(np.arange(3, dtype=F32))
    want = jax.jit(make(jax_bc, jax.ShapeDtypeStruct))(np.arange(3, dtype=F32))
    for g, w in zip(jax.tree.leaves(got)[:2], jax.tree.leaves(want)[:2]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(got[1][1]), np.zeros((2, 2), F32))  # (JAX's: whatever memory held)


@pytest.mark.parametrize("jit", [False, True])
def test_input_output_aliases_start_the_result_as_the_input(jit):
    def bump(ctx, out, x, y):
        np.asarray(out)[1] += np.asarray(y)

    got, want = _both(lambda m, S: m.buffer_callback(bump, S((3,), jnp.float32), input_output_aliases={0: 0}),
                      np.arange(3, dtype=F32), F32(10), jit=jit)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got), [0, 11, 2])


@pytest.mark.parametrize("method,calls_made", [("sequential", 3), ("sequential_unrolled", 3), ("expand_dims", 1),
                                               ("broadcast_all", 1), ("legacy_vectorized", 1)])
def test_vmap_methods_as_jax(method, calls_made):
    """The calls each vmap_method makes (one per member, or one on the batch) and their arguments, as JAX's."""
    calls = []

    def scale(ctx, out, x, w):
        calls.append((np.asarray(x).shape, np.asarray(w).shape, out.shape))
        np.asarray(out)[...] = np.asarray(x) * np.asarray(w)

    def make(m, S):
        return lambda x, w: m.buffer_callback(scale, S((4,), jnp.float32), vmap_method=method)(x, w)
    xs, w = np.arange(12, dtype=F32).reshape(3, 4), np.full(4, 2, F32)
    got = ember.jit(ember.vmap(make(bc, ember.ShapeDtypeStruct), in_axes=(0, None)))(xs, w)
    ember_calls, calls[:] = list(calls), []
    want = jax.jit(jax.vmap(make(jax_bc, jax.ShapeDtypeStruct), in_axes=(0, None)))(xs, w)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert ember_calls == calls and len(calls) == calls_made


def test_refusals_as_jax():
    f = bc.buffer_callback(_add_one, ember.ShapeDtypeStruct((3,), "float32"))
    jf = jax_bc.buffer_callback(_add_one, jax.ShapeDtypeStruct((3,), jnp.float32))
    x = np.arange(3, dtype=F32)
    for transform in (lambda g: ember.grad(lambda x: g(x).sum()), lambda g: ember.jacfwd(g)):
        with pytest.raises(ValueError, match="buffer_callback.*callbacks are not differentiable"):
            transform(f)(x)
    with pytest.raises(ValueError, match="do not support"):
        jax.grad(lambda x: jf(x).sum())(x)
    with pytest.raises(NotImplementedError, match="vmap of buffer_callback .* needs a vmap_method"):
        ember.vmap(f)(np.ones((2, 3), F32))
    with pytest.raises(NotImplementedError):
        jax.vmap(jf)(np.ones((2, 3), F32))
    S = ember.ShapeDtypeStruct
    for aliases, match in [({1: 0}, "input index 1 outside the range \\[0, 1\\)"),
                           ({0: 2}, "output index 2 outside the range \\[0, 1\\)"),
                           ({0: 0}, "abstract value f32\\[2,3\\] and an output with a different abstract value "
                                    "f32\\[3\\]")]:
        with pytest.raises(ValueError, match=match):
            bc.buffer_callback(_add_one, S((3,), "float32"), input_output_aliases=aliases)(np.ones((2, 3), F32))
    with pytest.raises(TypeError, match="argument leaf 0 \\(str\\) is not an array"):
        f("text")
    np.testing.assert_array_equal(bc.buffer_callback(lambda ctx, out, x: 1, S((3,), "float32"))(x), np.zeros(3))
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        bc.buffer_callback(_add_one, S((3,), "float32"), vmap_method="loop")
    with pytest.raises(ember.errors.JaxRuntimeError, match="RuntimeError: boom"):
        ember.jit(bc.buffer_callback(lambda ctx, out, x: (_ for _ in ()).throw(RuntimeError("boom")),
                                     S((3,), "float32")))(x)
    with pytest.raises(ember.errors.JaxRuntimeError, match="ExecutionContext.stream is the GPU stream"):
        ember.jit(bc.buffer_callback(lambda ctx, out, x: ctx.stream, S((3,), "float32")))(x)


@pytest.mark.parametrize("has_side_effect", [False, True])
def test_side_effects_keep_the_call_as_jax(has_side_effect):
    counts = {"ember": 0, "jax": 0}

    def make(name, m, S):
        def count(ctx, out, x):
            counts[name] += 1
            np.asarray(out)[...] = 0
        cb = m.buffer_callback(count, S((), jnp.float32), has_side_effect=has_side_effect)
        return lambda x: (cb(x), x + 1)[1]
    x = F32(1)
    ember.jit(make("ember", bc, ember.ShapeDtypeStruct))(x)
    jax.jit(make("jax", jax_bc, jax.ShapeDtypeStruct))(x)
    assert counts["ember"] == counts["jax"] == int(has_side_effect)


def test_composes_with_loops_branches_and_custom_vjp():
    S = ember.ShapeDtypeStruct
    twice = bc.buffer_callback(lambda ctx, out, x: np.copyto(np.asarray(out), 2 * np.asarray(x)),
                               S((3,), "float32"))

    def body(carry, _):
        return twice(carry), carry.sum()
    final, sums = ember.jit(lambda x: lax.scan(body, x, None, length=3))(np.ones(3, F32))
    np.testing.assert_array_equal(np.asarray(final), np.full(3, 8, F32))
    np.testing.assert_array_equal(np.asarray(sums), [3, 6, 12])
    out = ember.jit(lambda p, x: lax.cond(p, twice, lambda x: x, x))(True, np.ones(3, F32))
    np.testing.assert_array_equal(np.asarray(out), np.full(3, 2, F32))

    @ember.custom_vjp
    def doubled(x):
        return twice(x)
    doubled.defvjp(lambda x: (twice(x), None), lambda _, ct: (2 * ct,))
    g = ember.jit(ember.grad(lambda x: doubled(x).sum()))(np.ones(3, F32))
    np.testing.assert_array_equal(np.asarray(g), np.full(3, 2, F32))
    assert "buffer_callback" in str(ember.make_jaxpr(twice)(np.ones(3, F32)))


def test_buffers_kept_past_the_call_are_arrays():
    kept = []

    def keep(ctx, out, x):
        kept.append((out, x))
        np.asarray(out)[...] = np.asarray(x)
    f = ember.jit(bc.buffer_callback(keep, ember.ShapeDtypeStruct((1024,), "float32")))
    f(np.ones(1024, F32))
    f(np.zeros(1024, F32))
    out, x = kept[0]
    np.testing.assert_array_equal(np.asarray(out), np.ones(1024, F32))  # still the first call's values
    assert np.from_dlpack(x).shape == (1024,)


def test_composes_with_donation_shardings_and_export():
    double = bc.buffer_callback(lambda ctx, out, x: np.copyto(np.asarray(out), 2 * np.asarray(x)),
                                ember.ShapeDtypeStruct((8,), "float32"))
    x = np.arange(8, dtype=F32)
    donated = ember.jit(lambda v: double(v) + 1, donate_argnums=0)(ember.numpy.asarray(x))
    np.testing.assert_array_equal(np.asarray(donated), 2 * x + 1)
    devices = ember.devices()
    if len(devices) >= 2:  # (a sharded argument: the callback sees the whole array, as JAX's)
        mesh = ember.sharding.Mesh(np.array(devices[:2]), ("x",))
        split = ember.sharding.NamedSharding(mesh, ember.sharding.PartitionSpec("x"))
        sharded = ember.device_put(x, split)
        # (a callback's result lives on the first device, XLA's {maximal device=0}: JAX's array of it has every
        # device's index whole, the others' buffers unfilled; ember's too, and later programs read device 0's)
        out = ember.jit(double)(sharded)
        np.testing.assert_array_equal(np.asarray(out), 2 * x)
        pure = ember.jit(lambda v: ember.pure_callback(lambda a: a * 2, ember.ShapeDtypeStruct((8,), "float32"), v))
        for result in (out, pure(sharded)):
            assert "maximal device=0" in str(result.sharding)
            again = ember.jit(lambda v: v * 3, out_shardings=split)(result)
            np.testing.assert_array_equal(np.asarray(again), 6 * x)
            np.testing.assert_array_equal(np.asarray(ember.jit(lambda v, w: v + w)(result, sharded)), 3 * x)
    exported = ember.export.export(ember.jit(double))(ember.ShapeDtypeStruct((8,), "float32"))
    with pytest.raises(NotImplementedError, match="serialization of host_callbacks"):
        exported.serialize()
