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


def ragged_dot_np(lhs, rhs, group_sizes, dims, xp=np):
    """lax.ragged_dot_general in numpy (or, with xp=jax.numpy, in JAX's differentiable ops: a derivative oracle),
    from JAX's definition of its three modes: lhs masked once per group along its ragged dimension (group j covers
    [sum(sizes[:j]), sum(sizes[:j + 1])) of it, per index of the prefix dimensions; the sizes are concrete), then
    one einsum (the group index contracted with rhs's group dimension in mode 1, kept in mode 2; mode 3 ignores the
    groups). dims: ((lc, rc), (lb, rb)), lhs ragged dimensions, rhs group dimensions."""
    (lc, rc), (lb, rb) = dims[0]
    ragged, groups = dims[1][0], tuple(dims[2])
    free = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    letters = iter("abcdefhijklmnopqrstuvwxyz")
    lhs_l = [next(letters) for _ in range(lhs.ndim)]
    rhs_l = [next(letters) for _ in range(rhs.ndim)]
    for a, b in zip(lc, rc):
        rhs_l[b] = lhs_l[a]
    for a, b in zip(lb, rb):
        rhs_l[b] = lhs_l[a]
    rhs_free = [d for d in range(rhs.ndim) if d not in rc and d not in rb and d not in groups]
    out = [lhs_l[d] for d in lb] + [lhs_l[d] for d in free] + [rhs_l[d] for d in rhs_free]
    dtype = lhs.dtype
    if xp is np:
        wide = np.float64 if lhs.dtype.kind == "f" or lhs.dtype == ml_dtypes.bfloat16 else lhs.dtype
        lhs, rhs = lhs.astype(wide), rhs.astype(wide)
    if ragged in lb:  # mode 3
        return xp.einsum(f"{''.join(lhs_l)},{''.join(rhs_l)}->{''.join(out)}", lhs, rhs).astype(dtype)
    if ragged in free:
        prefix = list(lb) + free[:free.index(ragged)]
    else:
        prefix = list(lb) + list(lc[:list(lc).index(ragged)])
    group_sizes = np.asarray(group_sizes)
    g = group_sizes.shape[-1]
    sizes = np.broadcast_to(group_sizes, tuple(lhs.shape[d] for d in prefix) + (g,)).astype(np.int64)
    ends = np.cumsum(sizes, axis=-1)
    starts = ends - sizes
    # mask[j, lhs index]: the ragged index inside group j of that index's prefix
    index = np.indices(lhs.shape)
    mask = np.zeros((g,) + lhs.shape, bool)
    for j in range(g):
        lo = starts[(*[index[d] for d in prefix], j)] if prefix else starts[j]
        hi = ends[(*[index[d] for d in prefix], j)] if prefix else ends[j]
        mask[j] = (lo <= index[ragged]) & (index[ragged] < hi)
    masked = xp.where(mask, lhs[None], xp.zeros((), lhs.dtype))
    if ragged in free:  # mode 1: the group index meets rhs's group dimension
        rhs_l[groups[0]] = "G"
        return xp.einsum(f"G{''.join(lhs_l)},{''.join(rhs_l)}->{''.join(out)}", masked, rhs).astype(dtype)
    return xp.einsum(f"G{''.join(lhs_l)},{''.join(rhs_l)}->G{''.join(out)}", masked, rhs).astype(dtype)
