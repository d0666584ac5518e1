"""ember.experimental.roofline, as jax.experimental.roofline: an estimate of a function's work read from its IR, one
rule per primitive, without compiling or running it (docs/performance.md, "Estimating a function's work").

`roofline(f, mesh, in_specs, out_specs)(*args)` stages f at the arguments' types (arrays or ShapeDtypeStructs),
drops dead code and walks the equations, adding up what each primitive's rule says it costs:
  flops, hbm_bytes          the work of the equations no compiler fuses away: dot_general (2 flops per
                            multiply-add, the bytes of its operands and result) and nothing else;
  unfused_flops,            every equation as if it ran alone: one flop per output element of an elementwise
  unfused_hbm_bytes         primitive, (n - 1) per result of a summed n elements, conv_general_dilated's
                            multiply-adds over the valid window positions, and each equation's operands and result;
  peak_hbm_bytes            the most bytes alive at once, walking the equations in order;
  ici_bytes, ici_latency    per mesh axis, the bytes a collective (psum, all_gather, ppermute, ...) moves over
                            the interconnect and its hops, modelled on a ring (or torus) of the axis' devices.
With mesh, in_specs and out_specs, f is the per-device body of a shard_map over mesh, so every count is per device.
`vjp=True` counts f's reverse mode instead (the pullback fed bfloat16 cotangents, as JAX's); roofline_and_grad gives
both.

The counts are JAX's, primitive by primitive: the rules count what JAX 0.10.2's count and leave at zero what JAX's
leave at zero (tanh, pow, atan2, the reductions other than reduce_sum, sort, the linear algebra, ...), so an IR that
is the same in both gives the same numbers (tests/test_experimental_roofline.py compares them field by field). The
IRs are not always the same: ember's reverse mode, its broadcasting (an operand broadcast to the full shape where
JAX 0.10.2 keeps a size-1 axis) and its gather with mode="fill" (explicit masking) stage other equations, whose
counts differ accordingly. Like JAX, the walk enters the IR of a jit (pjit), scan, remat, custom_jvp/custom_vjp
function, composite and shard_map, each once: a scan's body counts once, not once per iteration, and cond's
branches and while's bodies count nothing.

The rule table is keyed by ember's primitive objects (ember.lax.exp_p, ember.extend.core.primitives.*):
`@register_roofline(prim)` adds or replaces a rule, `register_standard_roofline(prim)` declares a primitive free.
A primitive with no rule counts nothing, with a logged warning, as in JAX."""
from __future__ import annotations

import functools
import itertools
import logging
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ember import lax
from ember import numpy as jnp
from ember._api.autodiff import vjp as _vjp
from ember._api.jit import make_jaxpr
from ember._api.staging import broadcast_prefix
from ember._api.stages import ShapeDtypeStruct
from ember._control.callbacks import debug_callback_p, io_callback_p, pure_callback_p
from ember._control.composite import composite_p
from ember._control.custom import custom_jvp_call_p, custom_vjp_call_p, remat_p
from ember._control.pjit import pjit_p
from ember._control.shard_map import shard_map, shard_map_p
from ember._core import IR, Literal, Var
from ember._core.dtypes import ShapedArray
from ember._core.ir import Eqn
from ember._core.primitive import PRIMITIVES, Primitive
from ember._core.pytree import tree_flatten, tree_map, tree_unflatten
from ember._core.sharding import AbstractMesh, Mesh, NamedSharding
from ember._prims.collectives import reduce_scatter_p
from ember._prims.conv import conv_dimension_numbers
from ember._prims.elementwise import select_p
from ember._prims.indexing import GatherScatterMode, scatter_apply_p
from ember._transforms.passes import dce

_log = logging.getLogger(__name__)

ShapeDtypeStructTree = Any
Specs = Any
ValidRooflineDtype = np.dtype  # (ember's IR carries PRNG keys as their uint32 data, so every dtype is numpy's)

_FMA_FLOPS = 2  # a multiply-add counts as two flops


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineRuleContext:
    """What a rule knows of the equation it counts besides its operands' shapes: name_stack, the named scopes it
    was bound in joined with '/' under "roofline(<f>)"; primitive; avals_in and avals_out; jaxpr_eqn_ctx, JAX's
    per-equation context (ember's equations carry none: always None); mesh, the mesh of roofline's shard_map (None
    without one); pin_lhs_in_vmem and pin_rhs_in_vmem, roofline's flags (a dot_general's operand kept on chip
    moves no HBM bytes)."""
    name_stack: str
    primitive: Primitive
    avals_in: Sequence[ShapedArray]
    avals_out: Sequence[ShapedArray]
    jaxpr_eqn_ctx: Any
    mesh: Mesh | AbstractMesh | None
    pin_lhs_in_vmem: bool
    pin_rhs_in_vmem: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineShape:
    """An operand's shape and dtype, with its size (elements) and bytes."""
    shape: tuple[int, ...]
    dtype: ValidRooflineDtype

    @classmethod
    def from_aval(cls, aval: Any) -> RooflineShape:
        if not isinstance(aval, ShapedArray):
            raise TypeError(f"RooflineShape.from_aval: expected a ShapedArray, got {type(aval).__name__}.")
        if not isinstance(aval.dtype, np.dtype):
            raise TypeError(f"RooflineShape.from_aval: expected a numpy dtype, got {type(aval.dtype).__name__}.")
        return cls(shape=tuple(aval.shape), dtype=aval.dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def bytes(self) -> int:
        return int(self.size * self.dtype.itemsize)

    @classmethod
    def total_bytes(cls, avals: Sequence[Any]) -> int:
        return sum(cls.from_aval(aval).bytes for aval in avals)


def _merge_axes(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineResult:
    """The counts (see the module docstring). `+` adds them (the peak is the larger of the two peaks); `* c`
    scales them (each rounded down to an int)."""
    flops: int = 0
    unfused_flops: int = 0
    ici_bytes: dict[str, int] = field(default_factory=dict)
    ici_latency: dict[str, int] = field(default_factory=dict)
    hbm_bytes: int = 0
    peak_hbm_bytes: int = 0
    unfused_hbm_bytes: int = 0

    @classmethod
    def zeros(cls) -> RooflineResult:
        return cls()

    def __add__(self, other: RooflineResult) -> RooflineResult:
        return RooflineResult(
            flops=self.flops + other.flops, unfused_flops=self.unfused_flops + other.unfused_flops,
            ici_bytes=_merge_axes(self.ici_bytes, other.ici_bytes),
            ici_latency=_merge_axes(self.ici_latency, other.ici_latency),
            hbm_bytes=self.hbm_bytes + other.hbm_bytes,
            peak_hbm_bytes=max(self.peak_hbm_bytes, other.peak_hbm_bytes),
            unfused_hbm_bytes=self.unfused_hbm_bytes + other.unfused_hbm_bytes)

    def __mul__(self, constant: int | float) -> RooflineResult:
        return RooflineResult(
            flops=int(self.flops * constant), unfused_flops=int(self.unfused_flops * constant),
            ici_bytes={k: int(v * constant) for k, v in self.ici_bytes.items()},
            ici_latency={k: int(v * constant) for k, v in self.ici_latency.items()},
            hbm_bytes=int(self.hbm_bytes * constant), peak_hbm_bytes=int(self.peak_hbm_bytes * constant),
            unfused_hbm_bytes=int(self.unfused_hbm_bytes * constant))

    def __rmul__(self, constant: int | float) -> RooflineResult:
        return self.__mul__(constant)


class _RooflineRule(Protocol):
    def __call__(self, ctx: RooflineRuleContext, *args: RooflineShape, **params: Any) -> RooflineResult: ...


_rooflines: dict[Primitive, _RooflineRule] = {}


def register_roofline(prim: Primitive) -> Callable[[_RooflineRule], _RooflineRule]:
    """A decorator registering `rule(ctx, *operand_shapes, **params) -> RooflineResult` as prim's rule."""
    if not isinstance(prim, Primitive):
        raise TypeError(f"register_roofline: expected an ember Primitive, got {type(prim).__name__}")

    def register(rule: _RooflineRule) -> _RooflineRule:
        _rooflines[prim] = rule
        return rule
    return register


def _free(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    return RooflineResult.zeros()


def register_standard_roofline(prim: Primitive) -> None:
    """Declare prim free: its equations count nothing (but for the bytes of their results in the peak)."""
    register_roofline(prim)(_free)


# ---------------------------------------------------------------------------------------------------------------
# The walk


def _shape(atom: Var | Literal) -> RooflineShape:
    return RooflineShape.from_aval(atom.aval)


def _last_uses(ir: IR) -> dict[Var, Eqn | None]:
    """For each variable, the last equation reading it (None for the IR's outputs: they stay alive)."""
    last: dict[Var, Eqn | None] = {v: None for v in ir.outs if isinstance(v, Var)}
    for eqn in reversed(ir.eqns):
        for v in eqn.inputs:
            if isinstance(v, Var) and v not in last:
                last[v] = eqn
    return last


def _interpret(name: str, ir: IR, mesh: Mesh | AbstractMesh | None, pin_lhs: bool, pin_rhs: bool) -> RooflineResult:
    """The sum of the rules over ir's equations, and the peak of the bytes alive (inputs and constants, then
    each equation's results, less the operands it read last)."""
    result = RooflineResult.zeros()
    alive = {v: _shape(v) for v in itertools.chain(ir.const_vars, ir.in_vars)}
    current = sum(s.bytes for s in alive.values())
    peak = current
    last = _last_uses(ir)
    for eqn in ir.eqns:
        scope = eqn.source.scope if eqn.source is not None else ()
        rule = _rooflines.get(eqn.prim)
        if rule is None:
            _log.warning("No roofline rule for %s, skipping...", eqn.prim.name)
        else:
            ctx = RooflineRuleContext(name_stack="/".join((name, *scope)), primitive=eqn.prim,
                                      avals_in=[a.aval for a in eqn.inputs], avals_out=[v.aval for v in eqn.outputs],
                                      jaxpr_eqn_ctx=None, mesh=mesh, pin_lhs_in_vmem=pin_lhs, pin_rhs_in_vmem=pin_rhs)
            result += rule(ctx, *(_shape(a) for a in eqn.inputs), **eqn.params)
        for v in eqn.outputs:
            alive[v] = _shape(v)
            current += alive[v].bytes
        # (an operand read twice by its last equation is subtracted twice, as JAX's walk does)
        dead = [v for v in eqn.inputs if isinstance(v, Var) and last.get(v) is eqn]
        current -= sum(alive[v].bytes for v in dead)
        for v in dead:
            alive.pop(v, None)
        peak = max(peak, current)
    return result + RooflineResult(peak_hbm_bytes=peak)


def _body_rule(param: str) -> _RooflineRule:
    """The rule of a primitive that runs the IR in params[param] once: that IR's counts (JAX's walk enters the
    `jaxpr` and `call_jaxpr` of an equation the same way, once, whatever the primitive does with it)."""
    def rule(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
        return _interpret(f"{ctx.primitive.name}({ctx.name_stack})", params[param], ctx.mesh, ctx.pin_lhs_in_vmem,
                          ctx.pin_rhs_in_vmem)
    return rule


def _with_vjp(f: Callable[..., Any]) -> Callable[..., Any]:
    """f's reverse mode: the pullback at f's arguments, fed f's outputs cast to bfloat16 (as JAX's, so only a
    function of bfloat16 outputs differentiates)."""
    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        outs, pullback = _vjp(f, *args)
        return pullback(tree_map(lambda x: jnp.asarray(x, jnp.bfloat16), outs))
    return wrapped


def roofline(f: Callable[..., Any], mesh: Mesh | AbstractMesh | None = None, in_specs: Specs | None = None,
             out_specs: Specs | None = None, *, pin_lhs_in_vmem: bool = False, pin_rhs_in_vmem: bool = False,
             vjp: bool = False, print_jaxpr: bool = False
             ) -> Callable[..., tuple[ShapeDtypeStructTree, RooflineResult]]:
    """A function of f's arguments (arrays or ShapeDtypeStructs) returning (f's output shapes, RooflineResult).
    With mesh, in_specs and out_specs, f runs as shard_map(f, mesh=mesh, in_specs=..., out_specs=...): the counts
    are those of one device's body (of the last shard_map of the function, as JAX's), the output shapes global ones
    carrying NamedSharding(mesh, spec). vjp counts f's reverse mode; print_jaxpr prints the IR counted."""
    @functools.wraps(f)
    def wrapped(*args: Any) -> tuple[ShapeDtypeStructTree, RooflineResult]:
        g = f
        if in_specs is not None and out_specs is not None and mesh is not None:
            g = shard_map(g, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
        if vjp:
            g = _with_vjp(g)
        ir, out_shapes = make_jaxpr(g, return_shape=True)(*args)
        if out_specs is not None and mesh is not None:
            leaves, tree = tree_flatten(out_shapes)
            specs = broadcast_prefix("roofline", "out_specs", out_specs, out_shapes)
            out_shapes = tree_unflatten(tree, [ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, p))
                                               for s, p in zip(leaves, specs)])
        live = dce(ir)  # (the constants all stay: JAX's walk starts with every one of them alive)
        ir = IR(ir.const_vars, ir.consts, live.in_vars, live.eqns, live.outs)
        shard_maps = [eqn for eqn in ir.eqns if eqn.prim is shard_map_p]
        if shard_maps:
            ir = shard_maps[-1].params["body"]
        if print_jaxpr:
            print(ir)
        name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__
        return out_shapes, _interpret(f"roofline({name})", ir, mesh, pin_lhs_in_vmem, pin_rhs_in_vmem)
    return wrapped


def roofline_and_grad(f: Callable[..., Any], mesh: Mesh | AbstractMesh, in_specs: Specs, out_specs: Specs, *,
                      pin_lhs_in_vmem: bool = False, pin_rhs_in_vmem: bool = False, print_jaxpr: bool = False
                      ) -> Callable[..., tuple[ShapeDtypeStructTree, RooflineResult, RooflineResult]]:
    """A function of f's arguments returning (output shapes, the forward counts, the reverse-mode counts), these
    at the arguments' shapes in bfloat16 (int32 arguments stay int32), as JAX's."""
    flags = dict(pin_lhs_in_vmem=pin_lhs_in_vmem, pin_rhs_in_vmem=pin_rhs_in_vmem, print_jaxpr=print_jaxpr)

    @functools.wraps(f)
    def wrapped(*args: Any) -> tuple[ShapeDtypeStructTree, RooflineResult, RooflineResult]:
        shapes, forward = roofline(f, mesh, in_specs, out_specs, **flags)(*args)
        as_bf16 = tree_map(lambda x: ShapeDtypeStruct(
            x.shape, np.dtype(np.int32) if np.dtype(x.dtype) == np.int32 else jnp.bfloat16,
            sharding=getattr(x, "sharding", None)), args)
        _, backward = roofline(f, mesh, in_specs, out_specs, vjp=True, **flags)(*as_bf16)
        return shapes, forward, backward
    return wrapped


# ---------------------------------------------------------------------------------------------------------------
# The rules, JAX 0.10.2's counts on ember's primitives. Every primitive ember has starts free (JAX registers the
# primitives of its lax, control flow, random, callback, ... modules as free); the rules below replace that for
# the primitives JAX counts.

for _prim in PRIMITIVES.values():
    register_standard_roofline(_prim)


def _in_shapes(ctx: RooflineRuleContext) -> list[RooflineShape]:
    return [RooflineShape.from_aval(a) for a in ctx.avals_in]


def _out_shape(ctx: RooflineRuleContext) -> RooflineShape:
    return RooflineShape.from_aval(ctx.avals_out[0])


def _unary(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """A flop per element; the operand read and the result written."""
    (x,), out = _in_shapes(ctx), _out_shape(ctx)
    return RooflineResult(unfused_flops=x.size, unfused_hbm_bytes=x.bytes + out.bytes)


# JAX's list: tanh, acosh, asinh, atanh, exp2, the bit counts and the other special functions are not in it, and
# count nothing there (nor here).
for _prim in (lax.abs_p, lax.acos_p, lax.asin_p, lax.atan_p, lax.cbrt_p, lax.ceil_p, lax.conj_p, lax.cos_p,
              lax.cosh_p, lax.exp_p, lax.expm1_p, lax.floor_p, lax.imag_p, lax.integer_pow_p, lax.is_finite_p,
              lax.log_p, lax.log1p_p, lax.logistic_p, lax.neg_p, lax.not_p, lax.real_p, lax.round_p, lax.rsqrt_p,
              lax.sign_p, lax.sin_p, lax.sinh_p, lax.sqrt_p, lax.square_p, lax.tan_p, lax.bessel_i0e_p,
              lax.bessel_i1e_p, lax.digamma_p, lax.erf_inv_p, lax.erf_p, lax.erfc_p, lax.lgamma_p):
    register_roofline(_prim)(_unary)


def _binary(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """A flop per element of the operands' broadcast shape; both operands read and the result written."""
    (lhs, rhs), out = _in_shapes(ctx), _out_shape(ctx)
    broadcast = [max(a, b) for a, b in itertools.zip_longest(lhs.shape, rhs.shape, fillvalue=1)]
    return RooflineResult(unfused_flops=int(np.prod(broadcast)), unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


# (pow, atan2, nextafter, the shifts and add_any are not in JAX's list: they count nothing)
for _prim in (lax.add_p, lax.sub_p, lax.mul_p, lax.div_p, lax.rem_p, lax.and_p, lax.or_p, lax.xor_p, lax.gt_p,
              lax.lt_p, lax.ge_p, lax.le_p, lax.eq_p, lax.ne_p, lax.min_p, lax.max_p):
    register_roofline(_prim)(_binary)


def _cumulative(ctx: RooflineRuleContext, *args: Any, axis: int, **params: Any) -> RooflineResult:
    """JAX's count of a cumulative reduction: the length of its axis (not the elements), flops; cumlogsumexp
    twice that (an exp and an add per step)."""
    (x,), out = _in_shapes(ctx), _out_shape(ctx)
    per_step = 2 if ctx.primitive is lax.cumlogsumexp_p else 1
    return RooflineResult(unfused_flops=x.shape[axis] * per_step, unfused_hbm_bytes=x.bytes + out.bytes)


for _prim in (lax.cummax_p, lax.cummin_p, lax.cumprod_p, lax.cumsum_p, lax.cumlogsumexp_p):
    register_roofline(_prim)(_cumulative)


@register_roofline(lax.dot_general_p)
def _dot_general(ctx: RooflineRuleContext, *args: Any, dimension_numbers: Any, **params: Any) -> RooflineResult:
    """2 * (batch * M * N * K) flops, fused or not; HBM: the operands not pinned on chip, and the result (unless
    lhs is pinned)."""
    (lhs, rhs), out = _in_shapes(ctx), _out_shape(ctx)
    (lhs_contract, _), (lhs_batch, _) = dimension_numbers
    flops = int(_FMA_FLOPS * lhs.size * rhs.size / np.prod([lhs.shape[i] for i in lhs_contract])
                / np.prod([lhs.shape[i] for i in lhs_batch]))
    hbm = (0 if ctx.pin_lhs_in_vmem else lhs.bytes + out.bytes) + (0 if ctx.pin_rhs_in_vmem else rhs.bytes)
    return RooflineResult(flops=flops, unfused_flops=flops, hbm_bytes=hbm, unfused_hbm_bytes=hbm)


def _valid_positions(stride: int, base_dilation: int, window_dilation: int, kernel: int, size_in: int,
                     size_out: int, padding: tuple[int, int]) -> int:
    """How many (output position, kernel position) pairs of one spatial dimension read an input element (not
    padding, not a hole of the input's dilation)."""
    low, high = padding
    # Two shapes JAX (as XLA's cost analysis) counts directly: a kernel as long as the input and output that
    # the stride skips over entirely, and a size-1 input padded to meet every kernel position once.
    if (size_in == size_out == kernel == base_dilation and window_dilation == 1 and stride == max(1, size_in - 1)
            and low == 0 and high == 0):
        return size_in
    if (size_in == 1 and kernel == size_out and window_dilation == 1 and base_dilation == 1 and stride == 1
            and low == high == size_out - 1):
        return size_out
    count = 0
    for k in range(kernel):
        if stride == 1 and base_dilation == 1:  # a contiguous run of output positions
            offset = low - k * window_dilation
            count += max(min(size_in + offset, size_out) - max(0, offset), 0)
            continue
        for o in range(size_out):
            dilated = o * stride - low + k * window_dilation
            index = int(dilated / base_dilation)  # (truncated toward zero, as JAX's)
            if dilated == index * base_dilation and 0 <= index < size_in:
                count += 1
    return count


@register_roofline(lax.conv_general_dilated_p)
def _conv_general_dilated(ctx: RooflineRuleContext, *args: Any, window_strides: Sequence[int],
                          padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                          rhs_dilation: Sequence[int], dimension_numbers: Any, batch_group_count: int,
                          **params: Any) -> RooflineResult:
    """2 flops per multiply-add actually done: input features (per group) x output features x batch (per
    batch group) x the valid window positions; the operands and result read and written once. As JAX's, unfused
    only (a convolution is not in `flops`)."""
    (lhs, rhs), out = _in_shapes(ctx), _out_shape(ctx)
    dnums = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    positions = 1
    for d, (li, ri, oi) in enumerate(zip(dnums.lhs_spec[2:], dnums.rhs_spec[2:], dnums.out_spec[2:])):
        positions *= _valid_positions(window_strides[d], lhs_dilation[d], rhs_dilation[d], rhs.shape[ri],
                                      lhs.shape[li], out.shape[oi], tuple(padding[d]))
    batch = lhs.shape[dnums.lhs_spec[0]] / batch_group_count
    fmas = rhs.shape[dnums.rhs_spec[1]] * out.shape[dnums.out_spec[1]] * batch * positions
    return RooflineResult(unfused_flops=int(fmas * _FMA_FLOPS), unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


@register_roofline(lax.reduce_sum_p)
def _reduce_sum(ctx: RooflineRuleContext, *args: Any, axes: Sequence[int], **params: Any) -> RooflineResult:
    """n - 1 adds per result of n summed elements; the operand read and the result (the accumulator) written.
    (JAX counts no other reduction: reduce_max, reduce_prod, argmax, ... are free.)"""
    (x,) = _in_shapes(ctx)
    summed = int(np.prod([x.shape[i] for i in axes]))
    kept = int(np.prod([x.shape[i] for i in set(range(len(x.shape))) - set(axes)]))
    return RooflineResult(unfused_flops=(summed - 1) * kept, unfused_hbm_bytes=x.dtype.itemsize * (x.size + kept))


def _select(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """A flop per result element; JAX's bytes: the first operand (the predicate) and the result."""
    first, out = _in_shapes(ctx)[0], _out_shape(ctx)
    return RooflineResult(unfused_flops=out.size, unfused_hbm_bytes=first.bytes + out.bytes)


# (ember's select(pred, on_true, on_false) is JAX's select_n with the cases swapped: the same count)
register_roofline(lax.select_n_p)(_select)
register_roofline(select_p)(_select)


@register_roofline(lax.gather_p)
def _gather(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """A copy of the output's size (read and written) and the indices read; with mode FILL_OR_DROP, 4 checks per
    index and a select per output element. (ember stages gather's "fill" mode as a gather that promises its
    indices in bounds and the masking as equations of their own, which count as such.)"""
    (_, indices), out = _in_shapes(ctx), _out_shape(ctx)
    mode = params.get("mode")
    flops = 4 * indices.size + out.size if mode is not None and \
        GatherScatterMode.from_any(mode) is GatherScatterMode.FILL_OR_DROP else 0
    return RooflineResult(unfused_flops=flops, unfused_hbm_bytes=2 * out.bytes + indices.bytes)


def _scatter_bytes(indices: RooflineShape, updates: RooflineShape) -> int:
    """Operand, output and updates, each counted at the updates' size, and the indices."""
    return 3 * updates.bytes + indices.bytes


def _combining_scatter(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """One flop per update element (JAX counts its update function, a single add, mul, min or max, per element)."""
    _, indices, updates = _in_shapes(ctx)
    return RooflineResult(unfused_flops=updates.size, unfused_hbm_bytes=_scatter_bytes(indices, updates))


for _prim in (lax.scatter_add_p, lax.scatter_sub_p, lax.scatter_mul_p, lax.scatter_min_p, lax.scatter_max_p):
    register_roofline(_prim)(_combining_scatter)


@register_roofline(lax.scatter_p)
def _scatter(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """Data movement only: no flops."""
    _, indices, updates = _in_shapes(ctx)
    return RooflineResult(unfused_hbm_bytes=_scatter_bytes(indices, updates))


@register_roofline(scatter_apply_p)
def _scatter_apply(ctx: RooflineRuleContext, *args: Any, func: IR, update_shape: Sequence[int],
                   **params: Any) -> RooflineResult:
    """func's flops on scalars, times the elements it is applied to (update_shape's; JAX's scatter_apply is a
    scatter of that shape whose update function is func)."""
    operand, indices = _in_shapes(ctx)
    updates = RooflineShape(shape=tuple(update_shape), dtype=operand.dtype)
    per_element = _interpret("scatter_apply", func, ctx.mesh, ctx.pin_lhs_in_vmem, ctx.pin_rhs_in_vmem)
    return RooflineResult(unfused_flops=per_element.unfused_flops * updates.size,
                          unfused_hbm_bytes=_scatter_bytes(indices, updates))


@register_roofline(pure_callback_p)
@register_roofline(io_callback_p)
def _callback(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """The operands sent to the host and the results sent back; the Python function's work is unknown (0)."""
    return RooflineResult(unfused_hbm_bytes=RooflineShape.total_bytes(ctx.avals_in)
                          + RooflineShape.total_bytes(ctx.avals_out))


@register_roofline(debug_callback_p)
def _debug_callback(ctx: RooflineRuleContext, *args: Any, **params: Any) -> RooflineResult:
    """The operands sent to the host (nothing comes back)."""
    return RooflineResult(unfused_hbm_bytes=RooflineShape.total_bytes(ctx.avals_in))


# The higher-order primitives whose IR JAX's walk enters (its `jaxpr` or `call_jaxpr`), once each. cond's branches,
# while's bodies, linear_solve's and custom_vmap's IRs are not entered by JAX's walk: free, as there.
for _prim, _param in ((pjit_p, "body"), (lax.scan_p, "body_ir"), (remat_p, "body_ir"),
                      (custom_jvp_call_p, "fun_ir"), (custom_vjp_call_p, "fun_ir"), (composite_p, "jaxpr"),
                      (shard_map_p, "body")):
    register_roofline(_prim)(_body_rule(_param))


# Collectives, per device of the mesh: a ring per axis (the axes done in phases, the longest one the bottleneck).

def _axes(names: Any) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else tuple(names)


def _trivial_axes(ctx: RooflineRuleContext, axes: tuple[str, ...]) -> RooflineResult | None:
    """Zeros for each axis when the axes span one device (nothing moves), else None."""
    if ctx.mesh is None:
        raise ValueError(f"roofline: {ctx.primitive.name} over axes {axes} needs the mesh (roofline's mesh, "
                         "in_specs and out_specs)")
    if np.prod([ctx.mesh.shape[a] for a in axes]) > 1:
        return None
    return RooflineResult(ici_bytes={a: 0 for a in axes}, ici_latency={a: 0 for a in axes})


def _ring(ctx: RooflineRuleContext, axes: tuple[str, ...], reduces: bool = True) -> RooflineResult:
    """A ring collective's bytes (each phase sends (axis size - 1) shards, the shards growing phase by phase)
    and its latency (the longest axis' size per axis), recorded under every axis."""
    trivial = _trivial_axes(ctx, axes)
    if trivial is not None:
        return trivial
    sizes = ctx.mesh.shape
    shard = RooflineShape.total_bytes(ctx.avals_in)
    if reduces:
        shard /= np.prod([sizes[a] for a in axes])
    ordered = sorted(axes, key=lambda a: sizes[a], reverse=True)
    shard //= len(ordered)
    moved = 0
    for a in ordered:
        moved += shard * (sizes[a] - 1)
        shard *= sizes[a]
    latency = sizes[ordered[0]] * len(ordered)
    return RooflineResult(ici_bytes={a: int(moved) for a in ordered}, ici_latency={a: int(latency) for a in ordered})


@register_roofline(reduce_scatter_p)
def _reduce_scatter(ctx: RooflineRuleContext, *args: Any, axes: Any, **params: Any) -> RooflineResult:
    return _ring(ctx, _axes(axes))


@register_roofline(lax.all_gather_p)
def _all_gather(ctx: RooflineRuleContext, *args: Any, axes: Any, **params: Any) -> RooflineResult:
    return _ring(ctx, _axes(axes), reduces=False)


@register_roofline(lax.pmin_p)
@register_roofline(lax.pmax_p)
def _scalar_collective(ctx: RooflineRuleContext, *args: Any, axes: Any, **params: Any) -> RooflineResult:
    """JAX counts pmin and pmax as a gather of one element per operand."""
    ctx = replace(ctx, avals_in=[ShapedArray((1,), a.dtype) for a in ctx.avals_in])
    return _ring(ctx, _axes(axes), reduces=False)


@register_roofline(lax.psum_p)
def _psum(ctx: RooflineRuleContext, *args: Any, axes: Any, **params: Any) -> RooflineResult:
    """A reduce-scatter then an all-gather: twice a ring's bytes and latency (JAX's psum_invariant, the psum of
    values varying over the axes; ember's psum is that primitive)."""
    ring = _ring(ctx, _axes(axes))
    return RooflineResult(ici_bytes={k: 2 * v for k, v in ring.ici_bytes.items()},
                          ici_latency={k: 2 * v for k, v in ring.ici_latency.items()})


@register_roofline(lax.all_to_all_p)
def _all_to_all(ctx: RooflineRuleContext, *args: Any, axes: Any, **params: Any) -> RooflineResult:
    """Half the data crosses the mesh's bisection (doubled by the wrap-around of axes longer than 2); the
    latency is half of each axis' size, summed."""
    axes = _axes(axes)
    trivial = _trivial_axes(ctx, axes)
    if trivial is not None:
        return trivial
    sizes = ctx.mesh.shape
    total = RooflineShape.total_bytes(ctx.avals_in) * np.prod([sizes[a] for a in axes])
    smallest = min(sizes[a] for a in axes)
    bisection = smallest ** (len(axes) - 1) * (2 if smallest > 2 else 1)
    moved = total / 2 / bisection
    latency = sum(sizes[a] / 2 for a in axes)
    return RooflineResult(ici_bytes={a: int(moved) for a in axes}, ici_latency={a: int(latency) for a in axes})


@register_roofline(lax.ppermute_p)
def _ppermute(ctx: RooflineRuleContext, *args: Any, axes: Any, perm: Sequence[tuple[int, int]],
              **params: Any) -> RooflineResult:
    """Each pair's shortest path around the torus of the axes, one axis after the other: the bytes are the
    operands' times the most pairs sharing a link, the latency the longest path."""
    axes = _axes(axes)
    trivial = _trivial_axes(ctx, axes)
    if trivial is not None:
        return trivial
    dims = [ctx.mesh.shape.get(a, 1) for a in axes]
    shard = RooflineShape.total_bytes(ctx.avals_in)
    load: dict[tuple[tuple[int, ...], ...], int] = defaultdict(int)
    latency = 0
    for src, dst in perm:
        if src == dst:
            continue
        here = [int(i) for i in np.unravel_index(src, dims)]
        there = [int(i) for i in np.unravel_index(dst, dims)]
        hops = 0
        for d, size in enumerate(dims):
            forward, backward = (there[d] - here[d]) % size, (here[d] - there[d]) % size
            if forward == 0:
                continue
            step = 1 if forward <= backward else -1
            # (JAX walks each axis from the source's coordinates, the axes before it not yet moved)
            position = list(int(i) for i in np.unravel_index(src, dims))
            while position[d] != there[d]:
                nxt = position.copy()
                nxt[d] = (position[d] + step) % size
                load[tuple(sorted([tuple(position), tuple(nxt)]))] += 1
                position = nxt
            hops += min(forward, backward)
        latency = max(latency, hops)
    moved = shard * max(load.values(), default=0)
    return RooflineResult(ici_bytes={a: int(moved) for a in axes}, ici_latency={a: int(latency) for a in axes})


__all__ = ["RooflineResult", "RooflineRuleContext", "RooflineShape", "register_roofline",
           "register_standard_roofline", "roofline", "roofline_and_grad"]
