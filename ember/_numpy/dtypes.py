"""Scalar types, dtypes and constants of ember.numpy (numpy's and ml_dtypes' own types)."""
import ml_dtypes as _ml_dtypes
import numpy as _np

from ember._runtime.array import Array, asarray
from ember._core import dtypes as _dt
from ember._core.dtypes import finfo as finfo, iinfo as iinfo

ndarray = Array


class _ScalarType(type):
    """The type of ember.numpy's scalar types (enp.float32, ...), as jax.numpy's: each is a dtype argument (it
    has the numpy dtype as `.dtype`, and equals and hashes as numpy's scalar type, so np.dtype(enp.float32),
    `x.dtype == enp.float32` and dict lookups work), isinstance(np.float32(1), enp.float32) holds, and calling it
    makes a 0-d (or n-d) ember Array: enp.float32(1.5). A 64-bit one gives a 32-bit Array without enable_x64,
    with a warning (enp.float64(1.0) is float32 then, as jnp.float64(1.0))."""
    dtype: _np.dtype

    def __call__(cls, x: object = 0) -> Array:
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, x: object) -> bool:
        return isinstance(x, cls.dtype.type)

    def __eq__(cls, other: object) -> bool:
        return other is cls or other == cls.dtype.type

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'ember.numpy.{cls.__name__}'>"


def _scalar_type(name: str, dtype: object) -> _ScalarType:
    return _ScalarType(name, (), {"dtype": _np.dtype(dtype), "__module__": "ember.numpy"})


int8, int16, int32, int64 = (_scalar_type(n, n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_scalar_type(n, n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_scalar_type(n, n) for n in ("float16", "float32", "float64"))
complex64, complex128 = _scalar_type("complex64", "complex64"), _scalar_type("complex128", "complex128")
bfloat16 = _scalar_type("bfloat16", _ml_dtypes.bfloat16)
bool_ = _scalar_type("bool_", _np.bool_)
# JAX's narrow types (ml_dtypes'), as in jax.numpy. ember computes in the 8- and 4-bit floats and the 4- and 2-bit
# integers as JAX's CPU does (docs/numpy.md, "Narrow dtypes"); the 6-bit floats and the 1-bit integers, in which
# JAX's CPU computes nothing, are named only: an array of one is a TypeError naming the dtype (parse_dtype).
_NARROW = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
           "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2",
           "int4", "uint1", "uint2", "uint4")
_COMPUTED_DOC = "JAX's narrow type (ml_dtypes'): {name}(x) makes an Array of it, as jnp.{name}."
_NAMED_DOC = ("JAX's narrow type (ml_dtypes'), named only: neither JAX's CPU nor ember computes in it (an array of it "
              "is a TypeError)")
globals().update({_name: _ScalarType(_name, (), {
    "dtype": _np.dtype(getattr(_ml_dtypes, _name)), "__module__": "ember.numpy",
    "__doc__": _NAMED_DOC if _np.dtype(getattr(_ml_dtypes, _name)) in _dt.REFUSED_NARROW
    else _COMPUTED_DOC.format(name=_name)}) for _name in _NARROW})
inf, nan, pi, e = _np.inf, _np.nan, _np.pi, _np.e
newaxis = None
dtype = _np.dtype
# numpy's abstract scalar types (for issubdtype) and the aliases numpy and jax.numpy export
generic, number, integer, signedinteger, unsignedinteger = (_np.generic, _np.number, _np.integer,
                                                             _np.signedinteger, _np.unsignedinteger)
inexact, floating, complexfloating, flexible, character = (_np.inexact, _np.floating, _np.complexfloating,
                                                           _np.flexible, _np.character)
object_ = _np.object_
bool = bool_  # noqa: A001 - numpy 2's name
int_, uint = int64, uint64
float_ = double = float64
single = float32
csingle, cdouble, complex_ = complex64, complex128, complex128
euler_gamma = _np.euler_gamma
ComplexWarning = _np.exceptions.ComplexWarning


__all__ = ["bfloat16", "bool_", "dtype", "e", "finfo", "float16", "float32", "float64", "iinfo", "inf", "int8",
           "int16", "int32", "int64", "nan", "ndarray", "newaxis", "pi", "uint8", "uint16", "uint32", "uint64",
           "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
           "complexfloating", "flexible", "character", "object_", "bool", "int_", "uint", "float_", "double", "single",
           "euler_gamma", "complex64", "complex128", "csingle", "cdouble", "complex_",
           "ComplexWarning", *_NARROW]
