"""jax.interpreters.batching on ember: the batching rules of primitives defined with ember.extend.core.Primitive
(primitive_batchers: rule(args, dims); fancy_primitive_batchers: rule(axis_data, args, dims);
axis_primitive_batchers: rule(size, name, trace_type, args, dims); all with **params), and the rule makers and
helpers JAX's batching rules use. A dimension not_mapped (None) is an unbatched operand or result."""
from ember.extend._protocol import (AxisData, axis_primitive_batchers, bdim_at_front, broadcast, defbroadcasting,
                                    defvectorized, fancy_primitive_batchers, moveaxis, not_mapped,
                                    primitive_batchers)

__all__ = ["AxisData", "axis_primitive_batchers", "bdim_at_front", "broadcast", "defbroadcasting", "defvectorized",
           "fancy_primitive_batchers", "moveaxis", "not_mapped", "primitive_batchers"]
