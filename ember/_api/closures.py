"""custom_gradient and closure_convert, as JAX's: the two ways of giving a closure a custom derivative on top of
custom_vjp, whose functions take their traced values as arguments (they may not close over them).

custom_gradient(f): f(*args) returns (output, vjp) where vjp (a closure over f's intermediate values) maps the
output's cotangent to the arguments'. The forward rule stages vjp into an IR; the traced values it closes over are
the residuals, so the backward rule evaluates that IR on them.

closure_convert(f, *example_args): f staged at the example arguments' types, with the traced values it closes
over (of an enclosing jit, grad, vmap) hoisted out as explicit trailing arguments: returns (converted, consts)
with converted(*args, *consts) == f(*args), a function closing over no tracer, which custom_vjp accepts."""
from __future__ import annotations

from typing import Any, Callable

from ember._api.staging import fun_name, wraps
from ember._control import custom_vjp
from ember._core import IR, Tracer, aval_of, eval_ir, stage_flat
from ember._core.pytree import PyTreeDef, register_pytree_node, tree_flatten, tree_unflatten


def _stage_tree(fun: Callable[..., Any], args: tuple[Any, ...], label: str) -> tuple[IR, PyTreeDef, PyTreeDef]:
    """fun(*args) staged at the types of args' leaves: (IR, the arguments' structure, the output's structure)."""
    leaves, in_tree = tree_flatten(args)
    out_trees: list[PyTreeDef] = []

    def flat(*xs: Any) -> list[Any]:
        out_leaves, out_tree = tree_flatten(fun(*in_tree.unflatten(xs)))
        out_trees.append(out_tree)
        return out_leaves

    try:
        avals = [aval_of(x) for x in leaves]
    except TypeError as err:
        raise TypeError(f"{label}: the arguments must be pytrees of arrays: {err}") from None
    return stage_flat(flat, avals, label=label), in_tree, out_trees[0]


class _StagedVjp:
    """The residuals of custom_gradient: the backward function's IR and structures (static), and the values it
    closes over (the residual arrays)."""

    def __init__(self, ir: IR, in_tree: PyTreeDef, out_tree: PyTreeDef, consts: list[Any]):
        self.ir, self.in_tree, self.out_tree, self.consts = ir, in_tree, out_tree, consts


register_pytree_node(_StagedVjp, lambda r: (r.consts, (r.ir, r.in_tree, r.out_tree)),
                     lambda aux, consts: _StagedVjp(*aux, list(consts)))


def custom_gradient(fun: Callable[..., Any]) -> Callable[..., Any]:
    """fun with the gradient it returns (as jax.custom_gradient): fun(*args) -> (output, vjp), vjp(cotangent) ->
    one cotangent per argument (a single value when fun takes one argument)."""
    if not callable(fun):
        raise TypeError(f"ember.custom_gradient: expected a function, got {fun!r}")
    name = f"custom_gradient({fun_name(fun)})"

    def answer(*args: Any) -> Any:
        result = fun(*args)
        if not isinstance(result, tuple) or len(result) != 2 or not callable(result[1]):
            raise TypeError(f"{name}: the function must return a pair (output, vjp function), got "
                            f"{type(result).__name__}")
        return result

    @wraps(fun)
    def primal(*args: Any) -> Any:
        return answer(*args)[0]

    wrapped = custom_vjp(primal)

    def fwd(*args: Any) -> tuple[Any, _StagedVjp]:
        out, vjp = answer(*args)
        ir, in_tree, out_tree = _stage_tree(vjp, (out,), f"{name}'s vjp")
        return out, _StagedVjp(_without_consts(ir), in_tree, out_tree, list(ir.consts))

    def bwd(res: _StagedVjp, ct: Any) -> tuple[Any, ...]:
        leaves, tree = tree_flatten((ct,))
        if tree != res.in_tree:
            raise TypeError(f"{name}: the output cotangent has structure {tree}, the output {res.in_tree}")
        cts = tree_unflatten(res.out_tree, eval_ir(res.ir, res.consts + leaves))
        return cts if isinstance(cts, tuple) else (cts,)

    wrapped.defvjp(fwd, bwd)

    @wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"{name}: pass the arguments by position (got keywords {sorted(kwargs)})")
        return wrapped(*args)
    return call


def _without_consts(ir: IR) -> IR:
    """ir with its constants turned into leading inputs (so it holds no traced value)."""
    return IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs)


def closure_convert(fun: Callable[..., Any], *example_args: Any) -> tuple[Callable[..., Any], list[Any]]:
    """(converted, hoisted consts): fun with the traced values it closes over as explicit trailing arguments (as
    jax.closure_convert), converted(*args, *consts) == fun(*args) for args of the example arguments' types.
    Concrete values it closes over stay inside converted."""
    if not callable(fun):
        raise TypeError(f"ember.closure_convert: expected a function, got {fun!r}")
    label = f"closure_convert({fun_name(fun)})"
    ir, in_tree, out_tree = _stage_tree(fun, example_args, label)
    hoisted = [isinstance(c, Tracer) for c in ir.consts]
    consts = [c for c, h in zip(ir.consts, hoisted) if h]
    kept = [None if h else c for c, h in zip(ir.consts, hoisted)]  # (converted keeps no tracer)
    body = _without_consts(ir)

    def converted(*args_and_consts: Any) -> Any:
        split = len(args_and_consts) - len(consts)
        if split < 0:
            raise TypeError(f"{label}: expected the arguments followed by {len(consts)} hoisted constants, got "
                            f"{len(args_and_consts)} values")
        leaves, tree = tree_flatten(tuple(args_and_consts[:split]))
        if tree != in_tree:
            raise TypeError(f"{label}: the arguments have structure {tree}, the example arguments {in_tree}")
        given = iter(args_and_consts[split:])
        merged = [next(given) if h else c for c, h in zip(kept, hoisted)]
        return tree_unflatten(out_tree, eval_ir(body, merged + leaves))

    converted.__name__ = f"converted_{fun_name(fun)}"
    return converted, consts
