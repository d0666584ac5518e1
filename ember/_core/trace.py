"""Tracing and staging: how Python code becomes IR.

While a function is staged out, its array values are Tracers of the innermost active Builder; applying a primitive
to them records an equation. Outside any staging, a primitive applied to concrete values runs eagerly (see
Primitive.bind). Tracers of an enclosing Builder, and concrete arrays, that a staged function uses are captured as
constants of the inner IR: when that IR is inlined into the enclosing trace they are bound again."""
from __future__ import annotations

import contextlib
import gc
import operator
import weakref
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember._core.config import config
from ember._core.dtypes import (ShapedArray, aval_of_value, canonicalize_dtype, dtype_and_weak, is_inexact,
                               is_python_scalar, join_vma)
from ember._core.ir import IR, Atom, Eqn, Literal, Var, check_ir, python_scalar_literal
from ember._core.primitive import EAGER, TRACE_STATE, Primitive, has_effects, user_source
from ember._core.profile import profiled
from ember._core.refs import RefAval, RefMethods, ref_operand_error
from ember._core.vma import cast_operands


# ---------------------------------------------------------------------------------------------------------------
# Errors (jax.errors' classes: ember.errors)
class JAXTypeError(TypeError):
    """The base of the TypeErrors particular to staging and transforming (jax.errors.JAXTypeError)."""


class JAXIndexError(IndexError):
    """The base of the IndexErrors particular to staging (jax.errors.JAXIndexError)."""


class ConcretizationTypeError(JAXTypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnexpectedTracerError(JAXTypeError, RuntimeError):
    """A tracer was used after the staging that created it had finished (a TypeError as JAX's, and a RuntimeError
    as ember's always was)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask index whose values are traced (inside jit, vmap, grad): the result's shape would depend on
    them (jax.errors.NonConcreteBooleanIndexError)."""


class KeyReuseError(JAXTypeError):
    """A PRNG key consumed twice, found by the key-reuse checker (the debug_key_reuse option, as
    jax.errors.KeyReuseError; ember._transforms.key_reuse)."""


class TracerBoolConversionError(ConcretizationTypeError):
    """bool() of a traced value (an `if` or `while` on it), as JAX's."""


class TracerIntegerConversionError(ConcretizationTypeError):
    """A traced value used as a Python index (__index__), as JAX's (int() is a ConcretizationTypeError)."""


class TracerArrayConversionError(ConcretizationTypeError):
    """A numpy conversion (np.asarray) of a traced value, as JAX's."""


_CONVERSION_ERRORS = {"bool()": TracerBoolConversionError, "__index__()": TracerIntegerConversionError,
                      "numpy conversion (np.asarray)": TracerArrayConversionError}


# ---------------------------------------------------------------------------------------------------------------
# Tracers
class ArrayMethods:
    """The base of Tracer and ember.Array: their operators and array methods (`x + y`, `x.sum()`, `x[1:]`) are
    numpy's, so they are installed here by the numpy layer through install_array_methods (the second place where
    a lower layer is completed by a higher one, after the eager slot of Primitive.bind; the third is the indexing
    of references, ember._core.refs.install_ref_methods)."""
    __slots__ = ()
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]  (arrays compare elementwise, so they are not hashable)
    # (as jax.Array's: numpy's bytes per element, 1 for int4 and float4_e2m1fn, whatever a device packs them in)
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError(f"ember arrays are immutable and do not support item assignment (x[{index!r}] = ...): use "
                        f"x = x.at[{index!r}].set(value) (or .add, .multiply, ...), which returns the updated array")


def install_array_methods(methods: dict[str, Any]) -> None:
    """Install operator overloads and methods on every array type (called once, by ember._numpy.methods)."""
    for name, method in methods.items():
        setattr(ArrayMethods, name, method)


class PerDevice:
    """The value of a tracer of an eager shard_map body: each device's block (ember._control.shard_map). A tracer
    holding one prints them (as JAX's), converts to a Python value only where its type says every device holds the
    same, and is not a value transformations may compute with (concrete_values)."""
    __slots__ = ()

    def text(self, aval: ShapedArray) -> str:
        raise NotImplementedError

    def common(self, aval: ShapedArray) -> Any:
        """The value every device holds (an array), or None where the type lets them differ."""
        raise NotImplementedError


class Tracer(ArrayMethods):
    """A value inside a function being staged out: its shape and dtype are known, and its value only while an
    autodiff API evaluates a function with concrete values (see Builder.concrete)."""
    __slots__ = ("builder", "ir_var", "aval", "value", "__weakref__")

    def __init__(self, builder: "Builder", var: Var, value: Any = None):
        self.builder = builder
        self.ir_var = var
        self.aval = var.aval
        self.value = value

    # (JAX's names, as libraries read them: a tracer's trace is its staging, whose `main` is itself)
    _trace = property(lambda self: self.builder)

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __repr__(self) -> str:
        if isinstance(self.value, PerDevice):  # (an eager shard_map body's value: each device's, as JAX prints it)
            return self.value.text(self.aval)
        return f"Traced<{self.aval.str_short()}>"

    def _concrete(self, what: str, keeps_derivative: bool = True) -> Any:
        """The concrete value, or a ConcretizationTypeError that says where the value comes from. A conversion
        that would drop a floating-point value's derivative (float(), np.asarray, item(), tolist()) is refused
        even when the value is known, as in JAX: it would silently give a wrong gradient."""
        value = self.value
        if isinstance(value, PerDevice):  # (one value when the type says it is the same on every device)
            value = value.common(self.aval)
        if value is not None and (keeps_derivative or not is_inexact(self.aval.dtype)
                                  or not self.builder.protects_derivatives):
            return value
        error = _CONVERSION_ERRORS.get(what, ConcretizationTypeError)
        if value is not None:
            raise error(
                f"{what} of a traced floating-point value {self.aval.str_short()}"
                f"{self.builder.dependence(self.ir_var)}: the Python or numpy value would drop its derivative. "
                "Keep it an array (compute with ember.numpy), or take it out of differentiation with "
                "ember.lax.stop_gradient and convert outside the transformed function.")
        origin = self.builder.dependence(self.ir_var)
        raise error(
            f"{what} of a traced value {self.aval.str_short()}{origin}: its value is not known while the "
            "function is staged out (under jit, vmap, stage_out, or a transformation inside them). Python "
            "control flow (if/while/and/or) and conversions (bool/int/float) need concrete values: use "
            "ember.numpy.where or ember.lax.select for data-dependent choices, ember.lax.cond, lax.switch, "
            "lax.while_loop, lax.fori_loop or lax.scan for data-dependent control flow, or mark the argument static "
            "(jit(..., static_argnums=...)). "
            "Outside jit and vmap, grad, vjp, jvp and the Jacobians evaluate such code with concrete values.")

    def __bool__(self) -> bool:
        return bool(self._concrete("bool()"))

    def __int__(self) -> int:
        return int(self._concrete("int()"))

    def __float__(self) -> float:
        return float(self._concrete("float()", keeps_derivative=False))

    def __index__(self) -> int:
        return operator.index(self._concrete("__index__()"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._concrete("numpy conversion (np.asarray)", keeps_derivative=False), dtype)

    def tolist(self) -> Any:
        return np.asarray(self._concrete("tolist()", keeps_derivative=False)).tolist()

    def item(self) -> Any:
        return np.asarray(self._concrete("item()", keeps_derivative=False)).item()


class RefTracer(RefMethods, Tracer):
    """A mutable array reference inside a function being staged out (an input of type Ref, or a ref the function
    made with ember.new_ref): indexing it stages reads and writes (ember._prims.refs)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>"


def _tracer(builder: "Builder", var: Var, value: Any = None) -> Tracer:
    return RefTracer(builder, var, value) if type(var.aval) is RefAval else Tracer(builder, var, value)


def _frozen_copy(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    copy = np.array(value, dtype=dtype, copy=True, order="C")
    copy.flags.writeable = False
    return copy


def _reached(eqns: Sequence[Eqn], reached: set[Var]) -> set[Var]:
    """reached and the variables of eqns computed from them; through a jitted call's body output by output (another
    equation with a reached input reaches all its outputs)."""
    for eqn in eqns:
        hit = [type(a) is Var and a in reached for a in eqn.inputs]
        if not any(hit):
            continue
        body = eqn.params.get("body") if eqn.prim.name == "pjit" else None
        if isinstance(body, IR) and len(body.in_vars) == len(hit) and len(body.outs) == len(eqn.outputs):
            inner = _reached(body.eqns, {v for v, h in zip(body.in_vars, hit) if h})
            reached.update(o for o, b in zip(eqn.outputs, body.outs) if type(b) is Var and b in inner)
        else:
            reached.update(eqn.outputs)
    return reached


class Builder:
    """Collects the equations of one function being staged out.

    A concrete builder also knows its inputs' values and computes every equation's value eagerly as it records
    it, so Python code may branch on values: the autodiff APIs use one outside jit to evaluate a function whose
    control flow depends on its arguments (the IR they get is specialised to those values and not cached)."""

    main = property(lambda self: self)  # (JAX's trace.main, compared for identity: this staging)

    def __init__(self, label: str = "", concrete: bool = False, protects_derivatives: bool = False) -> None:
        self.eqns: list[Eqn] = []
        self.const_vars: list[Var] = []
        self.consts: list[Any] = []
        self._captured: dict[int, Var] = {}
        self._alive: list[Any] = []
        self.active = True
        self.label = label
        self.concrete = concrete
        self.protects_derivatives = protects_derivatives  # the function an autodiff API differentiates
        self.input_names: dict[Var, str] = {}
        self._inputs: list[Var] = []
        self._dependents: tuple[int, set[Var]] | None = None  # (see depends_on_inputs)
        self.has_refs = False  # whether a value of this staging is a mutable array reference (checked by add_eqn)
        # how a concrete staging computes an equation's values (by default eagerly: EAGER.apply)
        self.evaluate: Callable[[Primitive, list[Any], dict[str, Any], int], list[Any]] | None = None
        # with check_tracer_leaks on: the tracers made, checked for survivors when the staging ends
        self.made: list[weakref.ref[Tracer]] | None = [] if config.read_canonical("check_tracer_leaks") else None

    def new_input(self, aval: ShapedArray, value: Any = None, name: str = "") -> Tracer:
        var = Var(aval)
        self._inputs.append(var)
        if type(aval) is RefAval:
            self.has_refs = True
        if name:
            self.input_names[var] = name
        if isinstance(value, Tracer):  # a concrete value given as a tracer of an enclosing concrete staging
            value = value.value
        tracer = _tracer(self, var, value)
        if self.made is not None:
            self.made.append(weakref.ref(tracer))
        return tracer

    def depends_on_inputs(self, var: Var) -> bool:
        """Whether var's value depends on this staging's inputs (not only on constants and captured values): found
        by one pass over the equations recorded so far, kept until more are recorded."""
        if self._dependents is None or self._dependents[0] != len(self.eqns):
            self._dependents = (len(self.eqns), _reached(self.eqns, set(self._inputs)))
        return var in self._dependents[1]

    def origin(self, var: Var) -> str:
        """Where a value of this staging was created, for error messages: the user line of the equation that
        made it, or the input it is."""
        if var in self.input_names:
            return f"the input {self.input_names[var]} of {self.label or 'a staged function'}"
        for eqn in self.eqns:
            if var in eqn.outputs:
                scope = f" in named scope {eqn.source.name_stack!r}" if eqn.source and eqn.source.scope else ""
                where = f" at {eqn.source}" if eqn.source is not None else ""
                return f"the {eqn.prim.name}{where}{scope}"
        return f"an input of {self.label or 'a staged function'}"

    def check_leaks(self) -> None:
        """With check_tracer_leaks: an UnexpectedTracerError if a tracer of this (finished) staging is still
        referenced (stored in a global, an object, a closure), naming where each was created."""
        made, self.made = self.made, None
        if not made or not any(ref() is not None for ref in made):
            return
        gc.collect()
        leaked = [t for t in (ref() for ref in made) if t is not None]
        if leaked:
            found = "; ".join(f"{t.aval.str_short()} made by {self.origin(t.ir_var)}" for t in leaked[:5])
            more = f" (and {len(leaked) - 5} more)" if len(leaked) > 5 else ""
            raise UnexpectedTracerError(
                f"ember.check_tracer_leaks: {len(leaked)} tracer(s) of {self.label or 'a staged function'} "
                f"outlived its staging: {found}{more}. Return values from the staged function instead of storing "
                "them in globals or objects.")

    def dependence(self, var: Var) -> str:
        """Where a traced value comes from, for error messages: the function and the inputs it depends on."""
        made_by = {v: eqn for eqn in self.eqns for v in eqn.outputs}
        seen, stack, inputs = set(), [var], []
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.input_names:
                inputs.append(self.input_names[v])
            elif v in made_by:
                stack.extend(a for a in made_by[v].inputs if isinstance(a, Var))
        where = f" in {self.label}" if self.label else ""
        if inputs:
            names = ", ".join(sorted(set(inputs)))
            return f"{where} (it depends on the value of {names})"
        return where

    def capture(self, value: Any, aval: ShapedArray) -> Var:
        """The constant variable of a value the function closed over (once per object). A numpy array is captured
        by value, as JAX does: the IR holds a read-only copy taken now, so mutating the array after staging
        changes neither a compiled program's result nor the constants it places on another device later."""
        var = self._captured.get(id(value))
        if var is None:
            var = self._captured[id(value)] = Var(aval)
            if type(aval) is RefAval:
                self.has_refs = True
            self.const_vars.append(var)
            self._alive.append(value)  # keeps the value alive while staging, so its id stays unique
            self.consts.append(_frozen_copy(value, aval.dtype) if isinstance(value, np.ndarray) else value)
        return var

    def lift(self, x: Any) -> Tracer:
        """x as a value of this staging (JAX's trace.stage_value, which lax.stage calls): a tracer of this staging
        as it is; a tracer of an enclosing one, an array or a number as the tracer of the constant it becomes (a
        number keeps its weak type)."""
        if isinstance(x, Tracer) and x.builder is self:
            return x
        if is_python_scalar(x) or isinstance(x, np.generic):
            dtype, weak = dtype_and_weak(x)
            value = np.asarray(x, dtype)
            var = self.capture(value, ShapedArray((), dtype, weak))
        else:
            value = x.value if isinstance(x, Tracer) else x
            var = self.to_atom(x)  # (a Var: a captured constant)
        tracer = _tracer(self, var, value if self.concrete else None)
        if self.made is not None:
            self.made.append(weakref.ref(tracer))
        return tracer

    def finish(self) -> None:
        """Staging is over: its tracers leaked from now on, and the captured objects are no longer needed."""
        self.active = False
        self._captured.clear()
        self._alive.clear()

    def to_atom(self, x: Any) -> Atom:
        if isinstance(x, Tracer):
            if x.builder is self:
                return x.ir_var
            return self.capture(check_live(x), x.aval)
        if is_python_scalar(x):
            return python_scalar_literal(x)
        if isinstance(x, Literal):
            return x
        if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
            dtype = canonicalize_dtype(x.dtype)
            return Literal(np.asarray(x, dtype)[()], ShapedArray((), dtype))
        if isinstance(x, np.ndarray):
            return self.capture(x, ShapedArray(x.shape, canonicalize_dtype(x.dtype)))
        if isinstance(x, ArrayMethods):  # an ember.Array (the runtime's subclass)
            return self.capture(x, x.aval)
        if isinstance(x, RefMethods):  # an ember.Ref the function closed over: read and written when it runs
            return self.capture(x, x.aval)
        raise TypeError(f"value of type {type(x).__name__} is not a valid ember array: {x!r}")

    def add_eqn(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        if TRACE_STATE.compile_time_eval and not any(isinstance(x, Tracer) for x in args):
            return EAGER.apply(prim, args, params)  # (ember.ensure_compile_time_eval: known values stay known)
        inputs = [self.to_atom(x) for x in args]
        in_avals = [a.aval for a in inputs]
        if prim.takes_refs:  # (new_ref, the other reference primitives, and those whose bodies may use refs)
            self.has_refs = True
        elif self.has_refs and RefAval in map(type, in_avals):
            raise ref_operand_error(prim.name, in_avals)
        vma = None
        if not prim.own_vma:  # (inside a shard_map body: operands varying over fewer axes are cast, see _core.vma)
            vma = join_vma(in_avals)
            if vma:
                inputs = cast_operands(self, inputs, vma)
                in_avals = [a.aval for a in inputs]
        out_avals = prim.out_avals(in_avals, params, vma)
        outputs = [Var(aval) for aval in out_avals]
        self.eqns.append(Eqn(prim, inputs, outputs, params, user_source()))
        values = self._values(prim, args, params, len(outputs)) if self.concrete else None
        if values is None:
            tracers = [_tracer(self, v) for v in outputs]
        else:
            tracers = [_tracer(self, v, value) for v, value in zip(outputs, values)]
        if self.made is not None:
            self.made.extend(map(weakref.ref, tracers))
        return tracers

    def _values(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any], count: int
                ) -> list[Any] | None:
        """The count outputs' values, computed eagerly (or by self.evaluate), when every input's value is known."""
        known = [x.value if isinstance(x, Tracer) else x for x in args]
        if any(v is None for v in known) or has_effects(prim, params):  # (effects run when the program runs)
            return None
        if self.evaluate is not None:
            return self.evaluate(prim, known, params, count)
        if any(isinstance(v, PerDevice) for v in known):  # (an eager shard_map body's values: not ours to compute)
            return None
        return EAGER.apply(prim, known, params)

    def build(self, inputs: Sequence[Tracer], outputs: Sequence[Any]) -> IR:
        outs = [self.to_atom(x) for x in outputs]
        return IR(self.const_vars, self.consts, [t.ir_var for t in inputs], self.eqns, outs)


def check_live(x: Tracer, where: str = "") -> Tracer:
    """x, when the staging that created it is in progress (on this thread); else an UnexpectedTracerError: the
    tracer leaked out of its function. Every place where a value enters ember checks this (binding a primitive,
    array/asarray/device_put, a compiled call's arguments)."""
    builder = x.builder
    if builder.active and builder in TRACE_STATE.stack:
        return x
    if builder.active:
        raise UnexpectedTracerError(
            f"{where + ': ' if where else ''}a tracer {x.aval.str_short()} of a function being staged out on another "
            f"thread ({builder.label or 'a staged function'}) was used on this one; pass values between threads as "
            "the staged function's results")
    raise UnexpectedTracerError(
        f"{where + ': ' if where else ''}a tracer {x.aval.str_short()} of a function whose staging has finished "
        f"({builder.label or 'a staged function'}) was used again: it leaked out of the function (stored in a "
        f"global or closure?). It was made by {builder.origin(x.ir_var)}. Return values from the staged function "
        "instead (ember.checking_leaks() reports such a tracer when its staging ends).")


def has_tracer_consts(ir: IR) -> bool:
    """Whether an IR captured tracers of an enclosing staging as constants: it belongs to that staging, and
    caches return it without keeping it."""
    return any(isinstance(c, Tracer) for c in ir.consts)


def is_tracing() -> bool:
    return bool(TRACE_STATE.stack)


def concrete_values(leaves: Sequence[Any]) -> list[Any] | None:
    """The values of leaves when the innermost staging is concrete and knows them all, else None: a transformation
    called inside a concrete staging evaluates concretely too."""
    stack = TRACE_STATE.stack
    if not stack or not stack[-1].concrete:
        return None
    values = [x.value if isinstance(x, Tracer) else x for x in leaves]
    return None if any(v is None or isinstance(v, PerDevice) for v in values) else values


@profiled("trace", lambda fn, *args, label="", **kwargs: f"trace {label or getattr(fn, '__name__', 'function')}")
def stage_flat(fn: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray], values: Sequence[Any] | None = None,
               label: str = "", names: Sequence[str] | None = None, differentiated: bool = False,
               evaluate: Callable[..., list[Any]] | None = None) -> IR:
    """Stage fn (taking and returning flat lists of arrays) out to an IR at the given abstract values. With
    values (the inputs' concrete values), the staging is concrete (see Builder), its equations computed by
    evaluate (default: eagerly). label and names (one per input) name the function and its inputs in error
    messages. differentiated marks the staging of a function an autodiff API differentiates: there, known
    floating-point values are not handed to Python (see Tracer._concrete)."""
    builder = Builder(label, concrete=values is not None, protects_derivatives=differentiated)
    builder.evaluate = evaluate
    state = TRACE_STATE
    scope, source = state.scope, state.source
    state.stack.append(builder)
    state.scope = ()  # the IR's named scopes are relative to it (see _TraceState)
    if source is not None and source.scope:
        state.source = source._replace(scope=())
    try:
        inputs = [builder.new_input(aval, None if values is None else values[i], names[i] if names else "")
                  for i, aval in enumerate(in_avals)]
        ir = builder.build(inputs, fn(*inputs))
    finally:
        state.stack.pop()
        state.scope, state.source = scope, source
        builder.finish()
    if builder.made is not None:
        del inputs
        builder.check_leaks()
    if config.read_canonical("enable_checks"):
        check_ir(ir)
    return ir


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of a tracer or a concrete value."""
    if isinstance(x, Tracer):
        return x.aval
    return aval_of_value(x)


@contextlib.contextmanager
def outside_stagings() -> Iterator[None]:
    """Within the block, no staging is in progress on this thread (jitted functions run, operations run eagerly):
    for computing a concrete staging's values (Builder.evaluate) with compiled programs."""
    state = TRACE_STATE
    stack, state.stack = state.stack, []
    try:
        yield
    finally:
        state.stack = stack
