"""custom_vmap and sequential_vmap (ember.custom_batching, as jax.custom_batching): a function with its own
batching rule.

    @ember.custom_batching.custom_vmap
    def f(x, y): ...
    @f.def_vmap
    def rule(axis_size, in_batched, x, y):   # in_batched: per argument, a pytree of bools; batched values have
        return out, out_batched              # the batch axis first; out_batched: a pytree of bools (or one bool)

Called outside any staging, f runs its Python body. Staged (under jit, vmap, grad, ...), it is one equation,
custom_vmap_call, carrying f's IR (what lowering runs) and the rule (what batching calls). Forward mode
differentiates f's IR, and a batched JVP applies the JVP of the rule; reverse mode is refused, as in JAX."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from ember._control.common import close_over
from ember._control.custom import runs_python_each_call
from ember._control.loops import map as lax_map
from ember._core import IR, Primitive, ShapedArray, Tracer, aval_of, concrete_values, eval_ir, is_tracing, stage_flat
from ember._core import dtypes as dt
from ember._core.pytree import PyTreeDef, tree_flatten, tree_map
from ember._hlo import LoweringContext, lower_into
from ember._prims.shape import BatchDim, batch_at_front, batch_size, zeros
from ember._transforms.jvp import jvp_ir

CUSTOM_VMAP_NO_REVERSE_MODE = "reverse-mode differentiation (grad, vjp) of a custom_vmap function is not " \
    "supported, as in JAX (forward mode, jvp, is)"

# rule(axis_size, in_batched, operands) -> (outputs, out_batched), over flat lists of every operand
FlatRule = Callable[[int, list[bool], list[Any]], tuple[list[Any], list[bool]]]


# ---------------------------------------------------------------------------------------------------------------
# custom_vmap_call(consts..., args...; fun_ir, num_consts, rule)
custom_vmap_call_p = Primitive("custom_vmap_call", multiple_results=True, eager_body="fun_ir",
                               own_vma=True, checks=())
custom_vmap_call_p.def_rule("abstract_eval", lambda *avals, fun_ir, num_consts, rule: fun_ir.out_avals)


@custom_vmap_call_p.def_rule("lowering")
def _custom_vmap_lowering(ctx: LoweringContext, *operands: str, fun_ir: IR, num_consts: int, rule: FlatRule
                          ) -> list[str]:
    return lower_into(ctx.emitter, fun_ir, operands)


@custom_vmap_call_p.def_rule("jvp")
def _custom_vmap_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, fun_ir: IR, num_consts: int,
                     rule: FlatRule) -> tuple[list[Any], list[Any]]:
    """A custom_vmap_call of f's JVP, whose rule is the JVP of f's rule: batching it later batches the tangents
    with the rule (as JAX's custom_vmap JVP)."""
    with_tangent = [i >= num_consts and dt.is_inexact(aval_of(p).dtype) for i, p in enumerate(primals)]
    ts = [zeros(aval_of(p).strip_weak_type()) if t is None else t
          for p, t, w in zip(primals, tangents, with_tangent) if w]
    n_out = len(fun_ir.outs)
    outs = custom_vmap_call_p.bind(*primals, *ts, fun_ir=jvp_ir(fun_ir, with_tangent), num_consts=num_consts,
                                   rule=_jvp_of_rule(rule, with_tangent))
    return outs[:n_out], outs[n_out:]


def _jvp_of_rule(rule: FlatRule, with_tangent: list[bool]) -> FlatRule:
    """The batching rule of f's JVP: a value batched on one side (primal or tangent) and not the other is
    broadcast, then the JVP of rule is taken at the primals along the tangents; each output tangent is batched as
    its primal."""
    n = len(with_tangent)

    def jvp_rule(axis_size: int, in_batched: list[bool], operands: list[Any]) -> tuple[list[Any], list[bool]]:
        primals, tangents = list(operands[:n]), list(operands[n:])
        t_batched = iter(in_batched[n:])
        tangent_batched = [next(t_batched) if w else False for w in with_tangent]
        batched = [p or t for p, t in zip(in_batched[:n], tangent_batched)]
        primals = [batch_at_front(x, None, axis_size) if b and not p else x
                   for x, b, p in zip(primals, batched, in_batched[:n])]
        selected = [b for b, w in zip(batched, with_tangent) if w]
        tangents = [batch_at_front(t, None, axis_size) if b and not tb else t
                    for t, b, tb in zip(tangents, selected, [tb for tb, w in zip(tangent_batched, with_tangent)
                                                                if w])]
        out_batched: list[list[bool]] = []

        def primal_rule(*xs: Any) -> list[Any]:
            outs, flags = rule(axis_size, batched, list(xs))
            out_batched[:] = [flags]
            return outs
        ir = stage_flat(primal_rule, [aval_of(x) for x in primals], label="custom_vmap rule")
        results = eval_ir(jvp_ir(ir, with_tangent), primals + tangents)
        return results, out_batched[0] + out_batched[0]
    return jvp_rule


custom_vmap_call_p.mark("vjp", CUSTOM_VMAP_NO_REVERSE_MODE)


@custom_vmap_call_p.def_rule("batching")
def _custom_vmap_batching(args: list[Any], dims: list[BatchDim], *, fun_ir: IR, num_consts: int, rule: FlatRule
                          ) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    operands = [x if d is None else batch_at_front(x, d, size) for x, d in zip(args, dims)]
    outs, out_batched = rule(size, [d is not None for d in dims], operands)
    return outs, [0 if b else None for b in out_batched]


# ---------------------------------------------------------------------------------------------------------------
# The public functions
def _check_outputs(name: str, outs: Sequence[Any], batched: Sequence[bool], expected: Sequence[ShapedArray],
                   size: int) -> None:
    for i, (x, b, want) in enumerate(zip(outs, batched, expected)):
        got = aval_of(x)
        shape = (size, *want.shape) if b else want.shape
        if got.shape != shape or got.dtype != want.dtype:
            raise TypeError(f"{name}: the vmap rule's output {i} is {got.str_short()}, marked "
                            f"{'batched' if b else 'not batched'}, where f's output is {want.str_short()} (so "
                            f"{ShapedArray(shape, want.dtype).str_short()} was expected)")


class custom_vmap:  # noqa: N801  (JAX's name)
    """A function with a custom batching rule (as jax.custom_batching.custom_vmap): decorate it, then register
    the rule with f.def_vmap(rule), rule(axis_size, in_batched, *args) -> (output, out_batched)."""

    def __init__(self, fun: Callable[..., Any]):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable[..., Any] | None = None

    def def_vmap(self, vmap_rule: Callable[..., Any]) -> Callable[..., Any]:
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = f"custom_vmap({getattr(self.fun, '__name__', 'function')})"
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        if kwargs:  # (JAX resolves keyword arguments to positions)
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
            if kwargs:
                raise TypeError(f"{name}: keyword-only arguments are not supported: {sorted(kwargs)}")
        if not is_tracing():
            return self.fun(*args)
        leaves, in_tree = tree_flatten(args)
        closed = close_over(lambda *xs: self.fun(*xs), in_tree, [aval_of(x) for x in leaves], name,
                            concrete_values(leaves))
        if any(isinstance(c, Tracer) for c in closed.consts):
            raise TypeError(f"{name}: the function closes over a traced value (of an enclosing jit, grad, vmap, "
                            "...); pass it as an argument instead (or ember.closure_convert it)")
        rule = self._flat_rule(name, in_tree, closed.out_tree, closed.ir.out_avals, len(closed.consts))
        outs = custom_vmap_call_p.bind(*closed.consts, *leaves, fun_ir=closed.ir, num_consts=len(closed.consts),
                                       rule=rule)
        return closed.out_tree.unflatten(outs)

    def _flat_rule(self, name: str, in_tree: PyTreeDef, out_tree: PyTreeDef, out_avals: list[ShapedArray],
                   num_consts: int) -> FlatRule:
        user_rule = self.vmap_rule
        assert user_rule is not None

        def rule(axis_size: int, in_batched: list[bool], operands: list[Any]) -> tuple[list[Any], list[bool]]:
            runs_python_each_call()  # (a result that ran it is not cached outside jit: it runs again, as in JAX)
            if any(in_batched[:num_consts]):  # (consts are concrete arrays: vmap never batches them)
                raise TypeError(f"{name}: a value the function closes over is batched")
            args = in_tree.unflatten(operands[num_consts:])
            batched = list(in_tree.unflatten(in_batched[num_consts:]))
            result = user_rule(axis_size, batched, *args)
            if not isinstance(result, tuple) or len(result) != 2:
                raise TypeError(f"{name}: the vmap rule must return a pair (output, out_batched), got "
                                f"{type(result).__name__}")
            out, flags = result
            out_leaves, tree = tree_flatten(out)
            if tree != out_tree:
                raise TypeError(f"{name}: the vmap rule's output has structure {tree}, the function's {out_tree}")
            if isinstance(flags, bool):
                flag_leaves = [flags] * len(out_leaves)
            else:
                flag_leaves, flag_tree = tree_flatten(flags)
                if flag_tree != out_tree or not all(isinstance(f, bool) for f in flag_leaves):
                    raise TypeError(f"{name}: out_batched must be a bool or a pytree of bools with the output's "
                                    f"structure {out_tree}, got {flags!r}")
            _check_outputs(name, out_leaves, flag_leaves, out_avals, axis_size)
            return out_leaves, flag_leaves
        return rule


def sequential_vmap(fun: Callable[..., Any]) -> custom_vmap:
    """fun, batched by a loop over the batch (lax.map) instead of its primitives' batching rules (as
    jax.custom_batching.sequential_vmap): for a function whose batched form would be too large or does not exist."""
    wrapped = custom_vmap(fun)

    @wrapped.def_vmap
    def rule(axis_size: int, in_batched: list[Any], *args: Any) -> tuple[Any, Any]:
        flags = tree_flatten(in_batched)[0]
        leaves, in_tree = tree_flatten(args)

        def one(members: list[Any]) -> Any:  # one member of the batch: the batched leaves' slices, the rest whole
            it = iter(members)
            return fun(*in_tree.unflatten([next(it) if b else x for x, b in zip(leaves, flags)]))
        out = lax_map(one, [x for x, b in zip(leaves, flags) if b])
        return out, tree_map(lambda _: True, out)
    return wrapped


__all__ = ["custom_vmap", "sequential_vmap"]
