"""jax.extend.core on ember: primitives defined the JAX way, and ember's IR under JAX's names for jaxprs.

ember's IR is its jaxpr: `make_jaxpr(f)(x)` is an IR, which is a ClosedJaxpr (`isinstance(ir, ClosedJaxpr)`), its
`.jaxpr` the open term (a Jaxpr: constvars, invars, outvars, eqns), its `.consts` the constants' values; an
equation (JaxprEqn) has JAX's field names (invars, outvars, primitive, params). `ClosedJaxpr(jaxpr, consts)`
closes a Jaxpr into an IR, which ember can evaluate, transform, print and compile."""
from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember._core import IR, ConcretizationTypeError, Eqn, Literal, ShapedArray, Tracer, Var, check_ir, eval_ir
from ember._core import dtypes as _dt
from ember._core.dtypes import AbstractToken as AbstractToken
from ember._core.ir import IRTypeError, Jaxpr, sub_irs
from ember._core.primitive import PRIMITIVES as _PRIMITIVES, TRACE_STATE
from ember._core.shape_poly import InconclusiveDimensionOperation as InconclusiveDimensionOperation
from ember._core.pytree import tree_leaves
from ember._runtime.array import Array as _Array
from ember._runtime.array import Token as Token
from ember.extend._protocol import CallPrimitive as CallPrimitive, Primitive as Primitive, call_impl as call_impl
from ember.extend.linear_util import DebugInfo as DebugInfo

JaxprEqn = Eqn
JaxprTypeError = IRTypeError
Effects = frozenset
no_effects: frozenset = frozenset()
array_types: frozenset = frozenset({np.ndarray, _Array, *(type(np.zeros((), d)[()]) for d in _dt.SUPPORTED_DTYPES)})


class Effect:
    """The base class of an effect type (ember has no effect types: a primitive whose abstract eval reports effects
    is effectful, see Primitive.def_effectful_abstract_eval)."""


class DropVar(Var):
    """An equation's output that nothing reads (JAX's DropVar, printed `_`): a Var of its type, which DCE removes
    with its equation when no other output of it is used."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "_"


class _ClosedJaxprType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, IR)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, IR)

    def __call__(cls, jaxpr: Jaxpr, consts: Sequence[Any]) -> IR:  # type: ignore[override]
        if isinstance(jaxpr, IR):
            jaxpr = jaxpr.jaxpr
        return jaxpr.closed(list(consts))


class ClosedJaxpr(metaclass=_ClosedJaxprType):
    """A jaxpr with the values of its constants: ember's IR (`ClosedJaxpr(jaxpr, consts)` makes one; every IR is
    an instance)."""


def jaxpr_as_fun(closed_jaxpr: IR) -> Callable[..., list[Any]]:
    """The function an IR computes: its outputs (a list) from its inputs."""
    return lambda *args: eval_ir(closed_jaxpr, args)


def eval_jaxpr(jaxpr: Jaxpr | IR, consts: Sequence[Any], *args: Any, propagate_source_info: bool = True
               ) -> list[Any]:
    """The outputs of jaxpr (its constvars bound to consts) on args, in the current context (eagerly, or staged
    into the function being staged)."""
    if isinstance(jaxpr, IR):
        jaxpr = jaxpr.jaxpr
    return eval_ir(jaxpr.closed(list(consts)), args)


def check_jaxpr(jaxpr: Jaxpr | IR) -> None:
    """Type-check a jaxpr (ember's check_ir: an IRTypeError, JaxprTypeError, naming what is wrong)."""
    check_ir(jaxpr if isinstance(jaxpr, IR) else jaxpr.closed([None] * len(jaxpr.constvars)))


def new_jaxpr_eqn(invars: Sequence[Any], outvars: Sequence[Var], primitive: Any, params: dict[str, Any],
                  effects: Any = no_effects, source_info: Any = None, ctx: Any = None) -> Eqn:
    return Eqn(primitive, invars, outvars, dict(params), source_info)


def gensym(suffix: str = "") -> Callable[[ShapedArray], Var]:
    """A maker of fresh variables of a given type."""
    return Var


def jaxprs_in_params(params: dict[str, Any]) -> list[Jaxpr]:
    """The jaxprs an equation's params carry (those of the IRs among them, and open ones)."""
    found = [ir.jaxpr for ir in sub_irs(params)]
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, Jaxpr):
                found.append(item)
    return found


def subjaxprs(jaxpr: Jaxpr | IR) -> Iterator[Jaxpr]:
    """The jaxprs the equations of jaxpr carry (not recursively)."""
    for eqn in jaxpr.eqns:
        yield from jaxprs_in_params(eqn.params)


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """The type of one member of a batch of type aval batched at axis (None: aval itself)."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped_aval: axis {axis} of {aval} is not of size {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray, explicit_mesh_axis: Any = None) -> ShapedArray:
    """The type of a batch of size members of type aval, batched at axis (None: aval itself)."""
    if axis is None:
        return aval
    axis = axis + aval.ndim + 1 if axis < 0 else axis
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def primal_dtype_to_tangent_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    return dtype if _dt.is_inexact(dtype) else _dt.float0


def valid_jaxtype(x: Any) -> bool:
    """Whether x is a value ember computes on (an array or a number)."""
    try:
        _dt.aval_of_value(x)
    except TypeError:
        return False
    return True


def concrete_or_error(force: Callable[[Any], Any] | None, val: Any, context: str = "") -> Any:
    """force(val) (val itself when force is None) for a known value; a ConcretizationTypeError for a traced one."""
    if isinstance(val, Tracer):
        if val.value is None:
            raise ConcretizationTypeError(f"{context or 'concrete_or_error'}: a concrete value is required, got the "
                                          f"traced value {val.aval.str_short()}")
        val = val.value
    return val if force is None else force(val)


class OpaqueTraceState:
    """What get_opaque_trace_state returns: equal to another exactly when both were taken in the same staging
    (or both outside any)."""
    __slots__ = ("_builder",)

    def __init__(self, builder: Any):
        self._builder = builder

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueTraceState) and other._builder is self._builder

    def __hash__(self) -> int:
        return id(self._builder)


def get_opaque_trace_state(convention: Any = None) -> OpaqueTraceState:
    """The current staging (ember's trace), as an object compared for identity (flax's check that a module is used
    where it was made)."""
    stack = TRACE_STATE.stack
    return OpaqueTraceState(stack[-1] if stack else None)


class _EvalTrace:
    """The trace outside any staging (JAX's EvalTrace), as find_top_trace returns it there."""
    main = None

    def __repr__(self) -> str:
        return "EvalTrace"


_EVAL_TRACE = _EvalTrace()


def find_top_trace(xs: Any) -> Any:
    """The innermost staging (ember's trace) among the tracers in the pytree xs, else the innermost staging now,
    else the eval trace (as jax.extend.core.find_top_trace). A tracer's `_trace` is its staging, and a staging's
    `main` is itself, so `x._trace.main is find_top_trace(xs).main` says whether x belongs to it (equinox's
    filter_jvp asks so)."""
    stack = TRACE_STATE.stack
    found = {id(x.builder): x.builder for x in tree_leaves(xs) if isinstance(x, Tracer)}
    for builder in reversed(stack):
        if id(builder) in found:
            return builder
    if found:
        return next(iter(found.values()))
    return stack[-1] if stack else _EVAL_TRACE


def _primitives_module() -> types.ModuleType:
    """jax.extend.core.primitives: every primitive ember registers, as `{name}_p` (ember's primitives, whose params
    are ember's), read from the registry when asked (primitives registered later are there too); also importable
    as ember.extend.core.primitives."""
    module = types.ModuleType(__name__ + ".primitives", "ember's registered primitives by JAX's names ({name}_p).")

    def lookup(name: str) -> Any:
        if name.endswith("_p") and name[:-2] in _PRIMITIVES:
            return _PRIMITIVES[name[:-2]]
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r} (ember registers no primitive "
                             f"{name[:-2]!r})")

    module.__getattr__ = lookup  # type: ignore[method-assign]
    module.__dir__ = lambda: sorted(f"{name}_p" for name in _PRIMITIVES)  # type: ignore[method-assign]
    sys.modules[module.__name__] = module
    return module


primitives = _primitives_module()

__all__ = ["AbstractToken", "CallPrimitive", "ClosedJaxpr", "DebugInfo", "DropVar", "Effect", "Effects",
           "InconclusiveDimensionOperation", "Jaxpr", "JaxprEqn", "JaxprTypeError", "Literal", "Primitive", "Token",
           "Var", "array_types", "call_impl", "check_jaxpr", "concrete_or_error", "find_top_trace", "gensym",
           "get_opaque_trace_state", "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval", "new_jaxpr_eqn", "no_effects",
           "primal_dtype_to_tangent_dtype", "primitives", "subjaxprs", "unmapped_aval", "valid_jaxtype"]
