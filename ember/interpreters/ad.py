"""jax.interpreters.ad on ember: the JVP and transpose rules of primitives defined with ember.extend.core.Primitive
(primitive_jvps, primitive_transposes, and the rule makers), and JAX's symbolic zeros (Zero) and undefined primals
(UndefinedPrimal) that those rules receive. ember derives each primitive's VJP from them, as JAX does
(ember/extend/_protocol.py).

jvp and linearize are JAX's internal entry points of forward mode (jax.jvp and jax.linearize call them), on ember's
IR transformations: the function is staged (concretely where its arguments are known, so Python control flow on
them runs), its forward-mode IR built (ember's jvp_ir), and, for linearize, split into the primal computation, run
now, and the linear tangent computation, returned as a jaxpr of the tangents over the residuals it saves. Their
arguments and results are flat trees (JAX's FlatTree: leaves and a structure; `.unflatten()` gives the pytree);
a plain tuple of arguments is taken too. add_jaxvals_p is the primitive add_jaxvals binds: ember adds tangents
with its add primitive."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from ember._core import IR, ShapedArray, Var, aval_of, concrete_values, eval_ir, stage_flat
from ember._core import dtypes as _dt
from ember._core.ir import Jaxpr
from ember._core.primitive import TRACE_STATE
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._core.trace import Tracer as _Tracer
from ember._prims.elementwise import add_p as add_jaxvals_p
from ember._transforms.jvp import jvp_ir
from ember._transforms.passes import dce_outputs, depends_on, split_known
from ember.extend._protocol import (UndefinedPrimal, Zero, add_jaxvals, add_tangents, defbilinear, defjvp, defjvp2,
                                    deflinear, deflinear2, get_primitive_transpose, instantiate_zeros,
                                    is_undefined_primal, primitive_jvps, primitive_transposes, zeros_like_aval)
from ember.extend.linear_util import WrappedFun
from ember.extend.source_info_util import transform_name_stack
from ember.interpreters.partial_eval import dce_jaxpr_consts


class _JVPTracerType(type):
    def __instancecheck__(cls, x: object) -> bool:
        return isinstance(x, _Tracer) and x.builder.depends_on_inputs(x.ir_var)


class JVPTracer(metaclass=_JVPTracerType):
    """For isinstance (JAX's JVPTracer: a value carrying a tangent): a tracer whose value depends on its staging's
    inputs (one computed from constants alone is a plain value in JAX's JVP trace). Its `_trace` is its staging,
    whose `main` is the staging itself (ember.extend.core.find_top_trace)."""


class FlatTree:
    """A pytree as its leaves (`vals`) and structure (`tree`), as JAX's internal FlatTree that ad.jvp and
    ad.linearize take and return: iterate it for the leaves, `unflatten()` for the pytree."""
    __slots__ = ("vals", "tree")

    def __init__(self, vals: Sequence[Any], tree: PyTreeDef):
        self.vals, self.tree = tuple(vals), tree

    @staticmethod
    def flatten(tree: Any) -> "FlatTree":
        leaves, treedef = tree_flatten(tree)
        return FlatTree(leaves, treedef)

    def unflatten(self) -> Any:
        return self.tree.unflatten(list(self.vals))

    def map(self, f: Callable[[Any], Any]) -> "FlatTree":
        return FlatTree([f(x) for x in self.vals], self.tree)

    def map2(self, f: Callable[[Any, Any], Any], other: Sequence[Any]) -> "FlatTree":
        other = list(other)
        if len(other) != len(self.vals):
            raise ValueError(f"FlatTree.map2: {len(self.vals)} leaves against {len(other)}")
        return FlatTree([f(x, y) for x, y in zip(self.vals, other)], self.tree)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.vals)

    def __len__(self) -> int:
        return len(self.vals)

    def __repr__(self) -> str:
        return f"FlatTree({self.vals})"


def _as_flat(name: str, what: str, x: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """(the leaves, a function from leaves to the arguments tuple) of a flat tree (ember's or JAX's: anything
    with `.tree` and an unflatten) or of a tuple of arguments."""
    if hasattr(x, "unflatten") and hasattr(x, "tree"):
        return list(x), x.tree.unflatten
    if isinstance(x, (tuple, list)):
        leaves, tree = tree_flatten(tuple(x))
        return leaves, tree.unflatten
    raise TypeError(f"{name}: {what} must be a FlatTree (FlatTree.flatten(args)) or a tuple of arguments, got "
                    f"{type(x).__name__}")


def _staged(name: str, fun: Any, leaves: list[Any], unflatten: Callable[[list[Any]], Any], has_aux: bool
            ) -> tuple[IR, PyTreeDef, PyTreeDef, int]:
    """(fun's IR on the leaves: -> (output leaves..., aux leaves...), the outputs' structure, the aux's, the
    number of output leaves). Staged concretely where the leaves are known."""
    call = fun.call_wrapped if isinstance(fun, WrappedFun) else fun
    trees: dict[str, PyTreeDef] = {}

    def flat(*xs: Any) -> list[Any]:
        out = call(*unflatten(list(xs)))
        aux: Any = ()
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError(f"{name}: expected a function with aux output to return a two-element tuple, got "
                                f"{type(out).__name__}: {out!r}")
            out, aux = out
        out_leaves, trees["out"] = tree_flatten(out)
        aux_leaves, trees["aux"] = tree_flatten(aux)
        trees["n"] = len(out_leaves)  # type: ignore[assignment]
        return [*out_leaves, *aux_leaves]

    values = concrete_values(leaves) if TRACE_STATE.stack else leaves
    ir = stage_flat(flat, [aval_of(x) for x in leaves], values, label=name)
    return ir, trees["out"], trees["aux"], trees["n"]  # type: ignore[return-value]


def _differentiated(ir: IR, tangents: Sequence[Any] | None = None) -> list[bool]:
    """Which inputs get tangents: the floating-point ones (whose given tangent, if any, is not a symbolic zero)."""
    return [_dt.is_inexact(a.dtype) and (tangents is None or type(tangents[i]) is not Zero)
            for i, a in enumerate(ir.in_avals)]


def _zero(aval: ShapedArray, instantiate: bool) -> Any:
    """The zero tangent of a value of type aval: symbolic, or an array of zeros (float0 for a non-float value)."""
    zero = Zero(aval.to_tangent_aval())
    return zeros_like_aval(zero.aval) if instantiate else zero


def _name_stack(transform_stack: bool) -> Any:
    return transform_name_stack("jvp") if transform_stack else contextlib.nullcontext()


def jvp(fun: Callable[..., Any] | WrappedFun, primals: Any, tangents: Any, has_aux: bool = False,
        instantiate: bool | Sequence[bool] = True, transform_stack: bool = True) -> tuple[Any, ...]:
    """(the outputs, their tangents, [the aux output]) of fun at primals along tangents, as JAX's ad.jvp: primals
    and tangents flat trees of fun's arguments (a symbolic Zero tangent allowed), the outputs and tangents flat
    trees of its outputs. A tangent not instantiated (instantiate False for it) is a symbolic Zero where the output
    does not depend on the tangents."""
    p_leaves, unflatten = _as_flat("ad.jvp", "primals", primals)
    t_leaves, _ = _as_flat("ad.jvp", "tangents", tangents)
    if len(t_leaves) != len(p_leaves):
        raise ValueError(f"ad.jvp: {len(p_leaves)} primals but {len(t_leaves)} tangents")
    with _name_stack(transform_stack):
        ir, out_tree, aux_tree, n_out = _staged("ad.jvp", fun, p_leaves, unflatten, has_aux)
        with_tangent = _differentiated(ir, t_leaves)
        forward = jvp_ir(ir, with_tangent)
        given = [t for t, w in zip(t_leaves, with_tangent) if w]
        results = eval_ir(forward, [*p_leaves, *given])
    n = len(ir.outs)
    outs, touts = results[:n_out], results[n:n + n_out]
    flags = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    reached = depends_on(forward, [False] * len(p_leaves) + [True] * len(given))[n:n + n_out]
    # (an output that is not floating-point has a float0 tangent, as JAX's; a tangent not reached by the given
    # ones is a symbolic zero unless instantiated)
    touts = [t if r and _dt.is_inexact(aval_of(o).dtype) else _zero(aval_of(o), keep)
             for t, o, keep, r in zip(touts, outs, flags, reached)]
    aux = (aux_tree.unflatten(list(results[n_out:n])),) if has_aux else ()
    return (FlatTree(outs, out_tree), FlatTree(touts, out_tree), *aux)


def linearize(traceable: Callable[..., Any] | WrappedFun, primals_ft: Any, has_aux: bool = False,
              is_vjp: bool = False) -> tuple[Any, ...]:
    """(the outputs (a flat tree), which of their tangents are zero, the jaxpr of the nonzero tangents, its
    constants, [the aux output]), as JAX's ad.linearize: the jaxpr takes one tangent per primal leaf (float0 for an
    integer one) and its constvars are the residuals of the primal computation, run now, that the tangents need
    (`eval_jaxpr(jaxpr, consts, *tangents)`). is_vjp (JAX's hint that the result will be transposed) changes
    nothing."""
    p_leaves, unflatten = _as_flat("ad.linearize", "primals_ft", primals_ft)
    with _name_stack(True):
        ir, out_tree, aux_tree, n_out = _staged("ad.linearize", traceable, p_leaves, unflatten, has_aux)
        with_tangent = _differentiated(ir)
        n_t, n = sum(with_tangent), len(ir.outs)
        known, tangent_part, n_res = split_known(jvp_ir(ir, with_tangent), [False] * len(p_leaves) + [True] * n_t, n)
        results = eval_ir(known, p_leaves)
    outs, residuals = results[:n], results[n:]
    tangent_part, _ = dce_outputs(tangent_part, [True] * n_out + [False] * (n - n_out))
    nonzero = depends_on(tangent_part, [False] * n_res + [True] * n_t)
    tangent_part, _ = dce_outputs(tangent_part, nonzero)
    float_tangents = iter(tangent_part.in_vars[n_res:])
    tangent_vars = [next(float_tangents) if w else Var(aval.to_tangent_aval())
                    for aval, w in zip(ir.in_avals, with_tangent)]
    jaxpr = Jaxpr(tangent_part.in_vars[:n_res], tangent_vars, tangent_part.outs, tangent_part.eqns)
    jaxpr, used_consts, _ = dce_jaxpr_consts(jaxpr, True, [False] * n_res + [True] * len(tangent_vars))
    consts = [r for r, used in zip(residuals, used_consts) if used]
    aux = (aux_tree.unflatten(list(outs[n_out:])),) if has_aux else ()
    return (FlatTree(outs[:n_out], out_tree), [not z for z in nonzero], jaxpr, consts, *aux)


__all__ = ["JVPTracer", "UndefinedPrimal", "Zero", "add_jaxvals", "add_jaxvals_p", "add_tangents", "defbilinear",
           "defjvp", "defjvp2", "deflinear", "deflinear2", "get_primitive_transpose", "instantiate_zeros",
           "is_undefined_primal", "jvp", "linearize", "primitive_jvps", "primitive_transposes", "zeros_like_aval"]
