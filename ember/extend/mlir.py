"""ember.extend.mlir, as jax.extend.mlir: jaxlib's MLIR tools by name. Each works on jaxlib's MLIR objects or on
StableHLO bytecode, which ember has neither of (ember writes StableHLO as text, and its compiler is the PJRT plugin
that parses that text): every function raises NotImplementedError saying so, and what ember offers instead."""
from __future__ import annotations

from typing import Any

_WHY = "ember writes StableHLO as text and has no MLIR Python bindings or StableHLO bytecode serializer"


def serialize_portable_artifact(mlir_module: Any, target: str, *args: Any, **kwargs: Any) -> bytes:
    """StableHLO's portable (VHLO bytecode) artifact of a module: not on ember (ember.export serializes programs
    as StableHLO text in its own artifact)."""
    raise NotImplementedError(f"serialize_portable_artifact: {_WHY}; ember.export.export(...).serialize() writes "
                              "ember's portable artifact")


def deserialize_portable_artifact(mlir_module: bytes, context: Any = None) -> Any:
    """A module from StableHLO's portable artifact: not on ember (ember.export.deserialize reads ember's)."""
    raise NotImplementedError(f"deserialize_portable_artifact: {_WHY}; ember.export.deserialize reads ember's "
                              "artifacts")


def hlo_to_stablehlo(computation: bytes) -> bytes:
    """StableHLO of a serialized HLO module: not on ember (it has no HLO-to-StableHLO translator)."""
    raise NotImplementedError(f"hlo_to_stablehlo: {_WHY} nor an HLO-to-StableHLO translator")


def refine_polymorphic_shapes(mlir_module: bytes, *args: Any, **kwargs: Any) -> bytes:
    """Shape refinement of a shape-polymorphic module: not on ember (its symbolic shapes are templates that
    ember.export fills per binding, not dynamic MLIR shapes)."""
    raise NotImplementedError(f"refine_polymorphic_shapes: {_WHY}; ember.export fills a shape-polymorphic "
                              "program's template for each binding of its dimension variables instead")


def lower_with_sharding_in_types(ctx: Any, op: Any, aval: Any) -> Any:
    """The sharding annotation of an MLIR op from its aval's explicit sharding: not on ember, whose lowering
    annotates shardings itself (ember._hlo)."""
    raise NotImplementedError(f"lower_with_sharding_in_types: {_WHY}; ember annotates an explicit sharding in its "
                              "own lowering")


__all__ = ["deserialize_portable_artifact", "hlo_to_stablehlo", "lower_with_sharding_in_types",
           "refine_polymorphic_shapes", "serialize_portable_artifact"]
