"""ember.test_util, as jax.test_util: check_grads, check_jvp, check_vjp, derivatives from ember's automatic
differentiation checked against central finite differences in one random direction (numpy's RandomState(0), as
JAX's, so the same direction as JAX's).

A port of JAX's jax._src.public_test_util (Apache 2.0), with its semantics: `order` checks derivatives of the
derivatives up to that order, `modes` picks "fwd" (jvp), "rev" (vjp) and "lin" (linearize), tolerances are a
number or a dict by dtype merged into the default gradient tolerances, and they are scaled by the number of
elements compared, as JAX scales them.
"""
from __future__ import annotations

import operator
from functools import partial
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

import ember
from ember.dtypes import bfloat16, canonicalize_dtype, float0
from ember.tree_util import tree_map, tree_reduce

EPS = 1e-4

_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
                         complex: np.dtype(np.complex128)}
_INTN = [np.dtype(getattr(ml_dtypes, name)) for name in ("int1", "int2", "int4", "uint1", "uint2", "uint4")
         if hasattr(ml_dtypes, name)]
_CUSTOM_FLOATS = {name: np.dtype(getattr(ml_dtypes, name)) for name in (
    "float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz") if hasattr(ml_dtypes, name)}
_COARSE = {"float4_e2m1fn": 1e0, "float8_e8m0fnu": 1e0}  # else 1e-1, for every 8-bit float

_default_tolerance: dict[np.dtype, float] = {
    np.dtype(float0): 0, np.dtype(np.bool_): 0, **{dtype: 0 for dtype in _INTN},
    **{np.dtype(t): 0 for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)},
    **{dtype: _COARSE.get(name, 1e-1) for name, dtype in _CUSTOM_FLOATS.items()},
    np.dtype(bfloat16): 1e-2, np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-15,
    np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-15,
}

default_gradient_tolerance: dict[np.dtype, float] = {
    **{dtype: _COARSE.get(name, 1e-1) for name, dtype in _CUSTOM_FLOATS.items()},
    np.dtype(bfloat16): 1e-1, np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}


def _dtype(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    if type(x) in _PYTHON_SCALAR_DTYPES:
        return _PYTHON_SCALAR_DTYPES[type(x)]
    return np.asarray(x).dtype


def _is_python_scalar(x: Any) -> bool:
    return not isinstance(x, np.generic) and isinstance(x, bool | int | float | complex)


def _assert_numpy_allclose(a: np.ndarray, b: np.ndarray, atol: float, rtol: float, err_msg: str) -> None:
    if a.dtype == b.dtype == float0:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return

    def upcast(x: np.ndarray) -> np.ndarray:
        if x.dtype in _CUSTOM_FLOATS.values() or x.dtype == bfloat16:
            return x.astype(np.float32)
        if x.dtype in _INTN:
            return x.astype(np.int8 if ml_dtypes.iinfo(x.dtype).min < 0 else np.uint8)
        return x

    kw = {key: value for key, value in (("atol", atol), ("rtol", rtol)) if value}
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(upcast(a), upcast(b), **kw, err_msg=err_msg)


def _tolerance(dtype: np.dtype, tol: float | dict | None) -> float:
    tol = {} if tol is None else tol
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(key): value for key, value in tol.items()}
    dtype = canonicalize_dtype(np.dtype(dtype))
    return tol.get(dtype, _default_tolerance[dtype])


def _assert_numpy_close(a: Any, b: Any, atol: Any = None, rtol: Any = None, err_msg: str = "") -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    atol = max(_tolerance(a.dtype, atol), _tolerance(b.dtype, atol))
    rtol = max(_tolerance(a.dtype, rtol), _tolerance(b.dtype, rtol))
    _assert_numpy_allclose(a, b, atol=atol * a.size, rtol=rtol * b.size, err_msg=err_msg)


def check_close(xs: Any, ys: Any, atol: Any = None, rtol: Any = None, err_msg: str = "") -> None:
    tree_map(partial(_assert_numpy_close, atol=atol, rtol=rtol, err_msg=err_msg), xs, ys)


def _check_dtypes_match(xs: Any, ys: Any) -> None:
    def check(x: Any, y: Any) -> None:
        if ember.enable_x64.value:
            assert _dtype(x) == _dtype(y)
        else:
            assert canonicalize_dtype(_dtype(x)) == canonicalize_dtype(_dtype(y))
    tree_map(check, xs, ys)


def _inner_prod(xs: Any, ys: Any) -> Any:
    def contract(x: Any, y: Any) -> Any:
        return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
    return tree_reduce(np.add, tree_map(contract, xs, ys))


def _safe_subtract(x: Any, y: Any, *, dtype: np.dtype) -> Any:
    """x - y with inf - inf == 0."""
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dtype), np.subtract(x, y, dtype=dtype))


def _preserve_input_types(f: Callable) -> Callable:
    def wrapped(*args: Any) -> Any:
        result = np.array(f(*args), dtype=_dtype(args[0]))
        return result.item() if all(_is_python_scalar(arg) for arg in args) else result
    return wrapped


_add = partial(tree_map, _preserve_input_types(operator.add))
_sub = partial(tree_map, _preserve_input_types(operator.sub))
_safe_sub = partial(tree_map, lambda x, y: _safe_subtract(x, y, dtype=_dtype(x)))
_conj = partial(tree_map, _preserve_input_types(np.conj))


def _scalar_mul(xs: Any, a: float) -> Any:
    def mul(x: Any) -> Any:
        dtype = _dtype(x)
        result = np.multiply(x, np.array(a, dtype=dtype), dtype=dtype)
        return result.item() if _is_python_scalar(x) else result
    return tree_map(mul, xs)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    shape, dtype = np.shape(x), _dtype(x)
    result = np.asarray(rng.randn(*shape), dtype=dtype)
    if np.issubdtype(dtype, np.complexfloating):
        result = result + dtype.type(1.0j) * np.asarray(rng.randn(*shape), dtype=dtype)
    return result.item() if _is_python_scalar(x) else result


def numerical_jvp(f: Callable, primals: Any, tangents: Any, eps: float = EPS) -> Any:
    """The directional derivative of f at primals along tangents, by central differences."""
    delta = _scalar_mul(tangents, eps)
    f_pos = f(*_add(primals, delta))
    f_neg = f(*_sub(primals, delta))
    return _scalar_mul(_safe_sub(f_pos, f_neg), 0.5 / eps)


def _merge_tolerance(tol: Any, default: dict) -> Any:
    if tol is None:
        return default
    if not isinstance(tol, dict):
        return tol
    return {**default, **{np.dtype(key): value for key, value in tol.items()}}


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """Check f_jvp (usually `partial(ember.jvp, f)`) against finite differences of f at args, in one random
    direction. Raises AssertionError when they differ."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    tangent = tree_map(partial(_rand_like, np.random.RandomState(0)), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_out_expected = f(*args)
    _check_dtypes_match(v_out, v_out_expected)
    t_out_expected = numerical_jvp(f, args, tangent, eps=eps)
    check_close(v_out, v_out_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} primal" if err_msg else "primal")
    check_close(t_out, t_out_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """Check f_vjp (usually `partial(ember.vjp, f)`) against finite differences of f at args: the cotangent it
    pulls back, projected on a random direction, against the finite-difference derivative along that direction
    projected on the cotangent. Raises AssertionError when they differ."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rand_like = partial(_rand_like, np.random.RandomState(0))
    v_out, vjpfun = f_vjp(*args)
    v_out_expected = f(*args)
    check_close(v_out, v_out_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_map(rand_like, args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_map(rand_like, v_out)
    cotangent_out = _conj(vjpfun(_conj(cotangent)))
    check_close(_inner_prod(tangent, cotangent_out), _inner_prod(tangent_out, cotangent), atol=atol, rtol=rtol,
                err_msg=f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def _jvp_from_lin(f: Callable, primals: Any, tangents: Any) -> tuple[Any, Any]:
    primal_out, f_lin = ember.linearize(f, *primals)
    return primal_out, f_lin(*tangents)


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Any = None, rtol: Any = None, eps: float | None = None) -> None:
    """Check the derivatives of f at args up to `order` against finite differences, as jax.test_util.check_grads:
    forward mode ("fwd", ember.jvp), reverse mode ("rev", ember.vjp) and "lin" (ember.linearize), each in one
    random direction; `atol`/`rtol` a number or a dict by dtype, `eps` the finite-difference step (1e-4). Raises
    AssertionError when they differ."""
    args = tuple(args)
    eps = eps or EPS
    jvp_check = partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
    vjp_check = partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

    def check(f: Callable, args: Any, order: int, err_msg: str = "") -> None:
        if "fwd" in modes:
            fwd_msg = f"JVP of {err_msg}" if err_msg else "JVP"
            jvp_check(f, partial(ember.jvp, f), args, err_msg=fwd_msg)
            if order > 1:
                check(partial(ember.jvp, f), (args, args), order - 1, fwd_msg)
        if "rev" in modes:
            rev_msg = f"VJP of {err_msg}" if err_msg else "VJP"
            vjp_check(f, partial(ember.vjp, f), args, err_msg=rev_msg)
            if order > 1:
                def f_vjp(*args: Any) -> Any:
                    out, vjp_fn = ember.vjp(f, *args)
                    return vjp_fn(out)
                check(f_vjp, args, order - 1, rev_msg)
        if "lin" in modes:
            lin_msg = f"LIN of {err_msg}" if err_msg else "LIN"
            jvp_check(f, partial(_jvp_from_lin, f), args, err_msg=lin_msg)
            if order > 1:
                check(partial(_jvp_from_lin, f), (args, args), order - 1, lin_msg)

    check(f, args, order)


__all__ = ["check_grads", "check_jvp", "check_vjp"]
