"""Helpers shared by ember.scipy's submodules (cluster, interpolate, optimize, sparse, spatial): jax.numpy's
argument check (arrays and scalars, not lists) and promotion to a common inexact dtype."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._core import dtypes as dt
from ember._core import Tracer


def check_arraylike(name: str, *args: Any) -> None:
    """A TypeError naming the function and the position for an argument that is not an array or a scalar (a list,
    a string, None), as jax.numpy's check_arraylike."""
    for i, arg in enumerate(args):
        if isinstance(arg, (str, bytes)) or not (
                isinstance(arg, (enp.ndarray, Tracer, np.ndarray, np.generic, bool, int, float, complex))
                or hasattr(arg, "__jax_array__")):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(arg)} at position {i}.")


def promote_inexact(*values: Any) -> list[Any]:
    """The values as arrays of their common inexact dtype (integers and booleans become the default float, complex
    stays complex; Python scalars are weak), as JAX's promote_dtypes_inexact."""
    arrays = [enp.asarray(v) for v in values]
    typed = [dt.dtype_and_weak(a) for a in arrays]
    target, weak = dt.promote_types(*typed)
    target = dt.canonical_dtype(dt.to_inexact_dtype(target))
    return [a if t == (target, weak) else lax.convert_element_type(a, target, weak) for a, t in zip(arrays, typed)]
