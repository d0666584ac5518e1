"""ember's IR -> IR passes, listed and runnable one by one (beyond JAX, which keeps its jaxpr passes private).

Every pass takes an IR and returns an IR with the same inputs, outputs and output structure that computes the same
values (check_ir holds); the transformations run them on what they produce (simplify = cse, then dce):

    >>> ir = ember.make_ir(f)(x)
    >>> ember.passes.names()
    ('cse', 'dce', 'fold_constants', 'simplify')
    >>> print(ember.passes.run(ir, "fold_constants", "cse", "dce"))

  cse             equal equations (same primitive, params and inputs) computed once; effectful ones never merged
  dce             equations and constants no output depends on dropped (effectful ones kept); loops and branches
                  shrink to the outputs used (their dce hooks: scan/while carries and outputs, cond results)
  fold_constants  equations of known inputs evaluated now, their results constants (never a larger one than
                  its inputs: a broadcast stays an equation); loops, branches and effects stay
  simplify        cse, then dce: the clean-up every transformation applies

The passes that split an IR for reverse mode (split_known, rematerialize) take more than an IR and stay internal
(ember._transforms.passes). discharge_refs, which changes the signature, is a function of its own: the IR of a
program using mutable array references (ember.new_ref) as the pure program XLA runs (docs/refs.md)."""
from __future__ import annotations

from typing import Callable

from ember._core import IR, check_ir
from ember._transforms.discharge import discharge_ir as _discharge_ir, has_refs as _has_refs
from ember._transforms.passes import cse, dce, fold_constants, simplify

PASSES: dict[str, Callable[[IR], IR]] = {"cse": cse, "dce": dce, "fold_constants": fold_constants,
                                         "simplify": simplify}


def names() -> tuple[str, ...]:
    """The names of the passes, sorted."""
    return tuple(sorted(PASSES))


def run(ir: IR, *passes: str | Callable[[IR], IR], check: bool = True) -> IR:
    """ir after the passes, in order (names from names(), or functions IR -> IR); with check, each result is
    type-checked (check_ir), so that a pass that breaks an IR is named."""
    if not isinstance(ir, IR):
        raise TypeError(f"ember.passes.run: expected an IR (ember.make_ir(f)(...)), got {type(ir).__name__}")
    for p in passes:
        fn = PASSES.get(p) if isinstance(p, str) else p
        if fn is None or not callable(fn):
            raise ValueError(f"ember.passes.run: unknown pass {p!r}; the passes are {', '.join(names())}")
        ir = fn(ir)
        if check:
            try:
                check_ir(ir)
            except TypeError as err:
                raise TypeError(f"ember.passes.run: the pass {getattr(fn, '__name__', p)!r} produced an IR that "
                                f"does not type-check: {err}") from err
    return ir


def discharge_refs(ir: IR) -> IR:
    """ir with its mutable array references discharged (state discharge, as JAX's): each Ref it takes (an input of
    type Ref, or an ember.Ref it closed over, then taking a leading input) becomes an input holding its value and
    an extra output holding its final value; each Ref it makes (new_ref) becomes the value it holds; reads and
    writes become uses and replacements of those values; loops carry the Refs their bodies use. The inputs are the
    closed-over Refs' values, then ir's inputs (each Ref replaced by its value); the outputs are ir's, then each
    Ref's final value (closed-over ones first). ir itself, as an IR, when it uses no Ref."""
    if not isinstance(ir, IR):
        raise TypeError(f"ember.passes.discharge_refs: expected an IR (ember.make_ir(f)(...)), got "
                        f"{type(ir).__name__}")
    if not _has_refs(ir):
        return ir
    return _discharge_ir(ir).ir


__all__ = ["PASSES", "cse", "dce", "discharge_refs", "fold_constants", "names", "run", "simplify"]
