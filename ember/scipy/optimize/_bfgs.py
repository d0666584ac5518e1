"""The quasi-Newton minimizers behind ember.scipy.optimize.minimize: BFGS (Nocedal and Wright's Algorithm 6.1,
the dense inverse-Hessian update) and L-BFGS (Algorithm 7.4's two-loop recursion over the last maxcor pairs,
extended to complex variables as Sorber, Van Barel and De Lathauwer (2012) do, as JAX's), each a `lax.while_loop`
over a NamedTuple state, with the strong-Wolfe line search of _line_search."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.autodiff import value_and_grad
from ember.scipy.optimize._line_search import line_search


class _BFGSState(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any  # noqa: N815  (the inverse Hessian estimate, as JAX names it)
    old_old_fval: Any
    status: Any
    line_search_status: Any


def minimize_bfgs(fun: Callable[[Any], Any], x0: Any, maxiter: int | None = None, norm: Any = np.inf,
                  gtol: float = 1e-5, line_search_maxiter: int = 10) -> _BFGSState:
    """BFGS from x0 until the gradient's norm (of order `norm`) is below gtol, a line search fails, or maxiter
    iterations (200 per variable by default). status: 0 converged, 1 maxiter, 3 the line search's zoom failed, 5
    the line search ran out of steps (line_search_maxiter)."""
    if maxiter is None:
        maxiter = int(np.size(x0)) * 200
    d = x0.shape[0]
    eye = enp.eye(d, dtype=x0.dtype)
    f0, g0 = value_and_grad(fun)(x0)
    state = _BFGSState(converged=enp.linalg.norm(g0, ord=norm) < gtol, failed=enp.asarray(False), k=0, nfev=1,
                       ngev=1, x_k=x0, f_k=f0, g_k=g0, H_k=eye, old_old_fval=f0 + enp.linalg.norm(g0) / 2,
                       status=0, line_search_status=0)

    def step(s: _BFGSState) -> _BFGSState:
        p = -enp.dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, p, old_fval=s.f_k, old_old_fval=s.old_old_fval, gfk=s.g_k,
                         maxiter=line_search_maxiter)
        step = ls.a_k * p
        y = ls.g_k - s.g_k
        rho = 1 / enp.dot(y, step)
        # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T: the update keeping H y = s (the secant condition)
        w = eye - rho * step[:, None] * y[None, :]
        h = w @ s.H_k @ w.T + rho * step[:, None] * step[None, :]
        return _BFGSState(converged=enp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed, k=s.k + 1,
                          nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, x_k=s.x_k + step, f_k=ls.f_k, g_k=ls.g_k,
                          H_k=enp.where(enp.isfinite(rho), h, s.H_k), old_old_fval=s.f_k, status=s.status,
                          line_search_status=ls.status)

    s = lax.while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), step, state)
    status = enp.where(s.converged, 0, enp.where(s.k == maxiter, 1,
                                                  enp.where(s.failed, 2 + s.line_search_status, -1)))
    return s._replace(status=status)


class _LBFGSState(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def _direction(s: _LBFGSState) -> Any:
    """The two-loop recursion: -H g for the L-BFGS inverse Hessian H (gamma times the identity, updated with the
    stored pairs, newest last in the history)."""
    m = s.rho_history.shape[0]
    dtype = s.rho_history.dtype
    used = enp.minimum(s.k, m)

    def newest_first(j: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        q, alphas = carry
        i = m - 1 - j
        a = s.rho_history[i] * enp.real(enp.dot(enp.conj(s.s_history[i]), q)).astype(dtype)
        return q - a * enp.conj(s.y_history[i]), alphas.at[i].set(a)

    q, alphas = lax.fori_loop(0, used, newest_first, (-enp.conj(s.g_k), enp.zeros_like(s.rho_history)))
    q = s.gamma * q

    def oldest_first(j: Any, q: Any) -> Any:
        i = m - used + j
        b = s.rho_history[i] * enp.real(enp.dot(s.y_history[i], q)).astype(dtype)
        return q + (alphas[i] - b) * s.s_history[i]

    return lax.fori_loop(0, used, oldest_first, q)


def _push(history: Any, new: Any) -> Any:
    """The history with its oldest entry dropped and new appended."""
    return enp.concatenate([history[1:], new[None]], axis=0)


def minimize_lbfgs(fun: Callable[[Any], Any], x0: Any, maxiter: float | None = None, norm: Any = np.inf,
                   maxcor: int = 10, ftol: float = 2.220446049250313e-09, gtol: float = 1e-05,
                   maxfun: float | None = None, maxgrad: float | None = None, maxls: int = 20) -> _LBFGSState:
    """L-BFGS from x0 keeping maxcor pairs, until the gradient's norm is below gtol; status: 0 converged, 1
    maxiter, 2 maxfun, 3 maxgrad evaluations, 4 a decrease below ftol, 5 a failed line search."""
    d = x0.shape[0]
    dtype = x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter, maxfun, maxgrad = (np.inf if v is None else v for v in (maxiter, maxfun, maxgrad))
    f0, g0 = value_and_grad(fun)(x0)
    state = _LBFGSState(converged=enp.asarray(False), failed=enp.asarray(False), k=0, nfev=1, ngev=1, x_k=x0,
                        f_k=f0, g_k=g0, s_history=enp.zeros((maxcor, d), dtype),
                        y_history=enp.zeros((maxcor, d), dtype), rho_history=enp.zeros((maxcor,), dtype),
                        gamma=enp.ones((), dtype), status=0, ls_status=0)

    def step(s: _LBFGSState) -> _LBFGSState:
        p = _direction(s)
        ls = line_search(fun, s.x_k, p, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
        step = enp.asarray(ls.a_k).astype(p.dtype) * p
        y = ls.g_k - s.g_k
        curv = enp.real(enp.dot(y, step))
        rho = (1 / curv).astype(y.dtype)
        gamma = curv / enp.real(enp.dot(enp.conj(y), y))
        status = enp.where(ls.failed, 5, enp.where(s.k >= maxiter, 1, enp.where(
            s.nfev >= maxfun, 2, enp.where(s.ngev >= maxgrad, 3, enp.where(s.f_k - ls.f_k < ftol, 4, 0)))))
        converged = enp.linalg.norm(ls.g_k, ord=norm) < gtol
        return _LBFGSState(converged=converged, failed=(status > 0) & ~converged, k=s.k + 1,
                           nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, x_k=(s.x_k + step).astype(s.x_k.dtype),
                           f_k=ls.f_k.astype(s.f_k.dtype), g_k=ls.g_k.astype(s.g_k.dtype),
                           s_history=_push(s.s_history, step), y_history=_push(s.y_history, y),
                           rho_history=_push(s.rho_history, rho), gamma=gamma.astype(s.g_k.dtype),
                           status=enp.where(converged, 0, status), ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, step, state)
