"""Oracle tests for the primitives added to grow ember.lax toward jax.lax: inverse trigonometric and hyperbolic
functions, cbrt, exp2, reduce_precision, mulhi (elementwise.py); reduce_prod, the bitwise reductions,
argmax/argmin and the general reduce (reduction.py). Every primitive there has a Case below; values come from
numpy/scipy, derivatives from JAX and finite differences. (The special functions: test_lax_special.py.)"""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from oracle import Case, oracle_tests
from lax_oracles import (F, S1, S2, INTS, _mulhi, _reduce_precision_np, _bf16_np, _reduce_general,
                         _reduce_pairs, _reduce_pairs_np, _argmax_np, _argmin_np)

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)



CASES = [
    # elementwise.py
    Case("acos", lax.acos, np.arccos, S1, F, jax=jlax.acos, domain="unit"),
    Case("asin", lax.asin, np.arcsin, S1, F, jax=jlax.asin, domain="unit"),
    Case("atan", lax.atan, np.arctan, S1, F, jax=jlax.atan),
    Case("sinh", lax.sinh, np.sinh, S1, F, jax=jlax.sinh),
    Case("cosh", lax.cosh, np.cosh, S1, F, jax=jlax.cosh),
    Case("asinh", lax.asinh, np.arcsinh, S1, F, jax=jlax.asinh),
    Case("acosh", lambda x: lax.acosh(lax.add(x, 1.0)), lambda x: np.arccosh(x + 1.0).astype(x.dtype), S1, F,
         jax=lambda x: jlax.acosh(x + 1.0), domain="positive"),
    Case("atanh", lax.atanh, np.arctanh, S1, F, jax=jlax.atanh, domain="unit"),
    Case("cbrt", lax.cbrt, np.cbrt, S1, F, jax=jlax.cbrt, domain="nonzero"),
    Case("exp2", lax.exp2, np.exp2, S1, F, jax=jlax.exp2),
    Case("reduce_precision", lambda x: lax.reduce_precision(x, 5, 10), _reduce_precision_np, S1, F,
         jax=lambda x: jlax.reduce_precision(x, 5, 10), finite_differences=False, name="reduce_precision_f16"),
    Case("reduce_precision", lambda x: lax.reduce_precision(x, 8, 7), _bf16_np, S1, ["float32"],
         jax=lambda x: jlax.reduce_precision(x, 8, 7), grad=False, name="reduce_precision_bf16"),
    Case("mulhi", lax.mulhi, _mulhi, S2, INTS, jax=jlax.mulhi, grad=False),
    # reduction.py
    Case("reduce_prod", lambda x: lax.reduce_prod(x, (0,)), lambda x: np.prod(x, axis=0).astype(x.dtype),
         [((4,),), ((3, 4),)], F + ["int32"], jax=lambda x: jlax.reduce_prod(x, (0,)), grad_shapes=[((4,),)]),
    # over two axes, some elements zeroed (the derivative must be exact there: no division by x)
    Case("reduce_prod", lambda x: lax.reduce_prod(lax.mul(x, lax.convert_element_type(lax.gt(x, -0.5), x.dtype)),
                                                  (0, 2)),
         lambda x: np.prod(x * (x > -0.5), axis=(0, 2)), [((3, 2, 4),)], F,
         jax=lambda x: jlax.reduce_prod(x * (x > -0.5), (0, 2)), grad_shapes=[((2, 2, 3),)],
         name="reduce_prod_axes_zeros"),
    Case("reduce_and", lambda x: lax.reduce_and(x, (1,)), lambda x: np.logical_and.reduce(x, axis=1)
         if x.dtype == bool else np.bitwise_and.reduce(x, axis=1), [((3, 4),)], ["bool", "int32", "uint8"],
         grad=False),
    Case("reduce_or", lambda x: lax.reduce_or(x, (0,)), lambda x: np.logical_or.reduce(x, axis=0)
         if x.dtype == bool else np.bitwise_or.reduce(x, axis=0), [((3, 4),)], ["bool", "int32", "uint8"],
         grad=False),
    Case("reduce_xor", lambda x: lax.reduce_xor(x, (0, 1)), lambda x: np.logical_xor.reduce(x.ravel())
         if x.dtype == bool else np.bitwise_xor.reduce(x.ravel()), [((3, 4),)], ["bool", "int32", "uint8"],
         grad=False),
    Case("argmax", lambda x: lax.argmax(x, 1, "int32"), _argmax_np(1), [((3, 4),), ((5, 2, 3),)],
         ["float32", "int32", "bool"], grad=False),
    Case("argmin", lambda x: lax.argmin(x, 0, "int32"), _argmin_np(0), [((3, 4),), ((5, 2),)],
         ["float32", "int8", "bool"], grad=False),
    Case("reduce", _reduce_general, lambda x: (x * x).sum(axis=0).astype(x.dtype), [((3, 4),)], F, grad=True,
         forward=False, reverse=False),
    Case("reduce", _reduce_pairs, _reduce_pairs_np, [((3, 4),)], ["float32"], grad=False, name="reduce_pairs"),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


# ---------------------------------------------------------------------------------------------------------------
# Values over wide ranges, special values, and the derivatives the Cases do not reach
def test_special_dtype_errors():
    with pytest.raises(TypeError, match=r"igamma: operands must have the same dtype, got f32\[2\], f64\[2\]"):
        lax.igamma(np.ones(2, np.float32), np.ones(2))
    with pytest.raises(TypeError, match=r"regularized_incomplete_beta: operands must be floating-point, got i32"):
        lax.betainc(np.ones(2, np.int32), np.ones(2, np.int32), np.ones(2, np.int32))
    with pytest.raises(TypeError, match=r"mulhi: operands must be signed integer or unsigned integer, got f32"):
        lax.mulhi(np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="reduce_precision: exponent_bits must be >= 1"):
        lax.reduce_precision(np.ones(2, np.float32), 0, 3)


def test_mulhi_64bit_against_python_ints():
    rng = np.random.default_rng(3)
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
        y = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
        x[:3] = [info.min, info.max, 0]
        y[:3] = [info.min, info.max, info.max]
        np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)), _mulhi(x, y))
        np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)), np.asarray(jlax.mulhi(x, y)))


def test_reduce_routes_monoids_and_init_values():
    x = np.arange(1.0, 13.0).reshape(3, 4)
    ir = ember.stage_out(lambda v: lax.reduce(v, 0.0, lax.add, (1,)), ember.ShapedArray((3, 4), np.float64))
    assert [e.prim.name for e in ir.eqns] == ["reduce_sum"]
    np.testing.assert_allclose(np.asarray(lax.reduce(x, 1.0, enp.multiply, (0,))), x.prod(0))
    np.testing.assert_allclose(np.asarray(lax.reduce(x, 100.0, lax.max, (1,))), np.full(3, 100.0))
    np.testing.assert_allclose(np.asarray(lax.reduce(x, 5.0, lax.add, (0, 1))), x.sum() + 5)
    g = ember.grad(lambda v: enp.sum(lax.reduce(v, -np.inf, lax.max, (1,))))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jnp.zeros((3, 4)).at[:, 3].set(1.0)))
    with pytest.raises(TypeError, match="reduce: init_values must match operands"):
        lax.reduce((x, x), (0.0,), lambda a, b: a, (0,))
    with pytest.raises(TypeError, match="reduce: computation must return 2 scalars"):
        lax.reduce((x, x), (0.0, 0.0), lambda a, b: (a[0],), (0,))


def test_argmax_matches_jax_on_nans_and_ties():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 0.0], [-np.inf, -np.inf, -np.inf, -np.inf]],
                 np.float32)
    for axis in (0, 1):
        for e, j in ((lax.argmax, jlax.argmax), (lax.argmin, jlax.argmin)):
            np.testing.assert_array_equal(np.asarray(e(x, axis, np.int32)), np.asarray(j(x, axis, jnp.int32)))
    assert np.asarray(lax.argmax(x, 1, np.int8)).dtype == np.int8
    with pytest.raises(ValueError, match="argmax: axis 0 of f32\\[0,3\\] is empty"):
        lax.argmax(np.zeros((0, 3), np.float32), 0, np.int32)
    with pytest.raises(TypeError, match="argmin: index_dtype must be an integer dtype"):
        lax.argmin(x, 0, np.float32)
