"""ember.typing, as jax.typing: annotations for functions that take arrays and dtypes."""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from ember._runtime import Array

ArrayLike = Union[Array, np.ndarray, np.generic, bool, int, float, complex]
"""Anything ember functions take as an array: an ember Array (or tracer), a numpy array or scalar, a Python
number."""
DTypeLike = Union[str, type, np.dtype, Any]
"""Anything that names a dtype: a string ("float32"), a type (np.float32, float), a numpy dtype."""

__all__ = ["ArrayLike", "DTypeLike"]
