"""Arrays spread over several devices: a ShardedArray holds one buffer per device of its sharding (the part of
the array that device holds, per sharding.devices_indices_map), and device_put splits a value by a sharding.

A ShardedArray is an ember Array to its users (isinstance, operators, numpy conversion); inside ember, `type(x) is
Array` stays the test for a one-buffer array, so every fast path leaves sharded arguments to the general paths,
which run SPMD programs (ember._runtime.compiler)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember._core import ShapedArray, Tracer, check_live
from ember._core.sharding import (MemorySpace, NamedSharding, PartitionSpec, Sharding, current_mesh,
                                  explicit_of)
from ember._prims.sharding import device_put_p, sharding_constraint_p
from ember._runtime import pjrt as _pjrt
from ember._core.pytree import prefix_entries, tree_flatten
from ember._runtime.array import Array, Shard, Token, canonical_aval, device_put as one_device_put
from ember._runtime.backends import default_device
from ember._runtime.layout import Format, format_of
from ember._runtime.dispatch import to_buffer
from ember._runtime.guards import Guards, check as check_transfer


def _index_key(index: tuple[slice, ...]) -> tuple[tuple[Any, Any, Any], ...]:
    """A device's index into the array as a dict key (slices are unhashable before Python 3.12)."""
    return tuple((s.start, s.stop, s.step) for s in index)


class ShardedArray(Array):
    """An Array whose value is spread over the devices of its sharding (one buffer each, in the order of
    sharding._device_assignment). It is committed to those devices (as JAX's arrays with a NamedSharding)."""
    __slots__ = ("_shards", "_sharding")

    @classmethod
    def _from_shards(cls, buffers: Sequence[_pjrt.Buffer], aval: ShapedArray, sharding: Sharding,
                     origin: str | None = None) -> "ShardedArray":
        self = object.__new__(cls)
        self._buffer = None
        self._shards = list(buffers)
        self._sharding = sharding
        self.aval = aval.with_explicit(explicit_of(sharding, aval.ndim))  # (its type: JAX's explicit sharding)
        self._host = None
        self._origin = origin
        self._committed = True
        return self

    @property
    def sharding(self) -> Sharding:
        return self._sharding

    @property
    def format(self) -> Format:
        """Its layout (the default, row-major) and its sharding (jax.Array.format)."""
        return format_of(self)

    @property
    def buffer(self) -> _pjrt.Buffer:
        raise ValueError(f"Array {self.aval.str_short()} is sharded over {len(self._shards)} devices and has no one "
                         "buffer; see .addressable_shards")

    @property
    def device(self) -> Any:
        """The sharding (as a jax.Array spread over several devices answers)."""
        return self._sharding

    def devices(self) -> set[_pjrt.Device]:
        return set(self._sharding._device_assignment)

    @property
    def addressable_shards(self) -> list[Shard]:
        indices = self._sharding.devices_indices_map(self.shape)
        shard_avals = [canonical_aval(self.aval.update(shape=tuple(b.shape))) for b in self._shards]
        seen: dict[Any, int] = {}
        shards = []
        for device, buffer, aval in zip(self._sharding._device_assignment, self._shards, shard_avals):
            index = indices[device]
            key = _index_key(index)
            replica = seen[key] = seen.get(key, -1) + 1
            shards.append(Shard(device, index, replica, Array._from_buffer(buffer, aval, self._origin, True)))
        return shards

    def _value(self) -> np.ndarray:
        if self._host is None:
            try:
                host = np.empty(self.shape, self.dtype)
                indices = self._sharding.devices_indices_map(self.shape)
                read = set()
                for device, buffer in zip(self._sharding._device_assignment, self._shards):
                    if not buffer.handle:
                        raise RuntimeError(f"Array {self.aval.str_short()} has been deleted")
                    index = indices[device]
                    key = _index_key(index)
                    if key in read:  # (a part several devices hold is read from the first, replica 0, as JAX)
                        continue
                    read.add(key)
                    part = buffer.host_view()
                    host[index] = buffer.to_numpy() if part is None else part
            except _pjrt.PjrtOutOfMemoryError as err:
                raise self._out_of_memory(err) from None
            host.flags.writeable = False
            self._host = host
        return self._host

    def block_until_ready(self) -> "ShardedArray":
        try:
            for buffer in self._shards:
                if not buffer.handle:
                    raise RuntimeError(f"Array {self.aval.str_short()} has been deleted")
                buffer.block_until_ready()
        except _pjrt.PjrtOutOfMemoryError as err:
            raise self._out_of_memory(err) from None
        return self

    def delete(self) -> None:
        for buffer in self._shards:
            buffer.delete()
        self._host = None

    def is_deleted(self) -> bool:
        return any(b.is_deleted for b in self._shards)

    def copy(self) -> "Array":
        return put(self._value(), self._sharding, self.aval.weak_type)

    def __repr__(self) -> str:
        if self.is_deleted():
            return f"Array(<deleted>, shape={self.shape}, dtype={self.dtype.name})"
        prefix = "Array("
        body = np.array2string(self._value(), separator=", ", prefix=prefix)
        extras = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        return f"{prefix}{body}, {extras})"  # (as JAX's: its placement is x.sharding)


def put(x: Any, sharding: Sharding, weak_type: bool = False) -> Array:
    """x (a host value or an Array) placed by sharding: a ShardedArray, or an Array when it names one device."""
    devices = sharding._device_assignment
    if isinstance(x, Tracer):  # (inside jit: a sharding constraint, as JAX's device_put there)
        check_live(x, "device_put")
        return sharding_constraint_p.bind(x, sharding=sharding) if len(devices) > 1 else x
    if len(devices) == 1:
        return one_device_put(x, devices[0], weak_type=weak_type)
    if type(x) is Array or type(x) is ShardedArray:
        if x.sharding == sharding:
            return x
        if Guards.device_to_device:
            check_transfer("device_to_device", lambda: f"device_put of {x.aval.str_short()} to {sharding}",
                           explicit_transfer=True)
        if type(x) is ShardedArray:
            return ShardedArray._from_shards(_split(x._value(), x.aval, sharding), x.aval, sharding)
        one = x
    else:
        one = one_device_put(x, devices[0], weak_type=weak_type)  # (the value canonicalized as device_put does)
    return ShardedArray._from_shards(_split(one._value(), one.aval, sharding, one), one.aval, sharding)


def _split(value: np.ndarray, aval: ShapedArray, sharding: Sharding, on_first: Array | None = None
           ) -> list[_pjrt.Buffer]:
    """One buffer per device of sharding holding its part of value."""
    indices = sharding.devices_indices_map(aval.shape)
    buffers = []
    for device in sharding._device_assignment:
        index = indices[device]
        if on_first is not None and on_first.device is device and all(
                s == slice(None) or (s.start in (None, 0) and s.stop in (None, n) and s.step in (None, 1))
                for s, n in zip(index, aval.shape)):
            buffers.append(on_first._buffer)  # the whole array already lives there
            continue
        part = np.array(value[index], order="C")  # (a copy: ascontiguousarray would make a 0-d part 1-d)
        buffers.append(device.client.buffer_from_numpy(part, device))
    return buffers


def shards_for(x: Any, aval: ShapedArray, sharding: Sharding, where: str) -> list[_pjrt.Buffer]:
    """The buffers, one per device of sharding, of a program argument x that the program takes with that
    sharding: x's own shards when it is sharded so, else x (an Array or a host value) split by it."""
    if type(x) is ShardedArray or type(x) is Array:
        if x.aval.shape != aval.shape or x.aval.dtype != aval.dtype:
            raise TypeError(f"{where}: expected {aval.str_short()}, got {x.aval.str_short()}")
    if type(x) is ShardedArray:
        if x._sharding == sharding or x._sharding._device_assignment == sharding._device_assignment and \
                x._sharding.is_equivalent_to(sharding, len(aval.shape)):
            return x._shards  # (a deleted one is reported by execute)
        return _split(x._value(), aval, sharding)
    if type(x) is Array:
        return _split(x._value(), aval, sharding, x)
    if sharding.is_fully_replicated:  # (a host value, a literal, a number: copied to each device)
        return [to_buffer(x, aval, where, device) for device in sharding._device_assignment]
    first = to_buffer(x, aval, where, sharding._device_assignment[0])
    return _split(first.to_numpy(), aval, sharding)


def _is_target(x: Any) -> bool:
    return x is None or isinstance(x, (_pjrt.Device, Sharding, PartitionSpec, MemorySpace))


_ALREADY_PLACED = object()  # (device_put: a traced leaf put by its device_put_p equation)


def device_put(x: Any, device: Any = None, *, src: Any = None, donate: bool = False, may_alias: bool | None = None
               ) -> Any:
    """Copy x (an array, a number, or a pytree of them) to a device or by a sharding (as jax.device_put): device
    is None (the default device), a Device, a Sharding (the array is split over its devices), a PartitionSpec (a
    NamedSharding over the current mesh, ember.sharding.set_mesh), a memory space (ember.memory.Space.Device or
    Host: the array's own device, or the default one, committed to it; on ember's CPU devices host memory is
    device memory), or a pytree prefix of x holding those. An Array
    already placed so is returned as it is; src and may_alias are accepted as JAX's, and donate (the source's
    buffers given up) is honoured by deleting a source that was copied."""
    leaves, tree = tree_flatten(x)
    try:
        targets = prefix_entries(device, x, _is_target)
    except ValueError as err:
        raise ValueError(f"device_put: device must be a Device, a Sharding or a tree prefix of x holding them, "
                         f"got {device!r} for a value of structure {tree}: {err}") from None
    out = []
    staged = [i for i, (leaf, target) in enumerate(zip(leaves, targets))
              if isinstance(leaf, Tracer) and (target is None or isinstance(target, _pjrt.Device))]
    if staged:  # (traced values: JAX's device_put_p, one equation for them all)
        put_traced = device_put_p.bind(*[check_live(leaves[i], "device_put") for i in staged],
                                       devices=tuple(targets[i] for i in staged), srcs=(None,) * len(staged),
                                       copy_semantics=("reuse_input",) * len(staged))
        leaves, targets = list(leaves), list(targets)
        for i, value in zip(staged, put_traced):
            leaves[i], targets[i] = value, _ALREADY_PLACED
    for leaf, target in zip(leaves, targets):
        if target is _ALREADY_PLACED or type(leaf) is Token:  # (a token holds no data to move, as in JAX)
            out.append(leaf)
            continue
        if isinstance(target, MemorySpace):
            if target is MemorySpace.Any:
                raise ValueError("device_put: memory space MemorySpace.Any is not a place to put an array: use "
                                 "ember.memory.Space.Device or Space.Host")
            if isinstance(leaf, Tracer) or type(leaf) is ShardedArray:
                out.append(leaf)
                continue
            target = leaf.device if isinstance(leaf, Array) else default_device()
        if isinstance(target, PartitionSpec):
            mesh = current_mesh()
            if mesh is None:
                raise ValueError("Please set a mesh via `ember.sharding.set_mesh` if a PartitionSpec is passed to "
                                 f"device_put (got {target})")
            target = NamedSharding(mesh, target)
        if isinstance(target, Sharding):
            placed = put(leaf, target)
        elif target is None or isinstance(target, _pjrt.Device):
            if type(leaf) is ShardedArray:
                placed = leaf if target is None else one_device_put(leaf._value(), target,
                                                                    weak_type=leaf.aval.weak_type)
            else:
                placed = one_device_put(leaf, target)
        else:
            raise TypeError(f"device_put: device must be an ember Device, a Sharding or None, got {target!r} of type "
                            f"{type(target).__name__}")
        if donate and placed is not leaf and isinstance(leaf, Array):
            leaf.delete()
        out.append(placed)
    return tree.unflatten(out)
