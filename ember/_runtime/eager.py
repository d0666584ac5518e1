"""Eager execution: operations run outside jit, each signature compiled once, kept in bounded caches. Importing
this module fills the core's eager slot.

Three levels:

* Primitives (apply_primitive, the eager slot of Primitive.bind): each (primitive, params, operand avals) compiles
  into a one-equation executable, in a least-recently-used cache.
* Whole operations of ember.numpy (`x + y`, `x * 2.0`, `enp.exp(x)`, `x.sum()`, `enp.where(c, x, 0.0)`), through
  the one fast path that fast_path wraps them in (fast_binary adapts a scalar rule to it, fast_static takes
  static arguments). A call on concrete Arrays
  (and Python scalars), made outside any staging, looks up one entry keyed by the operation, its operands' avals
  (the type, for a Python scalar), its static arguments and the staging options (enable_x64, ...), and runs
  what the entry holds at once.
  These fully determine what the ordinary path would do (promotion with weak types, broadcasting, the primitives'
  checks), so a hit skips all of it. On a miss the operation is staged out at those avals; the entry runs the
  primitives the ordinary path would run, with the very programs apply_primitive runs (one primitive: its program
  is the operation; several: one after another, see _Steps; data movement into one elementwise primitive: one
  program, see _runner). A Python scalar operand is an input, of the dtype promotion gives it; its value becomes a
  device scalar shared by all calls with that value.
* Static windows (read_window): x[i], x[i:i+2], x[i, j] on a concrete Array, one program per index structure
  whose starts are runtime scalars.

Everything else takes the operation's ordinary path, unchanged: tracers and concrete Arrays while a function is
staged out (jit, grad, vmap), numpy operands, leaked tracers, debug_nans/debug_infs (their checks run after each
primitive), signatures whose staging fails (the ordinary path then raises its own error), value-dependent
operations, and calls that are not their program's common case or whose program fails (a deleted or misplaced
array, a failed execution: the ordinary path raises its own message). Any other exception of the fast path is a bug
and propagates; `fallbacks` counts the signatures that take the ordinary path, and why. What the fast path needs
to know of a primitive is set where the primitive is defined (Primitive.moves_data, fuses_data_movement,
eager_body). The results are exactly the ordinary path's: dtype, weak type and bits (tests/test_eager_dispatch.py)."""
from __future__ import annotations

import collections
import contextlib
import functools
import math
import operator
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember._core.cache import LRUCache
from ember._core.config import config
from ember._core.dtypes import StagingOptions as _staging, python_scalar_dtype
from ember._core import (EAGER, IR, TRACE_STATE, Eqn, Literal, Primitive, ShapedArray, Tracer, UnexpectedTracerError,
                         Var, aval_of_value, check_live, scalar_literal, stage_flat)
from ember._core.ir import sub_irs
from ember._core.sharding import MeshContexts
from ember._prims.indexing import dynamic_slice
from ember._prims.shape import reshape
from ember._runtime import callbacks as _callbacks
from ember._runtime.array import Array, canonical_aval as _canonical
from ember._runtime.sharded import ShardedArray
from ember._runtime.compiler import CALL_CHECK_OPTIONS, Compiled, DeletedArrayError, _Checks, compile_ir
from ember._runtime.dispatch import DeviceMismatchError, _scalar_buffer
from ember._runtime.pjrt import PjrtError
from ember._core.refs import RefAval, ref_operand_error
from ember._runtime.refs import apply_with_refs

_eager_cache = LRUCache("eager_cache_size")  # ember.config option


# ---------------------------------------------------------------------------------------------------------------
# Primitives
def _eager_aval(x: Any, prim: Primitive, i: int) -> ShapedArray:
    aval = getattr(x, "aval", None)
    if aval is not None and not isinstance(x, Tracer):
        if type(aval) is RefAval:
            if not prim.takes_refs:
                raise ref_operand_error(prim.name, [None] * i + [aval])
            raise _HasRefs
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


def _executable(prim: Primitive, params: dict[str, Any], avals: tuple[ShapedArray, ...], sharded: bool = False
                ) -> Compiled:
    """The one-equation program of a primitive at these operand avals (every operand an input, literals too);
    sharded: it is first called with sharded arrays (its program for one device is compiled when needed)."""
    key = _eager_key(prim, params, avals)
    compiled: Compiled | None = _eager_cache.lookup(key)
    if compiled is None:
        out_avals = [_canonical(a) for a in prim.out_avals(avals, params)]
        in_vars = [Var(a) for a in avals]
        out_vars = [Var(a) for a in out_avals]
        compiled = compile_ir(IR([], [], in_vars, [Eqn(prim, in_vars, out_vars, params)], out_vars), prim.name,
                              deferred=sharded)
        _eager_cache.store(key, compiled)
    return compiled


class _HasRefs(Exception):
    """An operand is an ember.Ref: the primitive runs as ember._runtime.refs.apply_with_refs says."""


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    try:
        avals = tuple([x.aval if type(x) is Array else _eager_aval(x, prim, i) for i, x in enumerate(args)])
    except _HasRefs:
        return apply_with_refs(prim, args, params, compile_ir)
    compiled = _eager_cache.lookup(_eager_key(prim, params, avals)) or _executable(
        prim, params, avals, any(type(x) is ShardedArray for x in args))
    return compiled.call_flat(args)


EAGER.fill(apply_primitive)


# ---------------------------------------------------------------------------------------------------------------
# Whole operations (see the module docstring)
# The caches of the fast paths. A hit does not reorder them (OrderedDict.move_to_end would hash the key a second
# time, a good part of a hit's cost): entries leave in the order they came.
_op_cache = LRUCache("eager_cache_size")  # key -> a runner (_runner), a tuple (runner, scalar info...), or _SLOW
_scalar_arrays = LRUCache("eager_cache_size")  # (value, dtype, device) -> a device scalar Array
_SLOW = "slow"  # the entry of a signature that takes the ordinary path
_SCALAR_TYPES = frozenset({bool, int, float})
_trace_state = TRACE_STATE


def _store(key: tuple[Any, ...], entry: Any) -> Any:
    """Keep entry under key, whose avals become their _canonical objects; returns entry."""
    _op_cache.store(tuple(_canonical(k) if type(k) is ShapedArray else k for k in key), entry)
    return entry


class _Switch:
    """`off` (read on every call) is true while the fast paths must not run: debug_nans or debug_infs is on (the
    ordinary path checks each primitive's results, and names the primitive and its line), inside ordinary_path(),
    or while a mesh context is open in some thread (set_mesh: operations run over the context mesh's devices; the
    fast paths' keys do not hold it)."""
    off = False
    _ordinary = 0  # how many ordinary_path() blocks are open

    @classmethod
    def update(cls, _: Any = None) -> None:
        cls.off = _Checks.active or cls._ordinary > 0 or MeshContexts.active > 0


_Switch.update()
config.on_change("debug_nans", _Switch.update)  # (after compiler's own hooks, which update _Checks)
config.on_change("debug_infs", _Switch.update)
for _option_name in CALL_CHECK_OPTIONS:  # (no_execution and the transfer guards: checked on the ordinary path)
    config.on_change(_option_name, _Switch.update)
MeshContexts.hooks.append(_Switch.update)


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


def _flatten(ir: IR, inputs: list[Any]) -> tuple[list[tuple[Eqn, list[Any]]], list[Any]] | None:
    """The equations the ordinary path would run one at a time, with the atoms (Vars of the outer IR, Literals)
    each reads, and the outer atoms of ir's outputs; None where a primitive's eager path is not one program. A
    primitive with an eager_body (custom rules, checkpoint) runs that body's primitives one at a time."""
    env: dict[Var, Any] = dict(zip(ir.in_vars, inputs))

    def read(atom: Any) -> Any:
        return env[atom] if isinstance(atom, Var) else atom

    steps: list[tuple[Eqn, list[Any]]] = []
    for eqn in ir.eqns:
        ins = [read(a) for a in eqn.inputs]
        body = eqn.prim.eager_body
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

    def call_flat(self, args: Sequence[Any]) -> list[Any]:
        values = list(args)  # (extended in place)
        if self.literals:
            device = args[0]._buffer.device  # (every input is an Array: a scalar operand is a device scalar)
            values += self._placed.get(device) or self._place(device)
        for run, arguments in self.steps:
            values += run(arguments(values))
        return [values[self.out]]

    _fast = call_flat  # (as Compiled's: see fast_path)


# Fusing primitives into one program may change results (XLA may divide by a constant as a multiplication by its
# reciprocal, keep excess precision between float16 operations, reduce a broadcast as a multiplication), except
# where the primitives before the last only move data (Primitive.moves_data) and the last is an elementwise
# primitive of one op (Primitive.fuses_data_movement): a broadcast or reshape feeding it is computed alike (the
# literals stay inputs, never constants XLA could fold).


def _runner(in_vars: list[Var], steps: list[tuple[Eqn, list[Any]]], out: Var, name: str) -> Any:
    """What runs an operation's primitives (steps, from _flatten) on its inputs: a Compiled program, or _Steps."""
    # positions in _Steps' list of values: Vars by themselves, literals by identity
    literals = list({id(a): a for _, ins in steps for a in ins if isinstance(a, Literal)}.values())
    index: dict[Any, int] = {v: i for i, v in enumerate(in_vars)}
    index.update((id(lit), len(in_vars) + i) for i, lit in enumerate(literals))
    last = steps[-1][0]
    if len(steps) > 1 and last.outputs == [out] and last.prim.fuses_data_movement and \
            all(eqn.prim.moves_data for eqn, _ in steps[:-1]):
        literal_vars = [Var(lit.aval) for lit in literals]
        as_var = dict(zip(map(id, literals), literal_vars))
        eqns = [Eqn(eqn.prim, [as_var[id(a)] if isinstance(a, Literal) else a for a in ins], eqn.outputs, eqn.params)
                for eqn, ins in steps]
        out.aval = _canonical(out.aval)  # (an equal aval: the result's, as _executable gives its programs')
        program = compile_ir(IR([], [], [*in_vars, *literal_vars], eqns, [out]), name)
        if not literals:
            return program
        return _Steps([(program.call_flat, list(range(len(index))))], len(index), literals)
    programs = [_executable(eqn.prim, eqn.params, tuple(a.aval for a in ins)) for eqn, ins in steps]
    if len(steps) == 1 and steps[0][1] == in_vars and last.outputs == [out]:
        return programs[0]  # one primitive on the inputs: its program is the operation
    size, plan = len(index), []
    for program, (eqn, ins) in zip(programs, steps):
        plan.append((program.call_flat, [index[a] if isinstance(a, Var) else index[id(a)] for a in ins]))
        for v in eqn.outputs:
            index[v], size = size, size + 1
    return _Steps(plan, index[out], literals)


def _fall_back(key: tuple[Any, ...], name: str, reason: str) -> Any:
    """Store that this signature takes the ordinary path, and count why (see fallbacks)."""
    fallbacks[(name, reason)] += 1
    return _store(key, _SLOW)


fallbacks: collections.Counter[tuple[str, str]] = collections.Counter()
"""(operation name, reason) -> how many signatures of the operation take the ordinary path for that reason, counted
once per signature (when it is first seen). For debugging: an operation expected on the fast path that is not."""

# What staging an operation at a signature may raise that is not a bug of this module: the ordinary path's own
# errors (bad dtypes or shapes, an int that does not fit, an operation that has no such form), which it raises
# again, and value-dependent code, which it runs concretely.
_STAGING_ERRORS = (TypeError, ValueError, IndexError, OverflowError, NotImplementedError, UnexpectedTracerError)


def _compile_op(key: tuple[Any, ...], name: str, fn: Callable[..., Any], in_avals: Sequence[ShapedArray]) -> Any:
    """Stage fn out at in_avals into the primitives the ordinary path would run, compile each as apply_primitive
    does (sharing its cache), and store what runs them under key; _SLOW (also stored) where the ordinary path is
    needed: staging fails (a bad signature: the ordinary path raises its error; or value-dependent code), the
    result is an input or a constant (the ordinary path makes no computation), or control flow."""
    try:
        ir = stage_flat(lambda *xs: [fn(*xs)], in_avals, label=name)
    except _STAGING_ERRORS as err:
        return _fall_back(key, name, f"staging raised {type(err).__name__}")
    flat = None if ir.consts else _flatten(ir, list(ir.in_vars))
    if flat is None or not flat[0] or not isinstance(flat[1][0], Var) or flat[1][0] in ir.in_vars:
        return _fall_back(key, name, "not a computation of primitives on its inputs")
    steps, (out,) = flat
    return _store(key, _runner(ir.in_vars, steps, out, name))


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


def _scalar_or_none(value: Any, dtype: np.dtype, weak: bool, device: Any, key: tuple[Any, ...]) -> Array | None:
    """_new_scalar, or None where an int does not fit dtype (the ordinary path then raises the OverflowError, with
    its own message)."""
    try:
        return _new_scalar(value, dtype, weak, device, key)
    except OverflowError:
        return None


def _place_scalars(operands: list[Any], scalars: Sequence[tuple[int, np.dtype, bool]], device: Any) -> bool:
    """Replace the Python scalars at these positions of operands (each with the dtype and weak type of its
    literal) by their device scalars, as fast_path does inline for the first one; False where an int does not fit
    its dtype."""
    for i, dtype, weak in scalars:
        value = operands[i]
        at = (value, dtype, device) if value and value == value else (repr(value), dtype, device)
        scalar = _scalar_arrays.get(at)
        if scalar is None and (scalar := _scalar_or_none(value, dtype, weak, device, at)) is None:
            return False
        operands[i] = scalar
    return True


# What running a cached entry may raise that the ordinary path reports itself (naming the primitive, where the
# entry's program may be named after the operation): an argument deleted meanwhile, or on another device than the
# first, and a failed execution (out of memory). Anything else is a bug of the fast path and propagates.
_ORDINARY_PATH_ERRORS = (DeletedArrayError, DeviceMismatchError, PjrtError)

LiteralAvals = Callable[[list[tuple[np.dtype, bool]]], Sequence[ShapedArray | None] | None]


def fast_path(slow: Callable[..., Any], literal_avals: LiteralAvals | None = None, *, static_args: bool = False
              ) -> Callable[..., Any]:
    """slow with the fast path (see the module docstring) for calls on concrete Arrays outside any staging.

    Operands are every argument, or with static_args only the first: the others (axes, shapes, dtypes, flags) are
    keyed by value (_static_key; a call with others takes the ordinary path); without static_args, a call with
    keywords takes the ordinary path. Python scalar operands are taken when literal_avals is given: from every
    operand's (dtype, weak type) it gives the aval of the literal slow makes of each Python scalar operand (one per
    operand; Arrays' are not read), or None where the signature takes the ordinary path (it is asked for every
    signature, scalar or not: it may refuse value-dependent ones). At least one operand must be an Array."""
    name = slow.__name__

    def compile_signature(key: tuple[Any, ...], operands: Sequence[Any], args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
        kinds = [a.aval if type(a) is Array else type(a) for a in operands]
        arrays = [type(k) is ShapedArray for k in kinds]
        if not all(is_array or k in _SCALAR_TYPES for k, is_array in zip(kinds, arrays)):
            return _fall_back(key, name, "operands other than Arrays and Python scalars")
        if not any(arrays):
            return _fall_back(key, name, "no Array operand")
        in_avals = kinds
        if literal_avals is not None:
            literals = literal_avals([(k.dtype, k.weak_type) if is_array else python_scalar_dtype(k)
                                      for k, is_array in zip(kinds, arrays)])
            if literals is None:
                return _fall_back(key, name, "refused by its literal rule")
            in_avals = [k if is_array else lit for k, lit, is_array in zip(kinds, literals, arrays)]
        elif not all(arrays):
            return _fall_back(key, name, "Python scalar operands")
        fn = (lambda x: slow(x, *args[1:], **kwargs)) if static_args else slow
        run = _compile_op(key, name, fn, in_avals)
        if run is _SLOW or all(arrays):
            return run
        scalars = [(i, aval.dtype, aval.weak_type) for i, (aval, is_array) in enumerate(zip(in_avals, arrays))
                   if not is_array]
        return _store(key, (run, arrays.index(True), *scalars[0], tuple(scalars[1:])))

    @functools.wraps(slow)
    def op(*args: Any, **kwargs: Any) -> Any:
        if _trace_state.stack or _Switch.off:
            return slow(*args, **kwargs)
        if static_args:
            operands = args[:1]
            statics = _static_key(args[1:], kwargs) if len(args) > 1 or kwargs else ()
        else:
            operands, statics = args, (None if kwargs else ())
        n = len(operands)
        if statics is None or n == 0:
            return slow(*args, **kwargs)
        # the key: the operation, each operand's aval (an Array) or type (a Python scalar), the static arguments,
        # the staging options (enable_x64 and the numpy promotion rules: StagingOptions.token; one and two operands
        # written out: a comprehension costs more than the whole key)
        if n == 1:
            x = operands[0]
            key = (op, x.aval if type(x) is Array else type(x), statics, _staging.token)
        elif n == 2:
            x, y = operands
            key = (op, x.aval if type(x) is Array else type(x), y.aval if type(y) is Array else type(y), statics,
                   _staging.token)
        else:
            key = (op, *[a.aval if type(a) is Array else type(a) for a in operands], statics,
                   _staging.token)
        entry = _op_cache.get(key)
        if entry is None:
            entry = compile_signature(key, operands, args, kwargs)
        if entry is _SLOW:
            return slow(*args, **kwargs)
        if type(entry) is tuple:  # Python scalar operands become device scalars, on the Arrays' device
            entry, first_array, i, dtype, weak, more = entry  # the first scalar inline, any others in a loop
            device = operands[first_array]._buffer.device
            operands = [*operands]
            value = operands[i]
            # by value, zeros by their text (-0.0 == 0.0); NaN is never found (see _new_scalar)
            at = (value, dtype, device) if value and value == value else (repr(value), dtype, device)
            scalar = _scalar_arrays.get(at)
            if scalar is None and (scalar := _scalar_or_none(value, dtype, weak, device, at)) is None:
                return slow(*args, **kwargs)
            operands[i] = scalar
            if more and not _place_scalars(operands, more, device):
                return slow(*args, **kwargs)
        try:
            # the common case first (Compiled._fast: every argument an Array on the program's device), without
            # call_flat's frame; None where it is not: call_flat takes any case
            if _callbacks.state.in_worker_callback:
                _callbacks.check_reentry(name)
            outs = entry._fast(operands)
            if outs is None:
                outs = entry.call_flat(operands)
        except _ORDINARY_PATH_ERRORS:  # (see there) the ordinary path raises its own error
            return slow(*args, **kwargs)
        return outs[0]
    return op


def fast_binary(slow: Callable[[Any, Any], Any],
                scalar_aval: Callable[[list[tuple[np.dtype, bool]]], ShapedArray | None]) -> Callable[[Any, Any], Any]:
    """slow(x, y), with the fast path where one operand is a concrete Array and the other an Array or a Python
    scalar; scalar_aval gives the aval of the literal a Python scalar operand becomes (see fast_path)."""
    def literal_avals(typed: list[tuple[np.dtype, bool]]) -> list[ShapedArray | None] | None:
        literal = scalar_aval(typed)
        return None if literal is None else [literal, literal]
    return fast_path(slow, literal_avals)


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
        if kind in _STATIC_ATOMS or isinstance(value, np.dtype | type):  # (type: ember.numpy's scalar types)
            key.append(value)
        elif (kind is tuple or kind is list) and _INT.issuperset(map(type, value)):
            key.append(tuple(value))
        else:
            return None
    return tuple(key)


def fast_static(slow: Callable[..., Any]) -> Callable[..., Any]:
    """slow(a, *args, **kwargs) with static args (axes, shapes, dtypes, flags), with the fast path for a concrete
    Array a and static arguments _static_key can key."""
    return fast_path(slow, static_args=True)


# ---------------------------------------------------------------------------------------------------------------
# Windows: x[i], x[i:i+2], x[i, j] (static ints and slices of step 1, ember._numpy.indexing) outside any staging
_INT32 = np.dtype(np.int32)


def _window_program(key: tuple[Any, ...]) -> Compiled:
    """The program of read_window's key (aval, sizes, out_shape): a dynamic_slice of sizes, whose starts in the
    dimensions it does not take whole are its int32 scalar inputs after x, reshaped to out_shape."""
    aval, sizes, out_shape = key[1:]
    moving = [d for d, (size, n) in enumerate(zip(sizes, aval.shape)) if size < n]

    def window(x: Any, *moving_starts: Any) -> list[Any]:
        starts: list[Any] = [0] * len(sizes)
        for d, start in zip(moving, moving_starts):
            starts[d] = start
        return [reshape(dynamic_slice(x, starts, sizes, allow_negative_indices=False), out_shape)]
    ir = stage_flat(window, [aval] + [ShapedArray((), _INT32)] * len(moving), label="getitem")
    ir.outs[0].aval = _canonical(ir.outs[0].aval)  # (the result's aval, as _executable gives its programs')
    return _store(key, compile_ir(ir, "getitem"))


def read_window(x: Array, starts: Sequence[int], sizes: tuple[int, ...], out_shape: tuple[int, ...]
                ) -> Array | None:
    """x's window of sizes at starts (each in bounds, below 2**31), reshaped to out_shape: x[index] for an index of
    static ints and slices of step 1, by one program per (x's aval, sizes, out_shape) that takes the starts of the
    dimensions it does not take whole as device scalars, so that distinct indices compile nothing more. None where
    the ordinary path must run: inside a staging (static indices stay static there), with debug checks or
    ordinary_path() on, and where the call fails as _ORDINARY_PATH_ERRORS (the ordinary path raises its error)."""
    if _trace_state.stack or _Switch.off:
        return None
    key = (read_window, x.aval, sizes, out_shape)
    program = _op_cache.get(key) or _window_program(key)
    operands: list[Any] = [x, *(start for start, size, n in zip(starts, sizes, x.aval.shape) if size < n)]
    if not _place_scalars(operands, [(i, _INT32, False) for i in range(1, len(operands))], x._buffer.device):
        return None
    try:
        return program.call_flat(operands)[0]
    except _ORDINARY_PATH_ERRORS:
        return None
