"""Helpers shared by ember.scipy's submodules (cluster, interpolate, optimize, sparse, spatial): jax.numpy's
argument check (arrays and scalars, not lists) and promotion to a common inexact dtype."""
from __future__ import annotations

from typing import Any

from ember import lax
from ember import numpy as enp
from ember._core import dtypes as dt
from ember._numpy.ufunc_api import _check_arraylike as check_arraylike  # jax.numpy's check: no lists


def promote_inexact(*values: Any) -> list[Any]:
    """The values as arrays of their common inexact dtype (integers and booleans become the default float, complex
    stays complex; Python scalars are weak), as JAX's promote_dtypes_inexact."""
    arrays = [enp.asarray(v) for v in values]
    typed = [dt.dtype_and_weak(a) for a in arrays]
    target, weak = dt.promote_types(*typed)
    target = dt.canonical_dtype(dt.to_inexact_dtype(target))
    return [a if t == (target, weak) else lax.convert_element_type(a, target, weak) for a, t in zip(arrays, typed)]


__all__ = ["check_arraylike", "promote_inexact"]
