"""PRNG keys: typed key arrays and raw uint32 keys, seeding, split, fold_in and raw random bits.

ember's default generator is JAX's default one, Threefry-2x32 in JAX's "partitionable" counter layout, so the same
seed gives the same numbers as jax.random, bit for bit:

- a key is two uint32 words; key(seed) holds (the high, the low) 32 bits of the seed (a 32-bit seed: 0, seed);
- split(key, shape)[i] and fold_in(key, i) are threefry2x32(key, (0, i)), i the row-major index into shape;
- bits(key, shape) hashes the counters (i >> 32, i & 0xffffffff) of the row-major index i of each element and
  combines the two output words: xor for 32 bits (truncated for 8 and 16), high << 32 | low for 64 bits.

JAX's other implementations (threefry4x32, philox2x32, philox4x32, rbg, unsafe_rbg) and users' own
(ember.extend.random.define_prng_impl) are PRNGImpl objects (ember.random._prng): key(seed, impl=...) or the
jax_default_prng_impl option selects one.

A typed key (key(), split() of a typed key, wrap_key_data) is a KeyArray: a pytree node around its uint32 data with
its implementation as the node's static data, so it passes through jit, vmap, grad and control flow like an array
(and jitted functions compile once per implementation), and refuses arithmetic. A raw key (PRNGKey(), key_data())
is the data alone: random functions read it as a key of the default implementation (jax_default_prng_impl), as
JAX's do. The samplers work on KeyArray values throughout (a raw key is wrapped on entry), so every split and every
draw goes through the key's implementation."""
from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._core import Tracer, aval_of, stage_flat
from ember._core import dtypes as dt
from ember._core.config import config
from ember._core.pytree import register_pytree_node, register_user_leaf
from ember._transforms import key_reuse
from ember._transforms.key_reuse import TrackedKey
from ember.random._prng import IMPLS, PRNGImpl, rbg_seed, threefry_prng_impl, threefry_seed
from ember._runtime.array import register_array_type
from ember._api.sharding import takes_out_sharding

class KeyDType:
    """The dtype of typed key arrays of one implementation (JAX spells it key<tag>: key<fry>, key<rbg>, ...)."""
    __slots__ = ("_impl",)

    def __init__(self, impl: PRNGImpl):
        self._impl = impl

    @property
    def name(self) -> str:
        return f"key<{self._impl.tag}>"

    @property
    def impl(self) -> str:
        """The implementation's name (threefry2x32, rbg, ...)."""
        return self._impl.name

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyDType):
            return other._impl is self._impl
        return other == self.name

    def __hash__(self) -> int:
        return hash(self.name)


_DTYPES: dict[PRNGImpl, KeyDType] = {}


def key_dtype_of(impl: PRNGImpl) -> KeyDType:
    """The key dtype of an implementation (one object per implementation)."""
    dtype = _DTYPES.get(impl)
    if dtype is None:
        dtype = _DTYPES[impl] = KeyDType(impl)
    return dtype


KEY_DTYPE = key_dtype_of(threefry_prng_impl)


class KeyAval:
    """The type of a typed key array (jax.typeof(key): ShapedArray(key<fry>[3]) in JAX): its keys' shape and the
    key dtype. ember's transformations see the uint32 data underneath; this is what users and libraries read."""
    __slots__ = ("shape", "dtype")
    weak_type = False
    vma: frozenset = frozenset()
    sharding = None

    def __init__(self, shape: tuple[int, ...], dtype: KeyDType = KEY_DTYPE):
        self.shape = tuple(shape)
        self.dtype = dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def str_short(self, short_dtypes: bool = False) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyAval) and other.shape == self.shape and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("key", self.shape, self.dtype))


def _refuse(op: str) -> Any:
    def method(self: "KeyArray", *args: Any) -> Any:
        raise TypeError(f"ember.random: a typed PRNG key array ({self._describe()}) does not support {op}; "
                        "use ember.random.key_data(key) for its uint32 bits, or derive new keys with "
                        "split/fold_in")
    return method


class KeyArray(TrackedKey):
    """An array of PRNG keys of one implementation: shape is the keys' shape, the data underneath has the
    implementation's key shape after it (uint32[..., 2] for Threefry). Index, iterate, reshape and compare it like
    an array; random functions take it as their key.

    With the key-reuse checker on (debug_key_reuse; ember._transforms.key_reuse), traced data is marked as a key's
    (key_wrap), and a concrete key array knows whether it was consumed (TrackedKey's state)."""
    __slots__ = ("_data", "_impl")
    __array_priority__ = 1000  # so numpy defers to our refusing operators

    def __init__(self, data: Any, impl: PRNGImpl = threefry_prng_impl):
        self._data = key_reuse.wrap(data)
        self._impl = impl
        self._fresh_state()

    def _like(self, data: Any) -> "KeyArray":
        return KeyArray(data, self._impl)

    def _derived(self, op: str, on_data: Any) -> "KeyArray":
        """A key array of the same implementation over on_data(this one's data) (indexing, reshaping). With the
        key-reuse checker on, a concrete one is checked and marked as a jitted call of the operation would be:
        slicing consumes the keys taken (which come out fresh), reshaping forwards them."""
        if isinstance(self._data, Tracer) or not key_reuse.checking():
            return self._like(on_data(self._data))
        ir = stage_flat(lambda d: [key_reuse.wrap(on_data(key_reuse.wrap(d)))], [aval_of(self._data)])
        signature = key_reuse.ir_signature(ir, f"key array {op}")
        key_reuse.check_arguments(f"key array {op}", signature, [self])
        out = self._like(on_data(self._data))
        key_reuse.update_keys(signature, [self], [out])
        return out

    @property
    def _key_ndim(self) -> int:
        return len(self._impl.key_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        shape = tuple(np.shape(self._data))
        return shape[:len(shape) - self._key_ndim]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> KeyDType:
        return key_dtype_of(self._impl)

    @property
    def aval(self) -> KeyAval:
        """The type of this key array (ember.typeof(key))."""
        return KeyAval(self.shape, self.dtype)

    def _describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"

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
        whole = (slice(None),) * self._key_ndim
        if any(i is Ellipsis for i in index):
            return self._derived("indexing", lambda data: data[index + whole])
        return self._derived("indexing", lambda data: data[index + (Ellipsis,) + whole])

    def reshape(self, *shape: Any) -> "KeyArray":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        key_shape = tuple(self._impl.key_shape)
        new_shape = tuple(np.empty(self.shape).reshape(shape).shape) + key_shape
        return self._derived("reshape", lambda data: enp.reshape(enp.reshape(data, (-1,) + key_shape), new_shape))

    def ravel(self) -> "KeyArray":
        return self.reshape(-1)

    flatten = ravel

    @property
    def T(self) -> "KeyArray":  # noqa: N802 (numpy's name)
        axes = tuple(range(self.ndim))[::-1] + tuple(range(self.ndim, self.ndim + self._key_ndim))
        return self._derived("transpose", lambda data: enp.transpose(data, axes))

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        if not isinstance(other, KeyArray):
            raise TypeError(f"ember.random: cannot compare a typed key array ({self._describe()}) with "
                            f"{type(other).__name__}; compare key_data(key) instead")
        if other._impl is not self._impl:
            raise TypeError(f"ember.random: cannot compare key arrays of different implementations "
                            f"({self._describe()} and {other._describe()})")
        if not all(hasattr(d, "shape") and hasattr(d, "dtype") and not isinstance(d, np.dtype)
                   for d in (self._data, other._data)):
            # (a key array is a pytree node: tree_map(lambda t: t.dtype, tree) makes one holding the map's results,
            # which compare as they do)
            return self._data == other._data
        return enp.all(self._data == other._data, axis=tuple(range(-self._key_ndim, 0)))

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return enp.logical_not(self.__eq__(other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        try:
            data = np.asarray(self._data)
        except Exception:  # noqa: BLE001 - a tracer: describe it
            return f"KeyArray({self._describe()}, traced)"
        return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n{data}"

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


register_pytree_node(KeyArray, lambda k: ([k._data], k._impl), lambda impl, children: KeyArray(children[0], impl))
# (a leaf of ember.tree_util's functions, as JAX's; a node over its data to ember's own transformations; physical:
# its data, and a key array of the same implementation over new data)
register_user_leaf(KeyArray, physical=(lambda k: k._data, lambda data, like: like._like(data)))
register_array_type(KeyArray)  # (isinstance(key, ember.Array), as a typed key is a jax.Array)


# ---------------------------------------------------------------------------------------------------------------
def _describe_value(x: Any) -> str:
    try:
        return f"{np.dtype(x.dtype).name}{list(np.shape(x))}"
    except Exception:  # noqa: BLE001 - not array-like
        return type(x).__name__


def default_impl() -> PRNGImpl:
    """The implementation of keys made without impl= and of raw keys given to random functions
    (jax_default_prng_impl)."""
    return IMPLS[config.read_canonical("default_prng_impl")]


def resolve_impl(name: str, impl: Any) -> PRNGImpl:
    """The implementation impl names: None (the default), a name ('rbg'), a PRNGImpl, a key dtype (key<rbg>)."""
    if impl is None:
        return default_impl()
    if isinstance(impl, PRNGImpl):
        return impl
    if isinstance(impl, KeyDType):
        return impl._impl
    if isinstance(impl, str):
        for known in IMPLS.values():
            if impl in (known.name, f"key<{known.tag}>"):
                return known
        raise ValueError(f"ember.random.{name}: unknown PRNG implementation {impl!r}; the implementations are "
                         f"{', '.join(repr(n) for n in IMPLS)} (or a PRNGImpl from "
                         "ember.extend.random.define_prng_impl)")
    inner = getattr(impl, "_impl", None)  # (an object wrapping an implementation, as JAX's PRNGSpec)
    if isinstance(inner, PRNGImpl):
        return inner
    raise TypeError(f"ember.random.{name}: impl must be an implementation's name, a PRNGImpl or a key dtype, got "
                    f"{type(impl).__name__}")


def keys_of(name: str, key: Any, allow_batched: bool = False) -> tuple[KeyArray, bool]:
    """(key as a KeyArray, whether it was given typed): a raw key is read as a key of the default implementation;
    a clear error for anything that is not a key."""
    if isinstance(key, KeyArray):
        keys, typed = key, True
    else:
        if isinstance(key, (bool, int, float, complex)) or not hasattr(key, "dtype") and not isinstance(
                key, (list, tuple, np.ndarray)):
            raise TypeError(f"ember.random.{name}: key must be a PRNG key (from ember.random.key or PRNGKey), "
                            f"got {type(key).__name__}")
        data = key if hasattr(key, "dtype") else np.asarray(key)
        impl = default_impl()
        key_shape = tuple(impl.key_shape)
        shape = tuple(np.shape(data))
        if np.dtype(data.dtype) != np.uint32 or len(shape) < len(key_shape) or shape[len(shape) - len(
                key_shape):] != key_shape:
            raise TypeError(f"ember.random.{name}: key must be a PRNG key: a typed key (ember.random.key) or raw "
                            f"uint32 key data of shape (..., {', '.join(map(str, key_shape))}) "
                            f"({impl.name} keys: ember.random.PRNGKey), got {_describe_value(data)}")
        keys, typed = KeyArray(key_reuse.fresh(data), impl), False  # (a raw key is never checked: fresh each time)
        _legacy_key(name)
    if not allow_batched and keys.ndim != 0:
        raise ValueError(f"ember.random.{name} accepts a single key, but was given a key array of shape "
                         f"{keys.shape} != (); use ember.vmap for batching")
    return keys, typed


def key_data_of(name: str, key: Any, allow_batched: bool = False) -> tuple[Any, bool]:
    """(the raw data of key, whether key is typed); a clear error for anything that is not a key."""
    keys, typed = keys_of(name, key, allow_batched)
    return keys._data, typed


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


def _unwrap(keys: KeyArray, typed: bool) -> Any:
    """A random function's new keys as its key came: typed, or the raw data."""
    return keys if typed else keys._data


# ---------------------------------------------------------------------------------------------------------------
_seed_jit = jit(lambda seed, impl: impl.seed(seed), static_argnums=1)


def seed_data(name: str, seed: Any, impl: PRNGImpl | None = None) -> Any:
    """The key data of impl (default: the default implementation) seeded by an integer."""
    impl = default_impl() if impl is None else impl
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
        words = np.array([high, wide & 0xFFFFFFFF], np.uint32)
        if impl.seed is threefry_seed:  # (the seed's words, without a program)
            return enp.asarray(words)
        if impl.seed is rbg_seed:
            return enp.asarray(np.concatenate([words, words]))
        int_dtype = dt.default_int_dtype()
        seed = enp.asarray(np.array(wide, np.uint64).astype(int_dtype.str.replace("i", "u")).view(int_dtype))
    elif isinstance(seed, (np.ndarray, np.generic)):
        seed = enp.asarray(seed)
    return _seed_jit(seed, impl)


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed PRNG key (shape ()) from an integer seed, as jax.random.key: of impl's implementation (a name such
    as 'rbg', a PRNGImpl or a key dtype; default: jax_default_prng_impl, threefry2x32)."""
    chosen = resolve_impl("key", dtype if impl is None else impl)
    return KeyArray(seed_data("key", seed, chosen), chosen)


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:  # noqa: N802 (JAX's name)
    """A raw PRNG key (the implementation's key data: uint32[2] for threefry2x32) from an integer seed, as
    jax.random.PRNGKey."""
    return seed_data("PRNGKey", seed, resolve_impl("PRNGKey", impl))


def key_data(keys: Any) -> Any:
    """The raw key data under a key array (raw keys are returned as they are); reading it consumes no key."""
    return key_reuse.unwrap(key_data_of("key_data", keys, allow_batched=True)[0])


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed key array over raw key data (uint32[..., 2] for threefry2x32, uint32[..., 4] for rbg)."""
    chosen = resolve_impl("wrap_key_data", dtype if impl is None else impl)
    data = key_bits_array if hasattr(key_bits_array, "dtype") else np.asarray(key_bits_array)
    key_shape = tuple(chosen.key_shape)
    shape = tuple(np.shape(data))
    if np.dtype(data.dtype) != np.uint32 or len(shape) < len(key_shape) or shape[len(shape) - len(
            key_shape):] != key_shape:
        raise TypeError(f"ember.random.wrap_key_data: key data must be uint32 with trailing dimensions "
                        f"{key_shape} ({chosen.name}), got {_describe_value(data)}")
    return KeyArray(key_reuse.fresh(enp.asarray(data) if isinstance(data, np.ndarray) else data), chosen)


def key_impl(keys: Any) -> str:
    """The name of the keys' implementation (a raw key's: the default implementation's)."""
    return keys_of("key_impl", keys, allow_batched=True)[0]._impl.name


def clone(key: Any) -> Any:
    """A key equal to key (JAX's clone, for code that consumes keys linearly): to the key-reuse checker, a new key,
    unconsumed whatever happened to key."""
    keys, typed = keys_of("clone", key, allow_batched=True)
    return _unwrap(keys._like(key_reuse.fresh(keys._data)), typed)


# ---------------------------------------------------------------------------------------------------------------
# the samplers' building blocks: on KeyArray values, through the key's implementation
def _split(keys: KeyArray, shape: tuple[int, ...]) -> KeyArray:
    """shape new keys from one key (which it consumes)."""
    return keys._like(keys._impl.split(key_reuse.consume(keys._data), tuple(shape)))


def _fold_in(keys: KeyArray, value: Any) -> KeyArray:
    """A new key from a key and a uint32 scalar (the key is not consumed, as JAX's fold_in)."""
    return keys._like(keys._impl.fold_in(key_reuse.unwrap(keys._data), value))


def random_bits(keys: KeyArray, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform random unsigned integers of bit_width bits (8, 16, 32, 64) from one key."""
    out = keys._impl.random_bits(key_reuse.consume(keys._data), bit_width, tuple(shape))
    want = np.dtype(f"uint{bit_width}")
    if aval_of(out).dtype != want or aval_of(out).shape != tuple(shape):
        raise TypeError(f"ember.random: the {keys._impl.name} implementation's random_bits gave "
                        f"{aval_of(out).str_short()} for {bit_width} bits of shape {tuple(shape)}; it must give "
                        f"{want.name}{list(shape)}")
    return out


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
    keys, typed = keys_of("split", key)
    shape = canonical_shape("split", num, "num")
    return _unwrap(_split_jit(keys, shape), typed)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from key and a 32-bit integer, as jax.random.fold_in."""
    keys, typed = keys_of("fold_in", key)
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
    return _unwrap(_fold_in_jit(keys, value), typed)


@takes_out_sharding("random.bits")
def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits as unsigned integers of dtype (default uint32, uint64 with enable_x64)."""
    keys, _ = keys_of("bits", key)
    dtype = dt.default_uint_dtype() if dtype is None else dt.check_user_dtype(dtype, "random.bits")
    if not dt.is_unsigned_int(dtype):
        raise ValueError(f"ember.random.bits: dtype must be an unsigned integer dtype, got {dtype.name}")
    return _bits_jit(keys, dtype.itemsize * 8, canonical_shape("bits", shape))
