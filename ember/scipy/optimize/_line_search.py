"""The strong-Wolfe line search of ember.scipy.optimize's BFGS and L-BFGS: Nocedal and Wright's Algorithms 3.5
(bracketing, doubling the step) and 3.6 (zoom, by cubic or quadratic interpolation or bisection), with scipy's
safeguards (an interpolated point must lie in the middle 60% (cubic) or 80% (quadratic) of the bracket) and
JAX's limits (30 zoom steps; a bracket narrower than 1e-5 (1e-10 in float64) fails).

Everything is a `lax.while_loop` over a NamedTuple state; the branches are `where`s, so one search runs under jit
and vmap (a batch of searches runs until every member is done)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.autodiff import value_and_grad

_C1, _C2 = 1e-4, 0.9          # sufficient decrease, curvature
_ZOOM_STEPS = 30


def _choose(pred: Any, new: NamedTuple, old: NamedTuple) -> Any:
    """Field by field, new where pred else old."""
    return type(old)(*(enp.where(pred, a, b) for a, b in zip(new, old)))


class _Point(NamedTuple):
    """A step length a, phi(a) = f(x + a p) and phi'(a)."""
    a: Any
    phi: Any
    dphi: Any


def _cubic_min(lo: _Point, hi: _Point, rec: Any, rec_phi: Any) -> Any:
    """The minimizer of the cubic through (lo.a, lo.phi) with slope lo.dphi, (hi.a, hi.phi) and (rec, rec_phi)
    (NaN where there is none)."""
    db, dc = hi.a - lo.a, rec - lo.a
    fb = hi.phi - lo.phi - lo.dphi * db
    fc = rec_phi - lo.phi - lo.dphi * dc
    denom = (db * dc) ** 2 * (db - dc)
    a3 = (dc ** 2 * fb - db ** 2 * fc) / denom
    a2 = (-dc ** 3 * fb + db ** 3 * fc) / denom
    return lo.a + (-a2 + enp.sqrt(a2 * a2 - 3 * a3 * lo.dphi)) / (3 * a3)


def _quad_min(lo: _Point, hi: _Point) -> Any:
    """The minimizer of the parabola through (lo.a, lo.phi) with slope lo.dphi and (hi.a, hi.phi)."""
    db = hi.a - lo.a
    curvature = (hi.phi - lo.phi - lo.dphi * db) / (db * db)
    return lo.a - lo.dphi / (2 * curvature)


class _Zoom(NamedTuple):
    done: Any
    failed: Any
    j: Any
    lo: _Point
    hi: _Point
    rec: Any          # the previous end of the bracket (the cubic's third point)
    rec_phi: Any
    star: _Point
    g_star: Any
    nfev: Any


def _zoom(evaluate: Callable[[Any], tuple[Any, Any, Any]], sufficient: Callable[[Any, Any], Any],
          curvature: Callable[[Any], Any], lo: _Point, hi: _Point, g0: Any, skip: Any) -> _Zoom:
    """Algorithm 3.6: shrink the bracket [lo, hi] (lo the better end) to a point satisfying both Wolfe conditions.
    skip: do nothing (the caller needed no zoom)."""
    tiny = 1e-10 if np.finfo(enp.result_type(lo.a)).bits >= 64 else 1e-5
    start = _Zoom(done=enp.asarray(False), failed=enp.asarray(False), j=0, lo=lo, hi=hi, rec=(lo.a + hi.a) / 2,
                  rec_phi=(lo.phi + hi.phi) / 2, star=_Point(enp.ones_like(lo.a), lo.phi, lo.dphi), g_star=g0,
                  nfev=0)

    def step(s: _Zoom) -> _Zoom:
        width = s.hi.a - s.lo.a
        left, right = enp.minimum(s.lo.a, s.hi.a), enp.maximum(s.lo.a, s.hi.a)
        failed = s.failed | (enp.abs(width) <= tiny)
        cubic = _cubic_min(s.lo, s.hi, s.rec, s.rec_phi)
        use_cubic = (s.j > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        quad = _quad_min(s.lo, s.hi)
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        a = enp.where(use_cubic, cubic, enp.where(use_quad, quad, (s.lo.a + s.hi.a) / 2))
        phi, dphi, g = evaluate(a)
        new = _Point(a, phi.astype(s.lo.phi.dtype), dphi.astype(s.lo.dphi.dtype))
        g = g.astype(s.g_star.dtype)
        to_hi = sufficient(a, phi) | (phi >= s.lo.phi)           # a is worse than lo: the new hi end
        found = curvature(dphi) & ~to_hi                          # both Wolfe conditions hold at a
        to_lo = ~to_hi & ~found                                   # a is the new lo end ...
        flip = to_lo & (dphi * (s.hi.a - s.lo.a) >= 0)            # ... and the old lo the new hi end
        hi = _choose(to_hi, new, _choose(flip, s.lo, s.hi))
        rec = enp.where(to_hi | flip, s.hi.a, enp.where(to_lo, s.lo.a, s.rec))
        rec_phi = enp.where(to_hi | flip, s.hi.phi, enp.where(to_lo, s.lo.phi, s.rec_phi))
        return _Zoom(done=s.done | found, failed=failed | (s.j + 1 >= _ZOOM_STEPS), j=s.j + 1,
                     lo=_choose(to_lo, new, s.lo), hi=hi, rec=rec, rec_phi=rec_phi,
                     star=_choose(found, new, s.star), g_star=enp.where(found, g, s.g_star), nfev=s.nfev + 1)

    return lax.while_loop(lambda s: ~s.done & ~skip & ~s.failed, step, start)


class _Search(NamedTuple):
    done: Any
    failed: Any
    i: Any
    prev: _Point
    star: _Point
    g_star: Any
    nfev: Any


class LineSearchResults(NamedTuple):
    """failed: no step satisfying the strong Wolfe conditions was found; nfev, ngev: evaluations (each of f and
    its gradient); a_k: the step; f_k, g_k: f and its gradient there; status: 0, 1 (zoom failed) or 3 (maxiter
    steps)."""
    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def line_search(f: Callable[[Any], Any], xk: Any, pk: Any, old_fval: Any, gfk: Any, old_old_fval: Any = None,
                maxiter: int = 20) -> LineSearchResults:
    """A step a along pk from xk with f(xk + a pk) <= f(xk) + c1 a f'(xk) pk (sufficient decrease) and
    |f'(xk + a pk) pk| <= c2 |f'(xk) pk| (curvature), c1 = 1e-4 and c2 = 0.9. The first trial step is 1, or, given
    the previous iterate's value old_old_fval, the step that would repeat the last decrease (if smaller); then it
    doubles until the minimum is bracketed, and zooms in."""
    def evaluate(t: Any) -> tuple[Any, Any, Any]:
        phi, g = value_and_grad(f)(xk + enp.asarray(t, dtype=pk.dtype) * pk)
        return phi, enp.real(enp.dot(g, pk)), g

    phi0, dphi0 = old_fval, enp.real(enp.dot(gfk, pk))
    if old_old_fval is None:
        first = enp.ones_like(phi0)
    else:
        guess = 1.01 * 2 * (phi0 - old_old_fval) / dphi0
        first = enp.where(guess > 1, 1.0, guess).astype(enp.result_type(guess))

    def sufficient(a: Any, phi: Any) -> Any:      # (its negation: phi is above the sufficient-decrease line)
        return phi > phi0 + _C1 * a * dphi0

    def curvature(dphi: Any) -> Any:
        return enp.abs(dphi) <= -_C2 * dphi0

    zero = enp.zeros_like(first)
    start = _Search(done=enp.asarray(False), failed=enp.asarray(False), i=1, prev=_Point(zero, phi0, dphi0),
                    star=_Point(zero, phi0, dphi0), g_star=gfk, nfev=0)

    def step(s: _Search) -> _Search:
        a = enp.where(s.i == 1, first, 2 * s.prev.a)
        phi, dphi, g = evaluate(a)
        here = _Point(a, phi, dphi)
        overshot = sufficient(a, phi) | ((phi >= s.prev.phi) & (s.i > 1))  # the minimum is in [prev, a]
        accept = curvature(dphi) & ~overshot
        uphill = (dphi >= 0) & ~overshot & ~accept                          # ... in [a, prev], a the better end
        bracketed = overshot | uphill
        zoom = _zoom(evaluate, sufficient, curvature, _choose(overshot, s.prev, here),
                     _choose(overshot, here, s.prev), gfk, ~bracketed)
        star = _choose(accept, here, _choose(bracketed, zoom.star, s.star))
        g_star = enp.where(accept, g, enp.where(bracketed, zoom.g_star, s.g_star))
        return _Search(done=s.done | accept | bracketed, failed=s.failed | (bracketed & zoom.failed), i=s.i + 1,
                       prev=here, star=star, g_star=g_star, nfev=s.nfev + 1 + zoom.nfev)

    s = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, step, start)
    status = enp.where(s.failed, 1, enp.where(s.i > maxiter, 3, 0))
    a_k = s.star.a
    if np.finfo(enp.result_type(a_k)).bits != 64:   # (a step below 1e-8 would stall float32 iterations)
        a_k = enp.where(enp.abs(a_k) < 1e-8, enp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=s.failed | ~s.done, nit=s.i - 1, nfev=s.nfev, ngev=s.nfev, k=s.i, a_k=a_k,
                             f_k=s.star.phi, g_k=s.g_star, status=status)
