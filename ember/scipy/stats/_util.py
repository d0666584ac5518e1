"""Helpers shared by the distributions of ember.scipy.stats: argument promotion (the `public` decorator), loc/scale
standardization, masking outside the support with gradient-safe ("double where") placeholders, and a few stable
log-space formulas."""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, Sequence

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._core import dtypes as dt

LOG_2PI = math.log(2 * math.pi)
_LOG2 = math.log(2.0)


def _operand(name: str, arg: str, value: Any) -> Any:
    """value, checked to be a real number or array (a list becomes an array)."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: argument {arg!r} must be a number or an array, got {type(value).__name__}")
    try:
        if isinstance(value, (list, tuple)):
            value = enp.asarray(value)
        dtype = dt.dtype_and_weak(value)[0]
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name}: argument {arg!r} is not a numeric array: {err}") from None
    if dt.is_complex(dtype):
        raise TypeError(f"{name}: argument {arg!r} must be real, got dtype {dtype}")
    return value


def check(name: str, names: Sequence[str], values: Sequence[Any], broadcast: bool = True) -> list[Any]:
    """The values checked (see _operand) and, with broadcast, a clear error where their shapes do not broadcast
    together."""
    values = [_operand(name, n, v) for n, v in zip(names, values)]
    if broadcast:
        try:
            enp.broadcast_shapes(*(enp.shape(v) for v in values))
        except ValueError:
            shapes = ", ".join(f"{n}{tuple(enp.shape(v))}" for n, v in zip(names, values))
            raise ValueError(f"{name}: the shapes of the arguments do not broadcast together: {shapes}") from None
    return values


def promote(*values: Any) -> list[Any]:
    """The values as arrays of their common floating dtype (integers and booleans become the default float; a Python
    scalar takes the others' dtype; weak types are kept), as jax's promote_args_inexact."""
    arrays = [enp.asarray(v) for v in values]
    typed = [dt.dtype_and_weak(a) for a in arrays]
    target, weak = dt.promote_types(*typed)
    target = dt.canonical_dtype(dt.to_inexact_dtype(target))
    return [a if t == (target, weak) else lax.convert_element_type(a, target, weak) for a, t in zip(arrays, typed)]


def public(fn: Callable[..., Any] | None = None, *, static: Sequence[str] = (), broadcast: bool = True,
           promoted: bool = True) -> Any:
    """Make fn a public function of ember.scipy.stats: its array arguments (all but the `static` ones) are checked
    (errors name '<module>.<fn>' and the argument), promoted to their common float dtype (unless not promoted) and
    the body runs as one jitted program (one compile per signature in eager use, a nested call under
    transformations)."""
    if fn is None:
        return functools.partial(public, static=static, broadcast=broadcast, promoted=promoted)
    sig = inspect.signature(fn)
    qualname = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
    names = [n for n in sig.parameters if n not in static]

    def body(*args: Any) -> Any:
        arrays = promote(*args[:len(names)]) if promoted else args[:len(names)]
        return fn(**dict(zip(names, arrays)), **dict(zip(static, args[len(names):])))
    jitted = jit(body, static_argnums=tuple(range(len(names), len(names) + len(static))))

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{qualname}: {err}") from None
        bound.apply_defaults()
        values = check(qualname, names, [bound.arguments[n] for n in names], broadcast)
        return jitted(*values, *(bound.arguments[n] for n in static))
    return wrapper


def standardize(x: Any, loc: Any, scale: Any) -> Any:
    """(x - loc) / scale."""
    return (x - loc) / scale


def safe(ok: Any, x: Any, placeholder: Any = 1.0) -> Any:
    """x where ok, else a harmless placeholder: the inner half of the double-where trick, so the branch a later
    where discards has finite values and gradients."""
    return enp.where(ok, x, enp.asarray(placeholder, dtype=x.dtype))


def outside(mask: Any, value: Any, fill: float = -math.inf) -> Any:
    """value, with fill (-inf: log-density outside the support) where mask holds."""
    return enp.where(mask, enp.asarray(fill, dtype=value.dtype), value)


def nan_where(mask: Any, value: Any) -> Any:
    """value, NaN where mask holds (invalid parameters)."""
    return outside(mask, value, math.nan)


def positive_scale(scale: Any, value: Any) -> Any:
    """value, NaN where scale is not positive (the distributions that refuse scale <= 0, as JAX's)."""
    return nan_where(~(scale > 0), value)


def log1mexp(t: Any) -> Any:
    """log(1 - exp(-t)) for t >= 0, accurate at both ends (Maechler's switch at log 2)."""
    small = t < _LOG2
    t_small, t_big = safe(small, t), safe(~small, t)
    return enp.where(small, enp.log(-enp.expm1(-t_small)), enp.log1p(-enp.exp(-t_big)))


def log_diff_exp(a: Any, b: Any) -> Any:
    """log(exp(a) - exp(b)) for a >= b."""
    return a + log1mexp(a - b)


def power(x: Any, p: Any) -> Any:
    """x ** p for x >= 0 by exp(p log x), with 0 at x == 0 (p > 0) and finite gradients there."""
    zero = x == 0
    return enp.where(zero, 0.0, enp.exp(p * enp.log(safe(~zero, x))))


def ppf_domain(q: Any, value: Any) -> Any:
    """value where q is a probability in [0, 1], NaN elsewhere (and where q is NaN)."""
    return nan_where(~((q >= 0) & (q <= 1)), value)
