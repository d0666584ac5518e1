"""Devices meshes and shardings as pure data (as jax.sharding): AxisType, PartitionSpec, Mesh and the current mesh,
NamedSharding, SingleDeviceSharding, and XLA's own form of a sharding (HloSharding, a value: the `mhlo.sharding`
text a program carries; ember._runtime.xla_proto reads one from the OpSharding protos that XLA returns after SPMD
partitioning). Pictures of a sharding are ember.debug's.

The arithmetic of a spec over a mesh is here once (entry_axes, spec_axes, repeated_axes, unknown_axes,
size_of_axes, spec_tiles, divides, block_shape, full_shape): NamedSharding, shard_map, the collectives, the explicit
sharding rules and the lowering's AxisContext all read it, and a split that does not divide is an IndivisibleError
wherever it is refused.

Devices are opaque hashable objects with `.id`, `.platform` and `.process_index`; nothing here starts a backend. The
partition id of a device in an SPMD program is its index in the sharding's `_device_assignment` (a mesh's devices
flattened row-major), and every HloSharding here speaks in partition ids."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import threading
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ember._core import dtypes as _dtypes

Device = Any  # opaque: hashable, with .id (int), .platform (str), .process_index (int)
Index = tuple[slice, ...]
PROCESS_INDEX = 0  # ember runs one process: a device is addressable when its process_index is this one



class MemorySpace(enum.Enum):
    """Where an array lives on its device (jax.memory.Space): Device (the device's memory), Host (its host's
    memory) or Any (any space: a placeholder of kernel languages, not a place to put an array). On ember's CPU
    devices both are the same memory, and arrays carry no memory kind but "device"."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    __str__ = __repr__

class IndivisibleError(ValueError):
    """A dimension's size is not a multiple of the number of shards it is split into (as JAX's)."""


# --- HloSharding: XLA's OpSharding as a value --------------------------------------------------------------------

_SUBGROUP_ORDER = ("manual", "replicated")  # the order XLA puts subgroup dims in


@dataclasses.dataclass(frozen=True)
class HloSharding:
    """XLA's sharding of one value (xla::HloSharding): `kind` is "replicated", "maximal" (on partition
    `devices[0]`), "tiled", "manual" or "tuple" (`elements`). A tiled sharding splits the array into a grid of
    `tile_dims` tiles (the trailing dims past the array's rank are subgroups: replicas, or manual groups, named by
    `subgroups`) and `devices` lists the partition id of each tile in row-major order. Build with the class
    methods, which normalize as XLA does, so that equal shardings compare equal."""
    kind: str
    tile_dims: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    subgroups: tuple[str, ...] = ()
    elements: tuple[HloSharding, ...] = ()

    @classmethod
    def replicated(cls) -> HloSharding:
        return cls("replicated")

    @classmethod
    def manual(cls) -> HloSharding:
        return cls("manual")

    @classmethod
    def maximal(cls, device: int) -> HloSharding:
        return cls("maximal", devices=(int(device),))

    @classmethod
    def tuple_of(cls, elements: Sequence[HloSharding]) -> HloSharding:
        return cls("tuple", elements=tuple(elements))

    @classmethod
    def tiled(cls, tile_dims: Sequence[int], devices: Sequence[int] | np.ndarray, *,
              replicate_on_last_tile_dim: bool = False, subgroups: Sequence[str] = ()) -> HloSharding:
        """A tiled sharding (OpSharding type OTHER): the last len(subgroups) tile dims (or the last one, with
        replicate_on_last_tile_dim) are subgroups. Size-1 subgroups are dropped, subgroups of one kind merged
        (manual before replicated, as XLA orders them); a single device, or no split of the data dims with one
        kind of subgroup, becomes replicated (or manual)."""
        dims = tuple(int(d) for d in tile_dims)
        flat = tuple(int(d) for d in np.asarray(devices).reshape(-1))
        if replicate_on_last_tile_dim:
            if subgroups:
                raise ValueError("HloSharding.tiled: replicate_on_last_tile_dim and subgroups are exclusive")
            subgroups = ("replicated",)
        subgroups = tuple(subgroups)
        if any(s not in _SUBGROUP_ORDER for s in subgroups):
            raise ValueError(f"HloSharding.tiled: subgroups must be 'replicated' or 'manual', got {subgroups}")
        if any(d < 1 for d in dims) or math.prod(dims) != len(flat) or len(subgroups) > len(dims):
            raise ValueError(f"HloSharding.tiled: tile dims {list(dims)} (with {len(subgroups)} subgroup dims) do "
                             f"not fit {len(flat)} devices")
        if len(set(flat)) != len(flat) or min(flat, default=0) < 0:
            raise ValueError(f"HloSharding.tiled: devices must be distinct partition ids, got {list(flat)}")
        if len(flat) == 1:
            return cls.replicated()
        data_rank = len(dims) - len(subgroups)
        grid = np.asarray(flat).reshape(dims)
        keep = [data_rank + i for i, d in enumerate(dims[data_rank:]) if d > 1]
        kinds = [subgroups[i - data_rank] for i in keep]
        order = sorted(range(len(keep)), key=lambda i: _SUBGROUP_ORDER.index(kinds[i]))
        grid = grid.reshape(dims[:data_rank] + tuple(dims[i] for i in keep))
        grid = grid.transpose(list(range(data_rank)) + [data_rank + i for i in order])
        merged_kinds = [k for k in _SUBGROUP_ORDER if k in kinds]
        merged_sizes = [math.prod(dims[keep[i]] for i in order if kinds[i] == k) for k in merged_kinds]
        data_dims = dims[:data_rank]
        if math.prod(data_dims) == 1 and len(merged_kinds) == 1:
            return cls(merged_kinds[0])
        grid = grid.reshape(data_dims + tuple(merged_sizes))
        if merged_kinds[-1:] == ["replicated"]:
            grid = np.sort(grid, axis=-1)  # the order inside a group of replicas means nothing: XLA sorts it
        return cls("tiled", grid.shape, tuple(int(d) for d in grid.reshape(-1)), tuple(merged_kinds))

    @property
    def data_rank(self) -> int:
        """The rank of the arrays a tiled sharding applies to."""
        return len(self.tile_dims) - len(self.subgroups)

    @property
    def num_devices(self) -> int:
        """How many partitions a tiled or maximal sharding names (0: any number, replicated or manual)."""
        return len(self.devices)

    def is_replicated(self) -> bool:
        return self.kind == "replicated"

    def tiles_per_dim(self, ndim: int) -> tuple[int, ...]:
        """How many tiles each dimension of a rank-ndim array is split into."""
        if self.kind in ("replicated", "maximal"):
            return (1,) * ndim
        if self.kind != "tiled" or "manual" in self.subgroups:
            raise ValueError(f"a {'manual' if self.kind == 'tiled' else self.kind} sharding {self.text()} does not "
                             "say which part of an array each device holds")
        if self.data_rank != ndim:
            raise ValueError(f"sharding {self.text()} applies to arrays of rank {self.data_rank}, not {ndim}")
        return self.tile_dims[:self.data_rank]

    def text(self) -> str:
        """The `mhlo.sharding` attribute string that XLA parses."""
        if self.kind in ("replicated", "manual"):
            return "{" + self.kind + "}"
        if self.kind == "maximal":
            return f"{{maximal device={self.devices[0]}}}"
        if self.kind == "tuple":
            return "{" + ", ".join(e.text() for e in self.elements) + "}"
        text = f"{{devices=[{','.join(map(str, self.tile_dims))}]{','.join(map(str, self.devices))}"
        if self.subgroups == ("replicated",):
            text += " last_tile_dim_replicate"
        elif self.subgroups:
            text += f" last_tile_dims={{{', '.join(self.subgroups)}}}"
        return text + "}"

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"HloSharding({self.text()})"

    def relabel(self, new_ids: Sequence[int]) -> HloSharding:
        """The same sharding with partition id p renamed new_ids[p]."""
        if self.kind == "tuple":
            return HloSharding.tuple_of([e.relabel(new_ids) for e in self.elements])
        return dataclasses.replace(self, devices=tuple(int(new_ids[d]) for d in self.devices))

    def indices(self, global_shape: Sequence[int], num_partitions: int) -> list[Index]:
        """The part of an array of global_shape that each partition holds: one tuple of slices per partition id."""
        shape = tuple(global_shape)
        if self.kind in ("replicated", "maximal"):  # (maximal: JAX's rule, a sharding of one device is replicated:
            return [(slice(None),) * len(shape)] * num_partitions  # XLA gives every partition the whole array)
        tiles = self.tiles_per_dim(len(shape))
        if len(self.devices) != num_partitions:
            raise ValueError(f"HloSharding.indices: sharding {self.text()} does not cover {num_partitions} "
                             "partitions")
        block = block_shape(shape, tiles, lambda dim, size, count: (
            f"HloSharding.indices: sharding {self.text()} splits axis {dim} of shape {shape} into {count} tiles, "
            f"which do not divide its size {size}"))
        per_dim = [[slice(None)] if count == 1 else [slice(i * size, (i + 1) * size) for i in range(count)]
                   for size, count in zip(block, tiles)]
        replicas = math.prod(self.tile_dims[self.data_rank:])
        out: list[Index] = [()] * num_partitions
        ids = iter(self.devices)
        for index in itertools.product(*per_dim):
            for _ in range(replicas):
                out[next(ids)] = index
        return out


# --- PartitionSpec -----------------------------------------------------------------------------------------------

class _Unconstrained:
    def __repr__(self) -> str:
        return "UNCONSTRAINED"

    def __reduce__(self) -> str:
        return "UNCONSTRAINED"


UNCONSTRAINED = _Unconstrained()


def _canonical_entry(entry: Any) -> Any:
    """One entry of a spec: None, UNCONSTRAINED, an axis name, or a tuple of two or more axis names (a list is a
    tuple, a tuple of one name is the name, an empty tuple is None)."""
    if isinstance(entry, list | tuple):
        entry = tuple(entry)
        return None if not entry else entry[0] if len(entry) == 1 else entry
    return entry


def _axis_set(name: str, axes: Any) -> frozenset:
    if not isinstance(axes, set | frozenset):
        raise TypeError(f"{name} argument of PartitionSpec should be of type `frozenset` or `set`. Got {axes!r}")
    if None in axes:
        raise ValueError(f"{name} cannot contain None. All elements in {name} should refer to the mesh axes.")
    return frozenset(axes)


class PartitionSpec:
    """How each dimension of an array is split over mesh axes, as jax.sharding.PartitionSpec (JAX 0.10.2: not a
    tuple, equal only to a spec with the same entries): each entry is None (not split), an axis name, or a tuple
    of axis names (split over their product, the first one major); `unreduced`/`reduced` are sets of axis names."""
    __slots__ = ("_partitions", "unreduced", "reduced")
    UNCONSTRAINED = UNCONSTRAINED

    def __init__(self, *partitions: Any, unreduced: Any = frozenset(), reduced: Any = frozenset()):
        parts = tuple(_canonical_entry(p) for p in partitions)
        unreduced, reduced = _axis_set("unreduced", unreduced), _axis_set("reduced", reduced)
        if unreduced & reduced:
            raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. Got unreduced: "
                             f"{set(unreduced)} and reduced: {set(reduced)}")
        for name in spec_axes(parts):
            if name in unreduced or name in reduced:
                raise ValueError(f"partitions cannot overlap with {'unreduced' if name in unreduced else 'reduced'}"
                                 f" axes passed to PartitionSpec. Got partitions: {parts}")
        try:
            hash(parts)
        except TypeError:
            raise TypeError(f"PartitionSpec: entries must be None, axis names or tuples of them, got {parts}") from None
        object.__setattr__(self, "_partitions", parts)
        object.__setattr__(self, "unreduced", unreduced)
        object.__setattr__(self, "reduced", reduced)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PartitionSpec is immutable")

    def __init_subclass__(cls, **kwargs: Any):
        raise TypeError("Subclassing `PartitionSpec` is prohibited.")

    @property
    def partitions(self) -> tuple[Any, ...]:
        return self._partitions

    def _key(self) -> tuple[Any, ...]:
        return (self._partitions, self.unreduced, self.reduced)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionSpec) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = repr(self._partitions)[1:-1]
        extra = [f"{name}={set(axes)!r}" for name, axes in (("unreduced", self.unreduced), ("reduced", self.reduced))
                 if axes]
        if not extra:
            return f"P({parts})"
        parts = "" if not parts else f"{parts} " if parts.endswith(",") else f"{parts}, "
        return f"P({parts}{', '.join(extra)})"

    def __reduce__(self) -> Any:
        return (functools.partial(PartitionSpec, unreduced=self.unreduced, reduced=self.reduced), self._partitions)

    def _plain(self, what: str) -> tuple[Any, ...]:
        if self.unreduced or self.reduced:
            raise ValueError(f"Using {what} is dangerous when PartitionSpec has non-empty unreduced/reduced set. "
                             "Please use spec.partitions")
        return self._partitions

    def __getitem__(self, i: Any) -> Any:
        return self._plain("pspec[...]")[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._plain("*pspec"))

    def __len__(self) -> int:
        return len(self._partitions)

    def __add__(self, other: Any) -> PartitionSpec:
        if isinstance(other, PartitionSpec):
            return PartitionSpec(*self._partitions, *other._partitions, unreduced=self.unreduced | other.unreduced,
                                 reduced=self.reduced | other.reduced)
        if isinstance(other, tuple):
            return PartitionSpec(*self._plain("pspec + tuple"), *other)
        return NotImplemented

    def __radd__(self, other: Any) -> PartitionSpec:
        if isinstance(other, tuple):
            return PartitionSpec(*other, *self._plain("tuple + pspec"))
        return NotImplemented

    def index(self, value: Any) -> int:
        return self._partitions.index(_canonical_entry(value))

    def count(self, value: Any) -> int:
        return self._partitions.count(_canonical_entry(value))

    def update(self, partitions: Any = None, unreduced: Any = None, reduced: Any = None) -> PartitionSpec:
        return PartitionSpec(*(self._partitions if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)


P = PartitionSpec


# --- mesh and spec arithmetic: what a spec says over a mesh (one place: NamedSharding, shard_map, collectives) ----

def entry_axes(entry: Any) -> tuple[Any, ...]:
    """The mesh axes of one entry of a spec, as a tuple (None, UNCONSTRAINED: none)."""
    if entry is None or entry is UNCONSTRAINED:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)


def spec_axes(entries: Iterable[Any]) -> tuple[Any, ...]:
    """The mesh axes a spec's entries name, in order (an axis named twice, twice). Pass spec.partitions to read a
    spec with unreduced/reduced axes; iterating the spec itself refuses one, as JAX's."""
    return tuple(a for entry in entries for a in entry_axes(entry))


def repeated_axes(names: Iterable[Any]) -> list[Any]:
    """The names that occur more than once, in the order they first occur."""
    counts = collections.Counter(names)
    return [a for a, c in counts.items() if c > 1]


def unknown_axes(names: Iterable[Any], axis_names: Iterable[Any]) -> list[Any]:
    """The names (once each, in order) that are not among axis_names (a mesh's, or those bound)."""
    known = set(axis_names)
    return [a for a in dict.fromkeys(names) if a not in known]


def size_of_axes(sizes: Mapping[Any, int], names: Iterable[Any]) -> int:
    """The number of devices along the named axes together: the product of their sizes (1 for none)."""
    return math.prod(sizes[a] for a in names)


def spec_tiles(mesh: Mesh | AbstractMesh, spec: PartitionSpec, ndim: int) -> tuple[int, ...]:
    """Per dimension of an array of rank ndim, how many blocks spec cuts it into over mesh."""
    entries = tuple(spec)
    sizes = mesh.shape
    return tuple(size_of_axes(sizes, entry_axes(e)) for e in entries + (None,) * (ndim - len(entries)))


def divides(count: int, size: int) -> bool:
    """Whether a dimension of this size splits into count equal blocks."""
    return count > 0 and size % count == 0


def block_shape(shape: Sequence[int], tiles: Sequence[int], error: Callable[[int, int, int], str]
                ) -> tuple[int, ...]:
    """The shape of one block of an array of shape cut into tiles[d] blocks along each dimension d; an
    IndivisibleError with the message error(d, size, count) for the first dimension that does not divide."""
    for dim, (size, count) in enumerate(zip(shape, tiles)):
        if not divides(count, size):
            raise IndivisibleError(error(dim, size, count))
    return tuple(size // count for size, count in zip(shape, tiles))


def full_shape(block: Sequence[int], tiles: Sequence[int]) -> tuple[int, ...]:
    """The shape of the whole array whose blocks, tiles[d] along each dimension d, have the shape block."""
    return tuple(size * count for size, count in zip(block, tiles))


# --- Mesh and the current mesh -----------------------------------------------------------------------------------

class AxisType(enum.Enum):
    """How a mesh axis is used, as jax.sharding.AxisType: Auto (the compiler chooses shardings), Explicit
    (shardings are part of the types), Manual (inside shard_map)."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


def _axis_types(axis_names: tuple[Any, ...], axis_types: Any, where: str) -> tuple[AxisType, ...]:
    if axis_types is None:
        return (AxisType.Auto,) * len(axis_names)
    if not isinstance(axis_types, tuple):
        axis_types = (axis_types,)
    if not all(isinstance(a, AxisType) for a in axis_types):
        raise TypeError(f"axis_types passed to {where} must be of type `ember.sharding.AxisType`. Got {axis_types} "
                        f"of type {tuple(type(a) for a in axis_types)}")
    if len(axis_names) != len(axis_types):
        raise ValueError(f"Number of axis names should match the number of axis_types. Got "
                         f"axis_names={axis_names} and axis_types={axis_types}")
    return axis_types


class Mesh(contextlib.ContextDecorator):
    """An n-dimensional array of devices with a name per axis, as jax.sharding.Mesh. `with mesh:` makes it the
    current mesh of this thread (see current_mesh)."""
    devices: np.ndarray
    axis_names: tuple[Any, ...]
    axis_types: tuple[AxisType, ...]
    size: int

    def __init__(self, devices: np.ndarray | Sequence[Device], axis_names: str | Sequence[Hashable],
                 axis_types: AxisType | tuple[AxisType, ...] | None = None):
        grid = devices if isinstance(devices, np.ndarray) else np.array(devices, dtype=object)
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if any(n is None for n in names):
            raise ValueError(f"Mesh axis names cannot be None. Got: {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh axis names must be distinct. Got: {names}")
        if grid.ndim != len(names):
            raise ValueError("Mesh requires the ndim of its first argument (`devices`) to equal the length of its "
                             f"second argument (`axis_names`), but got devices.ndim == {grid.ndim} and "
                             f"len(axis_names) == {len(names)}.")
        flat = tuple(grid.flat)
        types = _axis_types(names, axis_types, "Mesh")
        empty = not flat or (not names and flat[0] is None)
        if not empty and len(set(flat)) != len(flat):
            raise ValueError(f"Mesh: each device may appear once, got device ids "
                             f"{[getattr(d, 'id', d) for d in flat]}")
        grid = np.array(flat, dtype=object).reshape(grid.shape)
        grid.flags.writeable = False
        for name, value in (("devices", grid), ("axis_names", names), ("axis_types", types),
                            ("size", 0 if empty else len(flat)), ("_flat_devices", () if empty else flat)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Mesh is immutable")

    def _key(self) -> tuple[Any, ...]:
        return (self._flat_devices, self.devices.shape, self.axis_names, self.axis_types)

    def __eq__(self, other: object) -> bool:
        return self is other or isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is None:  # (computed once: meshes key the caches of every sharded call)
            found = hash(self._key())
            object.__setattr__(self, "_hash", found)
        return found

    def __reduce__(self) -> Any:
        return (Mesh, (self.devices, self.axis_names, self.axis_types))

    @property
    def shape(self) -> collections.OrderedDict[Any, int]:
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self) -> tuple[tuple[Any, int], ...]:
        return tuple(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return self.devices.shape

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def is_scalar(self) -> bool:
        return self.size == 1 and not self.axis_names

    @property
    def device_ids(self) -> np.ndarray:
        if self.empty:
            raise ValueError("Mesh.device_ids: the mesh is empty")
        return np.array([d.id for d in self._flat_devices], dtype=int).reshape(self.devices.shape)

    @property
    def local_devices(self) -> list[Device]:
        return [d for d in self._flat_devices if d.process_index == PROCESS_INDEX]

    @property
    def is_multi_process(self) -> bool:
        return len(self.local_devices) != self.size

    def _axes_of_type(self, kind: AxisType) -> tuple[Any, ...]:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t == kind)

    @property
    def auto_axes(self) -> tuple[Any, ...]:
        return self._axes_of_type(AxisType.Auto)

    @property
    def explicit_axes(self) -> tuple[Any, ...]:
        return self._axes_of_type(AxisType.Explicit)

    @property
    def manual_axes(self) -> tuple[Any, ...]:
        return self._axes_of_type(AxisType.Manual)

    @property
    def are_all_axes_explicit(self) -> bool:
        return all(t == AxisType.Explicit for t in self.axis_types)

    @property
    def are_all_axes_auto(self) -> bool:
        return all(t == AxisType.Auto for t in self.axis_types)

    @property
    def are_all_axes_manual(self) -> bool:
        return all(t == AxisType.Manual for t in self.axis_types)

    @property
    def abstract_mesh(self) -> AbstractMesh:
        """The mesh without its devices (axis names, sizes and types, and the kind of device), as JAX's."""
        found = self.__dict__.get("_abstract")
        if found is None:
            first = self._flat_devices[0] if self._flat_devices else None
            device = None if first is None else AbstractDevice(getattr(first, "device_kind", "cpu"), None,
                                                               getattr(first, "platform", "cpu"))
            found = AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types, abstract_device=device)
            object.__setattr__(self, "_abstract", found)
        return found

    def update(self, devices: Any = None, axis_names: Any = None, axis_types: Any = None) -> Mesh:
        return Mesh(self.devices if devices is None else devices,
                    self.axis_names if axis_names is None else axis_names,
                    self.axis_types if axis_types is None else axis_types)

    def __str__(self) -> str:
        if self.empty:
            return "Mesh()"
        sizes = ", ".join(f"'{k}': {v}" for k, v in self.shape.items())
        return f"Mesh({sizes}, axis_types={self.axis_types})"

    def __repr__(self) -> str:
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names!r}, axis_types={self.axis_types})"

    def __enter__(self) -> Mesh:
        """JAX's older resource context (deprecated there: its DeprecationWarning): inside it a bare PartitionSpec
        names this mesh (with_sharding_constraint, ember's shard_map and reshard too), but it is not the context
        mesh of set_mesh (computations stay on one device, get_abstract_mesh is empty), as in JAX."""
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with jax.set_mesh(mesh):` "
                      "instead.", DeprecationWarning, stacklevel=2)
        _MESHES.legacy.append(self)
        MeshContexts.count(1)
        return self

    def __exit__(self, *exc: Any) -> bool:
        _MESHES.legacy.pop()
        MeshContexts.count(-1)
        return False


@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    """The kind of device a mesh is made of, without the devices (as jax.sharding.AbstractDevice)."""
    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self) -> str:
        return f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, platform={self.platform})"


class AbstractMesh:
    """A mesh's axis names, sizes and types without devices (as jax.sharding.AbstractMesh): what a type says of
    the devices it is split over (`typeof(x).sharding.mesh`), and what a program for a mesh is traced against
    (get_abstract_mesh, use_abstract_mesh)."""

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[Any], axis_types: Any = None, *,
                 abstract_device: AbstractDevice | None = None):
        sizes, names = tuple(int(n) for n in axis_sizes), tuple(axis_names)
        if len(sizes) != len(names):
            raise ValueError(f"AbstractMesh: {len(sizes)} axis sizes and {len(names)} axis names: {sizes}, {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh axis names must be distinct. Got: {names}")
        self.axis_sizes, self.axis_names = sizes, names
        self.axis_types = _axis_types(names, axis_types, "AbstractMesh")
        self.abstract_device = abstract_device

    def _key(self) -> tuple[Any, ...]:
        return (self.axis_sizes, self.axis_names, self.axis_types, self.abstract_device)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def shape(self) -> collections.OrderedDict[Any, int]:
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple[tuple[Any, int], ...]:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def empty(self) -> bool:
        return not self.axis_names

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return self

    explicit_axes = Mesh.explicit_axes
    auto_axes = Mesh.auto_axes
    manual_axes = Mesh.manual_axes
    _axes_of_type = Mesh._axes_of_type
    are_all_axes_explicit = Mesh.are_all_axes_explicit
    are_all_axes_auto = Mesh.are_all_axes_auto
    are_all_axes_manual = Mesh.are_all_axes_manual

    def update(self, axis_sizes: Any = None, axis_names: Any = None, axis_types: Any = None) -> AbstractMesh:
        return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                            self.axis_names if axis_names is None else axis_names,
                            self.axis_types if axis_types is None else axis_types,
                            abstract_device=self.abstract_device)

    def update_axis_types(self, name_to_type: dict[Any, AxisType]) -> AbstractMesh:
        return self.update(axis_types=tuple(name_to_type.get(n, t) for n, t in zip(self.axis_names,
                                                                                  self.axis_types)))

    def __repr__(self) -> str:
        if self.empty:
            return "AbstractMesh((), axis_types=())"
        sizes = ", ".join(f"'{k}': {v}" for k, v in self.shape.items())
        device = "" if self.abstract_device is None else (
            f", device_kind={self.abstract_device.device_kind}, num_cores={self.abstract_device.num_cores}, "
            f"platform={self.abstract_device.platform}")
        return f"AbstractMesh({sizes}, axis_types={self.axis_types}{device})"

    __str__ = __repr__


EMPTY_ABSTRACT_MESH = AbstractMesh((), ())


class _CurrentMesh(threading.local):
    def __init__(self) -> None:
        self.mesh: Mesh | None = None  # set_mesh's: the context mesh
        self.legacy: list[Mesh] = []  # the meshes of open `with mesh:` blocks, innermost last
        self.abstract: AbstractMesh | None = None  # use_abstract_mesh's, over the current mesh's own


_MESHES = _CurrentMesh()


class MeshContexts:
    """`active`: how many mesh contexts are open now, over all threads (a context mesh of set_mesh, a block of
    use_abstract_mesh, of `with mesh:`); read by the runtime on every call (a plain class attribute): while it is
    0, no call needs to look for one. `hooks` run when it changes."""
    active = 0
    hooks: list[Callable[[], None]] = []
    _lock = threading.Lock()

    @classmethod
    def count(cls, change: int) -> None:
        with cls._lock:
            cls.active += change
        for hook in cls.hooks:
            hook()


def current_mesh() -> Mesh | None:
    """The mesh a bare PartitionSpec names: the context mesh (set_mesh), else that of the innermost `with mesh:`
    of this thread, else None."""
    state = _MESHES
    if state.mesh is not None:
        return state.mesh
    return state.legacy[-1] if state.legacy else None


def context_mesh() -> Mesh | None:
    """The context mesh of this thread (set_mesh; not `with mesh:`, as JAX's): computations outside jit and jitted
    calls run over its devices, their results committed there (replicated unless their types say otherwise)."""
    return _MESHES.mesh if MeshContexts.active else None


def placement_token() -> Any:
    """What of the mesh context a staging depends on, for the caches of staged functions: None without one, else
    (the context mesh, use_abstract_mesh's mesh, the innermost `with mesh:` one)."""
    if not MeshContexts.active:
        return None
    state = _MESHES
    if state.mesh is None and state.abstract is None and not state.legacy:
        return None
    return state.mesh, state.abstract, state.legacy[-1] if state.legacy else None


def current_abstract_mesh() -> AbstractMesh:
    """The abstract mesh programs are traced against (as jax.sharding.get_abstract_mesh): use_abstract_mesh's, else
    the context mesh's (set_mesh), else the empty one."""
    state = _MESHES
    if state.abstract is not None:
        return state.abstract
    return EMPTY_ABSTRACT_MESH if state.mesh is None else state.mesh.abstract_mesh


@contextlib.contextmanager
def use_abstract_mesh(mesh: AbstractMesh) -> Iterator[None]:
    """Trace against mesh (an AbstractMesh) inside the block, as jax.sharding.use_abstract_mesh."""
    if not isinstance(mesh, AbstractMesh):
        raise ValueError(f"Expected mesh of type `AbstractMesh`. Got {type(mesh)}")
    previous, _MESHES.abstract = _MESHES.abstract, mesh
    MeshContexts.count(1)
    try:
        yield
    finally:
        _MESHES.abstract = previous
        MeshContexts.count(-1)


def swap_current_mesh(mesh: Mesh | None) -> Mesh | None:
    """Make mesh (or no mesh, None) this thread's context mesh; return the one it replaces."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"Expected a mesh of type `ember.sharding.Mesh`, got {type(mesh).__name__}")
    previous, _MESHES.mesh = _MESHES.mesh, mesh
    if (previous is None) != (mesh is None):
        MeshContexts.count(1 if previous is None else -1)
    return previous


# --- shardings ---------------------------------------------------------------------------------------------------

def checked_shape(where: str, shape: Any) -> tuple[int, ...]:
    """shape as a tuple of ints, or a TypeError naming where (a function taking a global shape) and shape."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{where}: global_shape must be a sequence of ints, got {shape!r}") from None
    if not all(isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise TypeError(f"{where}: global_shape must be a sequence of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


@functools.lru_cache(maxsize=4096)
def _indices_map(sharding: Sharding, shape: tuple[int, ...]) -> dict[Device, Index]:
    sharding.shard_shape(shape)  # the error for a dimension that does not divide
    hlo = sharding._to_hlo(len(shape))
    assignment = sharding._device_assignment
    return dict(zip(assignment, hlo.indices(shape, len(assignment))))


class Sharding:
    """How an array is laid out over devices, as jax.sharding.Sharding. A subclass gives device_set,
    _device_assignment (the index of a device in it is its partition id), memory_kind, with_memory_kind and
    _to_hlo; the rest follows from them."""

    @property
    def device_set(self) -> set[Device]:
        raise NotImplementedError

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        raise NotImplementedError

    @property
    def memory_kind(self) -> str | None:
        raise NotImplementedError

    def with_memory_kind(self, kind: str) -> Sharding:
        raise NotImplementedError

    def _to_hlo(self, ndim: int) -> HloSharding:
        """XLA's form of this sharding for an array of rank ndim, over the partition ids of _device_assignment."""
        raise NotImplementedError

    @property
    def num_devices(self) -> int:
        return len(self._device_assignment)

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds all of the array."""
        raise NotImplementedError

    @property
    def is_fully_addressable(self) -> bool:
        return all(d.process_index == PROCESS_INDEX for d in self.device_set)

    @property
    def addressable_devices(self) -> set[Device]:
        return {d for d in self.device_set if d.process_index == PROCESS_INDEX}

    def check_compatible_aval(self, shape: Sequence[int]) -> None:
        """Raise a ValueError when the sharding cannot apply to an array of this shape's rank."""

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, Index]:
        """The slices of an array of global_shape that each device holds."""
        return dict(_indices_map(self, checked_shape("devices_indices_map", global_shape)))

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, Index]:
        indices = self.devices_indices_map(global_shape)
        return indices if self.is_fully_addressable else {
            d: index for d, index in indices.items() if d.process_index == PROCESS_INDEX}

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of the piece of an array of global_shape that each device holds."""
        shape = checked_shape("shard_shape", global_shape)
        self.check_compatible_aval(shape)
        hlo = self._to_hlo(len(shape))
        if hlo.is_replicated() or self.num_devices == 1:
            return shape
        tiles = hlo.tiles_per_dim(len(shape))
        return block_shape(shape, tiles, lambda dim, size, count: (
            f"Sharding {self} implies that array axis {dim} is partitioned {count} times, but the dimension size is "
            f"{size} (full shape: {shape}, per-dimension tiling factors: {list(tiles)} should evenly divide the "
            "shape)"))

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """Whether both place the same pieces of an array of rank ndim on the same devices (and memory kind)."""
        if self.memory_kind != other.memory_kind or self._device_assignment != other._device_assignment:
            return False
        mine, theirs = self._to_hlo(ndim), other._to_hlo(ndim)
        return mine == theirs or (self.num_devices == 1 or mine.is_replicated()) and (
            other.num_devices == 1 or theirs.is_replicated())


class NamedSharding(Sharding):
    """A mesh and a PartitionSpec over its axes, as jax.sharding.NamedSharding."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec, *, memory_kind: str | None = None):
        if not isinstance(mesh, Mesh | AbstractMesh):
            raise TypeError(f"NamedSharding: mesh must be an ember.sharding.Mesh, got {type(mesh).__name__}")
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"NamedSharding: spec must be a PartitionSpec, got {spec!r} of type "
                            f"{type(spec).__name__}")
        # (a concrete mesh's default memory is the devices' own: "device", as JAX shows it)
        self.mesh, self.spec = mesh, spec
        self._memory_kind = memory_kind if memory_kind is not None or isinstance(mesh, AbstractMesh) else "device"
        _check_spec(mesh, spec)

    def __repr__(self) -> str:
        memory = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec}{memory})"

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, NamedSharding) and self.spec == other.spec
                                 and self._memory_kind == other._memory_kind and self.mesh == other.mesh)

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is None:  # (computed once: shardings key the caches of every sharded call)
            found = self._hash = hash((self.mesh, self._memory_kind, self.spec))
        return found

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def update(self, **kwargs: Any) -> NamedSharding:
        spec = kwargs.pop("spec", self.spec)
        return NamedSharding(kwargs.pop("mesh", self.mesh), spec if isinstance(spec, PartitionSpec) else P(*spec),
                             memory_kind=kwargs.pop("memory_kind", self._memory_kind))

    @property
    def device_set(self) -> set[Device]:
        return set(self.mesh._flat_devices)

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self.mesh._flat_devices

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def is_fully_replicated(self) -> bool:
        if self.mesh.size == 1:
            return True
        return not self.spec.unreduced and size_of_axes(self.mesh.shape, spec_axes(self.spec.partitions)) == 1

    def check_compatible_aval(self, shape: Sequence[int]) -> None:
        if len(shape) < len(self.spec):
            scalar = " For scalars the PartitionSpec should be P()" if len(shape) == 0 else ""
            raise ValueError(f"Sharding {self} is only valid for values of rank at least {len(self.spec)}, but was "
                             f"applied to a value of rank {len(shape)}.{scalar}")

    def _to_hlo(self, ndim: int) -> HloSharding:
        return _named_to_hlo(self.mesh, self.spec, ndim)


def _check_spec(mesh: Mesh, spec: PartitionSpec) -> None:
    """NamedSharding's checks of a spec against its mesh (JAX's errors)."""
    names = spec_axes(spec.partitions)
    duplicates = repeated_axes(names)
    if duplicates:
        raise ValueError(f"A single NamedSharding spec specification can map every mesh axis to at most one "
                         f"positional dimension, but {spec} has duplicate entries for "
                         f"{', '.join(sorted(f'`{a}`' for a in duplicates))}")
    for axis in unknown_axes(names, mesh.axis_names):
        raise ValueError(f"Resource axis: {axis} of {spec} is not found in mesh: {tuple(mesh.shape.keys())}.")
    if AxisType.Auto not in mesh.axis_types and UNCONSTRAINED in spec.partitions:
        raise ValueError(f"{spec} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. Got mesh "
                         f"axis_types: {mesh.axis_types}")
    for name, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
        for axis in axes:
            if axis not in mesh.axis_names:
                raise ValueError(f"{name} axes {axis} is not found in mesh.axis_names={mesh.axis_names}. Got "
                                 f"pspec={spec}")
            if dict(zip(mesh.axis_names, mesh.axis_types))[axis] != AxisType.Explicit:
                raise ValueError(f"{name} axes can only refer to mesh axes that is of type `Explicit`. Got "
                                 f"{name.lower()} axes: {set(axes)} and mesh: {mesh}")


@functools.lru_cache(maxsize=4096)
def _named_to_hlo(mesh: Mesh, spec: PartitionSpec, ndim: int) -> HloSharding:
    """The tile grid of a spec over a mesh: each array dimension is split over its mesh axes (the first major),
    the mesh axes it does not use become a replicated subgroup (Manual axes a manual one); the tile of mesh
    position p holds partition id p (the mesh's devices flattened row-major). Size-1 axes split nothing."""
    if len(spec) > ndim:
        raise ValueError(f"NamedSharding spec {spec} is only valid for values of rank at least {len(spec)}, but "
                         f"was applied to a value of rank {ndim}.")
    if spec.unreduced or spec.reduced:
        raise NotImplementedError(f"ember does not lower the unreduced/reduced axes of {spec}")
    sizes = mesh.shape
    position = {name: i for i, name in enumerate(mesh.axis_names)}
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    order: list[int] = []
    tile_dims = [1] * ndim
    for dim, entry in enumerate(spec.partitions):
        for axis in entry_axes(entry):
            if sizes[axis] > 1:
                if types[axis] == AxisType.Manual:
                    raise ValueError(f"NamedSharding spec {spec} splits a dimension over the Manual mesh axis {axis}")
                tile_dims[dim] *= sizes[axis]
                order.append(position[axis])
    used = set(spec_axes(spec.partitions))
    subgroups = []
    for kind, manual in (("replicated", False), ("manual", True)):
        axes = [position[a] for a in mesh.axis_names
                if a not in used and sizes[a] > 1 and (types[a] == AxisType.Manual) == manual]
        if axes:
            subgroups.append(kind)
            tile_dims.append(math.prod(mesh.axis_sizes[i] for i in axes))
            order.extend(axes)
    if not order:
        return HloSharding.replicated()
    grid = np.arange(mesh.size).reshape(mesh.axis_sizes).transpose(order + [
        i for i in range(len(mesh.axis_sizes)) if i not in order])
    return HloSharding.tiled(tile_dims, grid.reshape(-1), subgroups=subgroups)


def mesh_sharding_text(mesh: Mesh | AbstractMesh, spec: PartitionSpec, ndim: int) -> str:
    """The HloSharding text of spec over mesh for an array of rank ndim, its partition ids the mesh's positions
    (row-major): a program over the mesh's devices in that order, or over any devices for an AbstractMesh."""
    return _named_to_hlo(mesh, spec, ndim).text()


class SingleDeviceSharding(Sharding):
    """All of an array on one device, as jax.sharding.SingleDeviceSharding."""

    def __init__(self, device: Device, *, memory_kind: str | None = None):
        self._device, self._memory_kind = device, _memory(memory_kind)

    def __repr__(self) -> str:
        memory = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"SingleDeviceSharding(device={self._device!r}{memory})"

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, SingleDeviceSharding) and self._device == other._device
                                 and self._memory_kind == other._memory_kind)

    def __hash__(self) -> int:
        return hash((self._device, self._memory_kind))

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> SingleDeviceSharding:
        return SingleDeviceSharding(self._device, memory_kind=kind)

    @property
    def device_set(self) -> set[Device]:
        return {self._device}

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return (self._device,)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def _to_hlo(self, ndim: int) -> HloSharding:
        return HloSharding.replicated()


class HloShardingSharding(Sharding):
    """A sharding given by XLA's form over a device assignment (partition id p is devices[p]), as JAX's
    GSPMDSharding: what an SPMD program's output sharding becomes when no NamedSharding says the same."""

    def __init__(self, devices: Sequence[Device], hlo: HloSharding, *, memory_kind: str | None = None):
        if hlo.kind == "tuple":
            raise ValueError(f"HloShardingSharding: {hlo.text()} is a tuple sharding; give one of its elements")
        devices = tuple(devices)
        if any(p >= len(devices) for p in hlo.devices):
            raise ValueError(f"HloShardingSharding: sharding {hlo.text()} names partitions past the {len(devices)} "
                             "devices given")
        self._devices, self._hlo, self._memory_kind = devices, hlo, _memory(memory_kind)

    def __repr__(self) -> str:
        memory = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"HloShardingSharding({self._hlo.text()}, device_ids={[d.id for d in self._devices]}{memory})"

    def _key(self) -> tuple[Any, ...]:
        hlo = HloSharding.replicated() if self.is_fully_replicated else self._hlo
        return (self._devices, hlo, self._memory_kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HloShardingSharding) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> HloShardingSharding:
        return HloShardingSharding(self._devices, self._hlo, memory_kind=kind)

    @property
    def device_set(self) -> set[Device]:
        return set(self._devices)

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self._devices

    @property
    def is_fully_replicated(self) -> bool:
        return len(self._devices) == 1 or self._hlo.is_replicated()

    def check_compatible_aval(self, shape: Sequence[int]) -> None:
        if self._hlo.kind == "tiled" and len(shape) != self._hlo.data_rank:
            raise ValueError(f"Sharding {self} is only valid for values of rank {self._hlo.data_rank}, but was "
                             f"applied to a value of rank {len(shape)}")

    def _to_hlo(self, ndim: int) -> HloSharding:
        return self._hlo


def _specs_for(mesh: Mesh, tiles: Sequence[int]) -> Iterator[PartitionSpec]:
    """Every spec over mesh's non-Manual axes of size > 1 that splits dimension d into tiles[d] pieces."""
    axes = [a for a, t in zip(mesh.axis_names, mesh.axis_types) if mesh.shape[a] > 1 and t != AxisType.Manual]

    def choices(count: int, free: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        if count == 1:
            yield ()
        for axis in free:
            if count % mesh.shape[axis] == 0:
                for rest in choices(count // mesh.shape[axis], tuple(a for a in free if a != axis)):
                    yield (axis,) + rest

    def assign(dim: int, free: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], ...]]:
        if dim == len(tiles):
            yield ()
            return
        for chosen in choices(tiles[dim], free):
            for rest in assign(dim + 1, tuple(a for a in free if a not in chosen)):
                yield (chosen,) + rest

    for entries in assign(0, tuple(axes)):
        parts = list(entries)
        while parts and not parts[-1]:
            parts.pop()
        yield PartitionSpec(*parts)


def _memory(kind: str | None) -> str:
    """A sharding's memory kind: the devices' own ("device", as JAX shows it) unless another is named."""
    return "device" if kind is None else kind


def sharding_from_hlo(hlo: HloSharding, device_assignment: Sequence[Device], ndim: int, mesh: Mesh | None = None,
                      *, memory_kind: str | None = None, preferred: Sequence[Sharding] = ()) -> Sharding:
    """The sharding that XLA's hlo means for an array of rank ndim, partition id p being device_assignment[p]: a
    NamedSharding whose _to_hlo is the same (on the devices, in any order): the first of preferred that is (as JAX
    keeps the spec and mesh a program's inputs, constraints or out_specs wrote, `P('x', None)` rather than `P('x')`),
    else the shortest over mesh; else a SingleDeviceSharding (one device, no mesh), else an HloShardingSharding."""
    devices = tuple(device_assignment)
    if hlo.kind == "tuple":
        raise ValueError(f"sharding_from_hlo: {hlo.text()} is a tuple sharding; give one of its elements")
    for known in preferred:  # (over the program's mesh, or another mesh of the same devices: a constraint's)
        if (isinstance(known, NamedSharding) and isinstance(known.mesh, Mesh) and known.mesh.size == len(devices)
                and len(known.spec) <= ndim and known.memory_kind == _memory(memory_kind)
                and set(known.mesh._flat_devices) == set(devices)):
            position = {d: i for i, d in enumerate(known.mesh._flat_devices)}
            if known._to_hlo(ndim) == hlo.relabel([position[d] for d in devices]):
                return known
    if mesh is not None and mesh.size == len(devices) and set(mesh._flat_devices) == set(devices):
        position = {d: i for i, d in enumerate(mesh._flat_devices)}
        target = hlo.relabel([position[d] for d in devices])
        tiles = target.tile_dims[:target.data_rank] if target.kind == "tiled" else (1,) * ndim
        if len(tiles) == ndim:
            for spec in _specs_for(mesh, tiles):
                found = NamedSharding(mesh, spec, memory_kind=memory_kind)
                if mesh.size == 1 or found._to_hlo(ndim) == target:
                    return found
    if mesh is None and len(devices) == 1 and hlo.kind in ("replicated", "maximal", "tiled"):
        return SingleDeviceSharding(devices[0], memory_kind=memory_kind)
    return HloShardingSharding(devices, hlo, memory_kind=memory_kind)


# --- shardings in types (JAX's explicit sharding mode) -------------------------------------------------------------

def explicit_sharding(mesh: Mesh | AbstractMesh, entries: Sequence[Any]) -> NamedSharding | None:
    """The explicit sharding of a type (ShapedArray.explicit) over mesh, one entry per dimension (None, an axis
    name, or a tuple of them), keeping only the mesh's Explicit axes; None when the mesh has no Explicit axis."""
    explicit = mesh.explicit_axes
    if not explicit:
        return None
    kept = []
    for entry in entries:
        axes = tuple(a for a in entry_axes(entry) if a in explicit)
        kept.append(axes)
    return _explicit_cached(mesh, tuple(kept))


@functools.lru_cache(maxsize=4096)
def _explicit_cached(mesh: Mesh | AbstractMesh, kept: tuple[tuple[Any, ...], ...]) -> NamedSharding:
    """(one object per mesh and spec: types compare and hash them often)"""
    return NamedSharding(mesh, PartitionSpec(*kept))


def explicit_of(sharding: Any, ndim: int) -> NamedSharding | None:
    """The explicit sharding the type of an array placed by sharding has: its Explicit mesh axes (None for a
    sharding that is not a NamedSharding, or whose mesh has no Explicit axis)."""
    if not isinstance(sharding, NamedSharding) or not sharding.mesh.explicit_axes:
        return None
    spec = tuple(sharding.spec)
    return explicit_sharding(sharding.mesh, spec + (None,) * (ndim - len(spec)))


def without_dim(aval: Any, d: int) -> Any:
    """aval without dimension d (a scan's slice, a vmapped body's argument), its explicit sharding kept on the
    other dimensions."""
    shape = aval.shape[:d] + aval.shape[d + 1:]
    explicit = aval.explicit
    if explicit is None:
        return aval.update(shape=shape)
    spec = tuple(explicit.spec)
    return aval.update(shape=shape, explicit=explicit_sharding(explicit.mesh, spec[:d] + spec[d + 1:]))


def with_dim(aval: Any, d: int, size: int) -> Any:
    """aval with a new dimension d of this size (not split): stacked or batched values."""
    shape = aval.shape[:d] + (size,) + aval.shape[d:]
    explicit = aval.explicit
    if explicit is None:
        return aval.update(shape=shape)
    spec = tuple(explicit.spec)
    return aval.update(shape=shape, explicit=explicit_sharding(explicit.mesh, spec[:d] + (None,) + spec[d:]))


def row_type(aval: Any) -> Any:
    """The type of aval's rows (a scan's slice)."""
    return without_dim(aval, 0)


def stacked_type(aval: Any, length: int) -> Any:
    """The type of length values of type aval stacked along a new leading dimension (not split)."""
    return with_dim(aval, 0, length)


def _sharding_view(aval: Any) -> NamedSharding:
    explicit = aval.explicit
    if explicit is None:
        return NamedSharding(EMPTY_ABSTRACT_MESH, PartitionSpec(*([None] * aval.ndim)))
    return NamedSharding(explicit.mesh.abstract_mesh, explicit.spec)


_dtypes.SHARDING_VIEW.of = _sharding_view
