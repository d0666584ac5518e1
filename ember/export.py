"""ember.export: functions exported for fixed argument types, serialized, deserialized and called elsewhere, as
jax.export; symbolic shapes export one program for every size (see docs/aot.md#export and #shape-polymorphism)."""
from ember._api.export import DisabledSafetyCheck as DisabledSafetyCheck, Exported as Exported
from ember._api.export import FORMAT_VERSION as FORMAT_VERSION, SymbolicScope as SymbolicScope
from ember._api.export import default_export_platform as default_export_platform, deserialize as deserialize
from ember._api.export import export as export, is_symbolic_dim as is_symbolic_dim
from ember._api.export import (
    maximum_supported_calling_convention_version as maximum_supported_calling_convention_version)
from ember._api.export import (
    minimum_supported_calling_convention_version as minimum_supported_calling_convention_version)
from ember._api.export import register_namedtuple_serialization as register_namedtuple_serialization
from ember._api.export import register_pytree_node_serialization as register_pytree_node_serialization
from ember._api.export import symbolic_args_specs as symbolic_args_specs, symbolic_shape as symbolic_shape

__all__ = ["DisabledSafetyCheck", "Exported", "FORMAT_VERSION", "SymbolicScope", "default_export_platform",
           "deserialize", "export", "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]
