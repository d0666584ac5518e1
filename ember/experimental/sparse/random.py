"""Random sparse arrays (jax.experimental.sparse.random): random_bcoo."""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import random
from ember.experimental.sparse.bcoo import BCOO


def random_bcoo(key: Any, shape: Sequence[int], *, dtype: Any = None, indices_dtype: Any = None,
                nse: float | int = 0.2, n_batch: int = 0, n_dense: int = 0, unique_indices: bool = True,
                sorted_indices: bool = False, generator: Callable[..., Any] = random.uniform, **kwds: Any) -> BCOO:
    """A BCOO array with random data (generator(key, shape=, dtype=, **kwds), uniform by default) at nse random
    positions per batch member (a fraction of the sparse size when 0 < nse < 1), distinct unless
    unique_indices=False, sorted with sorted_indices (like jax.experimental.sparse.random_bcoo: the same draws for
    the same key)."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"random_bcoo: invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape, sparse_shape = shape[:n_batch], shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"random_bcoo: got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    dtype = ember.dtypes.canonicalize_dtype(float if dtype is None else dtype)
    indices_dtype = ember.dtypes.canonicalize_dtype(int if indices_dtype is None else indices_dtype)
    if sparse_size > np.iinfo(indices_dtype).max:
        raise ValueError(f"random_bcoo: indices_dtype={indices_dtype} does not have enough range to generate sparse "
                         f"indices of size {sparse_size}.")

    def positions(k: Any) -> Any:
        if not sparse_shape:
            return jnp.zeros((nse, n_sparse), indices_dtype)
        flat = random.choice(k, sparse_size, shape=(nse,), replace=not unique_indices).astype(indices_dtype)
        return jnp.stack(jnp.unravel_index(flat, sparse_shape), axis=1).astype(indices_dtype)
    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = ember.vmap(positions)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape)
    return mat.sort_indices() if sorted_indices else mat


__all__ = ["random_bcoo"]
