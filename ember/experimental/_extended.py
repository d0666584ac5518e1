"""jax.experimental's names for extended dtypes and their arrays: primal_tangent_dtype (a dtype whose tangents are of
another dtype), EArray (an array of an extended dtype over its physical data) and cur_qdd (the quasi-dynamic data of
a high-level type's value). ember computes on no extended dtype but its typed PRNG keys (whose arrays are ember's
own key arrays): these make JAX's objects, which ember's operations refuse with their own TypeError where they meet
one (as JAX 0.10.2's own operations fail on a primal_tangent_dtype array)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ember._core.dtypes import extended, parse_dtype


class primal_tangent_dtype_scalar(extended):  # noqa: N801 (JAX's name)
    """The scalar type of a PrimalTangentDType."""


def _short(dtype: np.dtype) -> str:
    return dtype.name.replace("float", "f").replace("uint", "u").replace("int", "i").replace("complex", "c")


@dataclasses.dataclass(frozen=True)
class PrimalTangentDType:
    """An extended dtype: values of primal_dtype whose tangents are of tangent_dtype (JAX's)."""
    primal_dtype: np.dtype
    tangent_dtype: np.dtype
    name: str
    type = primal_tangent_dtype_scalar

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


def primal_tangent_dtype(primal_dtype: Any, tangent_dtype: Any, name: str | None = None) -> PrimalTangentDType:
    """The extended dtype of primal_dtype values with tangent_dtype tangents, named name (by default
    PrimalTangentDType{i8/f32}), as jax.experimental.primal_tangent_dtype; ember makes no arrays of it."""
    primal, tangent = parse_dtype(primal_dtype), parse_dtype(tangent_dtype)
    return PrimalTangentDType(primal, tangent, name or f"PrimalTangentDType{{{_short(primal)}/{_short(tangent)}}}")


class EArray:
    """An array of an extended dtype over its physical data (jax.experimental.EArray): aval and data, with the
    array's shape, dtype, size and the data's device queries. ember makes none (its key arrays are its own)."""
    __slots__ = ("_aval", "_data")
    __hash__ = None  # type: ignore[assignment]
    __array_priority__ = 100

    def __init__(self, aval: Any, data: Any):
        self._aval, self._data = aval, data

    @property
    def aval(self) -> Any:
        return self._aval

    shape = property(lambda self: tuple(self._aval.shape))
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: len(self._aval.shape))
    size = property(lambda self: math.prod(self._aval.shape))
    itemsize = property(lambda self: self._aval.dtype.itemsize)
    devices = property(lambda self: self._data.devices)
    delete = property(lambda self: self._data.delete)
    is_deleted = property(lambda self: self._data.is_deleted)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Any:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        raise NotImplementedError("iteration over an EArray")

    def block_until_ready(self) -> "EArray":
        self._data.block_until_ready()
        return self

    def copy(self) -> "EArray":
        return EArray(self._aval, self._data.copy())

    def __repr__(self) -> str:
        return "E" + repr(self._data)


def cur_qdd(x: Any) -> Any:
    """The current quasi-dynamic data of a value of a high-level type (jax.experimental.cur_qdd): the value's own
    cur_qdd(); ember stages no high-level types, so an array, a number or a Ref has none (JAX's AttributeError)."""
    method = getattr(type(x), "cur_qdd", None)
    if method is None:
        raise AttributeError(f"{type(x).__name__!r} object has no attribute 'cur_qdd' (cur_qdd reads a value of a "
                             "high-level type's quasi-dynamic data; ember stages no high-level types)")
    return method(x)


__all__ = ["EArray", "PrimalTangentDType", "cur_qdd", "primal_tangent_dtype"]
