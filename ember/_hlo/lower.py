"""Lowering: an IR -> a StableHLO text module whose entry function is `main`, or a sub-IR -> a region.

One interpreter (lower_into) walks the equations and calls each primitive's lowering rule with a LoweringContext;
higher-order primitives lower their bodies by recursing into it through ctx.lower_region."""
from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR, Atom, Literal, ShapedArray, Var, check_ir, stage_flat
from ember._core.ir import sub_irs
from ember._core.primitive import has_effects
from ember._core.config import config
from ember._core.profile import profiled
from ember._hlo import row_fusion, targets
from ember._hlo.emitter import (Emitter, dense_text, emit_custom_call, location_text, module_text,
                                over_abstract_mesh, places, sharding_marker, sharding_text, tensor_type)

class DevicesNeeded(ValueError):
    """A program that runs on a number of devices (a call of a program exported for a mesh) lowered for another
    number: JAX's ValueError. The runtime writes a program's one-device module before it knows where the program
    runs, so this one is raised when the program is called on one device."""


DEFAULT_PLATFORM: Any = "default"  # lower's platform: the one set_platform_provider's provider names


def _no_platform() -> str | None:
    return None


_platform: Callable[[], str | None] = _no_platform


def set_platform_provider(provider: Callable[[], str | None]) -> None:
    """The runtime names the platform its programs are compiled for ("cpu", "cuda"): lower's default."""
    global _platform
    _platform = provider


def default_platform() -> str | None:
    return _platform()


class LoweringError(NotImplementedError):
    pass


class LoweringContext:
    """What a lowering rule receives besides its operands: the avals of the equation's inputs and outputs, the
    emitter of the body being built (ctx.op, ctx.constant, ctx.broadcast write ops into it), and region lowering."""
    __slots__ = ("emitter", "avals_in", "avals_out")

    def __init__(self, emitter: Emitter, avals_in: Sequence[ShapedArray], avals_out: Sequence[ShapedArray]):
        self.emitter = emitter
        self.avals_in = list(avals_in)
        self.avals_out = list(avals_out)

    @property
    def aval_out(self) -> ShapedArray:
        """The aval of the only output."""
        return self.avals_out[0]

    def op(self, name: str, operands: Sequence[str], results: Any, attrs: dict[str, str] | None = None,
           regions: Sequence[str] = ()) -> Any:
        return self.emitter.op(name, operands, results, attrs, regions)

    def constant(self, value: Any, aval: ShapedArray) -> str:
        return self.emitter.constant(value, aval)

    def broadcast(self, operand: str, operand_aval: ShapedArray, shape: Sequence[int],
                  dims: Sequence[int] | None = None) -> str:
        return self.emitter.broadcast(operand, operand_aval, shape, dims)

    def region(self, block_avals: Sequence[ShapedArray], build: Callable[[Emitter, list[str]], list[str]]) -> str:
        """The text of a one-block region: build(body emitter, block arguments) emits its ops (lower_into lowers
        an IR there) and returns the values the block returns."""
        body = self.emitter.child()
        block_args = [body.declare(body.fresh("b"), a) for a in block_avals]
        body.returns(build(body, block_args))
        return self.emitter.region(block_args, body)

    @property
    def effect(self) -> str:
        """The value ordering the body's callbacks (effect_value); an ordered op takes it and sets the next one."""
        return effect_value(self.emitter)

    @effect.setter
    def effect(self, value: str) -> None:
        self.emitter.effect = value

    def lower_region(self, ir: IR, captured: Sequence[str] | None = None) -> str:
        """A region computing ir and returning its outputs: its block arguments are ir's inputs, or, with captured
        (values of the enclosing body, as stablehlo.case's branches use), it has none and ir's inputs are bound
        to those values."""
        if captured is None:  # (consts a transformation of ir made are constants of the region: lower_into)
            return self.region(ir.in_avals, lambda body, args: lower_into(body, ir, args))
        return self.region([], lambda body, args: lower_into(body, ir, captured))


def call_function(ctx: LoweringContext, ir: IR, args: Sequence[str], name: str, axis_context: Any = None
                  ) -> list[str]:
    """Emit ir as a private function of the module being built (named after name; one function for the calls of the
    same IR in the same named scope) and a func.call of it on args; its body is lowered with axis_context (see
    Emitter.axis_context; by default the caller's) inside the caller's named scope."""
    callee = private_function(ctx, ir, name, axis_context)
    return ctx.op("func.call", list(args), list(ir.out_avals), {"callee": f"@{callee}"})


def private_function(ctx: LoweringContext, ir: IR, name: str, axis_context: Any = None) -> str:
    """The name of a private function of the module being built that computes ir (see call_function: made once per
    IR and named scope), for a func.call or a stablehlo.composite's decomposition."""
    emitter = ctx.emitter  # (consts a transformation of ir made are constants of its body: lower_into)
    axes = emitter.axis_context if axis_context is None else axis_context
    key = (ir, emitter.scope, emitter.location, axes, emitter.device_assignment)
    callee = emitter.called.get(key)
    if callee is None:
        function = Emitter(functions=emitter.functions, called=emitter.called, shard_groups=emitter.shard_groups)
        function.device_assignment, function.axis_context = emitter.device_assignment, axes
        function.platform = emitter.platform
        function.scope, function.location = emitter.scope, emitter.location
        params = [function.declare(f"%arg{i}", a) for i, a in enumerate(ir.in_avals)]
        outs = lower_into(function, ir, params)
        base = "".join(c if c.isalnum() or c in "_." else "_" for c in name) or "f"
        callee, k = base, 0
        while callee in emitter.functions:
            k += 1
            callee = f"{base}_{k}"
        results = ", ".join(tensor_type(a) for a in ir.out_avals)
        ret = f"    func.return {', '.join(outs)} : {results}" if outs else "    func.return"
        signature = ", ".join(f"{p}: {tensor_type(a)}" for p, a in zip(params, ir.in_avals))
        emitter.functions[callee] = (f"  func.func private @{callee}({signature}) -> ({results}) {{\n"
                                     + "".join(line + "\n" for line in function.lines) + ret + "\n  }\n")
        emitter.called[key] = callee
    return callee


def emit_function(emitter: Any, fn: Callable[..., Sequence[Any]], avals: Sequence[ShapedArray],
                  args: Sequence[str]) -> tuple[list[str], list[ShapedArray]]:
    """Emit fn (flat arrays in, a list of arrays out, written with ember primitives) applied to the values args of
    the given avals; returns the output values and their avals (a lowering written as ember code, as
    jax.interpreters.mlir.lower_fun's: the special functions' expansions, the cumulative scans, approx_top_k)."""
    ir = stage_flat(lambda *xs: list(fn(*xs)), list(avals))
    if ir.consts:
        raise LoweringError("emit_function: the function must not capture arrays (use Python scalars)")
    return lower_into(emitter, ir, list(args)), list(ir.out_avals)


def lower_closed(emitter: Emitter, ir: IR, args: Sequence[str]) -> list[str]:
    """lower_into for an IR whose consts are concrete arrays (not operands): they become constants of the module
    (an exported program's data; a function staged while lowering, as jax.interpreters.mlir.lower_fun's)."""
    consts = [emitter.op("stablehlo.constant", [], v.aval, {"value": dense_text(np.asarray(c), v.aval)})
              for v, c in zip(ir.const_vars, ir.consts)]
    return lower_into(emitter, ir, consts + list(args))


def lower_into(emitter: Emitter, ir: IR, args: Sequence[str]) -> list[str]:
    """Emit ir's equations into emitter, its const_vars and in_vars bound to the values named in args (in that
    order); returns the values of its outputs. An equation in named scopes (its source's, inside the emitter's:
    those of the equation whose region this is) is written with their names as its ops' location.

    args may also name the in_vars' values alone: then ir is a sub-IR whose consts are concrete values a
    transformation of it made (a batching rule's array), emitted as constants (lower_closed)."""
    if ir.const_vars and len(args) == len(ir.in_vars):
        return lower_closed(emitter, ir, args)
    if len(args) != len(ir.const_vars) + len(ir.in_vars):
        raise LoweringError(f"an IR of {len(ir.const_vars)} consts and {len(ir.in_vars)} inputs lowered with "
                            f"{len(args)} values")
    env: dict[Var, str] = dict(zip(list(ir.const_vars) + list(ir.in_vars), args))

    def read(atom: Atom) -> str:
        if isinstance(atom, Literal):
            return emitter.constant(atom.value, atom.aval)
        return env[atom]

    base, base_location = emitter.scope, emitter.location
    if row_fusion.applies(emitter):  # (passes over the body: its row regions as row_region equations, the
        ir = row_fusion.kernel_transposes(row_fusion.row_regions(ir))  # transposes the kernel runs)
    eqns, waits = control_order(ir.eqns)
    try:
        for eqn in eqns:
            rule = eqn.prim.rules.get("lowering")
            if rule is None:
                raise LoweringError(f"primitive {eqn.prim.name} has no lowering rule")
            source = eqn.source
            if source is not None and (source.scope or base):
                emitter.scope = base + source.scope
                emitter.location = location_text(emitter.scope, eqn.prim.name, source.filename, source.lineno)
            else:
                emitter.scope, emitter.location = base, base_location
            ctx = LoweringContext(emitter, [a.aval for a in eqn.inputs], [v.aval for v in eqn.outputs])
            ins = [read(a) for a in eqn.inputs]
            if waits and id(eqn) in waits:  # (a control_dep's destination: its operands wait for the sources)
                ins = _waiting(emitter, waits[id(eqn)], [read(a) for a in waits[id(eqn)]], ins, eqn)
            # (a loop or branch calling back)
            if (sub_irs(eqn.params) and has_effects(eqn.prim, eqn.params, at_run_time=True)
                    and targets.available(CALLBACK_TARGET)):  # (its handler made known to the plugin)
                outs = _in_effect_order(emitter, ctx, rule, ins, eqn.params)
            else:
                outs = rule(ctx, *ins, **eqn.params)
            if source is not None and source.metadata:  # (set_xla_metadata's, on the ops giving the results)
                for out in outs:
                    emitter.frontend_attributes(out, source.metadata)
            if emitter.device_assignment is not None and not eqn.prim.own_sharding:
                outs = _as_typed(emitter, eqn.outputs, outs)
            env.update(zip(eqn.outputs, outs))
    finally:
        emitter.scope, emitter.location = base, base_location
    return [read(a) for a in ir.outs]


# ---------------------------------------------------------------------------------------------------------------
# Control dependencies (jax.experimental.control_deps: a control_dep(src, dst) equation, ember/_prims/effects.py):
# the equation that computes dst runs after the one that computes src. XLA's control edges are not StableHLO, so
# the body is written in an order with src's equation first, and dst's equation takes its operands through a
# stablehlo.optimization_barrier together with src (XLA computes every operand of a barrier before any of its
# results is read). An equation without operands (a constant, an iota) has nothing to hold back.
CONTROL_DEP = "control_dep"


def control_order(eqns: Sequence[Any]) -> tuple[Sequence[Any], dict[int, list[Atom]]]:
    """The equations in an order where each control_dep's source comes before its destination (the given order
    where it already does; otherwise the least reordering, by position), and, by id of each destination's
    equation, the sources it waits for. A source that depends on its destination is a LoweringError (a cycle)."""
    if not any(eqn.prim.name == CONTROL_DEP for eqn in eqns):
        return eqns, {}
    producer = {var: i for i, eqn in enumerate(eqns) for var in eqn.outputs}
    after: list[set[int]] = [set() for _ in eqns]  # i -> the equations that must come before i
    for i, eqn in enumerate(eqns):
        after[i].update(producer[a] for a in eqn.inputs if isinstance(a, Var) and a in producer)
    waits: dict[int, list[Atom]] = {}
    for eqn in eqns:
        if eqn.prim.name != CONTROL_DEP:
            continue
        src, dst = eqn.inputs
        if not (isinstance(dst, Var) and dst in producer):
            continue  # (an input of the body, or a constant: computed before anything)
        d = producer[dst]
        if isinstance(src, Var) and src in producer:
            s = producer[src]
            if s == d or _reaches(after, s, d):
                raise LoweringError(f"control_dep: the source {src} ({eqns[s].prim.name}) depends on the destination "
                                    f"{dst} ({eqns[d].prim.name}), so it cannot run before it (a cycle)")
            after[d].add(s)
        waits.setdefault(id(eqns[d]), []).append(src)
    order, ready = [], [i for i, deps in enumerate(after) if not deps]
    heapq.heapify(ready)
    users: list[list[int]] = [[] for _ in eqns]
    for i, deps in enumerate(after):
        for j in deps:
            users[j].append(i)
    missing = [len(deps) for deps in after]
    while ready:
        i = heapq.heappop(ready)
        order.append(eqns[i])
        for k in users[i]:
            missing[k] -= 1
            if not missing[k]:
                heapq.heappush(ready, k)
    if len(order) != len(eqns):  # (cannot happen: every added edge was checked above)
        raise LoweringError("control_dep: the control dependencies of this body form a cycle")
    return order, waits


def _reaches(after: list[set[int]], start: int, target: int) -> bool:
    """Whether equation target must come before equation start (start depends on it through a chain of
    operands or earlier control dependencies)."""
    seen, stack = set(), [start]
    while stack:
        i = stack.pop()
        if i == target:
            return True
        if i not in seen:
            seen.add(i)
            stack.extend(after[i])
    return False


def _waiting(emitter: Emitter, source_atoms: list[Atom], sources: list[str], operands: list[str], eqn: Any
             ) -> list[str]:
    """eqn's operands passed through one optimization barrier with the sources (so eqn waits for them)."""
    if not operands:
        return operands
    avals = [a.aval for a in source_atoms] + [a.aval for a in eqn.inputs]
    out = emitter.op("stablehlo.optimization_barrier", sources + operands, avals)
    return list(out)[len(sources):]


def _as_typed(emitter: Emitter, outputs: Sequence[Var], values: list[str]) -> list[str]:
    """Each value whose type has an explicit sharding (JAX's explicit sharding mode), constrained to it (a custom
    call @Sharding, as JAX's lowering constrains every result in that mode), in a program over several devices."""
    devices = emitter.device_assignment
    for k, var in enumerate(outputs):
        explicit = var.aval.explicit
        if explicit is None or len(devices) <= 1 or (over_abstract_mesh(explicit) and not places(explicit, devices)):
            continue
        values[k] = sharding_marker(emitter, values[k], var.aval, sharding_text(explicit, var.aval.ndim, devices))
    return values


EFFECT = ShapedArray((), np.dtype(np.int8))  # the value that orders a body's callbacks (see effect_value)
CALLBACK_TARGET = "ember_callback"  # the host-callback handler (ember/_runtime/callbacks.py); its callback 0 copies


def effect_value(emitter: Emitter) -> str:
    """The int8 scalar that orders the callbacks of the body being emitted (Emitter.effect): each ordered callback
    takes it and returns the next one, and so does each loop or branch calling back (see _in_effect_order). A real
    value, not a !stablehlo.token: XLA's CPU runtime orders its thunks by the buffers they read and write, and a
    token has none (measured: token-chained callbacks ran before a loop they followed)."""
    if emitter.effect is None:
        emitter.effect = emitter.constant(0, EFFECT)
    return emitter.effect


def order_call(emitter: Emitter, values: Sequence[str], results: Sequence[ShapedArray]) -> list[str]:
    """The handler's copy (callback 0): results[i] = values[i], computed once the values are; with the effect value
    first among both, it ties the rest to the body's callbacks."""
    return emit_custom_call(emitter, CALLBACK_TARGET, values, results, {"callback": 0}, has_side_effect=True)


def _in_effect_order(emitter: Emitter, ctx: LoweringContext, rule: Callable[..., Any], operands: list[str],
                     params: dict[str, Any]) -> list[str]:
    """Lower an equation whose loop bodies or branches call back, in the order of the body's callbacks: its
    operands are copied once the effect value is ready (so it starts after the callbacks before it), and the next
    effect value is copied from its op's first result (so the callbacks after it start once it is done; a branch
    without results gets one for this, see cond's lowering)."""
    if operands:
        operands = order_call(emitter, [effect_value(emitter), *operands], [EFFECT, *ctx.avals_in])[1:]
    start = emitter.ops
    outs = rule(ctx, *operands, **params)
    if emitter.ops > start and emitter.last_results:  # (the loop's or case's op, or one reading its results)
        emitter.effect = order_call(emitter, [effect_value(emitter), emitter.last_results[0]], [EFFECT])[0]
    return outs


@profiled("lower", "lower to StableHLO")
def lower(ir: IR, donors: Sequence[bool] | None = None, inline_consts: bool = False, spmd: Any = None,
          platform: str | None = DEFAULT_PLATFORM) -> str:
    """The module for ir: consts come first among main's arguments, then the inputs (donors: per input, whether
    its buffer is donated to the program; see module_text). With inline_consts the consts are constants of the
    module instead (its arguments are the inputs alone: an exported program carries its data). With the
    enable_checks option, ir is type-checked first (check_ir). spmd (an ember._hlo.spmd.SpmdPlan): the program is
    partitioned over its devices, with the shardings it gives for the inputs and outputs (the consts are
    replicated). platform: the one the module is compiled for, whose preferred forms some lowerings write
    (ember._hlo.backend_forms); by default the runtime's default backend; None: a portable module (an export)."""
    if config.read_canonical("enable_checks"):
        check_ir(ir)
    emitter = Emitter()
    emitter.device_assignment = None if spmd is None else spmd.devices
    emitter.platform = default_platform() if platform is DEFAULT_PLATFORM else platform
    params = list(ir.in_vars) if inline_consts else list(ir.const_vars) + list(ir.in_vars)
    arg_names = [emitter.declare(f"%arg{i}", v.aval) for i, v in enumerate(params)]
    if inline_consts:
        out_names = lower_closed(emitter, ir, arg_names)
    else:
        out_names = lower_into(emitter, ir, arg_names)
    donated = None if donors is None else [False] * (len(params) - len(ir.in_vars)) + list(donors)
    if spmd is None:
        return module_text([v.aval for v in params], ir.out_avals, emitter, arg_names, out_names, donated)
    in_shardings = ["{replicated}"] * (len(params) - len(ir.in_vars)) + list(spmd.in_shardings)
    return module_text([v.aval for v in params], ir.out_avals, emitter, arg_names, out_names, donated,
                       len(spmd.devices), in_shardings, spmd.out_shardings)
