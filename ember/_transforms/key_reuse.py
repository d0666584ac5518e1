"""The key-reuse checker (JAX's jax_debug_key_reuse): with the option on, a typed PRNG key used twice as a consumed
input (split, random bits, any sampler) raises KeyReuseError, in eager code and, statically, in staged IR.

How keys show in the IR. ember's typed keys (ember.random.KeyArray) are pytree nodes over uint32 data, so the IR
sees the data only. With the option on, ember.random binds four identity primitives (they lower to nothing and
transformations keep them) that say what happens to keys, as JAX's key types and primitives say it for JAX:

    key_wrap(x)     x is the data of a typed key (every KeyArray made over a traced value): the output is a key
                    that aliases x (a forward)
    key_fresh(x)    a new, unconsumed key over x: a raw key (PRNGKey) given to a random function, wrap_key_data,
                    clone
    key_consume(x)  the key x is consumed; the output is its data, to compute with (split, random bits, gamma)
    key_unwrap(x)   the key's data, the key not consumed (fold_in, key_data)

Without the option nothing binds them, so programs and their caches are those of ember without the checker (the
option is one of the staging options that key jit's caches).

The analysis (ir_signature) walks an IR's equations once and summarises it as a Signature, as JAX's
jaxpr_type_signature does: which inputs it consumes (with a mask of the elements consumed, for a key array sliced
element by element), which outputs are fresh keys, which outputs alias an input. On the way it raises KeyReuseError
where a key already consumed is consumed again. Each primitive's behaviour is a rule: first-order primitives have
theirs in RULES below (slicing a key array consumes the elements taken and gives fresh keys; reshapes and dynamic
indexing forward the key; comparisons use nothing); higher-order ones have a "key_reuse" hook beside their
definition (pjit, cond, while, scan: ember._control), which combines their bodies' signatures. Any other primitive
given a key consumes it, and its outputs are consumed keys, as in JAX.

Eagerly, a KeyArray (a TrackedKey) carries its own state: jit checks the keys it is given against its IR's
signature and marks them (and the keys it returns) accordingly; a KeyArray's methods (indexing, reshape) do the
same for the one operation."""
from __future__ import annotations

import weakref
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember._core import IR, Eqn, Primitive, ShapedArray, Tracer, Var
from ember._core.config import config
from ember._core.ir import Source
from ember._core.primitive import user_source
from ember._core.trace import KeyReuseError
from ember._prims.indexing import dynamic_slice_p, dynamic_update_slice_p, gather_p, scatter_p
from ember._prims.elementwise import eq_p, ne_p, select_n_p, select_p
from ember._prims.shape import (broadcast_in_dim_p, convert_element_type_p, copy_p, identity_primitive, reshape_p,
                                squeeze_p, stage_p)
from ember._prims.sharding import device_put_p, sharding_constraint_p
from ember._prims.slicing import concatenate_p, slice_p

Mask = Any  # True, False, or a boolean numpy array over the data's shape: the elements consumed


def checking() -> bool:
    """Whether the key-reuse checker is on (the debug_key_reuse option)."""
    return config.read_canonical("debug_key_reuse")


# ---------------------------------------------------------------------------------------------------------------
# The marker primitives: the identity, each saying what happens to a key (see the module docstring).
def _marker(name: str, doc: str) -> Primitive:
    prim = identity_primitive(name, rebinds_cotangent=False)
    prim.__doc__ = doc
    prim.impl = lambda x: x  # (eagerly: nothing to compute, no program to compile)
    return prim


key_wrap_p = _marker("key_wrap", "x is a typed key's data: its output is the key, aliasing x")
key_fresh_p = _marker("key_fresh", "a new, unconsumed key over x")
key_consume_p = _marker("key_consume", "the key x is consumed; its output is the data to compute with")
key_unwrap_p = _marker("key_unwrap", "the key x's data, the key itself not consumed")


def _mark(prim: Primitive, data: Any) -> Any:
    """prim bound on traced key data while the checker is on; data as it is otherwise (eagerly, a KeyArray's own
    state records what happens to it)."""
    if isinstance(data, Tracer) and checking():
        return prim.bind(data)
    return data


def wrap(data: Any) -> Any:
    return _mark(key_wrap_p, data)


def fresh(data: Any) -> Any:
    return _mark(key_fresh_p, data)


def consume(data: Any) -> Any:
    return _mark(key_consume_p, data)


def unwrap(data: Any) -> Any:
    return _mark(key_unwrap_p, data)


# ---------------------------------------------------------------------------------------------------------------
class Signature(NamedTuple):
    """What a function (an IR, an equation) does to the keys it takes and gives: sinks maps each input it consumes
    to the mask of elements consumed; sources are the outputs that are fresh keys; forwards maps an output to the
    input it aliases; keys are all its outputs that are keys (those neither fresh nor forwarded are consumed keys,
    as JAX's)."""
    sinks: dict[int, Mask]
    sources: frozenset[int]
    forwards: dict[int, int]
    keys: frozenset[int]


NOTHING = Signature({}, frozenset(), {}, frozenset())


def _forward(key_in: Sequence[bool], index: int = 0) -> Signature:
    """The output aliases operand index (a key where that operand is one)."""
    if not key_in[index]:
        return NOTHING
    return Signature({}, frozenset(), {0: index}, frozenset({0}))


def _consumed_operands(key_in: Sequence[bool], consumed: Sequence[int], forward: int | None = 0) -> Signature:
    """Operands at consumed are consumed where they are keys; the output aliases operand forward (an update of a
    key array: the updated array, its new elements consumed)."""
    fwd = {} if forward is None or not key_in[forward] else {0: forward}
    sinks = {i: True for i in consumed if key_in[i]}
    return Signature(sinks, frozenset(), fwd, frozenset(fwd))


def _slice_rule(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    """A static slice of a key array consumes the elements it takes, and gives them as fresh keys."""
    if not key_in[0]:
        return NOTHING
    shape = eqn.inputs[0].aval.shape
    strides = eqn.params["strides"] or (1,) * len(shape)
    mask = np.zeros(shape, bool)
    mask[tuple(slice(lo, hi, st) for lo, hi, st in zip(eqn.params["start_indices"], eqn.params["limit_indices"],
                                                        strides))] = True
    return Signature({0: mask}, frozenset({0}), {}, frozenset({0}))


def _concatenate_rule(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    """Joining key arrays consumes them and gives fresh keys (one operand: the same keys)."""
    if len(eqn.inputs) == 1:
        return _forward(key_in)
    if not any(key_in):
        return NOTHING
    return Signature({i: True for i, k in enumerate(key_in) if k}, frozenset({0}), {}, frozenset({0}))


def _select_rule(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    """A choice among keys element by element (what vmap makes of a cond with a batched predicate, and of a loop
    carrying keys): fresh keys, consuming none, as a cond whose branches give the cases (JAX's cond rule: an output
    a branch makes fresh is fresh). ember.random's keys support no select of their own."""
    if not any(key_in[1:]):
        return NOTHING
    return Signature({}, frozenset({0}), {}, frozenset({0}))


def _device_put_rule(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    forwards = {i: i for i, k in enumerate(key_in) if k}
    return Signature({}, frozenset(), forwards, frozenset(forwards))


# The first-order primitives whose use of a key is not "consume it" (JAX's table, for ember's primitives).
RULES: dict[Primitive, Callable[[Eqn, Sequence[bool]], Signature]] = {
    key_wrap_p: lambda eqn, key_in: Signature({}, frozenset(), {0: 0}, frozenset({0})),
    key_fresh_p: lambda eqn, key_in: Signature({}, frozenset({0}), {}, frozenset({0})),
    key_consume_p: lambda eqn, key_in: Signature({0: True}, frozenset(), {}, frozenset()),
    key_unwrap_p: lambda eqn, key_in: NOTHING,
    slice_p: _slice_rule,
    concatenate_p: _concatenate_rule,
    dynamic_update_slice_p: lambda eqn, key_in: _consumed_operands(key_in, [1]),
    scatter_p: lambda eqn, key_in: _consumed_operands(key_in, [2]),
    eq_p: lambda eqn, key_in: NOTHING,
    ne_p: lambda eqn, key_in: NOTHING,
    device_put_p: _device_put_rule,
    select_n_p: _select_rule,
    select_p: _select_rule,
}
for _prim in (broadcast_in_dim_p, copy_p, stage_p, convert_element_type_p, reshape_p, squeeze_p, dynamic_slice_p,
              gather_p, sharding_constraint_p):
    RULES[_prim] = lambda eqn, key_in: _forward(key_in)
del _prim


def _unknown(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    """A primitive with no rule consumes the keys it is given, and its outputs are consumed keys (as JAX's)."""
    if not any(key_in):
        return NOTHING
    return Signature({i: True for i, k in enumerate(key_in) if k}, frozenset(), {}, frozenset(
        range(len(eqn.outputs))))


def eqn_signature(eqn: Eqn, key_in: Sequence[bool]) -> Signature:
    """The equation's signature, given which of its operands are keys."""
    hook = eqn.prim.rules.get("key_reuse")
    if hook is not None:
        return hook(eqn)
    return RULES.get(eqn.prim, _unknown)(eqn, key_in)


# ---------------------------------------------------------------------------------------------------------------
def _fit(mask: Mask, aval: ShapedArray) -> Mask:
    """mask (over a forwarded value's shape) over the shape of the value it aliases: reshaped where the sizes agree,
    else the whole value."""
    if isinstance(mask, (bool, np.bool_)) or np.shape(mask) == tuple(aval.shape):
        return mask
    if np.size(mask) == int(np.prod(aval.shape)):
        return np.reshape(mask, aval.shape)
    return bool(np.any(mask))


def _simplest(mask: Mask) -> Mask:
    if isinstance(mask, np.ndarray) and (mask.all() or not mask.any()):
        return bool(mask.all())
    return mask


def _where(source: Source | None) -> str:
    return f" at {source}" if source is not None else ""


_SIGNATURES: "weakref.WeakKeyDictionary[IR, Signature]" = weakref.WeakKeyDictionary()


def remember(ir: IR, signature: Signature) -> None:
    """Take signature as ir's (a jitted function's body, simplified after staging: the signature of the IR it was
    staged as, with every draw it made)."""
    _SIGNATURES[ir] = signature


def ir_signature(ir: IR, name: str = "a staged function") -> Signature:
    """ir's Signature over its inputs (in_vars, then const_vars) and outputs; KeyReuseError where it consumes a key
    already consumed. Remembered per IR (IRs are immutable once built)."""
    found = _SIGNATURES.get(ir)
    if found is not None:
        return found
    consumed: dict[Var, Mask] = {}
    aliases: dict[Var, Var] = {}
    keys: set[Var] = set()
    where: dict[Var, Source | None] = {}

    def root(v: Var) -> Var:
        while v in aliases:
            v = aliases[v]
        return v

    for eqn in ir.eqns:
        key_in = [type(a) is Var and a in keys for a in eqn.inputs]
        signature = eqn_signature(eqn, key_in)
        for index, mask in signature.sinks.items():
            atom = eqn.inputs[index]
            if type(atom) is not Var:
                continue
            var = root(atom)
            mask = _fit(mask, var.aval)
            before = consumed.get(var, False)
            if np.any(np.logical_and(before, mask)):
                raise KeyReuseError(
                    f"{name}: key reuse (jax_debug_key_reuse): {eqn.prim.name}{_where(eqn.source)} consumes, as "
                    f"operand {index}, a PRNG key already consumed{_where(where.get(var))}. Split the key "
                    "(ember.random.split) and use each new key once, or take a copy with ember.random.clone.")
            consumed[var] = _simplest(np.logical_or(before, mask))
            where[var] = eqn.source
        for out in signature.keys:
            var = eqn.outputs[out]
            keys.add(var)
            if out in signature.forwards:
                source = eqn.inputs[signature.forwards[out]]
                if type(source) is Var:
                    aliases[var] = source
            else:
                consumed[var] = out not in signature.sources
                where[var] = eqn.source
    inputs = list(ir.in_vars) + list(ir.const_vars)
    position = {v: i for i, v in enumerate(inputs)}
    sinks = {i: consumed[v] for i, v in enumerate(inputs) if np.any(consumed.get(v, False))}
    sources, forwards, key_outs = set(), {}, set()
    for out, atom in enumerate(ir.outs):
        if type(atom) is not Var or atom not in keys:
            continue
        key_outs.add(out)
        var = root(atom)
        if var in position:
            forwards[out] = position[var]
        elif not np.any(consumed.get(var, False)):
            sources.add(out)
    signature = Signature(sinks, frozenset(sources), forwards, frozenset(key_outs))
    _SIGNATURES[ir] = signature
    return signature


def check_ir(ir: IR, name: str = "a staged function") -> None:
    """KeyReuseError if ir consumes a key twice (JAX's check_key_reuse_jaxpr)."""
    ir_signature(ir, name)


# ---------------------------------------------------------------------------------------------------------------
# The hooks' helpers for the higher-order primitives (their "key_reuse" hooks, beside each primitive).
def joined_branches(branches: Sequence[IR], offset: int, name: str) -> Signature:
    """The signature of a choice among branches taking the operands from offset on: a key any branch consumes is
    consumed; an output is fresh where a branch makes it fresh (as JAX's), an alias only where every branch
    forwards the same operand."""
    signatures = [ir_signature(b, name) for b in branches]
    sinks: dict[int, Mask] = {}
    for signature in signatures:
        for index, mask in signature.sinks.items():
            sinks[index + offset] = _simplest(np.logical_or(sinks.get(index + offset, False), mask))
    forwards = {out: into + offset for out, into in signatures[0].forwards.items()
                if all(s.forwards.get(out) == into for s in signatures[1:])}
    sources = frozenset.union(*(s.sources for s in signatures)) - set(forwards)
    return Signature(sinks, sources, forwards, frozenset.union(*(s.keys for s in signatures)))


def looped_body(body: IR, num_consts: int, num_carry: int, name: str, what: str = "body") -> Signature:
    """The signature of a loop's body taking (constants, carries, ...) and giving (carries, ...): KeyReuseError
    where an iteration consumes a constant key (every iteration consumes it again) or a carried key the body does
    not replace by a fresh one (the next iteration consumes it again)."""
    signature = ir_signature(body, name)
    for index in signature.sinks:
        if index < num_consts:
            raise KeyReuseError(
                f"{name}: key reuse (jax_debug_key_reuse): the loop {what} consumes a PRNG key it closes over (its "
                f"constant {index}), so every iteration consumes it again. Carry the key and split it in each "
                "iteration (ember.random.split), or fold in the iteration number (ember.random.fold_in).")
        carry = index - num_consts
        if carry < num_carry and carry not in signature.sources:
            raise KeyReuseError(
                f"{name}: key reuse (jax_debug_key_reuse): the loop {what} consumes the PRNG key it carries "
                f"(carry {carry}) without carrying a fresh key in its place, so the next iteration consumes it "
                "again. Split the key in each iteration and carry one of the new keys.")
    return signature


# ---------------------------------------------------------------------------------------------------------------
# Keys outside any staging: each TrackedKey object knows whether (which of its elements) it was consumed.
class TrackedKey:
    """The eager state of a key array (ember.random.KeyArray subclasses it): `_consumed`, False, True or a boolean
    mask over its data, and where it was consumed (`_consumed_at`, for the error)."""
    __slots__ = ("_consumed", "_consumed_at")

    def _fresh_state(self) -> None:
        self._consumed: Mask = False
        self._consumed_at: Source | None = None


def check_arguments(name: str, signature: Signature, keys: Sequence[TrackedKey | None]) -> None:
    """KeyReuseError if a key given at an input the signature consumes is consumed there already."""
    for index, mask in signature.sinks.items():
        key = keys[index] if index < len(keys) else None
        if key is None:
            continue
        if np.any(np.logical_and(key._consumed, _fit(mask, _data_aval(key)))):
            raise KeyReuseError(
                f"{name}: key reuse (jax_debug_key_reuse): argument {index}, a PRNG key "
                f"({key._describe()}), was consumed before{_where(key._consumed_at)}. Split the key "
                "(ember.random.split) and use each new key once, or take a copy with ember.random.clone.")


def update_keys(signature: Signature, keys_in: Sequence[TrackedKey | None],
                keys_out: Sequence[TrackedKey | None]) -> None:
    """Record a call's effect: the keys it consumed, and the state of the keys it returned (fresh, the state of the
    argument they alias, or consumed)."""
    source = user_source()
    for index, mask in signature.sinks.items():
        key = keys_in[index] if index < len(keys_in) else None
        if key is not None:
            key._consumed = _simplest(np.logical_or(key._consumed, _fit(mask, _data_aval(key))))
            key._consumed_at = source
    for out, key in enumerate(keys_out):
        if key is None:
            continue
        into = signature.forwards.get(out)
        given = keys_in[into] if into is not None and into < len(keys_in) else None
        if given is not None:
            key._consumed, key._consumed_at = _fit(given._consumed, _data_aval(key)), given._consumed_at
        elif out in signature.sources or out not in signature.keys:
            key._consumed, key._consumed_at = False, None
        else:
            key._consumed, key._consumed_at = True, source


def _data_aval(key: Any) -> ShapedArray:
    return ShapedArray(tuple(np.shape(key._data)), np.dtype(np.uint32))


__all__ = ["NOTHING", "RULES", "Signature", "TrackedKey", "check_arguments", "check_ir", "checking", "consume",
           "eqn_signature", "fresh", "ir_signature", "joined_branches", "key_consume_p", "key_fresh_p",
           "key_unwrap_p", "key_wrap_p", "looped_body", "remember", "unwrap", "update_keys", "wrap"]
