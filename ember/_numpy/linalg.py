"""Linear algebra of ember.numpy: matmul, dot, vdot, inner, outer, tensordot."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int
from ember._core.sharding import NamedSharding, P
from ember._prims.dot import canonical_precision, is_algorithm
from ember._prims.explicit import resolve
from ember._api.sharding import reshard

from ember._numpy.promotion import _operand_array, _broadcast_shapes, _broadcast_to_shape, _promote
from ember._numpy.reductions import sum as sum_
from ember._numpy.shape import expand_dims, moveaxis, ndim, ravel, reshape, shape, stack
from ember._numpy.ufuncs import multiply, power, subtract


class ContractionShapeError(TypeError, ValueError):
    """Contracted dimensions of different sizes: a TypeError as in JAX (the JAX docs catch TypeError) and a
    ValueError as in numpy."""


def _contract(a: Any, b: Any, dims: Any, precision: Any, preferred_element_type: Any, out_sharding: Any = None
              ) -> Any:
    """lax.dot_general with jax.numpy's precision=, preferred_element_type= and out_sharding= (the products below
    take them as JAX's do: keyword-only)."""
    return lax.dot_general(a, b, dims, precision=precision, preferred_element_type=preferred_element_type,
                           out_sharding=out_sharding)


def _scaled(a: Any, b: Any, preferred_element_type: Any) -> Any:
    """a * b where a product has a scalar operand, in preferred_element_type when one is given."""
    out = multiply(a, b)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def matmul(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None, out_sharding: Any = None
           ) -> Any:
    """numpy's matmul: vectors are promoted to matrices, leading dimensions broadcast as batch dimensions;
    precision, preferred_element_type and out_sharding (JAX's explicit sharding mode) as jax.numpy's."""
    a, b = _promote("matmul", a, b)
    out_sharding = resolve("matmul", out_sharding)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must not be scalars, got shapes {sa} and {sb}")
    a_contract = len(sa) - 1
    b_contract = 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_contract] != sb[b_contract]:
        raise ContractionShapeError(f"matmul: contracted dimensions differ: shapes {sa} and {sb} "
                         f"({sa[a_contract]} != {sb[b_contract]})")
    if len(sa) == 1 or len(sb) == 1:  # vector operands: no batch dimensions, contract directly
        return _contract(a, b, (((a_contract,), (b_contract,)), ((), ())), precision, preferred_element_type,
                         out_sharding)
    batch = _broadcast_shapes("matmul", sa[:-2], sb[:-2])
    return _batched_matmul(a, b, sa, sb, batch, precision, preferred_element_type, out_sharding)


def _batched_matmul(a: Any, b: Any, sa: tuple[int, ...], sb: tuple[int, ...], batch: tuple[int, ...],
                    precision: Any = None, preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """matmul of operands of rank >= 2, as JAX's: a batch dimension both operands have (at the same size) is a
    batch dimension of the dot_general; one only a has (b's missing or 1) is a free dimension of a, and so for b;
    nothing is broadcast. So x[16, 64, 128] @ w[128, 384] is one [1024, 128] x [128, 384] product, and its weight
    gradient contracts over all 1024 rows (a broadcast w would make 16 products and their gradients 16 matrices
    summed after)."""
    nb = len(batch)
    lead_a, lead_b = nb - (len(sa) - 2), nb - (len(sb) - 2)
    a_keep, b_keep, pairs, origin = [], [], [], []  # origin per batch position: ("batch"|"a"|"b", index) or None
    for i in range(nb):
        da = sa[i - lead_a] if i >= lead_a else None
        db = sb[i - lead_b] if i >= lead_b else None
        if da is not None and da == db and da != 1:
            pairs.append((len(a_keep), len(b_keep)))
            origin.append(("batch", len(pairs) - 1))
            a_keep.append(i - lead_a)
            b_keep.append(i - lead_b)
        elif da not in (None, 1):
            origin.append(("a", len(a_keep)))
            a_keep.append(i - lead_a)
        elif db not in (None, 1):
            origin.append(("b", len(b_keep)))
            b_keep.append(i - lead_b)
        else:
            origin.append(None)
    a_keep += [len(sa) - 2, len(sa) - 1]
    b_keep += [len(sb) - 2, len(sb) - 1]
    a2 = a if len(a_keep) == len(sa) else lax.reshape(a, tuple(sa[d] for d in a_keep))
    b2 = b if len(b_keep) == len(sb) else lax.reshape(b, tuple(sb[d] for d in b_keep))
    a_batch = tuple(i for i, _ in pairs)
    b_batch = tuple(j for _, j in pairs)
    na, nbk = len(a_keep), len(b_keep)
    # out's dims: the batch pairs, a's free dims (its own batch-position ones, then its rows), b's likewise
    a_free = [d for d in range(na - 1) if d not in a_batch]
    b_free = [d for d in range(nbk) if d not in b_batch and d != nbk - 2]
    position = {("batch", k): k for k in range(len(pairs))}
    position.update({("a", d): len(pairs) + a_free.index(d) for d in a_free})
    position.update({("b", d): len(pairs) + len(a_free) + b_free.index(d) for d in b_free})
    order = [position[o] for o in origin if o is not None]
    order += [position[("a", na - 2)], position[("b", nbk - 1)]]
    product_sharding = None
    if out_sharding is not None:  # (the product split so that, moved into matmul's order, it is as asked)
        if len(order) != len(batch) + 2:
            raise NotImplementedError(f"matmul: out_sharding= with broadcast size-1 batch dimensions ({sa} @ {sb}); "
                                      "reshard the result instead")
        spec = list(out_sharding.spec) + [None] * (len(order) - len(out_sharding.spec))
        product = [None] * len(order)
        for i, k in enumerate(order):
            product[k] = spec[i]
        product_sharding = NamedSharding(out_sharding.mesh, P(*product))
    out = _contract(a2, b2, (((na - 1,), (nbk - 2,)), (a_batch, b_batch)), precision, preferred_element_type,
                    product_sharding)
    if order != list(range(len(order))):
        out = lax.transpose(out, tuple(order))
    final = batch + (sa[-2], sb[-1])
    return out if aval_of(out).shape == final else lax.reshape(out, final)


def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None, out_sharding: Any = None
        ) -> Any:
    """numpy's dot: products with scalars, inner products, and sum over a's last and b's second-to-last axis;
    precision, preferred_element_type and out_sharding (JAX's explicit sharding mode) as jax.numpy's."""
    a, b = _promote("dot", a, b)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        out = _scaled(a, b, preferred_element_type)
        return out if out_sharding is None else reshard(out, resolve("dot", out_sharding))
    if len(sa) <= 2 and len(sb) <= 2:
        return matmul(a, b, precision=precision, preferred_element_type=preferred_element_type,
                      out_sharding=out_sharding)
    return _contract(a, b, (((len(sa) - 1,), (builtins.max(len(sb) - 2, 0),)), ((), ())), precision,
                     preferred_element_type, resolve("dot", out_sharding))


def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The dot product of the flattened arrays, the first conjugated (numpy's vdot)."""
    a = ravel(a)
    if dt.is_complex(aval_of(a).dtype):
        a = lax.conj(a)
    return dot(a, ravel(b), precision=precision, preferred_element_type=preferred_element_type)


def inner(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    a, b = _promote("inner", a, b)
    if ndim(a) == 0 or ndim(b) == 0:
        return _scaled(a, b, preferred_element_type)
    return _contract(a, b, (((ndim(a) - 1,), (ndim(b) - 1,)), ((), ())), precision, preferred_element_type)


def outer(a: Any, b: Any) -> Any:
    a, b = ravel(a), ravel(b)
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a: Any, b: Any, axes: int | Sequence[Sequence[int]] = 2, *, precision: Any = None,
              preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    a, b = _promote("tensordot", a, b)
    if isinstance(axes, int):
        ca, cb = tuple(range(ndim(a) - axes, ndim(a))), tuple(range(axes))
    else:
        ca_raw, cb_raw = axes
        ca = (ca_raw,) if isinstance(ca_raw, int) else tuple(ca_raw)
        cb = (cb_raw,) if isinstance(cb_raw, int) else tuple(cb_raw)
        ca = tuple(normalize_axis("tensordot", i, ndim(a)) for i in ca)
        cb = tuple(normalize_axis("tensordot", i, ndim(b)) for i in cb)
    return _contract(a, b, ((ca, cb), ((), ())), precision, preferred_element_type, resolve("tensordot", out_sharding))


_operand = _operand_array


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks a[i, j] * b."""
    a, b = _promote("kron", _operand("kron", a), _operand("kron", b, 1))
    nd = builtins.max(ndim(a), ndim(b))
    a = reshape(a, (1,) * (nd - ndim(a)) + shape(a))
    b = reshape(b, (1,) * (nd - ndim(b)) + shape(b))
    # (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...) -> merge pairs
    ea = reshape(a, tuple(x for d in shape(a) for x in (d, 1)))
    eb = reshape(b, tuple(x for d in shape(b) for x in (1, d)))
    return reshape(multiply(ea, eb), tuple(x * y for x, y in zip(shape(a), shape(b))))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    """The cross product of 3-vectors (or the z component for 2-vectors), broadcasting the other axes."""
    a, b = _promote("cross", _operand("cross", a), _operand("cross", b, 1))
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, normalize_axis("cross", axisa, ndim(a)), -1)
    b = moveaxis(b, normalize_axis("cross", axisb, ndim(b)), -1)
    na, nb = shape(a)[-1], shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross: incompatible vector dimensions {na} and {nb} (must be 2 or 3)")
    if na == 2 and nb == 2:
        return subtract(multiply(a[..., 0], b[..., 1]), multiply(a[..., 1], b[..., 0]))
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else None
    b2 = b[..., 2] if nb == 3 else None
    zero_a = multiply(a0, 0)
    zero_b = multiply(b0, 0)
    a2 = zero_a if a2 is None else a2
    b2 = zero_b if b2 is None else b2
    c = stack(_broadcast_all([subtract(multiply(a1, b2), multiply(a2, b1)),
                              subtract(multiply(a2, b0), multiply(a0, b2)),
                              subtract(multiply(a0, b1), multiply(a1, b0))]), axis=-1)
    return moveaxis(c, -1, normalize_axis("cross", axisc, ndim(c)))


def _broadcast_all(xs: list[Any]) -> list[Any]:
    target = _broadcast_shapes("cross", *(shape(x) for x in xs))
    return [_broadcast_to_shape(x, target) for x in xs]


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """The dot product of vectors along axis, broadcasting the others (the array API's vecdot): of complex vectors,
    sum(conj(x1) * x2), as numpy and JAX; with a dot algorithm as precision, a dot_general of its dtypes."""
    x1, x2 = _promote("vecdot", _operand("vecdot", x1), _operand("vecdot", x2, 1))
    if dt.is_complex(aval_of(x1).dtype):
        x1 = lax.conj(x1)
    n1 = shape(x1)[normalize_axis("vecdot", axis, ndim(x1))]
    n2 = shape(x2)[normalize_axis("vecdot", axis, ndim(x2))]
    if n1 != n2:
        raise ContractionShapeError(f"vecdot: the axes have different lengths ({n1} and {n2}), shapes "
                                    f"{shape(x1)} and {shape(x2)}")
    x1 = moveaxis(x1, axis, -1)
    x2 = moveaxis(x2, axis, -1)
    if is_algorithm(canonical_precision("vecdot", precision)):  # (a product of the algorithm's dtypes, as JAX's)
        x1, x2 = _broadcast_all([x1, x2])
        batch = tuple(range(ndim(x1) - 1))
        return _contract(x1, x2, (((ndim(x1) - 1,), (ndim(x2) - 1,)), (batch, batch)), precision,
                         preferred_element_type)
    out = sum_(multiply(x1, x2), axis=-1, dtype=aval_of(x1).dtype)  # (the operands' dtype, not sum's widening)
    if preferred_element_type is not None:
        out = lax.convert_element_type(out, dt.check_user_dtype(preferred_element_type, "vecdot"))
    return out


def matvec(x1: Any, x2: Any, /) -> Any:
    """Matrix-vector products over broadcast batch dimensions: x1 (..., m, n), x2 (..., n) -> (..., m)."""
    x1, x2 = _operand("matvec", x1), _operand("matvec", x2, 1)
    if ndim(x1) < 2 or ndim(x2) < 1:
        raise ValueError(f"matvec: needs a matrix and a vector, got shapes {shape(x1)} and {shape(x2)}")
    return matmul(x1, expand_dims(x2, -1))[..., 0]


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Vector-matrix products over broadcast batch dimensions: x1 (..., m), x2 (..., m, n) -> (..., n)."""
    x1, x2 = _operand("vecmat", x1), _operand("vecmat", x2, 1)
    if ndim(x1) < 1 or ndim(x2) < 2:
        raise ValueError(f"vecmat: needs a vector and a matrix, got shapes {shape(x1)} and {shape(x2)}")
    return matmul(expand_dims(x1, -2), x2)[..., 0, :]


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:  # noqa: N803
    """The Vandermonde matrix of the 1-D x: columns x**(N-1), ..., x**0 (reversed with increasing)."""
    x = _operand("vander", x)
    if ndim(x) != 1:
        raise ValueError(f"vander: x must be 1-D, got shape {shape(x)}")
    n = shape(x)[0] if N is None else static_int("vander", "N", N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    powers = lax.iota(_np.int32, n)
    if not increasing:
        powers = lax.rev(powers, (0,))
    return power(reshape(x, (-1, 1)), reshape(powers, (1, -1)))


__all__ = ["dot", "inner", "matmul", "outer", "tensordot", "vdot", "kron", "cross", "vecdot", "matvec", "vecmat",
           "vander"]
