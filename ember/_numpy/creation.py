"""Array creation of ember.numpy: array, asarray, full, zeros, ones, *_like, arange, linspace, eye, identity."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as _np

from ember._core import dtypes as dt
from ember._runtime.array import array as _host_array, check_order
from ember._runtime.array import Array, device_put
from ember._runtime.sharded import put as put_by_sharding
from ember._runtime.dlpack import from_dlpack
from ember._core import Tracer, aval_of, is_python_scalar
from ember._core.sharding import MeshContexts, NamedSharding, PartitionSpec, context_mesh
from ember import _prims as lax
from ember._core import scalar_literal
from ember._core.checks import normalize_axis, static_dims, static_int, static_ints
from ember._core.shape_poly import is_symbolic_dim, max_dim
from ember._prims.shape import dim_as_value

from ember._numpy.dtypes import int32
from ember._numpy.promotion import _as_operand, _broadcast_shapes, _is_array, _broadcast_to_shape, _promote
from ember._numpy.shape import astype, broadcast_to, concatenate, expand_dims, moveaxis, stack
from ember._numpy.ufuncs import log10, multiply, power, sign
from ember._api.sharding import reshard, takes_out_sharding
from ember._prims.explicit import resolve


def _holds_tracers(x: Any) -> bool:
    return builtins.any(_holds_tracers(e) if isinstance(e, list | tuple) else isinstance(e, Tracer) for e in x)


def _stack_nested(x: Any) -> Any:
    """A nested sequence holding traced values, stacked level by level in the common dtype of its elements."""
    items = [_stack_nested(e) if isinstance(e, list | tuple) else e for e in x]
    return stack(_promote("array", *items))


@takes_out_sharding("array")
def array(object: Any, dtype: Any = None, copy: bool | None = True, order: str | None = "K",  # noqa: A002
          ndmin: int = 0, *, device: Any = None) -> Any:
    """An array from an array, a scalar or a nested sequence (numpy's dtype rules, 32-bit defaults); under a
    transformation, a nested sequence of traced values is stacked (jnp.array([x, 2 * x])). copy follows numpy 2:
    True gives a new array, None copies only when needed, False raises ValueError when a copy is needed (see
    ember._runtime.array.array); a tracer leaked out of a finished staging raises UnexpectedTracerError."""
    return _made(_array_of("array", object, dtype, copy, order, ndmin), device, object)


@takes_out_sharding("asarray")
def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None,
            device: Any = None) -> Any:
    """array without a copy unless one is needed (copy=None), or as copy says."""
    return _made(_array_of("asarray", a, dtype, copy, order, 0), device, a)


def _array_of(op: str, object: Any, dtype: Any, copy: bool | None, order: str | None, ndmin: int) -> Any:  # noqa: A002
    if isinstance(object, list | tuple) and _holds_tracers(object):
        check_order(op, order)
        if copy is False:
            raise ValueError(f"{op}: unable to avoid a copy (stacking a sequence of traced values) while creating "
                             "an array with copy=False")
        stacked = _stack_nested(object)
        result = stacked if dtype is None else astype(stacked, dtype)
        return _host_array(result, ndmin=ndmin, copy=None, op=op)
    return _host_array(object, dtype, copy, order, ndmin, op=op)


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    return _placed(_full(shape, fill_value, None if dtype is None else dt.check_user_dtype(dtype, "full")), device,
                   out_sharding, "full")


def _placed(out: Any, device: Any, out_sharding: Any, op: str) -> Any:
    """out on device=, or split as out_sharding= says (JAX's explicit sharding mode: a NamedSharding, or a
    PartitionSpec over the current mesh; the result's type carries it)."""
    if out_sharding is None:
        return _device_put(out, device)
    if device is not None:
        raise ValueError(f"{op}: pass one of device= and out_sharding=")
    return reshard(out, resolve(op, out_sharding))


def _full(shape: Any, fill_value: Any, dtype: _np.dtype | None = None) -> Any:
    shape = static_dims("full", "shape", shape)
    fill = _as_operand(fill_value)
    if dtype is None and is_python_scalar(fill):
        return lax.full(shape, fill)  # (weakly typed, as JAX's: a Python number's type is weak)
    if dtype is None:
        dtype = dt.dtype_and_weak(fill)[0]
    if not is_python_scalar(fill) and aval_of(fill).shape != ():
        return broadcast_to(astype(fill, dtype), shape)
    return lax.full(shape, fill, dtype)


def _filled(op: str, shape: Any, value: int, dtype: Any, device: Any, out_sharding: Any = None) -> Any:
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, op)
    return _placed(lax.full(static_dims(op, "shape", shape), value, dtype), device, out_sharding, op)


def zeros(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    return _filled("zeros", shape, 0, dtype, device, out_sharding)


def ones(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    return _filled("ones", shape, 1, dtype, device, out_sharding)


def _like(op: str, x: Any, dtype: Any, shape: Any) -> tuple[Any, Any]:
    """The shape and dtype of a *_like function's result: x's (its dtype as it is, 64-bit ones too), or those
    asked for (a dtype asked for is narrowed without enable_x64, with a warning). x may also be any object with
    a shape and a dtype (a ShapeDtypeStruct, as eval_shape returns), as in JAX."""
    if not _is_array(x) and not isinstance(x, _np.ndarray | _np.generic) and hasattr(x, "shape") \
            and hasattr(x, "dtype"):
        x_shape, x_dtype = tuple(x.shape), dt.canonicalize_dtype(_np.dtype(x.dtype))
    else:
        aval = aval_of(_as_operand(x))
        x_shape, x_dtype = aval.shape, aval.dtype
    return (x_shape if shape is None else static_dims(op, "shape", shape),
            x_dtype if dtype is None else dt.check_user_dtype(dtype, op))


def _placed_like(out: Any, x: Any, shape: Any, device: Any) -> Any:
    """A *_like function's result placed as JAX places it: on device= when given, else committed where x is
    committed (a one-device x: its device; a sharded x: its sharding, when shape is not given)."""
    if device is not None or not isinstance(x, Array) or isinstance(x, Tracer) or not x.committed:
        return _device_put(out, device)
    if type(x) is Array:
        return device_put(out, x.device)
    return out if shape is not None else put_by_sharding(out, x.sharding)


@takes_out_sharding("zeros_like")
def zeros_like(x: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    out_shape, dtype = _like("zeros_like", x, dtype, shape)
    return _placed_like(lax.full(out_shape, 0, dtype), x, shape, device)


@takes_out_sharding("ones_like")
def ones_like(x: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    out_shape, dtype = _like("ones_like", x, dtype, shape)
    return _placed_like(lax.full(out_shape, 1, dtype), x, shape, device)


@takes_out_sharding("full_like")
def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    out_shape, dtype = _like("full_like", x, dtype, shape)
    return _placed_like(_full(out_shape, fill_value, dtype), x, shape, device)


def empty(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    """zeros (XLA arrays are always initialised), as jax.numpy."""
    return zeros(shape, dtype, device=device, out_sharding=out_sharding)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    return zeros_like(prototype, dtype, shape, device=device)


def copy(a: Any, order: str | None = None) -> Any:
    """A copy of a, as a new array."""
    return array(a, copy=True, order=order)


def fromfunction(function: Any, shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """function applied to the index grids of shape (each of dtype), as numpy's fromfunction."""
    dims = static_ints("fromfunction", "shape", shape)
    d = dt.check_user_dtype(dtype, "fromfunction")
    return function(*[lax.broadcasted_iota(d, dims, i) for i in range(len(dims))], **kwargs)


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    """The bytes of buffer viewed as a 1-D array of dtype (read on the host, as jax.numpy)."""
    return asarray(_np.frombuffer(buffer, dtype=_host_dtype(dtype), count=count, offset=offset))


def _host_dtype(dtype: Any) -> _np.dtype:
    """The dtype the host reads bytes or text as (float is float64 there, as numpy's); the result is then
    narrowed as any numpy value entering ember (to float32 without enable_x64, as jax.numpy's)."""
    return _np.dtype(dtype) if dtype in (float, int, complex) else dt.parse_dtype(dtype)


def fromfile(file: Any, dtype: Any = float, count: int = -1, sep: str = "", offset: int = 0) -> Any:
    """An array read from a file on the host (numpy's fromfile), placed on the device."""
    return asarray(_np.fromfile(file, dtype=_host_dtype(dtype), count=count, sep=sep, offset=offset))


def fromiter(iterable: Any, dtype: Any, count: int = -1) -> Any:
    """numpy's fromiter, as an Array (JAX refuses it: the iterable is consumed at trace time); read on the host
    and narrowed as frombuffer's bytes (silently, as jax.numpy.frombuffer)."""
    return asarray(_np.fromiter(iterable, dtype=_host_dtype(dtype), count=count))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """Numbers parsed from a text string separated by sep (numpy's text mode)."""
    return asarray(_np.fromstring(string, dtype=_host_dtype(dtype), count=count, sep=sep))


@takes_out_sharding("arange")
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None) -> Any:
    return _device_put(_arange(start, stop, step, dtype), device)


def _arange(start: Any, stop: Any, step: Any, dtype: Any) -> Any:
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError("arange: start, stop and step must be concrete numbers (the length of the result "
                            "must be known when tracing)")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if is_symbolic_dim(start) or is_symbolic_dim(stop) or is_symbolic_dim(step):
        return _symbolic_arange(start, stop, step, dtype)
    values = _np.arange(start, stop, step)
    if dtype is None:  # Python numbers give the default dtypes; typed numpy scalars count (np.int64(5): int64)
        dtype = dt.result_type(*(_scalar_arg("arange", v) for v in (start, stop, step)))
        if not dt.is_float(dtype) and values.dtype.kind == "f":
            dtype = dt.to_inexact_dtype(dtype)
        dtype = dt.canonical_dtype(dtype)
    else:
        dtype = dt.check_user_dtype(dtype, "arange")
    n = len(values)
    if builtins.all(isinstance(v, int) for v in (start, stop, step)) and not dt.is_complex(dtype):
        ramp = lax.iota(dtype, n)
        if (start, step) == (0, 1):
            return ramp
        return lax.add(lax.mul(ramp, scalar_literal(step, dtype)), scalar_literal(start, dtype))
    values = values.astype(dtype)
    return _made(asarray(values), None, values, computed=True)  # (as JAX's computed one, under a context mesh)


def _scalar_arg(name: str, v: Any) -> Any:
    """A start/stop/step argument for its dtype: Python numbers, numpy scalars and 0-d arrays."""
    if is_python_scalar(v) or isinstance(v, _np.generic) or (isinstance(v, _np.ndarray) and v.ndim == 0):
        return v
    if isinstance(v, Tracer):
        raise TypeError(f"{name}: start, stop and step must be concrete numbers, got a traced value {v!r}")
    if hasattr(v, "aval") and v.aval.shape == ():  # a concrete ember Array
        return v
    raise TypeError(f"{name}: start, stop and step must be scalars, got {type(v).__name__} {v!r:.60}")


def _device_put(x: Any, device: Any) -> Any:
    """x on device (the array API's device= keyword); None leaves it where it is (the default device)."""
    if device is None or isinstance(x, Tracer):
        return x
    return device_put(x, device)


def _made(x: Any, device: Any, source: Any, computed: bool = False) -> Any:
    """array/asarray's result x, made from source, on device; without one, an array made of host values (source
    neither an array nor a tracer) under a context mesh (set_mesh) is put on the mesh's devices, replicated, as
    JAX puts it (computed: as JAX computes it, typed with one None per dimension on a mesh of Explicit axes)."""
    if device is None and MeshContexts.active and not isinstance(source, (Array, Tracer)) and not isinstance(
            x, Tracer) and (mesh := context_mesh()) is not None:
        typed = computed and mesh.are_all_axes_explicit
        spec = PartitionSpec(*[None] * x.ndim) if typed else PartitionSpec()
        return put_by_sharding(x, NamedSharding(mesh, spec), x.aval.weak_type)
    return _device_put(x, device)


def _linspace_dtype(name: str, start: Any, stop: Any, dtype: Any) -> Any:
    if dtype is not None:
        return dt.check_user_dtype(dtype, name)
    kinds = [_scalar_arg(name, v) if _np.ndim(v) == 0 and not isinstance(v, Tracer) else v for v in (start, stop)]
    return dt.to_inexact_dtype(dt.result_type(*kinds, float))


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """num evenly spaced values from start to stop (stop itself with endpoint); start and stop may be arrays
    (broadcast; the new axis goes at axis) and traced values. With retstep, also the spacing."""
    num = static_int("linspace", "num", num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    dtype = _linspace_dtype("linspace", start, stop, dtype)
    compute = dt.to_inexact_dtype(dtype) if not dt.is_inexact(dtype) else dtype
    compute = dt.float32 if compute in (dt.float16, dt.bfloat16) else compute
    lo, hi = (lax.convert_element_type(_as_array_operand(v), compute, False) for v in (start, stop))
    ramp_dtype = dt.real_dtype(compute)  # (the ramp of a complex linspace is real, converted where it is used)
    lo, hi = _promote("linspace", lo, hi)
    bshape = _broadcast_shapes("linspace", aval_of(lo).shape, aval_of(hi).shape)
    lo, hi = (_broadcast_to_shape(v, bshape) for v in (lo, hi))
    div = (num - 1) if endpoint else num
    out_shape = (num,) + bshape
    ramp = lax.convert_element_type(lax.broadcasted_iota(ramp_dtype, out_shape, 0), compute)
    lo_b = lax.broadcast_in_dim(lo, out_shape, tuple(range(1, len(out_shape))))
    hi_b = lax.broadcast_in_dim(hi, out_shape, tuple(range(1, len(out_shape))))
    delta = lax.sub(hi_b, lo_b)
    if div > 0:
        step = lax.div(delta, scalar_literal(div, compute))
        values = lax.add(lo_b, lax.mul(ramp, step))
        if endpoint and num > 1:  # the last value is stop itself
            last = lax.eq(ramp, scalar_literal(num - 1, compute))
            values = lax.select(last, hi_b, values)
    else:
        step = lax.full_like(delta, _np.nan)
        values = lo_b
    values = lax.convert_element_type(values if dt.is_inexact(dtype) else lax.floor(values), dtype)
    values = _device_put(moveaxis(values, 0, normalize_axis("linspace", axis, len(out_shape))), device)
    if retstep:
        spacing = lax.div(lax.sub(hi, lo), scalar_literal(div, compute)) if div > 0 else lax.full_like(lo, _np.nan)
        return values, lax.convert_element_type(spacing, dtype if dt.is_inexact(dtype) else compute)
    return values


def _as_array_operand(v: Any) -> Any:
    v = _as_operand(v, "linspace", 0)
    if is_python_scalar(v):
        return _promote("linspace", v)[0]
    return asarray(v) if isinstance(v, (_np.ndarray, _np.generic, list, tuple)) else v


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0, dtype: Any = None,
             axis: int = 0) -> Any:
    """base ** linspace(start, stop, num): num values evenly spaced on a log scale."""
    dtype_ = _linspace_dtype("logspace", start, stop, dtype)
    exponents = linspace(start, stop, num, endpoint, dtype=dt.to_inexact_dtype(dtype_), axis=axis)
    out = power(base, exponents)
    return lax.convert_element_type(out if dt.is_inexact(dtype_) else lax.floor(out), dtype_)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None, axis: int = 0
              ) -> Any:
    """num values in geometric progression from start to stop (both nonzero, of one sign; start and stop are
    reached exactly)."""
    if not isinstance(start, Tracer) and not isinstance(stop, Tracer):
        if _np.any(_np.asarray(start) == 0) or _np.any(_np.asarray(stop) == 0):
            raise ValueError("geomspace: start and stop must be nonzero")
    dtype_ = _linspace_dtype("geomspace", start, stop, dtype)
    compute = dt.to_inexact_dtype(dtype_)
    lo, hi = (lax.convert_element_type(_as_array_operand(v), compute, False) for v in (start, stop))
    s = sign(lo)
    exps = linspace(log10(lax.abs(lo)), log10(lax.abs(hi)), num, endpoint, dtype=compute, axis=0)
    out = multiply(power(10.0, exps), s)
    if num:
        body = out[1:-1] if endpoint and num > 1 else out[1:]
        ends = [expand_dims(lax.convert_element_type(lo, compute), 0), body]
        if endpoint and num > 1:
            ends.append(expand_dims(lax.convert_element_type(hi, compute), 0))
        out = concatenate([_broadcast_to_shape(e, (aval_of(e).shape[0],) + aval_of(out).shape[1:]) for e in ends])
    out = moveaxis(out, 0, normalize_axis("geomspace", axis, aval_of(out).ndim))
    return lax.convert_element_type(out if dt.is_inexact(dtype_) else lax.round(out, 1), dtype_)


def _symbolic_arange(start: Any, stop: Any, step: Any, dtype: Any) -> Any:
    """arange with symbolic dimensions among its bounds (ember.export): integer bounds, a constant nonzero step;
    start + step * iota of the count, which is max(0, ceil((stop - start) / step))."""
    if is_symbolic_dim(step) or not all(is_symbolic_dim(v) or isinstance(v, int | _np.integer) for v in (start, stop)):
        raise TypeError(f"arange: with symbolic dimensions, start and stop must be ints or dimensions and step a "
                        f"constant int, got start={start}, stop={stop}, step={step}")
    step = operator.index(step)
    if step == 0:
        raise ValueError("arange: step must not be zero")
    count = max_dim(0, (stop - start + step - 1) // step) if step > 0 else \
        max_dim(0, (start - stop - step - 1) // -step)
    dtype = dt.default_int_dtype() if dtype is None else dt.check_user_dtype(dtype, "arange")
    out = lax.broadcasted_iota(dtype, (count,), 0)
    if step != 1:
        out = lax.mul(out, _np.array(step, dtype))
    if not (isinstance(start, int) and start == 0):
        out = lax.add(out, dim_as_value(start, dtype, False) if is_symbolic_dim(start) else _np.array(start, dtype))
    return out


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None) -> Any:
    return _device_put(_eye(n, m, k, dtype), device)


def _eye(n: int, m: int | None, k: int, dtype: Any) -> Any:
    n = n if is_symbolic_dim(n) else static_int("eye", "N", n)
    m = n if m is None else m if is_symbolic_dim(m) else static_int("eye", "M", m)
    k = static_int("eye", "k", k)
    k = max(min(k, m), -n)  # (a diagonal beyond the matrix: all zeros, with k in the index dtype's range)
    dtype = dt.check_user_dtype(dtype, "eye") if dtype is not None else dt.default_float_dtype()
    rows = lax.broadcasted_iota(int32, (n, m), 0)
    cols = lax.broadcasted_iota(int32, (n, m), 1)
    return lax.convert_element_type(lax.eq(lax.add(rows, k), cols), dtype)


def identity(n: int, dtype: Any = None) -> Any:
    return eye(n, dtype=dtype)


__all__ = ["arange", "array", "asarray", "eye", "full", "full_like", "identity", "linspace", "ones", "ones_like",
           "zeros", "zeros_like", "fromfile", "logspace", "geomspace", "empty", "empty_like", "copy", "fromfunction",
           "frombuffer", "fromiter", "fromstring", "from_dlpack"]
