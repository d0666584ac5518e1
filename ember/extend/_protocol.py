"""JAX's extension API over ember's rule protocol (docs/extending.md).

A primitive defined the JAX way (jax.extend.core.Primitive, def_impl, def_abstract_eval; its rules written into
the tables of jax.interpreters.ad, batching and mlir) is an ember Primitive whose rules read those tables when a
transformation asks for them, so the rules JAX code registers after making the primitive are the ones used:

- abstract eval: the def_abstract_eval rule (def_effectful_abstract_eval: a rule that reports effects makes the
  primitive effectful, ember's one mechanism for them);
- eager execution: the def_impl function, run outside any staging (Primitive.impl);
- lowering: `mlir.register_lowering(prim, mlir.lower_fun(fun))`: fun is staged with ember at the operands' types
  and emitted in place (per platform where one is named). ember writes StableHLO as text and has no MLIR Python
  bindings, so a rule written with them is refused, naming the primitive; a primitive with an impl and no
  lowering is lowered through its impl;
- JVP: `ad.primitive_jvps[prim]` (or ad.defjvp, defjvp2, deflinear, defbilinear), with JAX's symbolic zeros
  (ad.Zero) for ember's absent tangents;
- VJP: the JVP rule's tangent map, staged and transposed (as JAX does); equations of that map are transposed by
  their own rules, and a primitive defined here by `ad.primitive_transposes[prim]` with JAX's UndefinedPrimal for
  its linear operands (ember's "transpose" hook: backward_pass(..., linear=True));
- batching: `batching.primitive_batchers[prim]`, `fancy_primitive_batchers` (axis data first) or
  `axis_primitive_batchers` (axis size and name first), as JAX 0.10.2 calls them;
- dead-code elimination: `partial_eval.dce_rules[prim]`, rule(used_outputs, eqn) -> (used_inputs, the equation
  restricted to what is used, or None to drop it), consulted by ember's DCE (ember.passes' dce, and every
  transformation's clean-up) as the primitive's "dce" hook.

A CallPrimitive (jax.extend.core.CallPrimitive) is bound with the function it calls, `p.bind(*args,
subfuns=(wrapped_fun,), **params)`: outside any staging its impl runs (call_impl: the function itself); while
staging, the function is staged into its `call_jaxpr` param (an open Jaxpr, its constants leading operands). Its
rules come from that jaxpr where no table has one: the output types, the lowering (the body, inlined), the JVP and
batching (the body's, bound again as a call of the same primitive) and the VJP (the body's backward pass).

A missing rule is JAX's NotImplementedError, naming the primitive, when a transformation needs it."""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ember._control.callbacks import TARGET, HostCallback
from ember._control.custom import SymbolicZero, TypedZero, custom_jvp_call_p
from ember._core import Primitive as _Primitive
from ember._core import IR, Eqn, Literal, ShapedArray, aval_of, concrete_values, eval_ir, stage_flat
from ember._core import dtypes as dt
from ember._core.axes import active_batching_axis
from ember._core.ir import Jaxpr
from ember._core.primitive import TRACE_STATE
from ember._core.pytree import tree_structure
from ember._hlo import LoweringContext, lower_closed
from ember._hlo import ffi as hlo_ffi
from ember._prims.elementwise import add
from ember._prims.shape import batch_at_front, batch_size, broadcast_in_dim
from ember._prims.shape import moveaxis as _moveaxis
from ember._prims.shape import zeros
from ember._transforms.ad import backward_pass
from ember._transforms.batching import batch_ir
from ember._transforms.jvp import jvp_ir
from ember.extend.linear_util import WrappedFun, wrap_init

# ---------------------------------------------------------------------------------------------------------------
# The tables JAX code writes rules into (jax.interpreters.ad, batching, mlir), keyed by primitive.
primitive_jvps: dict[_Primitive, Callable[..., Any]] = {}
primitive_transposes: dict[_Primitive, Callable[..., Any]] = {}
fancy_primitive_batchers: dict[_Primitive, Callable[..., Any]] = {}
lowerings: dict[_Primitive, Any] = {}
dce_rules: dict[_Primitive, Callable[..., Any]] = {}
platform_lowerings: dict[str, dict[_Primitive, Any]] = collections.defaultdict(dict)

not_mapped = None  # (batching.not_mapped: the batch dimension of an unbatched value)


# ---------------------------------------------------------------------------------------------------------------
# Symbolic zeros and undefined primals (jax.interpreters.ad)
class Zero(TypedZero):
    """A symbolic zero tangent or cotangent of type aval (ad.Zero): what a rule receives where ember's tangent is
    absent, and may return for a zero result."""
    __slots__ = ()


class UndefinedPrimal:
    """An operand a transpose rule computes the cotangent of (ad.UndefinedPrimal): the rule knows its type only."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x: Any) -> bool:
    return type(x) is UndefinedPrimal


def zeros_like_aval(aval: ShapedArray) -> Any:
    """Zeros of type aval (a float0 array for the tangent type of an integer or boolean value)."""
    return Zero(aval).instantiate()


def instantiate_zeros(tangent: Any) -> Any:
    """tangent, with a symbolic zero made an array of zeros."""
    return zeros_like_aval(tangent.aval) if type(tangent) is Zero else tangent


def add_tangents(x: Any, y: Any) -> Any:
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add(x, y)


add_jaxvals = add_tangents


def _absent(t: Any) -> bool:
    """Whether a rule's tangent or cotangent is zero as ember writes it (None): JAX's None, Zero, or float0."""
    return t is None or type(t) is Zero or getattr(t, "dtype", None) == dt.float0


def _as_aval(out: Any, name: str) -> ShapedArray:
    if isinstance(out, ShapedArray):
        return out
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return ShapedArray(tuple(out.shape), out.dtype, bool(getattr(out, "weak_type", False)))
    raise TypeError(f"the abstract evaluation rule of primitive '{name}' returned {type(out).__name__} where a "
                    "jax.core.ShapedArray was expected")


# ---------------------------------------------------------------------------------------------------------------
# Lowering: mlir.lower_fun
@dataclasses.dataclass(frozen=True)
class LoweredFunction:
    """What mlir.lower_fun returns: a function of the operands (and the params, as keywords) whose staged IR is the
    primitive's lowering."""
    fun: Callable[..., Any]
    multiple_results: bool = True

    def __call__(self, ctx: Any, *args: Any, **params: Any) -> Any:
        raise TypeError("a lowering made by mlir.lower_fun is called by ember when it lowers the primitive; ember "
                        "has no MLIR Python bindings to call it with")


def lower_fun(fun: Callable[..., Any], multiple_results: bool = True) -> LoweredFunction:
    """The lowering of a primitive as a function of its operands written with ember (jax.numpy) operations
    (mlir.lower_fun): register it with mlir.register_lowering."""
    return LoweredFunction(fun, multiple_results)


class Value:
    """An operand or result of a lowering rule written the JAX way (mlir.register_lowering(prim, rule) with a rule
    of (ctx, *operands)): a value of the module ember is writing. Such a rule may pass them to
    mlir.emit_python_callback; ember has no MLIR Python bindings for anything else (JAX's `ir`, `hlo`)."""
    __slots__ = ("name", "aval")

    def __init__(self, name: str, aval: ShapedArray):
        self.name, self.aval = name, aval

    def __repr__(self) -> str:
        return f"<ember lowering value {self.name}: {self.aval.str_short()}>"


class _ModuleContext:
    """ctx.module_context of a rule: keeps what the program's callbacks need alive (add_keepalive)."""

    def add_keepalive(self, keepalive: Any) -> None:
        if keepalive is not None:
            _KEPT[id(keepalive)] = keepalive
            while len(_KEPT) > MAX_KEPT:
                _KEPT.popitem(last=False)


class RuleContext:
    """The ctx a lowering rule written the JAX way receives: avals_in, avals_out, module_context, and ember's own
    lowering context (for mlir.emit_python_callback)."""
    __slots__ = ("ember", "avals_in", "avals_out", "module_context", "tokens_in", "tokens_out")

    def __init__(self, ctx: LoweringContext):
        self.ember = ctx
        self.avals_in, self.avals_out = list(ctx.avals_in), list(ctx.avals_out)
        self.module_context = _ModuleContext()
        self.tokens_in = self.tokens_out = None


# the callbacks lowered programs call (keepalives), the latest MAX_KEPT: not a cache clear_caches empties, as a
# program holding one may still run
_KEPT: collections.OrderedDict[int, Any] = collections.OrderedDict()
MAX_KEPT = 4096


def _rule_with_values(name: str, rule: Any, ctx: LoweringContext, operands: Sequence[str], params: dict[str, Any]
                      ) -> list[str]:
    """A lowering rule of (ctx, *operands, **params) in JAX's form: its operands and results are Values; one that
    calls JAX's MLIR bindings beyond mlir.emit_python_callback is refused, naming the primitive."""
    values = [Value(o, a) for o, a in zip(operands, ctx.avals_in)]
    try:
        out = rule(RuleContext(ctx), *values, **params)
    except (AttributeError, TypeError, NotImplementedError) as err:
        raise NotImplementedError(
            f"the lowering rule of primitive '{name}' ({getattr(rule, '__name__', rule)}) failed ({err}): ember writes "
            "StableHLO text and has no MLIR Python bindings beyond mlir.emit_python_callback; register "
            "mlir.lower_fun(f) instead, f a function of the operands written with jax.numpy/jax.lax") from err
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) == 1 and isinstance(outs[0], (list, tuple)):
        outs = list(outs[0])
    if not all(isinstance(v, Value) for v in outs) or len(outs) != len(ctx.avals_out):
        raise TypeError(f"the lowering rule of primitive '{name}' returned {out!r}: expected its "
                        f"{len(ctx.avals_out)} results as values of the module")
    return [v.name for v in outs]


def emit_python_callback(ctx: RuleContext, callback: Callable[..., Any], token: Any, operands: Sequence[Value],
                         operand_avals: Sequence[Any], result_avals: Sequence[Any], *, has_side_effect: bool,
                         partitioned: bool = False, sharding: Any = None, returns_token: bool = False,
                         **kwargs: Any) -> tuple[list[Value], Any, Any]:
    """mlir.emit_python_callback: a call of callback (numpy arrays in, a sequence of arrays out, of result_avals)
    in the module, as ember's host callbacks run (ember._control.callbacks). Returns (the results, the token
    unchanged, what the program needs kept alive: ctx.module_context.add_keepalive it)."""
    if not isinstance(ctx, RuleContext):
        raise TypeError("mlir.emit_python_callback: ctx must be the context ember gave the lowering rule")
    if not hlo_ffi.available(TARGET):  # (loads and registers the callback handler)
        raise NotImplementedError("mlir.emit_python_callback: host callbacks are unavailable in this process")
    ins = [_as_aval(a, "emit_python_callback") for a in operand_avals]
    outs = tuple(_as_aval(a, "emit_python_callback") for a in result_avals)
    host = HostCallback(callback, tree_structure((tuple(range(len(ins))), {})), (), outs,
                        tree_structure(list(range(len(outs)))), "emit_python_callback")
    host.note_operands(ins)
    names = hlo_ffi.custom_call(ctx.ember, TARGET, [v.name for v in operands], list(outs), {"callback": host.key},
                                has_side_effect=has_side_effect, ordered=False, once=True)
    return [Value(n, a) for n, a in zip(names, outs)], token, host


_PLATFORMS = {"gpu": "cuda", "cuda": "cuda", "rocm": "rocm", "cpu": "cpu", "tpu": "tpu"}


def register_lowering(prim: _Primitive, rule: Any, platform: str | None = None, cacheable: bool = True) -> Any:
    """mlir.register_lowering: rule (from mlir.lower_fun) lowers prim, on platform only when one is named."""
    if not issubclass(type(prim), Primitive):  # (not isinstance: every ember primitive is an instance, see below)
        raise TypeError(f"mlir.register_lowering: ember's own primitive {prim.name!r} has its lowering; only "
                        "primitives made with jax.extend.core.Primitive take one")
    if platform is None:
        lowerings[prim] = rule
    else:
        platform_lowerings[_PLATFORMS.get(platform, platform)][prim] = rule
    return rule


# ---------------------------------------------------------------------------------------------------------------
# Batching
@dataclasses.dataclass(frozen=True)
class AxisData:
    """The axis being batched, as a fancy batching rule receives it (batching.AxisData)."""
    name: Hashable
    size: int
    spmd_name: Any = None
    explicit_mesh_axis: Any = None


class _PrimitiveBatchers:
    """batching.primitive_batchers: rule(args, dims, **params), called when some operand is batched."""

    def __setitem__(self, prim: _Primitive, rule: Callable[..., Any]) -> None:
        fancy_primitive_batchers[prim] = lambda axis_data, args, dims, **params: rule(args, dims, **params)

    def __delitem__(self, prim: _Primitive) -> None:
        del fancy_primitive_batchers[prim]

    def __contains__(self, prim: _Primitive) -> bool:
        return prim in fancy_primitive_batchers


class _AxisPrimitiveBatchers(_PrimitiveBatchers):
    """batching.axis_primitive_batchers: rule(axis_size, axis_name, trace_type, args, dims, **params)."""

    def __setitem__(self, prim: _Primitive, rule: Callable[..., Any]) -> None:
        fancy_primitive_batchers[prim] = (
            lambda axis_data, args, dims, **params: rule(axis_data.size, axis_data.name, None, args, dims, **params))


primitive_batchers = _PrimitiveBatchers()
axis_primitive_batchers = _AxisPrimitiveBatchers()


def _out_dim(dim: Any, out: Any) -> Any:
    if dim is None:
        return None
    dim = int(dim)
    return dim + np.ndim(out) if dim < 0 else dim


# ---------------------------------------------------------------------------------------------------------------
# The primitive
class _PrimitiveType(type):
    def __instancecheck__(cls, x: Any) -> bool:
        # (every ember primitive is a jax.extend.core.Primitive, as every JAX primitive is one: libraries type the
        # primitives of the equations they walk so; a subclass checks its own instances)
        return isinstance(x, _Primitive) if cls is Primitive else type.__instancecheck__(cls, x)


class Primitive(_Primitive, metaclass=_PrimitiveType):
    """A primitive defined the JAX way (jax.extend.core.Primitive): `p = Primitive("name")`, `p.def_impl(f)`,
    `p.def_abstract_eval(rule)`, `p.multiple_results = True` for a list of outputs, its other rules in the tables of
    jax.interpreters.ad, batching and mlir (see the module docstring); `p.bind(*arrays, **params)` applies it.
    Names need not be unique (JAX's need not): it is not one of ember's registered primitives."""
    call_primitive = False
    map_primitive = False
    ref_primitive = False
    skip_canonicalization = False

    def __init__(self, name: str):
        super().__init__(name, register=False)
        self._abstract_eval: Callable[..., Any] | None = None
        self._reports_effects = False
        self.rules.update(abstract_eval=self._abstract_eval_rule, lowering=self._lowering_rule, jvp=self._jvp_rule,
                          vjp=self._vjp_rule, batching=self._batching_rule, transpose=self._transpose_rule,
                          dce=self._dce_rule)

    def def_impl(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        self.impl = impl
        return impl

    def def_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        self._abstract_eval, self._reports_effects = rule, False
        return rule

    def def_effectful_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """rule returns (avals, effects); a primitive whose rule reports effects is effectful (never dropped,
        merged or evaluated at trace time)."""
        self._abstract_eval, self._reports_effects = rule, True
        return rule

    def def_bind_with_trace(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        raise NotImplementedError(f"Primitive {self.name!r}: def_bind_with_trace acts on JAX's tracers, which ember "
                                  "does not have (ember stages every transformation as an IR)")

    def abstract_eval(self, *avals: Any, **params: Any) -> tuple[Any, frozenset]:
        """(the output avals, the effects) as JAX's Primitive.abstract_eval returns them."""
        out = self._abstract_eval_rule(*avals, **params)
        return out, frozenset()

    def is_effectful(self, params: Any = None) -> bool:
        return self.effectful

    # ember's rules, reading JAX's tables
    def _abstract_eval_rule(self, *avals: ShapedArray, **params: Any) -> Any:
        if self._abstract_eval is None:
            raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")
        out = self._abstract_eval(*avals, **params)
        if self._reports_effects:
            out, effects = out
            if effects:
                self.effectful = True
        if self.multiple_results:
            return [_as_aval(o, self.name) for o in out]
        return _as_aval(out, self.name)

    def _lowering_rule(self, ctx: LoweringContext, *operands: str, **params: Any) -> list[str]:
        platform = ctx.emitter.platform
        rule = platform_lowerings.get(platform, {}).get(self) if platform is not None else None
        if rule is None:
            rule = lowerings.get(self)
        if rule is None and self.impl is not None:
            rule = LoweredFunction(self.impl, self.multiple_results)
        if rule is None:
            raise NotImplementedError(f"MLIR translation rule for primitive '{self.name}' not found for platform "
                                      f"{platform or 'any'}")
        if not isinstance(rule, LoweredFunction):
            return _rule_with_values(self.name, rule, ctx, operands, params)

        def staged(*xs: Any) -> list[Any]:
            out = rule.fun(*xs, **params)
            return list(out) if rule.multiple_results else [out]

        ir = stage_flat(staged, ctx.avals_in, label=f"the lowering of {self.name}")
        return lower_closed(ctx.emitter, ir, operands)

    def _jvp_of(self) -> Callable[..., Any]:
        rule = primitive_jvps.get(self)
        if rule is None:
            raise NotImplementedError(f"Differentiation rule for '{self.name}' not implemented")
        return rule

    def _jvp_rule(self, primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list, list]:
        rule = self._jvp_of()
        primals = _operand_values(primals)
        ts = [Zero.from_primal_value(p) if t is None else t for p, t in zip(primals, tangents)]
        out, tout = rule(tuple(primals), tuple(ts), **params)  # (tuples, as JAX's JVP trace gives them)
        if not self.multiple_results:
            out, tout = [out], [tout]
        return list(out), [None if _absent(t) else t for t in tout]

    def _vjp_rule(self, cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any
                  ) -> list[Any]:
        """The transpose of the JVP rule's tangent map at ins (linear in the tangents of the inputs needed)."""
        rule = self._jvp_of()
        ins = _operand_values(ins)
        which = [i for i, need in enumerate(needs) if need and dt.is_inexact(aval_of(ins[i]).dtype)]
        t_avals = [aval_of(ins[i]).strip_weak_type() for i in which]
        out_avals = [aval_of(o).strip_weak_type() for o in outs]

        def tangent_map(*ts: Any) -> list[Any]:
            tangents: list[Any] = [Zero.from_primal_value(x) for x in ins]
            for i, t in zip(which, ts):
                tangents[i] = t
            _, tout = rule(tuple(ins), tuple(tangents), **params)
            touts = list(tout) if self.multiple_results else [tout]
            return [zeros(a) if _absent(t) else t for t, a in zip(touts, out_avals)]

        known = concrete_values(ins)  # (outside jit the rule may branch on the primal values, as under JAX)
        linear = stage_flat(tangent_map, t_avals, None if known is None else [zeros(a) for a in t_avals],
                            label=f"the JVP rule of {self.name}")
        _, in_cts = backward_pass(linear, [zeros(a) for a in t_avals], [True] * len(t_avals), cts, linear=True)
        result: list[Any] = [None] * len(ins)
        for i, ct in zip(which, in_cts):
            result[i] = ct
        return result

    def _transpose_rule(self, cts: list[Any], ins: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        rule = primitive_transposes.get(self)
        if rule is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for '{self.name}' not "
                                      "implemented")
        args = [UndefinedPrimal(aval_of(x)) if need else x for x, need in zip(_operand_values(ins), needs)]
        found = rule(list(cts) if self.multiple_results else cts[0], *args, **params)
        found = list(found)
        if len(found) != len(ins):
            raise TypeError(f"the transpose rule of primitive '{self.name}' returned {len(found)} cotangents for "
                            f"{len(ins)} operands")
        return [None if not need or _absent(ct) else ct for ct, need in zip(found, needs)]

    def _batching_rule(self, args: list[Any], dims: list[Any], **params: Any) -> tuple[list, list]:
        rule = fancy_primitive_batchers.get(self)
        if rule is None:
            raise NotImplementedError(f"Batching rule for '{self.name}' not implemented")
        active = active_batching_axis()
        args = _operand_values(args)
        size = batch_size(args, dims) if any(d is not None for d in dims) else active[1]
        # (the operands and their dims as tuples, as JAX's batching trace gives them: a rule may pass dims on as
        # a vmap's out_axes, a tree prefix of a tuple of outputs)
        out, out_dims = rule(AxisData(active[0] if active else None, size), tuple(args), tuple(dims), **params)
        if not self.multiple_results:
            return [out], [_out_dim(out_dims, out)]
        out = list(out)
        if not isinstance(out_dims, (list, tuple)):
            out_dims = [out_dims] * len(out)
        return out, [_out_dim(d, o) for d, o in zip(out_dims, out)]


    def _dce_rule(self, eqn: Eqn, used: list[bool]) -> Eqn | None:
        """partial_eval.dce_rules[self](used, eqn)'s equation (None: dropped); eqn itself without a rule."""
        rule = dce_rules.get(self)
        if rule is None:
            return eqn
        _, new_eqn = rule(list(used), eqn)
        return new_eqn


def _operand_values(args: Sequence[Any]) -> list[Any]:
    """A rule's operands as JAX gives them to a rule: a constant written in place in ember's IR (a Literal) as its
    value, a numpy scalar of its dtype (not the IR's atom, which a rule would keep in its params)."""
    return [np.asarray(x.value, x.aval.dtype)[()] if type(x) is Literal else x for x in args]


# ---------------------------------------------------------------------------------------------------------------
# Call primitives (jax.extend.core.CallPrimitive)
def call_impl(f: WrappedFun, *args: Any, **params: Any) -> Any:
    """The eager evaluation of a call primitive (CallPrimitive.def_impl(call_impl)): the function called on args
    (the params describe the call, not the function)."""
    return f.call_wrapped(*args)


def _as_call_jaxpr(ir: IR, debug_info: Any = None) -> tuple[Jaxpr, list[Any]]:
    """ir as a call_jaxpr (an open Jaxpr without constvars: ir's constants become its leading inputs) and the
    constants to pass as the call's leading operands."""
    return Jaxpr([], [*ir.const_vars, *ir.in_vars], ir.outs, ir.eqns, debug_info=debug_info), list(ir.consts)


def _eval_call_jaxpr(call_jaxpr: Jaxpr, *args: Any) -> list[Any]:
    return eval_ir(call_jaxpr.closed([]), list(args))


class CallPrimitive(Primitive):
    """A primitive that calls a function (jax.extend.core.CallPrimitive): `p.bind(*args, subfuns=(f,), **params)`,
    f a linear_util.WrappedFun. Outside any staging it runs its impl (`p.def_impl(call_impl)` calls f); while
    staging, f is staged at the arguments' types into the equation's `call_jaxpr` param. The primitive's rules
    follow the jaxpr unless JAX's tables give one (module docstring). Binding an equation again (ember's
    interpreters, eval_jaxpr) passes call_jaxpr instead of subfuns: get_bind_params turns one into the other."""
    call_primitive = True
    skip_canonicalization = True

    def __init__(self, name: str):
        super().__init__(name)
        self.multiple_results = True
        self._call_impl: Callable[..., Any] | None = None

    def def_impl(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        """impl(f, *args, **params), f the WrappedFun called: how the call runs outside any staging."""
        self._call_impl = impl
        self.impl = self._impl_of_equation
        return impl

    def _impl_of_equation(self, *args: Any, call_jaxpr: Jaxpr, **params: Any) -> Any:
        """The impl, run on an equation's operands (ember's eager evaluation of a staged call)."""
        return self._call_impl(wrap_init(functools.partial(_eval_call_jaxpr, call_jaxpr)), *args, **params)

    def get_bind_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """An equation's params as bind takes them: call_jaxpr as the function it stages, `subfuns`."""
        params = dict(params)
        call_jaxpr = params.pop("call_jaxpr")
        params["subfuns"] = (wrap_init(functools.partial(_eval_call_jaxpr, call_jaxpr),
                                       debug_info=call_jaxpr.debug_info),)
        return params

    def bind(self, *args: Any, **params: Any) -> Any:
        staging = bool(TRACE_STATE.stack)
        if "call_jaxpr" in params:  # (an equation bound again)
            if staging:
                return super().bind(*args, **params)
            params = self.get_bind_params(params)
        subfuns = params.pop("subfuns", None)
        if not isinstance(subfuns, (tuple, list)) or len(subfuns) != 1 or not isinstance(subfuns[0], WrappedFun):
            raise TypeError(f"{self.name}.bind: a call primitive is bound with subfuns=(f,), f a WrappedFun "
                            f"(jax.extend.linear_util.wrap_init), got subfuns={subfuns!r}")
        fun = subfuns[0]
        if not staging:
            if self._call_impl is None:
                raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")
            return list(self._call_impl(fun, *args, **params))
        ir = stage_flat(lambda *xs: list(fun.call_wrapped(*xs)), [aval_of(a) for a in args], concrete_values(args),
                        label=f"the function called by {self.name}")
        call_jaxpr, consts = _as_call_jaxpr(ir, fun.debug_info)
        return super().bind(*consts, *args, call_jaxpr=call_jaxpr, **params)

    def _rebind(self, ir: IR, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """A call of ir (a transformed body) by this primitive, with the equation's other params."""
        call_jaxpr, consts = _as_call_jaxpr(ir)
        return list(super().bind(*consts, *args, call_jaxpr=call_jaxpr, **params))

    def _abstract_eval_rule(self, *avals: ShapedArray, call_jaxpr: Jaxpr, **params: Any) -> Any:
        if self._abstract_eval is not None:
            return super()._abstract_eval_rule(*avals, call_jaxpr=call_jaxpr, **params)
        return [v.aval for v in call_jaxpr.outvars]

    def _lowering_rule(self, ctx: LoweringContext, *operands: str, call_jaxpr: Jaxpr, **params: Any) -> list[str]:
        platform = ctx.emitter.platform
        if self in lowerings or self in platform_lowerings.get(platform, {}):
            return super()._lowering_rule(ctx, *operands, call_jaxpr=call_jaxpr, **params)
        return lower_closed(ctx.emitter, call_jaxpr.closed([]), operands)

    def _jvp_rule(self, primals: Sequence[Any], tangents: Sequence[Any], call_jaxpr: Jaxpr, **params: Any
                  ) -> tuple[list, list]:
        if self in primitive_jvps:
            return super()._jvp_rule(primals, tangents, call_jaxpr=call_jaxpr, **params)
        primals = _operand_values(primals)
        with_tangent = [t is not None and dt.is_inexact(aval_of(p).dtype) for p, t in zip(primals, tangents)]
        outs = self._rebind(jvp_ir(call_jaxpr.closed([]), with_tangent),
                            [*primals, *(t for t, w in zip(tangents, with_tangent) if w)], params)
        n = len(call_jaxpr.outvars)
        return outs[:n], outs[n:]

    def _vjp_rule(self, cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], call_jaxpr: Jaxpr,
                  **params: Any) -> list[Any]:
        if self in primitive_jvps:
            return super()._vjp_rule(cts, ins, outs, needs, call_jaxpr=call_jaxpr, **params)
        ins = _operand_values(ins)
        wrt = [need and dt.is_inexact(aval_of(x).dtype) for x, need in zip(ins, needs)]
        _, in_cts = backward_pass(call_jaxpr.closed([]), ins, wrt, cts)
        return in_cts

    def _batching_rule(self, args: list[Any], dims: list[Any], call_jaxpr: Jaxpr, **params: Any
                       ) -> tuple[list, list]:
        if self in fancy_primitive_batchers:
            return super()._batching_rule(args, dims, call_jaxpr=call_jaxpr, **params)
        args = _operand_values(args)
        batched, out_dims = batch_ir(call_jaxpr.closed([]), dims, batch_size(args, dims))
        return self._rebind(batched, args, params), out_dims


# ---------------------------------------------------------------------------------------------------------------
# Rule makers (jax.interpreters.ad)
def _summed(parts: list[Any], multiple: bool) -> Any:
    if multiple:
        return [functools.reduce(add_tangents, column) for column in zip(*parts)]
    return functools.reduce(add_tangents, parts)


def _zero_tangents(primitive: Primitive, out: Any) -> Any:
    """Symbolic zero tangents of a primitive's output(s)."""
    return [Zero.from_primal_value(o) for o in out] if primitive.multiple_results else Zero.from_primal_value(out)


def _summing_jvp(primitive: Primitive, jvprules: Sequence[Callable[..., Any] | None], with_out: bool
                 ) -> Callable[..., tuple[Any, Any]]:
    """The JVP summing one part per operand with a tangent: rule(tangent, [out,] *primals, **params)."""
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        lead = (out,) if with_out else ()
        parts = [r(t, *lead, *primals, **params) for r, t in zip(jvprules, tangents)
                 if r is not None and type(t) is not Zero]
        return out, _summed([_zero_tangents(primitive, out), *parts], primitive.multiple_results)
    return jvp


def defjvp(primitive: Primitive, *jvprules: Callable[..., Any] | None) -> None:
    """The JVP from one rule per operand, rule(tangent, *primals, **params) (None: no derivative), summed."""
    primitive_jvps[primitive] = _summing_jvp(primitive, jvprules, False)


def defjvp2(primitive: Primitive, *jvprules: Callable[..., Any] | None) -> None:
    """As defjvp, each rule also given the output: rule(tangent, out, *primals, **params)."""
    primitive_jvps[primitive] = _summing_jvp(primitive, jvprules, True)


def _linear_jvp(primitive: Primitive, primals: Sequence[Any], tangents: Sequence[Any], **params: Any
                ) -> tuple[Any, Any]:
    out = primitive.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        return out, _zero_tangents(primitive, out)
    return out, primitive.bind(*map(instantiate_zeros, tangents), **params)


def deflinear(primitive: Primitive, transpose_rule: Callable[..., Any]) -> None:
    """A primitive linear in all its operands: its JVP applies it to the tangents; transpose_rule(ct, **params)
    gives one cotangent per operand."""
    primitive_jvps[primitive] = functools.partial(_linear_jvp, primitive)

    def transpose(ct: Any, *args: Any, **params: Any) -> Sequence[Any]:
        return [None] * len(args) if type(ct) is Zero else transpose_rule(ct, **params)
    primitive_transposes[primitive] = transpose


def deflinear2(primitive: Primitive, transpose_rule: Callable[..., Any]) -> None:
    """As deflinear, transpose_rule(ct, *operands, **params) also given the operands (UndefinedPrimal where
    linear)."""
    primitive_jvps[primitive] = functools.partial(_linear_jvp, primitive)

    def transpose(ct: Any, *args: Any, **params: Any) -> Sequence[Any]:
        return [None] * len(args) if type(ct) is Zero else transpose_rule(ct, *args, **params)
    primitive_transposes[primitive] = transpose


def defbilinear(primitive: Primitive, lhs_rule: Callable[..., Any], rhs_rule: Callable[..., Any]) -> None:
    """A primitive linear in each of its two operands (a product): its JVP is bind(tx, y) + bind(x, ty), and
    lhs_rule(ct, x, y, **params) / rhs_rule(...) transpose it (x or y an UndefinedPrimal)."""
    defjvp(primitive, lambda tx, x, y, **params: primitive.bind(tx, y, **params),
           lambda ty, x, y, **params: primitive.bind(x, ty, **params))

    def transpose(ct: Any, x: Any, y: Any, **params: Any) -> list[Any]:
        if type(ct) is Zero:
            return [None, None]
        return [lhs_rule(ct, x, y, **params) if is_undefined_primal(x) else None,
                rhs_rule(ct, x, y, **params) if is_undefined_primal(y) else None]
    primitive_transposes[primitive] = transpose


def get_primitive_transpose(primitive: Primitive) -> Callable[..., Any]:
    try:
        return primitive_transposes[primitive]
    except KeyError:
        raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for '{primitive.name}' not "
                                  "implemented") from None


# ---------------------------------------------------------------------------------------------------------------
# Rule makers and helpers (jax.interpreters.batching)
def bdim_at_front(x: Any, bdim: Any, size: int) -> Any:
    """x with its batch dimension first (an unbatched x broadcast to size members)."""
    return batch_at_front(x, bdim, size)


def broadcast(x: Any, size: int, axis: int, mesh_axis: Any = None) -> Any:
    """x with a new dimension of size at axis (every member alike)."""
    shape = list(np.shape(x))
    axis = axis + len(shape) + 1 if axis < 0 else axis
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    return broadcast_in_dim(x, tuple(shape[:axis]) + (size,) + tuple(shape[axis:]), dims)


def moveaxis(x: Any, src: int, dst: int) -> Any:
    ndim = np.ndim(x)
    return _moveaxis(x, src % ndim, dst % ndim)


def defvectorized(prim: Primitive) -> None:
    """A one-operand primitive acting member by member: the batch dimension passes through."""
    primitive_batchers[prim] = lambda args, dims, **params: (prim.bind(*args, **params), dims[0])


def defbroadcasting(prim: Primitive) -> None:
    """An elementwise primitive: batched operands at the same dimension, unbatched ones broadcast."""
    def rule(args: Sequence[Any], dims: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        size = batch_size(args, dims)
        batched = {(d, np.ndim(x)) for x, d in zip(args, dims) if d is not None}
        if len(batched) == 1 and all(d is not None for d in dims):
            out = prim.bind(*args, **params)
            dim = next(iter(batched))[0]
            return out, [dim] * len(out) if prim.multiple_results else dim
        out = prim.bind(*(batch_at_front(x, d, size) for x, d in zip(args, dims)), **params)
        return out, [0] * len(out) if prim.multiple_results else 0
    primitive_batchers[prim] = rule


# ---------------------------------------------------------------------------------------------------------------
# A custom_jvp call bound again from its equation (get_bind_params), as JAX 0.10's: its function and its rule as
# `subfuns`, JAX's wrapped functions (equinox's finalisation calls the first on the call's operands)
def _custom_jvp_bind_params(params: dict[str, Any]) -> dict[str, Any]:
    fun_ir, num_consts, jvp = params["fun_ir"], params["num_consts"], params["jvp"]

    def lifted_jvp(*xs: Any) -> list[Any]:
        """JAX's lifted rule: (consts..., primals..., the consts' tangents..., tangents...) -> (outputs...,
        output tangents...), a zero tangent as a SymbolicZero both ways."""
        n = len(xs) // 2
        primals, tangents = list(xs[num_consts:n]), list(xs[n + num_consts:])
        outs, touts = jvp(primals, [None if isinstance(t, TypedZero) else t for t in tangents])
        return list(outs) + [SymbolicZero(aval_of(o).to_tangent_aval()) if t is None else t
                             for o, t in zip(outs, touts)]
    return dict(params, subfuns=(wrap_init(lambda *xs: eval_ir(fun_ir, list(xs))), wrap_init(lifted_jvp)))


custom_jvp_call_p.def_rule("bind_params", _custom_jvp_bind_params)
