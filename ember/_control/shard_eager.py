"""shard_map outside jit, as JAX's: the body runs on each device's values, so `print(x)` in it shows every device's
block ("On cpu:0 at mesh coordinates (i,) = (0,):" and the block, as JAX prints it), and Python may branch on a value
whose type says every device holds the same one.

The body is staged as a concrete staging (ember._core.trace.Builder) whose values are PerDevice: each equation's
values on the devices, computed only when Python asks for one (printing, bool, int, np.asarray), by running the
equation and the ones it depends on as one-equation shard_map programs over the mesh, each input stacked as
(devices, *block) split over every mesh axis (device i of the mesh, row-major, holds row i). The result of the
shard_map is its compiled program's, as before: the values printed are those the program computes."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray
from ember._core.sharding import Mesh, PartitionSpec
from ember._core.trace import PerDevice, outside_stagings


# run(mesh, prim, params, inputs, stacked): one equation's stacked outputs on every device (shard_map's
# run_on_devices), or, with prim None, its one input (params["spec"]: how it is split) stacked
Runner = Callable[[Mesh, Any, dict[str, Any], list[Any], list[bool]], list[Any]]


class _Node:
    """An equation of an eager shard_map body whose values are computed on demand: its inputs are _Blocks (of
    earlier equations or of the body's arguments) or values the body closed over (the same on every device)."""
    __slots__ = ("mesh", "run", "prim", "params", "inputs", "outs")

    def __init__(self, mesh: Mesh, run: Runner, prim: Primitive | None, params: dict[str, Any],
                 inputs: Sequence[Any]):
        self.mesh, self.run, self.prim, self.params, self.inputs = mesh, run, prim, params, list(inputs)
        self.outs: list[Any] | None = None

    def compute(self) -> list[Any]:
        """The stacked values of its outputs, computing the equations it depends on first (without recursion)."""
        pending = [self]
        while pending:
            node = pending[-1]
            if node.outs is not None:
                pending.pop()
                continue
            waiting = [x.node for x in node.inputs if isinstance(x, _Blocks) and x.node.outs is None]
            if waiting:
                pending.extend(waiting)
                continue
            stacked = [isinstance(x, _Blocks) for x in node.inputs]
            values = [x.stacked() if isinstance(x, _Blocks) else x for x in node.inputs]
            with outside_stagings():
                node.outs = node.run(node.mesh, node.prim, node.params, values, stacked)
            node.inputs = []  # (computed: its inputs may go)
            pending.pop()
        return self.outs  # type: ignore[return-value]


class _Blocks(PerDevice):
    """Output `index` of a _Node: each device's block of a value of the body."""
    __slots__ = ("node", "index")

    def __init__(self, node: _Node, index: int):
        self.node, self.index = node, index

    def stacked(self) -> Any:
        return self.node.compute()[self.index]

    def text(self, aval: ShapedArray) -> str:
        mesh = self.node.mesh
        blocks = np.asarray(self.stacked())
        names = f"({', '.join(map(str, mesh.axis_names))},)"
        return "\n".join(f"On {device} at mesh coordinates {names} = {index}:\n{block}\n"
                         for (index, device), block in zip(np.ndenumerate(mesh.devices), blocks))

    def common(self, aval: ShapedArray) -> Any:
        if aval.vma:  # (it may differ between devices: no one Python value, as in JAX)
            return None
        return np.asarray(self.stacked())[0]


def arguments_on_devices(mesh: Mesh, run: Runner, specs: Sequence[PartitionSpec], args: Sequence[Any]
                         ) -> list[_Blocks]:
    """The body's arguments as PerDevice values: each split as its spec says, stacked (computed when needed)."""
    return [_Blocks(_Node(mesh, run, None, {"spec": spec}, [x]), 0) for spec, x in zip(specs, args)]


def evaluate_on_devices(mesh: Mesh, run: Runner) -> Callable[[Primitive, list[Any], dict[str, Any], int], list[Any]]:
    """The Builder.evaluate of an eager shard_map body over mesh: each equation's values, as _Blocks."""
    def evaluate(prim: Primitive, known: list[Any], params: dict[str, Any], count: int) -> list[Any]:
        node = _Node(mesh, run, prim, params, known)
        return [_Blocks(node, i) for i in range(count)]
    return evaluate
