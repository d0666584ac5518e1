"""Layer 5, control: higher-order primitives carrying closed sub-IRs (cond/switch, while, scan), each with every
rule. Their rules call the transformations (jvp_ir, vjp_ir, batch_ir) on the sub-IRs."""
from ember._control.cond import cond as cond, switch as switch
from ember._control.loops import fori_loop as fori_loop, map as map, scan as scan, while_loop as while_loop  # noqa: A004

__all__ = ["cond", "fori_loop", "map", "scan", "switch", "while_loop"]
