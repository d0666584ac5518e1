"""Running an IR: compiled once (the program kept on the IR) and executed, inlined into the trace while staging,
or evaluated op by op; the values it returns made arrays."""
from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np

from ember._api.templates import compile_staged
from ember._core import IR, Literal, aval_of, eval_ir, is_python_scalar, is_tracing
from ember._core.cache import on_clear
from ember._prims import full
from ember._runtime import Compiled
from ember._runtime.array import device_put


def compile(ir: IR, name: str = "main") -> Compiled:  # noqa: A001
    """Compile an IR with XLA; the result is called with the IR's inputs and returns its outputs."""
    if not isinstance(ir, IR):
        raise TypeError(f"compile: expected an IR (from ember.stage_out or ember.grad), got {type(ir).__name__}")
    compiled = ir.compiled  # kept on the IR (not in a global table), so it is freed with the IR
    if compiled is None or compiled.name != name:
        compiled = ir.compiled = compile_staged(ir, name)
        _compiled_irs.add(ir)
    return compiled


_compiled_irs: "weakref.WeakSet[IR]" = weakref.WeakSet()  # to forget their programs in clear_caches


def _forget_compiled_irs() -> None:
    for ir in list(_compiled_irs):
        ir.compiled = None
    _compiled_irs.clear()


on_clear(_forget_compiled_irs)


def run_ir(ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
    """Run an IR: inline it into the current trace while staging, else compile (cached) and execute it."""
    if is_tracing():
        return eval_ir(ir, args)
    return compile(ir, name).call_flat(args)


def as_arrays(values: list[Any]) -> list[Any]:
    """Values an IR returned, made arrays: its literal outputs (constants), and outside traces the host values
    it passed through (an output that is an input)."""
    tracing = is_tracing()
    return [full((), v) if isinstance(v, Literal) else
            device_put(v, weak_type=aval_of(v).weak_type) if not tracing and is_host_value(v) else v for v in values]


def is_host_value(x: Any) -> bool:
    return is_python_scalar(x) or isinstance(x, np.ndarray | np.generic)


def eval_ir_public(ir: IR, *args: Any) -> Any:
    """Evaluate an IR primitive by primitive (eagerly, or inline while staging); returns its outputs."""
    outs = as_arrays(eval_ir(ir, args))
    if ir.out_tree is not None:
        return ir.out_tree.unflatten(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def eval_ir_named(ir: IR, args: Sequence[Any], name: str = "") -> list[Any]:
    """eval_ir with run_ir's signature: an IR evaluated op by op (or inlined while staging)."""
    return as_arrays(eval_ir(ir, args))
