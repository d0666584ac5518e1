"""Named axes while staging: the environment that collectives (psum, all_gather, axis_index, ...) read.

A frame binds axis names to sizes while a function is staged: `vmap(..., axis_name=...)` pushes one name,
shard_map one frame holding its mesh's axes. The stack is per thread; the innermost binding of a name wins.
Collectives look their sizes up here when they are bound (sizes become params of their equations), so the IR
never depends on the environment afterwards.

While the batching pass transforms an IR it records the axis it batches (its name, None for an unnamed vmap, and
its size): batching rules receive no axis name, so the collectives' rules read it here (`batching_axis`)."""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Hashable, Iterator, Sequence

from ember._core.ir import IR, sub_irs
from ember._core.primitive import Primitive


class _AxisState(threading.local):
    def __init__(self) -> None:
        self.frames: list[tuple[tuple[Hashable, int], ...]] = []  # innermost last
        self.batching: list[tuple[Hashable, int]] = []  # the axes of the active batching passes, innermost last
        self.spmd: list[tuple[str, ...] | None] = []  # their spmd_axis_name (mesh axes splitting the batch), or None


_STATE = _AxisState()


def _check_binding(name: Any, size: Any) -> tuple[Hashable, int]:
    try:
        hash(name)
    except TypeError:
        raise TypeError(f"axis_frame: an axis name must be hashable, got {name!r}") from None
    if name is None or isinstance(name, tuple | list):
        raise TypeError(f"axis_frame: an axis name must be a single hashable name, not {name!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise TypeError(f"axis_frame: the size of axis {name!r} must be a non-negative int, got {size!r}")
    return name, size


@contextlib.contextmanager
def axis_frame(names_and_sizes: Sequence[tuple[Hashable, int]] | dict[Hashable, int]) -> Iterator[None]:
    """Bind the named axes (pairs (name, size), or a dict) while the block runs: one frame, several axes."""
    pairs = names_and_sizes.items() if isinstance(names_and_sizes, dict) else names_and_sizes
    frame = tuple(_check_binding(name, size) for name, size in pairs)
    names = [name for name, _ in frame]
    if len(set(names)) != len(names):
        raise ValueError(f"axis_frame: axis names bound twice in one frame: {names}")
    _STATE.frames.append(frame)
    try:
        yield
    finally:
        _STATE.frames.pop()


def bound_axes() -> dict[Hashable, int]:
    """The axis names bound now and their sizes (outermost first; an inner binding of a name wins)."""
    return {name: size for frame in _STATE.frames for name, size in frame}


def axis_size(name: Hashable) -> int:
    """The size of the innermost binding of an axis name; NameError (as JAX's) when the name is not bound."""
    for frame in reversed(_STATE.frames):
        for bound, size in frame:
            if bound == name:
                return size
    raise NameError(f"unbound axis name: {name}. The following axis names (e.g. defined by vmap or shard_map) are "
                    f"available to collective operations: {list(bound_axes())}")


def axes_size(names: Sequence[Hashable]) -> int:
    """The product of the sizes of the named axes (each must be bound)."""
    total = 1
    for name in names:
        total *= axis_size(name)
    return total


@contextlib.contextmanager
def batching_axis(name: Hashable | None, size: int, spmd: tuple[str, ...] | None = None) -> Iterator[None]:
    """Record, while a batching pass runs, the axis it batches (name None: an unnamed vmap) and the mesh axes that
    split the batch (vmap's spmd_axis_name; None: none)."""
    _STATE.batching.append((name, size))
    _STATE.spmd.append(spmd)
    try:
        yield
    finally:
        _STATE.batching.pop()
        _STATE.spmd.pop()


def current_spmd_axes() -> tuple[str, ...] | None:
    """The mesh axes splitting the batch of the innermost active batching pass (vmap's spmd_axis_name), or None."""
    return _STATE.spmd[-1] if _STATE.spmd else None


def active_batching_axis() -> tuple[Hashable | None, int] | None:
    """(name, size) of the axis the innermost active batching pass batches; None outside any."""
    return _STATE.batching[-1] if _STATE.batching else None


def current_batching_axis() -> tuple[Hashable | None, int]:
    """(name, size) of the axis the innermost active batching pass batches (batching rules run inside one)."""
    if not _STATE.batching:
        raise RuntimeError("current_batching_axis: no batching pass is running (a batching rule was called outside "
                           "ember._transforms.batching)")
    return _STATE.batching[-1]


# Primitives over named axes (the collectives) name them in one param, a tuple of names: AXES_PARAM.
AXES_PARAM = "axes"
NAMED_AXIS_PRIMITIVES: set[Primitive] = set()


def over_named_axes(prim: Primitive) -> Primitive:
    """Declare that prim's equations act over the named axes in their params[AXES_PARAM] (a collective)."""
    NAMED_AXIS_PRIMITIVES.add(prim)
    return prim


def uses_axis(prim: Primitive, params: dict[str, Any], name: Hashable) -> bool:
    """Whether an equation acts over the named axis: a collective over it, or a higher-order equation carrying
    one in its IRs. The batching pass sends such equations to their rule even when no input is batched."""
    if prim in NAMED_AXIS_PRIMITIVES:
        return name in params[AXES_PARAM]
    return any(name in _ir_axes(sub) for sub in sub_irs(params))


def _ir_axes(ir: IR) -> frozenset[Hashable]:
    found = _axes_of_ir.get(ir)
    if found is None:
        names: set[Hashable] = set()
        for eqn in ir.eqns:
            if eqn.prim in NAMED_AXIS_PRIMITIVES:
                names.update(eqn.params[AXES_PARAM])
            for sub in sub_irs(eqn.params):
                names.update(_ir_axes(sub))
        found = _axes_of_ir[ir] = frozenset(names)
    return found


_axes_of_ir: "weakref.WeakKeyDictionary[IR, frozenset[Hashable]]" = weakref.WeakKeyDictionary()
