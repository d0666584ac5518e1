"""The oracle harness (tests/oracle.py) proves itself: a plausible but wrong rule planted in a primitive, one rule
at a time, makes the check that tests/test_meta.py counts for that rule kind fail on the primitive's own Case; the
same check passes again once the right rule is back (so nothing built with the wrong rule outlives the plant).

Plants go into primitives made by family constructors (exp, mul), hand-written ones (reduce_sum, transpose,
dot_general, gather), a multiple-result one (sort: only its second output is wrong, which a harness checking the
first output alone would miss) and a control-flow one (cond). cond's and scan's reverse mode runs their vjp_split
hook, never their vjp rule (the backward pass splits every active equation that has the hook), so the plant for
cond's reverse mode goes into the hook."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import pytest

from ember import lax
from ember._core import PRIMITIVES, aval_of
from ember._core.cache import clear_all_caches
from ember._prims.shape import reshape
from oracle import Case, check_forward, check_grad, check_jvp, check_vmap, load_cases

Rule = Callable[..., Any]
CASES = {case.label(): case for case in load_cases()}


def _grad_shapes(case: Case) -> tuple[tuple[int, ...], ...]:
    return (case.grad_shapes or case.shapes)[0]


# The check of the quick run that exercises each rule kind (see TESTED_BY in tests/test_meta.py).
HARNESS: dict[str, Callable[[Case], None]] = {
    "lowering": lambda case: check_forward(case, case.shapes[0], case.dtypes[0]),
    "jvp": lambda case: check_jvp(case, _grad_shapes(case)),
    "vjp": lambda case: check_grad(case, _grad_shapes(case)),
    "vjp_split": lambda case: check_grad(case, _grad_shapes(case)),  # reverse mode of cond and scan
    "batching": lambda case: check_vmap(case, case.shapes[0], case.dtypes[0], "first"),
}


@contextlib.contextmanager
def planted(prim_name: str, kind: str, make_wrong: Callable[[Rule], Rule]) -> Iterator[None]:
    """The primitive's rule of this kind replaced by make_wrong(the right rule), within the with-block. Every cache
    ember keeps
    (programs, lowerings, staged and transformed IRs: what ember.clear_caches empties, without its costly
    gc.collect) is emptied on the way in and out, so that nothing made with the right rule is reused under the
    plant, and nothing made with the wrong one afterwards."""
    prim = PRIMITIVES[prim_name]
    right = prim.rules[kind]
    clear_all_caches()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(prim.rules, kind, make_wrong(right))
            yield
    finally:
        clear_all_caches()
    assert prim.rules[kind] is right


# ---------------------------------------------------------------------------------------------------------------
# Wrong rules, each made from the right one (so that it is wrong in one way only).
def negated_tangents(*which: int) -> Callable[[Rule], Rule]:
    """A jvp rule with the sign of its output tangents flipped: all of them, or those of the outputs `which`."""
    def make(right: Rule) -> Rule:
        def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
            outs, touts = right(primals, tangents, **params)
            return outs, [lax.neg(t) if t is not None and (not which or i in which) else t
                          for i, t in enumerate(touts)]
        return jvp
    return make


def ignored_tangent(arg: int) -> Callable[[Rule], Rule]:
    """A jvp rule that forgets the contribution of the tangent of input `arg` (a product rule missing a term)."""
    def make(right: Rule) -> Rule:
        def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
            return right(primals, [None if i == arg else t for i, t in enumerate(tangents)], **params)
        return jvp
    return make


def negated_cotangents(*which: int) -> Callable[[Rule], Rule]:
    """A vjp rule with the sign of the cotangents of the inputs `which` flipped."""
    def make(right: Rule) -> Rule:
        def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
            in_cts = right(cts, ins, outs, needs, **params)
            return [lax.neg(c) if c is not None and i in which else c for i, c in enumerate(in_cts)]
        return vjp
    return make


def dropped_cotangent(arg: int) -> Callable[[Rule], Rule]:
    """A vjp rule that returns no cotangent for input `arg` (a zero gradient where there is one)."""
    def make(right: Rule) -> Rule:
        def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
            return [None if i == arg else c for i, c in enumerate(right(cts, ins, outs, needs, **params))]
        return vjp
    return make


def conjugated_cotangents(right: Rule) -> Rule:
    """A vjp rule returning the conjugates of the right cotangents of its complex inputs: the convention mistake
    (JAX pairs a cotangent with a tangent as Re(ct * t), without conjugating)."""
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        in_cts = right(cts, ins, outs, needs, **params)
        return [lax.conj(c) if c is not None and aval_of(c).dtype.kind == "c" else c for c in in_cts]
    return vjp


def swapped_cotangents(right: Rule) -> Rule:
    """The vjp of a binary product sending each operand the other's cotangent (ct * x to x instead of ct * y)."""
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        ct_x, ct_y = right(cts, ins, outs, [True, True], **params)
        return [ct_y if needs[0] else None, ct_x if needs[1] else None]
    return vjp


def exp_vjp_without_factor(right: Rule) -> Rule:
    """exp's vjp with its factor exp(x) dropped: the cotangent passed through unchanged."""
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        return [cts[0]]
    return vjp


def transpose_vjp_reshaped(right: Rule) -> Rule:
    """transpose's vjp reshaping the cotangent to the operand's shape instead of transposing it back."""
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        return [reshape(cts[0], aval_of(ins[0]).shape)]
    return vjp


def gather_vjp_overwriting(right: Rule) -> Rule:
    """gather's vjp scattering its cotangent with overwrite instead of accumulation (a row gathered twice gets
    one of its cotangents, not their sum: the gather Case gathers a row twice at its gradient shape)."""
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
            dimension_numbers: lax.GatherDimensionNumbers, **params: Any) -> list[Any]:
        d, aval = dimension_numbers, aval_of(ins[0])
        scatter_dims = lax.ScatterDimensionNumbers(d.offset_dims, d.collapsed_slice_dims, d.start_index_map,
                                                   d.operand_batching_dims, d.start_indices_batching_dims)
        ct = PRIMITIVES["scatter"].bind(lax.full(aval.shape, 0, aval.dtype), ins[1], cts[0],
                                        dimension_numbers=scatter_dims, indices_are_sorted=params["indices_are_sorted"],
                                        unique_indices=params["unique_indices"])
        return [ct, None]
    return vjp


def negated_pullback(right: Rule) -> Rule:
    """A vjp_split hook whose pullback flips the sign of every input cotangent."""
    def split(ins: list[Any], active: list[bool], **params: Any) -> tuple[list[Any], Rule]:
        outs, pullback = right(ins, active, **params)
        return outs, lambda cts, needs: [None if c is None else lax.neg(c) for c in pullback(cts, needs)]
    return split


def shifted_batch_dims(*which: int) -> Callable[[Rule], Rule]:
    """A batching rule reporting the batch dimension of its outputs (all, or the outputs `which`) one place further
    than where it is."""
    def make(right: Rule) -> Rule:
        def batching(args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
            outs, out_dims = right(args, dims, **params)
            return outs, [(d + 1) % aval_of(x).ndim if d is not None and (not which or i in which) else d
                          for i, (x, d) in enumerate(zip(outs, out_dims))]
        return batching
    return make


def reduce_sum_batching_unshifted(right: Rule) -> Rule:
    """reduce_sum's batching reducing the member's axes of the batched operand without shifting them past the batch
    dimension."""
    def batching(args: list[Any], dims: list[Any], *, axes: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
        return [PRIMITIVES["reduce_sum"].bind(args[0], axes=axes)], [dims[0]]
    return batching


def lowering_of(other: str) -> Callable[[Rule], Rule]:
    """The lowering of another primitive of the same signature (exp lowered as expm1, mul as add)."""
    return lambda right: PRIMITIVES[other].rules["lowering"]


def transpose_lowered_as_reshape(right: Rule) -> Rule:
    """transpose lowered to a reshape to the output's shape (the right shape, the elements in the wrong order)."""
    def lowering(ctx: Any, x: str, *, permutation: tuple[int, ...]) -> list[str]:
        return PRIMITIVES["reshape"].rules["lowering"](ctx, x, new_sizes=ctx.aval_out.shape)
    return lowering


def sort_lowering_not_carrying(right: Rule) -> Rule:
    """sort lowered so that its last operand comes out as it went in, not permuted with the keys."""
    def lowering(ctx: Any, *operands: str, **params: Any) -> list[str]:
        return right(ctx, *operands, **params)[:-1] + [operands[-1]]
    return lowering


@dataclasses.dataclass(frozen=True)
class Plant:
    case: str                           # the label of the Case the harness runs
    kind: str                           # the rule kind replaced
    wrong: Callable[[Rule], Rule]       # the wrong rule, made from the right one
    mistake: str                        # what is wrong, for the test id

    def id(self) -> str:
        return f"{self.case}-{self.kind}-{self.mistake}"


PLANTS = [
    # family constructors: a unary (exp) and a binary (mul) elementwise primitive
    Plant("exp", "lowering", lowering_of("expm1"), "expm1"),
    Plant("exp", "jvp", negated_tangents(), "sign"),
    Plant("exp", "vjp", exp_vjp_without_factor, "dropped_factor"),
    Plant("exp", "batching", shifted_batch_dims(), "batch_dim"),
    Plant("mul", "lowering", lowering_of("add"), "add"),
    Plant("mul", "jvp", ignored_tangent(1), "one_term"),
    Plant("mul", "vjp", swapped_cotangents, "swapped"),
    Plant("mul", "batching", shifted_batch_dims(), "batch_dim"),
    # hand-written primitives
    Plant("reduce_sum", "lowering", lowering_of("reduce_max"), "reduce_max"),
    Plant("reduce_sum", "jvp", negated_tangents(), "sign"),
    Plant("reduce_sum", "vjp", negated_cotangents(0), "sign"),
    Plant("reduce_sum", "batching", reduce_sum_batching_unshifted, "unshifted_axes"),
    Plant("transpose", "lowering", transpose_lowered_as_reshape, "reshape"),
    Plant("transpose", "jvp", negated_tangents(), "sign"),
    Plant("transpose", "vjp", transpose_vjp_reshaped, "reshape"),
    Plant("transpose", "batching", shifted_batch_dims(), "batch_dim"),
    Plant("dot_general", "jvp", ignored_tangent(1), "one_term"),
    Plant("dot_general", "vjp", dropped_cotangent(1), "no_rhs"),
    Plant("dot_general", "batching", shifted_batch_dims(), "batch_dim"),
    Plant("gather", "vjp", gather_vjp_overwriting, "overwrite"),
    Plant("gather", "batching", shifted_batch_dims(), "batch_dim"),
    # several results: only the second output is wrong
    Plant("sort_float_keys", "lowering", sort_lowering_not_carrying, "second_output"),
    Plant("sort_float_keys", "jvp", negated_tangents(1), "second_output"),
    Plant("sort_float_keys", "vjp", negated_cotangents(1), "second_output"),
    Plant("sort_float_keys", "batching", shifted_batch_dims(1), "second_output"),
    # complex operands (JAX's convention) and the fft primitive
    Plant("exp_complex", "vjp", conjugated_cotangents, "conjugated"),
    Plant("abs_complex", "vjp", conjugated_cotangents, "conjugated"),
    Plant("fft_IRFFT_1d", "vjp", conjugated_cotangents, "conjugated"),
    Plant("fft_RFFT_1d", "jvp", negated_tangents(), "sign"),
    Plant("fft_FFT_1d", "batching", shifted_batch_dims(), "batch_dim"),
    # control flow
    Plant("cond", "jvp", negated_tangents(), "sign"),
    Plant("cond", "vjp_split", negated_pullback, "sign"),
    Plant("cond", "batching", shifted_batch_dims(), "batch_dim"),
]


@pytest.mark.parametrize("plant", PLANTS, ids=Plant.id)
def test_harness_catches_a_wrong_rule(plant: Plant) -> None:
    case = CASES[plant.case]
    check = HARNESS[plant.kind]
    with planted(case.prim, plant.kind, plant.wrong):
        with pytest.raises(AssertionError):
            check(case)
    check(case)  # the right rule back: the same check passes


def _first_output(case: Case) -> Case:
    """The case with its function (and oracles) restricted to the first output."""
    def first(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
        return None if fn is None else lambda *xs: fn(*xs)[0]
    return dataclasses.replace(case, ember=first(case.ember), numpy=first(case.numpy), jax=first(case.jax),
                               name=f"{case.label()}_first")


@pytest.mark.parametrize("plant", [p for p in PLANTS if p.mistake == "second_output"], ids=Plant.id)
def test_second_output_plants_leave_the_first_output_right(plant: Plant) -> None:
    """The plants in sort's second output are invisible to a check of its first output alone: only a harness that
    compares every output catches them (above)."""
    case = CASES[plant.case]
    with planted(case.prim, plant.kind, plant.wrong):
        HARNESS[plant.kind](_first_output(case))

