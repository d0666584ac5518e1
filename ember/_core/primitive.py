"""Primitives and their rules: one protocol for every transformation.

A primitive is an operation of the IR. Every rule a transformation needs is registered on the primitive, beside its
definition, in one style: `@prim.def_rule("jvp")` (or `prim.def_rule("jvp", fn)`). RULE_KINDS lists the rules that
every primitive must carry, or be explicitly marked as not having (`prim.mark("vjp", "not differentiable")`); the
meta test iterates it, so a new transformation adds one entry here. HOOK_KINDS are optional rules that only some
primitives need (higher-order primitives carrying sub-IRs); the passes use them when present.

Rule signatures (params are the equation's params, passed as keywords):
  abstract_eval(*avals, **params) -> aval, or a list of avals when multiple_results
  lowering(ctx: LoweringContext, *operands, **params) -> list of MLIR values, one per output
  jvp(primals, tangents, **params) -> (primal outputs, tangent outputs); a tangent None is a symbolic zero
  vjp(cts, ins, outs, needs, **params) -> one cotangent per input (None: zero or not needed, see `needs`)
  batching(args, dims, **params) -> (outputs, output batch dims); a dim None means "not batched"
  dce(eqn, used_outputs) -> the equation restricted to its used outputs and the inputs they need   [hook]
  vjp_split(ins, active, **params) -> (outputs, pullback), pullback(cts, needs) -> input cotangents: reverse
      mode computes the outputs with the residuals the pullback keeps, instead of re-emitting the equation and
      calling its vjp rule (scan stacks its residuals per step rather than recomputing the body); active marks
      the inputs the backward pass differentiates (a body is split for those alone)              [hook]
  discharge(ins, refs, **params) -> (outputs, final values): an equation whose operands include mutable array
      references (ember.Ref), made pure: ins has each reference replaced by its current value, refs gives per
      operand the index of its reference among the distinct ones (None: a plain operand), and the hook returns
      the outputs and each distinct reference's final value (ember._transforms.discharge)         [hook]
  depends(active, **params) -> for each output, whether it depends differentiably on the inputs marked active:
      the precise activity of a loop's carries or a cond's results (ember._transforms.ad.active_vars)  [hook]
  sharding_rule(*avals, **params) -> the explicit sharding (ShapedArray.explicit: a NamedSharding, or None) of
      each output (a list when multiple_results), given operands of which at least one has one (JAX's explicit
      sharding mode), or ShardingTypeError with JAX's words where no sharding follows (a `out_sharding=` param,
      present only when the user gave one, decides it where the primitive takes one). Without the rule, operands
      all replicated give replicated results and a split operand is a ShardingTypeError; own_sharding primitives
      type their results in their abstract eval (the higher-order ones: from their bodies)            [hook]
  transpose(cts, ins, needs, **params) -> one cotangent per input: the rule reverse mode uses instead of vjp where
      the equation is known to be linear in the inputs marked needs (in a linear IR being transposed:
      ember.linear_transpose, the tangent map of a JVP rule; backward_pass(..., linear=True)); JAX's transpose
      rules, for primitives defined through JAX's extension API (ember.extend), whose JVP rule binds the
      primitive itself on tangents                                                                    [hook]
  key_reuse(eqn) -> the equation's key-reuse Signature (ember._transforms.key_reuse): what a higher-order
      primitive does to the PRNG keys it is given, from its bodies' signatures (first-order primitives have their
      rules in that module's table)                                                                   [hook]"""
from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any, Callable, Sequence

from ember._core.dtypes import ArrayTooLargeError, ShapedArray, ShardingTypeError, StagingOptions, join_vma
from ember._core.ir import Position, Source, sub_irs
from ember._core.sharding import explicit_of, explicit_sharding

RULE_KINDS: tuple[str, ...] = ("abstract_eval", "lowering", "jvp", "vjp", "batching")
HOOK_KINDS: tuple[str, ...] = ("dce", "vjp_split", "discharge", "depends", "sharding_rule", "transpose", "key_reuse",
                               "bind_params", "checkify", "index_bounds")

CHECK_KINDS: tuple[str, ...] = ("nan", "div", "oob")  # what checkify may check of an equation (see above)
NAN_CHECK: tuple[str, ...] = ("nan",)  # the `checks=` of a primitive whose float outputs may be NaN

NOT_DIFFERENTIABLE = "not differentiable"  # the mark for "jvp" and "vjp" of comparisons, iota, ...
NO_DERIVATIVE_RULES = "no derivative rules, as in JAX"  # the mark of geqrf, schur, rng_uniform: differentiating raises


class Primitive:
    """An operation of the IR, with its rules (see the module docstring).

    Three facts, set where the primitive is defined, tell eager dispatch of whole operations (ember._runtime.eager)
    how it may run the primitive's equations without the ordinary op-by-op path:
      moves_data: it only moves data (broadcast_in_dim, reshape).
      fuses_data_movement: an elementwise primitive of one StableHLO op: the data movement feeding it runs in one
          program with it and computes alike (the binary and comparison families, select).
      eager_body: the param holding the sub-IR that its eager execution runs as Python does (custom_jvp_call,
          custom_vjp_call, remat call their function directly outside staging): eager dispatch runs that IR's
          primitives one at a time instead.

    One more tells reverse mode outside jit what it may recompute rather than save:
      elementwise: one output, each element a pure function of the same elements of the inputs (the unary, binary
          and comparison families, select, convert_element_type): `ember.vjp` recomputes such values in the
          pullback instead of keeping them as residuals (see recompute_cheap in ember._transforms.passes).

    And one tells every pass that it has side effects (ember has no effect types; this one fact is the mechanism):
      effectful: its equations act on the world (io_callback, debug_callback: ember._control.callbacks), so they
          are never dropped though their outputs are unused (dce keeps them and what they read, the loop and cond
          dce hooks keep them in their bodies), never merged with an equal one (cse), never evaluated at trace
          time, and reverse mode re-emits them once, on the forward side (backward_pass; split_known leaves them
          on the known side when their inputs are known). `has_effects(prim, params)` also sees the effectful
          equations inside the IRs a higher-order equation carries (a loop body printing); a concrete staging
          (Builder) does not evaluate them while recording, so they run once, when the staged program runs; and
          lowering (ember._hlo.lower.lower_into) orders such loops and branches among the body's callbacks.
      effect_param: the name of a boolean param that makes an equation effectful when true (ffi_call's
          has_side_effect: JAX's FFI calls have effects only when the caller says so); has_effects reads it.

    And one tells staging which primitives take mutable array references (ember._core.refs):
      takes_refs: its operands may be of type Ref (the reference primitives, and the higher-order primitives
          whose bodies read or write references); binding any other primitive on a Ref is a TypeError.

    And one tells how its results vary over the devices of a shard_map body (ShapedArray.vma; ember._core.vma):
      own_vma: its abstract eval gives each output's varying axes itself, and its operands may vary over different
          axes (the collectives, pcast, and the higher-order primitives, whose operands feed their bodies as they
          are). Every other primitive computes on operands varying alike: staging casts an operand varying over
          fewer axes than another (pcast, as JAX's implicit pvary; scalar literals are the same everywhere and are
          left as they are), and its outputs vary over the union (Primitive.out_avals)."""

    def __init__(self, name: str, multiple_results: bool = False, register: bool = True, *, moves_data: bool = False,
                 fuses_data_movement: bool = False, eager_body: str | None = None, elementwise: bool = False,
                 effectful: bool = False, effect_param: str | None = None, takes_refs: bool = False,
                 own_vma: bool = False, own_sharding: bool | None = None, checks: Sequence[str] | None = None):
        self.name = name
        self.multiple_results = multiple_results
        self.moves_data = moves_data
        self.fuses_data_movement = fuses_data_movement
        self.eager_body = eager_body
        self.elementwise = elementwise
        self.effectful = effectful
        self.effect_param = effect_param
        self.takes_refs = takes_refs  # its operands may be mutable array references (ember._core.refs)
        self.own_vma = own_vma  # its abstract eval types its outputs' varying axes (see above)
        # its abstract eval types its outputs' explicit shardings (the higher-order primitives, like own_vma)
        self.own_sharding = own_vma if own_sharding is None else own_sharding
        # its vjp rule takes None for a zero cotangent of any output (custom_vjp_call: bwd sees JAX's symbolic
        # zeros); for other primitives with several outputs, reverse mode makes those cotangents zeros
        self.none_cotangents = False
        self.zero_derivative = False  # its rules give zero derivatives (stop_gradient, floor): outputs are constants
        # (effectful only) its effect needs no order among the host callbacks of a body, so lowering does not order
        # it there (has_effects(..., at_run_time=True)): inspect_sharding's happens when its program is compiled and
        # emits no op; rng_uniform's advances XLA's own generator state
        self.unordered_effect = False
        self.rules: dict[str, Callable[..., Any]] = {}
        # what checkify checks of its equations (see the module docstring); None: undeclared (a primitive defined
        # through ember.extend: none, as JAX's checkify for a primitive it has no rule for)
        self.checks: frozenset[str] | None = None
        if checks is not None:
            self.def_checks(*checks)
        # a Python implementation that eager execution calls instead of compiling the lowering (JAX's def_impl:
        # primitives defined through ember.extend); it runs outside any staging, on concrete values
        self.impl: Callable[..., Any] | None = None
        self.marks: dict[str, str] = {}  # rule kind -> why this primitive has no such rule
        self.mark_errors: dict[str, type[Exception]] = {}  # rule kind -> the error its use raises, if not the default
        if register:  # unregistered primitives are internal to one lowering (a reduction's region body)
            if name in PRIMITIVES:
                raise ValueError(f"a primitive named {name!r} is already registered")
            PRIMITIVES[name] = self

    def __repr__(self) -> str:
        return self.name

    def def_rule(self, kind: str, rule: Callable[..., Any] | None = None) -> Any:
        """Register a rule of the given kind; usable as a decorator (`@prim.def_rule("vjp")`)."""
        if kind not in RULE_KINDS and kind not in HOOK_KINDS:
            raise ValueError(f"{self.name}: unknown rule kind {kind!r}; kinds: {RULE_KINDS + HOOK_KINDS}")
        if rule is None:
            return lambda fn: self.def_rule(kind, fn)
        if kind in self.rules or kind in self.marks:
            raise ValueError(f"primitive {self.name} already has a {kind} rule")
        self.rules[kind] = rule
        return rule

    def def_checks(self, *kinds: str) -> None:
        """Declare what checkify checks of this primitive's equations (a subset of CHECK_KINDS; none at all: no
        kinds). "oob" needs an index_bounds hook (checked by the meta test)."""
        unknown = [k for k in kinds if k not in CHECK_KINDS]
        if unknown:
            raise ValueError(f"{self.name}: unknown check kinds {unknown}; kinds: {CHECK_KINDS}")
        self.checks = frozenset(kinds)

    def get_bind_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The params bind takes for an equation's params (JAX 0.10's method, used to bind an equation again):
        ember's primitives take their sub-IRs as params, so the same, with what a "bind_params" hook adds (a
        custom rule's functions as JAX's `subfuns`, which bind then ignores)."""
        hook = self.rules.get("bind_params")
        return params if hook is None else hook(params)

    def mark(self, kind: str, reason: str, error: type[Exception] = NotImplementedError) -> None:
        """Declare that this primitive has no rule of this kind, and why (e.g. NOT_DIFFERENTIABLE); using the rule
        raises error (a subclass of NotImplementedError)."""
        if kind in self.rules:
            raise ValueError(f"primitive {self.name} has a {kind} rule and cannot be marked {reason!r}")
        if not issubclass(error, NotImplementedError):
            raise TypeError(f"primitive {self.name}: the error of a mark must subclass NotImplementedError")
        self.marks[kind] = reason
        self.mark_errors[kind] = error

    def mark_not_differentiable(self) -> None:
        """Outputs carry no derivative (comparisons, iota, bitwise ops): no jvp or vjp, and transformations treat
        the outputs as constants."""
        self.mark("jvp", NOT_DIFFERENTIABLE)
        self.mark("vjp", NOT_DIFFERENTIABLE)

    @property
    def differentiable(self) -> bool:
        """Whether outputs may carry a derivative: not for a primitive marked not differentiable, nor for one whose
        rules give zero derivatives (zero_derivative: stop_gradient, floor), whose outputs are constants to the
        derivative as well."""
        return self.marks.get("vjp") != NOT_DIFFERENTIABLE and not self.zero_derivative

    def rule(self, kind: str, transformation: str | None = None) -> Callable[..., Any]:
        """The rule of a kind, or a clear NotImplementedError naming the primitive and the transformation."""
        found = self.rules.get(kind)
        if found is None:
            why = self.marks.get(kind, "not implemented")
            error = self.mark_errors.get(kind, NotImplementedError)
            raise error(f"{transformation or kind} of primitive '{self.name}': {why}")
        return found

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply the primitive: recorded into the innermost trace while staging, else executed eagerly."""
        stack = TRACE_STATE.stack
        outs = stack[-1].add_eqn(self, args, params) if stack else EAGER.apply(self, args, params)
        return outs if self.multiple_results else outs[0]

    def out_avals(self, avals: Sequence[ShapedArray], params: dict[str, Any], vma: frozenset | None = None
                  ) -> list[ShapedArray]:
        """The output types of an equation on operands of these types: the abstract eval's, varying over the
        operands' varying axes (vma, when the caller knows it; unless the primitive has its own rule for them:
        own_vma)."""
        try:
            out = self.rule("abstract_eval", "abstract evaluation")(*avals, **params)
        except ArrayTooLargeError as err:  # name the operation making the too-large result
            shapes = ", ".join(a.str_short() for a in avals)
            raise ArrayTooLargeError(f"{self.name}({shapes}): {err}") from None
        outs = list(out) if self.multiple_results else [out]
        if not self.own_sharding:
            for a in avals:
                if a.explicit is not None:
                    outs = self._explicit_outs(avals, outs, params)
                    break
            else:
                if "out_sharding" in params:
                    outs = self._explicit_outs(avals, outs, params)
        if not self.own_vma:
            if vma is None:
                vma = join_vma(avals)
            if vma:
                outs = [o.with_vma(vma) for o in outs]
        return outs


    def _explicit_outs(self, avals: Sequence[ShapedArray], outs: list[ShapedArray], params: dict[str, Any]
                       ) -> list[ShapedArray]:
        """outs typed with the explicit shardings the sharding rule gives (see the module docstring)."""
        meshes = {a.explicit.mesh for a in avals if a.explicit is not None}
        if len(meshes) > 1:
            first, second = list(meshes)[:2]
            raise ValueError(f"Mesh for all inputs should be equal. Got one mesh: {first.abstract_mesh} and another "
                             f"mesh: {second.abstract_mesh}")
        rule = self.rules.get("sharding_rule")
        mesh = next(iter(meshes)) if meshes else None
        if "out_sharding" in params:  # (the user's: it decides, as in JAX)
            shardings = [explicit_of(params["out_sharding"], o.ndim) for o in outs]
        elif rule is not None:
            if getattr(rule, "wants_outs", False):  # (a rule of a family given the outputs' avals: one per output)
                found = list(rule(*avals, outs=outs, **params))
            else:
                found = list(rule(*avals, **params)) if self.multiple_results else [rule(*avals, **params)]
            shardings = [explicit_sharding(mesh, (None,) * o.ndim) if s is None else s for o, s in zip(outs, found)]
        else:
            split = [a for a in avals if a.explicit is not None and any(e is not None for e in a.explicit.spec)]
            if split:
                raise ShardingTypeError(
                    f"{self.name} has no rule for explicit sharding (JAX's sharding in types) and got "
                    f"{', '.join(a.str_short() for a in avals)}: reshard its operands to be replicated "
                    f"(ember.sharding.reshard(x, P())) or run it in ember.sharding.auto_axes")
            shardings = [explicit_sharding(mesh, (None,) * o.ndim) for o in outs]
        return [o.with_explicit(s) for o, s in zip(outs, shardings)]


PRIMITIVES: dict[str, Primitive] = {}


def has_effects(prim: Primitive, params: dict[str, Any], at_run_time: bool = False) -> bool:
    """Whether an equation of prim with these params has side effects: prim is effectful, or an IR the params
    carry has an effectful equation (remembered per IR: IRs are immutable once built). at_run_time: only effects
    that lowering orders among a body's callbacks (not those of unordered_effect primitives: inspect_sharding,
    which emits no op, and rng_uniform)."""
    if prim.effectful or (prim.effect_param is not None and params.get(prim.effect_param)):
        return not (at_run_time and prim.unordered_effect)
    known = _run_time_effects if at_run_time else _ir_effects
    for sub in sub_irs(params):
        found = known.get(sub)
        if found is None:
            found = known[sub] = any(has_effects(e.prim, e.params, at_run_time) for e in sub.eqns)
        if found:
            return True
    return False


_ir_effects: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
_run_time_effects: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


class _EagerSlot:
    """The one upward call of the core: executing a primitive on concrete values outside any staging. The runtime
    layer (ember._runtime.eager) fills it when it is imported; `import ember` does that."""

    def __init__(self) -> None:
        self._apply: Callable[[Primitive, Sequence[Any], dict[str, Any]], list[Any]] = self._unset

    @staticmethod
    def _unset(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        raise RuntimeError(f"{prim.name}: eager execution is not available: import ember (the runtime) first")

    def fill(self, apply: Callable[[Primitive, Sequence[Any], dict[str, Any]], list[Any]]) -> None:
        self._apply = apply

    def apply(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """The outputs of prim applied to concrete values: its Python implementation (Primitive.impl) where it has
        one, run outside any staging (what it binds runs eagerly too), else its lowering compiled and run."""
        if prim.impl is None:
            return self._apply(prim, args, params)
        state = TRACE_STATE
        stack, compile_time_eval = state.stack, state.compile_time_eval
        state.stack, state.compile_time_eval = [], False
        try:
            out = prim.impl(*args, **params)
        finally:
            state.stack, state.compile_time_eval = stack, compile_time_eval
        return list(out) if prim.multiple_results else [out]


EAGER = _EagerSlot()


class _TraceState(threading.local):
    """The stack of active builders (ember._core.trace.Builder), per thread, innermost last: `bind` records into
    the innermost one. `source`, while an IR is evaluated or transformed, is the Source of the equation being
    processed: what it binds is attributed to that user line (see user_source). `scope` is the stack of named
    scopes (ember.named_scope) entered since the innermost staging began: a staged IR's scopes are relative to it,
    so an IR cached under one scope is reused under another, and binding an equation again (inlining, transforming)
    puts its own scopes inside the current ones."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.source: Source | None = None
        self.scope: tuple[str, ...] = ()
        self.compile_time_eval = False  # ember.ensure_compile_time_eval: bind runs on known values even while staging


TRACE_STATE = _TraceState()


EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the package's files start so


class _NotUserCode:
    """The paths whose frames are not the user's code in an equation's source: ember's files, and those a library
    excludes (jax.extend.source_info_util.register_exclusion: flax's files)."""
    paths: tuple[str, ...] = (EMBER_DIR,)


def exclude_from_sources(path: str) -> None:
    """Attribute what code under path binds to the code that called it (as JAX's source_info exclusions)."""
    if path not in _NotUserCode.paths:
        _NotUserCode.paths += (path,)


def user_stacklevel() -> int:
    """The stacklevel that makes a warnings.warn in the calling function point at the innermost frame outside the
    ember package (the user's line)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(EMBER_DIR):
        level, frame = level + 1, frame.f_back
    return level


def user_source() -> Source | None:
    """The user code responsible for the primitive being bound now: the equation being evaluated or transformed
    (TRACE_STATE.source, with its XLA metadata), else the innermost calling frame outside the ember package, with
    the XLA metadata set now (XLA_METADATA); inside the current named scopes (TRACE_STATE.scope)."""
    source, scope = TRACE_STATE.source, TRACE_STATE.scope
    if source is not None:
        return source._replace(scope=scope + source.scope) if scope else source
    frame, skipped = sys._getframe(1), _NotUserCode.paths
    metadata = XLA_METADATA.value
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(skipped):
            return Source(code.co_filename, frame.f_lineno, code.co_name, scope, Position(code, frame.f_lasti),
                          metadata)
        frame = frame.f_back
    return Source("<unknown>", 0, "<unknown>", scope, None, metadata) if metadata else None


class _XlaMetadata:
    """The XLA metadata set now (ember.experimental.xla_metadata.set_xla_metadata): sorted (key, value) strings
    that the equations bound meanwhile carry in their Source. Process-wide, as ember's user contexts, and one of
    the staging options (StagingOptions.contexts): a jitted function called under other metadata is traced again."""
    __slots__ = ("value", "default")

    def __init__(self) -> None:
        self.value: tuple[tuple[str, str], ...] = ()
        self.default: tuple[tuple[str, str], ...] = ()

    def set(self, value: tuple[tuple[str, str], ...]) -> None:
        self.value = value
        StagingOptions.update()


XLA_METADATA = _XlaMetadata()
StagingOptions.contexts.append(XLA_METADATA)


def enter_source(source: Source | None, base: tuple[str, ...]) -> None:
    """Attribute what is bound next to source, inside the scopes base (those current when an interpreter started
    on an IR) and source's own: its scopes move into TRACE_STATE.scope, so that an IR evaluated while this one is
    (a rule inlining a sub-IR) nests inside them."""
    state = TRACE_STATE
    if source is not None and source.scope:
        state.scope, state.source = base + source.scope, source._replace(scope=())
    else:
        state.scope, state.source = base, source


def interpreter_base() -> tuple[str, ...]:
    """The scopes an interpreter over an IR starts in: the current ones, with those of the source being processed
    (see enter_source)."""
    source = TRACE_STATE.source
    return TRACE_STATE.scope + source.scope if source is not None and source.scope else TRACE_STATE.scope
