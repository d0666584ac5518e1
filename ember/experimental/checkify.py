"""ember.experimental.checkify (jax.experimental.checkify): run-time checks in compiled code (docs/checkify.md).

    err, out = checkify.checkify(f, errors=checkify.all_checks)(x)   # f may call checkify.check(pred, msg, ...)
    err.throw()                                                       # raises JaxRuntimeError if a check failed

`checkify(f)` returns (Error, f's output); it works eagerly, under jit (inside or outside it), vmap (a batched
Error: every member that failed is reported), grad of what it checks, and control flow. The error sets are
user_checks, nan_checks, div_checks, index_checks, float_checks, automatic_checks, all_checks."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ember._api.running import run_ir
from ember._control.checkify import (DivisionByZeroError, FailedCheckError, JaxRuntimeError, NaNError, OOBError,
                                     CATEGORIES, Site, all_checks, automatic_checks, check_p, checkify_ir,
                                     div_checks, float_checks, index_checks, nan_checks, user_checks, user_site)
from ember._control.common import close_over
from ember._core import aval_of, is_tracing
from ember._core.pytree import register_pytree_node, tree_flatten
from ember._numpy.creation import asarray


class Error:
    """The error a checkified function returns: which check failed first (none, or per member under vmap) and the
    values its message formats. get() is the message (None if nothing failed), throw() raises it."""

    def __init__(self, code: Any, payloads: dict[int, list[Any]], sites: tuple[Site, ...]):
        self._code, self._payloads, self._sites = code, payloads, sites

    def _messages(self) -> list[str]:
        code = np.asarray(self._code)
        found = []
        for index in np.ndindex(code.shape):
            k = int(code[index])
            if k == 0:
                continue
            values = [np.asarray(v)[index] for v in self._payloads[k - 1]]
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


def _flatten_error(error: Error) -> tuple[list[Any], Any]:
    order = sorted(error._payloads)
    sizes = tuple(len(error._payloads[s]) for s in order)
    return [error._code] + [p for s in order for p in error._payloads[s]], (tuple(order), sizes, error._sites)


def _unflatten_error(aux: Any, children: list[Any]) -> Error:
    order, sizes, sites = aux
    it = iter(children[1:])
    return Error(children[0], {s: [next(it) for _ in range(n)] for s, n in zip(order, sizes)}, sites)


register_pytree_node(Error, _flatten_error, _unflatten_error)


def check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """Check that pred (a boolean array: all of it) holds, else fail with msg.format(*fmt_args, **fmt_kwargs). Under
    checkify the failure is recorded in the Error; outside any staging it raises JaxRuntimeError at once; staged
    without checkify (jit), lowering it is a ValueError, as in JAX."""
    if not isinstance(msg, str):
        raise TypeError(f"checkify.check: msg must be a str, got {msg!r}")
    leaves, tree = tree_flatten((fmt_args, fmt_kwargs))
    payload = [asarray(leaf) for leaf in leaves]
    pred = asarray(pred)
    if aval_of(pred).dtype != np.bool_:
        raise TypeError(f"checkify.check: pred must be a boolean array, got {aval_of(pred).str_short()}")
    site = user_site(msg, tree, payload)
    if not is_tracing():
        if not bool(np.all(np.asarray(pred))):
            raise JaxRuntimeError(site.message([np.asarray(p) for p in payload]))
        return
    check_p.bind(pred, *payload, site=site, batch_dims=0)


def checkify(f: Callable[..., Any], errors: frozenset[type] = user_checks) -> Callable[..., tuple[Error, Any]]:
    """f returning (Error, its output): the checks in errors (user_checks by default) run inside the computation
    and the first to fail is recorded, as jax.experimental.checkify.checkify."""
    if not callable(f):
        raise TypeError(f"checkify: f must be callable, got {f!r}")
    enabled = frozenset(errors)
    unknown = [e for e in enabled if e not in CATEGORIES]
    if unknown:
        raise TypeError(f"checkify: errors must be a set of error categories (checkify.user_checks, nan_checks, "
                        f"div_checks, index_checks, ...), got {unknown}")

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        leaves, tree = tree_flatten((args, kwargs))
        closed = close_over(lambda a, k: f(*a, **k), tree, [aval_of(x) for x in leaves], "checkify")
        ir, sites, order = checkify_ir(closed.ir, enabled)
        results = run_ir(ir, list(closed.consts) + list(leaves))
        it = iter(results[1:])
        payloads = {s: [next(it) for _ in sites[s].payload] for s in order}
        outs = list(it)
        return Error(results[0], payloads, tuple(sites)), closed.out_tree.unflatten(outs)
    return checked


__all__ = ["DivisionByZeroError", "Error", "FailedCheckError", "JaxRuntimeError", "NaNError", "OOBError",
           "all_checks", "automatic_checks", "check", "checkify", "div_checks", "float_checks", "index_checks",
           "nan_checks", "user_checks"]
