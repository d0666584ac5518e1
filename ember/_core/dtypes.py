"""Dtypes (one table), the type-promotion lattice (with JAX-style weak types), Python scalars, and ShapedArray,
the abstract value."""
from __future__ import annotations

import functools
import math
import os
import sys
import warnings
from typing import Any, Iterable, NamedTuple, Sequence

import ml_dtypes
import numpy as np

from ember._core.config import config
from ember._core.shape_poly import DimExpr, bounds

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (np.dtype(t) for t in ("float16", "float32", "float64"))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)


class DTypeRow(NamedTuple):
    """One row of ember's dtype table."""
    dtype: np.dtype
    short: str      # the IR's name ("f32"), as JAX's jaxprs print it
    mlir: str       # the StableHLO element type ("f32", "ui8", "i1", "f8E4M3FN")


def _ml(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name))


# JAX's narrow types that ember computes in, as JAX 0.10.2's CPU does (ml_dtypes' types; a numpy array holds one
# element per byte, 4- and 2-bit ones included). They take part in no implicit promotion but with Python scalars
# and bool (the lattice below), as in JAX. The 8-bit floats' finite ranges and special values differ: fn has no
# infinity, fnuz no negative zero (its NaN is -0's bits), e8m0fnu is a power of two (no sign, no zero).
float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, \
    float8_e8m0fnu, float4_e2m1fn = (_ml(n) for n in (
        "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
        "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn"))
int4, uint4, int2, uint2 = _ml("int4"), _ml("uint4"), _ml("int2"), _ml("uint2")
NARROW_FLOATS: tuple[np.dtype, ...] = (float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz,
                                       float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn)
NARROW_INTS: tuple[np.dtype, ...] = (int4, uint4, int2, uint2)
# JAX's narrow types that ember refuses (a TypeError naming the dtype wherever one enters), each with the reason:
# JAX 0.10.2's CPU computes nothing in them either (measured, tests/test_narrow_dtypes.py).
REFUSED_NARROW: dict[np.dtype, str] = {
    **dict.fromkeys((_ml("float6_e2m3fn"), _ml("float6_e3m2fn")),
                    "XLA's CPU has no buffer type for the 6-bit floats: JAX 0.10.2 fails on any array of one"),
    **dict.fromkeys((_ml("int1"), _ml("uint1")),
                    "XLA has no buffer type for the 1-bit integers: JAX 0.10.2 fails on arrays of them (or makes "
                    "booleans)"),
}

# The one dtype table: every other dtype fact in ember is read from here.
DTYPE_TABLE: tuple[DTypeRow, ...] = (
    DTypeRow(bool_, "bool", "i1"),
    DTypeRow(int8, "i8", "i8"), DTypeRow(int16, "i16", "i16"), DTypeRow(int32, "i32", "i32"),
    DTypeRow(int64, "i64", "i64"),
    DTypeRow(uint8, "u8", "ui8"), DTypeRow(uint16, "u16", "ui16"), DTypeRow(uint32, "u32", "ui32"),
    DTypeRow(uint64, "u64", "ui64"),
    DTypeRow(bfloat16, "bf16", "bf16"), DTypeRow(float16, "f16", "f16"), DTypeRow(float32, "f32", "f32"),
    DTypeRow(float64, "f64", "f64"),
    DTypeRow(complex64, "c64", "complex<f32>"), DTypeRow(complex128, "c128", "complex<f64>"),
    DTypeRow(float8_e3m4, "f8_e3m4", "f8E3M4"), DTypeRow(float8_e4m3, "f8_e4m3", "f8E4M3"),
    DTypeRow(float8_e4m3b11fnuz, "f8_e4m3b11fnuz", "f8E4M3B11FNUZ"),
    DTypeRow(float8_e4m3fn, "f8_e4m3fn", "f8E4M3FN"), DTypeRow(float8_e4m3fnuz, "f8_e4m3fnuz", "f8E4M3FNUZ"),
    DTypeRow(float8_e5m2, "f8_e5m2", "f8E5M2"), DTypeRow(float8_e5m2fnuz, "f8_e5m2fnuz", "f8E5M2FNUZ"),
    DTypeRow(float8_e8m0fnu, "f8_e8m0fnu", "f8E8M0FNU"), DTypeRow(float4_e2m1fn, "f4_e2m1fn", "f4E2M1FN"),
    DTypeRow(int4, "i4", "i4"), DTypeRow(uint4, "u4", "ui4"), DTypeRow(int2, "i2", "i2"),
    DTypeRow(uint2, "u2", "ui2"),
)
_ROW_OF: dict[np.dtype, DTypeRow] = {row.dtype: row for row in DTYPE_TABLE}
SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(row.dtype for row in DTYPE_TABLE)
_NARROW_SET = frozenset(NARROW_FLOATS + NARROW_INTS)
_SUB_BYTE = frozenset((float4_e2m1fn, int4, uint4, int2, uint2))


def is_narrow(dtype: np.dtype) -> bool:
    """JAX's narrow types that ember computes in: the 8- and 4-bit floats and the 4- and 2-bit integers."""
    return dtype in _NARROW_SET


def bit_width(dtype: Any) -> int:
    """The bits of one element: 4 for int4, uint4 and float4_e2m1fn, 2 for int2 and uint2 (JAX's itemsize_bits;
    their numpy arrays take a byte each), 8 * itemsize for the others."""
    dtype = np.dtype(dtype)
    if dtype in _SUB_BYTE:
        return 4 if dtype in (float4_e2m1fn, int4, uint4) else 2
    return 8 * dtype.itemsize


def refuse_narrow_int_promotion(op: str, dtype: np.dtype) -> None:
    """A TypeError for op widening a narrow integer to the default int (sum, prod, cumulative_sum, ...): JAX 0.10.2
    refuses it (its widening reads numpy's iinfo, which does not know them), so ember does too, and says how."""
    if dtype in NARROW_INTS:
        raise TypeError(f"{op} does not accept dtype {dtype.name} when it widens integers to the default int (JAX "
                        "refuses it too): pass dtype= (e.g. dtype='int32') or promote_integers=False")


def is_sub_byte(dtype: np.dtype) -> bool:
    """The 4- and 2-bit types: a numpy array holds one per byte, XLA's CPU packs them (so its buffers' memory is
    not a numpy array's: ember reads them back by copying)."""
    return dtype in _SUB_BYTE


# The dtype of the tangents and cotangents of integer and boolean values (they carry no derivative): as JAX's,
# a numpy structured dtype with no bytes. It is not an array dtype of ember: float0 values live on the host.
float0 = np.dtype([("float0", np.void, 0)])


def float0_zeros(shape: Sequence[int]) -> np.ndarray:
    """The (zero) tangent or cotangent of an integer or boolean value of this shape."""
    return np.zeros(tuple(shape), float0)


# The dtype of a token's type (AbstractToken, below): a structured dtype with no bytes (as float0), which no array
# operation accepts.
token = np.dtype([("token", np.void, 0)])
TOKEN_NOT_AN_ARRAY = ("a token (Tok) is not an array: no array operation takes one, and it has no shape to change "
                      "(lax.after_all joins tokens; a token carries no derivative and has no batch dimension)")


# ---------------------------------------------------------------------------------------------------------------
# 64 bits. Python scalars are weakly typed and, with Python lists and the default dtypes of creation functions,
# 32-bit, unless the option `ember.config.enable_x64` is on: then they are 64-bit and every promotion is JAX's in its
# 64-bit mode. Without it, values are narrowed to 32 bits where they enter (canonical_dtype, below), so only an IR
# staged at explicit 64-bit avals has 64-bit values: its promotions are JAX's 64-bit ones (a result is 64-bit when
# an operand is). The option is read at each use, so toggling it takes effect at once.
def x64_enabled() -> bool:
    """Whether `ember.config.enable_x64` is on (Python scalars, lists and default dtypes are then 64-bit)."""
    return config.read_canonical("enable_x64")


class StagingOptions:
    """`token`: the options that change what a function stages out to, for the keys of the caches of staged
    functions (jit's signatures, eager operations): enable_x64 (the dtypes of Python scalars and defaults), or,
    when one of them is not its default, (enable_x64, the OTHERS options, the user contexts' values). Kept up to
    date by option hooks (and the contexts): jit's call reads it."""
    token: Any = False
    OTHERS = {"numpy_dtype_promotion": "standard", "numpy_rank_promotion": "allow", "default_matmul_precision": None,
              "allow_f16_reductions": True, "debug_key_reuse": False}
    contexts: list[Any] = []  # the user's contexts (ember.make_user_context): each with .value and .default

    @classmethod
    def update(cls, _: Any = None) -> None:
        x64 = config.read_canonical("enable_x64")
        others = tuple(config.read_canonical(name) for name in cls.OTHERS)
        users = tuple((i, c.value) for i, c in enumerate(cls.contexts) if c.value != c.default)
        cls.token = x64 if others == tuple(cls.OTHERS.values()) and not users else (x64, *others, users)


StagingOptions.update()
for _name in ("enable_x64", *StagingOptions.OTHERS):
    config.on_change(_name, StagingOptions.update)
del _name


def default_int_dtype() -> np.dtype:
    """The dtype of Python ints, integer lists and integer defaults: int32 (int64 with enable_x64)."""
    return int64 if x64_enabled() else int32


def default_uint_dtype() -> np.dtype:
    return uint64 if x64_enabled() else uint32


def default_float_dtype() -> np.dtype:
    """The dtype of Python floats, float lists and float defaults (zeros, ones, ...): float32 (float64 with
    enable_x64)."""
    return float64 if x64_enabled() else float32


def is_64bit(dtype: np.dtype) -> bool:
    """64-bit numbers: int64, uint64, float64 and complex128 (whose parts are float64; complex64's are 32-bit)."""
    return dtype.itemsize == (16 if dtype.kind == "c" else 8)


def default_complex_dtype() -> np.dtype:
    """The dtype of Python complex numbers and complex lists: complex64 (complex128 with enable_x64)."""
    return complex128 if x64_enabled() else complex64


def to_inexact_dtype(dtype: np.dtype, op: str = "") -> np.dtype:
    """The floating-point dtype an integer or boolean dtype becomes where an op (named in errors) needs floats
    (true_divide, sqrt, mean): int64 and uint64 become float64, narrower ones float32 (JAX's table, also with
    enable_x64; int4 and uint4 included); floats and complex dtypes stay. The 2-bit integers have none: a
    TypeError. (JAX 0.10.2's table lacks them: it refuses exp, sqrt, ... of them and computes true_divide and mean
    in the 2-bit type itself, as integer division; ember refuses those too rather than copy that.)"""
    if is_float(dtype) or is_complex(dtype):
        return dtype
    if dtype in (int2, uint2):
        raise TypeError(f"{op or 'this function'} does not accept dtype {dtype.name}: it computes in floating point, "
                        "and JAX has no floating-point type for the 2-bit integers (it refuses exp or sqrt of them, "
                        "and computes true_divide and mean as integer divisions); convert first, e.g. "
                        "x.astype('float32')")
    return float64 if is_64bit(dtype) else float32


_NAMES: dict[str, np.dtype] = {
    **{row.short: row.dtype for row in DTYPE_TABLE}, **{row.dtype.name: row.dtype for row in DTYPE_TABLE},
    "b1": bool_, "pred": bool_, "i1": bool_,
}


_REFUSED_NAMES: dict[str, np.dtype] = {d.name: d for d in REFUSED_NARROW}
_PARSED: dict[Any, np.dtype] = {}  # numpy dtypes and scalar types (np.float32, enp.float32) read before


def parse_dtype(dtype: Any) -> np.dtype:
    """Turn "f32", "float32", np.float32, np.dtype(...) or the Python types float/int/bool into a numpy dtype
    (float and int are the default dtypes: 32-bit unless enable_x64). A non-native byte order (">f4") gives the
    native dtype: values in that order are byte-swapped when they enter ember, as in JAX. 64-bit dtypes stay
    64-bit: this is the IR's reading of a dtype (stage_out's avals, primitive params). What a user's value or
    dtype request becomes is canonicalize_dtype's and check_user_dtype's."""
    if isinstance(dtype, str):
        found = _NAMES.get(dtype)
        if found is None and dtype in _REFUSED_NAMES:
            found = _REFUSED_NAMES[dtype]
            raise TypeError(f"dtype {found.name} is not supported by ember{_unsupported_reason(found)}")
        if found is None:
            known = ", ".join(sorted(_NAMES))
            raise TypeError(f"unknown dtype {dtype!r}; known dtypes: {known}")
        return found
    if dtype is float:
        return default_float_dtype()
    if dtype is int:
        return default_int_dtype()
    if dtype is bool:
        return bool_
    if dtype is complex:
        return default_complex_dtype()
    known = _PARSED.get(dtype) if isinstance(dtype, type | np.dtype) else None
    if known is not None:
        return known
    try:
        found = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"unknown dtype {dtype!r}") from err
    if found == token:
        raise TypeError(TOKEN_NOT_AN_ARRAY)
    native = found.newbyteorder("=") if found.byteorder in "<>" else found
    if native in _ROW_OF:  # (a non-native byte order, np.ones(3, ">f4"): the values are byte-swapped on entry)
        if isinstance(dtype, type | np.dtype) and len(_PARSED) < 256:
            _PARSED[dtype] = native
        return native
    raise TypeError(f"dtype {describe_dtype(found)} is not supported by ember{_unsupported_reason(native)}; "
                    "supported: " + ", ".join(d.name for d in SUPPORTED_DTYPES))


# JAX's dtype defaults: without enable_x64, 64-bit values and dtype requests are narrowed to 32 bits where they
# enter ember (numpy arrays and scalars given to any function, jit's arguments, device_put, checkpoints, DLPack),
# silently for values and with a UserWarning for a dtype asked for by name (zeros(3, float64), astype, dtype=).
# With enable_x64 every dtype stays. The IR itself is exact (stage_out(f, ShapedArray((2,), "f64")) stages f64):
# the narrowing is at the edges, so a program never sees a value change type inside it.
_NARROWED = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def canonical_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a value of this (supported) dtype has in ember: int64, uint64, float64 and complex128 become
    int32, uint32, float32 and complex64 unless enable_x64 is on (JAX's canonical dtypes)."""
    narrowed = _NARROWED.get(dtype)
    return dtype if narrowed is None or x64_enabled() else narrowed


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """jax.dtypes.canonicalize_dtype: a dtype-like (as parse_dtype reads it) as ember holds values of it: 64-bit
    dtypes narrowed to 32 bits unless enable_x64 is on."""
    return canonical_dtype(parse_dtype(dtype))


class NarrowedDtypeWarning(UserWarning):
    """A 64-bit dtype was asked for with enable_x64 off: the result has the 32-bit dtype (as JAX's warning)."""


def check_user_dtype(dtype: Any, op: str) -> np.dtype:
    """A dtype the user asked op for (dtype=, astype, a creation function's): parsed, and narrowed to 32 bits
    unless enable_x64 is on, with a warning then, as JAX (the Python types float, int and complex are the
    default dtypes and need none)."""
    try:
        parsed = parse_dtype(dtype)
    except TypeError as err:  # (an unknown or refused dtype: the message names op)
        raise TypeError(f"{op}: {err}") from None
    narrowed = canonical_dtype(parsed)
    if narrowed is not parsed:
        mode = config.read_canonical("explicit_x64_dtypes")  # (jax_explicit_x64_dtypes: warn, error or allow)
        if mode == "allow":
            return narrowed
        if mode == "error":
            raise ValueError(f"{op}: dtype {parsed.name} was requested, but 64-bit dtypes are off (turn them on with "
                             "ember.config.update('jax_enable_x64', True); jax_explicit_x64_dtypes='error')")
        warnings.warn(f"{op}: dtype {parsed.name} was requested, but 64-bit dtypes are off, so the result is "
                      f"{narrowed.name}. Turn them on with ember.config.update('jax_enable_x64', True) or the "
                      "environment variable JAX_ENABLE_X64=1 (or EMBER_ENABLE_X64=1).",
                      NarrowedDtypeWarning, stacklevel=_user_stacklevel())
    return narrowed


_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn (called from the frame below) that names the user's line: the first frame
    outside the ember package."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_EMBER_DIR):
        frame, level = frame.f_back, level + 1
    return level


def describe_dtype(dtype: np.dtype) -> str:
    """A dtype's name for error messages, with its byte order when that is not the machine's (">c8")."""
    if dtype.kind in "OUSVMm":  # not a number: numpy's own spelling ("<U3", "object", "datetime64[s]")
        return str(dtype)
    if dtype.byteorder in "<>" and not dtype.isnative:
        return f"{dtype.name} ({dtype.str!r}, non-native byte order)"
    return dtype.name


def _unsupported_reason(dtype: np.dtype) -> str:
    if dtype in REFUSED_NARROW:
        return f" ({REFUSED_NARROW[dtype]})"
    if dtype.kind == "c":
        return " (ember's complex dtypes are complex64 and complex128)"
    if dtype.kind in "OUSVMm":
        return " (ember arrays hold numbers and booleans only)"
    return ""


def short_name(dtype: np.dtype) -> str:
    return _ROW_OF[dtype].short


def mlir_type(dtype: np.dtype) -> str:
    """The StableHLO element type of a dtype."""
    return _ROW_OF[dtype].mlir


_FLOATS = frozenset((bfloat16, float16, float32, float64, *NARROW_FLOATS))
_SIGNED = frozenset((int8, int16, int32, int64, int4, int2))
_UNSIGNED = frozenset((uint8, uint16, uint32, uint64, uint4, uint2))


def is_float(dtype: np.dtype) -> bool:
    """The floating-point dtypes, the narrow ones (float8_*, float4_e2m1fn) included."""
    return dtype in _FLOATS


def is_complex(dtype: np.dtype) -> bool:
    return dtype in (complex64, complex128)


def is_inexact(dtype: np.dtype) -> bool:
    """Floating-point or complex."""
    return is_float(dtype) or is_complex(dtype)


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's real and imaginary parts (float32 for complex64); other dtypes stay."""
    return {complex64: float32, complex128: float64}.get(dtype, dtype)


def complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype whose parts have this floating-point dtype (complex128 for float64; complex64 for the
    narrower floats, as JAX); complex dtypes stay."""
    if is_complex(dtype):
        return dtype
    return complex128 if dtype == float64 else complex64


def is_int(dtype: np.dtype) -> bool:
    """The integer dtypes, int4/uint4/int2/uint2 included."""
    return dtype in _SIGNED or dtype in _UNSIGNED


def is_signed_int(dtype: np.dtype) -> bool:
    return dtype in _SIGNED


def is_unsigned_int(dtype: np.dtype) -> bool:
    return dtype in _UNSIGNED


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


# Python scalars. Exact types only: np.float64 subclasses float but is a typed numpy scalar.
_PYTHON_SCALAR_TYPES = (bool, int, float, complex)


def is_python_scalar(x: Any) -> bool:
    """True for Python bools, ints, floats and complex numbers (not numpy scalars, which are typed)."""
    return type(x) in _PYTHON_SCALAR_TYPES


def python_scalar_dtype(kind: type) -> tuple[np.dtype, bool]:
    """(dtype, weak_type) of a Python scalar type: bool is bool (not weak); int, float and complex are weakly
    typed, of the default dtypes (int32/float32/complex64, or int64/float64/complex128 with enable_x64)."""
    if kind is bool:
        return bool_, False
    if kind is complex:
        return default_complex_dtype(), True
    return (default_int_dtype() if kind is int else default_float_dtype()), True


def check_int_fits(value: Any, dtype: np.dtype) -> None:
    """A Python int converted to an integer dtype must fit in it (numpy would wrap it silently)."""
    if type(value) is int and is_int(dtype):
        info = ml_dtypes.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python int {value} is too large to convert to {dtype.name}")


def finfo(dtype: Any) -> ml_dtypes.finfo:
    """Machine limits of a floating-point dtype; of a complex dtype, those of its parts (as numpy and JAX)."""
    return ml_dtypes.finfo(real_dtype(parse_dtype(dtype)))


def iinfo(dtype: Any) -> ml_dtypes.iinfo:
    """Machine limits of an integer dtype (int4 and the other narrow ones included)."""
    return ml_dtypes.iinfo(parse_dtype(dtype))


# The 8-bit floats without infinities (JAX's supports_inf). float4_e2m1fn and float8_e8m0fnu have none either, but
# JAX converts -inf to them for a max's identity (-6.0; NaN: the max of float8_e8m0fnu values is NaN in JAX).
_NO_INF = frozenset((float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2fnuz))


def lowest(dtype: np.dtype) -> Any:
    """The identity of max over dtype (as JAX's): False, the integer minimum, -inf, or the lowest finite value of
    the 8-bit floats without infinities."""
    if dtype == bool_:
        return False
    if is_float(dtype) or is_complex(dtype):
        return -np.inf if dtype not in _NO_INF else ml_dtypes.finfo(dtype).min
    return int(ml_dtypes.iinfo(dtype).min)


def highest(dtype: np.dtype) -> Any:
    """The identity of min over dtype: True, the integer maximum, inf, or the largest finite value of the 8-bit
    floats without infinities."""
    if dtype == bool_:
        return True
    if is_float(dtype) or is_complex(dtype):
        return np.inf if dtype not in _NO_INF else ml_dtypes.finfo(dtype).max
    return int(ml_dtypes.iinfo(dtype).max)


# ---------------------------------------------------------------------------------------------------------------
# Type promotion: the least upper bound on JAX's lattice. "i*", "f*" and "c*" are the weak (Python scalar) int,
# float and complex.
# Two lattices, as JAX's: the 64-bit one, and the 32-bit one, where uint32 and int32 meet at int32 (no 64-bit
# result from 32-bit operands). The 64-bit lattice is used when an operand is 64-bit or enable_x64 is on, and the
# weak nodes become 64-bit dtypes then (int64 * 2.5 is float64, int64 + uint64 is float64, as in JAX's x64 mode).
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
# The narrow types are leaves above the weak scalars: a narrow integer joins bool, Python ints and itself; a narrow
# float bool, every integer, Python ints and floats, and itself (int8 * float8_e4m3fn is float8_e4m3fn, as JAX);
# any other pair (int4 + int8, float8_e4m3fn + float32, two float8s) has no implicit promotion: TypePromotionError.
_LATTICE_X64: dict[Any, tuple[Any, ...]] = {
    bool_: (_WEAK_INT,),
    _WEAK_INT: (uint8, int8, *NARROW_INTS),
    uint8: (int16, uint16), uint16: (int32, uint32), uint32: (int64, uint64), uint64: (_WEAK_FLOAT,),
    int8: (int16,), int16: (int32,), int32: (int64,), int64: (_WEAK_FLOAT,),
    _WEAK_FLOAT: (bfloat16, float16, *NARROW_FLOATS, _WEAK_COMPLEX),
    bfloat16: (float32,), float16: (float32,), float32: (float64, complex64), float64: (complex128,),
    _WEAK_COMPLEX: (complex64,), complex64: (complex128,), complex128: (),
    **{narrow: () for narrow in NARROW_INTS + NARROW_FLOATS},
}
_LATTICE_X32: dict[Any, tuple[Any, ...]] = {**_LATTICE_X64, uint32: (int32, uint64)}
# numpy_dtype_promotion='strict' (JAX's strict lattice): typed dtypes meet only themselves; a weak (Python) scalar
# joins an array of its kind or above (2 * int8 is int8, 2.5 * bfloat16 bfloat16), no typed dtype is promoted.
_INTS = (uint8, uint16, uint32, uint64, int8, int16, int32, int64, *NARROW_INTS)
_LATTICE_STRICT: dict[Any, tuple[Any, ...]] = {
    **{node: () for node in _LATTICE_X64},
    _WEAK_INT: (_WEAK_FLOAT, *_INTS),
    _WEAK_FLOAT: (_WEAK_COMPLEX, bfloat16, float16, float32, float64, *NARROW_FLOATS),
    _WEAK_COMPLEX: (complex64, complex128),
}
_LATTICES = {"x64": _LATTICE_X64, "x32": _LATTICE_X32, "strict": _LATTICE_STRICT}


class TypePromotionError(ValueError):
    """Operands whose dtypes have no implicit promotion (numpy_dtype_promotion='strict'), as JAX's."""


def strict_promotion() -> bool:
    """Whether `ember.config.numpy_dtype_promotion` is 'strict'."""
    return config.read_canonical("numpy_dtype_promotion") == "strict"


@functools.lru_cache(maxsize=None)
def _upper_set(node: Any, lattice: str) -> frozenset:
    result = {node}
    for parent in _LATTICES[lattice][node]:
        result |= _upper_set(parent, lattice)
    return frozenset(result)


def _lattice_node(dtype: np.dtype, weak: bool) -> Any:
    if weak and is_float(dtype):
        return _WEAK_FLOAT
    if weak and is_int(dtype):
        return _WEAK_INT
    if weak and is_complex(dtype):
        return _WEAK_COMPLEX
    return dtype


@functools.lru_cache(maxsize=4096)
def _join(nodes: tuple, lattice: str) -> Any:
    common = functools.reduce(frozenset.intersection, (_upper_set(n, lattice) for n in nodes))
    # The least element of the common upper set is the one whose own upper set contains all the others.
    for candidate in common:
        if _upper_set(candidate, lattice) >= common:
            return candidate
    names = tuple(n if isinstance(n, str) else str(n) for n in nodes)
    if lattice == "strict":
        raise TypePromotionError(
            f"Input dtypes {names} have no available implicit dtype promotion path when "
            "numpy_dtype_promotion='strict' (weak types written i*, f*, c*). Cast the inputs explicitly to the "
            "dtype you want, or set ember.config numpy_dtype_promotion='standard'.")
    narrow = sorted({n.name for n in nodes if isinstance(n, np.dtype) and is_narrow(n)})
    # (only the narrow types lack a common upper bound on the standard lattices)
    raise TypePromotionError(
        f"Input dtypes {names} have no available implicit dtype promotion path (weak types written i*, f*, c*): "
        f"JAX's narrow types ({', '.join(narrow)}) are promoted only with Python scalars, bool (and, for the narrow "
        "floats, the integers) and themselves, so that no computation leaves or enters them unnoticed. Convert "
        "explicitly, e.g. x.astype('float32').")


def promote_types(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Least upper bound of (dtype, weak_type) pairs; returns (dtype, weak_type) as JAX does, with the 64-bit rule
    above (JAX's 64-bit table when an operand is 64-bit or enable_x64 is on, its 32-bit table otherwise), or on the
    strict lattice with numpy_dtype_promotion='strict' (TypePromotionError where there is no implicit promotion)."""
    return _promote_cached(typed, x64_enabled(), strict_promotion())


@functools.lru_cache(maxsize=4096)
def _promote_cached(typed: tuple[tuple[np.dtype, bool], ...], x64: bool, strict: bool = False
                    ) -> tuple[np.dtype, bool]:
    if len(typed) == 1:
        dtype, weak = typed[0]
        return dtype, weak and dtype != bool_
    if any(d is token for d, _ in typed):
        raise TypeError(TOKEN_NOT_AN_ARRAY)
    wide = x64 or any(is_64bit(d) for d, _ in typed)
    all_weak = all(w for _, w in typed)
    if all_weak:  # as JAX: the bound of the typed counterparts, weakly typed
        nodes = {d for d, _ in typed}
    elif len({d for d, _ in typed}) == 1:
        return typed[0][0], False
    else:
        nodes = {_lattice_node(d, w) for d, w in typed}
    lattice = "strict" if strict and not all_weak else "x64" if wide else "x32"
    joined = _join(tuple(sorted(nodes, key=str)), lattice)
    if joined == _WEAK_INT:
        return (int64 if wide else int32), True
    if joined == _WEAK_FLOAT:
        return (float64 if wide else float32), True
    if joined == _WEAK_COMPLEX:
        return (complex128 if wide else complex64), True
    return joined, all_weak and joined != bool_


def result_type(*dtypes: Any) -> np.dtype:
    """numpy-style result_type over dtypes and values, using ember's promotion rules (the Python types int and
    float count as weak, as Python scalars do)."""
    return promote_types(*(dtype_and_weak(x) for x in dtypes))[0]


def dtype_and_weak(x: Any) -> tuple[np.dtype, bool]:
    """The (dtype, weak_type) of a value, an abstract value or a dtype-like."""
    aval = getattr(x, "aval", None)
    if isinstance(x, ShapedArray):
        return x.dtype, x.weak_type
    if aval is not None:
        return aval.dtype, aval.weak_type
    if type(x) in _PYTHON_SCALAR_TYPES:
        return python_scalar_dtype(type(x))
    if isinstance(x, np.ndarray | np.generic):
        return canonicalize_dtype(x.dtype), False
    if x is int or x is float or x is complex:  # the Python types, as dtype-likes, are weak (as in JAX)
        return python_scalar_dtype(x)
    return parse_dtype(x), False


# ---------------------------------------------------------------------------------------------------------------
MAX_BYTES = 2**63 - 1  # XLA counts bytes and elements in int64: a bigger array aborts it, so no aval may describe one


class ArrayTooLargeError(ValueError):
    """An array of more than MAX_BYTES bytes was described (a ValueError)."""


NO_VMA: frozenset = frozenset()  # the varying axes of a value that is the same on every device (or outside any)
_AXIS_ORDER: dict[Any, int] = {}  # mesh axis name -> its position in the mesh that bound it (for printing)


def note_axis_order(names: Sequence[Any]) -> None:
    """Record the order of a mesh's axes: varying axes print in it (as JAX prints them in mesh order)."""
    for i, name in enumerate(names):
        _AXIS_ORDER.setdefault(name, i)


def ordered_axes(axes: Iterable[Any]) -> tuple[Any, ...]:
    """Axis names in mesh order (names of no mesh last, by their text)."""
    return tuple(sorted(axes, key=lambda a: (_AXIS_ORDER.get(a, len(_AXIS_ORDER)), str(a))))


class ManualAxisType(NamedTuple):
    """How a value inside a shard_map body relates to the devices along the mesh's manual axes (as JAX's
    jax.sharding.ManualAxisType, `typeof(x).mat`): varying, the axes along which it may differ from device to
    device. (ember has no unreduced or reduced values: those two sets are always empty.)"""
    varying: frozenset = NO_VMA
    unreduced: frozenset = NO_VMA
    reduced: frozenset = NO_VMA


class extended(np.generic):  # noqa: N801 (JAX's name)
    """The abstract type of JAX's extended dtypes (jax.dtypes.extended): ember's typed PRNG keys' dtype is one."""


class prng_key(extended):  # noqa: N801 (JAX's name)
    """The abstract type of typed PRNG key dtypes (jax.dtypes.prng_key): `issubdtype(key.dtype, prng_key)`."""


def is_key_dtype(dtype: Any) -> bool:
    """Whether dtype is a typed PRNG key's (key<fry>)."""
    return str(getattr(dtype, "name", "")).startswith("key<")


class ShardingTypeError(Exception):
    """Operands whose explicit shardings (JAX's sharding in types) no rule can combine, or a result whose sharding is
    ambiguous: JAX's ShardingTypeError (its messages say which `out_sharding=` or reshard resolves it)."""


class ShapedArray:
    """The abstract value of an array: its shape and dtype, whether its type is weak (as a Python scalar's), and
    - inside a shard_map body, its varying manual axes (vma): the mesh axes along which its value may differ from
      device to device (JAX's `typeof(x).mat.varying`; empty outside any shard_map, and for a value every device
      holds alike). Printed f32[2,1]{V:i}, as JAX prints it;
    - on a mesh with Explicit axes (JAX's explicit sharding mode), its explicit sharding: a NamedSharding over that
      (concrete) mesh whose spec names, for each dimension, the Explicit mesh axes splitting it (None: not split),
      or None for a value of no such mesh. Printed f32[8@X,4], as JAX prints it; `aval.sharding` is JAX's view of
      it (a NamedSharding over the mesh's AbstractMesh). Each primitive's sharding rule gives its results' (see
      ember._core.explicit)."""
    __slots__ = ("shape", "dtype", "weak_type", "vma", "explicit", "_hash")

    def __init__(self, shape: Iterable[int], dtype: Any, weak_type: bool = False, vma: frozenset = NO_VMA,
                 explicit: Any = None):
        shape = tuple(shape)
        symbolic = False
        for dim in shape:
            if not isinstance(dim, int | np.integer) or isinstance(dim, bool) or dim < 0:
                if not isinstance(dim, DimExpr):
                    raise TypeError(f"ShapedArray: shape must be a tuple of non-negative ints, got {shape!r}")
                symbolic = True  # (a symbolic dimension: ember.export's shape polymorphism)
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape) if not symbolic else _symbolic_shape(shape)
        # (float0 is the dtype of a tangent of an integer or boolean value, as JAX's to_tangent_aval gives it: a
        # type of the extension API's symbolic zeros only, never of an array or an IR value)
        self.dtype: np.dtype = float0 if isinstance(dtype, np.dtype) and dtype == float0 else parse_dtype(dtype)
        if not symbolic and math.prod(self.shape) * max(self.dtype.itemsize, 1) > MAX_BYTES:
            raise ArrayTooLargeError(f"an array of shape {self.shape} and dtype {self.dtype.name} would take "
                             f"{math.prod(self.shape) * self.dtype.itemsize:.3g} bytes, more than the largest array "
                             f"XLA can address ({MAX_BYTES:.3g} bytes)")
        self.weak_type: bool = bool(weak_type)
        self.vma: frozenset = vma if type(vma) is frozenset else frozenset(vma)
        if explicit is not None and len(explicit.spec) != len(self.shape):
            raise ValueError(f"ShapedArray: the explicit sharding {explicit.spec} does not have one entry per "
                             f"dimension of shape {self.shape}")
        self.explicit = explicit
        self._hash = hash((self.shape, self.dtype, self.weak_type, self.vma, explicit))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def mat(self) -> ManualAxisType:
        """The value's manual axis type (JAX's `typeof(x).mat`, also `.manual_axis_type`): its varying axes."""
        return ManualAxisType(self.vma)

    manual_axis_type = mat

    @property
    def sharding(self) -> Any:
        """The sharding in the type, as JAX's `typeof(x).sharding`: a NamedSharding over an AbstractMesh (the empty
        mesh, and a spec of Nones, for a value of no mesh with Explicit axes)."""
        return SHARDING_VIEW.of(self)

    def update(self, shape: Sequence[int] | None = None, dtype: Any = None, weak_type: bool | None = None,
               vma: frozenset | None = None, explicit: Any = False) -> "ShapedArray":
        """A copy with the given fields replaced; the explicit sharding is kept while the rank is (pass explicit=
        to set it: None drops it)."""
        shape = self.shape if shape is None else tuple(shape)
        if explicit is False:
            explicit = self.explicit if len(shape) == len(self.shape) else None
        return ShapedArray(shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, self.vma if vma is None else vma,
                           explicit)

    def with_vma(self, vma: frozenset) -> "ShapedArray":
        """The same type, varying over vma."""
        return self if vma == self.vma else ShapedArray(self.shape, self.dtype, self.weak_type, vma, self.explicit)

    def with_explicit(self, explicit: Any) -> "ShapedArray":
        """The same type, with this explicit sharding (None: none)."""
        return self if explicit == self.explicit else ShapedArray(self.shape, self.dtype, self.weak_type, self.vma,
                                                                  explicit)

    def to_tangent_aval(self) -> "ShapedArray":
        """The type of this value's tangents (as JAX's): the same for a floating-point or complex value, float0 for
        an integer or boolean one (whose tangents are zero)."""
        return self if is_inexact(self.dtype) or self.dtype == float0 else ShapedArray(
            self.shape, float0, self.weak_type, self.vma, self.explicit)

    def strip_weak_type(self) -> "ShapedArray":
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype, False, self.vma, self.explicit)

    def str_short(self, short_dtypes: bool = True) -> str:
        """The type as the IR prints it (f32[8@X,4]{V:i}); with short_dtypes=False as JAX's str(typeof(x)) prints
        it (float32[8@X,4]{V:i})."""
        if self.explicit is None:
            dims = ",".join(map(str, self.shape))
        else:
            dims = ",".join(f"{n}@{_entry_text(e)}" if e is not None else str(n)
                            for n, e in zip(self.shape, self.explicit.spec))
        name = "float0" if self.dtype == float0 else short_name(self.dtype) if short_dtypes else self.dtype.name
        text = f"{name}[{dims}]"
        return text + vma_text(self.vma) if self.vma else text

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapedArray) and self.shape == other.shape and self.dtype == other.dtype
                and self.weak_type == other.weak_type and self.vma == other.vma and self.explicit == other.explicit)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:  # (as JAX's: ShapedArray(float32[8@X,4], weak_type=True))
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(False)}{weak})"

    def __str__(self) -> str:  # (as JAX's str(typeof(x)): float32[8@X,4]{V:i}; the IR prints str_short())
        return self.str_short(False)


class AbstractToken(ShapedArray):
    """The type of a token (JAX's AbstractToken, printed Tok): a value with no data that orders side effects
    (lax.create_token, lax.after_all; JAX's tokens). It is a ShapedArray of shape () and the dtype `token`, so that
    IRs, equations and programs' signatures carry it as any value; every array operation refuses that dtype, and it
    lowers to !stablehlo.token. One instance: abstract_token."""
    __slots__ = ()
    _instance: "AbstractToken | None" = None

    def __new__(cls) -> "AbstractToken":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self) -> None:
        self.shape, self.dtype, self.weak_type, self.vma, self.explicit = (), token, False, NO_VMA, None
        self._hash = hash("AbstractToken")

    def update(self, shape: Sequence[int] | None = None, dtype: Any = None, weak_type: bool | None = None,
               vma: frozenset | None = None, explicit: Any = False) -> "ShapedArray":
        if shape not in (None, ()) or dtype not in (None, token):
            raise TypeError(f"a token (Tok) has no shape or dtype to change (shape={shape}, dtype={dtype})")
        return self

    def with_vma(self, vma: frozenset) -> "AbstractToken":
        return self

    def with_explicit(self, explicit: Any) -> "AbstractToken":
        return self

    def to_tangent_aval(self) -> "AbstractToken":
        return self  # (as JAX's: a token's tangent type is a token)

    def strip_weak_type(self) -> "AbstractToken":
        return self

    def str_short(self, short_dtypes: bool = True) -> str:
        return "Tok"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractToken)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "AbstractToken()"

    __str__ = __repr__  # (as JAX's: the IR prints str_short, Tok)

    def __reduce__(self) -> Any:
        return AbstractToken, ()


abstract_token = AbstractToken()


def is_token(aval: Any) -> bool:
    """Whether aval is a token's type."""
    return isinstance(aval, AbstractToken)


def _symbolic_shape(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """A shape holding symbolic dimensions, checked: one scope, and no dimension known to be negative (one whose
    sign the bounds do not decide is kept, as JAX keeps it: a program's dimensions are checked when its variables
    are bound)."""
    scope = None
    dims = []
    for d in shape:
        if isinstance(d, DimExpr):
            if scope is None:
                scope = d.scope
            elif d.scope is not scope:
                raise ValueError(f"ShapedArray: the symbolic dimensions of shape {shape} come from different "
                                 "scopes (pass scope= to symbolic_shape to make them in one)")
            if bounds(d)[1] < 0:
                dims_text = ", ".join(map(str, shape))
                raise TypeError(f"ShapedArray: dimension '{d}' of shape ({dims_text}) is negative")
            dims.append(d)
        else:
            dims.append(int(d))
    return tuple(dims)


def _entry_text(entry: Any) -> str:
    """A dimension's mesh axes as JAX prints them in a type: X, or (X,Y)."""
    if isinstance(entry, tuple):
        return entry[0] if len(entry) == 1 else "(" + ",".join(map(str, entry)) + ")"
    return str(entry)


class _ShardingView:
    """How ShapedArray.sharding shows an explicit sharding as JAX does (over an AbstractMesh): filled by
    ember._core.sharding, which defines meshes (a later module)."""

    def __init__(self) -> None:
        self.of: Any = lambda aval: aval.explicit


SHARDING_VIEW = _ShardingView()


def vma_text(vma: frozenset) -> str:
    """{V:i} or {V:(i,j)}: varying axes as JAX prints them after a type."""
    names = [str(a) for a in ordered_axes(vma)]
    return "{V:" + (names[0] if len(names) == 1 else "(" + ",".join(names) + ")") + "}"


def join_vma(avals: Iterable[ShapedArray]) -> frozenset:
    """The union of the varying axes of avals: those of a result computed from all of them."""
    vma = NO_VMA
    for aval in avals:
        v = aval.vma
        if v and v is not vma:
            vma = vma | v if vma else v
    return vma


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
