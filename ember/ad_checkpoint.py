"""ember.ad_checkpoint (jax.ad_checkpoint): checkpoint (remat), checkpoint_name, the checkpoint_policies, the
verdicts a policy of one's own may return besides a bool (Saveable, Recompute, Offloadable(src, dst)), and
print_saved_residuals / saved_residuals, which list what reverse mode keeps from the forward pass for the backward
pass (docs/checkpointing.md)."""
from __future__ import annotations

from typing import Any as _Any, Callable as _Callable

from ember._api.jit import make_ir as _make_ir
from ember._api.staging import leaf_names as _leaf_names
from ember._control.custom import checkpoint, checkpoint_name, checkpoint_policies, name_p as _name_p
from ember._control.custom import Offloadable as Offloadable, Recompute as Recompute, Saveable as Saveable
from ember._core import IR as _IR, Literal as _Literal, ShapedArray as _ShapedArray
from ember._core import dtypes as _dt
from ember._core.pytree import tree_flatten as _tree_flatten, tree_unflatten as _tree_unflatten
from ember._transforms.ad import vjp_ir as _vjp_ir
from ember._transforms.passes import split_known as _split_known

remat = checkpoint


def saved_residuals(f: _Callable[..., _Any], *args: _Any, **kwargs: _Any) -> list[tuple[_ShapedArray, str]]:
    """What reverse mode of f at these arguments keeps from the forward pass for the backward pass: for each kept
    value, its type and where it comes from ("from the argument x", "named 'a' from file:line (fn)", "output of sin
    from file:line (fn)", "output of jitted function 'g' from ..."), as jax.ad_checkpoint.saved_residuals. Values
    inside ember.checkpoint are kept as its policy says; the others are all kept (ember.vjp outside jit and XLA
    under jit may recompute cheap ones; this lists what the backward pass reads)."""
    if not callable(f):
        raise TypeError(f"saved_residuals: f must be callable, got {f!r}")
    leaves, in_tree = _tree_flatten((args, kwargs))

    def flat(*xs: _Any) -> _Any:
        a, k = _tree_unflatten(in_tree, list(xs))
        return f(*a, **k)

    ir: _IR = _make_ir(flat)(*leaves)
    n_in, n_out = len(ir.in_vars), len(ir.outs)
    wrt = [_dt.is_inexact(v.aval.dtype) for v in ir.in_vars]
    joint = _vjp_ir(ir, wrt, num_cts=n_out)  # (ins, cts) -> (outs, cotangents)
    known, _, _ = _split_known(joint, [False] * n_in + [True] * n_out, n_out)
    names = [name.removeprefix("argument ") for name in _leaf_names(f, in_tree)]
    kept = known.outs[n_out:]
    kept_vars = {a for a in kept if not isinstance(a, _Literal)}
    # JAX's order: literals, constants, arguments (in order), then values in the order the program makes them
    found = [(a.aval, "from a literal") for a in kept if isinstance(a, _Literal)]
    found += [(v.aval, "from a constant") for v in known.const_vars if v in kept_vars]
    found += [(v.aval, f"from the argument {name}") for v, name in zip(known.in_vars, names) if v in kept_vars]
    # (JAX's forward pass makes a residual as soon as its operands are known: a sin's cos right after the sin, so
    # the values made by equations come in the order of their latest-made operand, then of the program)
    made: dict[_Any, int] = {}
    by_operands = []
    for i, eqn in enumerate(known.eqns):
        where = eqn.source.with_column() if eqn.source is not None else "an unknown line"
        latest = max((made.get(a, -1) for a in eqn.inputs if not isinstance(a, _Literal)), default=-1)
        for v in eqn.outputs:
            made[v] = i
            if v not in kept_vars:
                continue
            if eqn.prim is _name_p:
                entry = (v.aval, f"named '{eqn.params['name']}' from {where}")
            elif eqn.prim.name == "pjit":
                entry = (v.aval, f"output of jitted function '{eqn.params['name']}' from {where}")
            else:
                entry = (v.aval, f"output of {eqn.prim.name} from {where}")
            by_operands.append((latest, len(by_operands), entry))
    return found + [entry for _, _, entry in sorted(by_operands, key=lambda t: t[:2])]


def print_saved_residuals(f: _Callable[..., _Any], *args: _Any, **kwargs: _Any) -> None:
    """Print saved_residuals(f, *args, **kwargs), one value a line (as jax.ad_checkpoint.print_saved_residuals)."""
    for aval, where in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {where}")


__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name", "checkpoint_policies",
           "print_saved_residuals", "remat", "saved_residuals"]
