"""Eager execution: operations run outside jit, each signature compiled once, kept in bounded least-recently-used
caches. Importing this module fills the core's eager slot.

Two levels:

* Primitives (apply_primitive, the eager slot of Primitive.bind): each (primitive, params, operand avals) compiles
  into a one-equation executable.
* Whole operations of ember.numpy (`x + y`, `x * 2.0`, `enp.exp(x)`, `x.sum()`), through the fast paths that
  fast_unary, fast_binary and fast_static wrap them in. A call on concrete Arrays (and Python scalars), made
  outside any staging, looks up one entry keyed by the operation, its operands' avals (the type, for a Python
  scalar), its static arguments and enable_x64, and runs that entry's program at once. These fully determine
  what the ordinary path would do (promotion with weak types, broadcasting, the primitives' checks), so a hit
  skips all of it. On a miss the operation is staged out at those avals and compiled into one program (a
  single-equation program is shared with the primitive level). A Python scalar operand is an input of that
  program, of the dtype promotion gives it; its value becomes a device scalar shared by all calls with that value.

Everything else takes the operation's ordinary path, unchanged: tracers and concrete Arrays while a function is
staged out (jit, grad, vmap), numpy operands, leaked tracers, debug_nans/debug_infs (their checks name the first
primitive that produces a NaN, which a fused program would hide), signatures whose staging fails (the ordinary
path then raises its own error) and calls whose program fails (a deleted or misplaced array: the ordinary path
raises its own message)."""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core.cache import LRUCache
from ember._core.config import config
from ember._core.dtypes import python_scalar_dtype
from ember._core import (EAGER, IR, TRACE_STATE, Eqn, Primitive, ShapedArray, Tracer, UnexpectedTracerError, Var,
                         aval_of_value, check_live, scalar_literal, stage_flat)
from ember._runtime.array import Array
from ember._runtime.compiler import Compiled, _Checks, compile_ir
from ember._runtime.dispatch import _scalar_buffer

_eager_cache = LRUCache("eager_cache_size")  # ember.config option


# ---------------------------------------------------------------------------------------------------------------
# Primitives
def _eager_aval(x: Any, prim: Primitive, i: int) -> ShapedArray:
    aval = getattr(x, "aval", None)
    if aval is not None and not isinstance(x, Tracer):
        return aval
    if isinstance(x, Tracer):  # outside every staging of this thread, so it leaked out of its own
        check_live(x, f"{prim.name}: operand {i}")
        raise UnexpectedTracerError(f"{prim.name}: operand {i} is a tracer {x!r} of a staging in progress on "
                                    "another thread")
    try:
        return aval_of_value(x)
    except TypeError as err:
        raise TypeError(f"{prim.name}: operand {i} of type {type(x).__name__} is not a valid ember array ({err})"
                        ) from None


def _eager_key(prim: Primitive, params: dict[str, Any], avals: tuple[ShapedArray, ...]) -> tuple[Any, ...]:
    """The cache key of a primitive's eager executable. The params go in their keyword order, unsorted: a lax
    function binds its params in one order, and sorting them on every call costs more than the rare duplicate
    entry of two call sites that order them differently."""
    return (prim, tuple(params.items()), avals)


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    avals = tuple([x.aval if type(x) is Array else _eager_aval(x, prim, i) for i, x in enumerate(args)])
    key = _eager_key(prim, params, avals)
    compiled: Compiled | None = _eager_cache.lookup(key)
    if compiled is None:
        out_avals = prim.out_avals(avals, params)
        in_vars = [Var(a) for a in avals]
        out_vars = [Var(a) for a in out_avals]
        compiled = compile_ir(IR([], [], in_vars, [Eqn(prim, in_vars, out_vars, params)], out_vars), prim.name)
        _eager_cache.store(key, compiled)
    return compiled.call_flat(args)


EAGER.fill(apply_primitive)


# ---------------------------------------------------------------------------------------------------------------
# Whole operations (see the module docstring)
_op_cache = LRUCache("eager_cache_size")  # key -> a program's call_flat, (call_flat, dtype, weak), or _SLOW
_scalar_arrays = LRUCache("eager_cache_size")  # (value, dtype, device) -> a device scalar Array
_SLOW = "slow"  # the entry of a signature that takes the ordinary path
_SCALAR_TYPES = frozenset({bool, int, float})
_config_values = config._values  # read on every call: a plain dict lookup
_trace_state = TRACE_STATE


def _compile_op(key: tuple[Any, ...], name: str, fn: Callable[..., Any], in_avals: Sequence[ShapedArray]) -> Any:
    """Stage fn out at in_avals, compile it, and store its program's call_flat under key; _SLOW (also stored)
    where the ordinary path is needed: staging fails (a bad signature: the ordinary path raises its error; or
    value-dependent code), or the result is an input or a constant (the ordinary path makes no computation)."""
    try:
        ir = stage_flat(lambda *xs: [fn(*xs)], in_avals, label=name)
    except Exception:  # noqa: BLE001 - the ordinary path raises it again, or does without staging
        _op_cache.store(key, _SLOW)
        return _SLOW
    out = ir.outs[0]
    if ir.consts or not ir.eqns or not isinstance(out, Var) or out in ir.in_vars:
        _op_cache.store(key, _SLOW)
        return _SLOW
    for eqn in ir.eqns:  # the program is not tied to the user line that first ran it (debug messages find theirs)
        eqn.source = None
    eqn = ir.eqns[0]
    try:
        if len(ir.eqns) == 1 and eqn.inputs == ir.in_vars and eqn.outputs == ir.outs:
            # one primitive on the inputs: the very program apply_primitive runs, shared with it
            prim_key = _eager_key(eqn.prim, eqn.params, tuple(in_avals))
            compiled = _eager_cache.lookup(prim_key)
            if compiled is None:
                compiled = compile_ir(ir, eqn.prim.name)
                _eager_cache.store(prim_key, compiled)
        else:
            compiled = compile_ir(ir, name)
    except Exception:  # noqa: BLE001 - not stored: the ordinary path compiles its own programs (or fails alike)
        return _SLOW
    _op_cache.store(key, compiled.call_flat)
    return compiled.call_flat


def _new_scalar(value: Any, dtype: np.dtype, weak: bool, device: Any, key: tuple[Any, ...]) -> Array:
    """The device scalar for a Python scalar operand converted to dtype: the literal promotion makes of it (an
    OverflowError for an int that does not fit, as on the ordinary path), on the device of the Array operand.
    A float that overflows to infinity is not kept, so that every such call warns as numpy (and the ordinary
    path) does."""
    literal = scalar_literal(value, dtype, weak)
    converted = literal.value
    buffer = _scalar_buffer(type(converted), repr(converted), dtype, converted, device)
    array = Array._from_buffer(buffer, literal.aval)
    if not (type(value) is float and math.isinf(converted) and not math.isinf(value)):
        _scalar_arrays.store(key, array)
    return array


def fast_unary(slow: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """slow(x), with the fast path for a concrete Array x (see the module docstring)."""
    name = slow.__name__

    @functools.wraps(slow)
    def op(x: Any) -> Any:
        if type(x) is Array and not _trace_state.stack and not _Checks.active:
            key = (op, x.aval, _config_values["enable_x64"])
            run = _op_cache.get(key)
            if run is None:
                run = _compile_op(key, name, slow, (x.aval,))
            if run is not _SLOW:
                try:
                    return run([x])[0]
                except Exception:  # noqa: BLE001 - (a deleted array): the ordinary path raises its own error
                    pass
        return slow(x)
    return op


def fast_binary(slow: Callable[[Any, Any], Any],
                scalar_aval: Callable[[list[tuple[np.dtype, bool]]], ShapedArray | None]
                ) -> Callable[[Any, Any], Any]:
    """slow(x, y), with the fast path where one operand is a concrete Array and the other an Array or a Python
    scalar. scalar_aval gives, from every operand's (dtype, weak type), the aval of the literal slow makes of a
    Python scalar operand (what promotion converts it to), or None where this signature takes the ordinary path
    (for every signature, scalar or not: it may also refuse value-dependent ones)."""
    name = slow.__name__

    def compile_signature(key: tuple[Any, ...]) -> Any:
        kinds = key[1:3]
        if not all(type(k) is ShapedArray or k in _SCALAR_TYPES for k in kinds):  # numpy values, tracers...
            _op_cache.store(key, _SLOW)
            return _SLOW
        typed = [(k.dtype, k.weak_type) if type(k) is ShapedArray else python_scalar_dtype(k) for k in kinds]
        literal = scalar_aval(typed)
        if literal is None:
            _op_cache.store(key, _SLOW)
            return _SLOW
        run = _compile_op(key, name, slow, [k if type(k) is ShapedArray else literal for k in kinds])
        if run is _SLOW or all(type(k) is ShapedArray for k in kinds):
            return run
        entry = (run, literal.dtype, literal.weak_type)  # what a call needs to make the scalar's device value
        _op_cache.store(key, entry)
        return entry

    @functools.wraps(slow)
    def op(x: Any, y: Any) -> Any:
        tx, ty = type(x), type(y)
        if (tx is Array or ty is Array) and not _trace_state.stack and not _Checks.active:
            key = (op, x.aval if tx is Array else tx, y.aval if ty is Array else ty, _config_values["enable_x64"])
            entry = _op_cache.get(key)
            if entry is None:
                entry = compile_signature(key)
            if entry is not _SLOW:
                try:
                    if tx is ty:  # two Arrays
                        return entry([x, y])[0]
                    run, dtype, weak = entry
                    if tx is Array:
                        value, device = y, x._buffer.device
                    else:
                        value, device = x, y._buffer.device
                    # the scalar by value: -0.0 and 0.0 (equal) differ, and NaN (unequal to itself) has one key
                    scalar_key = (value, dtype, device) if value and value == value else (repr(value), dtype, device)
                    scalar = _scalar_arrays.get(scalar_key)
                    if scalar is None:
                        scalar = _new_scalar(value, dtype, weak, device, scalar_key)
                    return run([x, scalar] if tx is Array else [scalar, y])[0]
                except Exception:  # noqa: BLE001 - (a deleted array): the ordinary path raises its own error
                    pass
        return slow(x, y)
    return op


_STATIC_ATOMS = frozenset({type(None), bool, int, str, type})


def _static_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The cache key of static arguments (axis, keepdims, dtype, shapes): their values with their types (axis=1
    and axis=True, or (0, 1) and (0, 1.0), are equal and hash alike but need not mean the same); None for
    arguments outside the few kinds of values keyed here (floats, whose NaN and -0.0 compare oddly; arrays)."""
    key: list[Any] = list(kwargs)
    for value in (*args, *kwargs.values()):
        kind = type(value)
        if kind in _STATIC_ATOMS or isinstance(value, np.dtype):
            key += (kind, value)
        elif (kind is tuple or kind is list) and all(type(v) is int for v in value):
            key += (kind, tuple(value))
        else:
            return None
    return tuple(key)


def fast_static(slow: Callable[..., Any]) -> Callable[..., Any]:
    """slow(a, *args, **kwargs) with static args (axes, shapes, dtypes, flags), with the fast path for a concrete
    Array a and static arguments _static_key can key."""
    name = slow.__name__

    @functools.wraps(slow)
    def op(a: Any, *args: Any, **kwargs: Any) -> Any:
        if type(a) is Array and not _trace_state.stack and not _Checks.active:
            statics = _static_key(args, kwargs) if args or kwargs else ()
            if statics is not None:
                key = (op, a.aval, statics, _config_values["enable_x64"])
                run = _op_cache.get(key)
                if run is None:
                    run = _compile_op(key, name, lambda x: slow(x, *args, **kwargs), (a.aval,))
                if run is not _SLOW:
                    try:
                        return run([a])[0]
                    except Exception:  # noqa: BLE001 - (a deleted array): the ordinary path raises its own error
                        pass
        return slow(a, *args, **kwargs)
    return op
