"""ember.scipy.optimize.minimize and OptimizeResults (jax.scipy.optimize's)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

from ember import numpy as enp
from ember.scipy._util import promote_inexact
from ember.scipy.optimize._bfgs import minimize_bfgs, minimize_lbfgs


class OptimizeResults(NamedTuple):
    """The result of minimize (a NamedTuple, so a pytree).

    x: the solution; success: whether it converged (and no line search failed); status: 0 converged, 1 the
    iteration limit, and the method's own codes (BFGS: 3 the line search's zoom failed, 5 its step limit; L-BFGS: 2
    maxfun, 3 maxgrad, 4 a decrease below ftol, 5 a failed line search), -1 undefined; fun: f(x); jac: its
    gradient; hess_inv: BFGS's inverse Hessian estimate (None for L-BFGS); nfev, njev: evaluations of f and of its
    gradient; nit: iterations.
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


_LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def minimize(fun: Callable[..., Any], x0: Any, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimize a scalar function of a 1-D array, as jax.scipy.optimize.minimize (scipy's interface, gradients by
    autodiff).

    fun(x, *args) -> a real scalar; x0: the starting point, shape (n,); args: a tuple of extra arguments;
    method: "BFGS" or "l-bfgs-experimental-do-not-rely-on-this" (case-insensitive); tol: accepted and unused, as in
    JAX (give options={"gtol": ...}); options: the method's keywords — BFGS: maxiter (200 n), norm (inf), gtol
    (1e-5), line_search_maxiter (10); L-BFGS: maxiter, norm, maxcor (10), ftol, gtol, maxfun, maxgrad, maxls (20).
    Returns an OptimizeResults. Runs under jit and vmap (a lax.while_loop); ember also differentiates through the
    iterations (JAX cannot: its while_loop has no reverse mode).
    """
    options = {} if options is None else dict(options)
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")
    if not isinstance(method, str):
        raise TypeError(f"minimize: method must be a string, got {type(method).__name__}")
    del tol
    (x0,) = promote_inexact(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be a 1-D array (the n variables), got shape {x0.shape}")

    def objective(x: Any) -> Any:
        return fun(x, *args)

    kind = method.lower()
    if kind == "bfgs":
        r = minimize_bfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status, fun=r.f_k, jac=r.g_k,
                               hess_inv=r.H_k, nfev=r.nfev, njev=r.ngev, nit=r.k)
    if kind == _LBFGS:
        r = minimize_lbfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & enp.logical_not(r.failed), status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=None, nfev=r.nfev, njev=r.ngev, nit=r.k)
    raise ValueError(f"Method {method} not recognized")
