"""The public host callbacks: pure_callback, io_callback, debug.callback and debug.print (docs/callbacks.md).

Inside a staging (jit, grad, vmap, a loop body) each binds its primitive (ember._control.callbacks), which the
compiled program calls back; outside one (eager code) the Python function runs at once, on numpy copies of the
arguments, as JAX runs it then. The callback receives numpy arrays (JAX gives jax.Arrays; ember's functions accept
numpy arrays, so a callback may still compute with ember)."""
from __future__ import annotations

import copy
import logging
import string
from typing import Any, Callable

import numpy as np

from ember._control.callbacks import (VMAP_METHODS, HostCallback, debug_callback_p, io_callback_p,
                                      pure_callback_p)
from ember._core import ShapedArray, Tracer, is_tracing
from ember._core.primitive import user_source
from ember._core.dtypes import aval_of_value, canonical_dtype, parse_dtype
from ember._core.pytree import tree_flatten, tree_unflatten
from ember._runtime.array import Array, asarray
from ember._runtime.pjrt.errors import PjrtError


def _split_args(name: str, args: tuple, kwargs: dict) -> tuple[Any, list[Any], tuple[tuple[int, Any], ...]]:
    """The flat structure of (args, kwargs), the leaves that are arrays (tracers, Arrays, numpy arrays, Python
    scalars: passed to the program), and the others by position (passed to the callback as they are)."""
    leaves, tree = tree_flatten((args, kwargs))
    dynamic, static = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tracer):
            dynamic.append(leaf)
            continue
        try:
            aval_of_value(leaf)
        except TypeError:
            static.append((i, leaf))
            continue
        dynamic.append(leaf)
    return tree, dynamic, tuple(static)


def _result_avals(name: str, result_shape_dtypes: Any) -> tuple[tuple[ShapedArray, ...], Any]:
    leaves, tree = tree_flatten(result_shape_dtypes)
    avals = []
    for i, leaf in enumerate(leaves):
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"{name}: result_shape_dtypes leaf {i} ({leaf!r}) has no shape and dtype; pass "
                            "ember.ShapeDtypeStruct(shape, dtype) (or arrays) for each result")
        dtype = parse_dtype(dtype)
        if canonical_dtype(dtype) != dtype:
            raise ValueError(f"{name}: result_shape_dtypes leaf {i} asks for {dtype.name}, a 64-bit type, while "
                             "ember.config.enable_x64 is off (as JAX refuses it)")
        avals.append(ShapedArray(tuple(int(d) for d in shape), dtype))
    return tuple(avals), tree


def _run_now(callback: HostCallback, args: list[Any]) -> list[Array]:
    """The callback called outside any staging, on numpy copies of the arguments (each a canonical dtype). An
    exception it raises (or a result of the wrong type) is JAX's JaxRuntimeError caused by it, as inside a program
    (JAX runs the callback in one eagerly too): code catching what a callback raised catches the same outside
    jit as in it."""
    values = [np.array(np.asarray(a), dtype=aval_of_value(a).dtype) for a in args]
    try:
        results = callback.call_flat(values)
    except Exception as err:
        raise PjrtError(f"{callback.name}: the callback {callback.fn!r} raised {type(err).__name__}: {err}"
                        ) from err
    return [asarray(r) for r in results]


def _call(prim: Any, name: str, callback: Callable[..., Any], result_shape_dtypes: Any, args: tuple, kwargs: dict,
          **params: Any) -> Any:
    if not callable(callback):
        raise TypeError(f"{name}: the callback must be callable, got {type(callback).__name__}")
    avals, out_tree = _result_avals(name, result_shape_dtypes)
    in_tree, dynamic, static = _split_args(name, args, kwargs)
    host = HostCallback(callback, in_tree, static, avals, out_tree, name)
    if not is_tracing() and not any(isinstance(a, Tracer) for a in dynamic):
        outs = _run_now(host, dynamic)
    else:
        outs = prim.bind(*dynamic, callback=host, **params)
    return tree_unflatten(out_tree, outs)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call a pure Python function from a program (jax.pure_callback): callback(*args, **kwargs) gets numpy
    arrays and returns arrays shaped as result_shape_dtypes (a pytree of ShapeDtypeStructs). ember may drop a call
    whose results are unused or merge equal calls. Not differentiable (wrap it in custom_jvp/custom_vjp); under
    vmap, vmap_method says how: "sequential" (a loop), "sequential_unrolled", "expand_dims" (one call; unbatched
    arguments get a leading 1), "broadcast_all" (one call, all broadcast), "legacy_vectorized" (one call,
    unbatched arguments as they are). sharding is accepted and unused (one device)."""
    if vmap_method not in VMAP_METHODS + (None,):
        raise ValueError(f"pure_callback: vmap_method must be one of {list(VMAP_METHODS) + [None]}, got "
                         f"{vmap_method!r}")
    return _call(pure_callback_p, "pure_callback", callback, result_shape_dtypes, args, kwargs,
                 vmap_method=vmap_method)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Call an impure Python function from a program (jax.experimental.io_callback): never dropped or merged; with
    ordered=True the ordered callbacks of a program run in program order. Not differentiable; vmap calls it once
    per batch member (refused when ordered)."""
    return _call(io_callback_p, "io_callback", callback, result_shape_dtypes, args, kwargs, ordered=bool(ordered))


def debug_callback(callback: Callable[..., Any] | None = None, *args: Any, ordered: bool = False,
                   partitioned: bool = False, **kwargs: Any) -> Any:
    """Call callback(*args, **kwargs) for its side effects (jax.debug.callback), from compiled code too: under
    vmap once per batch member, under jvp/grad on the primal values, inside loops once per step. Also the
    two-call form debug.callback(ordered=True)(callback, *args)."""
    if callback is None:
        if args or kwargs:
            raise TypeError(f"debug.callback received unexpected arguments in the two-call form: {args=} {kwargs=}")
        return lambda cb, *a, **k: debug_callback(cb, *a, ordered=ordered, partitioned=partitioned, **k)

    def call(*a: Any, **k: Any) -> tuple:
        callback(*a, **k)
        return ()
    _call(debug_callback_p, "debug.callback", call, None, args, kwargs, ordered=bool(ordered))
    return None


class _FormatChecker(string.Formatter):
    """Checks a debug.print format against its arguments without formatting them (as JAX): unused ones fail."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return ""

    def check_unused_args(self, used_args: Any, args: Any, kwargs: Any) -> None:
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"debug.print: unused positional arguments {unused}")
        unused_keys = [k for k in kwargs if k not in used_args]
        if unused_keys:
            raise ValueError(f"debug.print: unused keyword arguments {unused_keys}: an f-string (f\"{{x}}\") "
                             "formats too early; write debug.print(\"{x}\", x=x)")


def debug_print(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
                skip_format_check: bool = False, _use_logging: bool = False, **kwargs: Any) -> Any:
    """Print fmt.format(*args, **kwargs) with the arrays' values, from compiled code too (jax.debug.print): the
    numpy print options current at the call apply; without placeholders the values follow fmt, space-separated.
    Also the two-call form debug.print(ordered=True)(fmt, *args). _use_logging: the text is an INFO record of the
    logger "ember.debug", attributed to the user's line that called (debug.log)."""
    if fmt is None:
        if args or kwargs:
            raise TypeError(f"debug.print received unexpected arguments in the two-call form: {args=} {kwargs=}")
        return lambda f, *a, **k: debug_print(f, *a, ordered=ordered, partitioned=partitioned,
                                              skip_format_check=skip_format_check, _use_logging=_use_logging, **k)
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: fmt must be a str, got {type(fmt).__name__}")
    if not skip_format_check:
        _FormatChecker().format(fmt, *args, **kwargs)
    placeholders = bool(fmt) and next(iter(string.Formatter().parse(fmt)))[1] is not None
    options = np.get_printoptions()

    record = _log_record() if _use_logging else None

    def show(*a: Any, **k: Any) -> None:
        if placeholders:
            with np.printoptions(**options):
                text = fmt.format(*a, **k)
        else:
            text = " ".join((fmt, *(str(x) for x in a)))
        if record is None:
            print(text, flush=True)
        else:
            made = copy.copy(record)
            made.msg = text
            LOGGER.handle(made)
    debug_callback(show, *args, ordered=ordered, partitioned=partitioned, **kwargs)
    return None


LOGGER = logging.getLogger("ember.debug")  # (debug.log's records)


def _log_record() -> logging.LogRecord:
    """An INFO record of debug.log, attributed to the user's line calling it (its message is set per call)."""
    source = user_source()
    filename, line = (source.filename, source.lineno) if source is not None else ("(unknown file)", 0)
    return LOGGER.makeRecord(LOGGER.name, logging.INFO, filename, line, "", (), None)


def debug_log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
              skip_format_check: bool = False, **kwargs: Any) -> Any:
    """debug.print, logged (jax.debug.log): each call's text is an INFO record of the logger "ember.debug", with
    the file and line of the user's code that called it, handled when the values are known (from compiled code
    too)."""
    return debug_print(fmt, *args, ordered=ordered, partitioned=partitioned, skip_format_check=skip_format_check,
                       _use_logging=True, **kwargs)


__all__ = ["LOGGER", "debug_callback", "debug_log", "debug_print", "io_callback", "pure_callback"]
