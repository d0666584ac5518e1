"""Shapes, dtypes and numpy/scipy oracles shared by tests/prims/test_lax_breadth.py and test_lax_special.py (here, next
to oracle.py, so that test_meta.py can import those modules too)."""
import ml_dtypes
import numpy as np
import scipy.special as sps

from ember import lax

F = ["float32", "float64"]
S1 = [((5,),), ((2, 3),), ((),)]
S2 = [((5,), (5,)), ((2, 3), (2, 3)), ((2, 3), ())]
G1 = [((4,),)]  # the one gradient shape of the costly cases
INTS = ["int8", "uint8", "int16", "int32", "uint32"]


def _np(fn):
    """A scipy/numpy function keeping the argument's dtype."""
    return lambda x, *rest: np.asarray(fn(x, *rest)).astype(x.dtype)


def _mulhi(x, y):
    x, y = np.broadcast_arrays(x, y)
    bits = x.dtype.itemsize * 8
    out = [(int(a) * int(b)) >> bits for a, b in zip(x.ravel(), y.ravel())]
    wrap = 1 << bits
    out = [(v % wrap) for v in out]
    unsigned = np.array(out, dtype=np.uint64).astype(np.dtype(f"uint{bits}"))
    return unsigned.view(x.dtype).reshape(x.shape)


def _const(x, value):
    return lax.full_like(x, value)


def _reduce_precision_np(x):
    return x.astype(np.float16).astype(x.dtype)


def _bf16_np(x):
    return x.astype(ml_dtypes.bfloat16).astype(x.dtype)


A_GAMMA = 1.7  # with x in [0.5, 2]: the series (x <= 1.7) and the continued fraction (x > 1.7) both run


def _gamma_grad_a_np(x):
    """dP/da by central differences of scipy's gammainc in a (step 1e-6: ~1e-9 relative)."""
    h = 1e-6
    return ((sps.gammainc(A_GAMMA + h, x.astype(np.float64)) - sps.gammainc(A_GAMMA - h, x.astype(np.float64)))
            / (2 * h)).astype(x.dtype)


def _random_gamma_grad_np(x):
    """-(dP/da) / (dP/dx) with dP/dx = x^(a-1) e^-x / Gamma(a)."""
    x64 = x.astype(np.float64)
    dpdx = np.exp((A_GAMMA - 1) * np.log(x64) - x64 - sps.gammaln(A_GAMMA))
    return (-_gamma_grad_a_np(x64) / dpdx).astype(x.dtype)


def _reduce_general(x):
    """A computation reduce does not recognise: forward values only."""
    return lax.reduce(x, 0.0, lambda a, b: lax.add(a, lax.mul(b, b)), (0,))


def _reduce_pairs(x):
    """Two operands: the largest value and the sum of a second operand, in one reduce."""
    idx = lax.convert_element_type(x, "int32")
    big, total = lax.reduce((x, idx), (-np.inf, 0), lambda a, b: (lax.max(a[0], b[0]), lax.add(a[1], b[1])), (1,))
    return lax.add(big, lax.convert_element_type(total, big.dtype))


def _reduce_pairs_np(x):
    return (x.max(axis=1) + x.astype(np.int32).sum(axis=1).astype(x.dtype)).astype(x.dtype)


def _argmax_np(axis):
    def run(x):
        nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
        return np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), np.argmax(x, axis=axis)).astype(np.int32)
    return run


def _argmin_np(axis):
    def run(x):
        nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
        return np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), np.argmin(x, axis=axis)).astype(np.int32)
    return run
