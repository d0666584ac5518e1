"""Complex operands of the primitives that accept them (complex64 and complex128): forward values against numpy,
derivatives in complex128 against JAX and finite differences (JAX's convention: a cotangent pairs with a tangent as
Re(ct * t), see docs/complex.md), batching. The primitives made for complex numbers (real, imag, conj, complex)
have their only Cases here. Which primitives accept complex, and that the others refuse it, is checked in
tests/test_complex.py."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np

from ember import lax
from lax_oracles import ragged_dot_np
from oracle import Case, oracle_tests

C = ["complex64", "complex128"]
_RAGGED_1 = ((((1,), (1,)), ((), ())), (0,), (0,))  # ragged_dot's dimensions
_RAGGED_2 = ((((1,), (0,)), ((), ())), (1,), ())     # the ragged dimension contracted
S1 = [((4,),), ((),), ((2, 3),)]  # (the quick run takes the first shape, and the second for derivatives)
S2 = [((4,), (4,)), ((2, 3), ()), ((2, 3), (2, 3))]


def unary(prim, np_fn, domain="any", name=""):
    return Case(prim, getattr(lax, prim), np_fn, S1, C, jax=getattr(jlax, prim), domain=domain,
                grad_dtype="complex128", name=name or f"{prim}_complex")


def binary(prim, np_fn, domain="any"):
    return Case(prim, getattr(lax, prim), np_fn, S2, C, jax=getattr(jlax, prim), domain=domain,
                grad_dtype="complex128", name=f"{prim}_complex")


def _same(fn):
    return lambda *xs: np.asarray(fn(*xs)).astype(xs[0].dtype)


def _real_part(fn):
    return lambda x: np.asarray(fn(x)).astype(np.float32 if x.dtype == np.complex64 else np.float64)


def _complex(x, y):
    return (x + 1j * y).astype(np.complex64 if x.dtype == np.float32 else np.complex128)


def _lexicographic(pick_x):
    def fn(x, y):
        x, y = np.broadcast_arrays(x, y)
        take = np.where(x.real == y.real, pick_x(x.imag, y.imag), pick_x(x.real, y.real))
        return np.where(take, x, y).astype(x.dtype)
    return fn


def _accumulated(pick):
    """The running pick(a, b) along axis 0 (numpy has no accumulate of a lexicographic max)."""
    def fn(x):
        out = [x[0]]
        for row in x[1:]:
            out.append(pick(out[-1], row))
        return np.stack(out).astype(x.dtype)
    return fn


CASES = [
    Case("real", lax.real, _real_part(np.real), S1, C, jax=jlax.real, grad_dtype="complex128"),
    Case("imag", lax.imag, _real_part(np.imag), S1, C, jax=jlax.imag, grad_dtype="complex128"),
    Case("conj", lax.conj, np.conj, S1, C, jax=jlax.conj, grad_dtype="complex128"),
    Case("complex", lax.complex, _complex, S2, ["float32", "float64"], jax=jlax.complex),
    unary("neg", np.negative),
    unary("exp", _same(np.exp)),
    unary("log", _same(np.log), domain="positive"),
    unary("log1p", _same(np.log1p), domain="positive"),
    unary("expm1", _same(np.expm1)),
    unary("sin", _same(np.sin)),
    unary("cos", _same(np.cos)),
    unary("tan", _same(np.tan)),
    unary("tanh", _same(np.tanh)),
    unary("logistic", _same(lambda x: 1 / (1 + np.exp(-x)))),
    unary("sqrt", _same(np.sqrt), domain="positive"),
    unary("rsqrt", _same(lambda x: 1 / np.sqrt(x)), domain="positive"),
    unary("abs", _real_part(np.abs), domain="nonzero"),
    Case("sign", lax.sign, _same(np.sign), S1, C, jax=jlax.sign, domain="nonzero", grad_dtype="complex128",
         finite_differences=False, name="sign_complex"),  # (a zero derivative, as JAX's)
    unary("sinh", _same(np.sinh)),
    unary("cosh", _same(np.cosh)),
    unary("asin", _same(np.arcsin)),
    unary("acos", _same(np.arccos)),
    unary("atan", _same(np.arctan)),
    unary("asinh", _same(np.arcsinh)),
    unary("acosh", _same(np.arccosh), domain="positive"),
    unary("atanh", _same(np.arctanh)),
    Case("exp2", lax.exp2, _same(np.exp2), S1, C, jax=jlax.exp2, grad_dtype="complex128", name="exp2_complex"),
    Case("integer_pow", lambda x: lax.integer_pow(x, 3), _same(lambda x: x ** 3), S1, C,
         jax=lambda x: jlax.integer_pow(x, 3), grad_dtype="complex128", name="integer_pow_complex"),
    Case("integer_pow", lambda x: lax.integer_pow(x, -2), _same(lambda x: x ** -2), S1, C,
         jax=lambda x: jlax.integer_pow(x, -2), domain="nonzero", grad_dtype="complex128",
         name="integer_pow_neg_complex"),
    binary("add", _same(np.add)),
    binary("sub", _same(np.subtract)),
    binary("mul", _same(np.multiply)),
    binary("div", _same(np.divide), domain="nonzero"),
    binary("pow", _same(np.power), domain="positive"),
    Case("max", lax.max, _lexicographic(np.greater), S2, C, jax=jlax.max, grad_dtype="complex128",
         name="max_complex"),
    Case("min", lax.min, _lexicographic(np.less), S2, C, jax=jlax.min, grad_dtype="complex128",
         name="min_complex"),
    Case("eq", lax.eq, np.equal, S2, C, grad=False, name="eq_complex"),
    Case("ne", lax.ne, np.not_equal, S2, C, grad=False, name="ne_complex"),
    Case("select", lambda p, x, y: lax.select(p, x, y), np.where, [((4,), (4,), (4,))], C, jax=jlax.select,
         arg_dtypes=["bool", None, None], grad_dtype="complex128", name="select_complex"),
    Case("stop_gradient", lax.stop_gradient, lambda x: x, S1, C, grad=False, name="stop_gradient_complex"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, np.float64),
         lambda x: x.real.astype(np.float64), S1, C, jax=lambda x: jlax.convert_element_type(jlax.real(x), np.float64),
         grad_dtype="complex128", name="convert_complex_to_real"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, np.complex128),
         lambda x: x.astype(np.complex128), S1, ["float32", "float64"],
         jax=lambda x: jlax.convert_element_type(x, np.complex128), name="convert_real_to_complex"),
    Case("convert_element_type", lambda x: lax.convert_element_type(x, np.bool_), lambda x: x != 0, S1, C,
         grad=False, name="convert_complex_to_bool"),
    Case("reduce_sum", lambda x: lax.reduce_sum(x, (0,)), lambda x: x.sum(0), [((4, 3),)], C,
         jax=lambda x: jlax.reduce_sum(x, (0,)), grad_dtype="complex128", name="reduce_sum_complex"),
    Case("reduce_prod", lambda x: lax.reduce_prod(x, (1,)), lambda x: x.prod(1), [((4, 3),)], C,
         jax=lambda x: jlax.reduce_prod(x, (1,)), grad_dtype="complex128", name="reduce_prod_complex"),
    Case("cumsum", lambda x: lax.cumsum(x, 0), lambda x: np.cumsum(x, 0), [((4, 3),)], C,
         jax=lambda x: jlax.cumsum(x, 0), grad_dtype="complex128", name="cumsum_complex"),
    Case("cumprod", lambda x: lax.cumprod(x, 1), lambda x: np.cumprod(x, 1), [((3, 4),)], C,
         jax=lambda x: jlax.cumprod(x, 1), grad_dtype="complex128", name="cumprod_complex"),
    Case("cummax", lambda x: lax.cummax(x, 0), _accumulated(_lexicographic(np.greater)), [((5, 2),)], C,
         grad=False, name="cummax_complex"),
    Case("cummin", lambda x: lax.cummin(x, 0), _accumulated(_lexicographic(np.less)), [((5, 2),)], C,
         grad=False, name="cummin_complex"),
    Case("square", lax.square, lambda x: x * x, S1, C, jax=jlax.square, grad_dtype="complex128",
         name="square_complex"),
    Case("select_n", lambda w, *xs: lax.select_n(w, *xs), lambda w, *xs: np.choose(w, xs),  # (which in 0..3)
         [((4,), (4,), (4,), (4,), (4,))], C, jax=jlax.select_n, arg_dtypes=["int32", None, None, None, None],
         domain="int_small", grad_dtype="complex128", name="select_n_complex"),
    Case("dot_general", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))), np.matmul,
         [((3, 4), (4, 2))], C, jax=lambda x, y: jlax.dot_general(x, y, (((1,), (0,)), ((), ()))),
         grad_dtype="complex128", name="dot_general_complex"),
    # (a ragged dot of each kind that computes per group; the derivative oracle is JAX's masked form in jax.numpy)
    Case("ragged_dot_general", lambda x, y: lax.ragged_dot(x, y, np.array([2, 0, 4], np.int32)),
         lambda x, y: ragged_dot_np(x, y, np.array([2, 0, 4]), _RAGGED_1), [((7, 3), (3, 3, 2))], C,
         jax=lambda x, y: ragged_dot_np(x, y, np.array([2, 0, 4]), _RAGGED_1, jnp), grad_dtype="complex128",
         name="ragged_dot_complex"),
    Case("ragged_dot_general", lambda x, y: lax.ragged_dot_general(x, y, np.array([3, 4], np.int32),
                                                                   lax.RaggedDotDimensionNumbers(*_RAGGED_2)),
         lambda x, y: ragged_dot_np(x, y, np.array([3, 4]), _RAGGED_2), [((2, 7), (7, 3))], C,
         jax=lambda x, y: ragged_dot_np(x, y, np.array([3, 4]), _RAGGED_2, jnp), grad_dtype="complex128",
         name="ragged_dot_contracting_complex"),
    Case("conv_general_dilated", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"),
         lambda x, w: np.asarray(jlax.conv_general_dilated(x, w, (1, 1), "SAME")), [((1, 2, 4, 4), (3, 2, 3, 3))], C,
         jax=lambda x, w: jlax.conv_general_dilated(x, w, (1, 1), "SAME"), grad_dtype="complex128",
         name="conv_general_dilated_complex"),
]

def _np_fft(kind, lengths):
    """numpy's transform of the trailing len(lengths) axes, in the dtype the fft primitive gives."""
    axes = tuple(range(-len(lengths), 0))

    def fn(x):
        complex_dtype = np.complex64 if x.dtype in (np.float32, np.complex64) else np.complex128
        if kind == "FFT":
            return np.fft.fftn(x, axes=axes).astype(complex_dtype)
        if kind == "IFFT":
            return np.fft.ifftn(x, axes=axes).astype(complex_dtype)
        if kind == "RFFT":
            return np.fft.rfftn(x, axes=axes).astype(complex_dtype)
        return np.fft.irfftn(x, s=lengths, axes=axes).astype(np.float32 if x.dtype == np.complex64 else np.float64)
    return fn


def fft_case(kind, shape, lengths, dtypes):
    return Case("fft", lambda x: lax.fft(x, kind, lengths), _np_fft(kind, lengths), [(shape,)], dtypes,
                jax=lambda x: jlax.fft(x, getattr(jlax.FftType, kind), lengths),
                grad_dtype="complex128" if kind != "RFFT" else "float64", name=f"fft_{kind}_{len(lengths)}d")


CASES += [
    fft_case("FFT", (3, 8), (8,), C), fft_case("IFFT", (2, 3, 4), (3, 4), C), fft_case("FFT", (2, 3, 2), (2, 3, 2), C),
    fft_case("RFFT", (3, 6), (6,), ["float32", "float64"]), fft_case("RFFT", (4, 5), (4, 5), ["float32", "float64"]),
    fft_case("IRFFT", (3, 4), (6,), C), fft_case("IRFFT", (3, 4), (7,), C), fft_case("IRFFT", (2, 3, 3), (3, 4), C),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
