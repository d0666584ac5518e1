"""The pieces every sparse format shares (JAX's jax.experimental.sparse._base and util): the JAXSparse base class,
the efficiency error and warnings, SparseInfo (a format's static description), and the helpers that map a
function over the batch dimensions of sparse buffers."""
from __future__ import annotations

import abc
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

import ember
from ember._core import ConcretizationTypeError, Tracer


class SparseEfficiencyError(ValueError):
    """An operation would store its sparse result so wastefully (new batch or dense dimensions of size > 1) that
    it refuses (bcoo_update_layout's on_inefficient='error')."""


class SparseEfficiencyWarning(UserWarning):
    """The warning form of SparseEfficiencyError (on_inefficient='warn')."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """JAX's warning that cuSPARSE cannot run an operation; ember computes sparse operations with XLA ops on every
    device, so it never warns it, but code that filters it keeps working."""


class SparseInfo(NamedTuple):
    """A sparse array's static facts: its shape and what is known of its indices."""
    shape: tuple[int, ...]
    indices_sorted: bool = False
    unique_indices: bool = False


class JAXSparse(abc.ABC):
    """The base class of ember's sparse arrays (as JAX's): a shape, buffers that are arrays (a pytree), and
    the operations every format has (todense, transpose); the rest raise NotImplementedError naming the class."""
    data: Any
    shape: tuple[int, ...]
    __hash__ = None  # type: ignore[assignment]
    __array_ufunc__ = None  # (numpy operands defer to the sparse array's operators: `ndarray @ sparse`)

    def __init__(self, args: tuple[Any, ...], *, shape: Sequence[int]):
        self.shape = tuple(_static_int(type(self).__name__, "shape", s) for s in shape)

    @property
    def dtype(self) -> np.dtype:
        """The elements' dtype: the stored values' (every format keeps them in `data`)."""
        return self.data.dtype

    @property
    @abc.abstractmethod
    def nse(self) -> int: ...

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self) -> Any:
        return self.transpose()

    def __repr__(self) -> str:
        text = f"{type(self).__name__}({self.dtype}{list(self.shape)}, nse={self.nse})"
        return f"Tracer[{text}]" if isinstance(self.data, Tracer) else text

    @abc.abstractmethod
    def tree_flatten(self) -> tuple[Any, Any]: ...

    @classmethod
    @abc.abstractmethod
    def tree_unflatten(cls, aux_data: Any, children: Any) -> Any: ...

    @abc.abstractmethod
    def transpose(self, axes: Any = None) -> Any: ...

    @abc.abstractmethod
    def todense(self) -> Any: ...

    def block_until_ready(self) -> Any:
        for buf in self.tree_flatten()[0]:
            buf.block_until_ready()
        return self

    def _unsupported(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__}.{what} is not implemented (use .todense(), or BCOO)")

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("sum")

    def __neg__(self) -> Any:
        raise self._unsupported("__neg__")

    def __pos__(self) -> Any:
        raise self._unsupported("__pos__")

    def __matmul__(self, other: Any) -> Any:
        raise self._unsupported("__matmul__")

    def __rmatmul__(self, other: Any) -> Any:
        raise self._unsupported("__rmatmul__")

    def __mul__(self, other: Any) -> Any:
        raise self._unsupported("__mul__")

    def __rmul__(self, other: Any) -> Any:
        raise self._unsupported("__rmul__")

    def __add__(self, other: Any) -> Any:
        raise self._unsupported("__add__")

    def __radd__(self, other: Any) -> Any:
        raise self._unsupported("__radd__")

    def __sub__(self, other: Any) -> Any:
        raise self._unsupported("__sub__")

    def __rsub__(self, other: Any) -> Any:
        raise self._unsupported("__rsub__")

    def __getitem__(self, item: Any) -> Any:
        raise self._unsupported("__getitem__")


def _static_int(api: str, what: str, value: Any) -> int:
    """value as a Python int, or a TypeError naming api and what (a shape or nse must be static)."""
    try:
        return int(value.__index__())
    except (AttributeError, TypeError, ConcretizationTypeError):
        raise TypeError(f"{api}: {what} must be a static integer, got {value!r}") from None


def concrete_int(api: str, what: str, value: Any, hint: str = "") -> int:
    """A value computed from the data (an nse) as a Python int; under a transformation it is not known, and
    the error says which argument to pass instead (as JAX's concretization errors)."""
    if isinstance(value, Tracer):
        raise ConcretizationTypeError(
            f"{api}: {what} depends on the values of traced arrays (inside jit, vmap or grad); {hint}")
    return int(np.asarray(value))


def broadcasting_vmap(fun: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
    """vmap fun over axis 0 of the arguments whose in_axes entry is 0 (a tuple, one per argument, or one int
    for all), where an argument of size 1 along that axis is broadcast: it is squeezed and passed unmapped
    (a sparse array's batch dimensions may be stored with size 1: JAX's broadcasting_vmap)."""
    def batched(*args: Any) -> Any:
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        sizes = {a.shape[0] for a, ax in zip(args, axes) if ax is not None}
        size = max(sizes, default=1)
        if size != 1:
            bad = [tuple(a.shape) for a, ax in zip(args, axes) if ax is not None and a.shape[0] not in (1, size)]
            if bad:
                raise ValueError(f"sparse batch dimensions do not match: leading sizes of {bad} against {size}")
            new_axes = tuple(None if ax is None or a.shape[0] == 1 else ax for a, ax in zip(args, axes))
            args = tuple(a[0] if ax is not None and a.shape[0] == 1 else a for a, ax in zip(args, axes))
            if all(ax is None for ax in new_axes):
                out = fun(*args)
                return ember.tree_util.tree_map(lambda o: ember.numpy.broadcast_to(o, (size, *o.shape)), out)
            return ember.vmap(fun, in_axes=new_axes)(*args)
        return ember.vmap(fun, in_axes=axes)(*args)
    return batched


def nfold_vmap(fun: Callable[..., Any], n: int, in_axes: Any = 0, broadcasted: bool = True) -> Callable[..., Any]:
    """fun mapped over the n leading axes of its mapped arguments (broadcasting size-1 axes when broadcasted)."""
    for _ in range(n):
        fun = broadcasting_vmap(fun, in_axes) if broadcasted else ember.vmap(fun, in_axes=in_axes)
    return fun
