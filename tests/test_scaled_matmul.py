"""Block-scaled products against JAX 0.10.2: lax.scaled_dot (JAX's CPU computes it: its values, dtypes, errors, jit
and vmap), and ember.nn's scaled_matmul, get_scaled_dot_general_config and scaled_dot_general (ember/nn/_scaled.py),
which JAX's CPU build refuses (NotImplementedError: its one implementation is a cuDNN kernel). Those are compared
with JAX's own code where the cuDNN kernel is replaced by the computation its docstring states (each operand times
its repeated block scales, contracted in float32): the quantization, the custom backward pass, the dtypes, float8
operands and float8_e8m0fnu scales included."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import ember
import ember.numpy as enp
from ember import lax
from ember.nn import _scaled
from recorded import jax_result

E4M3, E5M2, E8M0, E2M1 = (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu,
                          ml_dtypes.float4_e2m1fn)


def _outcome(thunk):
    try:
        return np.asarray(thunk())
    except (ValueError, TypeError) as err:
        return type(err).__name__


RNG = np.random.default_rng(0)
A, B = (RNG.normal(size=(4, 64)) * 3).astype(np.float32), (RNG.normal(size=(64, 3)) * 3).astype(np.float32)
SA, SB = RNG.uniform(0.5, 2, (4, 2)).astype(np.float32), RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)
A3, B3 = RNG.normal(size=(2, 4, 8)).astype(np.float32), RNG.normal(size=(2, 8, 3)).astype(np.float32)
SA3, SB3 = RNG.uniform(0.5, 2, (2, 4, 4)).astype(np.float32), RNG.uniform(0.5, 2, (2, 2, 3)).astype(np.float32)
A4, B4 = RNG.normal(size=(6, 5, 4)).astype(np.float32), RNG.normal(size=(3, 6, 4)).astype(np.float32)
SA4, SB4 = RNG.uniform(0.5, 2, (3, 5, 2)).astype(np.float32), RNG.uniform(0.5, 2, (3, 2, 1)).astype(np.float32)
DIMS4 = (((0, 2), (1, 2)), ((), ()))
SCALED_DOTS = {  # name: (lhs, rhs, lhs_scale, rhs_scale, dimension_numbers)
    "matrices": (A, B, SA, SB, None), "batched": (A3, B3, SA3, SB3, None), "two_contracting": (A4, B4, SA4, SB4, DIMS4),
    "unscaled": (A, B, None, None, None),
    "bfloat16": (A.astype(jnp.bfloat16), B.astype(jnp.bfloat16), SA.astype(jnp.bfloat16), SB.astype(jnp.bfloat16),
                 None),
}


def _reference(lhs, rhs, ls, rs, dims, pet):
    """JAX's CPU decomposition of scaled_dot (lax/scaled_dot.py), in numpy: scales repeated over their blocks,
    operands and scales rounded to bfloat16, products rounded to bfloat16, contracted in float64; a result of
    bfloat16 or below is that rounded to bfloat16 first (the bfloat16 dot's result). (JAX itself is the oracle of
    dtypes and shapes here, not of these values: in this process it compiles with ember's XLA_FLAGS, under which its
    XLA keeps the products in float32, while JAX alone rounds them, as ember does.)"""
    n = lhs.ndim
    dims = dims or (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    def bf(x):
        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    scaled = []
    for x, scale, contracting in ((lhs, ls, dims[0][0]), (rhs, rs, dims[0][1])):
        scale = np.ones([1 if i in contracting else k for i, k in enumerate(x.shape)]) if scale is None else scale
        for i in contracting:
            scale = np.repeat(scale, x.shape[i] // scale.shape[i], axis=i)
        scaled.append(bf(bf(x) * bf(scale)))
    out = np.asarray(jlax.dot_general(*scaled, dims))  # (float64: exact enough)
    pet = np.dtype(jnp.bfloat16 if pet is None else pet)
    return out.astype(np.float32) if pet == np.float32 else bf(out).astype(pet)


@pytest.mark.parametrize("name", sorted(SCALED_DOTS))
def test_scaled_dot_as_jax(name):
    lhs, rhs, ls, rs, dims = SCALED_DOTS[name]
    for pet in (None, np.float32, jnp.bfloat16, np.float16, np.int32):
        want = jax_result(lambda: jax.eval_shape(lambda: jlax.scaled_dot(
            lhs, rhs, lhs_scale=ls, rhs_scale=rs, dimension_numbers=dims, preferred_element_type=pet)))
        reference = _reference(lhs, rhs, ls, rs, dims, pet)

        def ours(lhs, rhs):
            return lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs, dimension_numbers=dims,
                                  preferred_element_type=pet)
        for got in (ours(lhs, rhs), *([ember.jit(ours)(lhs, rhs)] if pet in (None, np.float32) else [])):
            assert got.dtype == want.dtype == reference.dtype and got.shape == want.shape
            scale = float(np.abs(reference.astype(np.float64)).max())
            tol = 1e-5 if got.dtype == np.float32 else 1e-2  # (an ulp of bfloat16 where the sums' order differs)
            np.testing.assert_allclose(np.asarray(got).astype(np.float64), reference.astype(np.float64),
                                       rtol=tol, atol=tol * scale + (1 if got.dtype == np.int32 else 0))


def test_scaled_dot_vmap():
    def f(a, sa, b):
        return lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=SB, preferred_element_type=np.float32)
    one = f(A, SA, B)
    np.testing.assert_allclose(ember.vmap(f, (0, None, None))(np.stack([A, A]), SA, B), np.stack([one, one]),
                               rtol=1e-6, atol=1e-5)
    got = ember.vmap(f, (None, 0, 1))(A, np.stack([SA, SA]), np.stack([B, B], 1))
    np.testing.assert_allclose(got, np.stack([one, one]), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(one, _reference(A, B, SA, SB, None, np.float32), rtol=1e-5, atol=1e-3)


def test_scaled_dot_errors_as_jax():
    cases = [lambda L: L.scaled_dot(A[0], B[:, 0]),
             lambda L: L.scaled_dot(A, B, lhs_scale=np.ones((4, 64), np.float32), rhs_scale=SB),  # blocks of 1
             lambda L: L.scaled_dot(A, B, lhs_scale=np.ones((4, 3), np.float32), rhs_scale=SB),  # 64 % 3
             lambda L: L.scaled_dot(A, B, lhs_scale=np.ones((3, 2), np.float32), rhs_scale=SB),  # free dim 3 != 4
             lambda L: L.scaled_dot(A, B[:32], lhs_scale=SA, rhs_scale=SB[:1]),  # contracting 64 != 32
             lambda L: L.scaled_dot(A, B, lhs_scale=SA[None], rhs_scale=SB),  # ranks
             lambda L: L.scaled_dot(A3, B3[:1], lhs_scale=SA3, rhs_scale=SB3[:1])]  # batch sizes
    for case in cases:
        assert _outcome(lambda: case(lax)) == jax_result(lambda: _outcome(lambda: case(jlax))) == "TypeError"


def test_scaled_dot_derivative():
    """JAX has no derivative rule for scaled_dot; ember's is the composition's: the roundings to bfloat16 pass the
    cotangent through, as the same composition's derivative in JAX."""
    ct = RNG.normal(size=(4, 3)).astype(np.float32)

    def composed(lib, a, b):
        bf = jnp.bfloat16
        def scale(s, n, axis):
            return lib.numpy.repeat(s, n, axis=axis).astype(bf)
        return lib.lax.dot_general(a.astype(bf) * scale(SA, 32, 1), b.astype(bf) * scale(SB, 32, 0),
                                   (((1,), (0,)), ((), ())), preferred_element_type=np.float32)
    want = jax_result(lambda: jax.grad(lambda a, b: (composed(jax, a, b) * ct).sum(), (0, 1))(A, B))
    got = ember.grad(lambda a, b: (lax.scaled_dot(a, b, lhs_scale=SA, rhs_scale=SB,
                                                  preferred_element_type=np.float32) * ct).sum(), (0, 1))(A, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert jax_result(lambda: _not_differentiable(lambda: jax.grad(lambda a: jlax.scaled_dot(
        a, B, lhs_scale=SA, rhs_scale=SB, preferred_element_type=np.float32).sum())(A)))


def _not_differentiable(thunk):
    try:
        thunk()
    except NotImplementedError:
        return True
    return False


def test_scaled_dot_of_float8_operands_as_jax():
    lhs, rhs = A.astype(E4M3), B.astype(E4M3)
    ls, rs = SA.astype(E8M0), SB.astype(E8M0)
    want = jax_result(lambda: jlax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs,
                                              preferred_element_type=np.float32))
    got = lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs, preferred_element_type=np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# jax.nn's block-scaled functions
M_A, M_B = RNG.normal(size=(2, 4, 64)).astype(np.float32), RNG.normal(size=(2, 3, 64)).astype(np.float32)
M_SA, M_SB = RNG.uniform(0.5, 2, (2, 4, 2)).astype(np.float32), RNG.uniform(0.5, 2, (2, 3, 2)).astype(np.float32)


def _documented_matmul(a, b, a_scales, b_scales, preferred_element_type=np.float32):
    """scaled_matmul's computation as its docstring states it (numpy, float32)."""
    k = a.shape[-1]
    a = a.astype(np.float32) * np.repeat(np.asarray(a_scales, np.float32), k // a_scales.shape[-1], -1)
    b = b.astype(np.float32) * np.repeat(np.asarray(b_scales, np.float32), k // b_scales.shape[-1], -1)
    return np.einsum("bmk,bnk->bmn", a, b).astype(preferred_element_type)


def test_scaled_matmul_computes_the_documented_product():
    for a, b, sa, sb, pet in ((M_A, M_B, M_SA, M_SB, np.float32),
                              (M_A, M_B, M_SA[..., :1], M_SB[..., :1], jnp.bfloat16),
                              (M_A.astype(jnp.bfloat16), M_B.astype(jnp.bfloat16), M_SA, M_SB, np.float16)):
        got = ember.nn.scaled_matmul(a, b, sa, sb, preferred_element_type=pet)
        want = _documented_matmul(a, b, sa, sb, pet)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
    jitted = ember.jit(ember.nn.scaled_matmul)(M_A, M_B, M_SA, M_SB)
    np.testing.assert_allclose(jitted, _documented_matmul(M_A, M_B, M_SA, M_SB), rtol=1e-5, atol=1e-5)
    batched = ember.vmap(ember.nn.scaled_matmul)(M_A[:, None], M_B[:, None], M_SA[:, None], M_SB[:, None])
    np.testing.assert_allclose(batched[:, 0], _documented_matmul(M_A, M_B, M_SA, M_SB), rtol=1e-5, atol=1e-5)
    # JAX's CPU build has no implementation: the difference this module's docstring states
    assert jax_result(lambda: _not_implemented(lambda: jax.nn.scaled_matmul(M_A, M_B, M_SA, M_SB)))


def _not_implemented(thunk):
    try:
        thunk()
    except NotImplementedError:
        return True
    return False


def test_scaled_matmul_of_empty_operands():
    """An empty batch, or no rows on either side: an empty product (the sweep of tests/test_empty_arrays.py has no
    oracle here: JAX's CPU build raises); no contracting elements: no blocks, a ValueError naming the function."""
    for b, m, n in ((0, 4, 3), (2, 0, 3), (2, 4, 0)):
        a, x = np.zeros((b, m, 64), np.float32), np.zeros((b, n, 64), np.float32)
        out = ember.nn.scaled_matmul(a, x, np.ones((b, m, 2), np.float32), np.ones((b, n, 2), np.float32))
        assert out.shape == (b, m, n) and out.dtype == np.float32
    with pytest.raises(ValueError, match="scaled_matmul: the contracting dimension 0"):
        ember.nn.scaled_matmul(*[np.zeros((1, 2, 0), np.float32)] * 4)


def test_scaled_matmul_errors_as_jax():
    """JAX checks the shapes before it finds no implementation: the same ValueErrors."""
    cases = [lambda nn: nn.scaled_matmul(M_A[0], M_B, M_SA, M_SB), lambda nn: nn.scaled_matmul(M_A, M_B[:, :, :32],
                                                                                                M_SA, M_SB),
             lambda nn: nn.scaled_matmul(M_A, M_B, M_SA, M_SB[..., :1]), lambda nn: nn.scaled_matmul(M_A, M_B,
                                                                                                     M_SA[:, :3], M_SB)]
    for case in cases:
        with pytest.raises(ValueError) as ours:
            case(ember.nn)
        with pytest.raises(ValueError) as theirs:
            case(jax.nn)
        assert str(ours.value) == str(theirs.value)


def test_scaled_matmul_of_float8_operands():
    a, b = M_A.astype(E4M3), M_B.astype(E5M2)
    sa, sb = M_SA.astype(E8M0), M_SB.astype(E8M0)
    np.testing.assert_allclose(ember.nn.scaled_matmul(a, b, sa, sb), _documented_matmul(a, b, sa, sb), rtol=1e-5,
                               atol=1e-5)


def test_scaled_dot_general_configs_as_jax():
    for mode in ("mxfp8", "nvfp4"):
        ours, theirs = ember.nn.get_scaled_dot_general_config(mode), jax.nn.get_scaled_dot_general_config(mode)
        assert (ours.mode, ours.block_size, ours.infer_only) == (theirs.mode, theirs.block_size, theirs.infer_only)
        assert (np.dtype(ours.data_type), np.dtype(ours.scale_type)) == (np.dtype(theirs.data_type),
                                                                           np.dtype(theirs.scale_type))
        assert (ours.global_scale is None) == (theirs.global_scale is None)
        if mode == "nvfp4":
            np.testing.assert_array_equal(ours.global_scale, theirs.global_scale)
            assert ours.global_scale.dtype == np.float32
    scale = enp.asarray([0.5], np.float32)
    assert ember.nn.get_scaled_dot_general_config("nvfp4", scale).global_scale is scale
    with pytest.raises(ValueError, match="Unsupported mode: int8"):
        ember.nn.get_scaled_dot_general_config("int8")


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.float16])
@pytest.mark.parametrize("target", [E4M3, E2M1])
def test_quantized_values_are_the_narrow_types_values(target, dtype):
    """Values in a narrow format's range rounded to it (nearest, ties to even, its subnormals), as numpy/ml_dtypes
    cast: what scaled_dot_general's quantization computes."""
    top = float(ml_dtypes.finfo(target).max)
    tiny = float(ml_dtypes.finfo(target).smallest_subnormal)
    grid = np.concatenate([np.linspace(-top, top, 4001), np.arange(-40, 41) * tiny / 4, [top, -top, 0.0]])
    x = grid.astype(dtype)
    want = x.astype(np.float32).astype(target).astype(np.float32)
    got = _scaled._cast(enp.asarray(x), target)
    assert got.dtype == np.dtype(target)
    got = got.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(got, np.float32), want)


@pytest.fixture
def jax_documented_kernel(monkeypatch):
    """JAX's scaled_dot_general with its cuDNN kernel replaced by the computation its docstring states."""
    import jax._src.cudnn.scaled_matmul_stablehlo as stablehlo  # (the kernel's module: patched for this test)

    def kernel(a, b, a_scales, b_scales, preferred_element_type=np.float32):
        k = a.shape[-1]
        a = a.astype(np.float32) * jnp.repeat(a_scales.astype(np.float32), k // a_scales.shape[-1], -1)
        b = b.astype(np.float32) * jnp.repeat(b_scales.astype(np.float32), k // b_scales.shape[-1], -1)
        return jnp.einsum("bmk,bnk->bmn", a, b).astype(preferred_element_type)
    monkeypatch.setattr(stablehlo, "scaled_matmul_wrapper", kernel)


Q_CASES = {  # name: (lhs shape, rhs shape, dimension numbers); the free sizes are blocks too (the cotangent's)
    "batched": ((2, 32, 32), (2, 32, 32), (((2,), (2,)), ((0,), (0,)))),  # (records of at most 64 KB)
    "matrices": ((64, 64), (64, 32), (((1,), (0,)), ((), ()))),
    "two_contracting": ((8, 32, 4), (32, 8, 4), (((0, 2), (1, 2)), ((), ()))),
}


@pytest.mark.usefixtures("jax_documented_kernel")
@pytest.mark.parametrize("mode,global_scale,name", [
    ("mxfp8", None, "batched"), ("nvfp4", 0.5, "matrices"),
    *(pytest.param(*p, marks=pytest.mark.slow) for p in [
        ("mxfp8", None, "matrices"), ("mxfp8", None, "two_contracting"), ("nvfp4", None, "matrices"),
        ("nvfp4", 0.5, "batched"), ("nvfp4", 0.5, "two_contracting")])])
def test_scaled_dot_general_as_jax(mode, global_scale, name):
    """Forward values in float32, bfloat16 and float16, and both operands' gradients (JAX's quantized backward
    pass, nvfp4's straight-through one), against JAX's code around the documented kernel."""
    ls, rs, dims = Q_CASES[name]
    rng = np.random.default_rng(len(name))
    a, b = rng.normal(size=ls).astype(np.float32), rng.normal(size=rs).astype(np.float32)

    def run(lib, x, y):
        scale = None if global_scale is None else lib.numpy.asarray([global_scale], np.float32)
        configs = [lib.nn.get_scaled_dot_general_config(mode, scale)] * 3
        def f(x, y, pet=np.float32):
            return lib.nn.scaled_dot_general(x, y, dims, pet, configs=configs)
        out = f(x, y)
        ct = lib.numpy.cos(lib.numpy.arange(out.size, dtype=np.float32).reshape(out.shape))
        grads = lib.grad(lambda x, y: (f(x, y) * ct).sum(), (0, 1))(x, y)
        return out, f(x, y, jnp.bfloat16), f(x, y, np.float16), *grads
    want = jax_result(lambda: run(jax, jnp.asarray(a), jnp.asarray(b)))
    for got, w in zip(ember.jit(lambda x, y: run(ember, x, y))(a, b), want):
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_allclose(np.asarray(got, np.float32), w.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_scaled_dot_general_without_configs_is_dot_general():
    dims = (((2,), (2,)), ((0,), (0,)))
    got = ember.nn.scaled_dot_general(M_A, M_B, dims, preferred_element_type=jnp.bfloat16)
    want = jax_result(lambda: jax.nn.scaled_dot_general(M_A, M_B, dims, preferred_element_type=jnp.bfloat16))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(np.float32), rtol=1e-2)
    with pytest.warns(DeprecationWarning, match="Backend selector, now ignored"):
        ember.nn.scaled_dot_general(M_A, M_B, dims, implementation="cudnn")
    with pytest.raises(TypeError, match=r"preferred_element_type in \(f32, bf16, f16\)"):
        ember.nn.scaled_dot_general(M_A, M_B, dims, np.float64,
                                    configs=[ember.nn.get_scaled_dot_general_config("mxfp8")] * 3)
    with pytest.raises(ValueError, match="multiple of the mxfp8 block size 32"):
        ember.nn.scaled_dot_general(M_A[..., :48], M_B[..., :48], dims,
                                    configs=[ember.nn.get_scaled_dot_general_config("mxfp8")] * 3)
