"""ember.experimental.control_deps (jax.experimental.control_deps): scheduling order between computations.

    a = jnp.sin(x); b = x * 2
    control_dep(a, b)          # b's computation runs after a's
    schedule([a, b, c])        # a, then b, then c

JAX writes a custom call that XLA's control-dependency rewriter turns into control edges; the plugin's XLA has no
such pass, so ember orders the computations itself when it lowers a program: the equation computing dst is written
after the one computing src and reads its operands through an optimization barrier with src (XLA computes every
operand of a barrier before any of its results is read). The values are never changed. Where ember differs: an
operation without operands (a constant, an iota) has nothing to hold back, so it is not ordered; JAX's control_dep
cannot be differentiated or vmapped (an FFI call), ember's orders the primal computations under jvp and grad and
the batched ones under vmap; a source that depends on its destination is a LoweringError naming both (XLA reports
a cycle)."""
from __future__ import annotations

from typing import Any, Sequence

from ember._prims.effects import control_dep


def schedule(ops: Sequence[Any]) -> None:
    """Order the computations of ops one after another: control_dep(ops[0], ops[1]), control_dep(ops[1], ops[2]),
    ... (as jax.experimental.control_deps.schedule)."""
    ops = list(ops)
    for src, dst in zip(ops[:-1], ops[1:]):
        control_dep(src, dst)


__all__ = ["control_dep", "schedule"]
