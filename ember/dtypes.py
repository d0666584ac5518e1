"""ember.dtypes, as jax.dtypes: dtype utilities with JAX's semantics (the promotion lattice, weak types, x64)."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ember._core import dtypes as _dt
from ember._core.dtypes import canonicalize_dtype as canonicalize_dtype, finfo as finfo
from ember._core.dtypes import float0 as float0, iinfo as iinfo, NarrowedDtypeWarning as NarrowedDtypeWarning
from ember._core.dtypes import TypePromotionError as TypePromotionError
from ember._core.dtypes import extended as extended, prng_key as prng_key
from ember.numpy import issubdtype as issubdtype, result_type as result_type

bfloat16 = ml_dtypes.bfloat16  # (the scalar type, as jax.dtypes.bfloat16: bfloat16(1.5) makes a scalar)


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (bool, int, float or complex) of a scalar or an array's dtype, as JAX's."""
    dtype = np.dtype(x) if isinstance(x, np.dtype | type | str) else result_type(x)
    if dtype == np.bool_:
        return bool
    if np.issubdtype(dtype, np.integer) or dtype in _dt.NARROW_INTS:
        return int
    if np.issubdtype(dtype, np.complexfloating):
        return complex
    if np.issubdtype(dtype, np.inexact) or _dt.is_float(dtype):
        return float
    raise TypeError(f"scalar_type_of: {dtype} has no Python scalar type")


def itemsize_bits(dtype: Any) -> int:
    """The size of one element in bits: 4 for int4, uint4 and float4_e2m1fn, 2 for int2 and uint2 (as JAX's)."""
    return _dt.bit_width(dtype)


__all__ = ["bfloat16", "canonicalize_dtype", "extended", "finfo", "float0", "iinfo", "issubdtype", "itemsize_bits",
           "prng_key",
           "NarrowedDtypeWarning", "result_type", "scalar_type_of", "TypePromotionError"]
