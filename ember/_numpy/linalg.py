"""Linear algebra of ember.numpy: matmul, dot, vdot, inner, outer, tensordot."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

from ember import _prims as lax
from ember._core.checks import normalize_axis

from ember._numpy.promotion import _broadcast_shapes, _broadcast_to_shape, _promote
from ember._numpy.shape import ndim, ravel, reshape, shape
from ember._numpy.ufuncs import multiply


class ContractionShapeError(TypeError, ValueError):
    """Contracted dimensions of different sizes: a TypeError as in JAX (the JAX docs catch TypeError) and a
    ValueError as in numpy."""


def matmul(a: Any, b: Any) -> Any:
    """numpy's matmul: vectors are promoted to matrices, leading dimensions broadcast as batch dimensions."""
    a, b = _promote("matmul", a, b)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must not be scalars, got shapes {sa} and {sb}")
    a_contract = len(sa) - 1
    b_contract = 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_contract] != sb[b_contract]:
        raise ContractionShapeError(f"matmul: contracted dimensions differ: shapes {sa} and {sb} "
                         f"({sa[a_contract]} != {sb[b_contract]})")
    if len(sa) == 1 or len(sb) == 1:  # vector operands: no batch dimensions, contract directly
        return lax.dot_general(a, b, (((a_contract,), (b_contract,)), ((), ())))
    batch = _broadcast_shapes("matmul", sa[:-2], sb[:-2])
    nb = len(batch)
    a3 = _broadcast_to_shape(a, batch + sa[-2:])
    b3 = _broadcast_to_shape(b, batch + sb[-2:])
    return lax.dot_general(a3, b3, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))


def dot(a: Any, b: Any) -> Any:
    """numpy's dot: products with scalars, inner products, and sum over a's last and b's second-to-last axis."""
    a, b = _promote("dot", a, b)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        return multiply(a, b)
    if len(sb) == 1 or len(sa) == 1 or (len(sa) <= 2 and len(sb) <= 2):
        return matmul(a, b) if len(sa) <= 2 and len(sb) <= 2 else lax.dot_general(
            a, b, (((len(sa) - 1,), (builtins.max(len(sb) - 2, 0),)), ((), ())))
    return lax.dot_general(a, b, (((len(sa) - 1,), (len(sb) - 2,)), ((), ())))


def vdot(a: Any, b: Any) -> Any:
    return dot(ravel(a), ravel(b))


def inner(a: Any, b: Any) -> Any:
    a, b = _promote("inner", a, b)
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    return lax.dot_general(a, b, (((ndim(a) - 1,), (ndim(b) - 1,)), ((), ())))


def outer(a: Any, b: Any) -> Any:
    a, b = ravel(a), ravel(b)
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a: Any, b: Any, axes: int | Sequence[Sequence[int]] = 2) -> Any:
    a, b = _promote("tensordot", a, b)
    if isinstance(axes, int):
        ca, cb = tuple(range(ndim(a) - axes, ndim(a))), tuple(range(axes))
    else:
        ca_raw, cb_raw = axes
        ca = (ca_raw,) if isinstance(ca_raw, int) else tuple(ca_raw)
        cb = (cb_raw,) if isinstance(cb_raw, int) else tuple(cb_raw)
        ca = tuple(normalize_axis("tensordot", i, ndim(a)) for i in ca)
        cb = tuple(normalize_axis("tensordot", i, ndim(b)) for i in cb)
    return lax.dot_general(a, b, ((ca, cb), ((), ())))
