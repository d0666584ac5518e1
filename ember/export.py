"""ember.export: functions exported for fixed argument types, serialized, deserialized and called elsewhere, as
jax.export (see docs/aot.md#export)."""
from ember._api.export import Exported as Exported, FORMAT_VERSION as FORMAT_VERSION, deserialize as deserialize
from ember._api.export import export as export, symbolic_shape as symbolic_shape

__all__ = ["Exported", "FORMAT_VERSION", "deserialize", "export", "symbolic_shape"]
