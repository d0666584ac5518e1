"""ember.flatten_util, as jax.flatten_util: ravel_pytree, a pytree of arrays as one flat vector and back.

As JAX's: the vector's dtype is the promotion of the leaves' (canonical, non-weak) dtypes; when they are all one
dtype the unravel function takes a vector of any dtype (JAX issue 7809), otherwise it checks the dtype and converts
each piece back to its leaf's. The unravel function is hashable and compares equal for equal structures (JAX's
HashablePartial), so it may be a static argument of `jit`. Both work under jit, grad and vmap: they are ember.lax
operations with static sizes.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import numpy as np

from ember import lax
from ember._core.dtypes import dtype_and_weak
from ember.dtypes import result_type
from ember.tree_util import PyTreeDef, tree_flatten, tree_unflatten


@dataclasses.dataclass(frozen=True)
class _Unravel:
    """unravel_pytree(flat): the pytree ravel_pytree was given, with the values of flat."""
    treedef: PyTreeDef
    sizes: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]
    from_dtypes: tuple[np.dtype, ...] | None  # None: one dtype, the unravel function keeps the vector's
    to_dtype: np.dtype | None

    def __call__(self, flat: Any) -> Any:
        if not self.sizes:
            return tree_unflatten(self.treedef, [])
        if self.from_dtypes is not None:
            dtype = dtype_and_weak(flat)[0]
            if dtype != self.to_dtype:
                raise TypeError(f"unravel function given array of dtype {dtype}, but expected dtype {self.to_dtype}")
        chunks = lax.split(flat, self.sizes)
        leaves = [lax.reshape(chunk, shape) for chunk, shape in zip(chunks, self.shapes)]
        if self.from_dtypes is not None:
            with warnings.catch_warnings():  # complex back to real: the leaf was real (JAX warns neither)
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                leaves = [lax.convert_element_type(leaf, dtype) for leaf, dtype in zip(leaves, self.from_dtypes)]
        return tree_unflatten(self.treedef, leaves)


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """(flat, unravel): the leaves of pytree raveled and concatenated into one 1-D array, its dtype the promotion of
    the leaves' dtypes, and the function that takes such a vector back to a pytree of pytree's structure. No leaves:
    an empty float32 vector."""
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, np.float32), _Unravel(treedef, (), (), None, None)
    from_dtypes = tuple(dtype_and_weak(leaf)[0] for leaf in leaves)
    to_dtype = result_type(*from_dtypes)
    sizes = tuple(int(np.size(leaf)) for leaf in leaves)
    shapes = tuple(tuple(np.shape(leaf)) for leaf in leaves)
    if all(dtype == to_dtype for dtype in from_dtypes):
        flat = lax.concatenate([lax.reshape(leaf, (size,)) for leaf, size in zip(leaves, sizes)], 0)
        return flat, _Unravel(treedef, sizes, shapes, None, None)
    flat = lax.concatenate([lax.reshape(lax.convert_element_type(leaf, to_dtype), (size,))
                            for leaf, size in zip(leaves, sizes)], 0)
    return flat, _Unravel(treedef, sizes, shapes, from_dtypes, to_dtype)


__all__ = ["ravel_pytree"]
