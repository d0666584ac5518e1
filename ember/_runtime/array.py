"""Array: an immutable array living in a device buffer."""
from __future__ import annotations

import operator
from typing import Any, Iterator

import numpy as np

from ember._core import ArrayMethods, ShapedArray, Tracer, check_live, is_python_scalar
from ember._core.refs import RefAval
from ember._core import dtypes as dt
from ember._core.cache import LRUCache
from ember._core.dtypes import abstract_token, parse_dtype
from ember._core.sharding import SingleDeviceSharding
from ember._prims.shape import convert_element_type, copy_p, reshape
from ember._runtime import pjrt as _pjrt
from ember._runtime.backends import get_client
from ember._runtime.fastpath import C
from ember._runtime.layout import Format, format_of
from ember._runtime.guards import Guards, check as check_transfer

_c_block_until_ready = C.block_until_ready if C is not None else None


class _ArrayMeta(type):
    """isinstance(x, ember.Array) is true of concrete Arrays and of tracers (values of a function being staged
    out), as isinstance(x, jax.Array) is in JAX: user code tests for "an array" the same way inside and outside
    jit. Subclass checks are unchanged (issubclass(Tracer, Array) is False, as in JAX). Inside ember, a concrete
    device array is tested with `type(x) is Array` (isinstance of the exact class never reaches this method)."""

    also: tuple[type, ...] = ()  # classes whose instances are Arrays too (ember.random's typed key arrays, as JAX's)

    def __instancecheck__(cls, x: Any) -> bool:
        return type.__instancecheck__(cls, x) or (cls is Array and (
            isinstance(x, Tracer) and type(x.aval) is not RefAval or isinstance(x, _ArrayMeta.also)))


def register_array_type(kind: type) -> None:
    """Make isinstance(x, ember.Array) true of kind's instances (a typed key array is a jax.Array in JAX)."""
    _ArrayMeta.also += (kind,)


class Array(ArrayMethods, metaclass=_ArrayMeta):
    """A device-resident array. Operators and methods follow ember.numpy (numpy semantics, JAX promotion).
    isinstance(x, Array) is also true of tracers (see _ArrayMeta).

    `committed` (as jax.Array.committed): whether the array was placed on its device explicitly (device_put with a
    device or sharding, device= of a creation function, a sharded array) or computed from such an array; an
    uncommitted one (jnp.ones, asarray, device_put without a device, a computation on uncommitted inputs) lives on
    the default device and moves to the device of the committed arguments of a computation it is used in
    (ember._runtime.compiler: Compiled._call_general)."""
    __slots__ = ("_buffer", "aval", "_host", "_origin", "_committed", "__weakref__")
    __array_priority__ = 100

    def __init__(self) -> None:
        raise TypeError("create Arrays with ember.array, ember.asarray or ember.device_put")

    @classmethod
    def _from_buffer(cls, buffer: _pjrt.Buffer, aval: ShapedArray, origin: str | None = None,
                     committed: bool = False) -> "Array":
        """An Array of a buffer; origin names the program that computes it (None for data put on the device),
        for the error its reading raises when that computation fails after its call returned; committed: see
        Array."""
        self = object.__new__(cls)
        self._buffer = buffer
        self.aval = aval
        self._host = None
        self._origin = origin
        self._committed = committed
        return self

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def buffer(self) -> _pjrt.Buffer:
        buffer = self._buffer
        if not buffer.handle:
            raise RuntimeError(f"Array {self.aval.str_short()} has been deleted")
        if not buffer.client.handle:
            raise RuntimeError(f"Array {self.aval.str_short()}: its PJRT client {buffer.client.closed_reason}")
        return buffer

    @property
    def device(self) -> _pjrt.Device:
        return self._buffer.device

    @property
    def committed(self) -> bool:
        """Whether the array is committed to its device(s) (see Array), as jax.Array.committed."""
        return self._committed

    def devices(self) -> set[_pjrt.Device]:
        return {self._buffer.device}

    @property
    def sharding(self) -> Any:
        """Where the array lives: a SingleDeviceSharding (a ShardedArray has its own)."""
        return SingleDeviceSharding(self._buffer.device)

    @property
    def format(self) -> Format:
        """Its layout (the default, row-major: ember has no other) and its sharding (jax.Array.format)."""
        return format_of(self)

    @property
    def addressable_shards(self) -> list["Shard"]:
        """The parts of the array on this process's devices: here the whole array, on its one device."""
        return [Shard(self._buffer.device, tuple(slice(None) for _ in self.shape), 0, self)]

    @property
    def global_shards(self) -> list["Shard"]:
        return self.addressable_shards

    is_fully_addressable = property(lambda self: True)  # (one process)
    is_fully_replicated = property(lambda self: self.sharding.is_fully_replicated)

    def copy_to_host_async(self) -> None:
        """Start copying the array to the host; on the CPU backend the host reads device memory in place."""

    def _value(self) -> np.ndarray:
        if self._host is None:
            buffer = self.buffer
            try:
                host = buffer.host_view()  # CPU: numpy reads the device memory in place
                if host is None:
                    host = buffer.to_numpy()
                    host.flags.writeable = False
            except _pjrt.PjrtOutOfMemoryError as err:
                raise self._out_of_memory(err) from None
            self._host = host
        return self._host

    def _out_of_memory(self, err: _pjrt.PjrtOutOfMemoryError) -> _pjrt.PjrtOutOfMemoryError:
        """The error for reading an array whose computation ran out of memory: a program runs after its call
        returns, so its failure to allocate is reported where its result is read, naming the program and the
        result (the failure may be that of a computation of one of its inputs: it propagates)."""
        by = "" if self._origin is None else f" by {self._origin}"
        return type(err)(f"the computation of an array {self.aval.str_short()}{by} (or of an input of it) failed: "
                         f"{err}", call=err.call, code=err.code)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._read("np.asarray()")
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def block_until_ready(self) -> "Array":
        try:
            self.buffer.block_until_ready()
        except _pjrt.PjrtOutOfMemoryError as err:
            raise self._out_of_memory(err) from None
        return self

    if C is not None:
        def block_until_ready(self) -> "Array":  # noqa: F811 - with the C extension, when it is in use
            try:
                if not _c_block_until_ready(self._buffer):  # False: the buffer cannot be used
                    self.buffer.block_until_ready()  # raises why
            except _pjrt.PjrtOutOfMemoryError as err:
                raise self._out_of_memory(err) from None
            return self

    def delete(self) -> None:
        self._buffer.delete()
        self._host = None

    def is_deleted(self) -> bool:
        return self._buffer.is_deleted

    def unsafe_buffer_pointer(self) -> int:
        """The address of the array's data on its device (as jax.Array's): a donated argument's buffer reused for a
        result has the same one."""
        return self._buffer.unsafe_pointer()

    def _read(self, what: str) -> np.ndarray:
        """The value on the host, for a conversion of the user's (np.asarray, float(), item(), ...): a
        device-to-host transfer the transfer guard checks."""
        if Guards.device_to_host:
            check_transfer("device_to_host", lambda: f"{what} of an Array {self.aval.str_short()} on {self.device}")
        return self._value()

    def item(self) -> Any:
        return self._read("item()").item()

    def tolist(self) -> Any:
        return self._read("tolist()").tolist()

    def copy(self) -> "Array":
        """A new Array with the same contents, on the same device (committed to it if this one is)."""
        return device_put(self._value(), self.device if self._committed else None, weak_type=self.weak_type)

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of an array {self.aval.str_short()} with more than one element is "
                             "ambiguous; use .any() or .all()")
        return bool(self._read("bool()"))

    def __int__(self) -> int:
        return int(self._read("int()"))

    def __float__(self) -> float:
        return float(self._read("float()"))

    def __index__(self) -> int:
        if not dt.is_int(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got {self.aval.str_short()}")
        return int(self._read("__index__()"))

    def __complex__(self) -> complex:
        return complex(self._read("complex()"))

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
        return f"{prefix}{body}, {extras})"  # (as JAX's: the device is x.device, the sharding x.sharding)

    def __reduce__(self) -> Any:
        return (_rebuild, (self._value(), self.weak_type))


if C is not None:  # its Callers create Arrays without __init__ (setting every slot at its offset)
    C.register_array_type(Array)
    C.register_ndarray_type(np.ndarray)


class Token:
    """A token (JAX's jax._src.core.Token): the value of type Tok that lax.create_token and lax.after_all make (and
    programs take and return), holding XLA's token buffer; it has no data to read. ember.typeof(token) is
    AbstractToken(). Not an Array: no arithmetic, no conversion to numpy; a pytree leaf."""
    __slots__ = ("_buffer",)
    aval = abstract_token

    def __init__(self, buffer: _pjrt.Buffer):
        self._buffer = buffer

    @property
    def device(self) -> _pjrt.Device:
        return self._buffer.device

    def block_until_ready(self) -> "Token":
        """Wait until the program that made this token has run (as JAX's Token.block_until_ready)."""
        self._buffer.block_until_ready()
        return self

    def __repr__(self) -> str:
        return "Token()"


class Shard:
    """One device's part of an array, as jax.Shard: the device, its index (a tuple of slices into the whole
    array), its replica_id (0 for the first copy of a part held by several devices) and its data (an Array)."""
    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device: _pjrt.Device, index: tuple[slice, ...], replica_id: int, data: Array):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self) -> str:
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id}, data={self.data})"


def _rebuild(value: np.ndarray, weak_type: bool) -> Array:
    return device_put(value, weak_type=weak_type)


def _default_dtype_of(x: Any) -> np.dtype:
    """The dtype of a nested sequence, as JAX's: the promotion of its elements' types, where Python numbers are
    weak (so [1.5, 2.0] has the default float dtype, float32 unless enable_x64, and [np.float16(1), 2.0] is
    float16) and typed numpy scalars and arrays count with their dtypes (so [np.float64(1), 2.0] is float64)."""
    value = np.asarray(x)
    if value.dtype.kind not in "biufc":
        return parse_dtype(value.dtype)  # (a clear error for strings, objects, datetimes)
    kinds: set[Any] = set()
    if value.size and not _element_types(x, kinds):
        return dt.canonicalize_dtype(value.dtype)  # elements ember does not know: numpy's dtype
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
        elif kind is bool or kind is int or kind is float or kind is complex:
            kinds.add(kind)
        elif kind is np.ndarray:
            kinds.update(dt.canonicalize_dtype(e.dtype) for e in x if type(e) is np.ndarray)
        elif issubclass(kind, np.generic):
            kinds.add(dt.canonicalize_dtype(np.dtype(kind)))
        else:
            return False
    return True


_avals = LRUCache("eager_cache_size")  # aval -> the one equal aval that eager Arrays carry


def canonical_aval(aval: ShapedArray) -> ShapedArray:
    """One object for equal avals: Arrays made from host values and by eager operations carry it, and the eager
    fast paths' cache keys hold it, so a lookup finds a key's avals by identity instead of comparing them in Python
    (ember._runtime.eager)."""
    found = _avals.get(aval)
    if found is None:
        _avals.store(aval, aval)
        return aval
    return found


def device_put(x: Any, device: _pjrt.Device | None = None, *, weak_type: bool = False) -> Array:
    """Copy a value (numpy array, Python scalar or Array) to a device, the result committed to it (as JAX's); by
    default to the default device, uncommitted (an Array is returned as it is, committed or not)."""
    if isinstance(x, Tracer):
        return check_live(x, "device_put")  # type: ignore[return-value]
    if device is not None and not isinstance(device, _pjrt.Device):
        raise TypeError(f"device_put: device must be an ember device (from ember.devices()) or None, got "
                        f"{device!r} of type {type(device).__name__}")
    if type(x) is Array:
        if device is None or (x._committed and x._buffer.device is device):
            return x
        if x._buffer.device is device:  # (committed now: the same buffer, as JAX's)
            return Array._from_buffer(x.buffer, x.aval, x._origin, True)
        if Guards.device_to_device:
            check_transfer("device_to_device", lambda: f"device_put of {x.aval.str_short()} from {x.device} to "
                           f"{device}", explicit_transfer=True)
        x = x._value()
    elif Guards.host_to_device:
        check_transfer("host_to_device", lambda: f"device_put of a {type(x).__name__}", explicit_transfer=True)
    if isinstance(x, np.ndarray | np.generic):
        try:
            dtype = dt.canonicalize_dtype(x.dtype)
        except TypeError as err:
            raise TypeError(f"device_put: cannot convert a numpy array of shape {np.shape(x)}: {err}") from None
        value = np.require(x, requirements="C")
        if value.dtype != dtype:  # (">f4": byte-swapped to the machine's order; float64 narrowed, as JAX does)
            value = value.astype(dtype)
    elif is_python_scalar(x):
        dtype, weak_type = dt.dtype_and_weak(x)
        dt.check_int_fits(x, dtype)
        value = np.asarray(x, dtype=dtype)
    else:
        try:
            dtype = _default_dtype_of(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"device_put: cannot convert a value of type {type(x).__name__} to an array: {err}"
                            ) from None
        value = np.require(np.asarray(x, dtype=dtype), requirements="C")
    buffer = get_client().buffer_from_numpy(value, device)
    return Array._from_buffer(buffer, canonical_aval(ShapedArray(value.shape, dtype, weak_type)), None,
                              device is not None)


def check_order(op: str, order: Any) -> None:
    """numpy's order argument: ember arrays are row-major, so 'C', 'A', 'K' (and None) are accepted."""
    if order in (None, "K", "A", "C"):
        return
    if order == "F":
        raise NotImplementedError(f"{op}: order='F' is not supported: ember arrays are row-major (order 'C')")
    raise ValueError(f"{op}: order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")


def _no_copy_possible(op: str, what: str) -> ValueError:
    return ValueError(f"{op}: unable to avoid a copy ({what}) while creating an array with copy=False; use "
                      "copy=None (the default of asarray) to copy only when needed")


def array(x: Any, dtype: Any = None, copy: bool | None = True, order: str | None = "K", ndmin: int = 0, *,
          op: str = "array") -> Array:
    """An Array from a numpy array, Python scalar, nested list or Array (numpy's dtype rules, 32-bit defaults).

    copy, as numpy 2's: True always gives a new array (a distinct Array, even of an Array); None copies only when
    needed; False never copies and raises ValueError when a copy is needed: a dtype conversion, or a Python
    scalar or sequence, or a numpy scalar, turned into an array (moving a numpy array of the requested dtype to
    the device is not a copy in this sense, as in JAX). Tracers are immutable values and pass through (converted
    when dtype asks for it); a tracer leaked from a finished staging raises UnexpectedTracerError."""
    check_order(op, order)
    result = _array(x, None if dtype is None else dt.check_user_dtype(dtype, op), copy, op)
    ndmin = operator.index(ndmin)
    if result.ndim < ndmin:
        result = reshape(result, (1,) * (ndmin - result.ndim) + result.shape)
    return result


def _array(x: Any, dtype: np.dtype | None, copy: bool | None, op: str) -> Any:
    if type(x) is Token:
        raise TypeError(f"{op}: {dt.TOKEN_NOT_AN_ARRAY}")
    if isinstance(x, Tracer):
        check_live(x, op)
        if dtype is None or (dtype == x.aval.dtype and not x.aval.weak_type):
            return copy_p.bind(x) if copy else x  # (JAX's copy_p, as jnp.array(x, copy=True) binds it)
        if copy is False:
            raise _no_copy_possible(op, f"a conversion of {x.aval.str_short()} to {dtype.name}")
        return convert_element_type(x, dtype)
    if isinstance(x, Array):  # (a concrete Array, on one device or sharded: tracers were handled above)
        if dtype is None or (dtype == x.dtype and not x.weak_type):
            return x.copy() if copy else x
        if copy is False:
            raise _no_copy_possible(op, f"a conversion of {x.aval.str_short()} to {dtype.name}")
        if type(x) is not Array:  # (sharded: converted where it lives)
            return convert_element_type(x, dtype)
        return device_put(np.asarray(x._value(), dtype=dtype), x.device if x._committed else None)
    if isinstance(x, np.ndarray):
        if dtype is not None and dtype != dt.canonicalize_dtype(x.dtype):
            if copy is False:
                raise _no_copy_possible(op, f"a conversion of a numpy {x.dtype} array to {dtype.name}")
            x = np.asarray(x, dtype=dtype)
        return device_put(x)
    converter = getattr(type(x), "__jax_array__", None)
    if converter is not None:  # (an object that is an array to JAX: a symbolic dimension of ember.export, ...)
        return _array(converter(x), dtype, copy, op)
    if isinstance(x, list | tuple):
        items = list(_flat_items(x))
        for e in items:
            if isinstance(e, Tracer):
                check_live(e, op)
                raise TypeError(f"{op}: nested sequences of traced values are not supported here; use "
                                "ember.numpy.array or ember.numpy.stack")
        if any(type(e) is Array for e in items):
            x = _to_host_nested(x)
    if copy is False:
        raise _no_copy_possible(op, f"a value of type {type(x).__name__}")
    if dtype is not None:
        return device_put(np.asarray(x, dtype=dtype))
    if isinstance(x, np.generic):
        return device_put(x)
    return device_put(x)  # a Python int or float is weakly typed, as jnp.array(1.0) and jnp.asarray(1.0)


def _flat_items(x: Any) -> Iterator[Any]:
    for e in x:
        if isinstance(e, list | tuple):
            yield from _flat_items(e)
        else:
            yield e


def _to_host_nested(x: Any) -> Any:
    if isinstance(x, list | tuple):
        return [_to_host_nested(e) for e in x]
    return x._value() if type(x) is Array else x


def asarray(x: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None) -> Array:
    """array with copy=None by default: no copy unless needed (see array)."""
    return array(x, dtype, copy, order, op="asarray")
