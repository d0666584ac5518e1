"""The format-independent entry points (jax.experimental.sparse.api): todense, empty, eye."""
from __future__ import annotations

import operator
from typing import Any, Sequence

from ember._core import Tracer
from ember._prims.shape import identity_primitive
from ember.experimental.sparse._base import JAXSparse
from ember.experimental.sparse.bcoo import BCOO
from ember.experimental.sparse.formats import FORMATS


# todense(x) of a dense array: the identity (jax.experimental.sparse's todense_p), bound on traced arrays so that
# sparsify, which stages a function at the dense shapes of its sparse arguments, sees where the function asked for
# a dense value: its sparse rule (transform.py) makes the sparse value dense there.
todense_p = identity_primitive("todense", rebinds_cotangent=True)


def todense(arr: Any) -> Any:
    """arr as a dense array: a sparse array's todense(), a dense array as it is."""
    if isinstance(arr, JAXSparse):
        return arr.todense()
    return todense_p.bind(arr) if isinstance(arr, Tracer) else arr


def empty(shape: Sequence[int], dtype: Any = None, index_dtype: Any = "int32", sparse_format: str = "bcoo",
          **kwds: Any) -> JAXSparse:
    """An all-zero sparse array of this shape (nse=0 unless nse= is given; n_batch, n_dense for BCOO)."""
    formats = FORMATS
    if sparse_format not in formats:
        raise ValueError(f"empty: sparse_format={sparse_format!r} not recognized; must be one of {list(formats)}")
    return formats[sparse_format]._empty(tuple(shape), dtype=dtype, index_dtype=index_dtype, **kwds)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, index_dtype: Any = "int32",
        sparse_format: str = "bcoo", **kwds: Any) -> JAXSparse:
    """The N x M sparse matrix with ones on its k-th diagonal (like jnp.eye)."""
    formats = FORMATS
    if sparse_format not in formats or sparse_format == "bcsr":
        raise ValueError(f"eye: sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{[f for f in formats if f != 'bcsr']}")
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    return formats[sparse_format]._eye(N=N, M=M, k=operator.index(k), dtype=dtype, index_dtype=index_dtype, **kwds)


__all__ = ["BCOO", "empty", "eye", "todense", "todense_p"]
