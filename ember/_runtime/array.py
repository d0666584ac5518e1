"""Array: an immutable array living in a device buffer."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ember._core import ArrayMethods, ShapedArray, Tracer, is_python_scalar
from ember._core import dtypes as dt
from ember._core.dtypes import canonicalize_dtype
from ember._prims.shape import convert_element_type
from ember._runtime import pjrt as _pjrt
from ember._runtime.backends import get_client


class Array(ArrayMethods):
    """A device-resident array. Operators and methods follow ember.numpy (numpy semantics, JAX promotion)."""
    __slots__ = ("_buffer", "aval", "_host", "__weakref__")
    __array_priority__ = 100

    def __init__(self) -> None:
        raise TypeError("create Arrays with ember.array, ember.asarray or ember.device_put")

    @classmethod
    def _from_buffer(cls, buffer: _pjrt.Buffer, aval: ShapedArray) -> "Array":
        self = object.__new__(cls)
        self._buffer = buffer
        self.aval = aval
        self._host = None
        return self

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def buffer(self) -> _pjrt.Buffer:
        if self._buffer.is_deleted:
            raise RuntimeError(f"Array {self.aval.str_short()} has been deleted")
        return self._buffer

    @property
    def device(self) -> _pjrt.Device:
        return self._buffer.device

    def devices(self) -> set[_pjrt.Device]:
        return {self._buffer.device}

    def _value(self) -> np.ndarray:
        if self._host is None:
            host = self.buffer.to_numpy()
            host.flags.writeable = False
            self._host = host
        return self._host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._value()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def block_until_ready(self) -> "Array":
        self.buffer.block_until_ready()
        return self

    def delete(self) -> None:
        self._buffer.delete()
        self._host = None

    def is_deleted(self) -> bool:
        return self._buffer.is_deleted

    def item(self) -> Any:
        return self._value().item()

    def tolist(self) -> Any:
        return self._value().tolist()

    def copy(self) -> "Array":
        return device_put(self._value())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of an array {self.aval.str_short()} with more than one element is "
                             "ambiguous; use .any() or .all()")
        return bool(self._value())

    def __int__(self) -> int:
        return int(self._value())

    def __float__(self) -> float:
        return float(self._value())

    def __index__(self) -> int:
        if not dt.is_int(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got {self.aval.str_short()}")
        return int(self._value())

    def __complex__(self) -> complex:
        return complex(self._value())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._value().item(), spec)
        return format(str(self), spec)

    def __str__(self) -> str:
        return str(self._value())

    def __repr__(self) -> str:
        if self._buffer.is_deleted:
            return f"Array(<deleted>, shape={self.shape}, dtype={self.dtype.name})"
        prefix = "Array("
        body = np.array2string(self._value(), separator=", ", prefix=prefix)
        extras = f"dtype={self.dtype.name}"
        if self.weak_type:
            extras += ", weak_type=True"
        return f"{prefix}{body}, {extras}, device={self._buffer.device})"

    def __reduce__(self) -> Any:
        return (_rebuild, (self._value(), self.weak_type))


def _rebuild(value: np.ndarray, weak_type: bool) -> Array:
    return device_put(value, weak_type=weak_type)


def _default_dtype_of(x: Any) -> np.dtype:
    """The dtype of a nested sequence, as JAX's: the promotion of its elements' types, where Python numbers are
    weak (so [1.5, 2.0] has the default float dtype, float32 unless enable_x64, and [np.float16(1), 2.0] is
    float16) and typed numpy scalars and arrays count with their dtypes (so [np.float64(1), 2.0] is float64)."""
    value = np.asarray(x)
    if value.dtype.kind not in "biuf":
        return canonicalize_dtype(value.dtype)  # (a clear error for strings, objects, complex numbers)
    kinds: set[Any] = set()
    if value.size and not _element_types(x, kinds):
        return canonicalize_dtype(value.dtype)  # elements ember does not know: numpy's dtype
    if not kinds:  # empty: the default float
        return dt.default_float_dtype()
    # (identity tests: a numpy dtype compares equal to the Python type of its kind, np.dtype("int64") == int)
    return dt.promote_types(*(dt.python_scalar_dtype(k) if isinstance(k, type) else (k, False) for k in kinds))[0]


def _element_types(x: Any, kinds: set[Any]) -> bool:
    """Collect the element types of a nested sequence into kinds (Python scalar types, and the dtypes of numpy
    values); False if an element is of another type."""
    for kind in set(map(type, x)):
        if kind is list or kind is tuple:
            if not all(_element_types(e, kinds) for e in x if type(e) is kind):
                return False
        elif kind is bool or kind is int or kind is float:
            kinds.add(kind)
        elif kind is np.ndarray:
            kinds.update(canonicalize_dtype(e.dtype) for e in x if type(e) is np.ndarray)
        elif issubclass(kind, np.generic):
            kinds.add(canonicalize_dtype(np.dtype(kind)))
        else:
            return False
    return True


def device_put(x: Any, device: _pjrt.Device | None = None, *, weak_type: bool = False) -> Array:
    """Copy a value (numpy array, Python scalar or Array) to a device (by default the first one)."""
    if isinstance(x, Tracer):
        return x  # type: ignore[return-value]
    if isinstance(x, Array):
        if device is None or x.device is device:
            return x
        x = x._value()
    if isinstance(x, np.ndarray | np.generic):
        try:
            dtype = canonicalize_dtype(x.dtype)
        except TypeError as err:
            raise TypeError(f"device_put: cannot convert a numpy array of shape {np.shape(x)}: {err}") from None
        value = np.require(x, requirements="C")
        if not value.dtype.isnative:  # (">f4"): byte-swapped to the machine's order, as JAX does
            value = value.astype(dtype)
    elif is_python_scalar(x):
        dtype, weak_type = dt.dtype_and_weak(x)
        value = np.asarray(x, dtype=dtype)
    else:
        try:
            dtype = _default_dtype_of(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"device_put: cannot convert a value of type {type(x).__name__} to an array: {err}"
                            ) from None
        value = np.require(np.asarray(x, dtype=dtype), requirements="C")
    buffer = get_client().buffer_from_numpy(value, device)
    return Array._from_buffer(buffer, ShapedArray(value.shape, dtype, weak_type))


def array(x: Any, dtype: Any = None, copy: bool = True) -> Array:
    """An Array from a numpy array, Python scalar, nested list or Array (numpy's dtype rules, 32-bit defaults)."""
    if isinstance(x, Tracer):
        if dtype is None:
            return x  # type: ignore[return-value]
        return convert_element_type(x, dtype)
    if isinstance(x, Array) and dtype is None:
        return x
    if dtype is not None:
        value = np.asarray(x._value() if isinstance(x, Array) else x, dtype=canonicalize_dtype(dtype))
        return device_put(value)
    if isinstance(x, np.ndarray | np.generic):
        return device_put(x)
    if is_python_scalar(x):
        return device_put(np.asarray(x, dtype=dt.dtype_and_weak(x)[0]))
    if isinstance(x, list | tuple) and any(isinstance(e, Tracer) for e in _flat_items(x)):
        raise TypeError("ember.array: nested sequences of traced values are not supported; use ember.numpy.stack")
    if isinstance(x, list | tuple) and any(isinstance(e, Array) for e in _flat_items(x)):
        x = _to_host_nested(x)
    return device_put(x)


def _flat_items(x: Any) -> Iterator[Any]:
    for e in x:
        if isinstance(e, list | tuple):
            yield from _flat_items(e)
        else:
            yield e


def _to_host_nested(x: Any) -> Any:
    if isinstance(x, list | tuple):
        return [_to_host_nested(e) for e in x]
    return x._value() if isinstance(x, Array) else x


def asarray(x: Any, dtype: Any = None) -> Array:
    return array(x, dtype, copy=False)
