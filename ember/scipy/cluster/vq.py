"""ember.scipy.cluster.vq: jax.scipy.cluster.vq's vq, the nearest code of a code book for each observation."""
from __future__ import annotations

from typing import Any

from ember import numpy as enp
from ember._api.jit import jit
from ember.scipy._util import check_arraylike, promote_inexact


@jit
def _vq(obs: Any, code_book: Any) -> tuple[Any, Any]:
    # (M, 1, N) - (K, N) -> (M, K) distances, each a Euclidean norm
    dist = enp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    code = enp.argmin(dist, axis=-1)
    return code, enp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """Assign each observation the index of its nearest code (in Euclidean distance) and that distance.

    obs is (M, N) (or (M,): length-1 observations) and code_book (K, N) (or (K,)); both are promoted to one
    inexact dtype. Returns (code, dist): code an int array of shape (M,) with 0 <= code < K (the first of equally
    near codes), dist the float array of shape (M,) of distances. check_finite is unused, as in JAX.
    """
    del check_finite
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs_arr, cb_arr = promote_inexact(obs, code_book)
    if obs_arr.ndim != cb_arr.ndim:
        raise ValueError(f"Observation and code_book should have the same rank (scipy.cluster.vq.vq: obs has shape "
                         f"{obs_arr.shape}, code_book {cb_arr.shape})")
    if obs_arr.ndim == 1:
        obs_arr, cb_arr = obs_arr[:, None], cb_arr[:, None]
    if obs_arr.ndim != 2:
        raise ValueError(f"ndim different than 1 or 2 are not supported (scipy.cluster.vq.vq: obs has shape "
                         f"{obs_arr.shape})")
    if obs_arr.shape[1] != cb_arr.shape[1]:
        raise ValueError(f"scipy.cluster.vq.vq: observations of length {obs_arr.shape[1]} and codes of length "
                         f"{cb_arr.shape[1]} differ (obs {obs_arr.shape}, code_book {cb_arr.shape})")
    return _vq(obs_arr, cb_arr)


__all__ = ["vq"]
