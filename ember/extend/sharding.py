"""ember.extend.sharding, as jax.extend.sharding: XLA's own sharding form, over a device assignment (GSPMDSharding:
ember's HloShardingSharding) and as its serialized protobuf, xla.OpSharding (read and written by ember itself).

ember's XLA sharding is ember._core.sharding.HloSharding (`.text()` prints XLA's form, `{devices=[2,1]0,1}`), where
JAX's is xla_client.HloSharding; get_op_sharding_from_serialized_proto gives the same object (ember has no separate
OpSharding). jaxlib's xla_client module itself is not part of ember (xla_client is not provided)."""
from __future__ import annotations

from typing import Any

from ember._core.sharding import HloSharding as HloSharding, HloShardingSharding as GSPMDSharding
from ember._runtime.xla_proto import op_sharding as _op_sharding, serialize_op_sharding as _serialize


def get_hlo_sharding_from_serialized_proto(proto: bytes) -> HloSharding:
    """The sharding a serialized xla.OpSharding describes (a ValueError for bytes that are not one)."""
    if not isinstance(proto, (bytes, bytearray)):
        raise TypeError(f"get_hlo_sharding_from_serialized_proto: expected bytes, got {type(proto).__name__}")
    return _op_sharding(bytes(proto))


def get_op_sharding_from_serialized_proto(proto: bytes) -> HloSharding:
    """The sharding a serialized xla.OpSharding describes, as ember's HloSharding (JAX gives an OpSharding)."""
    return get_hlo_sharding_from_serialized_proto(proto)


def get_serialized_proto_from_hlo_sharding(hlo_sharding: Any) -> bytes:
    """The serialized xla.OpSharding of an HloSharding (or of a GSPMDSharding's), which JAX's readers read back."""
    if isinstance(hlo_sharding, GSPMDSharding):
        hlo_sharding = hlo_sharding._hlo
    if not isinstance(hlo_sharding, HloSharding):
        raise TypeError(f"get_serialized_proto_from_hlo_sharding: expected an HloSharding, got "
                        f"{type(hlo_sharding).__name__}")
    return _serialize(hlo_sharding)


__all__ = ["GSPMDSharding", "HloSharding", "get_hlo_sharding_from_serialized_proto",
           "get_op_sharding_from_serialized_proto", "get_serialized_proto_from_hlo_sharding"]
