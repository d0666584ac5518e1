"""Scalar types, dtypes and constants of ember.numpy (numpy's and ml_dtypes' own types)."""
import ml_dtypes as _ml_dtypes
import numpy as _np

from ember._runtime.array import Array
from ember._core.dtypes import bool_ as bool_, finfo as finfo, iinfo as iinfo

ndarray = Array
# Scalar types double as dtypes, as in numpy: enp.float32 is a dtype argument and enp.float32(1.5) a scalar.
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
bfloat16 = _ml_dtypes.bfloat16
inf, nan, pi, e = _np.inf, _np.nan, _np.pi, _np.e
newaxis = None
dtype = _np.dtype
# numpy's abstract scalar types (for issubdtype) and the aliases numpy and jax.numpy export
generic, number, integer, signedinteger, unsignedinteger = (_np.generic, _np.number, _np.integer,
                                                             _np.signedinteger, _np.unsignedinteger)
inexact, floating, complexfloating, flexible, character = (_np.inexact, _np.floating, _np.complexfloating,
                                                           _np.flexible, _np.character)
object_ = _np.object_
bool = _np.bool_  # noqa: A001 - numpy 2's name
int_, uint = _np.int64, _np.uint64
float_ = double = _np.float64
single = _np.float32
csingle, cdouble, complex_ = _np.complex64, _np.complex128, _np.complex128
euler_gamma = _np.euler_gamma
ComplexWarning = _np.exceptions.ComplexWarning


__all__ = ["bfloat16", "bool_", "dtype", "e", "finfo", "float16", "float32", "float64", "iinfo", "inf", "int8",
           "int16", "int32", "int64", "nan", "ndarray", "newaxis", "pi", "uint8", "uint16", "uint32", "uint64",
           "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
           "complexfloating", "flexible", "character", "object_", "bool", "int_", "uint", "float_", "double", "single",
           "euler_gamma", "complex64", "complex128", "csingle", "cdouble", "complex_",
           "ComplexWarning"]
