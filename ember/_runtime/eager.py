"""Eager execution of primitives: each (primitive, params, operand types) compiles once into a one-equation
executable, kept in a bounded least-recently-used cache. Importing this module fills the core's eager slot."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core.cache import LRUCache
from ember._core import (EAGER, IR, Eqn, Primitive, ShapedArray, Tracer, UnexpectedTracerError, Var, aval_of_value,
                         check_live)
from ember._runtime.compiler import Compiled, compile_ir

_eager_cache = LRUCache("eager_cache_size")  # ember.config option


def _eager_aval(x: Any, prim: Primitive, i: int) -> ShapedArray:
    aval = getattr(x, "aval", None)
    if aval is not None and not isinstance(x, Tracer):
        return aval
    if isinstance(x, Tracer):  # outside every staging of this thread, so it leaked out of its own
        check_live(x, f"{prim.name}: operand {i}")
        raise UnexpectedTracerError(f"{prim.name}: operand {i} is a tracer {x!r} of a staging in progress on "
                                    "another thread")
    try:
        return aval_of_value(x)
    except TypeError as err:
        raise TypeError(f"{prim.name}: operand {i} of type {type(x).__name__} is not a valid ember array ({err})"
                        ) from None


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    avals = tuple(_eager_aval(x, prim, i) for i, x in enumerate(args))
    key = (prim, tuple(sorted(params.items())), avals)
    compiled: Compiled | None = _eager_cache.lookup(key)
    if compiled is None:
        out_avals = prim.out_avals(avals, params)
        in_vars = [Var(a) for a in avals]
        out_vars = [Var(a) for a in out_avals]
        compiled = compile_ir(IR([], [], in_vars, [Eqn(prim, in_vars, out_vars, params)], out_vars), prim.name)
        _eager_cache.store(key, compiled)
    return compiled.call_flat(args)


EAGER.fill(apply_primitive)
