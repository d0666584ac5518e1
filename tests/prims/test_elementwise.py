"""Oracle tests for ember/_prims/elementwise.py: every primitive there has a Case below."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

from ember import lax
from oracle import Case, check_forward, oracle_tests

F = ["float32", "float64"]
FI = ["float32", "float64", "int32"]
FIB = ["float32", "float64", "int32", "bool"]
INTS = ["int32", "uint8", "bool"]
S1 = [((5,),), ((2, 3),), ((),)]          # one-argument shapes
S2 = [((5,), (5,)), ((2, 3), (2, 3)), ((2, 3), ())]  # two-argument shapes (the last broadcasts a scalar)


def unary(prim, np_fn, dtypes=F, domain="any", jax_fn=None, grad=True, name=""):
    return Case(prim, getattr(lax, name or prim), np_fn, S1, dtypes, jax=jax_fn or getattr(jlax, name or prim),
                domain=domain, grad=grad)


def binary(prim, np_fn, dtypes=FI, domain="any", grad=True, name="", shapes=S2):
    return Case(prim, getattr(lax, name or prim), np_fn, shapes, dtypes, jax=getattr(jlax, name or prim),
                domain=domain, grad=grad)


def _same(fn):
    """numpy ufuncs keep our dtype only if told to (numpy may upcast scalars)."""
    return lambda *xs: np.asarray(fn(*xs)).astype(np.result_type(*xs))


def _total_order(fn):
    """fn on IEEE's total order of the operands' values (-0.0 below 0.0; NaN above +inf and equal to itself), as keys
    that numpy compares (the sign-magnitude bits of a float made monotone; integers as they are)."""
    def key(x):
        x = np.asarray(x)
        if x.dtype.kind != "f":
            return x
        bits = x.view(np.dtype(f"i{x.dtype.itemsize}")).astype(np.int64)
        return np.where(bits < 0, -(bits & (2 ** (8 * x.dtype.itemsize - 1) - 1)) - 1, bits)
    return lambda x, y: fn(key(x), key(y))


def _c_div(x, y):
    if x.dtype.kind in "iu":
        return (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(x.dtype)
    return (x / y).astype(x.dtype)


def _c_rem(x, y):
    return np.fmod(x, y).astype(x.dtype)


CASES = [
    unary("neg", _same(np.negative), FI),
    unary("exp", np.exp),
    unary("log", np.log, domain="positive"),
    unary("log1p", np.log1p, domain="positive"),
    unary("expm1", np.expm1),
    unary("sin", np.sin),
    unary("cos", np.cos),
    unary("tanh", np.tanh),
    unary("logistic", lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype)),
    unary("sqrt", np.sqrt, domain="positive"),
    unary("rsqrt", lambda x: (1 / np.sqrt(x)).astype(x.dtype), domain="positive"),
    unary("abs", _same(np.abs), FI),
    unary("sign", _same(np.sign), FI),
    unary("floor", np.floor),
    unary("ceil", np.ceil),
    Case("round", lambda x: lax.round(x, 1), np.round, S1, F, jax=lambda x: jlax.round(x, 1)),
    Case("round", lambda x: lax.round(x), lambda x: (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype),
         [((7,),)], F, jax=jlax.round, name="round_afz"),
    Case("is_finite", lambda x: lax.is_finite(lax.log(x)), lambda x: np.isfinite(np.log(np.where(x > 0, x, np.nan))),
         S1, F, grad=False),
    Case("not", lax.bitwise_not, np.invert, S1, INTS, grad=False),
    Case("square", lax.square, lambda x: (x * x).astype(x.dtype), S1, FI, jax=jlax.square),
    Case("integer_pow", lambda x: lax.integer_pow(x, 3), lambda x: (x ** 3).astype(x.dtype), S1, FI,
         jax=lambda x: jlax.integer_pow(x, 3)),
    Case("integer_pow", lambda x: lax.integer_pow(x, -2), lambda x: (x ** -2.0).astype(x.dtype), S1, F,
         jax=lambda x: jlax.integer_pow(x, -2), domain="nonzero", name="integer_pow_neg"),
    Case("integer_pow", lambda x: lax.integer_pow(x, 0), lambda x: np.ones_like(x), S1[:1], F,
         jax=lambda x: jlax.integer_pow(x, 0), name="integer_pow_zero"),
    binary("add", _same(np.add)),
    binary("sub", _same(np.subtract)),
    binary("mul", _same(np.multiply)),
    binary("div", _c_div, domain="nonzero"),
    binary("rem", _c_rem, domain="nonzero"),
    binary("max", _same(np.maximum), FIB),
    binary("min", _same(np.minimum), FIB),
    binary("pow", _same(np.power), F, domain="positive"),
    binary("atan2", _same(np.arctan2), F),
    Case("and", lax.bitwise_and, np.bitwise_and, S2, INTS, grad=False),
    Case("or", lax.bitwise_or, np.bitwise_or, S2, INTS, grad=False),
    Case("xor", lax.bitwise_xor, np.bitwise_xor, S2, INTS, grad=False),
    binary("eq", np.equal, FIB, grad=False),
    binary("ne", np.not_equal, FIB, grad=False),
    binary("lt", np.less, FIB, grad=False),
    binary("le", np.less_equal, FIB, grad=False),
    binary("gt", np.greater, FIB, grad=False),
    binary("ge", np.greater_equal, FIB, grad=False),
    # total-order comparisons (jax.lax's sort comparators): -0.0 < 0.0, NaN equal to itself and above +inf
    Case("eq_to", lax.eq_to_p.bind, _total_order(np.equal), S2, FIB, grad=False, domain="signed_zeros_and_nans"),
    Case("le_to", lax.le_to_p.bind, _total_order(np.less_equal), S2, FI, grad=False, domain="signed_zeros_and_nans"),
    Case("lt_to", lax.lt_to_p.bind, _total_order(np.less), S2, FI, grad=False, domain="signed_zeros_and_nans"),
    Case("select_n", lambda p, x, y: lax.select_n(p, x, y), lambda p, x, y: np.where(p, y, x),
         [((5,), (5,), (5,)), ((), (2, 3), (2, 3))], FIB, jax=jlax.select_n, arg_dtypes=["bool", None, None]),
    Case("select_n", lambda w, *xs: lax.select_n(w, *xs), lambda w, *xs: np.choose(w, xs),  # (which in 0..3)
         [((2, 3), (2, 3), (2, 3), (2, 3), (2, 3)), ((), (4,), (4,), (4,), (4,))], FI, jax=jlax.select_n,
         arg_dtypes=["int32", None, None, None, None], domain="int_small", name="select_n_four"),
    Case("select", lambda p, x, y: lax.select(p, x, y), np.where, [((5,), (5,), (5,)), ((2, 3), (), (2, 3))], FIB,
         jax=jnp.where, arg_dtypes=["bool", None, None]),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, "float32"), lambda x: x.astype(np.float32),
         S1, FIB, grad=False, name="convert_to_f32"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, "float64"), lambda x: x.astype(np.float64),
         S1, ["float32"], jax=lambda x: jlax.convert_element_type(x, jnp.float64), arg_dtypes=["float32"],
         name="convert_f32_to_f64"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, "int32"), lambda x: x.astype(np.int32),
         S1, FIB, grad=False, name="convert_to_i32"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, "bool"), lambda x: x.astype(bool),
         S1, FIB, grad=False, name="convert_to_bool"),
    Case("stop_gradient", lambda x: lax.mul(lax.stop_gradient(x), x), lambda x: x * x, S1, F,
         jax=lambda x: jlax.mul(jlax.stop_gradient(x), x), finite_differences=False),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("prim", ["add", "mul", "exp", "tanh", "max"])
def test_low_precision(prim, dtype):
    case = next(c for c in CASES if c.prim == prim)
    check_forward(case, case.shapes[0], dtype)


def test_mixed_dtypes_are_rejected():
    import ember
    with pytest.raises(TypeError, match=r"add: operands must have the same dtype, got f32\[3\], i32\[3\]"):
        lax.add(ember.numpy.ones(3), ember.numpy.ones(3, "int32"))


def test_mismatched_shapes_are_rejected():
    import ember
    with pytest.raises(TypeError, match=r"mul: operands must have equal shapes.*f32\[3\], f32\[4\]"):
        lax.mul(ember.numpy.ones(3), ember.numpy.ones(4))


def test_float_only_ops_reject_ints():
    import ember
    with pytest.raises(TypeError, match=r"exp: operand must be floating-point or complex, got i32\[2\]"):
        lax.exp(ember.numpy.ones(2, "int32"))
