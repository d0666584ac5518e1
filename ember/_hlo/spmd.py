"""What the lowering of an SPMD program needs to know of its mesh: the device groups of named axes.

A shard_map body is lowered with an AxisContext on its emitter (Emitter.axis_context): collectives over named axes
(psum, all_gather, ppermute, axis_index, ...) read from it the groups of partitions they run across. A partition
id is a device's position in the program's device assignment (the mesh's devices, flattened row-major)."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from ember._core.sharding import size_of_axes
from ember._hlo.emitter import sharding_text as sharding_text

_channels = itertools.count(1)  # channel ids of cross-partition collectives: unique within any module


class AxisContext:
    """The named axes of a mesh and, at each mesh position, the partition id of the device there."""

    def __init__(self, axis_names: Sequence[str], partition_ids: np.ndarray):
        self.axis_names = tuple(axis_names)
        self.partition_ids = np.asarray(partition_ids, dtype=np.int64)
        if self.partition_ids.ndim != len(self.axis_names):
            raise ValueError(f"AxisContext: {len(self.axis_names)} axis names for a mesh of shape "
                             f"{self.partition_ids.shape}")
        self.axis_sizes = dict(zip(self.axis_names, self.partition_ids.shape))

    def size(self, axes: Sequence[str]) -> int:
        """The number of partitions along the named axes together."""
        return size_of_axes(self.axis_sizes, [self._known(a) for a in axes])

    def _known(self, axis: str) -> str:
        if axis not in self.axis_sizes:
            raise NameError(f"unbound axis name: {axis!r} (the mesh's axes are {self.axis_names})")
        return axis

    def groups(self, axes: Sequence[str]) -> list[list[int]]:
        """The partition groups a collective over `axes` runs within: one group per position along the other
        axes, each listing its partitions in the order of the named axes (the first named axis slowest), which is
        the order of axis_index over those axes."""
        positions = [self.axis_names.index(self._known(a)) for a in axes]
        others = [i for i in range(len(self.axis_names)) if i not in positions]
        moved = np.transpose(self.partition_ids, others + positions)
        return moved.reshape(-1, self.size(axes)).tolist()

    @staticmethod
    def next_channel() -> int:
        """A fresh channel id for a cross-partition collective."""
        return next(_channels)


class SpmdPlan:
    """How a program is partitioned: over `devices` (partition i runs on devices[i]), with the HloSharding text of
    each input and output (None: XLA's sharding propagation chooses)."""
    __slots__ = ("devices", "in_shardings", "out_shardings")

    def __init__(self, devices: Sequence[object], in_shardings: Sequence[str | None],
                 out_shardings: Sequence[str | None]):
        self.devices = tuple(devices)
        self.in_shardings, self.out_shardings = list(in_shardings), list(out_shardings)


