"""ember.experimental.checkify (jax.experimental.checkify): run-time checks in compiled code (docs/checkify.md).

    err, out = checkify.checkify(f, errors=checkify.all_checks)(x)   # f may call checkify.check(pred, msg, ...)
    err.throw()                                                       # raises JaxRuntimeError if a check failed

`checkify(f)` returns (Error, f's output); it works eagerly, under jit (inside or outside it), vmap (a batched
Error: every member that failed is reported), grad of what it checks, and control flow. The error sets are
user_checks, nan_checks, div_checks, index_checks, float_checks, automatic_checks, all_checks."""
from __future__ import annotations

import functools as _functools
from typing import Any as _Any, Callable as _Callable

import numpy as _np

from ember._api.running import run_ir as _run_ir
from ember._control.checkify import (DivisionByZeroError, FailedCheckError, JaxRuntimeError, NaNError, OOBError,
                                     all_checks, automatic_checks, div_checks, float_checks, index_checks, nan_checks,
                                     user_checks)
from ember._control.checkify import JaxException as _JaxException
from ember._control.checkify import (CATEGORIES as _CATEGORIES, Site as _Site, check_p as _check_p,
                                     checkify_ir as _checkify_ir, user_site as _user_site)
from ember._control.common import close_over as _close_over
from ember._core import aval_of as _aval_of, is_tracing as _is_tracing
from ember._core.pytree import register_pytree_node as _register_pytree_node, tree_flatten as _tree_flatten
from ember._numpy.creation import asarray as _asarray


ErrorCategory = type[_JaxException]
"""The type of an error category (FailedCheckError, NaNError, ...): the error sets are frozensets of them."""


class Error:
    """The error a checkified function returns: which check failed first (none, or per member under vmap) and the
    values its message formats. get() is the message (None if nothing failed), throw() raises it."""

    def __init__(self, code: _Any, payloads: dict[int, list[_Any]], sites: tuple[_Site, ...]):
        self._code, self._payloads, self._sites = code, payloads, sites

    def _messages(self) -> list[str]:
        code = _np.asarray(self._code)
        found = []
        for index in _np.ndindex(code.shape):
            k = int(code[index])
            if k == 0:
                continue
            values = [_asarray(_np.asarray(v)[index]) for v in self._payloads[k - 1]]  # (they format as Arrays)
            message = self._sites[k - 1].message(values)
            if code.ndim:
                where = index[0] if len(index) == 1 else index
                message = f"at mapped index {where}: {message}"
            found.append(message)
        return found

    def get(self) -> str | None:
        """The message of the first failed check (every failing member's, one a line, under vmap); None if none."""
        messages = self._messages()
        return "\n".join(messages) if messages else None

    def get_exception(self) -> JaxRuntimeError | None:
        message = self.get()
        return None if message is None else JaxRuntimeError(message)

    def throw(self) -> None:
        """Raise JaxRuntimeError with get()'s message if a check failed."""
        error = self.get_exception()
        if error is not None:
            raise error

    def __repr__(self) -> str:
        message = self.get()
        return "Error(no error)" if message is None else f"Error({message!r})"


def _flatten_error(error: Error) -> tuple[list[_Any], _Any]:
    order = sorted(error._payloads)
    sizes = tuple(len(error._payloads[s]) for s in order)
    return [error._code] + [p for s in order for p in error._payloads[s]], (tuple(order), sizes, error._sites)


def _unflatten_error(aux: _Any, children: list[_Any]) -> Error:
    order, sizes, sites = aux
    it = iter(children[1:])
    return Error(children[0], {s: [next(it) for _ in range(n)] for s, n in zip(order, sizes)}, sites)


_register_pytree_node(Error, _flatten_error, _unflatten_error)

init_error = Error(_np.int32(0), {}, ())
"""The Error of no failure (as jax.experimental.checkify.init_error): get() is None, throw() does nothing."""


def check(pred: _Any, msg: str, *fmt_args: _Any, **fmt_kwargs: _Any) -> None:
    """Check that pred (a boolean array: all of it) holds, else fail with msg.format(*fmt_args, **fmt_kwargs). Under
    checkify the failure is recorded in the Error; outside any staging it raises JaxRuntimeError at once; staged
    without checkify (jit), lowering it is a ValueError, as in JAX."""
    _user_check("check", pred, msg, fmt_args, fmt_kwargs, debug=False)


def debug_check(pred: _Any, msg: str, *fmt_args: _Any, **fmt_kwargs: _Any) -> None:
    """A check that runs under checkify only (as jax.experimental.checkify.debug_check): there a failure is
    recorded as check's is; without checkify it does nothing, eagerly and staged (jit drops it)."""
    _user_check("debug_check", pred, msg, fmt_args, fmt_kwargs, debug=True)


def _user_check(name: str, pred: _Any, msg: str, fmt_args: tuple[_Any, ...], fmt_kwargs: dict[str, _Any], *,
                debug: bool) -> None:
    if not isinstance(msg, str):
        raise TypeError(f"checkify.{name}: msg must be a str, got {msg!r}")
    leaves, tree = _tree_flatten((fmt_args, fmt_kwargs))
    payload = [_asarray(leaf) for leaf in leaves]
    pred = _asarray(pred)
    if _aval_of(pred).dtype != _np.bool_:
        raise TypeError(f"checkify.{name}: pred must be a boolean array, got {_aval_of(pred).str_short()}")
    site = _user_site(msg, tree, payload, debug)
    if not _is_tracing():
        if not debug and not bool(_np.all(_np.asarray(pred))):
            raise JaxRuntimeError(site.message(payload))
        return
    _check_p.bind(pred, *payload, site=site, batch_dims=0)


def check_error(error: Error) -> None:
    """Raise error's failure, as err.throw(), but functionalized by checkify as check is: outside any staging it
    raises JaxRuntimeError at once if error failed; inside a checkified function each check error records
    is a check again (with its own message), so checkify(g) of a g that calls check_error on an inner checkify's
    Error returns that failure (the inverse of checkify, as jax.experimental.checkify.check_error)."""
    if not isinstance(error, Error):
        raise TypeError(f"checkify.check_error: error must be a checkify.Error, got {type(error).__name__}")
    if not _is_tracing():
        error.throw()
        return
    code = _asarray(error._code)
    batch_dims = _aval_of(code).ndim
    for k, site in enumerate(error._sites, start=1):
        if k - 1 in error._payloads:
            _check_p.bind(code != k, *[_asarray(p) for p in error._payloads[k - 1]], site=site,
                          batch_dims=batch_dims)


def checkify(f: _Callable[..., _Any], errors: frozenset[type] = user_checks) -> _Callable[..., tuple[Error, _Any]]:
    """f returning (Error, its output): the checks in errors (user_checks by default) run inside the computation
    and the first to fail is recorded, as jax.experimental.checkify.checkify."""
    if not callable(f):
        raise TypeError(f"checkify: f must be callable, got {f!r}")
    enabled = frozenset(errors)
    unknown = [e for e in enabled if e not in _CATEGORIES]
    if unknown:
        raise TypeError(f"checkify: errors must be a set of error categories (checkify.user_checks, nan_checks, "
                        f"div_checks, index_checks, ...), got {unknown}")

    @_functools.wraps(f)
    def checked(*args: _Any, **kwargs: _Any) -> tuple[Error, _Any]:
        leaves, tree = _tree_flatten((args, kwargs))
        closed = _close_over(lambda a, k: f(*a, **k), tree, [_aval_of(x) for x in leaves], "checkify")
        ir, sites, order = _checkify_ir(closed.ir, enabled)
        results = _run_ir(ir, list(closed.consts) + list(leaves))
        it = iter(results[1:])
        payloads = {s: [next(it) for _ in sites[s].payload] for s in order}
        outs = list(it)
        return Error(results[0], payloads, tuple(sites)), closed.out_tree.unflatten(outs)
    return checked


__all__ = ["DivisionByZeroError", "Error", "ErrorCategory", "FailedCheckError", "JaxRuntimeError", "NaNError",
           "OOBError", "all_checks", "automatic_checks", "check", "check_error", "checkify", "debug_check",
           "div_checks",
           "float_checks", "index_checks", "init_error", "nan_checks", "user_checks"]
