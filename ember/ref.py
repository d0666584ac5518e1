"""ember.ref (jax.ref): mutable array references. `new_ref(x)` makes a Ref holding x; `ref[idx]` reads,
`ref[idx] = v` and `ref[idx] += v` write, eagerly, inside jit, in loop bodies and branches, and under grad and vmap;
`freeze(ref)` ends it and returns its final value. get, swap, set and addupdate are the same reads and writes as
functions. AbstractRef is the type of a Ref in the IR (`Ref{f32[3]}`). docs/refs.md."""
from ember._core.refs import RefAval as AbstractRef
from ember._prims.refs import (InvalidRefError, Ref, addupdate, empty_ref, free_ref, freeze, get, new_ref, set,
                               swap)

__all__ = ["AbstractRef", "InvalidRefError", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get",
           "new_ref", "set", "swap"]
