"""Host callbacks: Python functions called from compiled programs (jax.pure_callback, io_callback, debug.callback,
jax.experimental.buffer_callback).

Four primitives, each lowered to `stablehlo.custom_call @ember_callback` (the handler is ember/_runtime/
callbacks.py) with an int64 attribute naming the HostCallback in this module's registry:

  pure_callback: a pure function of its arguments. No effects: DCE drops it when its results are unused, CSE may
      merge two equal calls, as JAX. No derivatives (JAX's rule: wrap it in custom_jvp/custom_vjp); vmap by the
      vmap_method the caller chose (sequential, sequential_unrolled, expand_dims, broadcast_all, legacy_vectorized;
      none chosen: vmap refuses, as JAX).
  io_callback: effectful (Primitive.effectful): never dropped, merged or reordered by the passes; kept once on the
      forward side of reverse mode. No derivatives; vmap calls it once per batch member in a loop, and refuses an
      ordered one (as JAX).
  debug_callback: effectful, no results (debug.print, debug.callback). Forward mode calls it on the primal values
      and reverse mode once on the forward side (it has no outputs, so nothing flows back); vmap calls it once per
      batch member, unrolled, in order (JAX's output order).
  buffer_callback: a callback that fills its results in place (ember.experimental.buffer_callback): pure, or
      effectful when its has_side_effect param is true (Primitive.effect_param); no derivatives; vmap by its
      vmap_method, as pure_callback's.

The custom call of an effectful callback has has_side_effect = true (XLA keeps it and does not merge it); an
ordered one (ordered=True) also threads the body's effect value (an int8 scalar) through the ordered callbacks of
its body, and lower_into ties loops and branches that call back into that chain, so XLA keeps their program order
(ember/_hlo/ffi.py's custom_call, ember/_hlo/lower.py's LoweringContext.effect; docs/callbacks.md)."""
from __future__ import annotations

import secrets
import threading
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from ember._control.loops import scan_flat
from ember._core import Primitive, ShapedArray
from ember._core import dtypes as dt
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._hlo import LoweringContext, LoweringError
from ember._hlo import ffi as _hlo_ffi
from ember._hlo.lower import CALLBACK_TARGET
from ember._prims.lax_helpers import index_in_dim
from ember._prims.slicing import stack
from ember._prims.shape import BatchDim, batch_size, broadcast, moveaxis
from ember._prims import explicit

TARGET = CALLBACK_TARGET
CALLBACK_NOT_DIFFERENTIABLE = ("callbacks are not differentiable: wrap the callback in ember.custom_jvp or "
                               "ember.custom_vjp to give it derivatives")
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized")


class CallbackDerivativeError(ValueError, NotImplementedError):
    """A callback was differentiated (JAX raises a ValueError; ember's marks raise NotImplementedErrors: both)."""


class CallbackBatchingError(ValueError, NotImplementedError):
    """An ordered io_callback under vmap (a ValueError, as JAX's)."""


# ---------------------------------------------------------------------------------------------------------------
# The registry: key -> HostCallback, weak (an entry lives while an IR equation, hence a compiled program, holds it).
# A key is a random 63-bit token, not a count: a program names its callbacks by key, and a module this process did
# not lower itself (a StableHLO text spliced in from elsewhere) must not be able to name a live callback by
# guessing (ember.export also refuses host callbacks in artifacts; the handler checks every call's buffers against
# the callback's declared types: ember/_runtime/callbacks.py).
_registry: weakref.WeakValueDictionary[int, "HostCallback"] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def _new_key() -> int:
    """An unused random key (1 .. 2**63 - 1: an int64 attribute; 0 is the handler's ordering copy)."""
    while True:
        key = secrets.randbits(63)
        if key and key not in _registry:
            return key


class HostCallback:
    """A Python function as a callback primitive's param: it takes the flat arguments (numpy arrays), rebuilds the
    caller's argument structure (in_tree; `static` holds the leaves that are not arrays, by position), calls fn and
    returns its results flat, checked against result_avals (numpy arrays). Compared by identity. operand_types: the
    operand types (shape, dtype) of the calls lowered so far (the handler accepts a call's buffers only of one of
    them)."""

    def __init__(self, fn: Callable[..., Any], in_tree: PyTreeDef, static: tuple[tuple[int, Any], ...],
                 result_avals: tuple[ShapedArray, ...], result_tree: PyTreeDef | None, name: str):
        self.fn, self.in_tree, self.static = fn, in_tree, static
        self.result_avals, self.result_tree, self.name = result_avals, result_tree, name
        self.operand_types: frozenset[tuple[tuple[tuple[int, ...], np.dtype], ...]] = frozenset()
        with _registry_lock:
            self.key = _new_key()
            _registry[self.key] = self

    def note_operands(self, avals: Sequence[ShapedArray]) -> None:
        """A call of this callback with operands of these types is being lowered (see operand_types)."""
        types = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in avals)
        if types not in self.operand_types:
            with _registry_lock:
                self.operand_types = self.operand_types | {types}

    def __repr__(self) -> str:
        return f"<{self.name} {getattr(self.fn, '__qualname__', type(self.fn).__name__)}>"

    def with_results(self, result_avals: tuple[ShapedArray, ...]) -> "HostCallback":
        """The same function (and kind of callback) declaring other results (a vmapped call's batched ones)."""
        return HostCallback(self.fn, self.in_tree, self.static, result_avals, self.result_tree, self.name)

    def call_flat(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        leaves: list[Any] = list(args)
        for position, value in self.static:
            leaves.insert(position, value)
        call_args, call_kwargs = self.in_tree.unflatten(leaves)
        result = self.fn(*call_args, **call_kwargs)
        if self.result_tree is None:
            return []
        flat, _ = tree_flatten(result)
        if len(flat) != len(self.result_avals):
            raise TypeError(f"{self.name}: the callback {self.fn!r} returned {len(flat)} arrays, expected "
                            f"{len(self.result_avals)} (structured as {self.result_tree})")
        out = []
        for i, (value, aval) in enumerate(zip(flat, self.result_avals)):
            array = np.asarray(value)
            if array.shape != aval.shape:
                raise TypeError(f"{self.name}: result {i} of the callback {self.fn!r} has shape {array.shape}, "
                                f"expected {aval.shape} (result_shape_dtypes)")
            if array.dtype != aval.dtype:
                raise TypeError(f"{self.name}: result {i} of the callback {self.fn!r} has dtype {array.dtype}, "
                                f"expected {np.dtype(aval.dtype).name} (result_shape_dtypes)")
            out.append(array)
        return out


def lookup(key: int) -> HostCallback:
    """The callback a compiled program names by key (the handler's lookup)."""
    found = _registry.get(key)
    if found is None:
        raise RuntimeError(f"{TARGET}: no callback of this process has the key {key} (the program outlived its "
                           "callback, or this process did not lower the program)")
    return found


# ---------------------------------------------------------------------------------------------------------------
# Shared rules
def _abstract_eval(*avals: ShapedArray, callback: HostCallback, **params: Any) -> list[ShapedArray]:
    _check_dtypes(callback.name, list(avals) + list(callback.result_avals))
    return list(callback.result_avals)


def _lowering(effectful: bool) -> Callable[..., list[str]]:
    def lower(ctx: LoweringContext, *args: str, callback: HostCallback, ordered: bool = False,
              **params: Any) -> list[str]:
        if not _hlo_ffi.available(TARGET):
            raise LoweringError(f"{callback.name}: host callbacks are unavailable in this process")
        callback.note_operands(ctx.avals_in)
        return _hlo_ffi.custom_call(ctx, TARGET, args, ctx.avals_out, {"callback": callback.key},
                                    has_side_effect=effectful, ordered=ordered, once=True)
    return lower


def _check_dtypes(name: str, avals: Sequence[ShapedArray]) -> None:
    for i, aval in enumerate(avals):
        if np.dtype(aval.dtype) not in _SUPPORTED:
            raise TypeError(f"{name}: argument or result {i} has dtype {np.dtype(aval.dtype).name}, which host "
                            f"callbacks do not carry (supported: {', '.join(sorted(d.name for d in _SUPPORTED))})")


_SUPPORTED = {np.dtype(d) for d in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128)}
_SUPPORTED.add(np.dtype(dt.bfloat16))
_SUPPORTED.update(dt.NARROW_FLOATS + dt.NARROW_INTS)  # (the 4- and 2-bit ones packed in the program's buffers)


def sequential_batching(prim: Primitive, args: Sequence[Any], dims: Sequence[BatchDim], unrolled: bool,
                **params: Any) -> tuple[list[Any], list[BatchDim]]:
    """Call prim once per batch member, in order: a scan over the batched arguments (unrolled: a Python loop),
    the unbatched ones passed whole to every call."""
    size = batch_size(args, dims)
    moved = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args, dims)]

    def one(members: Sequence[Any]) -> list[Any]:
        it = iter(members)
        return prim.bind(*[a if d is None else next(it) for a, d in zip(moved, dims)], **params)

    batched = [a for a, d in zip(moved, dims) if d is not None]
    if unrolled:
        rows = [one([index_in_dim(a, i, 0, keepdims=False) for a in batched]) for i in range(size)]
        outs = [stack([row[k] for row in rows]) for k in range(len(rows[0]))] if rows and rows[0] else []
    else:
        _, outs = scan_flat(lambda carry, xs: ([], one(xs)), [], batched, size)
    return list(outs), [0] * len(outs)


# ---------------------------------------------------------------------------------------------------------------
# pure_callback(args...; callback, vmap_method) -> results
pure_callback_p = Primitive("pure_callback", multiple_results=True, checks=())
pure_callback_p.def_rule("sharding_rule", explicit.replicated_results)
pure_callback_p.def_rule("abstract_eval", _abstract_eval)
pure_callback_p.def_rule("lowering", _lowering(effectful=False))
pure_callback_p.mark("jvp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)
pure_callback_p.mark("vjp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)


def _batching_by_method(prim: Primitive) -> Callable[..., tuple[list[Any], list[BatchDim]]]:
    """The batching rule of a callback whose caller chose how vmap calls it (vmap_method: pure_callback's and
    buffer_callback's): in a loop, or once on batched arguments."""
    def batching(args: Sequence[Any], dims: Sequence[BatchDim], *, callback: HostCallback, vmap_method: str | None,
                 **params: Any) -> tuple[list[Any], list[BatchDim]]:
        if vmap_method in ("sequential", "sequential_unrolled"):
            return sequential_batching(prim, args, dims, vmap_method == "sequential_unrolled",
                                       callback=callback, vmap_method=vmap_method, **params)
        if vmap_method not in VMAP_METHODS:
            raise NotImplementedError(
                f"vmap of {callback.name} ({callback!r}) needs a vmap_method: one of "
                f"{', '.join(map(repr, VMAP_METHODS))}, got vmap_method={vmap_method!r}")
        size = batch_size(args, dims)
        moved = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args, dims)]
        if vmap_method != "legacy_vectorized":  # expand_dims: a leading 1; broadcast_all: the whole batch
            lead = size if vmap_method == "broadcast_all" else 1
            moved = [broadcast(a, (lead,)) if d is None else a for a, d in zip(moved, dims)]
        batched = callback.with_results(tuple(a.update(shape=(size, *a.shape)) for a in callback.result_avals))
        outs = prim.bind(*moved, callback=batched, vmap_method=vmap_method, **params)
        return list(outs), [0] * len(outs)
    return batching


pure_callback_p.def_rule("batching", _batching_by_method(pure_callback_p))


# ---------------------------------------------------------------------------------------------------------------
# io_callback(args...; callback, ordered) -> results: effectful
io_callback_p = Primitive("io_callback", multiple_results=True, effectful=True, checks=())
io_callback_p.def_rule("sharding_rule", explicit.replicated_results)
io_callback_p.def_rule("abstract_eval", _abstract_eval)
io_callback_p.def_rule("lowering", _lowering(effectful=True))
io_callback_p.mark("jvp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)
io_callback_p.mark("vjp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)


@io_callback_p.def_rule("batching")
def _io_callback_batching(args: Sequence[Any], dims: Sequence[BatchDim], *, callback: HostCallback,
                          ordered: bool) -> tuple[list[Any], list[BatchDim]]:
    if ordered:
        raise CallbackBatchingError(f"io_callback ({callback!r}): vmap of an ordered io_callback is not allowed "
                                    "(as JAX): its calls would have no order")
    return sequential_batching(io_callback_p, args, dims, False, callback=callback, ordered=ordered)


# ---------------------------------------------------------------------------------------------------------------
# debug_callback(args...; callback, ordered) -> (): effectful, no results
debug_callback_p = Primitive("debug_callback", multiple_results=True, effectful=True, checks=())
debug_callback_p.def_rule("sharding_rule", explicit.replicated_results)
debug_callback_p.def_rule("abstract_eval", _abstract_eval)
debug_callback_p.def_rule("lowering", _lowering(effectful=True))


@debug_callback_p.def_rule("jvp")
def _debug_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list, list]:
    return debug_callback_p.bind(*primals, **params), []  # called on the primal values only (as JAX)


@debug_callback_p.def_rule("vjp")
def _debug_callback_vjp(cts: Sequence[Any], ins: Sequence[Any], outs: Sequence[Any], needs: Sequence[bool],
                        **params: Any) -> list[None]:
    return [None] * len(ins)  # (no outputs: nothing flows back; the forward side called it once)


@debug_callback_p.def_rule("batching")
def _debug_callback_batching(args: Sequence[Any], dims: Sequence[BatchDim], **params: Any
                             ) -> tuple[list[Any], list[BatchDim]]:
    """Once per batch member, in order (unrolled, as JAX)."""
    for i in range(batch_size(args, dims)):
        debug_callback_p.bind(*[a if d is None else index_in_dim(a, i, d, keepdims=False)
                                for a, d in zip(args, dims)], **params)
    return [], []


# ---------------------------------------------------------------------------------------------------------------
# buffer_callback(args...; callback, vmap_method, has_side_effect) -> results: the callback fills the results (its
# HostCallback is ember.experimental.buffer_callback's, which hands the function Buffers); effectful when
# has_side_effect (never dropped or merged), else pure.
buffer_callback_p = Primitive("buffer_callback", multiple_results=True, effect_param="has_side_effect", checks=())
buffer_callback_p.def_rule("sharding_rule", explicit.replicated_results)
buffer_callback_p.def_rule("abstract_eval", _abstract_eval)
buffer_callback_p.mark("jvp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)
buffer_callback_p.mark("vjp", CALLBACK_NOT_DIFFERENTIABLE, CallbackDerivativeError)
buffer_callback_p.def_rule("batching", _batching_by_method(buffer_callback_p))


@buffer_callback_p.def_rule("lowering")
def _buffer_callback_lowering(ctx: LoweringContext, *args: str, callback: HostCallback, has_side_effect: bool,
                              **params: Any) -> list[str]:
    return _lowering(effectful=bool(has_side_effect))(ctx, *args, callback=callback)


__all__: list[str] = []
