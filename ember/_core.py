"""Primitives, tracing and staging: how Python code becomes IR.

While a function is staged out, its array values are Tracers of the innermost active Builder; applying a primitive
to them records an equation. Outside any staging, a primitive applied to concrete values runs eagerly (the runtime
layer installs that handler). Tracers of an enclosing Builder, and concrete arrays, that a staged function uses are
captured as constants of the inner IR: when that IR is inlined into the enclosing trace they are bound again."""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from ember._dtypes import DEFAULT_INT, ShapedArray, aval_of_value, canonicalize_dtype, dtype_and_weak
from ember._ir import IR, Atom, Eqn, Literal, Var


# ---------------------------------------------------------------------------------------------------------------
# Primitives
class Primitive:
    """An operation of the IR. Its rules are attached beside its definition:

    abstract_eval(*avals, **params) -> aval (or list of avals when multiple_results)
    lowering(ctx, operands, in_avals, out_avals, **params) -> list of MLIR SSA values
    vjp(cts, ins, outs, needs, **params) -> one cotangent (or None for zero) per input
    A primitive whose outputs carry no derivative (comparisons, iota, ...) sets nondifferentiable = True."""

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.abstract_eval_rule: Callable[..., Any] | None = None
        self.lowering: Callable[..., Any] | None = None
        self.vjp: Callable[..., Any] | None = None
        self.nondifferentiable = False
        PRIMITIVES[name] = self

    def __repr__(self) -> str:
        return self.name

    def bind(self, *args: Any, **params: Any) -> Any:
        stack = _STATE.stack
        if stack:
            outs = stack[-1].add_eqn(self, args, params)
        else:
            outs = _eager_handler(self, args, params)
        return outs if self.multiple_results else outs[0]

    def abstract_eval(self, *avals: ShapedArray, **params: Any) -> Any:
        if self.abstract_eval_rule is None:
            raise NotImplementedError(f"primitive {self.name} has no abstract evaluation rule")
        return self.abstract_eval_rule(*avals, **params)

    def out_avals(self, avals: Sequence[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
        out = self.abstract_eval(*avals, **params)
        return list(out) if self.multiple_results else [out]

    # Decorators to register rules beside the definition.
    def def_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        self.abstract_eval_rule = rule
        return rule

    def def_lowering(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        self.lowering = rule
        return rule

    def def_vjp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        self.vjp = rule
        return rule


PRIMITIVES: dict[str, Primitive] = {}


def _no_eager_handler(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    raise RuntimeError("ember runtime is not initialised")


_eager_handler: Callable[[Primitive, Sequence[Any], dict[str, Any]], list[Any]] = _no_eager_handler


def set_eager_handler(handler: Callable[[Primitive, Sequence[Any], dict[str, Any]], list[Any]]) -> None:
    global _eager_handler
    _eager_handler = handler


# ---------------------------------------------------------------------------------------------------------------
# Errors
class ConcretizationTypeError(TypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnexpectedTracerError(RuntimeError):
    """A tracer was used after the staging that created it had finished."""


# ---------------------------------------------------------------------------------------------------------------
# Tracers
class Tracer:
    """A value inside a function being staged out: only its shape and dtype are known."""
    __slots__ = ("builder", "ir_var", "aval")
    __array_priority__ = 1000

    def __init__(self, builder: "Builder", var: Var):
        self.builder = builder
        self.ir_var = var
        self.aval = var.aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>"

    def _concretization_error(self, what: str) -> ConcretizationTypeError:
        return ConcretizationTypeError(
            f"{what} of a traced value {self.aval.str_short()}: its value is not known while the function is "
            "staged out (under jit, grad, stage_out, ...). Python control flow (if/while/and/or) and "
            "conversions (bool/int/float) need concrete values; use ember.numpy.where or ember.lax.select for "
            "data-dependent choices, or mark the argument static (jit(..., static_argnums=...)).")

    def __bool__(self) -> bool:
        raise self._concretization_error("bool()")

    def __int__(self) -> int:
        raise self._concretization_error("int()")

    def __float__(self) -> float:
        raise self._concretization_error("float()")

    def __index__(self) -> int:
        raise self._concretization_error("__index__()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._concretization_error("numpy conversion (np.asarray)")

    def tolist(self) -> Any:
        raise self._concretization_error("tolist()")

    def item(self) -> Any:
        raise self._concretization_error("item()")


def install_array_methods(cls: type, methods: dict[str, Any]) -> None:
    """Operator overloads and array methods shared by Tracer and Array (defined by ember.numpy)."""
    for name, method in methods.items():
        setattr(cls, name, method)


# ---------------------------------------------------------------------------------------------------------------
# Staging
_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def python_scalar_literal(x: bool | int | float) -> Literal:
    dtype, weak = dtype_and_weak(x)
    if dtype == DEFAULT_INT and not (_INT32_MIN <= x <= _INT32_MAX):
        raise OverflowError(f"Python int {x} is too large to convert to {DEFAULT_INT.name}")
    return Literal(x, ShapedArray((), dtype, weak))


def is_python_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float)


class Builder:
    """Collects the equations of one function being staged out."""

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.const_vars: list[Var] = []
        self.consts: list[Any] = []
        self._captured: dict[int, Var] = {}
        self.active = True

    def new_input(self, aval: ShapedArray) -> Tracer:
        return Tracer(self, Var(aval))

    def capture(self, value: Any, aval: ShapedArray) -> Var:
        var = self._captured.get(id(value))
        if var is None:
            var = self._captured[id(value)] = Var(aval)
            self.const_vars.append(var)
            self.consts.append(value)  # also keeps the value alive, so its id stays unique
        return var

    def to_atom(self, x: Any) -> Atom:
        if isinstance(x, Tracer):
            if x.builder is self:
                return x.ir_var
            if not x.builder.active:
                raise UnexpectedTracerError(
                    f"a tracer {x.aval.str_short()} of a function whose staging has finished was used again: "
                    "it leaked out of the function (stored in a global or closure?). Return values from the "
                    "staged function instead.")
            return self.capture(x, x.aval)
        if type(x) in (bool, int, float):
            return python_scalar_literal(x)
        if isinstance(x, Literal):
            return x
        if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
            dtype = canonicalize_dtype(x.dtype)
            return Literal(np.asarray(x, dtype)[()], ShapedArray((), dtype))
        if isinstance(x, np.ndarray):
            return self.capture(x, ShapedArray(x.shape, canonicalize_dtype(x.dtype)))
        if getattr(x, "_is_ember_array", False):
            return self.capture(x, x.aval)
        raise TypeError(f"value of type {type(x).__name__} is not a valid ember array: {x!r}")

    def add_eqn(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Tracer]:
        inputs = [self.to_atom(x) for x in args]
        out_avals = prim.out_avals([a.aval for a in inputs], params)
        outputs = [Var(aval) for aval in out_avals]
        self.eqns.append(Eqn(prim, inputs, outputs, params))
        return [Tracer(self, v) for v in outputs]

    def build(self, inputs: Sequence[Tracer], outputs: Sequence[Any]) -> IR:
        outs = [self.to_atom(x) for x in outputs]
        return IR(self.const_vars, self.consts, [t.ir_var for t in inputs], self.eqns, outs)


class _TraceState(threading.local):
    """The stack of active Builders, per thread (innermost last)."""

    def __init__(self) -> None:
        self.stack: list[Builder] = []


_STATE = _TraceState()


def is_tracing() -> bool:
    return bool(_STATE.stack)


def stage_flat(fn: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray]) -> IR:
    """Stage fn (taking and returning flat lists of arrays) out to an IR at the given abstract values."""
    builder = Builder()
    _STATE.stack.append(builder)
    try:
        inputs = [builder.new_input(aval) for aval in in_avals]
        outputs = fn(*inputs)
        return builder.build(inputs, outputs)
    finally:
        _STATE.stack.pop()
        builder.active = False


class Env(dict):
    """The values of an IR's variables during evaluation; literals read as themselves."""

    def read(self, atom: Atom) -> Any:
        return atom if isinstance(atom, Literal) else self[atom]


def eval_ir_env(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> Env:
    """Evaluate an IR by applying its primitives to args, returning the value of every variable: eagerly outside
    staging (the IR evaluator), or recording them into the enclosing trace (inlining)."""
    env = Env(zip(ir.const_vars, ir.consts if consts is None else consts))
    env.update(zip(ir.in_vars, args))
    for eqn in ir.eqns:
        outs = eqn.prim.bind(*[env.read(a) for a in eqn.inputs], **eqn.params)
        env.update(zip(eqn.outputs, outs if eqn.prim.multiple_results else [outs]))
    return env


def eval_ir(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> list[Any]:
    """The outputs of an IR evaluated on args (see eval_ir_env)."""
    env = eval_ir_env(ir, args, consts)
    return [env.read(atom) for atom in ir.outs]


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of a tracer or a concrete value."""
    if isinstance(x, Tracer):
        return x.aval
    return aval_of_value(x)
