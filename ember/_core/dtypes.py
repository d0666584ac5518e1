"""Dtypes (one table), the type-promotion lattice (with JAX-style weak types), Python scalars, and ShapedArray,
the abstract value."""
from __future__ import annotations

import functools
import math
from typing import Any, Iterable, NamedTuple, Sequence

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (np.dtype(t) for t in ("float16", "float32", "float64"))
bfloat16 = np.dtype(ml_dtypes.bfloat16)


class DTypeRow(NamedTuple):
    """One row of ember's dtype table."""
    dtype: np.dtype
    short: str      # the IR's name ("f32")
    mlir: str       # the StableHLO element type ("f32", "ui8", "i1")


# The one dtype table: every other dtype fact in ember is read from here.
DTYPE_TABLE: tuple[DTypeRow, ...] = (
    DTypeRow(bool_, "bool", "i1"),
    DTypeRow(int8, "i8", "i8"), DTypeRow(int16, "i16", "i16"), DTypeRow(int32, "i32", "i32"),
    DTypeRow(int64, "i64", "i64"),
    DTypeRow(uint8, "u8", "ui8"), DTypeRow(uint16, "u16", "ui16"), DTypeRow(uint32, "u32", "ui32"),
    DTypeRow(uint64, "u64", "ui64"),
    DTypeRow(bfloat16, "bf16", "bf16"), DTypeRow(float16, "f16", "f16"), DTypeRow(float32, "f32", "f32"),
    DTypeRow(float64, "f64", "f64"),
)
_ROW_OF: dict[np.dtype, DTypeRow] = {row.dtype: row for row in DTYPE_TABLE}
SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(row.dtype for row in DTYPE_TABLE)

# The dtype of the tangents and cotangents of integer and boolean values (they carry no derivative): as JAX's,
# a numpy structured dtype with no bytes. It is not an array dtype of ember: float0 values live on the host.
float0 = np.dtype([("float0", np.void, 0)])


def float0_zeros(shape: Sequence[int]) -> np.ndarray:
    """The (zero) tangent or cotangent of an integer or boolean value of this shape."""
    return np.zeros(tuple(shape), float0)

# Python scalars become these (weakly typed) dtypes, as in JAX's default 32-bit mode.
DEFAULT_INT = int32
DEFAULT_FLOAT = float32

_NAMES: dict[str, np.dtype] = {
    **{row.short: row.dtype for row in DTYPE_TABLE}, **{row.dtype.name: row.dtype for row in DTYPE_TABLE},
    "b1": bool_, "pred": bool_, "i1": bool_,
}


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """Turn "f32", "float32", np.float32, np.dtype(...) or the Python types float/int/bool into a numpy dtype."""
    if isinstance(dtype, str):
        found = _NAMES.get(dtype)
        if found is None:
            known = ", ".join(sorted(_NAMES))
            raise TypeError(f"unknown dtype {dtype!r}; known dtypes: {known}")
        return found
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return DEFAULT_INT
    if dtype is bool:
        return bool_
    try:
        found = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"unknown dtype {dtype!r}") from err
    if found not in _ROW_OF:
        raise TypeError(f"dtype {found.name} is not supported by ember; supported: "
                        + ", ".join(d.name for d in SUPPORTED_DTYPES))
    return found


def short_name(dtype: np.dtype) -> str:
    return _ROW_OF[dtype].short


def mlir_type(dtype: np.dtype) -> str:
    """The StableHLO element type of a dtype."""
    return _ROW_OF[dtype].mlir


def is_float(dtype: np.dtype) -> bool:
    return dtype in (bfloat16, float16, float32, float64)


def is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_signed_int(dtype: np.dtype) -> bool:
    return dtype.kind == "i"


def is_unsigned_int(dtype: np.dtype) -> bool:
    return dtype.kind == "u"


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


# Python scalars: their (dtype, weak_type). Exact types only: np.float64 subclasses float but is typed.
_PYTHON_SCALAR_DTYPES: dict[type, tuple[np.dtype, bool]] = {
    bool: (bool_, False), int: (DEFAULT_INT, True), float: (DEFAULT_FLOAT, True)}


def is_python_scalar(x: Any) -> bool:
    """True for Python bools, ints and floats (not numpy scalars, which are typed)."""
    return type(x) in _PYTHON_SCALAR_DTYPES


def check_int_fits(value: Any, dtype: np.dtype) -> None:
    """A Python int converted to an integer dtype must fit in it (numpy would wrap it silently)."""
    if type(value) is int and is_int(dtype):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python int {value} is too large to convert to {dtype.name}")


def finfo(dtype: Any) -> ml_dtypes.finfo:
    return ml_dtypes.finfo(canonicalize_dtype(dtype))


def iinfo(dtype: Any) -> ml_dtypes.iinfo:
    return ml_dtypes.iinfo(canonicalize_dtype(dtype))


# ---------------------------------------------------------------------------------------------------------------
# Type promotion: the least upper bound on JAX's lattice. "i*" and "f*" are the weak (Python scalar) int and float.
_WEAK_INT, _WEAK_FLOAT = "i*", "f*"
_LATTICE: dict[Any, tuple[Any, ...]] = {
    bool_: (_WEAK_INT,),
    _WEAK_INT: (uint8, int8),
    uint8: (int16, uint16), uint16: (int32, uint32), uint32: (int64, uint64), uint64: (_WEAK_FLOAT,),
    int8: (int16,), int16: (int32,), int32: (int64,), int64: (_WEAK_FLOAT,),
    _WEAK_FLOAT: (bfloat16, float16),
    bfloat16: (float32,), float16: (float32,), float32: (float64,), float64: (),
}


@functools.lru_cache(maxsize=None)
def _upper_set(node: Any) -> frozenset:
    result = {node}
    for parent in _LATTICE[node]:
        result |= _upper_set(parent)
    return frozenset(result)


def _lattice_node(dtype: np.dtype, weak: bool) -> Any:
    if weak and is_float(dtype):
        return _WEAK_FLOAT
    if weak and is_int(dtype):
        return _WEAK_INT
    return dtype


@functools.lru_cache(maxsize=4096)
def _join(nodes: tuple) -> Any:
    common = functools.reduce(frozenset.intersection, (_upper_set(n) for n in nodes))
    # The least element of the common upper set is the one whose own upper set contains all the others.
    for candidate in common:
        if _upper_set(candidate) >= common:
            return candidate
    raise TypeError(f"no common dtype for {nodes}")  # unreachable on this lattice


def promote_types(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Least upper bound of (dtype, weak_type) pairs; returns (dtype, weak_type) as JAX does."""
    return _promote_cached(typed)


@functools.lru_cache(maxsize=4096)
def _promote_cached(typed: tuple[tuple[np.dtype, bool], ...]) -> tuple[np.dtype, bool]:
    nodes = tuple(sorted({_lattice_node(d, w) for d, w in typed}, key=str))
    joined = _join(nodes)
    if joined == _WEAK_INT:
        # All weak ints: keep the widest such dtype (a weak i64 stays i64).
        return max((d for d, _ in typed if is_int(d)), key=lambda d: d.itemsize, default=DEFAULT_INT), True
    if joined == _WEAK_FLOAT:
        floats = [d for d, w in typed if w and is_float(d)]
        return (max(floats, key=lambda d: d.itemsize) if floats else DEFAULT_FLOAT), True
    return joined, False


def result_type(*dtypes: Any) -> np.dtype:
    """numpy-style result_type over dtypes and values, using ember's promotion rules."""
    return promote_types(*(dtype_and_weak(x) for x in dtypes))[0]


def dtype_and_weak(x: Any) -> tuple[np.dtype, bool]:
    """The (dtype, weak_type) of a value, an abstract value or a dtype-like."""
    aval = getattr(x, "aval", None)
    if isinstance(x, ShapedArray):
        return x.dtype, x.weak_type
    if aval is not None:
        return aval.dtype, aval.weak_type
    python = _PYTHON_SCALAR_DTYPES.get(type(x))
    if python is not None:
        return python
    if isinstance(x, np.ndarray | np.generic):
        return canonicalize_dtype(x.dtype), False
    return canonicalize_dtype(x), False


# ---------------------------------------------------------------------------------------------------------------
MAX_BYTES = 2**63 - 1  # XLA counts bytes and elements in int64: a bigger array aborts it, so no aval may describe one


class ShapedArray:
    """The abstract value of an array: its shape and dtype (and whether its type is weak, as a Python scalar's)."""
    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape: Iterable[int], dtype: Any, weak_type: bool = False):
        shape = tuple(shape)
        for dim in shape:
            if not isinstance(dim, int | np.integer) or isinstance(dim, bool) or dim < 0:
                raise TypeError(f"ShapedArray: shape must be a tuple of non-negative ints, got {shape!r}")
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape)
        self.dtype: np.dtype = canonicalize_dtype(dtype)
        if math.prod(self.shape) * max(self.dtype.itemsize, 1) > MAX_BYTES:
            raise ValueError(f"an array of shape {self.shape} and dtype {self.dtype.name} would take "
                             f"{math.prod(self.shape) * self.dtype.itemsize:.3g} bytes, more than the largest array "
                             f"XLA can address ({MAX_BYTES:.3g} bytes)")
        self.weak_type: bool = bool(weak_type)
        self._hash = hash((self.shape, self.dtype, self.weak_type))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def update(self, shape: Sequence[int] | None = None, dtype: Any = None, weak_type: bool | None = None
               ) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype)

    def str_short(self) -> str:
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapedArray) and self.shape == other.shape and self.dtype == other.dtype
                and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.shape}, {short_name(self.dtype)}{weak})"

    __str__ = str_short


def aval_of_value(x: Any) -> ShapedArray:
    """The abstract value of a concrete value: an ember Array, a numpy array or a Python scalar."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if is_python_scalar(x):
        dtype, weak = dtype_and_weak(x)
        return ShapedArray((), dtype, weak)
    if isinstance(x, np.ndarray | np.generic):
        return ShapedArray(np.shape(x), canonicalize_dtype(x.dtype))
    raise TypeError(f"{type(x).__name__} is not a valid ember array type")
