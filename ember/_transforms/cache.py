"""Transformations of sub-IRs computed once per request.

The rules of higher-order primitives transform their sub-IRs (a branch, a loop body) each time they run, and a
rule runs again for every enclosing transformation: without sharing, `vmap(grad(f))` of loops nested d deep
transforms the innermost body about 2^d times. A TransformCache keeps each result on the IR object it was computed
from (weakly: an entry dies with its IR, and the result does not keep the IR alive) under the request (in_dims,
with_tangent, ...), so each sub-IR is transformed once per distinct request.

Keys are IR objects, not their printed structure: IRs are immutable values, and an IR carries what its result
depends on (custom rules are params of its equations), so a structurally equal IR with another rule is another
key. enable_x64 is part of every request (the rules' default dtypes follow it). A result that captured tracers of
an enclosing staging as constants belongs to that staging and is returned without being kept."""
from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from typing import Any, Callable, Hashable, Iterator, TypeVar

from ember._core import IR
from ember._core.cache import on_clear
from ember._core.dtypes import x64_enabled
from ember._core.trace import has_tracer_consts

T = TypeVar("T")
REQUESTS_PER_IR = 32  # distinct requests kept per IR (a loop's batching fixed point asks for a few)
_MISSING = object()


_gc_pauses = 0  # builds running under paused_gc (in any thread)
_gc_paused_by_us = False
_gc_lock = threading.Lock()


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a program is built (staged, transformed, lowered): a build
    allocates millions of objects that the collector traverses again and again, and its full collections grow with
    the program, so the build grew faster than its length (jit(grad(f)).lower() of a 4000-step chain: 3.7 s, 2.0 s
    of it in the collector; grad over 100000 leaves: 6.9 s, 2.5 s in it). Nothing cyclic is built that must be
    freed meanwhile (objects are still freed when their last reference goes); the collector is enabled again when
    the outermost paused build ends (in any thread), unless it was disabled before."""
    global _gc_pauses, _gc_paused_by_us
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1 and gc.isenabled():
            gc.disable()
            _gc_paused_by_us = True
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_paused_by_us:
                _gc_paused_by_us = False
                gc.enable()


def holds_tracers(result: Any) -> bool:
    """Whether a result (an IR, or tuples and lists holding IRs) has a tracer among its IRs' constants."""
    if isinstance(result, IR):
        return has_tracer_consts(result)
    if isinstance(result, tuple | list):
        return any(holds_tracers(r) for r in result)
    return False


class TransformCache:
    """The results of one transformation, per (IR object, request). Values must be treated as immutable: return
    tuples, and IRs that callers only read (the IR edits of the rules build new IRs)."""

    def __init__(self, name: str):
        self.name = name
        self._results: "weakref.WeakKeyDictionary[IR, dict[Hashable, Any]]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        on_clear(self.clear)

    def get(self, ir: IR, request: Hashable, compute: Callable[[], T]) -> T:
        """compute(), the transformation of ir for request, computed once per (ir, request, enable_x64)."""
        key = (request, x64_enabled())
        kept = self._results.get(ir, {}).get(key, _MISSING)
        if kept is not _MISSING:
            return kept
        result = compute()
        if not holds_tracers(result):
            self._store(ir, key, result)
        return result

    def _store(self, ir: IR, key: Hashable, result: Any) -> None:
        with self._lock:
            per_ir = self._results.setdefault(ir, {})
            per_ir[key] = result
            while len(per_ir) > REQUESTS_PER_IR:
                del per_ir[next(iter(per_ir))]

    def requests(self, ir: IR) -> int:
        """How many requests of ir are kept (for tests and debugging)."""
        return len(self._results.get(ir, ()))

    def __len__(self) -> int:
        """How many IRs have results kept."""
        return len(self._results)

    def clear(self) -> None:
        with self._lock:
            self._results.clear()
