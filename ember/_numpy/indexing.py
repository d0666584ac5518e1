"""numpy indexing on ember arrays, as jax.numpy does it: the __getitem__ of Array and Tracer, and `x.at[...]`.

An index is parsed once into items (new axis, slice, integer, integer array) and becomes static slicing where it
can (ints, slices of any step, None, Ellipsis, scalar booleans) and a gather where it must (integer arrays, traced
scalars, boolean masks made concrete). Updates (`x.at[idx].set(v)` ...) express every form as one scatter.
Outside jit, x[index] with static ints and slices of step 1 reads through one program per index structure, the
ints its runtime operands (ember._runtime.eager.read_window), not one program per index value.

Out of bounds: a static Python integer out of bounds is an IndexError (as numpy; JAX clamps it); array and traced
indices follow JAX: negative ones count from the end once, reads clamp (mode "fill" returns a fill value instead),
updates out of bounds are dropped (mode "clip" clamps them)."""
from __future__ import annotations

import builtins
import dataclasses
import operator
import warnings
from typing import Any, Callable, NamedTuple, Sequence

import numpy as _np

from ember._core import Tracer, aval_of
from ember._core.pytree import register_pytree_node
from ember._core.trace import NonConcreteBooleanIndexError
from ember._core import dtypes as dt
from ember._core.shape_poly import (bounds, check_index_in_bounds, is_symbolic_dim, max_dim, min_dim,
                                    slice_indices)
from ember._runtime.array import Array, asarray
from ember._runtime.eager import read_window
from ember import _prims as lax
from ember._control import while_loop
from ember._prims.indexing import GatherDimensionNumbers, ScatterDimensionNumbers
from ember._prims.shape import dim_as_value

from ember._numpy.creation import ones_like, zeros_like
from ember._numpy.promotion import _as_operand, _broadcast_shapes
from ember._numpy.shape import broadcast_to, shape, stack, transpose
from ember._numpy.ufuncs import _where, add, divide, less, power
from ember._api.sharding import reshard
from ember._core.sharding import NamedSharding, P
from ember._prims.explicit import resolve


class _Item(NamedTuple):
    kind: str            # "new" (None), "slice", "int" (a static Python integer) or "array" (an integer array)
    dim: int             # the operand dimension it indexes (-1 for "new")
    value: Any           # the slice's (start, stop, step), the integer, or the index array


@dataclasses.dataclass(slots=True)
class Slice:
    """A slice of `size` elements from `start` with a step of `stride` (as JAX's dslice makes): `start` may be a
    traced integer (x[ds(i, 2)] under jit); a window running past the end is moved back inside, as
    lax.dynamic_slice's is. A pytree whose leaves are its dynamic start and size."""
    start: Any
    size: Any
    stride: int = 1

    def __post_init__(self) -> None:
        if self.stride < 0:
            raise ValueError("`stride` must be >= 0.")

    @property
    def is_dynamic_start(self) -> bool:
        return not isinstance(self.start, builtins.int | _np.integer)

    @property
    def is_dynamic_size(self) -> bool:
        return not isinstance(self.size, builtins.int | _np.integer)


register_pytree_node(
    Slice,
    lambda sl: ((sl.start if sl.is_dynamic_start else None, sl.size if sl.is_dynamic_size else None),
                (None if sl.is_dynamic_start else sl.start, None if sl.is_dynamic_size else sl.size, sl.stride)),
    lambda aux, children: Slice(*(c if c is not None else a for c, a in zip(children, aux[:2])), aux[2]))


def dslice(start: Any, size: Any = None, stride: int | None = None) -> Any:
    """A slice whose start may be dynamic (as jax.ds / pallas ds): ds(None) is `:`, ds(j) is `:j`, ds(i, j) is
    `i:i+j` and ds(i, j, k) is `i:i+j:k`; x[ds(i, n)] reads n elements from a traced i (clamped in bounds)."""
    if start is None:
        return builtins.slice(None)
    if stride is None:
        stride = 1
    if not isinstance(stride, builtins.int):
        raise ValueError("Non-static stride in `dslice`")
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


def _has_dslice(index: Any) -> bool:
    return isinstance(index, Slice) or (isinstance(index, tuple) and builtins.any(isinstance(i, Slice)
                                                                                  for i in index))


def _dslice_window(op: str, s: tuple[int, ...], index: Any) -> tuple[list[Any], list[int], tuple[Any, ...]]:
    """For an index holding ds(...) Slices: the window (starts and sizes) covering every Slice's elements, and the
    index into that window (each Slice a static strided slice of it)."""
    entries = index if isinstance(index, tuple) else (index,)

    def width(i: Any) -> int:
        if i is None or i is Ellipsis or _is_bool_scalar(i):
            return 0
        if isinstance(i, Tracer | Array | _np.ndarray) and aval_of(i).dtype == _np.bool_:
            return len(aval_of(i).shape)
        return 1

    consumed = builtins.sum(width(i) for i in entries)
    starts: list[Any] = [0] * len(s)
    sizes, out, dim = list(s), [], 0
    for i in entries:
        if i is Ellipsis:
            dim += len(s) - consumed
        elif isinstance(i, Slice):
            if i.is_dynamic_size:
                raise ValueError(f"{op}: the size of a ds(...) slice must be static, got {i.size!r}")
            if dim >= len(s):
                raise IndexError(f"{op}: too many indices for an array of shape {s}")
            span = 0 if i.size == 0 else (builtins.int(i.size) - 1) * i.stride + 1
            if span > s[dim]:
                raise IndexError(f"{op}: ds(start, size={i.size}, stride={i.stride}) needs {span} elements, but "
                                 f"dimension {dim} of the array of shape {s} has {s[dim]}")
            start = i.start
            if not isinstance(start, builtins.int | _np.integer) and not dt.is_int(aval_of(start).dtype):
                raise TypeError(f"{op}: the start of a ds(...) slice must be an integer, got {start!r}")
            if isinstance(start, builtins.int | _np.integer):  # negative starts count from the end, as JAX's
                start = builtins.int(start) + s[dim] if start < 0 else builtins.int(start)
            else:
                start = _where(less(start, 0), add(start, s[dim]), start)
            starts[dim], sizes[dim] = start, span
            out.append(builtins.slice(None, None, i.stride or 1) if span else builtins.slice(0, 0))
            dim += 1
            continue
        out.append(i)
        dim += width(i)
    return starts, sizes, tuple(out)


def _is_bool_scalar(i: Any) -> bool:
    """A scalar boolean index (True, np.True_, a 0-d numpy bool array): numpy's 0-d boolean mask, which adds an
    axis of length 1 (True) or 0 (False) and consumes no axis of the array."""
    return isinstance(i, builtins.bool | _np.bool_) or (isinstance(i, _np.ndarray) and i.ndim == 0
                                                          and i.dtype == _np.bool_)


def _is_array_index(i: Any) -> bool:
    return isinstance(i, Tracer | Array | _np.ndarray)


def _concrete_mask(op: str, mask: Any) -> _np.ndarray:
    if isinstance(mask, Tracer):
        raise NonConcreteBooleanIndexError(
            f"Array boolean indices must be concrete; got {aval_of(mask).str_short()} ({op}: a boolean mask index "
            f"of shape {aval_of(mask).shape} inside jit/vmap/grad makes a result whose shape depends on its values, "
            "which a traced program cannot have: use ember.numpy.where(mask, x, other) to select, or "
            "ember.numpy.nonzero(mask, size=n) for a fixed number of indices)")
    return _np.asarray(mask)


def _normalize_index(op: str, index: Any) -> tuple[Any, ...]:
    """The index as a tuple whose entries are None, Ellipsis, slices, ints, scalar booleans and integer arrays;
    lists become arrays and boolean masks (concrete ones) become their nonzero index arrays."""
    if not isinstance(index, tuple):
        index = (index,)
    out: list[Any] = []
    for i in index:
        if isinstance(i, list):
            if builtins.any(isinstance(e, builtins.slice) or e is Ellipsis or e is None for e in i):
                raise IndexError(f"{op}: a list index may hold only integers or booleans, got {i!r}")
            i = _np.asarray(i) if i else _np.zeros(0, _np.int32)
        if i is None or i is Ellipsis or isinstance(i, builtins.slice) or _is_bool_scalar(i):
            out.append(i)
        elif _is_array_index(i):
            dtype = aval_of(i).dtype if isinstance(i, Tracer | Array) else i.dtype
            if dt.is_bool(dtype):
                mask = _concrete_mask(op, i)
                if mask.ndim == 0:  # a 0-d boolean array is a scalar boolean index
                    out.append(builtins.bool(mask))
                else:
                    out.extend(asarray(n) for n in _np.nonzero(mask))
            elif not dt.is_int(dtype):
                raise TypeError(f"{op}: index arrays must be integers or booleans, got {aval_of(i).str_short()}")
            else:
                out.append(i)
        else:
            try:
                out.append(operator.index(i))
            except TypeError:
                raise TypeError(f"{op}: invalid index {i!r} of type {type(i).__name__}: only integers, slices, "
                                "Ellipsis, None, and integer or boolean arrays are valid indices") from None
    return tuple(out)


def _parse(op: str, s: tuple[int, ...], index: tuple[Any, ...], check_ints: bool) -> list[_Item]:
    """The index's items with the dimensions they index (Ellipsis expanded, trailing dimensions sliced whole)."""
    consumed = builtins.sum(1 for i in index if i is not None and i is not Ellipsis and not _is_bool_scalar(i))
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if consumed > len(s):
        raise IndexError(f"{op}: too many indices for array of shape {s}: {consumed} given")
    items: list[_Item] = []
    dim = 0
    for i in index:
        if i is Ellipsis:
            for _ in range(len(s) - consumed):
                items.append(_Item("slice", dim, (0, s[dim], 1, s[dim])))
                dim += 1
        elif i is None:
            items.append(_Item("new", -1, None))
        elif isinstance(i, builtins.slice):
            items.append(_Item("slice", dim, _slice_parts(i, s[dim])))
            dim += 1
        elif isinstance(i, builtins.int):
            if check_ints and is_symbolic_dim(s[dim]):
                check_index_in_bounds(i, s[dim], f"{op}: index {i} for axis {dim}")
            elif check_ints and not -s[dim] <= i < s[dim]:
                raise IndexError(f"{op}: index {i} is out of bounds for axis {dim} with size {s[dim]}")
            items.append(_Item("int", dim, i))
            dim += 1
        else:
            items.append(_Item("array", dim, i))
            dim += 1
    while dim < len(s):
        items.append(_Item("slice", dim, (0, s[dim], 1, s[dim])))
        dim += 1
    return items


def _slice_parts(sl: builtins.slice, n: Any) -> tuple[Any, Any, Any, Any]:
    """(start, stop, step, count) of a slice of a dimension of size n, as slice.indices and len(range(...)); for
    a symbolic n (ember.export), with clamps where the bounds decide them (JAX's canonicalize_slice)."""
    if not is_symbolic_dim(n):
        start, stop, step = sl.indices(n)
        return start, stop, step, len(range(start, stop, step))
    start, step, count = slice_indices(sl, n)
    return start, start + count * step, step, count


# ---------------------------------------------------------------------------------------------------------------
# Reading: x[index]
def _getitem(x: Any, index: Any) -> Any:
    if type(x) is Array:  # outside jit: one program per index structure, not per index value
        window = _window(index, x.aval.shape)
        if window is not None:
            out = read_window(x, *window)
            if out is not None:
                return out
    return _read(x, index, "__getitem__", mode=None, fill_value=None, strict=True)


_INT_OR_NONE = frozenset({builtins.int, type(None)})


def _window(index: Any, s: tuple[int, ...]) -> tuple[list[int], tuple[int, ...], tuple[int, ...]] | None:
    """For an index of Python (or numpy) ints in bounds, slices of step 1 with int bounds, None and one Ellipsis
    (basic indexing without strides): the window x[index] reads, as each dimension's start and size, and the
    result's shape. None for any other index, for one that reads x whole, and for one the ordinary path refuses
    (an int out of bounds is its IndexError), which then take the ordinary path."""
    entries = index if type(index) is tuple else (index,)
    consumed = len(entries) - builtins.sum(1 for i in entries if i is None or i is Ellipsis)
    if consumed > len(s) or builtins.max(s, default=0) >= 2 ** 31:
        return None
    starts: list[int] = []
    sizes: list[int] = []
    out_shape: list[int] = []
    seen_ellipsis = False
    for i in entries:
        n = s[len(starts)] if len(starts) < len(s) else 0
        if i is None:
            out_shape.append(1)
        elif i is Ellipsis:
            if seen_ellipsis:
                return None
            seen_ellipsis = True
            whole = s[len(starts):len(starts) + len(s) - consumed]
            starts += [0] * len(whole)
            sizes += whole
            out_shape += whole
        elif type(i) is builtins.int or isinstance(i, _np.integer):
            if not -n <= i < n:
                return None
            starts.append(builtins.int(i) + n if i < 0 else builtins.int(i))
            sizes.append(1)
        elif type(i) is builtins.slice and _INT_OR_NONE.issuperset((type(i.start), type(i.stop), type(i.step))) \
                and i.step in (None, 1):
            start, stop, _ = i.indices(n)
            starts.append(start)
            sizes.append(builtins.max(stop - start, 0))
            out_shape.append(sizes[-1])
        else:
            return None
    rest = s[len(starts):]
    if tuple(sizes) + rest == s and tuple(out_shape) + rest == s:
        return None
    return starts + [0] * len(rest), tuple(sizes) + rest, tuple(out_shape) + rest


def _read(x: Any, index: Any, op: str, mode: Any, fill_value: Any, indices_are_sorted: bool = False,
          unique_indices: bool = False, strict: bool = False, wrap: bool = True) -> Any:
    """x[index]. strict (plain indexing): a static integer out of bounds is an IndexError; otherwise (`.at`,
    take) it follows mode like an array index. wrap: negative indices count from the end (once)."""
    x = _as_operand(x)
    if _has_dslice(index):
        starts, sizes, index = _dslice_window(op, shape(x), index)
        x = lax.dynamic_slice(x, starts, sizes)
    index = _normalize_index(op, index)
    if builtins.any(_is_bool_scalar(i) for i in index):
        if builtins.any(_is_array_index(i) and not _is_bool_scalar(i) for i in index):
            raise IndexError(f"{op}: scalar booleans cannot be combined with array indices")
        return _read_with_bools(x, index, op, mode)
    s = shape(x)
    items = _parse(op, s, index, check_ints=strict)
    if builtins.all(it.kind != "array" and (it.kind != "int" or -s[it.dim] * wrap <= it.value < s[it.dim])
                    for it in items):
        return _static_read(x, items)
    return _gather_read(x, items, mode, fill_value, indices_are_sorted, unique_indices, wrap)


def _read_with_bools(x: Any, index: tuple[Any, ...], op: str, mode: Any) -> Any:
    """numpy's rule for scalar booleans: each is an advanced index (a 0-d mask), and so are the integers beside
    them. Together they give one axis, of length 1 when every boolean is True, else 0; it stands where the first
    advanced index stood when the advanced indices are consecutive in the index, else in front."""
    advanced = [k for k, i in enumerate(index) if _is_bool_scalar(i) or (
        i is not None and i is not Ellipsis and not isinstance(i, builtins.slice))]
    length = 1 if builtins.all(builtins.bool(i) for i in index if _is_bool_scalar(i)) else 0
    rest = tuple(i for i in index if not _is_bool_scalar(i))
    result = _static_read(x, _parse(op, shape(x), rest, check_ints=True))
    position = 0
    if advanced == list(range(advanced[0], advanced[-1] + 1)):  # consecutive: the axis stays in place
        n_real = builtins.sum(1 for i in rest if i is not None and i is not Ellipsis)
        for i in index[:advanced[0]]:
            position += len(shape(x)) - n_real if i is Ellipsis else 1
    out_shape = shape(result)
    result = lax.reshape(result, out_shape[:position] + (1,) + out_shape[position:])
    if length == 0:
        result = lax.slice_in_dim(result, 0, 0, axis=position)
    return result


def _static_slice(x: Any, items: Sequence[_Item]) -> Any:
    """x with every slice and static integer applied (dimensions kept; negative steps reverse)."""
    s = shape(x)
    starts, limits, strides, reverse = [0] * len(s), list(s), [1] * len(s), []
    for it in items:
        if it.kind == "slice":
            start, stop, step, n = it.value
            if is_symbolic_dim(n):  # (ember.export: a count that may be 0, whose slice starts and ends at start)
                nonempty = bounds(n)[0] >= 1
                if step < 0:
                    first = start + (n - 1) * step
                    # (empty: start may be -1, so clamp to 0; nonempty: first is the lowest element read)
                    start, step = first if nonempty else max_dim(0, min_dim(first, start)), -step
                    reverse.append(it.dim)
                span = n if step == 1 else (n - 1) * step + 1 if nonempty else max_dim(0, (n - 1) * step + 1)
                starts[it.dim], limits[it.dim], strides[it.dim] = start, start + span, step
                continue
            if step < 0:  # the same elements with a positive step, then reversed
                start, step = start + (n - 1) * step if n else 0, -step
                reverse.append(it.dim)
            starts[it.dim], limits[it.dim], strides[it.dim] = start, start + (n - 1) * step + 1 if n else start, step
        elif it.kind == "int":
            k = it.value if it.value >= 0 else it.value + s[it.dim]  # (in bounds: the caller checked)
            starts[it.dim], limits[it.dim] = k, k + 1
    out = lax.slice(x, starts, limits, strides)
    return lax.rev(out, reverse) if reverse else out


def _static_read(x: Any, items: Sequence[_Item]) -> Any:
    sliced = _static_slice(x, items)
    sizes = shape(sliced)
    out_shape = [1 if it.kind == "new" else sizes[it.dim] for it in items if it.kind != "int"]
    return lax.reshape(sliced, tuple(out_shape)) if tuple(out_shape) != sizes else sliced


def _index_dtype(arrays: Sequence[Any]) -> _np.dtype:
    """int32, or int64 when enable_x64 is on and an index array is 64-bit (JAX's choice)."""
    wide = builtins.any(_np.dtype(a.dtype if isinstance(a, _np.ndarray) else aval_of(a).dtype).itemsize == 8
                        for a in arrays)
    return _np.dtype(_np.int64) if wide and dt.x64_enabled() else _np.dtype(_np.int32)


def _broadcast_indices(arrays: Sequence[Any]) -> list[Any]:
    try:
        target = _broadcast_shapes("indexing", *(shape(a) for a in arrays))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(shape(a)) for a in arrays)) from None
    return [broadcast_to(a, target) for a in arrays]


def _index_arrays(advanced: Sequence[_Item], s: tuple[int, ...], wrap: bool = True) -> list[Any]:
    """The advanced items' index arrays, negative ones wrapped, in one index dtype, broadcast together."""
    arrays = [_np.array(it.value) if it.kind == "int" else it.value for it in advanced]
    dtype = _index_dtype(arrays)
    return _broadcast_indices([_wrapped(a, s[it.dim], dtype, wrap) for a, it in zip(arrays, advanced)])


def _wrapped(i: Any, size: int, dtype: _np.dtype, wrap: bool = True) -> Any:
    """An index array counted from the end where negative (once, as JAX), in the index dtype."""
    i = asarray(i) if isinstance(i, _np.ndarray) else i
    if aval_of(i).dtype != dtype:
        i = lax.convert_element_type(i, dtype)
    if dt.is_unsigned_int(aval_of(i).dtype) or not wrap:
        return i
    end = dim_as_value(size, dtype, False) if is_symbolic_dim(size) else _np.array(size, dtype)
    return _where(less(i, 0), add(i, end), i)


def _advanced_block_first(items: Sequence[_Item]) -> bool:
    """numpy's rule: the broadcast dimensions of the advanced indices replace them in place when they are
    consecutive in the index (None between them breaks that), else they go first."""
    positions = [k for k, it in enumerate(items) if it.kind in ("array", "int")]
    return positions != list(range(positions[0], positions[-1] + 1))


def _gather_read(x: Any, items: list[_Item], mode: Any, fill_value: Any, indices_are_sorted: bool,
                 unique_indices: bool, wrap: bool = True) -> Any:
    """Slices applied statically, then one gather for the integer and array indices."""
    x = _static_slice(x, [it for it in items if it.kind == "slice"])
    s = shape(x)
    advanced = [it for it in items if it.kind in ("array", "int")]
    wrapped = _index_arrays(advanced, s, wrap)
    block = shape(wrapped[0])
    indices = stack(wrapped, axis=-1)
    adv_dims = tuple(it.dim for it in advanced)
    kept = [it for it in items if it.kind == "slice"]
    first = _advanced_block_first(items)
    # output layout (without new axes): the block in front or where the first advanced index stood
    layout: list[Any] = []
    for it in items:
        if it.kind == "slice":
            layout.append(it.dim)
        elif it.kind in ("array", "int") and "block" not in layout:
            layout.insert(0, "block") if first else layout.append("block")
    out_rank = len(block) + len(kept)
    block_at = layout.index("block")
    offset_dims = tuple(range(block_at)) + tuple(range(block_at + len(block), out_rank))
    dnums = GatherDimensionNumbers(offset_dims, tuple(sorted(adv_dims)), adv_dims)
    sizes = tuple(1 if d in adv_dims else s[d] for d in range(len(s)))
    empty = [d for d in adv_dims if s[d] == 0]
    if empty:  # nothing to gather from: an empty result, or every index out of bounds
        if _np.prod(block, dtype=_np.int64) and mode != "fill":
            raise IndexError(f"index is out of bounds for axis {empty[0]} with size 0")
        out_sizes = [s[d] for d in range(len(s)) if d not in adv_dims]
        out_shape0 = out_sizes[:block_at] + list(block) + out_sizes[block_at:]
        fill = 0 if mode != "fill" else (fill_value if fill_value is not None else
                                         _np.nan if dt.is_inexact(aval_of(x).dtype) else 0)
        out = lax.full(tuple(out_shape0), fill, aval_of(x).dtype)
    else:
        out = lax.gather(x, indices, dnums, sizes, indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices, mode=mode if mode is not None else "promise_in_bounds",
                         fill_value=fill_value)
    # new axes
    out_shape, sizes_out, k = [], shape(out), 0
    for entry in _layout_with_new(items, first):
        if entry == "new":
            out_shape.append(1)
        elif entry == "block":
            out_shape.extend(sizes_out[k:k + len(block)])
            k += len(block)
        else:
            out_shape.append(sizes_out[k])
            k += 1
    return lax.reshape(out, tuple(out_shape)) if tuple(out_shape) != sizes_out else out


def _layout_with_new(items: Sequence[_Item], first: bool) -> list[Any]:
    layout: list[Any] = ["block"] if first else []
    for it in items:
        if it.kind == "new":
            layout.append("new")
        elif it.kind == "slice":
            layout.append(it.dim)
        elif not first and "block" not in layout:
            layout.append("block")
    return layout


# ---------------------------------------------------------------------------------------------------------------
# Updates: x.at[index].set(v) and friends, as one scatter
def _scatter_update(x: Any, index: Any, values: Any, prim_fn: Callable[..., Any], op: str, mode: Any,
                    indices_are_sorted: bool, unique_indices: bool, wrap: bool = True) -> Any:
    x = _as_operand(x)
    if _has_dslice(index):
        starts, sizes, index = _dslice_window(op, shape(x), index)
        window = _scatter_update(lax.dynamic_slice(x, starts, sizes), index, values, prim_fn, op, mode,
                                 indices_are_sorted, unique_indices, wrap)
        return lax.dynamic_update_slice(x, window, starts)
    s = shape(x)
    index = _normalize_index(op, index)
    if builtins.any(_is_bool_scalar(i) for i in index):
        index = _bools_as_new_axes(index)
    items = _parse(op, s, index, check_ints=False)
    values = _as_operand(values)
    if aval_of(values).dtype != aval_of(x).dtype:
        if dt.result_type(x, values) != aval_of(x).dtype:  # as JAX: cast, but say so when it is lossy
            warnings.warn(f"{op}: values of dtype {aval_of(values).dtype} are cast to the array's dtype "
                          f"{aval_of(x).dtype}, which cannot hold them all exactly", UserWarning, stacklevel=4)
        values = lax.convert_element_type(values, aval_of(x).dtype, aval_of(x).weak_type)
    advanced = [it for it in items if it.kind in ("array", "int")]
    partial = [it for it in items if it.kind == "slice" and it.value[:3] != (0, s[it.dim], 1)]
    wrapped = _index_arrays(advanced, s, wrap) if advanced else []
    idtype = aval_of(wrapped[0]).dtype if wrapped else _np.dtype(_np.int32)
    block = shape(wrapped[0]) if wrapped else ()
    n_block = len(block)
    size_of = {it.dim: it.value[3] for it in items if it.kind == "slice"}
    # the index grid: the advanced block's dimensions, then one per partial slice (its positions), broadcast
    grid_shape = block + tuple(size_of[it.dim] for it in partial)
    columns = [lax.broadcast_in_dim(w, grid_shape, tuple(range(n_block))) for w in wrapped]
    for k, it in enumerate(partial):
        start, _, step, _ = it.value
        positions = asarray(_np.arange(size_of[it.dim], dtype=idtype) * step + start)
        columns.append(lax.broadcast_in_dim(positions, grid_shape, (n_block + k,)))
    index_dims = tuple(it.dim for it in advanced) + tuple(it.dim for it in partial)
    window_dims = [d for d in range(len(s)) if d not in index_dims]
    # the updates' dimensions in scatter order (grid, then windows) and in numpy's order (the indexed shape)
    scatter_layout = [("block", k) for k in range(n_block)] + [("slice", d) for d in index_dims[len(advanced):]] + \
        [("slice", d) for d in window_dims]
    layout = _layout_with_new(items, _advanced_block_first(items)) if advanced else \
        [it.dim if it.kind == "slice" else "new" for it in items]
    numpy_layout: list[Any] = []
    indexed_shape: list[int] = []  # with the new axes
    for entry in layout:
        if entry == "new":
            indexed_shape.append(1)
        elif entry == "block":
            numpy_layout.extend(("block", k) for k in range(n_block))
            indexed_shape.extend(block)
        else:
            numpy_layout.append(("slice", entry))
            indexed_shape.append(size_of[entry])
    layout_shape = tuple(block[k] if kind == "block" else size_of[k] for kind, k in numpy_layout)
    try:
        values = broadcast_to(values, tuple(indexed_shape))
    except ValueError:
        raise ValueError(f"{op}: values of shape {shape(values)} cannot be broadcast to the indexed shape "
                         f"{tuple(indexed_shape)} of an array of shape {s}") from None
    values = lax.reshape(values, layout_shape)
    values = transpose(values, [numpy_layout.index(entry) for entry in scatter_layout])
    indices = stack(columns, axis=-1) if columns else lax.full(grid_shape + (0,), 0, idtype)
    n_grid = len(grid_shape)
    dnums = ScatterDimensionNumbers(tuple(range(n_grid, n_grid + len(window_dims))), tuple(sorted(index_dims)),
                                    index_dims)
    return prim_fn(x, indices, values, dnums, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                   mode=mode)


def _bools_as_new_axes(index: tuple[Any, ...]) -> tuple[Any, ...]:
    """For updates: a True scalar index is a new axis (nothing more to write); a False one selects nothing."""
    if not builtins.all(builtins.bool(i) for i in index if _is_bool_scalar(i)):
        return (builtins.slice(0, 0),) + tuple(i for i in index if not _is_bool_scalar(i))
    return tuple(None if _is_bool_scalar(i) else i for i in index)


class _IndexUpdateRef:
    """x.at[index]: the functional update methods of jax.numpy's `.at` (each returns a new array). As in JAX, an
    index out of bounds, static or not, follows `mode` (reads clamp, updates are dropped by default) and
    wrap_negative_indices=False makes negative indices out of bounds instead of counting from the end."""
    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array, self.index = array, index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None, wrap_negative_indices: bool = True, out_sharding: Any = None) -> Any:
        """x[index]; mode "fill" returns fill_value (NaN for floats) where the index is out of bounds, "clip" and
        "promise_in_bounds" clamp. out_sharding (JAX's explicit sharding mode) splits the result as it says: ember
        reads from x gathered whole (replicated: values as JAX's, with more communication than JAX's gather)."""
        array = self.array
        if out_sharding is not None:
            out_sharding = resolve("at[...].get", out_sharding)
            explicit = aval_of(array).explicit
            if explicit is not None:
                array = reshard(array, NamedSharding(explicit.mesh, P()))
        out = _read(array, self.index, "at[...].get", mode, fill_value, indices_are_sorted, unique_indices,
                    wrap=wrap_negative_indices)
        return out if out_sharding is None else reshard(out, out_sharding)

    def _update(self, name: str, prim_fn: Callable[..., Any], values: Any, mode: Any, indices_are_sorted: bool,
                unique_indices: bool, wrap: bool) -> Any:
        return _scatter_update(self.array, self.index, values, prim_fn, f"at[...].{name}", mode, indices_are_sorted,
                               unique_indices, wrap)

    def set(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] = values; with repeated indices one of the values is written."""
        return self._update("set", lax.scatter, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    def add(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] += values, accumulating over repeated indices."""
        return self._update("add", lax.scatter_add, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] -= values, accumulating over repeated indices."""
        return self._update("subtract", lax.scatter_sub, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] *= values, accumulating over repeated indices."""
        return self._update("multiply", lax.scatter_mul, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    mul = multiply

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] /= values (x divided by the product of the values at each index)."""
        scale = _scatter_update(ones_like(self.array), self.index, values, lax.scatter_mul, "at[...].divide", mode,
                                indices_are_sorted, unique_indices, wrap_negative_indices)
        return divide(self.array, scale)

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] **= values (x to the product of the values at each index)."""
        exponent = _scatter_update(ones_like(self.array), self.index, values, lax.scatter_mul, "at[...].power",
                                   mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)
        return power(self.array, exponent)

    def min(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] = minimum(x[index], values), over repeated indices too."""
        return self._update("min", lax.scatter_min, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    def max(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with x[index] = maximum(x[index], values), over repeated indices too."""
        return self._update("max", lax.scatter_max, values, mode, indices_are_sorted, unique_indices,
                            wrap_negative_indices)

    def apply(self, func: Callable[[Any], Any], *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x with the unary elementwise func applied to x[index], once per occurrence of an index (as JAX and
        numpy's ufunc.at). With unique_indices=True it is one gather, func and scatter, differentiable (JAX's
        apply is not); otherwise a loop runs func once per repetition, which forward mode differentiates and
        reverse mode refuses."""
        op = "at[...].apply"
        if unique_indices:
            read = _read(self.array, self.index, op, mode if mode is not None else "clip", None,
                         wrap=wrap_negative_indices)
            return self._update("apply", lax.scatter, func(read), mode, indices_are_sorted, True, wrap_negative_indices)
        x = _as_operand(self.array)
        counts = _scatter_update(zeros_like(x, dtype=_np.int32), self.index, 1, lax.scatter_add, op, mode,
                                 indices_are_sorted, False, wrap_negative_indices)
        most = lax.reduce_max(counts, None) if shape(counts) else counts

        def body(state: tuple[Any, Any]) -> tuple[Any, Any]:
            r, out = state
            applied = func(out)
            if aval_of(applied).dtype != aval_of(out).dtype:
                applied = lax.convert_element_type(applied, aval_of(out).dtype)
            return lax.add(r, _np.int32(1)), _where(lax.gt(counts, r), applied, out)
        return while_loop(lambda state: lax.lt(state[0], most), body, (_np.int32(0), x))[1]


class _IndexUpdateHelper:
    """The `at` property of arrays: `x.at[index]` is an _IndexUpdateRef (jax.numpy's functional updates)."""
    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"
