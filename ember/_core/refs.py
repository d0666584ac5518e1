"""The type of mutable array references (ember.Ref): RefAval, the abstract value of a Ref holding an array of a
given shape and dtype, printed `Ref{f32[3]}` as JAX prints it.

A RefAval is a ShapedArray (so the shape-generic parts of the transformations, batching a Ref argument along an
axis, work on it unchanged) that is equal only to another RefAval: a signature with a Ref never matches one with an
array. Only the primitives that take refs (Primitive.takes_refs: new_ref, ref_get, ref_swap, freeze and the
higher-order primitives whose bodies read or write refs) accept one; binding any other primitive on a Ref is a
TypeError (Builder.add_eqn, and the eager path). See docs/refs.md."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core.dtypes import ShapedArray


class RefAval(ShapedArray):
    """The abstract value of a mutable array reference to an array of this shape and dtype (never weakly typed)."""
    __slots__ = ()

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        super().__init__(shape, dtype, False)
        self._hash = hash(("Ref", self.shape, self.dtype))

    @staticmethod
    def of(aval: ShapedArray) -> "RefAval":
        """The type of a Ref holding a value of type aval."""
        return RefAval(aval.shape, aval.dtype)

    @property
    def inner(self) -> ShapedArray:
        """The type of the value the Ref holds."""
        return ShapedArray(self.shape, self.dtype)

    def update(self, shape: Sequence[int] | None = None, dtype: Any = None, weak_type: bool | None = None,
               vma: Any = None) -> "RefAval":
        return RefAval(self.shape if shape is None else shape, self.dtype if dtype is None else dtype)

    def strip_weak_type(self) -> "RefAval":
        return self

    def with_vma(self, vma: Any) -> "RefAval":
        return self  # (a reference is one object: it does not vary over devices)

    def str_short(self) -> str:
        return f"Ref{{{super().str_short()}}}"

    __str__ = str_short

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RefAval) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"RefAval({self.shape}, {self.dtype.name})"


class RefMethods:
    """The base of ember.Ref (a concrete reference) and of the tracer of a Ref being staged: indexing (`ref[idx]`,
    `ref[idx] = v`, `ref[idx] += v`) reads and writes the referenced array. The methods are installed by the layer
    that defines the reference primitives (ember._prims.refs, through install_ref_methods), as the array methods
    are (ember._core.trace.install_array_methods)."""
    __slots__ = ()


def install_ref_methods(methods: dict[str, Any]) -> None:
    """Install the indexing methods of every reference type (called once, by ember._prims.refs)."""
    for name, method in methods.items():
        setattr(RefMethods, name, method)


def check_no_refs_returned(label: str, leaves: Sequence[Any]) -> None:
    """A staged function may not return a mutable array reference (as JAX: it would alias the caller's)."""
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, RefMethods):
            raise ValueError(f"{label} returned a mutable array reference of type {leaf.aval.str_short()} (output "
                             f"{i}), but mutable array references cannot be returned (from jit, loop bodies or "
                             "branches); return its value (ref[...] or ember.freeze(ref)) instead")


def ref_operand_error(prim_name: str, avals: Sequence[ShapedArray]) -> TypeError:
    """The error of binding a primitive that does not take refs on a Ref."""
    i, aval = next((i, a) for i, a in enumerate(avals) if type(a) is RefAval)
    return TypeError(f"{prim_name} requires array or scalar arguments, but operand {i} is a mutable array reference "
                     f"of type {aval.str_short()}: read its value first (ref[...]), as in "
                     f"`{prim_name}(ref[...])`")


__all__ = ["RefAval", "RefMethods", "check_no_refs_returned", "install_ref_methods", "ref_operand_error"]
