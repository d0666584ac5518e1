"""Views of a mutable array reference through transforms (jax.experimental.hijax.TransformedRef, what JAX's
`ref.at[idx]`, `ref.reshape(...)`, `ref.bitcast(dtype)` and `ref.T` make inside a traced function): reading one
reads the Ref's value through the transforms; writing one writes the elements of the Ref it shows.

    r = ember.new_ref(jnp.zeros((4, 6)))
    row = r.at[1]                 # TransformedRef f32[6]
    row[2:4] = jnp.ones(2)        # r[1, 2:4] is now 1
    r.reshape(6, 4)[0] += 1.0     # the first 4 elements of r, in row-major order
    r.T[:, 0]                     # r[0, :], read through a transpose

The transforms, applied in order: an index (`at[idx]`: ints, slices, arrays, None, `...`, as numpy's), a reshape
(row-major, as `jnp.reshape`), a transpose (a permutation of the axes; JAX's fails when it is read or written) and a
bitcast (a dtype of the same width: elementwise, read and written; another width: read only, the second-minor axis
scaled by the ratio of the widths as JAX's (Pallas') bitcast of a Ref scales it). Every read and write goes through
the Ref's own primitives (ember.ref's get and swap of the whole value: a write gathers the positions it covers from
an iota put through the same transforms), so views work eagerly, under jit, loops and branches, grad and vmap as
Refs do.
Where JAX differs: its eager Ref has no `.at`/`reshape`/`T`/`bitcast` (only a traced one); ember's has them."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.refs import RefMethods, install_ref_methods
from ember._prims.bits import bitcast_convert_type
from ember._prims.refs import _kind, get, ref_swap_p
from ember._prims.shape import convert_element_type, iota, moveaxis


class TransformedRef:
    """A Ref seen through transforms (see the module's docstring): `ref` the Ref itself, `transforms` a tuple of
    ("index", idx), ("reshape", shape), ("transpose", permutation) and ("bitcast", dtype), applied in order."""
    __slots__ = ("ref", "transforms", "_type")

    def __init__(self, ref: Any, transforms: tuple[tuple[str, Any], ...]):
        if isinstance(ref, TransformedRef):  # (a view of a view: one list of transforms)
            ref, transforms = ref.ref, ref.transforms + tuple(transforms)
        if not isinstance(ref, RefMethods):
            raise TypeError(f"TransformedRef: expected a Ref (from ember.new_ref), got {type(ref).__name__}")
        self.ref, self.transforms = ref, tuple(transforms)
        self._type = _view_type(ref.aval.shape, ref.aval.dtype, self.transforms)

    # the type of the view
    shape = property(lambda self: self._type[0])
    dtype = property(lambda self: self._type[1])
    ndim = property(lambda self: len(self._type[0]))
    size = property(lambda self: math.prod(self._type[0]))
    T = property(lambda self: self.transpose(tuple(reversed(range(self.ndim)))))

    def __repr__(self) -> str:
        return f"TransformedRef({dt.short_name(self.dtype)}{list(self.shape)}, transforms={self.transforms})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of an unsized TransformedRef (a scalar)")
        return self.shape[0]

    # more transforms
    @property
    def at(self) -> "_Indexer":
        return _Indexer(self)

    def reshape(self, *shape: Any) -> "TransformedRef":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return TransformedRef(self, (("reshape", _reshaped(self.shape, shape)),))

    def transpose(self, *permutation: Any) -> "TransformedRef":
        perm = tuple(permutation[0]) if len(permutation) == 1 and isinstance(permutation[0], (tuple, list)) \
            else permutation
        if sorted(int(p) for p in perm) != list(range(self.ndim)):
            raise ValueError(f"TransformedRef.transpose: {perm} is not a permutation of the {self.ndim} axes of "
                             f"{dt.short_name(self.dtype)}{list(self.shape)}")
        return TransformedRef(self, (("transpose", tuple(int(p) for p in perm)),))

    def bitcast(self, dtype: Any) -> "TransformedRef":
        return TransformedRef(self, (("bitcast", dt.parse_dtype(dtype)),))

    # reading and writing
    def get(self, idx: Any = ()) -> Any:
        value = _apply(get(self.ref), self.transforms)
        return value if _whole(idx) else value[idx]

    def swap(self, value: Any, idx: Any = ()) -> Any:
        """Write value into view[idx] (the Ref's elements it shows) and return what was there."""
        if any(kind == "bitcast" and np.dtype(arg).itemsize != np.dtype(dtype).itemsize
               for (kind, arg), dtype in zip(self.transforms, _dtypes(self.ref.aval.dtype, self.transforms))):
            raise NotImplementedError("TransformedRef: writing through a bitcast to a dtype of another width is not "
                                      f"supported ({self!r}); read it, or write the Ref itself")
        whole = get(self.ref)
        old = _apply(whole, self.transforms)
        positions = _apply(_iota(self.ref.aval.shape), self.transforms, positions=True)
        if not _whole(idx):
            old, positions = old[idx], positions[idx]
        value = _checked(value, old)
        base = self.ref.aval.dtype
        if np.dtype(value.dtype) != np.dtype(base):
            value = bitcast_convert_type(value, base)
        new = whole.reshape(-1).at[positions.reshape(-1)].set(value.reshape(-1)).reshape(whole.shape)
        ref_swap_p.bind(self.ref, new)
        return old

    def set(self, value: Any, idx: Any = ()) -> None:
        self.swap(value, idx)

    def __getitem__(self, idx: Any) -> Any:
        return self.get(idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self.swap(value, idx)


class _Indexer:
    """`view.at[idx]`: the view indexed (another TransformedRef)."""
    __slots__ = ("_of",)

    def __init__(self, of: Any):
        self._of = of

    def __getitem__(self, idx: Any) -> TransformedRef:
        return TransformedRef(self._of, (("index", idx),))


def _whole(idx: Any) -> bool:
    return idx is None or idx is Ellipsis or (isinstance(idx, tuple) and (not idx or idx == (Ellipsis,)))


def _reshaped(shape: tuple[int, ...], new: Sequence[Any]) -> tuple[int, ...]:
    """new with one -1 resolved, checked to hold as many elements as shape (as jnp.reshape's)."""
    new = [int(d) for d in new]
    size = math.prod(shape)
    if new.count(-1) > 1 or any(d < -1 for d in new):
        raise ValueError(f"TransformedRef.reshape: invalid shape {tuple(new)}")
    if -1 in new:
        rest = math.prod(d for d in new if d != -1)
        if rest == 0 or size % rest:
            raise ValueError(f"TransformedRef.reshape: cannot reshape {list(shape)} into {tuple(new)}")
        new[new.index(-1)] = size // rest
    if math.prod(new) != size:
        raise ValueError(f"TransformedRef.reshape: cannot reshape {list(shape)} ({size} elements) into {tuple(new)}")
    return tuple(new)


def _dtypes(base: np.dtype, transforms: Sequence[tuple[str, Any]]) -> list[np.dtype]:
    """The dtype before each transform."""
    out, dtype = [], np.dtype(base)
    for kind, arg in transforms:
        out.append(dtype)
        if kind == "bitcast":
            dtype = np.dtype(arg)
    return out


def _apply(value: Any, transforms: Sequence[tuple[str, Any]], positions: bool = False) -> Any:
    """value seen through the transforms (positions: value holds element positions, which a bitcast of the same
    width keeps)."""
    for kind, arg in transforms:
        if kind == "index":
            value = value[arg]
        elif kind == "reshape":
            value = value.reshape(arg)
        elif kind == "transpose":
            value = value.transpose(arg)
        elif not positions:
            value = _bitcast(value, np.dtype(arg))
    return value


def _bitcast(value: Any, dtype: np.dtype) -> Any:
    """JAX's bitcast of a Ref view: elementwise for a dtype of the same width; to a narrower one (k to an element)
    each element's k parts stacked along the second-minor axis (rows i*k .. i*k + k - 1 of the view hold the parts
    of row i, lowest first, as bitcast_convert_type orders them), and a wider one the reverse."""
    old, new = np.dtype(value.dtype).itemsize, dtype.itemsize
    if old == new:
        return bitcast_convert_type(value, dtype)
    *lead, m, n = value.shape
    if old > new:
        k = old // new
        parts = bitcast_convert_type(value, dtype)  # [..., m, n, k]
        return moveaxis(parts, parts.ndim - 1, parts.ndim - 2).reshape(*lead, m * k, n)
    k = new // old
    rows = value.reshape(*lead, m // k, k, n)
    return bitcast_convert_type(moveaxis(rows, rows.ndim - 2, rows.ndim - 1), dtype)


def _iota(shape: tuple[int, ...]) -> Any:
    """The positions of a value of this shape's elements, row-major."""
    return iota(np.dtype(np.int32 if math.prod(shape) < 2 ** 31 else np.int64), math.prod(shape)).reshape(shape)


def _view_type(shape: tuple[int, ...], dtype: np.dtype, transforms: Sequence[tuple[str, Any]]
               ) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of the view (computed on numpy stand-ins of no data: broadcast zeros)."""
    stand_in = np.broadcast_to(np.zeros((), dtype), shape)
    for kind, arg in transforms:
        if kind == "index":
            try:
                stand_in = stand_in[_static_index(arg)]
            except IndexError as err:
                raise IndexError(f"TransformedRef: index {arg!r} of {dt.short_name(stand_in.dtype)}"
                                 f"{list(stand_in.shape)}: {err}") from None
        elif kind == "reshape":
            stand_in = stand_in.reshape(arg)
        elif kind == "transpose":
            stand_in = stand_in.transpose(arg)
        else:
            old, new = stand_in.dtype.itemsize, np.dtype(arg).itemsize
            shape_now = list(stand_in.shape)
            if old != new:
                if len(shape_now) < 2:
                    raise ValueError(f"TransformedRef.bitcast: {dt.short_name(stand_in.dtype)}{shape_now} to "
                                     f"{np.dtype(arg).name}, another width, needs at least two axes (the "
                                     "second-minor one is scaled, as JAX's)")
                if old > new:
                    shape_now[-2] *= old // new
                elif shape_now[-2] % (new // old):
                    raise ValueError(f"TransformedRef.bitcast: {dt.short_name(stand_in.dtype)}{shape_now} to "
                                     f"{np.dtype(arg).name} needs a second-minor axis divisible by {new // old}")
                else:
                    shape_now[-2] //= new // old
            stand_in = np.broadcast_to(np.zeros((), arg), tuple(shape_now))
    return tuple(stand_in.shape), np.dtype(stand_in.dtype)


def _static_index(idx: Any) -> Any:
    """idx with its arrays (traced ones too) as numpy stand-ins of their shape (zeros: in range), for the type."""
    def one(entry: Any) -> Any:
        if entry is None or entry is Ellipsis or isinstance(entry, (int, np.integer, slice)):
            return entry
        aval = aval_of(entry)
        return np.zeros(aval.shape, aval.dtype)
    return tuple(one(e) for e in idx) if isinstance(idx, tuple) else one(idx)


def _checked(value: Any, old: Any) -> Any:
    """value for view[idx] = value: the view's dtype (a Python scalar of the same kind converted), the shape of the
    indexed part (as a Ref's own writes check them)."""
    want = aval_of(old)
    try:
        aval = aval_of(value)
    except TypeError:
        value = np.asarray(value)
        aval = aval_of(value)
    if aval.dtype != want.dtype and not (aval.weak_type and _kind(aval.dtype) == _kind(want.dtype)):
        raise ValueError(f"Invalid dtype for a TransformedRef write. Ref view dtype: {want.dtype.name}. Value dtype: "
                         f"{aval.dtype.name}.")
    if aval.shape != want.shape:
        raise ValueError(f"Invalid shape for a TransformedRef write. Expected shape: {want.shape}. Value shape: "
                         f"{aval.shape}.")
    return convert_element_type(value, want.dtype)


def _ref_at(self: Any) -> _Indexer:
    return _Indexer(self)


install_ref_methods({
    "at": property(_ref_at),
    "reshape": lambda self, *shape: TransformedRef(self, ()).reshape(*shape),
    "transpose": lambda self, *perm: TransformedRef(self, ()).transpose(*perm),
    "T": property(lambda self: TransformedRef(self, ()).T),
    "bitcast": lambda self, dtype: TransformedRef(self, ()).bitcast(dtype),
})

__all__ = ["TransformedRef"]
