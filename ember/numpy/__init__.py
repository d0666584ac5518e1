"""ember.numpy: numpy's API on ember arrays, with numpy-style broadcasting and JAX's dtype promotion
(Python scalars are weakly typed: x_f16 * 2.0 stays float16)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import ml_dtypes as _ml_dtypes
import numpy as _np

from ember import _dtypes as dt
from ember._array import Array, array, asarray
from ember._core import Tracer, aval_of, install_array_methods, is_python_scalar
from ember._dtypes import bool_, finfo, iinfo
from ember._ir import Literal
from ember._prims import elementwise as ew
from ember._prims import structural as st
from ember._prims._rules import normalize_axis, weak_scalar

ndarray = Array
# Scalar types double as dtypes, as in numpy: enp.float32 is a dtype argument and enp.float32(1.5) a scalar.
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
bfloat16 = _ml_dtypes.bfloat16
inf, nan, pi, e = _np.inf, _np.nan, _np.pi, _np.e
newaxis = None
dtype = _np.dtype


def _is_array(x: Any) -> bool:
    return isinstance(x, Array | Tracer)


def _as_operand(x: Any) -> Any:
    """Arrays and Python scalars pass through; numpy values and nested lists become arrays."""
    if _is_array(x) or is_python_scalar(x) or isinstance(x, Literal):
        return x
    if isinstance(x, _np.ndarray | _np.generic):
        return x
    return asarray(x)


def result_type(*args: Any) -> _np.dtype:
    return dt.result_type(*args)


def promote_types(a: Any, b: Any) -> _np.dtype:
    return dt.promote_types((dt.canonicalize_dtype(a), False), (dt.canonicalize_dtype(b), False))[0]


def _promote(name: str, *args: Any) -> list[Any]:
    """Convert the operands to their common dtype (JAX's lattice with weak Python scalars)."""
    args = [_as_operand(a) for a in args]
    typed = [dt.dtype_and_weak(a) for a in args]
    if len({d for d, _ in typed}) == 1 and not builtins.any(is_python_scalar(a) for a in args):
        return args  # one dtype already
    target, weak = dt.promote_types(*typed)
    out = []
    for a, (d, w) in zip(args, typed):
        if is_python_scalar(a):
            out.append(weak_scalar(a, target, weak))
        elif d != target:
            out.append(ew.convert_element_type(a, target, weak))
        else:
            out.append(a)
    return out


def _broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(_np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{name}: shapes {', '.join(map(str, shapes))} cannot be broadcast together") from None


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    return _broadcast_shapes("broadcast_shapes", *(tuple(s) for s in shapes))


def _broadcast_to_shape(x: Any, shape: tuple[int, ...]) -> Any:
    x_shape = aval_of(x).shape
    if x_shape == shape:
        return x
    lead = len(shape) - len(x_shape)
    squeezed = [i for i, d in enumerate(x_shape) if d == 1 and shape[lead + i] != 1]
    if squeezed:  # size-1 dims that stretch: drop them, then broadcast_in_dim adds them back at full size
        x = st.reshape(x, tuple(d for i, d in enumerate(x_shape) if i not in squeezed))
    dims = tuple(lead + i for i in range(len(x_shape)) if i not in squeezed)
    return st.broadcast_in_dim(x, shape, dims)


def _elementwise(name: str, *args: Any) -> list[Any]:
    """Promote, then broadcast all non-scalar operands to the common shape (rank-0 operands broadcast inside
    the primitive, keeping the IR small)."""
    args = _promote(name, *args)
    shapes = [aval_of(a).shape for a in args]
    if len(set(shapes)) == 1:
        return args
    shape = _broadcast_shapes(name, *shapes)
    return [a if aval_of(a).shape == () else _broadcast_to_shape(a, shape) for a in args]


def _to_inexact(x: Any) -> Any:
    x = _as_operand(x)
    d, weak = dt.dtype_and_weak(x)
    if dt.is_float(d):
        return x
    if is_python_scalar(x):
        return weak_scalar(x, dt.DEFAULT_FLOAT, True)
    return ew.convert_element_type(x, dt.DEFAULT_FLOAT, weak)


def _unary_float(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        return prim_fn(_to_inexact(x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}; integer inputs are promoted to float."
    return fn


def _unary(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        x = _as_operand(x)
        if is_python_scalar(x):
            x = _promote(name, x)[0]
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    return fn


def _binary(prim_fn: Any, name: str) -> Any:
    def fn(x: Any, y: Any) -> Any:
        return prim_fn(*_elementwise(name, x, y))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} with numpy broadcasting and dtype promotion."
    return fn


exp = _unary_float(ew.exp, "exp")
log = _unary_float(ew.log, "log")
log1p = _unary_float(ew.log1p, "log1p")
expm1 = _unary_float(ew.expm1, "expm1")
sin = _unary_float(ew.sin, "sin")
cos = _unary_float(ew.cos, "cos")
tanh = _unary_float(ew.tanh, "tanh")
sqrt = _unary_float(ew.sqrt, "sqrt")
floor = _unary_float(ew.floor, "floor")
ceil = _unary_float(ew.ceil, "ceil")
isfinite = _unary_float(ew.is_finite, "isfinite")
negative = _unary(ew.neg, "negative")
absolute = abs = _unary(ew.abs, "absolute")  # noqa: A001
sign = _unary(ew.sign, "sign")

def _bool_as(logical: Any, arithmetic: Any) -> Any:
    """numpy's add/multiply of booleans are logical or/and."""
    def fn(x: Any, y: Any) -> Any:
        return (logical if aval_of(x).dtype == bool_ else arithmetic)(x, y)
    return fn


add = _binary(_bool_as(ew.bitwise_or, ew.add), "add")
subtract = _binary(ew.sub, "subtract")
multiply = _binary(_bool_as(ew.bitwise_and, ew.mul), "multiply")
maximum = _binary(ew.max, "maximum")
minimum = _binary(ew.min, "minimum")
equal = _binary(ew.eq, "equal")
not_equal = _binary(ew.ne, "not_equal")
less = _binary(ew.lt, "less")
less_equal = _binary(ew.le, "less_equal")
greater = _binary(ew.gt, "greater")
greater_equal = _binary(ew.ge, "greater_equal")
bitwise_and = _binary(ew.bitwise_and, "bitwise_and")
bitwise_or = _binary(ew.bitwise_or, "bitwise_or")
bitwise_xor = _binary(ew.bitwise_xor, "bitwise_xor")


def positive(x: Any) -> Any:
    return _as_operand(x)


def tan(x: Any) -> Any:
    x = _to_inexact(x)
    return ew.div(ew.sin(x), ew.cos(x))


def log2(x: Any) -> Any:
    x = _to_inexact(x)
    return ew.div(ew.log(x), math.log(2.0))


def log10(x: Any) -> Any:
    x = _to_inexact(x)
    return ew.div(ew.log(x), math.log(10.0))


def exp2(x: Any) -> Any:
    x = _to_inexact(x)
    return ew.exp(ew.mul(x, math.log(2.0)))


def round(x: Any, decimals: int = 0) -> Any:  # noqa: A001
    x = _as_operand(x)
    if not dt.is_float(aval_of(x).dtype):
        return x
    if decimals == 0:
        return ew.round(x, 1)
    scale = 10.0 ** decimals
    return ew.div(ew.round(ew.mul(x, scale), 1), scale)


around = round


def square(x: Any) -> Any:
    return ew.integer_pow(_unary(lambda v: v, "square")(x), 2)


def reciprocal(x: Any) -> Any:
    return divide(1.0, _to_inexact(x)) if not dt.is_float(aval_of(_as_operand(x)).dtype) else divide(1, x)


def invert(x: Any) -> Any:
    return ew.bitwise_not(_as_operand(x))


bitwise_not = invert


def logical_not(x: Any) -> Any:
    return ew.bitwise_not(_as_bool(x))


def _as_bool(x: Any) -> Any:
    x = _as_operand(x)
    if is_python_scalar(x):
        return bool(x)
    return x if aval_of(x).dtype == bool_ else ew.convert_element_type(x, bool_)


def logical_and(x: Any, y: Any) -> Any:
    return bitwise_and(_as_bool(x), _as_bool(y))


def logical_or(x: Any, y: Any) -> Any:
    return bitwise_or(_as_bool(x), _as_bool(y))


def logical_xor(x: Any, y: Any) -> Any:
    return bitwise_xor(_as_bool(x), _as_bool(y))


def true_divide(x: Any, y: Any) -> Any:
    x, y = _elementwise("divide", x, y)
    if not dt.is_float(aval_of(x).dtype):
        x, y = _to_inexact(x), _to_inexact(y)
    return ew.div(x, y)


divide = true_divide


def floor_divide(x: Any, y: Any) -> Any:
    x, y = _elementwise("floor_divide", x, y)
    if dt.is_float(aval_of(x).dtype):
        return ew.floor(ew.div(x, y))
    if dt.is_unsigned_int(aval_of(x).dtype) or aval_of(x).dtype == bool_:
        return ew.div(x, y)
    # truncating division, corrected towards -inf where the signs differ and there is a remainder
    quotient = ew.div(x, y)
    remainder = ew.rem(x, y)
    adjust = ew.bitwise_and(ew.ne(remainder, 0), ew.ne(ew.lt(x, 0), ew.lt(y, 0)))
    return ew.select(adjust, ew.sub(quotient, 1), quotient)


def remainder(x: Any, y: Any) -> Any:
    """numpy's remainder: the result has the sign of the divisor."""
    x, y = _elementwise("remainder", x, y)
    r = ew.rem(x, y)
    if dt.is_unsigned_int(aval_of(x).dtype):
        return r
    fix = ew.bitwise_and(ew.ne(r, 0), ew.ne(ew.lt(r, 0), ew.lt(y, 0)))
    return ew.select(fix, ew.add(r, y), r)


mod = remainder


def power(x: Any, y: Any) -> Any:
    if is_python_scalar(y) and isinstance(y, int) and not isinstance(y, bool) and _is_array(x):
        if y >= 0 or dt.is_float(aval_of(x).dtype):
            return ew.integer_pow(x, y)
    x, y = _elementwise("power", x, y)
    d = aval_of(x).dtype
    if dt.is_float(d):
        return ew.pow(x, y)
    # integer powers: exact through float64 for results below 2**53
    as_float = ew.pow(ew.convert_element_type(x, float64), ew.convert_element_type(y, float64))
    return ew.convert_element_type(ew.round(as_float, 1), d, aval_of(x).weak_type)


def arctan2(x: Any, y: Any) -> Any:
    x, y = _elementwise("arctan2", _to_inexact(x), _to_inexact(y))
    return ew.atan2(x, y)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """Elementwise x where condition else y (the one-argument form is not supported: its shape is dynamic)."""
    if x is None or y is None:
        raise TypeError("where: the one-argument form returns data-dependent shapes and is not supported; "
                        "pass x and y")
    cond = _as_bool(condition)
    x, y = _promote("where", x, y)
    shape = _broadcast_shapes("where", aval_of(cond).shape, aval_of(x).shape, aval_of(y).shape)
    cond, x, y = (a if aval_of(a).shape == () else _broadcast_to_shape(a, shape) for a in (cond, x, y))
    if is_python_scalar(cond):
        cond = weak_scalar(cond, bool_, False)
    return ew.select(cond, x, y)


def clip(x: Any, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None) -> Any:  # noqa: A002
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x


# ---------------------------------------------------------------------------------------------------------------
# Creation
def _shape_tuple(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | _np.integer):
        return (int(shape),)
    try:
        return tuple(int(operator_index(d)) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be an int or a sequence of ints, got {shape!r}") from None


def operator_index(x: Any) -> int:
    import operator
    return operator.index(x)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    shape = _shape_tuple("full", shape)
    fill = _as_operand(fill_value)
    if dtype is None:
        dtype = dt.dtype_and_weak(fill)[0]
    if not is_python_scalar(fill) and aval_of(fill).shape != ():
        return broadcast_to(astype(fill, dtype), shape)
    return st.full(shape, fill, dtype)


def zeros(shape: Any, dtype: Any = None) -> Any:
    return st.full(_shape_tuple("zeros", shape), 0, dtype or dt.DEFAULT_FLOAT)


def ones(shape: Any, dtype: Any = None) -> Any:
    return st.full(_shape_tuple("ones", shape), 1, dtype or dt.DEFAULT_FLOAT)


def zeros_like(x: Any, dtype: Any = None) -> Any:
    return zeros(aval_of(_as_operand(x)).shape, dtype or aval_of(_as_operand(x)).dtype)


def ones_like(x: Any, dtype: Any = None) -> Any:
    return ones(aval_of(_as_operand(x)).shape, dtype or aval_of(_as_operand(x)).dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    return full(aval_of(_as_operand(x)).shape, fill_value, dtype or aval_of(_as_operand(x)).dtype)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Any:
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError("arange: start, stop and step must be concrete numbers (the length of the result "
                            "must be known when tracing)")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    values = _np.arange(start, stop, step)
    if dtype is None:
        dtype = dt.DEFAULT_FLOAT if values.dtype.kind == "f" else dt.DEFAULT_INT
    dtype = dt.canonicalize_dtype(dtype)
    n = len(values)
    if builtins.all(isinstance(v, int) for v in (start, stop, step)):
        ramp = st.iota(dtype, n)
        return ew.add(ew.mul(ramp, weak_scalar(step, dtype)), weak_scalar(start, dtype)) if (start, step) != (0, 1) \
            else ramp
    return asarray(values.astype(dtype))


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Any:
    dtype = dt.canonicalize_dtype(dtype) if dtype is not None else dt.DEFAULT_FLOAT
    return asarray(_np.linspace(start, stop, num, endpoint=endpoint).astype(dtype))


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> Any:
    m = n if m is None else m
    dtype = dt.canonicalize_dtype(dtype) if dtype is not None else dt.DEFAULT_FLOAT
    rows = st.broadcasted_iota(int32, (n, m), 0)
    cols = st.broadcasted_iota(int32, (n, m), 1)
    return ew.convert_element_type(ew.eq(ew.add(rows, k), cols), dtype)


def identity(n: int, dtype: Any = None) -> Any:
    return eye(n, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# Shapes
def shape(x: Any) -> tuple[int, ...]:
    return aval_of(_as_operand(x)).shape


def ndim(x: Any) -> int:
    return len(shape(x))


def size(x: Any) -> int:
    return int(_np.prod(shape(x)))


def astype(x: Any, dtype: Any) -> Any:
    x = _as_operand(x)
    if is_python_scalar(x):
        return asarray(x, dtype)
    return ew.convert_element_type(x, dtype, False) if aval_of(x).dtype != dt.canonicalize_dtype(dtype) or \
        aval_of(x).weak_type else x


def reshape(a: Any, newshape: Any, order: str = "C") -> Any:
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    a = _as_operand(a)
    new = list(_shape_tuple("reshape", newshape))
    total = size(a)
    if new.count(-1) > 1:
        raise ValueError(f"reshape: can only specify one unknown dimension, got {tuple(new)}")
    if -1 in new:
        known = int(_np.prod([d for d in new if d != -1]))
        if known == 0 or total % known:
            raise ValueError(f"reshape: cannot reshape array of shape {shape(a)} into shape {tuple(new)}")
        new[new.index(-1)] = total // known
    if int(_np.prod(new)) != total:
        raise ValueError(f"reshape: cannot reshape array of shape {shape(a)} ({total} elements) into shape "
                         f"{tuple(new)}")
    return st.reshape(a, tuple(new))


def ravel(a: Any) -> Any:
    return reshape(a, (-1,))


def transpose(a: Any, axes: Sequence[int] | None = None) -> Any:
    a = _as_operand(a)
    n = ndim(a)
    perm = tuple(reversed(range(n))) if axes is None else tuple(normalize_axis("transpose", int(i), n)
                                                                   for i in axes)
    return st.transpose(a, perm)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    n = ndim(a)
    perm = list(range(n))
    i, j = normalize_axis("swapaxes", axis1, n), normalize_axis("swapaxes", axis2, n)
    perm[i], perm[j] = perm[j], perm[i]
    return st.transpose(_as_operand(a), perm)


def moveaxis(a: Any, source: int, destination: int) -> Any:
    n = ndim(a)
    src, dst = normalize_axis("moveaxis", source, n), normalize_axis("moveaxis", destination, n)
    perm = [i for i in range(n) if i != src]
    perm.insert(dst, src)
    return st.transpose(_as_operand(a), perm)


def expand_dims(a: Any, axis: int | Sequence[int]) -> Any:
    a = _as_operand(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = ndim(a) + len(axes)
    axes = sorted(normalize_axis("expand_dims", ax, out_ndim) for ax in axes)
    new_shape = list(shape(a))
    for ax in axes:
        new_shape.insert(ax, 1)
    return st.reshape(a, tuple(new_shape))


def squeeze(a: Any, axis: int | Sequence[int] | None = None) -> Any:
    a = _as_operand(a)
    s = shape(a)
    if axis is None:
        axes = [i for i, d in enumerate(s) if d == 1]
    else:
        axes = [normalize_axis("squeeze", ax, len(s)) for ax in ((axis,) if isinstance(axis, int) else axis)]
        for ax in axes:
            if s[ax] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                                 f"(axis {ax} of shape {s})")
    return st.reshape(a, tuple(d for i, d in enumerate(s) if i not in axes))


def broadcast_to(a: Any, shape: Any) -> Any:
    a = _as_operand(a)
    target = _shape_tuple("broadcast_to", shape)
    if is_python_scalar(a):
        a = _promote("broadcast_to", a)[0]
    got = aval_of(a).shape
    if len(got) > len(target) or _broadcast_shapes("broadcast_to", got, target) != target:
        raise ValueError(f"broadcast_to: cannot broadcast an array of shape {got} to shape {target}")
    return _broadcast_to_shape(a, target)


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Any:
    arrays = _promote("concatenate", *arrays)
    if builtins.any(aval_of(a).shape == () for a in arrays):
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    return st.concatenate(arrays, normalize_axis("concatenate", axis, ndim(arrays[0])))


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    arrays = [_as_operand(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    shapes = {shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
    axis = normalize_axis("stack", axis, ndim(arrays[0]) + 1)
    return concatenate([expand_dims(a, axis) if not is_python_scalar(a) else
                        reshape(asarray(a), (1,)) for a in arrays], axis)


def hstack(arrays: Sequence[Any]) -> Any:
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, 0 if ndim(arrays[0]) == 1 else 1)


def vstack(arrays: Sequence[Any]) -> Any:
    return concatenate([atleast_2d(a) for a in arrays], 0)


def atleast_1d(a: Any) -> Any:
    a = _as_operand(a)
    return reshape(a, (1,)) if ndim(a) == 0 else a


def atleast_2d(a: Any) -> Any:
    a = atleast_1d(a)
    return reshape(a, (1,) + shape(a)) if ndim(a) == 1 else a


def split(a: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    a = _as_operand(a)
    axis = normalize_axis("split", axis, ndim(a))
    n = shape(a)[axis]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise ValueError(f"split: array split does not result in an equal division ({n} into "
                             f"{indices_or_sections})")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i), 0), n) for i in indices_or_sections] + [n]
    return [st.slice_in_dim(a, lo, builtins.max(lo, hi), axis=axis) for lo, hi in zip(bounds, bounds[1:])]


# ---------------------------------------------------------------------------------------------------------------
# Reductions
def _axes(name: str, x: Any, axis: Any) -> tuple[int, ...]:
    n = ndim(x)
    if axis is None:
        return tuple(range(n))
    axes = (axis,) if isinstance(axis, int | _np.integer) else tuple(axis)
    normalized = tuple(sorted(normalize_axis(name, int(a), n) for a in axes))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{name}: duplicate value in 'axis': {axis}")
    return normalized


def _keep(x: Any, reduced: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        return reduced
    return st.reshape(reduced, tuple(1 if i in axes else d for i, d in enumerate(shape(x))))


def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_operand(a)
    if is_python_scalar(a):
        a = _promote("sum", a)[0]
    d = aval_of(a).dtype
    if dtype is not None:
        a = astype(a, dtype)
    elif d == bool_ or (dt.is_int(d) and d.itemsize < 4):
        a = astype(a, dt.DEFAULT_INT if dt.is_signed_int(d) or d == bool_ else uint32)
    axes = _axes("sum", a, axis)
    return _keep(a, st.reduce_sum(a, axes), axes, keepdims)


def _extreme(name: str, reducer: Any) -> Any:
    def fn(a: Any, axis: Any = None, keepdims: bool = False, initial: Any = None) -> Any:
        a = _as_operand(a)
        axes = _axes(name, a, axis)
        if builtins.any(shape(a)[i] == 0 for i in axes) and initial is None:
            raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")
        out = reducer(a, axes)
        if initial is not None:
            out = (maximum if name == "max" else minimum)(out, initial)
        return _keep(a, out, axes, keepdims)
    fn.__name__ = fn.__qualname__ = name
    return fn


max = amax = _extreme("max", st.reduce_max)  # noqa: A001
min = amin = _extreme("min", st.reduce_min)  # noqa: A001


def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    a = _to_inexact(_as_operand(a)) if dtype is None else astype(a, dtype)
    axes = _axes("mean", a, axis)
    count = int(_np.prod([shape(a)[i] for i in axes]))
    return divide(sum(a, axes, keepdims=keepdims), count)


def var(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    a = _to_inexact(_as_operand(a))
    axes = _axes("var", a, axis)
    centered = subtract(a, mean(a, axes, keepdims=True))
    count = int(_np.prod([shape(a)[i] for i in axes])) - ddof
    return divide(sum(square(centered), axes, keepdims=keepdims), count)


def std(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    return sqrt(var(a, axis, ddof, keepdims))


def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = _axes("all", a, axis)
    return _keep(a, st.reduce_min(a, axes), axes, keepdims)


def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = _axes("any", a, axis)
    return _keep(a, st.reduce_max(a, axes), axes, keepdims)


def _arg_extreme(name: str, extreme: Any) -> Any:
    def fn(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        a = _as_operand(a)
        if axis is None:
            a, axis = ravel(a), 0
        axis = normalize_axis(name, axis, ndim(a))
        n = shape(a)[axis]
        if n == 0:
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
        best = extreme(a, axis, keepdims=True)
        hit = equal(a, best)
        if dt.is_float(aval_of(a).dtype):  # a NaN is the extreme, as in numpy
            hit = logical_or(hit, ew.ne(a, a))
        index = st.broadcasted_iota(int32, shape(a), axis)
        candidates = where(hit, index, n)
        first = st.reduce_min(candidates, (axis,))
        return expand_dims(first, axis) if keepdims else first
    fn.__name__ = fn.__qualname__ = name
    return fn


argmax = _arg_extreme("argmax", max)
argmin = _arg_extreme("argmin", min)


# ---------------------------------------------------------------------------------------------------------------
# Linear algebra
def matmul(a: Any, b: Any) -> Any:
    """numpy's matmul: vectors are promoted to matrices, leading dimensions broadcast as batch dimensions."""
    a, b = _promote("matmul", a, b)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must not be scalars, got shapes {sa} and {sb}")
    a_contract = len(sa) - 1
    b_contract = 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_contract] != sb[b_contract]:
        raise ValueError(f"matmul: contracted dimensions differ: shapes {sa} and {sb} "
                         f"({sa[a_contract]} != {sb[b_contract]})")
    if len(sa) == 1 or len(sb) == 1:  # vector operands: no batch dimensions, contract directly
        return st.dot_general(a, b, (((a_contract,), (b_contract,)), ((), ())))
    batch = _broadcast_shapes("matmul", sa[:-2], sb[:-2])
    nb = len(batch)
    a3 = _broadcast_to_shape(a, batch + sa[-2:])
    b3 = _broadcast_to_shape(b, batch + sb[-2:])
    return st.dot_general(a3, b3, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))


def dot(a: Any, b: Any) -> Any:
    """numpy's dot: products with scalars, inner products, and sum over a's last and b's second-to-last axis."""
    a, b = _promote("dot", a, b)
    sa, sb = shape(a), shape(b)
    if len(sa) == 0 or len(sb) == 0:
        return multiply(a, b)
    if len(sb) == 1 or len(sa) == 1 or (len(sa) <= 2 and len(sb) <= 2):
        return matmul(a, b) if len(sa) <= 2 and len(sb) <= 2 else st.dot_general(
            a, b, (((len(sa) - 1,), (builtins.max(len(sb) - 2, 0),)), ((), ())))
    return st.dot_general(a, b, (((len(sa) - 1,), (len(sb) - 2,)), ((), ())))


def vdot(a: Any, b: Any) -> Any:
    return dot(ravel(a), ravel(b))


def inner(a: Any, b: Any) -> Any:
    a, b = _promote("inner", a, b)
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    return st.dot_general(a, b, (((ndim(a) - 1,), (ndim(b) - 1,)), ((), ())))


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
    return st.dot_general(a, b, ((ca, cb), ((), ())))


def einsum(subscripts: str, *operands: Any) -> Any:
    """Einstein summation over explicit or implicit subscripts ("ij,jk->ik", "ij,jk"), operand by operand with
    dot_general. Repeated indices within one operand (diagonals) and '...' are not supported."""
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise NotImplementedError("einsum: '...' (ellipsis) subscripts are not supported yet")
    inputs_text, arrow, output = spec.partition("->")
    inputs = inputs_text.split(",")
    if len(inputs) != len(operands):
        raise ValueError(f"einsum: {len(inputs)} operand subscripts in {subscripts!r} but {len(operands)} operands")
    if not arrow:
        counts = {c: inputs_text.count(c) for c in inputs_text if c.isalpha()}
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    operands = list(_promote("einsum", *operands))
    for letters, x in zip(inputs, operands):
        if len(letters) != ndim(x):
            raise ValueError(f"einsum: subscripts {letters!r} do not match an operand of shape {shape(x)}")
        if len(set(letters)) != len(letters):
            raise NotImplementedError(f"einsum: repeated subscripts within one operand ({letters!r}) are not "
                                      "supported yet")
    sizes: dict[str, int] = {}
    for letters, x in zip(inputs, operands):
        for c, n in zip(letters, shape(x)):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")

    def sum_unused(x: Any, letters: str, keep: str) -> tuple[Any, str]:
        axes = tuple(i for i, c in enumerate(letters) if c not in keep)
        if not axes:
            return x, letters
        return st.reduce_sum(x, axes), "".join(c for c in letters if c in keep)

    result, letters = operands[0], inputs[0]
    for k in range(1, len(operands)):
        rest = "".join(inputs[k + 1:]) + output
        other, other_letters = operands[k], inputs[k]
        result, letters = sum_unused(result, letters, other_letters + rest)
        other, other_letters = sum_unused(other, other_letters, letters + rest)
        shared = [c for c in letters if c in other_letters]
        batch = [c for c in shared if c in rest]
        contract = [c for c in shared if c not in rest]
        dims = ((tuple(letters.index(c) for c in contract), tuple(other_letters.index(c) for c in contract)),
                (tuple(letters.index(c) for c in batch), tuple(other_letters.index(c) for c in batch)))
        result = st.dot_general(result, other, dims)
        letters = ("".join(batch) + "".join(c for c in letters if c not in shared)
                   + "".join(c for c in other_letters if c not in shared))
    result, letters = sum_unused(result, letters, output)
    if set(output) - set(letters):
        raise ValueError(f"einsum: output subscripts {output!r} name indices absent from the operands")
    return st.transpose(result, tuple(letters.index(c) for c in output))


# ---------------------------------------------------------------------------------------------------------------
# Indexing (basic: ints, slices with positive steps, None, Ellipsis)
def _getitem(x: Any, index: Any) -> Any:
    if not isinstance(index, tuple):
        index = (index,)
    s = shape(x)
    n_real = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(s):
        raise IndexError(f"too many indices for array of shape {s}: {len(index)} given")
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([builtins.slice(None)] * (len(s) - n_real))
        else:
            expanded.append(i)
    expanded.extend([builtins.slice(None)] * (len(s) - builtins.sum(1 for i in expanded if i is not None)))
    starts, limits, strides, out_shape, dim = [], [], [], [], 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            continue
        size_d = s[dim]
        if isinstance(i, builtins.slice):
            start, stop, step = i.indices(size_d)
            if step < 0:
                raise NotImplementedError("indexing with a negative slice step is not supported yet")
            stop = builtins.max(stop, start)
            starts.append(start)
            limits.append(stop)
            strides.append(step)
            out_shape.append(len(range(start, stop, step)))
        else:
            if isinstance(i, Tracer) or (isinstance(i, Array) and i.ndim > 0) or isinstance(i, list | _np.ndarray):
                raise NotImplementedError(
                    "indexing with arrays (gather) is not supported yet; use static ints and slices")
            try:
                k = operator_index(i)
            except TypeError:
                raise TypeError(f"invalid index {i!r} of type {type(i).__name__}") from None
            if not -size_d <= k < size_d:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {size_d}")
            k %= size_d
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
        dim += 1
    sliced = st.slice(x, starts, limits, strides)
    if tuple(out_shape) != shape(sliced):
        sliced = st.reshape(sliced, tuple(out_shape))
    return sliced


# ---------------------------------------------------------------------------------------------------------------
# Methods of Array and Tracer
def _reflected(fn: Any) -> Any:
    return lambda self, other: fn(other, self)


def _method_reshape(self: Any, *shape_args: Any, order: str = "C") -> Any:
    newshape = shape_args[0] if len(shape_args) == 1 and not isinstance(shape_args[0], int) else shape_args
    return reshape(self, newshape, order)


def _method_transpose(self: Any, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = axes[0]
    return transpose(self, axes if axes else None)


def _tracer_len(self: Any) -> int:
    if not self.shape:
        raise TypeError("len() of unsized object (a 0-d traced array)")
    return self.shape[0]


def _tracer_iter(self: Any) -> Any:
    if not self.shape:
        raise TypeError("iteration over a 0-d traced array")
    return (self[i] for i in range(self.shape[0]))


_METHODS = {
    "__add__": add, "__radd__": _reflected(add), "__sub__": subtract, "__rsub__": _reflected(subtract),
    "__mul__": multiply, "__rmul__": _reflected(multiply), "__truediv__": true_divide,
    "__rtruediv__": _reflected(true_divide), "__floordiv__": floor_divide, "__rfloordiv__": _reflected(floor_divide),
    "__mod__": remainder, "__rmod__": _reflected(remainder), "__pow__": power, "__rpow__": _reflected(power),
    "__matmul__": matmul, "__rmatmul__": _reflected(matmul), "__neg__": negative, "__pos__": positive,
    "__abs__": absolute, "__eq__": equal, "__ne__": not_equal, "__lt__": less, "__le__": less_equal,
    "__gt__": greater, "__ge__": greater_equal, "__and__": bitwise_and, "__rand__": _reflected(bitwise_and),
    "__or__": bitwise_or, "__ror__": _reflected(bitwise_or), "__xor__": bitwise_xor,
    "__rxor__": _reflected(bitwise_xor), "__invert__": invert, "__getitem__": _getitem,
    "T": property(lambda self: transpose(self)), "mT": property(lambda self: swapaxes(self, -1, -2)),
    "reshape": _method_reshape, "transpose": _method_transpose, "astype": astype, "sum": sum, "mean": mean,
    "max": max, "min": min, "argmax": argmax, "argmin": argmin, "all": all, "any": any, "var": var, "std": std,
    "ravel": ravel, "flatten": ravel, "squeeze": squeeze, "dot": dot, "clip": clip, "swapaxes": swapaxes,
}
install_array_methods(Array, _METHODS)
install_array_methods(Tracer, {**_METHODS, "__len__": _tracer_len, "__iter__": _tracer_iter})
Tracer.__hash__ = None  # type: ignore[assignment]
Array.__hash__ = None  # type: ignore[assignment]

__all__ = [n for n in dir() if not n.startswith("_") and n not in ("annotations", "builtins", "math", "Any",
                                                                     "Sequence")]
_ = (finfo, iinfo, array)
