"""jax.interpreters.batching on ember: the batching rules of primitives defined with ember.extend.core.Primitive
(primitive_batchers: rule(args, dims); fancy_primitive_batchers: rule(axis_data, args, dims);
axis_primitive_batchers: rule(size, name, trace_type, args, dims); all with **params), and the rule makers and
helpers JAX's batching rules use. A dimension not_mapped (None) is an unbatched operand or result.

defreducer(prim) batches a reduction over its `axes` param. register_vmappable(data_type, spec_type,
axis_size_type, to_elt, from_elt, make_iota) makes ember.vmap map over values of a container type (a sparse
matrix: several arrays under one in_axes entry), as JAX's (ember._api.vmap.Vmappable says how)."""
from typing import Any, Sequence

import numpy as np

from ember._api.vmap import is_vmappable as is_vmappable, register_vmappable as register_vmappable
from ember._api.vmap import unregister_vmappable as unregister_vmappable
from ember.extend._protocol import (AxisData, axis_primitive_batchers, bdim_at_front, broadcast, defbroadcasting,
                                    defvectorized, fancy_primitive_batchers, moveaxis, not_mapped,
                                    primitive_batchers)


def defreducer(prim: Any) -> None:
    """prim reduces its one operand over the dimensions in its `axes` param (a tuple of non-negative ints): the
    batch dimension is kept, the reduced ones renumbered around it (an `input_shape` param follows the operand)."""
    def rule(axis_data: AxisData, args: Sequence[Any], dims: Sequence[Any], *, axes: Sequence[int], **params: Any
             ) -> tuple[Any, Any]:
        (x,), (dim,) = args, dims
        if dim is None:
            return prim.bind(x, axes=axes, **params), None
        axes = tuple(int(a) + 1 if a >= dim else int(a) for a in axes)
        if "input_shape" in params:
            params = dict(params, input_shape=tuple(np.shape(x)))
        kept = [i for i in range(np.ndim(x)) if i not in axes]
        return prim.bind(x, axes=axes, **params), kept.index(dim)
    fancy_primitive_batchers[prim] = rule


__all__ = ["AxisData", "axis_primitive_batchers", "bdim_at_front", "broadcast", "defbroadcasting", "defreducer",
           "defvectorized", "fancy_primitive_batchers", "moveaxis", "not_mapped", "primitive_batchers",
           "register_vmappable", "unregister_vmappable"]
