"""Tracing and staging: how Python code becomes IR.

While a function is staged out, its array values are Tracers of the innermost active Builder; applying a primitive
to them records an equation. Outside any staging, a primitive applied to concrete values runs eagerly (see
Primitive.bind). Tracers of an enclosing Builder, and concrete arrays, that a staged function uses are captured as
constants of the inner IR: when that IR is inlined into the enclosing trace they are bound again."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core.dtypes import ShapedArray, aval_of_value, canonicalize_dtype, is_python_scalar
from ember._core.ir import IR, Atom, Eqn, Literal, Var, python_scalar_literal
from ember._core.primitive import TRACE_STATE, Primitive


# ---------------------------------------------------------------------------------------------------------------
# Errors
class ConcretizationTypeError(TypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnexpectedTracerError(RuntimeError):
    """A tracer was used after the staging that created it had finished."""


# ---------------------------------------------------------------------------------------------------------------
# Tracers
class ArrayMethods:
    """The base of Tracer and ember.Array: their operators and array methods (`x + y`, `x.sum()`, `x[1:]`) are
    numpy's, so they are installed here by the numpy layer through install_array_methods (the second and last
    place where a lower layer is completed by a higher one, after the eager slot of Primitive.bind)."""
    __slots__ = ()
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]  (arrays compare elementwise, so they are not hashable)


def install_array_methods(methods: dict[str, Any]) -> None:
    """Install operator overloads and methods on every array type (called once, by ember._numpy.methods)."""
    for name, method in methods.items():
        setattr(ArrayMethods, name, method)


class Tracer(ArrayMethods):
    """A value inside a function being staged out: only its shape and dtype are known."""
    __slots__ = ("builder", "ir_var", "aval")

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


def is_tracing() -> bool:
    return bool(TRACE_STATE.stack)


def stage_flat(fn: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray]) -> IR:
    """Stage fn (taking and returning flat lists of arrays) out to an IR at the given abstract values."""
    builder = Builder()
    TRACE_STATE.stack.append(builder)
    try:
        inputs = [builder.new_input(aval) for aval in in_avals]
        outputs = fn(*inputs)
        return builder.build(inputs, outputs)
    finally:
        TRACE_STATE.stack.pop()
        builder.active = False


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of a tracer or a concrete value."""
    if isinstance(x, Tracer):
        return x.aval
    return aval_of_value(x)
