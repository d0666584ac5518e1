"""ember.test_util, as jax.test_util: check_grads, and the two checks it is made of (check_jvp, check_vjp).

A derivative is checked in one random direction against central finite differences of the function: forward mode
by the tangent it gives, reverse mode by the identity <cotangent, J v> = <J^T cotangent, v>. The directions are drawn
as JAX draws them (numpy's RandomState(0), a standard normal per element, one array after another in the order of
the arguments' leaves; complex leaves get an imaginary part from the next draws), so a check passes or fails as
JAX's does on the same function. Tolerances (atol, rtol) are a number, or a dict by dtype over the defaults below,
and are multiplied by the number of elements compared, as JAX's are."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember.dtypes import bfloat16, canonicalize_dtype
from ember.tree_util import tree_leaves, tree_map

EPS = 1e-4  # the finite-difference step

# JAX's default tolerances of derivative checks (atol and rtol alike), by dtype; 0 (exact) for the others.
GRADIENT_TOLERANCE: dict[np.dtype, float] = {
    np.dtype(bfloat16): 1e-1, np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5}


def _dtype_of(x: Any) -> np.dtype:
    if isinstance(x, bool | int | float | complex) and not isinstance(x, np.generic):
        return {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
                complex: np.dtype(np.complex128)}[type(x)]
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _as_given(value: np.ndarray, like: Any) -> Any:
    """value in like's dtype, a Python scalar where like is one (so functions see what they were given)."""
    value = np.asarray(value, dtype=_dtype_of(like))
    return value.item() if isinstance(like, bool | int | float | complex) and not isinstance(like, np.generic) \
        else value


def _tolerance(given: Any, dtype: np.dtype) -> float:
    dtype = canonicalize_dtype(dtype)
    if isinstance(given, dict):
        given = {np.dtype(k): v for k, v in given.items()}
        return given.get(dtype, GRADIENT_TOLERANCE.get(dtype, 0.0))
    return GRADIENT_TOLERANCE.get(dtype, 0.0) if given is None else given


def _assert_close(got: Any, want: Any, atol: Any, rtol: Any, what: str) -> None:
    for g, w in zip(tree_leaves(got), tree_leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shapes {g.shape} and {w.shape}"
        a = max(_tolerance(atol, g.dtype), _tolerance(atol, w.dtype)) * g.size
        r = max(_tolerance(rtol, g.dtype), _tolerance(rtol, w.dtype)) * w.size
        wide = [v.astype(np.float32) if v.dtype == bfloat16 else v for v in (g, w)]
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(*wide, **{k: v for k, v in (("atol", a), ("rtol", r)) if v}, err_msg=what)


def _assert_same_dtypes(xs: Any, ys: Any) -> None:
    same = (lambda d: d) if ember.enable_x64.value else canonicalize_dtype
    for x, y in zip(tree_leaves(xs), tree_leaves(ys), strict=True):
        assert same(_dtype_of(x)) == same(_dtype_of(y)), (_dtype_of(x), _dtype_of(y))


def _direction(rng: np.random.RandomState, tree: Any) -> Any:
    """A random direction shaped like tree (standard normal elements, complex ones with an imaginary part)."""
    def draw(x: Any) -> Any:
        dtype, shape = _dtype_of(x), np.shape(x)
        value = np.asarray(rng.randn(*shape), dtype=dtype)
        if np.issubdtype(dtype, np.complexfloating):
            value = value + dtype.type(1j) * np.asarray(rng.randn(*shape), dtype=dtype)
        return _as_given(value, x)
    return tree_map(draw, tree)


def _moved(args: Any, direction: Any, step: float) -> Any:
    """args + step * direction, leaf by leaf in each leaf's own dtype."""
    return tree_map(lambda x, d: _as_given(np.asarray(x, _dtype_of(x)) + np.asarray(step, _dtype_of(x)) *
                                           np.asarray(d, _dtype_of(x)), x), args, direction)


def _finite_difference(f: Callable, args: Sequence[Any], direction: Any, eps: float) -> Any:
    """(f(args + eps v) - f(args - eps v)) / (2 eps), an infinite value minus itself counting as 0."""
    def slope(hi: Any, lo: Any) -> Any:
        dtype = _dtype_of(hi)
        hi, lo = np.asarray(hi, dtype), np.asarray(lo, dtype)
        with np.errstate(invalid="ignore"):
            diff = np.where(hi == lo, np.zeros((), dtype), np.subtract(hi, lo, dtype=dtype))
        return np.multiply(diff, np.asarray(0.5 / eps, dtype), dtype=dtype)
    return tree_map(slope, f(*_moved(args, direction, eps)), f(*_moved(args, direction, -eps)))


def _dot(xs: Any, ys: Any) -> float:
    """The real part of <xs, ys> over all leaves."""
    return sum(np.real(np.vdot(np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)))
               for x, y in zip(tree_leaves(xs), tree_leaves(ys), strict=True))


def _named(err_msg: str, what: str) -> str:
    return f"{err_msg} {what}" if err_msg else what


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """Check f_jvp (called (primals, tangents), e.g. `partial(ember.jvp, f)`) at args against f's finite
    differences in a random direction; AssertionError when they differ."""
    v = _direction(np.random.RandomState(0), args)
    out, tangent = f_jvp(args, v)
    _assert_same_dtypes(out, tangent)
    want = f(*args)
    _assert_same_dtypes(out, want)
    _assert_close(out, want, atol, rtol, _named(err_msg, "primal"))
    _assert_close(tangent, _finite_difference(f, args, v, eps), atol, rtol, _named(err_msg, "tangent"))


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """Check f_vjp (called (*primals) -> (outputs, pullback), e.g. `partial(ember.vjp, f)`) at args: for random v
    and cotangent c, <c, finite-difference J v> against <pullback(c), v>; AssertionError when they differ."""
    rng = np.random.RandomState(0)
    out, pullback = f_vjp(*args)
    _assert_close(out, f(*args), atol, rtol, _named(err_msg, "primal"))
    v = _direction(rng, args)
    jv = _finite_difference(f, args, v, eps)
    c = _direction(rng, out)
    conj = lambda t: tree_map(lambda x: _as_given(np.conj(np.asarray(x)), x), t)  # noqa: E731
    pulled = conj(pullback(conj(c)))
    _assert_close(_dot(v, pulled), _dot(jv, c), atol, rtol, _named(err_msg, "cotangent projection"))


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Any = None, rtol: Any = None, eps: float | None = None) -> None:
    """Check f's derivatives at args up to `order` against finite differences, as jax.test_util.check_grads:
    "fwd" (ember.jvp), "rev" (ember.vjp) and "lin" (ember.linearize), each in one random direction; a derivative
    of order k is checked as a function in its turn (the JVP of the JVP, the VJP of the VJP, ...). AssertionError,
    naming the chain ("JVP of VJP tangent"), when they differ."""
    eps = eps or EPS

    def by_linearize(g: Callable) -> Callable:
        def jvp(primals: Any, tangents: Any) -> Any:
            out, linear = ember.linearize(g, *primals)
            return out, linear(*tangents)
        return jvp

    def pulled_back_at_output(g: Callable) -> Callable:
        def h(*primals: Any) -> Any:
            out, pullback = ember.vjp(g, *primals)
            return pullback(out)
        return h

    unknown = [m for m in modes if m not in ("fwd", "rev", "lin")]
    if unknown:
        raise ValueError(f"check_grads: unknown modes {unknown} (fwd, rev, lin)")

    def check(g: Callable, at: Any, left: int, chain: str) -> None:
        for mode in [m for m in ("fwd", "rev", "lin") if m in modes]:
            if mode == "rev":
                name = f"VJP of {chain}" if chain else "VJP"
                check_vjp(g, lambda *a, g=g: ember.vjp(g, *a), at, atol, rtol, eps, name)
                if left > 1:
                    check(pulled_back_at_output(g), at, left - 1, name)
            elif mode in ("fwd", "lin"):
                name = (("JVP" if mode == "fwd" else "LIN") + (f" of {chain}" if chain else ""))
                jvp = (lambda p, t, g=g: ember.jvp(g, p, t)) if mode == "fwd" else by_linearize(g)
                check_jvp(g, jvp, at, atol, rtol, eps, name)
                if left > 1:
                    check(jvp, (at, at), left - 1, name)

    check(f, tuple(args), order, "")


__all__ = ["check_grads", "check_jvp", "check_vjp"]
