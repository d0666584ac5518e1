"""Layer 5, control: higher-order primitives carrying closed sub-IRs (cond/switch, while, scan), each with every
rule. Their rules call the transformations (jvp_ir, vjp_ir, batch_ir) on the sub-IRs."""
from ember._control.composite import composite as composite
from ember._control.cond import cond as cond, platform_dependent as platform_dependent, switch as switch
from ember._control.cumulative import (cumlogsumexp as cumlogsumexp, cummax as cummax, cummin as cummin,
                                       cumprod as cumprod)
from ember._control.custom import (checkpoint as checkpoint, checkpoint_policies as checkpoint_policies,
                                   custom_jvp as custom_jvp, custom_vjp as custom_vjp,
                                   optimization_barrier as optimization_barrier, remat as remat)
from ember._control.loops import (associative_scan as associative_scan, fori_loop as fori_loop, map as map,  # noqa: A004
                                  scan as scan, while_loop as while_loop)
from ember._control.shard_map import shard_map as shard_map, smap as smap
from ember._control.solves import (custom_linear_solve as custom_linear_solve,
                                   custom_root as custom_root)
from ember._control import pjit as _pjit  # noqa: F401  (registers pjit, the call of a jitted function)

__all__ = [
    "associative_scan", "checkpoint", "checkpoint_policies", "composite", "cond", "custom_jvp", "custom_vjp",
    "fori_loop", "map", "optimization_barrier", "platform_dependent", "remat", "scan", "shard_map", "smap", "switch",
    "while_loop",
    "cumlogsumexp", "cummax", "cummin", "cumprod", "custom_linear_solve", "custom_root",
]
