"""Why a jitted function compiled again: explained cache misses (JAX's jax_explain_cache_misses), log_compiles,
cache_info, and, beyond JAX, one warning when a function keeps recompiling, naming what varies and the fix. That
warning is a record of the `ember` logger at level WARNING (printed on stderr unless logging is configured
otherwise), not a Python warning: JAX emits none there, and a test suite run with `-W error` (filterwarnings =
error) must not fail on advice about a correct program.

A jitted function compiles once per signature: the arguments' pytree structure, each leaf's shape, dtype and weak
type, and the static arguments' values (and the enable_x64 mode). A new signature is a cache miss; so is the first
call of a new function object, which has a cache of its own: `jit(lambda ...)` written inside a loop, or a jitted
closure made anew each step, compiles every time (unless its program is the same, which the process-wide caches
then reuse without XLA)."""
from __future__ import annotations

import inspect
import logging
import os
import weakref
from typing import Any, NamedTuple, Sequence

from ember._api.staging import call_positions, leaf_location
from ember._core.config import config
from ember._core.primitive import EMBER_DIR, user_source
from ember._core.pytree import PyTreeDef, tree_flatten_with_path

logger = logging.getLogger("ember")

STREAK = 5  # misses in a row (no hit between) after which a function's recompiles are warned about, once


class CacheInfo(NamedTuple):
    """A jitted function's cache (as functools.lru_cache's cache_info): hits, misses, maxsize, currsize."""
    hits: int
    misses: int
    maxsize: int
    currsize: int


class CompileLog:
    """One jitted function's cache statistics and its last compiled signature."""
    __slots__ = ("hits", "misses", "streak", "last", "warned", "__weakref__")

    def __init__(self) -> None:
        self.hits = self.misses = self.streak = 0
        self.last: tuple[Any, ...] | None = None
        self.warned = False


# Function code objects whose jitted functions compiled, and how many new function objects in a row did
_new_functions: "weakref.WeakKeyDictionary[Any, list[int]]" = weakref.WeakKeyDictionary()


def _code_of(fun: Any) -> Any:
    return getattr(getattr(fun, "__func__", fun), "__code__", None)


def _ours(fun: Any) -> bool:
    """Whether fun is ember's own (a jitted helper of the library recompiles by design, per shape: no warning)."""
    code = _code_of(fun)
    return code is not None and os.path.abspath(code.co_filename).startswith(EMBER_DIR)


def _parameter_names(fun: Any) -> list[str]:
    """The names of fun's leading positional parameters (before any *args), as a call's arguments are named."""
    try:
        parameters = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return []
    names = []
    for p in parameters:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _leaf_paths(in_tree: PyTreeDef, statics: tuple[Any, ...], names: Sequence[str] = ()) -> list[str]:
    """Where each leaf of the dynamic arguments is, by its position in the call (statics taken out), a positional
    argument named as its parameter where the function has one ("argument velocity['x']")."""
    template = in_tree.unflatten(list(range(in_tree.num_leaves)))
    positions = call_positions(len(template[0]), statics)
    found = []
    for path, _ in tree_flatten_with_path(template)[0]:
        where = leaf_location(path, positions)
        if len(path) >= 2 and path[0].idx == 0:
            index = path[1].idx
            position = positions[index] if index < len(positions) else index
            if position < len(names):
                where = f"argument {names[position]}" + where[len(f"argument {position}"):]
        found.append(where)
    return found


def differences(old: tuple[Any, ...], new: tuple[Any, ...], fun: Any = None) -> list[tuple[str, str]]:
    """(what, how) for each difference between two signatures (in_tree, avals, statics) of fun."""
    (old_tree, old_avals, old_statics), (new_tree, new_avals, new_statics) = old[:3], new[:3]
    found = []
    if old_tree != new_tree:
        found.append(("the pytree structure of the arguments", f"{old_tree} -> {new_tree}"))
    else:
        for where, a, b in zip(_leaf_paths(new_tree, new_statics, _parameter_names(fun) if fun is not None else []),
                               old_avals, new_avals):
            if a.shape != b.shape:
                found.append((where, f"shape {a.shape} -> {b.shape} ({a.str_short()} -> {b.str_short()})"))
            elif a.dtype != b.dtype:
                found.append((where, f"dtype {a.dtype.name} -> {b.dtype.name}"))
            elif a.weak_type != b.weak_type:
                kinds = {True: "weakly typed (a Python scalar)", False: "strongly typed (an array)"}
                found.append((where, f"{kinds[a.weak_type]} -> {kinds[b.weak_type]}"))
    old_static, new_static = dict(old_statics), dict(new_statics)
    names = _parameter_names(fun) if fun is not None else []
    for key in sorted(set(old_static) | set(new_static), key=str):
        if key not in old_static or key not in new_static or old_static[key] != new_static[key]:
            what = (f"static argument {names[key]}" if isinstance(key, int) and 0 <= key < len(names) else
                    f"static argument {key}" if isinstance(key, int) else f"static argument {key!r}")
            found.append((what, f"{old_static.get(key, '(absent)')!r} -> {new_static.get(key, '(absent)')!r}"))
    return found


def on_hit(log: CompileLog) -> None:
    log.hits += 1
    log.streak = 0


def on_miss(log: CompileLog, name: str, fun: Any, signature: tuple[Any, ...], x64: bool) -> None:
    """Record a compile of a new signature; explain it (explain_cache_misses), log it (log_compiles), and warn
    once when the function keeps recompiling."""
    new = (*signature, x64)
    old, log.last = log.last, new
    log.misses += 1
    log.streak += 1
    explain, log_compiles = config.read_canonical("explain_cache_misses"), config.read_canonical("log_compiles")
    reasons: list[tuple[str, str]]
    if old is None:
        code = _code_of(fun)
        counts = _new_functions.setdefault(code, [0]) if code is not None else [0]
        counts[0] += 1
        if counts[0] > 1:
            reasons = [("the function", f"a new function object for {code.co_name} ({code.co_filename}:"
                        f"{code.co_firstlineno}), compiled {counts[0]} times: a fresh closure or a new jit(...) "
                        "made on each call has its own cache; hoist the jit and pass changing values as arguments")]
        else:
            reasons = [("the function", "first call")]
        # (warned only for functions without closures: a factory making jitted closures over different values
        # from one code location is not a mistake; the same closure-free function jitted anew each time is)
        if counts[0] == STREAK and not _ours(fun) and getattr(fun, "__closure__", None) is None:
            _advise(f"{name}: {reasons[0][1]}")
    else:
        reasons = differences(old, new, fun) or (
            [("enable_x64", f"{old[3]} -> {new[3]}")] if old[3] != new[3] else
            [("the cache", "this signature was compiled before and dropped (jit_cache_size, or cache_clear)")])
    if explain or log_compiles:
        source = user_source()
        at = f" at {source}" if source is not None else ""
        if explain:
            because = "; ".join(f"{what}: {how}" for what, how in reasons)
            logger.warning("%s: cache miss%s (compile %d of this function), because %s", name, at, log.misses,
                           because)
        if log_compiles:
            avals = ", ".join(a.str_short() for a in signature[1])
            logger.warning("%s: compiling for (%s)%s", name, avals, at)
    if old is not None and log.streak >= STREAK and not log.warned and not _ours(fun):
        log.warned = True
        what, how = reasons[0]
        fix = ("each value compiles anew: pass it as an (unstatic) array argument if it varies" if what.startswith(
            "static") else "pad it to a few sizes, or hoist what varies out of the jitted function" if "shape" in how
               else "give it one dtype (an array rather than a Python scalar, or the reverse)" if "typed" in how or
               "dtype" in how else "keep it the same from call to call")
        _advise(f"{name} compiled {log.streak} times in a row: {what} keeps changing ({how}); {fix}. "
                "ember.config.update('jax_explain_cache_misses', True) logs every cause")


def _advise(message: str) -> None:
    """The recompilation advice, once: a WARNING of the `ember` logger, at the user's call site."""
    source = user_source()
    logger.warning("%s%s", message, f" (at {source})" if source is not None else "")


__all__ = ["CacheInfo", "CompileLog", "differences", "on_hit", "on_miss"]
