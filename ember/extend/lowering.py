"""ember.extend.lowering, as jax.extend.lowering: the context a lowering rule of a primitive defined the JAX way
receives (LoweringRuleContext: ember's RuleContext, with avals_in, avals_out and module_context; docs/extending.md).

JAX's MLIR context (JaxIrContext) and its dialect registration (upstream_dialects) belong to jaxlib's MLIR Python
bindings, which ember does not have (it writes StableHLO as text): they raise, saying so."""
from __future__ import annotations

from typing import Any

from ember.extend._protocol import RuleContext as LoweringRuleContext

_NO_MLIR = ("ember writes StableHLO as text and has no MLIR Python bindings (jaxlib's mlir.ir); lower a primitive "
            "with ember.interpreters.mlir.lower_fun, or emit a call with ember.ffi.ffi_lowering")


class JaxIrContext:
    """jaxlib's MLIR context class: not on ember (constructing one raises NotImplementedError)."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError(f"JaxIrContext: {_NO_MLIR}")


def upstream_dialects(*args: Any, **kwargs: Any) -> Any:
    """jaxlib's registration of MLIR's upstream dialects: not on ember (NotImplementedError)."""
    raise NotImplementedError(f"upstream_dialects: {_NO_MLIR}")


__all__ = ["JaxIrContext", "LoweringRuleContext", "upstream_dialects"]
