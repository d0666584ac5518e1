"""PRNG keys: typed key arrays and raw uint32[..., 2] keys, seeding, split, fold_in and raw random bits.

ember's generator is JAX's default one, Threefry-2x32 in JAX's "partitionable" counter layout, so the same seed
gives the same numbers as jax.random, bit for bit:

- a key is two uint32 words; key(seed) holds (the high, the low) 32 bits of the seed (a 32-bit seed: 0, seed);
- split(key, shape)[i] and fold_in(key, i) are threefry2x32(key, (0, i)), i the row-major index into shape;
- bits(key, shape) hashes the counters (i >> 32, i & 0xffffffff) of the row-major index i of each element and
  combines the two output words: xor for 32 bits (truncated for 8 and 16), high << 32 | low for 64 bits.

A typed key (key(), split() of a typed key, wrap_key_data) is a KeyArray: a pytree node around its uint32 data, so
it passes through jit, vmap, grad and control flow like an array, and refuses arithmetic."""
from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.config import config
from ember._core.pytree import register_pytree_node, register_user_leaf
from ember._prims import threefry2x32
from ember._runtime.array import register_array_type
from ember._api.sharding import takes_out_sharding

IMPL = "threefry2x32"


class KeyDType:
    """The dtype of typed key arrays (JAX spells it key<fry>)."""
    name = "key<fry>"
    impl = IMPL

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyDType) or other == self.name

    def __hash__(self) -> int:
        return hash(self.name)


KEY_DTYPE = KeyDType()


class KeyAval:
    """The type of a typed key array (jax.typeof(key): ShapedArray(key<fry>[3]) in JAX): its keys' shape and the
    key dtype. ember's transformations see the uint32 data underneath; this is what users and libraries read."""
    __slots__ = ("shape",)
    dtype = KEY_DTYPE
    weak_type = False
    vma: frozenset = frozenset()
    sharding = None

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def str_short(self, short_dtypes: bool = False) -> str:
        return f"{KEY_DTYPE.name}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyAval) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(("key", self.shape))


def _refuse(op: str) -> Any:
    def method(self: "KeyArray", *args: Any) -> Any:
        raise TypeError(f"ember.random: a typed PRNG key array ({self._describe()}) does not support {op}; "
                        "use ember.random.key_data(key) for its uint32 bits, or derive new keys with "
                        "split/fold_in")
    return method


class KeyArray:
    """An array of PRNG keys: shape is the keys' shape, the uint32 data underneath has one more dimension (2).
    Index, iterate, reshape and compare it like an array; random functions take it as their key."""
    __slots__ = ("_data",)
    __array_priority__ = 1000  # so numpy defers to our refusing operators

    def __init__(self, data: Any):
        self._data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self._data)[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> KeyDType:
        return KEY_DTYPE

    @property
    def aval(self) -> KeyAval:
        """The type of this key array (ember.typeof(key))."""
        return KeyAval(self.shape)

    def _describe(self) -> str:
        return f"{KEY_DTYPE.name}{list(self.shape)}"

    # where the keys live: their data's placement, without its trailing dimension of two words (as JAX's)
    @property
    def sharding(self) -> Any:
        sharding = self._data.sharding
        spec = getattr(sharding, "spec", None)
        if spec is None or len(spec) <= self.ndim:
            return sharding
        return sharding.update(spec=spec.update(partitions=tuple(spec)[:self.ndim]))

    @property
    def committed(self) -> bool:
        return self._data.committed

    def devices(self) -> set[Any]:
        return self._data.devices()

    @property
    def is_fully_replicated(self) -> bool:
        return self._data.is_fully_replicated

    @property
    def is_fully_addressable(self) -> bool:
        return self._data.is_fully_addressable

    def block_until_ready(self) -> "KeyArray":
        self._data.block_until_ready()
        return self

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of an unsized (scalar) key array")
        return self.shape[0]

    def __iter__(self) -> Iterator["KeyArray"]:
        if not self.shape:
            raise TypeError("iteration over a scalar key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, index: Any) -> "KeyArray":
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):
            return KeyArray(self._data[index + (slice(None),)])
        return KeyArray(self._data[index + (Ellipsis, slice(None))])

    def reshape(self, *shape: Any) -> "KeyArray":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        flat = enp.reshape(self._data, (-1, 2))
        return KeyArray(enp.reshape(flat, tuple(np.empty(self.shape).reshape(shape).shape) + (2,)))

    def ravel(self) -> "KeyArray":
        return self.reshape(-1)

    flatten = ravel

    @property
    def T(self) -> "KeyArray":  # noqa: N802 (numpy's name)
        axes = tuple(range(self.ndim))[::-1] + (self.ndim,)
        return KeyArray(enp.transpose(self._data, axes))

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        if not isinstance(other, KeyArray):
            raise TypeError(f"ember.random: cannot compare a typed key array ({self._describe()}) with "
                            f"{type(other).__name__}; compare key_data(key) instead")
        if not all(hasattr(d, "shape") and hasattr(d, "dtype") and not isinstance(d, np.dtype)
                   for d in (self._data, other._data)):
            # (a key array is a pytree node: tree_map(lambda t: t.dtype, tree) makes one holding the map's results,
            # which compare as they do)
            return self._data == other._data
        return enp.all(self._data == other._data, axis=-1)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return enp.logical_not(self.__eq__(other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        try:
            data = np.asarray(self._data)
        except Exception:  # noqa: BLE001 - a tracer: describe it
            return f"KeyArray({self._describe()}, traced)"
        return f"Array({self.shape}, dtype={KEY_DTYPE.name}) overlaying:\n{data}"

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(f"ember.random: a typed key array ({self._describe()}) cannot be converted to a numpy "
                        "array; use np.asarray(ember.random.key_data(key))")

    def __bool__(self) -> bool:
        raise TypeError(f"ember.random: the truth value of a typed key array ({self._describe()}) is undefined")

    for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
                "rshift", "lt", "le", "gt", "ge"):
        locals()[f"__{_op}__"] = _refuse(f"the operator __{_op}__")
        locals()[f"__r{_op}__"] = _refuse(f"the operator __r{_op}__")
    for _op in ("neg", "pos", "abs", "invert", "float", "int", "index"):
        locals()[f"__{_op}__"] = _refuse(f"__{_op}__")
    del _op


register_pytree_node(KeyArray, lambda k: ([k._data], None), lambda _, children: KeyArray(children[0]))
# (a leaf of ember.tree_util's functions, as JAX's; a node over its data to ember's own transformations)
register_user_leaf(KeyArray, physical=(lambda k: k._data, KeyArray))
register_array_type(KeyArray)  # (isinstance(key, ember.Array), as a typed key is a jax.Array)


# ---------------------------------------------------------------------------------------------------------------
def _describe_value(x: Any) -> str:
    try:
        return f"{np.dtype(x.dtype).name}{list(np.shape(x))}"
    except Exception:  # noqa: BLE001 - not array-like
        return type(x).__name__


def key_data_of(name: str, key: Any, allow_batched: bool = False) -> tuple[Any, bool]:
    """(the uint32[..., 2] data of key, whether key is typed); a clear error for anything that is not a key."""
    if isinstance(key, KeyArray):
        data, typed = key._data, True
    else:
        if isinstance(key, (bool, int, float, complex)) or not hasattr(key, "dtype") and not isinstance(
                key, (list, tuple, np.ndarray)):
            raise TypeError(f"ember.random.{name}: key must be a PRNG key (from ember.random.key or PRNGKey), "
                            f"got {type(key).__name__}")
        data = key if hasattr(key, "dtype") else np.asarray(key)
        dtype = np.dtype(data.dtype)
        if dtype != np.uint32 or not np.shape(data) or np.shape(data)[-1] != 2:
            raise TypeError(f"ember.random.{name}: key must be a PRNG key: a typed key (ember.random.key) or raw "
                            f"uint32 key data of shape (..., 2) (ember.random.PRNGKey), got "
                            f"{_describe_value(data)}")
        typed = False
        _legacy_key(name)
    if not allow_batched and np.ndim(data) != 1:
        raise ValueError(f"ember.random.{name} accepts a single key, but was given a key array of shape "
                         f"{tuple(np.shape(data)[:-1])} != (); use ember.vmap for batching")
    return data, typed


def _legacy_key(name: str) -> None:
    """jax_legacy_prng_key: a raw uint32 key given to a random function is allowed, warned about or refused."""
    mode = config.read_canonical("legacy_prng_key")
    if mode != "allow":
        message = (f"ember.random.{name}: legacy uint32 key array passed as key; create keys with "
                   "ember.random.key() (as jax.random.key), or set jax_legacy_prng_key='allow' if a raw key was "
                   "intended")
        if mode == "error":
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=dt._user_stacklevel())


def _wrap(data: Any, typed: bool) -> Any:
    return KeyArray(data) if typed else data


def _check_impl(name: str, impl: Any) -> None:
    if impl is not None and impl != IMPL and not isinstance(impl, KeyDType) and getattr(impl, "name", None) != IMPL:
        raise ValueError(f"ember.random.{name}: unknown PRNG implementation {impl!r}; ember implements "
                         f"{IMPL!r} (JAX's default)")


# ---------------------------------------------------------------------------------------------------------------
def _seed_words(seed: Any) -> Any:
    """The key data of an integer seed: (high 32 bits, low 32 bits) of a 64-bit seed, (0, seed) of a narrower one."""
    if aval_of(seed).dtype.itemsize == 8:
        high = lax.convert_element_type(lax.shift_right_logical(seed, lax.full_like(seed, 32)), dt.uint32)
    else:
        high = lax.full(aval_of(seed).shape, 0, dt.uint32)
    low = lax.convert_element_type(seed, dt.uint32)
    return enp.stack([high, low], axis=-1)


_seed_words_jit = jit(_seed_words)


def seed_data(name: str, seed: Any) -> Any:
    if isinstance(seed, KeyArray):
        raise TypeError(f"ember.random.{name} accepts a scalar integer seed, but was given a PRNG key")
    if np.ndim(seed):
        raise TypeError(f"ember.random.{name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (); use ember.vmap for batching")
    if isinstance(seed, bool) or not isinstance(seed, int) and not (
            hasattr(seed, "dtype") and np.dtype(seed.dtype).kind in "iu"):
        raise TypeError(f"ember.random.{name}: the seed must be an integer, got {_describe_value(seed)}")
    offset = config.read_canonical("random_seed_offset")  # (jax_random_seed_offset: added to every seed)
    if offset and isinstance(seed, int):
        seed += offset
    elif offset:
        seed = enp.asarray(seed) + offset
    if isinstance(seed, int):  # as JAX: a 64-bit integer, narrowed to the default int (wrapping) without x64
        if not -2 ** 63 <= seed < 2 ** 64:
            raise OverflowError(f"ember.random.{name}: seed {seed} does not fit in 64 bits")
        wide = seed % 2 ** 64
        high = wide >> 32 if dt.default_int_dtype().itemsize == 8 else 0
        return enp.asarray(np.array([high, wide & 0xFFFFFFFF], np.uint32))
    if isinstance(seed, (np.ndarray, np.generic)):
        seed = enp.asarray(seed)
    return _seed_words_jit(seed)


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed PRNG key (shape (), dtype key<fry>) from an integer seed, as jax.random.key."""
    _check_impl("key", impl)
    _check_impl("key", dtype)
    return KeyArray(seed_data("key", seed))


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:  # noqa: N802 (JAX's name)
    """A raw PRNG key (uint32[2]) from an integer seed, as jax.random.PRNGKey."""
    _check_impl("PRNGKey", impl)
    return seed_data("PRNGKey", seed)


def key_data(keys: Any) -> Any:
    """The uint32[..., 2] data under a key array (raw keys are returned as they are)."""
    return key_data_of("key_data", keys, allow_batched=True)[0]


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed key array over uint32[..., 2] key data."""
    _check_impl("wrap_key_data", impl)
    _check_impl("wrap_key_data", dtype)
    data = key_bits_array if hasattr(key_bits_array, "dtype") else np.asarray(key_bits_array)
    if np.dtype(data.dtype) != np.uint32 or not np.shape(data) or np.shape(data)[-1] != 2:
        raise TypeError("ember.random.wrap_key_data: key data must be uint32 with a last dimension of 2 "
                        f"(threefry2x32), got {_describe_value(data)}")
    return KeyArray(enp.asarray(data) if isinstance(data, np.ndarray) else data)


def key_impl(keys: Any) -> str:
    key_data_of("key_impl", keys, allow_batched=True)
    return IMPL


def clone(key: Any) -> Any:
    """A key equal to key (JAX's clone, for code that consumes keys linearly)."""
    data, typed = key_data_of("clone", key, allow_batched=True)
    return _wrap(data, typed)


# ---------------------------------------------------------------------------------------------------------------
def _counters(shape: tuple[int, ...]) -> tuple[Any, Any]:
    """(high, low) 32-bit words of each element's row-major index in shape."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise ValueError(f"ember.random: {size} random values in one call is more than 2**32 - 1")
    zero = lax.full((), 0, dt.uint32)
    if not shape:
        return zero, zero
    return zero, lax.reshape(lax.iota(dt.uint32, size), shape)


def hash_counters(data: Any, shape: tuple[int, ...]) -> list[Any]:
    high, low = _counters(shape)
    return threefry2x32(data[0], data[1], high, low)


def _split(data: Any, shape: tuple[int, ...]) -> Any:
    return enp.stack(hash_counters(data, shape), axis=-1)


def _fold_in(data: Any, value: Any) -> Any:
    return enp.stack(threefry2x32(data[0], data[1], lax.full((), 0, dt.uint32), value), axis=-1)


def random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform random unsigned integers of bit_width bits (8, 16, 32, 64) from one key's data."""
    hi, lo = hash_counters(data, shape)
    if bit_width == 64:
        wide = [lax.convert_element_type(w, dt.uint64) for w in (hi, lo)]
        return lax.bitwise_or(lax.shift_left(wide[0], lax.full_like(wide[0], 32)), wide[1])
    bits = lax.bitwise_xor(hi, lo)
    return bits if bit_width == 32 else lax.convert_element_type(bits, np.dtype(f"uint{bit_width}"))


_split_jit = jit(_split, static_argnums=1)
_fold_in_jit = jit(_fold_in)
_bits_jit = jit(random_bits, static_argnums=(1, 2))


def canonical_shape(name: str, shape: Any, arg: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"ember.random.{name}: {arg} must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"ember.random.{name}: {arg} {out} has a negative dimension")
    return out


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """num new keys (or an array of keys of shape num), as jax.random.split."""
    data, typed = key_data_of("split", key)
    shape = canonical_shape("split", num, "num")
    return _wrap(_split_jit(data, shape), typed)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from key and a 32-bit integer, as jax.random.fold_in."""
    words, typed = key_data_of("fold_in", key)
    if np.ndim(data):
        raise TypeError(f"ember.random.fold_in accepts a scalar, but was given an array of shape {np.shape(data)} "
                        "!= (); use ember.vmap for batching")
    if isinstance(data, int) and not isinstance(data, bool):
        if not 0 <= data < 2 ** 32:
            raise OverflowError(f"ember.random.fold_in: data {data} is out of bounds for uint32")
        value = enp.asarray(np.uint32(data))
    elif hasattr(data, "dtype") and np.dtype(data.dtype).kind in "iub":
        value = lax.convert_element_type(enp.asarray(data), dt.uint32)
    else:
        raise TypeError(f"ember.random.fold_in: data must be an integer, got {_describe_value(data)}")
    return _wrap(_fold_in_jit(words, value), typed)


@takes_out_sharding("random.bits")
def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits as unsigned integers of dtype (default uint32, uint64 with enable_x64)."""
    data, _ = key_data_of("bits", key)
    dtype = dt.default_uint_dtype() if dtype is None else dt.check_user_dtype(dtype, "random.bits")
    if not dt.is_unsigned_int(dtype):
        raise ValueError(f"ember.random.bits: dtype must be an unsigned integer dtype, got {dtype.name}")
    return _bits_jit(data, dtype.itemsize * 8, canonical_shape("bits", shape))
