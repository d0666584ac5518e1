"""stage_out, make_ir and jit: functions staged out to IR, compiled with XLA once per argument signature."""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import warnings
from typing import Any, Callable, Iterator, Sequence

from ember._core import IR, ShapedArray, aval_of
from ember._core import monitoring
from ember._core.primitive import TRACE_STATE
from ember._core.jaxpr_print import ClosedJaxpr
from ember._core.pytree import PyTreeDef, tree_flatten, tree_leaves, tree_structure
from ember._api.signature import NotFast, add_tokens, output_builder, sorted_keys
from ember._api.caches import SIGNATURES_PER_FUNCTION, cache_for, signature_key
from ember._core.trace import has_tracer_consts
from ember._api.staging import (as_tuple, call_positions, check_ref_arguments, fun_name, leaf_avals, leaf_names,
                                stage_with_aux, with_outputs, wraps)
from ember._api.templates import compile_staged
from ember._core.cache import LRUCache, clear_all_caches
from ember._core.config import config
from ember._core.dtypes import StagingOptions
from ember._api.recompiles import CacheInfo, CompileLog, on_hit, on_miss
from ember._api.stages import Lowered, Traced, abstractify, donor_plan, warn_unusable
from ember._api.sharding import check_shardings, leaf_shardings
from ember._control.pjit import call_jitted
from ember._core.sharding import MeshContexts, Sharding, SingleDeviceSharding, placement_token
from ember._runtime import Array, ShardedArray
from ember._runtime.backends import devices as backend_devices
from ember._runtime.compiler import compile_options
from ember._runtime.pjrt.device import Device
from ember._runtime.pjrt.structs import option_overrides
from ember._runtime.spmd import program_placement
from ember._transforms import key_reuse
from ember._transforms.key_reuse import TrackedKey
from ember._transforms.passes import dce_outputs


def _is_aval(x: Any) -> bool:
    return isinstance(x, ShapedArray)


def stage_out(fun: Callable[..., Any], *avals: Any) -> IR:
    """Stage fun out to an IR at the given abstract values (ShapedArrays, arrays, or pytrees of them)."""
    leaves, in_tree = tree_flatten((avals, {}), is_leaf=_is_aval)
    try:
        in_avals = [x if isinstance(x, ShapedArray) else aval_of(x) for x in leaves]
    except TypeError as err:
        raise TypeError(f"stage_out({fun_name(fun)}): arguments must be ShapedArrays or arrays: {err}") from None
    ir, store = stage_with_aux(fun, in_tree, in_avals, False, f"stage_out({fun_name(fun)})")
    return with_outputs(ir, ir.outs, store.tree)


def make_ir(fun: Callable[..., Any], static_argnums: int | Sequence[int] = ()) -> Callable[..., IR]:
    """make_ir(f)(*args) is the IR of f at the arguments' shapes and dtypes (like jax.make_jaxpr)."""
    jitted = jit(fun, static_argnums=static_argnums)

    def make(*args: Any, **kwargs: Any) -> IR:
        return jitted.trace_ir(*args, **kwargs)
    return make


def make_jaxpr(fun: Callable[..., Any], static_argnums: int | Sequence[int] = (), axis_env: Any = None,
               return_shape: bool = False, abstracted_axes: Any = None) -> Callable[..., Any]:
    """make_jaxpr(f)(*args) is f's IR at the arguments' types (as jax.make_jaxpr; ember's IR is its jaxpr, and it
    prints as JAX prints one: { lambda ; a:f32[3]. let ... in (b,) }), for arrays, numbers or ShapeDtypeStructs;
    with return_shape, (IR, pytree of the results' ShapeDtypeStructs).
    Named-axis environments and abstracted axes (shape polymorphism) are not supported."""
    if axis_env or abstracted_axes is not None:
        raise NotImplementedError("make_jaxpr: axis_env and abstracted_axes are not supported by ember")
    jitted = jit(fun, static_argnums=static_argnums)

    @wraps(fun)
    def make(*args: Any, **kwargs: Any) -> Any:
        traced = jitted.trace(*args, **kwargs)
        ir = traced.jaxpr  # (the caller's own IR, of plain lists, as JAX's ClosedJaxpr: not the cache's shared one)
        ir = ClosedJaxpr(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, ir.outs, ir.out_tree)  # (prints as JAX)
        return (ir, traced.out_info) if return_shape else ir
    return make


def _static_args(fun: Callable[..., Any], nums: tuple[int, ...], names: tuple[str, ...], name: str,
                 kind: str = "static") -> tuple[tuple[int, ...], tuple[str, ...]]:
    """As JAX: a static argument named in static_argnames is static when passed by position too, and one numbered
    in static_argnums when passed by keyword (matched through fun's signature, where it has one). Where it has
    one, static_argnums must be positions of its parameters (any non-negative one with *args) and
    static_argnames names it accepts by keyword (any name with **kwargs), else ValueError, as in JAX."""
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):
        return nums, names
    kinds = inspect.Parameter
    every = list(signature.parameters.values())
    params = [p for p in every if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    if not any(p.kind is kinds.VAR_POSITIONAL for p in every):
        for i in nums:
            if not -len(params) <= i < len(params):
                raise ValueError(f"{name}: {kind}_argnums={nums} includes {i}, but {fun_name(fun)} accepts only "
                                 f"{len(params)} positional argument{'s' if len(params) != 1 else ''}"
                                 f"{' (' + ', '.join(p.name for p in params) + ')' if params else ''}")
    positional_only = [n for n in names if n in signature.parameters
                       and signature.parameters[n].kind in (kinds.POSITIONAL_ONLY, kinds.VAR_POSITIONAL)]
    if positional_only:
        raise ValueError(f"{name}: {kind}_argnames {positional_only} of {fun_name(fun)} are positional-only (use "
                         f"{kind}_argnums)")
    if not any(p.kind is kinds.VAR_KEYWORD for p in every):
        keywords = {p.name for p in every if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
        unknown = [n for n in names if n not in keywords]
        if unknown:
            raise ValueError(f"{name}: {kind}_argnames {unknown} are not parameters of {fun_name(fun)} (it takes "
                             f"{', '.join(repr(p.name) for p in every) or 'no parameters'})")
    positions = {p.name: i for i, p in enumerate(params)}
    nums = tuple(sorted(set(nums) | {positions[n] for n in names if n in positions}))
    names = tuple(dict.fromkeys(names + tuple(params[i].name for i in nums if 0 <= i < len(params)
                                              and params[i].kind is not params[i].POSITIONAL_ONLY)))
    return nums, names


class PjitFunction:
    """A function compiled with XLA per argument signature (tree structure, shapes, dtypes, static values): what
    jit returns (JAX's type name, by which libraries such as chex recognise a jitted function; ember calls it
    Jitted)."""

    def __init__(self, fun: Callable[..., Any], static_argnums: int | Sequence[int] = (),
                 static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
                 donate_argnames: str | Sequence[str] = (), in_shardings: Any = None, out_shardings: Any = None,
                 inline: bool = False, keep_unused: bool = False, device: Any = None, backend: str | None = None,
                 compiler_options: dict[str, Any] | None = None):
        if not callable(fun):
            raise TypeError(f"jit: expected a function, got {type(fun).__name__}")
        self.fun = fun
        self.name = f"jit({fun_name(fun)})"
        static_argnums, static_argnames, donate_argnums, donate_argnames = (  # (None: none, JAX's default)
            () if v is None else v for v in (static_argnums, static_argnames, donate_argnums, donate_argnames))
        self.static_argnums, self.static_argnames = _static_args(fun, as_tuple(static_argnums), (
            (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)), self.name)
        self.donate_argnums, self.donate_argnames = _static_args(fun, as_tuple(donate_argnums), (
            (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames)), self.name, "donate")
        both = set(self.static_argnums) & set(self.donate_argnums) or set(self.static_argnames) & set(
            self.donate_argnames)
        if both:
            raise ValueError(f"{self.name}: arguments {sorted(both, key=str)} are both static and donated (a static "
                             "argument is not a buffer)")
        self._cache = cache_for(fun, ("jit", self.static_argnums, self.static_argnames), self.name,
                                traced_once=True)
        # the fast path: dispatch key (see ember._api.signature) -> (run the program on the flat leaves, build the
        # result from its flat outputs); a miss takes the general path, which fills it
        self._dispatch = LRUCache(SIGNATURES_PER_FUNCTION)
        self._programs = LRUCache(SIGNATURES_PER_FUNCTION)  # signature_key(signature) -> _Program
        self._statics_by_count = LRUCache(SIGNATURES_PER_FUNCTION)  # number of positional arguments -> static ones
        self._log = CompileLog()  # hits, misses, the last compiled signature (explained cache misses)
        self.in_shardings, self.out_shardings = check_shardings(self.name, in_shardings, out_shardings)
        self.inline = bool(inline)
        self.keep_unused = bool(keep_unused)
        self._placement = _check_placement(self.name, device, backend, in_shardings, out_shardings)
        if compiler_options is not None and not isinstance(compiler_options, dict):
            raise TypeError(f"{self.name}: compiler_options must be a dict of XLA option names to values, got "
                            f"{type(compiler_options).__name__}")
        self.compiler_options = dict(compiler_options) if compiler_options else None
        wraps(fun, updated=())(self)  # (not __dict__: copying it could clobber our attributes)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
        if not self.static_argnums and not self.static_argnames:
            return (), args, kwargs
        n = len(args)
        for i in self.static_argnums:
            if i < -n:  # (a position past the end is a parameter left to its default, or *args not given)
                raise ValueError(f"{self.name}: static_argnums={self.static_argnums} includes {i}, but the call "
                                 f"passes only {n} positional argument{'s' if n != 1 else ''}")
        static_pos = tuple(sorted({i % n for i in self.static_argnums if -n <= i < n}))
        statics = tuple((i, args[i]) for i in static_pos) + tuple(
            (k, kwargs[k]) for k in sorted(kwargs) if k in self.static_argnames)
        for where, value in statics:
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"{self.name}: static argument {where!r} must be hashable, got a "
                                f"{type(value).__name__}") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return statics, dyn_args, dyn_kwargs

    def _rebuild(self, statics: tuple[Any, ...]) -> Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]:
        def rebuild(dynamic: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
            args, kwargs = dynamic
            args, kwargs = list(args), dict(kwargs)
            for where, value in statics:
                if isinstance(where, int):
                    args.insert(where, value)
                else:
                    kwargs[where] = value
            return tuple(args), kwargs
        return rebuild

    def _build(self, in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], statics: tuple[Any, ...]) -> IR:
        if _config_values["no_tracing"]:
            raise RuntimeError(f"re-tracing function {self.name} for `jit`, but the no_tracing option is set "
                               f"(signature: {', '.join(a.str_short() for a in avals)})")
        rebuild = self._rebuild(statics)

        def with_statics(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = rebuild((args, kwargs))
            return self.fun(*args, **kwargs)
        with monitoring.timed(monitoring.TRACE_EVENT, fun_name(self.fun)):
            ir, store = stage_with_aux(with_statics, in_tree, avals, False, self.name,
                                       named_like=None if statics else self.fun)
        return with_outputs(ir, ir.outs, store.tree)

    def _signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any], tuple[Any, ...]]:
        statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = leaf_avals(self.name, dyn_args, dyn_kwargs, leaves)
        return (in_tree, avals, statics), leaves, statics

    def _static_positions(self, n: int) -> frozenset[int]:
        """The positions of the static arguments in a call with n positional arguments; NotFast when
        static_argnums names one before the first (the general path raises the error)."""
        positions = self._statics_by_count.get(n)
        if positions is None:
            if any(i < -n for i in self.static_argnums):
                raise NotFast
            positions = frozenset(i % n for i in self.static_argnums if -n <= i < n)
            self._statics_by_count.store(n, positions)
        return positions

    def _dispatch_key(self, args: tuple[Any, ...], kwargs: dict[str, Any], x64: Any
                      ) -> tuple[tuple[Any, ...], list[Any]]:
        """(key, leaves) of a call in one pass: the key holds the staging options (StagingOptions.token: the
        enable_x64 flag, with the numpy promotion rules when they are not the defaults), the number of positional
        arguments, each positional argument's tokens (a static one: its value), then each keyword argument's
        name and tokens (a static one: its value), by sorted name; the leaves are the dynamic arguments' leaves in
        the order of the general path's tree_flatten((args, kwargs)). NotFast (or TypeError) where the general
        path must decide."""
        tokens: list[Any] = [x64, len(args)]
        leaves: list[Any] = []
        if not self.static_argnums:
            for arg in args:
                if type(arg) is Array:  # (the common argument, without a call)
                    tokens.append(arg.aval)
                    leaves.append(arg)
                else:
                    add_tokens(arg, tokens, leaves)
        else:
            static = self._static_positions(len(args))
            for i, arg in enumerate(args):
                if i not in static:
                    add_tokens(arg, tokens, leaves)
                elif type(arg) is Array:
                    raise NotFast  # (unhashable: the general path says so)
                else:
                    tokens.append(arg)
        if kwargs:
            names = self.static_argnames
            for name in sorted_keys(tuple(kwargs)) if len(kwargs) > 1 else kwargs:
                tokens.append(name)
                if name in names:
                    tokens.append(kwargs[name])
                else:
                    add_tokens(kwargs[name], tokens, leaves)
        return tuple(tokens), leaves

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        options = _config_values
        if options["disable_jit"]:
            return self.fun(*args, **kwargs)
        if options["debug_key_reuse"] and not TRACE_STATE.stack:
            return self._call_checking_keys(args, kwargs)
        return self._call(args, kwargs)

    def _call_checking_keys(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call with the key-reuse checker on (ember._transforms.key_reuse): the function's IR is checked, the
        keys given are checked against what it consumes, then marked consumed, and the keys it returns are fresh,
        consumed, or in the state of the argument they alias, as the IR says."""
        signature, _, statics = self._signature(args, kwargs)
        ir = self._cache.ir_for(signature, self._build, signature[0], signature[1], statics)
        keys = key_reuse.ir_signature(ir, self.name)
        _, dyn_args, dyn_kwargs = self._split(args, kwargs)
        keys_in = [x if isinstance(x, TrackedKey) else None
                   for x in tree_leaves((dyn_args, dyn_kwargs), is_leaf=lambda x: isinstance(x, TrackedKey))]
        key_reuse.check_arguments(self.name, keys, keys_in)
        out = self._call(args, kwargs)
        keys_out = [x if isinstance(x, TrackedKey) else None
                    for x in tree_leaves(out, is_leaf=lambda x: isinstance(x, TrackedKey))]
        key_reuse.update_keys(keys, keys_in, keys_out)
        return out

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        key = None
        if not TRACE_STATE.stack:  # (while staging, the general path inlines the function)
            try:
                key, leaves = self._dispatch_key(args, kwargs, StagingOptions.token if not MeshContexts.active
                                                 else (StagingOptions.token, placement_token()))
                entry = self._dispatch.get(key)  # (hashing the key hashes the static values)
            except (NotFast, TypeError):
                key = None
            else:
                if entry is not None:
                    run, build_output = entry
                    self._log.hits += 1  # (recompiles.on_hit, inlined on the fast path)
                    self._log.streak = 0
                    return build_output(run(leaves))
        signature, leaves, statics = self._signature(args, kwargs)
        check_ref_arguments(self.name, self.fun, signature[0], leaves)
        if TRACE_STATE.stack and self.inline and self.in_shardings is None and self.out_shardings is None and \
                self._placement is None:
            return self.fun(*args, **kwargs)  # (inline=True: traced into the enclosing staging, no pjit equation)
        if TRACE_STATE.stack:  # (one pjit equation of the enclosing staging)
            ir = self._cache.ir_for(signature, self._build, signature[0], signature[1], statics)
            shardings = self._leaf_shardings(ir, signature[0])
            outs = call_jitted(ir, leaves, fun_name(self.fun), *(shardings or (None, None)))
            return ir.out_tree.unflatten(outs) if ir.out_tree is not None else outs
        run, build_output = self._program(signature, statics, key, any(type(x) is ShardedArray for x in leaves))
        return build_output(run(leaves))

    def _program(self, signature: tuple[Any, ...], statics: tuple[Any, ...], dispatch_key: Any,
                 sharded: bool = False) -> _Program:
        """How a call of this signature runs (compiled on its first call); kept for the signature's later calls,
        and for the fast path's under dispatch_key (when not None). sharded: the call has sharded arguments (its
        program for one device is compiled only when a call on one device comes)."""
        key = signature_key(signature)
        program = self._programs.lookup(key)
        if program is None:
            on_miss(self._log, self.name, self.fun, signature, _config_values["enable_x64"])
            ir = self._cache.ir_for(signature, self._build, signature[0], signature[1], statics)
            shardings = self._leaf_shardings(ir, signature[0])
            if self.compiler_options and (sharded or shardings is not None or program_placement(ir) is not None):
                raise NotImplementedError(f"{self.name}: compiler_options for a program partitioned over several "
                                          "devices are not supported; set XLA options with the XLA_FLAGS environment "
                                          "variable before the first compile")
            with compile_options(option_overrides(self.compiler_options) if self.compiler_options else b""):
                program = _compile_program(ir, self.name, self._donated_leaves(signature[0], statics), shardings,
                                           sharded, self._naming(signature[0], statics), self.keep_unused)
            if has_tracer_consts(ir):  # (it belongs to the trace whose tracers it captured)
                return program
            self._programs.store(key, program)
        else:
            on_hit(self._log)
        if dispatch_key is not None:
            self._dispatch.store(dispatch_key, program)
        return program

    def _naming(self, in_tree: PyTreeDef, statics: tuple[Any, ...]) -> _Naming:
        """How errors name the function and its argument leaves (JAX's incompatible-devices error: "argument a of
        f"): the function's qualified name, and its parameters' names with key paths, computed when an error needs
        them (with static arguments, "args[i]")."""
        fun = self.fun
        label = getattr(fun, "__qualname__", None) or fun_name(fun)
        if statics:
            return label, None
        return label, lambda: [name.removeprefix("argument ") for name in leaf_names(fun, in_tree)]

    def cache_info(self) -> CacheInfo:
        """The compiled-signature cache's statistics (as functools' cache_info): calls that found a compiled
        program (hits), calls that compiled one (misses), the limit (jit_cache_size) and the programs kept."""
        return CacheInfo(self._log.hits, self._log.misses, config.jit_cache_size, len(self._programs))

    def cache_clear(self) -> None:
        """Forget this function's compiled programs and staged IRs (the next calls compile again)."""
        self._programs.clear()
        self._dispatch.clear()
        self._cache.irs.clear()
        self._cache.executables.clear()

    def _donated_leaves(self, in_tree: PyTreeDef, statics: tuple[Any, ...]) -> list[bool] | None:
        """Per leaf of the dynamic arguments, whether it is donated (donate_argnums / donate_argnames); None when
        nothing is."""
        if not self.donate_argnums and not self.donate_argnames:
            return None
        dyn_args, dyn_kwargs = in_tree.unflatten(list(range(in_tree.num_leaves)))
        positions = call_positions(len(dyn_args), statics)
        total = len(positions) + sum(isinstance(where, int) for where, _ in statics)
        nums = {i % total for i in self.donate_argnums if -total <= i < total}
        donated = [False] * in_tree.num_leaves
        chosen = [arg for position, arg in zip(positions, dyn_args) if position in nums]
        chosen += [arg for key, arg in dyn_kwargs.items() if key in self.donate_argnames]
        for index in tree_flatten(chosen)[0]:
            donated[index] = True
        return donated

    def _leaf_shardings(self, ir: IR, in_tree: PyTreeDef) -> tuple[list[Any] | None, list[Any] | None] | None:
        """(per input leaf, per output leaf) the sharding jit's in_shardings / out_shardings give (None where they
        give none), or None when neither is given."""
        if self._placement is not None:  # (device= / backend=: everything on that one device)
            device = _placement_device(self._placement)
            return [SingleDeviceSharding(device)] * in_tree.num_leaves, [SingleDeviceSharding(device)] * len(ir.outs)
        if self.in_shardings is None and self.out_shardings is None:
            return None
        ins = None
        if self.in_shardings is not None:  # (a prefix of the positional arguments; keyword arguments get none)
            positional = in_tree.unflatten(range(in_tree.num_leaves))[0]
            count = tree_structure(positional).num_leaves
            ins = leaf_shardings(self.name, "in_shardings", self.in_shardings, positional, count) + [None] * (
                in_tree.num_leaves - count)
        outs = None if self.out_shardings is None else leaf_shardings(
            self.name, "out_shardings", self.out_shardings,
            ir.out_tree.unflatten(range(len(ir.outs))) if ir.out_tree is not None else tuple(range(len(ir.outs))),
            len(ir.outs))
        if all(s is None for s in (ins or ())) and all(s is None for s in (outs or ())):
            return None  # (trees of None only, as flax.nnx.jit passes: nothing is placed)
        return ins, outs

    def trace_ir(self, *args: Any, **kwargs: Any) -> IR:
        """The IR this function stages out to for these arguments (arrays, numbers or ShapeDtypeStructs)."""
        return self._trace(args, kwargs)[0]

    def _trace(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[IR, PyTreeDef, tuple[Any, ...]]:
        """(the IR, the dynamic arguments' tree, the static arguments) for a call with these arguments."""
        args, kwargs = abstractify((args, kwargs))
        key, _, statics = self._signature(args, kwargs)
        return self._cache.ir_for(key, self._build, key[0], key[1], statics), key[0], statics

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """The function traced for these arguments (arrays, numbers or ShapeDtypeStructs, in any pytree), as
        jax.jit(f).trace: `.jaxpr` is its IR, `.lower()` its StableHLO."""
        ir, in_tree, statics = self._trace(args, kwargs)
        donated = self._donated_leaves(in_tree, statics)
        return Traced(self.name, ir, in_tree, lambda: Lowered(ir, self.name, in_tree, donated), donated)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """The StableHLO module for these arguments (.as_text()); .compile() gives the executable, called as this
        function is without its static arguments."""
        ir, in_tree, statics = self._trace(args, kwargs)
        return Lowered(ir, self.name, in_tree, self._donated_leaves(in_tree, statics),
                       self._lowering_shardings(ir, in_tree, args, kwargs))

    def _lowering_shardings(self, ir: IR, in_tree: PyTreeDef, args: tuple[Any, ...], kwargs: dict[str, Any]
                            ) -> tuple[list[Any] | None, list[Any] | None] | None:
        """(per input leaf, per output leaf) the shardings a lowering for these arguments is partitioned with: jit's
        in_shardings / out_shardings, else the arguments' own shardings over several devices (sharded arrays,
        ShapeDtypeStructs with a sharding); None when there are none."""
        given = self._leaf_shardings(ir, in_tree)
        ins, outs = given if given is not None else (None, None)
        dynamic = self._split(args, kwargs)[1:]
        own = [getattr(x, "sharding", None) for x in tree_flatten(dynamic)[0]]
        own = [s if isinstance(s, Sharding) and len(s._device_assignment) > 1 else None for s in own]
        if ins is None and any(s is not None for s in own):
            ins = own
        elif ins is not None:
            ins = [s if s is not None else o for s, o in zip(ins, own)]
        if ins is None and outs is None:
            return None
        return ins, outs

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The ShapeDtypeStructs of the results for these arguments (staged, not compiled)."""
        return self.trace(*args, **kwargs).out_info

    @property
    def __signature__(self) -> inspect.Signature:
        """The wrapped function's signature (as JAX's, also for inspect.signature(f, follow_wrapped=False): a
        descriptor class would otherwise pass for a builtin)."""
        return inspect.signature(self.fun)

    def __repr__(self) -> str:
        return f"<PjitFunction of {self.fun!r}>"  # (JAX's: libraries recognise a jitted function by it)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


Jitted = PjitFunction

_Program = tuple[Callable[[Sequence[Any]], list[Any]], Callable[[list[Any]], Any]]
_Naming = tuple[str, Callable[[], list[str]] | None]  # (the function's name, a function giving its leaves' names)


def _named(compiled: Any, naming: _Naming | None, kept: Sequence[int] | None = None) -> Any:
    """compiled, its errors naming the function and the argument leaves it takes (kept: their positions among the
    leaves; None: all) as naming says."""
    if naming is not None:
        label, names = naming
        compiled.fun_name = label
        if names is not None:
            compiled.arg_names = names if kept is None else lambda: [names()[i] for i in kept]
    return compiled


def _compile_program(ir: IR, name: str, donated: Sequence[bool] | None = None,
                     shardings: tuple[list[Any] | None, list[Any] | None] | None = None, deferred: bool = False,
                     naming: _Naming | None = None, keep_unused: bool = False) -> _Program:
    """How calls run ir compiled: (run the program on the call's flat leaves, build the result from its flat
    outputs). The one place that compiles and calls a jitted function's program outside traces, in one sequence:
    the inputs no live equation reads dropped, the donation planned, then compile_ir (which discharges Refs and
    lowers with the donors) and a call on one device or partitioned.

    Inputs that no live equation reads are not parameters of the program (as in JAX: a function reading 2 leaves
    of a pytree of 100000 compiles and runs a program of 2 parameters); run drops their leaves, so callers pass
    every leaf as before (keep_unused: every input is a parameter, jit's keep_unused=True). donated: per leaf,
    whether the caller gives its buffer up: XLA may write outputs into it (`jax.buffer_donor`), and a donated
    Array (or ShardedArray) whose own buffers the call takes is deleted after it (using it raises a clear error);
    donor_plan says which leaves are usable, the runtime how an Array that cannot be given up is handled.
    shardings: (per input leaf, per output leaf) jit's in_shardings / out_shardings: the program runs partitioned
    over their devices (ember._runtime.spmd), each input split as its sharding says, each output placed as its own
    does (XLA chooses where none is given). naming: how the program's errors name the function and its leaves
    (Jitted._naming)."""
    live, read = dce_outputs(ir, [True] * len(ir.outs))
    if keep_unused:
        read = [True] * len(read)
    kept = [i for i, is_read in enumerate(read) if is_read]
    program = ir if all(read) else IR(live.const_vars, live.consts, [ir.in_vars[i] for i in kept], live.eqns,
                                      live.outs, ir.out_tree)
    donors = None
    if donated is not None and any(donated):
        planned, unusable = donor_plan(ir.in_avals, live.out_avals, donated, read)
        warn_unusable(name, unusable)
        donors = [planned[i] for i in kept]
    deferred = deferred or shardings is not None  # (a partitioned program is compiled at its first call)
    executable = compile_staged(program, name, deferred, donors)
    executable = _named(executable, naming, None if program is ir else kept)
    if shardings is not None:
        ins, outs = shardings
        call_sharded, donating = executable.call_sharded, tuple(i for i, d in enumerate(donors or ()) if d)
        kept_ins = None if ins is None else [ins[i] for i in kept]

        def run(leaves: Sequence[Any]) -> list[Any]:
            return call_sharded([leaves[i] for i in kept], kept_ins, outs, donating=donating)
        return run, output_builder(ir.out_tree)
    if program is ir:
        return executable.call_flat, output_builder(ir.out_tree)
    call_flat = executable.call_flat

    def run_kept(leaves: Sequence[Any]) -> list[Any]:
        return call_flat([leaves[i] for i in kept])
    return run_kept, output_builder(ir.out_tree)


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of fun's results (a pytree of ShapeDtypeStructs) for arguments given as arrays,
    numbers or ShapeDtypeStructs, without compiling or running anything (as jax.eval_shape)."""
    if not callable(fun):
        raise TypeError(f"eval_shape: expected a function, got {type(fun).__name__}")
    return Jitted(fun).eval_shape(*args, **kwargs)


def jit(fun: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = (), in_shardings: Any = None, out_shardings: Any = None,
        inline: bool = False, keep_unused: bool = False, device: Any = None, backend: str | None = None,
        compiler_options: dict[str, Any] | None = None) -> Any:
    """Compile fun with XLA, once per argument signature. Usable as @jit or @jit(static_argnums=...).

    donate_argnums / donate_argnames (as in JAX): the buffers of these arguments are given to the program, which may
    write its outputs into them (an in-place update of parameters and optimizer state); the donated Arrays are
    deleted by the call. Donation applies to calls outside other transformations (inlined into a staging, the
    function donates nothing, as in JAX).

    in_shardings / out_shardings (as in JAX): a Sharding, or a tree prefix of the positional arguments / of the
    results holding Shardings and None; the program is partitioned over their devices by XLA (arguments are
    split as their shardings say; None: an argument's own sharding, a result's chosen by XLA).

    inline=True (as in JAX): called inside another staging, fun is traced into it instead of staying one pjit
    equation (a call of its own in the module).

    keep_unused=True (as in JAX): arguments the function does not read stay parameters of the compiled program
    (by default they are dropped from it; calls pass them either way).

    device= / backend= (as in JAX, deprecated there too: a DeprecationWarning): the program runs on that device
    (or the first device of that platform, "cpu", "cuda"), its arguments moved there, its results committed there;
    not together with in_shardings / out_shardings.

    compiler_options (as in JAX): XLA options for this function's programs ({"xla_cpu_enable_fast_math": False});
    an option the plugin does not know is its error at the first call."""
    options = (static_argnums, static_argnames, donate_argnums, donate_argnames, in_shardings, out_shardings, inline,
               keep_unused, device, backend, compiler_options)
    if fun is None:
        return lambda f: Jitted(f, *options)
    return Jitted(fun, *options)


_DEVICE_DEPRECATED = ("backend and device argument on jit is deprecated. You can use `jax.device_put(..., "
                      "jax.local_devices(backend=\"cpu\")[0])` on the inputs to the jitted function to get the same "
                      "behavior.")


def _check_placement(name: str, device: Any, backend: Any, in_shardings: Any, out_shardings: Any) -> Any:
    """jit's device= / backend=, checked (JAX's errors and its DeprecationWarning): the device, the platform's
    name, or None."""
    if device is None and backend is None:
        return None
    warnings.warn(_DEVICE_DEPRECATED, DeprecationWarning, stacklevel=4)
    if device is not None and backend is not None:
        raise ValueError(f"can't specify both a device and a backend for jit, got device={device!r} and "
                         f"backend={backend!r}")
    if in_shardings is not None or out_shardings is not None:
        raise ValueError("If backend or device is specified on jit, then "
                         f"{'in_shardings' if in_shardings is not None else 'out_shardings'} should not be "
                         "specified.")
    if device is not None and not isinstance(device, Device):
        raise TypeError(f"{name}: device must be a Device (ember.devices()[i]), got {device!r} of type "
                        f"{type(device).__name__}")
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"{name}: backend must be a platform name ('cpu', 'cuda'), got {backend!r}")
    return device if device is not None else backend


def _placement_device(placement: Any) -> Any:
    """The device jit's device= / backend= names (a backend's first device, found at the first call: backends
    start lazily)."""
    if not isinstance(placement, str):
        return placement
    return backend_devices(placement)[0]  # (one ember has not: JAX's RuntimeError "Unknown backend ...")


_config_values = config._values  # read on every jitted call: a plain dict lookup


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the with-block, jitted functions run their Python body one primitive at a time (print and pdb see
    values), as with `ember.config.update("jax_disable_jit", True)`."""
    with config.override(disable_jit=disable):
        yield


def clear_caches() -> None:
    """Forget every compiled program and staged IR that ember caches (jit signatures, eager operations, programs
    of ember.compile, vjp and linearize plans, the programs shared by what they compute: executables, lowerings,
    transformed IRs), so that their memory is freed."""
    clear_all_caches()
    gc.collect()
