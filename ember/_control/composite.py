"""lax.composite: an operation whose meaning is its decomposition, lowered to `stablehlo.composite` (JAX's
composite_p), so that a compiler that knows its name, version and attributes may emit its own code for it, and any
other compiler runs the decomposition (XLA's CPU plugin inlines it).

composite(*operands; name, attributes, version, jaxpr) carries the decomposition staged at the operands' types (its
inputs: the arrays it closed over, then the operands), lowered as a private function of the module that the
composite op names. As in JAX: it has no derivative (JAX's ValueError, pointing at custom_jvp) and no batching rule;
eagerly it runs its decomposition; its name must be a namespaced op name (checked when it is lowered)."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

import numpy as np

from ember._control.common import close_over, describe, same_types
from ember._core import (NAN_CHECK, IR, Literal, Primitive, ShapedArray, Tracer, UnexpectedTracerError, aval_of,
                         eval_ir, is_python_scalar, scalar_literal)
from ember._core import dtypes as dt
from ember._core.pytree import tree_flatten, tree_leaves
from ember._hlo import LoweringContext
from ember._hlo.emitter import dense_text, quoted_text, scalar_text
from ember._hlo.lower import private_function
from ember._prims.shape import convert_element_type_p

COMPOSITE_NO_JVP = ("JVP rule for composite not implemented. You can use `jax.custom_jvp` to add support. See "
                    "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")
COMPOSITE_NO_TRANSPOSE = ("Transpose rule for composite not implemented. You can use`jax.custom_jvp` or "
                          "`jax.custom_vjp` to add support. See "
                          "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")
COMPOSITE_NOT_BATCHABLE = "Batching rule for 'composite' not implemented"
# (MLIR's rule for an op name, which JAX's lowering enforces)
_OP_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*([.][a-zA-Z0-9_$]+)+$")


class CompositeDerivativeError(ValueError, NotImplementedError):
    """A composite was differentiated: JAX's ValueError (a NotImplementedError too, as ember's marks raise)."""


class ArrayAttribute:
    """A numpy array given as a composite's attribute, hashable (by its dtype, shape and bytes) so that it can be a
    param of the equation (JAX's HashableArray)."""
    __slots__ = ("value", "_key")

    def __init__(self, value: np.ndarray):
        self.value = value
        self._key = (value.dtype.str, value.shape, value.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayAttribute) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return repr(self.value)


composite_p = Primitive("composite", multiple_results=True, own_vma=True, checks=NAN_CHECK)


@composite_p.def_rule("abstract_eval")
def _composite_abstract_eval(*avals: ShapedArray, name: str, attributes: tuple[tuple[str, Any], ...],
                             version: int, jaxpr: IR) -> list[ShapedArray]:
    if not same_types(jaxpr.in_avals, avals):
        raise TypeError(f"composite {name}: the decomposition takes {describe(jaxpr.in_avals)}, but the operands "
                        f"are {describe(avals)}")
    return list(jaxpr.out_avals)


def _composite_impl(*args: Any, jaxpr: IR, **params: Any) -> list[Any]:
    """Eagerly, the decomposition (as JAX's impl); an operand it returns as it is (a Python scalar's literal)
    comes back as an array."""
    outs = eval_ir(jaxpr, list(args))
    return [convert_element_type_p.bind(o, new_dtype=o.aval.dtype, weak_type=o.aval.weak_type)
            if isinstance(o, Literal) else o for o in outs]


composite_p.impl = _composite_impl


def _attribute_text(value: Any, key: str) -> str:
    """An attribute value as MLIR writes it (as JAX's ir_attribute: i64 ints, f64 floats, strings, booleans, dense
    arrays, arrays of those)."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return f"{int(value)} : i64"
    if isinstance(value, float | np.floating):
        return f"{scalar_text(float(value), dt.float64)} : f64"
    if isinstance(value, str):
        return quoted_text(value)
    if isinstance(value, ArrayAttribute):
        return dense_text(value.value, ShapedArray(value.value.shape, value.value.dtype))
    if isinstance(value, tuple):
        return "[" + ", ".join(_attribute_text(v, key) for v in value) + "]"
    raise TypeError(f"composite: the attribute {key}={value!r} ({type(value).__name__}) is not one a composite "
                    "takes (ints, floats, strings, booleans, numpy arrays, and tuples or lists of those)")


@composite_p.def_rule("lowering")
def _composite_lowering(ctx: LoweringContext, *args: str, name: str, attributes: tuple[tuple[str, Any], ...],
                        version: int, jaxpr: IR) -> list[str]:
    if not _OP_NAME.match(name):
        raise ValueError(f"composite: name must be a valid namespaced op name, i.e. it must match the following "
                         f"regular expression: {_OP_NAME.pattern} e.g. \"my_namespace.my_op\", got {name!r}")
    attrs = {"name": quoted_text(name)}
    if attributes:
        attrs["composite_attributes"] = "{" + ", ".join(f"{k} = {_attribute_text(v, k)}" for k, v in attributes) + "}"
    attrs["decomposition"] = f"@{private_function(ctx, jaxpr, name)}"
    if version:
        attrs["version"] = f"{int(version)} : i32"
    return ctx.op("stablehlo.composite", list(args), list(ctx.avals_out), attrs)


composite_p.mark("jvp", COMPOSITE_NO_JVP, CompositeDerivativeError)
composite_p.mark("vjp", COMPOSITE_NO_TRANSPOSE, CompositeDerivativeError)
composite_p.mark("batching", COMPOSITE_NOT_BATCHABLE)


def _hashable(value: Any, key: str) -> Any:
    """An attribute value as an equation param holds it (lists as tuples, arrays as ArrayAttributes)."""
    if isinstance(value, np.ndarray):
        return ArrayAttribute(value)
    if isinstance(value, list | tuple):
        return tuple(_hashable(v, key) for v in value)
    _attribute_text(value, key)  # (refused now, not when lowered)
    return value


def composite(decomposition: Callable[..., Any], name: str, version: int = 0) -> Callable[..., Any]:
    """A function computing decomposition(*args, **kwargs) that lowers to one `stablehlo.composite` op named name
    (like jax.lax.composite): positional arguments are its operands (pytrees of arrays), keyword arguments its
    attributes (static: ints, floats, strings, booleans, numpy arrays, tuples; those given None are left out). A
    compiler that knows the op may replace it; others run the decomposition. Not differentiable and not batched
    (as JAX's; use custom_jvp / custom_vjp around it)."""
    @functools.wraps(decomposition)
    def _decorator(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(leaf, Tracer) for v in kwargs.values() for leaf in tree_leaves(v)):
            raise UnexpectedTracerError(
                "Found a JAX Tracer as an attribute in the decomposition for the composite op "
                f"'{name}'. This means that the decomposition function closes over a value that is involved in a "
                "JAX transformation. Any values that aren't explicitly known at compile time must be explicitly "
                "passed as arguments to the composite.\n\nNote: If you are passing jax arrays as attributes, use "
                "numpy arrays instead.")
        leaves, in_tree = tree_flatten(args)
        leaves = [scalar_literal(x, *dt.dtype_and_weak(x)) if is_python_scalar(x) else x for x in leaves]
        avals = [aval_of(x) for x in leaves]
        closed = close_over(functools.partial(decomposition, **kwargs), in_tree, avals, f"composite {name}")
        if any(isinstance(c, Tracer) for c in closed.consts):
            raise UnexpectedTracerError(
                f"Found a JAX Tracer as a constant in the decomposition for the composite op '{name}'. This means "
                "that the decomposition function closes over a value that is involved in a JAX transformation. Any "
                "values that aren't explicitly known at compile time must be explicitly passed as arguments to the "
                "composite.")
        attributes = tuple((k, _hashable(v, k)) for k, v in kwargs.items() if v is not None)
        outs = composite_p.bind(*closed.consts, *leaves, name=name, attributes=attributes, version=int(version),
                                jaxpr=closed.ir)
        return closed.out_tree.unflatten(outs)
    return _decorator


__all__ = ["composite"]
