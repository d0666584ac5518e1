"""Eager execution: operations run outside jit, each signature compiled once, kept in bounded caches. Importing
this module fills the core's eager slot.

Two levels:

* Primitives (apply_primitive, the eager slot of Primitive.bind): each (primitive, params, operand avals) compiles
  into a one-equation executable, in a least-recently-used cache.
* Whole operations of ember.numpy (`x + y`, `x * 2.0`, `enp.exp(x)`, `x.sum()`, `enp.where(c, x, 0.0)`), through
  the fast paths that fast_unary, fast_binary, fast_nary and fast_static wrap them in. A call on concrete Arrays
  (and Python scalars), made outside any staging, looks up one entry keyed by the operation, its operands' avals
  (the type, for a Python scalar), its static arguments and enable_x64, and runs what the entry holds at once.
  These fully determine what the ordinary path would do (promotion with weak types, broadcasting, the primitives'
  checks), so a hit skips all of it. On a miss the operation is staged out at those avals; the entry runs the
  primitives the ordinary path would run, with the very programs apply_primitive runs (one primitive: its program
  is the operation; several: one after another, see _Steps; data movement into one elementwise primitive: one
  program, see _runner). A Python scalar operand is an input, of the dtype promotion gives it; its value becomes a
  device scalar shared by all calls with that value.

Everything else takes the operation's ordinary path, unchanged: tracers and concrete Arrays while a function is
staged out (jit, grad, vmap), numpy operands, leaked tracers, debug_nans/debug_infs (their checks run after each
primitive), signatures whose staging fails (the ordinary path then raises its own error), value-dependent
operations, and calls whose program fails (a deleted or misplaced array: the ordinary path raises its own
message). The results are exactly the ordinary path's: dtype, weak type and bits (tests/test_eager_dispatch.py)."""
from __future__ import annotations

import contextlib
import functools
import math
import operator
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember._core.cache import LRUCache
from ember._core.config import config
from ember._core.dtypes import python_scalar_dtype
from ember._core import (EAGER, IR, TRACE_STATE, Eqn, Literal, Primitive, ShapedArray, Tracer, UnexpectedTracerError,
                         Var, aval_of_value, check_live, scalar_literal, stage_flat)
from ember._core.ir import sub_irs
from ember._runtime.array import Array, canonical_aval as _canonical
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


def _executable(prim: Primitive, params: dict[str, Any], avals: tuple[ShapedArray, ...]) -> Compiled:
    """The one-equation program of a primitive at these operand avals (every operand an input, literals too)."""
    key = _eager_key(prim, params, avals)
    compiled: Compiled | None = _eager_cache.lookup(key)
    if compiled is None:
        out_avals = [_canonical(a) for a in prim.out_avals(avals, params)]
        in_vars = [Var(a) for a in avals]
        out_vars = [Var(a) for a in out_avals]
        compiled = compile_ir(IR([], [], in_vars, [Eqn(prim, in_vars, out_vars, params)], out_vars), prim.name)
        _eager_cache.store(key, compiled)
    return compiled


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    avals = tuple([x.aval if type(x) is Array else _eager_aval(x, prim, i) for i, x in enumerate(args)])
    compiled = _eager_cache.lookup(_eager_key(prim, params, avals)) or _executable(prim, params, avals)
    return compiled.call_flat(args)


EAGER.fill(apply_primitive)


# ---------------------------------------------------------------------------------------------------------------
# Whole operations (see the module docstring)
# The caches of the fast paths. A hit does not reorder them (OrderedDict.move_to_end would hash the key a second
# time, a good part of a hit's cost): entries leave in the order they came.
_op_cache = LRUCache("eager_cache_size")  # key -> a runner (a call_flat or _Steps), a tuple (runner, scalar info...)
_scalar_arrays = LRUCache("eager_cache_size")  # (value, dtype, device) -> a device scalar Array
_SLOW = "slow"  # the entry of a signature that takes the ordinary path
_SCALAR_TYPES = frozenset({bool, int, float})
_config_values = config._values  # read on every call: a plain dict lookup
_trace_state = TRACE_STATE


def _store(key: tuple[Any, ...], entry: Any) -> Any:
    """Keep entry under key, whose avals become their _canonical objects; returns entry."""
    _op_cache.store(tuple(_canonical(k) if type(k) is ShapedArray else k for k in key), entry)
    return entry


class _Switch:
    """`off` (read on every call) is true while the fast paths must not run: debug_nans or debug_infs is on (the
    ordinary path checks each primitive's results, and names the primitive and its line), or inside
    ordinary_path()."""
    off = False
    _ordinary = 0  # how many ordinary_path() blocks are open

    @classmethod
    def update(cls, _: Any = None) -> None:
        cls.off = _Checks.active or cls._ordinary > 0


_Switch.update()
config.on_change("debug_nans", _Switch.update)  # (after compiler's own hooks, which update _Checks)
config.on_change("debug_infs", _Switch.update)


@contextlib.contextmanager
def ordinary_path() -> Iterator[None]:
    """Within the with-block, operations take their ordinary path (for tests that compare the two, and for
    debugging). Process-wide, not per thread."""
    _Switch._ordinary += 1
    _Switch.update()
    try:
        yield
    finally:
        _Switch._ordinary -= 1
        _Switch.update()


# Higher-order primitives whose eager path runs the Python function itself (ember._control.custom: outside staging
# custom_jvp, custom_vjp and checkpoint call it directly): a plan runs their bodies' primitives one at a time too.
_INLINED = {"custom_jvp_call": "fun_ir", "custom_vjp_call": "fun_ir", "remat": "body_ir"}


def _flatten(ir: IR, inputs: list[Any]) -> tuple[list[tuple[Eqn, list[Any]]], list[Any]] | None:
    """The equations the ordinary path would run one at a time, with the atoms (Vars of the outer IR, Literals)
    each reads, and the outer atoms of ir's outputs; None where a primitive's eager path is not one program."""
    env: dict[Var, Any] = dict(zip(ir.in_vars, inputs))
    read = lambda atom: env[atom] if isinstance(atom, Var) else atom
    steps: list[tuple[Eqn, list[Any]]] = []
    for eqn in ir.eqns:
        ins = [read(a) for a in eqn.inputs]
        body = _INLINED.get(eqn.prim.name)
        if body is not None:
            sub = eqn.params[body]
            if sub.consts:
                return None
            inner = _flatten(sub, ins)
            if inner is None:
                return None
            steps += inner[0]
            env.update(zip(eqn.outputs, inner[1]))
        elif sub_irs(eqn.params):  # control flow: its eager path may differ (a concrete predicate...)
            return None
        else:
            steps.append((eqn, ins))
            env.update(zip(eqn.outputs, eqn.outputs))
    return steps, [read(a) for a in ir.outs]


class _Steps:
    """An operation of several primitives, run one primitive at a time with the programs apply_primitive runs
    (not fused into one program: XLA may then compute differently, e.g. divide by a constant as a multiplication
    by its reciprocal, and eager results must be exactly the ordinary path's). Values live in a list: the
    operation's inputs, then the literals (device scalars, per device), then each step's outputs."""
    __slots__ = ("steps", "out", "literals", "_placed")

    def __init__(self, steps: list[tuple[Callable[[list[Any]], list[Any]], list[int]]], out: int,
                 literals: list[Any]):
        # each step's arguments taken from the values in C: itemgetter of positions gives a tuple, of a slice a list
        self.steps = [(run, operator.itemgetter(*refs) if len(refs) > 1 else
                       operator.itemgetter(slice(refs[0], refs[0] + 1) if refs else slice(0, 0)))
                      for run, refs in steps]
        self.out, self.literals = out, literals
        self._placed: dict[Any, list[Array]] = {}

    def _place(self, device: Any) -> list[Array]:
        placed = [Array._from_buffer(_scalar_buffer(type(lit.value), repr(lit.value), lit.aval.dtype, lit.value,
                                                    device), lit.aval) for lit in self.literals]
        self._placed[device] = placed
        return placed

    def __call__(self, args: list[Any]) -> list[Any]:
        values = args  # (a list each call makes afresh: extended in place)
        if self.literals:
            device = args[0]._buffer.device  # (every input is an Array: a scalar operand is a device scalar)
            values = args + (self._placed.get(device) or self._place(device))
        for run, arguments in self.steps:
            values += run(arguments(values))
        return [values[self.out]]


# Fusing primitives into one program may change results (XLA may divide by a constant as a multiplication by its
# reciprocal, keep excess precision between float16 operations, reduce a broadcast as a multiplication), except
# where the primitives before the last only move data: a broadcast or reshape feeding an elementwise primitive is
# computed alike (the literals stay inputs, never constants XLA could fold).
_DATA_MOVEMENT = frozenset({"broadcast_in_dim", "reshape"})
_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "rem", "atan2", "max", "min", "pow", "and", "or", "xor", "eq",
                          "ne", "lt", "le", "gt", "ge", "select"})


def _runner(in_vars: list[Var], steps: list[tuple[Eqn, list[Any]]], out: Var, name: str) -> Any:
    """What runs an operation's primitives (steps, from _flatten) on its inputs: a program's call_flat, or _Steps."""
    # positions in _Steps' list of values: Vars by themselves, literals by identity
    literals = list({id(a): a for _, ins in steps for a in ins if isinstance(a, Literal)}.values())
    index: dict[Any, int] = {v: i for i, v in enumerate(in_vars)}
    index.update((id(lit), len(in_vars) + i) for i, lit in enumerate(literals))
    last = steps[-1][0]
    if len(steps) > 1 and last.outputs == [out] and last.prim.name in _ELEMENTWISE and \
            all(eqn.prim.name in _DATA_MOVEMENT for eqn, _ in steps[:-1]):
        literal_vars = [Var(lit.aval) for lit in literals]
        as_var = dict(zip(map(id, literals), literal_vars))
        eqns = [Eqn(eqn.prim, [as_var[id(a)] if isinstance(a, Literal) else a for a in ins], eqn.outputs, eqn.params)
                for eqn, ins in steps]
        out.aval = _canonical(out.aval)  # (an equal aval: the result's, as _executable gives its programs')
        program = compile_ir(IR([], [], [*in_vars, *literal_vars], eqns, [out]), name)
        if not literals:
            return program.call_flat
        return _Steps([(program.call_flat, list(range(len(index))))], len(index), literals)
    programs = [_executable(eqn.prim, eqn.params, tuple(a.aval for a in ins)) for eqn, ins in steps]
    if len(steps) == 1 and steps[0][1] == in_vars and last.outputs == [out]:
        return programs[0].call_flat  # one primitive on the inputs: its program is the operation
    size, plan = len(index), []
    for program, (eqn, ins) in zip(programs, steps):
        plan.append((program.call_flat, [index[a] if isinstance(a, Var) else index[id(a)] for a in ins]))
        for v in eqn.outputs:
            index[v], size = size, size + 1
    return _Steps(plan, index[out], literals)


def _compile_op(key: tuple[Any, ...], name: str, fn: Callable[..., Any], in_avals: Sequence[ShapedArray]) -> Any:
    """Stage fn out at in_avals into the primitives the ordinary path would run, compile each as apply_primitive
    does (sharing its cache), and store what runs them under key; _SLOW (also stored) where the ordinary path is
    needed: staging fails (a bad signature: the ordinary path raises its error; or value-dependent code), the
    result is an input or a constant (the ordinary path makes no computation), or control flow."""
    try:
        ir = stage_flat(lambda *xs: [fn(*xs)], in_avals, label=name)
    except Exception:  # noqa: BLE001 - the ordinary path raises it again, or does without staging
        return _store(key, _SLOW)
    flat = None if ir.consts else _flatten(ir, list(ir.in_vars))
    if flat is None or not flat[0] or not isinstance(flat[1][0], Var) or flat[1][0] in ir.in_vars:
        return _store(key, _SLOW)
    steps, (out,) = flat
    try:
        run = _runner(ir.in_vars, steps, out, name)
    except Exception:  # noqa: BLE001 - not stored: the ordinary path compiles its own programs (or fails alike)
        return _SLOW
    return _store(key, run)


def _new_scalar(value: Any, dtype: np.dtype, weak: bool, device: Any, key: tuple[Any, ...]) -> Array:
    """The device scalar for a Python scalar operand converted to dtype: the literal promotion makes of it (an
    OverflowError for an int that does not fit, as on the ordinary path), on the device of the Array operand.
    Not kept: a value that overflows to infinity, so that every such call warns as numpy (and the ordinary path)
    does; NaN, whose sign and payload its key does not tell (the ordinary path's _scalar_buffer keeps it)."""
    literal = scalar_literal(value, dtype, weak)
    converted = literal.value
    buffer = _scalar_buffer(type(converted), repr(converted), dtype, converted, device)
    array = Array._from_buffer(buffer, literal.aval)
    if value == value and (not np.isinf(converted) or (type(value) is float and math.isinf(value))):
        _scalar_arrays.store(key, array)
    return array


def fast_unary(slow: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """slow(x), with the fast path for a concrete Array x (see the module docstring)."""
    name = slow.__name__

    @functools.wraps(slow)
    def op(x: Any) -> Any:
        if type(x) is Array and not _trace_state.stack and not _Switch.off:
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
            return _store(key, _SLOW)
        typed = [(k.dtype, k.weak_type) if type(k) is ShapedArray else python_scalar_dtype(k) for k in kinds]
        literal = scalar_aval(typed)
        if literal is None:
            return _store(key, _SLOW)
        run = _compile_op(key, name, slow, [k if type(k) is ShapedArray else literal for k in kinds])
        if run is _SLOW or all(type(k) is ShapedArray for k in kinds):
            return run
        # what a call needs to make the scalar's device value
        return _store(key, (run, literal.dtype, literal.weak_type))

    @functools.wraps(slow)
    def op(x: Any, y: Any) -> Any:
        tx, ty = type(x), type(y)
        if (tx is Array or ty is Array) and not _trace_state.stack and not _Switch.off:
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
                    # the scalar by value, zeros by their text (-0.0 == 0.0); NaN is never found (see _new_scalar)
                    scalar_key = (value, dtype, device) if value and value == value else (repr(value), dtype, device)
                    scalar = _scalar_arrays.get(scalar_key)
                    if scalar is None:
                        scalar = _new_scalar(value, dtype, weak, device, scalar_key)
                    return run([x, scalar] if tx is Array else [scalar, y])[0]
                except Exception:  # noqa: BLE001 - (a deleted array): the ordinary path raises its own error
                    pass
        return slow(x, y)
    return op


def _device_scalar(value: Any, dtype: np.dtype, weak: bool, device: Any) -> Array:
    """The device scalar of a Python scalar operand (as fast_binary finds it inline)."""
    key = (value, dtype, device) if value and value == value else (repr(value), dtype, device)
    return _scalar_arrays.get(key) or _new_scalar(value, dtype, weak, device, key)


def fast_nary(slow: Callable[..., Any],
              scalar_avals: Callable[[list[tuple[np.dtype, bool]]], Sequence[ShapedArray | None] | None]
              ) -> Callable[..., Any]:
    """slow(*operands) (where), with the fast path where the operands are concrete Arrays and Python scalars, at
    least one an Array. scalar_avals gives, from every operand's (dtype, weak type), the avals of the literals slow
    makes of Python scalar operands, one per operand (Arrays' are not read), or None for the ordinary path."""
    name = slow.__name__

    def compile_signature(key: tuple[Any, ...]) -> Any:
        kinds = key[1:-1]
        if not any(type(k) is ShapedArray for k in kinds) or \
                not all(type(k) is ShapedArray or k in _SCALAR_TYPES for k in kinds):
            return _store(key, _SLOW)
        typed = [(k.dtype, k.weak_type) if type(k) is ShapedArray else python_scalar_dtype(k) for k in kinds]
        literals = scalar_avals(typed)
        if literals is None:
            return _store(key, _SLOW)
        run = _compile_op(key, name, slow, [k if type(k) is ShapedArray else lit for k, lit in zip(kinds, literals)])
        if run is _SLOW:
            return run
        scalars = tuple((i, lit.dtype, lit.weak_type) for i, (k, lit) in enumerate(zip(kinds, literals))
                        if type(k) is not ShapedArray)
        return _store(key, (run, scalars))

    @functools.wraps(slow)
    def op(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and not _trace_state.stack and not _Switch.off:
            key = (op, *[a.aval if type(a) is Array else type(a) for a in args], _config_values["enable_x64"])
            entry = _op_cache.get(key)
            if entry is None:
                entry = compile_signature(key)
            if entry is not _SLOW:
                try:
                    run, scalars = entry
                    operands = list(args)
                    if scalars:
                        device = next(a._buffer.device for a in args if type(a) is Array)
                        for i, dtype, weak in scalars:
                            operands[i] = _device_scalar(args[i], dtype, weak, device)
                    return run(operands)[0]
                except Exception:  # noqa: BLE001 - (a deleted array): the ordinary path raises its own error
                    pass
        return slow(*args, **kwargs)
    return op


_STATIC_ATOMS = frozenset({type(None), bool, int, str, type})
_INT = frozenset({int})


def _static_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The cache key of static arguments (axis, keepdims, dtype, shapes): their values with their types (axis=1
    and axis=True, or (0, 1) and (0, 1.0), are equal and hash alike but need not mean the same), and the keywords'
    names; None for arguments outside the few kinds of values keyed here (floats, whose NaN and -0.0 compare
    oddly; arrays)."""
    values = (*args, *kwargs.values()) if kwargs else args
    types = tuple(map(type, values))
    if _STATIC_ATOMS.issuperset(types):  # the common case: ints, None, flags, names
        return (types, values, *kwargs)
    key = [types, *kwargs]
    for value, kind in zip(values, types):
        if kind in _STATIC_ATOMS or isinstance(value, np.dtype):
            key.append(value)
        elif (kind is tuple or kind is list) and _INT.issuperset(map(type, value)):
            key.append(tuple(value))
        else:
            return None
    return tuple(key)


def fast_static(slow: Callable[..., Any]) -> Callable[..., Any]:
    """slow(a, *args, **kwargs) with static args (axes, shapes, dtypes, flags), with the fast path for a concrete
    Array a and static arguments _static_key can key."""
    name = slow.__name__

    @functools.wraps(slow)
    def op(a: Any, *args: Any, **kwargs: Any) -> Any:
        if type(a) is Array and not _trace_state.stack and not _Switch.off:
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
