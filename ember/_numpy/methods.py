"""The operators and methods of Array and Tracer (numpy semantics), installed when ember.numpy is imported."""
from __future__ import annotations

import sys
from typing import Any

import numpy as _np

from ember import _prims as lax
from ember._core import ArrayMethods, Literal, Tracer, aval_of, install_array_methods
from ember._core import dtypes as dt
from ember._runtime.array import Array, device_put

from ember._numpy.indexing import _getitem, _IndexUpdateHelper
from ember._numpy.creation import copy
from ember._numpy.cumulative import cumprod, cumsum
from ember._numpy.linalg import dot, matmul
from ember._numpy.selection import compress, nonzero, take
from ember._numpy.sorting import argsort, searchsorted, sort
from ember._numpy.reductions import all, any, argmax, argmin, max, mean, min, std, sum, var  # noqa: A004
from ember._numpy.shape import astype, diagonal, ravel, reshape, squeeze, swapaxes, transpose
from ember._numpy.mathfuncs import conj, imag, left_shift, real, right_shift
from ember._numpy.manipulation import repeat, trace
from ember._numpy.reductions import prod
from ember._numpy.statistics import ptp
from ember._numpy.ufuncs import round as round_
from ember._numpy.ufuncs import (absolute, add, bitwise_and, bitwise_or, bitwise_xor, clip, divmod, equal,
                                 floor_divide, greater, greater_equal, invert, less, less_equal, multiply, negative,
                                 not_equal, positive, power, remainder, subtract, true_divide)


def _reflected(fn: Any) -> Any:
    return lambda self, other: fn(other, self)


def _method_reshape(self: Any, *shape_args: Any, order: str = "C", out_sharding: Any = None) -> Any:
    newshape = shape_args[0] if len(shape_args) == 1 and not isinstance(shape_args[0], int) else shape_args
    return reshape(self, newshape, order, out_sharding=out_sharding)


def _method_transpose(self: Any, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = axes[0]
    return transpose(self, axes if axes else None)


def _method_compress(self: Any, condition: Any, axis: int | None = None, **kwargs: Any) -> Any:
    return compress(condition, self, axis, **kwargs)


def _method_view(self: Any, dtype: Any = None, type: Any = None) -> Any:  # noqa: A002
    """The same bytes read as dtype (like jax.Array.view): the last axis shrinks or grows by the ratio of the item
    sizes; booleans are viewed through uint8."""
    if type is not None:
        raise NotImplementedError("view: the type argument is not supported (there is one array type)")
    if dtype is None:
        return self
    new = dt.check_user_dtype(dtype, "view")
    old = aval_of(self).dtype
    if not self.shape:
        if old.itemsize != new.itemsize:
            raise ValueError("view: a 0-d array can only be viewed as a dtype of the same item size, got "
                             f"{old.name} as {new.name}")
        return reshape(_method_view(reshape(self, (1,)), new), ())
    if self.shape[-1] * old.itemsize % new.itemsize:
        raise ValueError(f"view: the last axis ({self.shape[-1]} x {old.itemsize} bytes) does not divide into "
                         f"items of {new.name} ({new.itemsize} bytes)")
    if old == new:
        return self
    if dt.is_bool(old):
        return _method_view(astype(self, _np.uint8), new)
    if dt.is_bool(new):
        return astype(_method_view(self, _np.uint8), new)
    if old.itemsize < new.itemsize:
        ratio = new.itemsize // old.itemsize
        return lax.bitcast_convert_type(reshape(self, self.shape[:-1] + (self.shape[-1] // ratio, ratio)), new)
    out = lax.bitcast_convert_type(self, new)
    return reshape(out, out.shape[:-2] + (-1,)) if old.itemsize > new.itemsize else out


def _tracer_len(self: Any) -> int:
    if not self.shape:
        raise TypeError("len() of unsized object (a 0-d traced array)")
    return self.shape[0]


def _tracer_iter(self: Any) -> Any:
    if not self.shape:
        raise TypeError("iteration over a 0-d traced array")
    return (self[i] for i in range(self.shape[0]))


_METHODS = {
    "__add__": add, "__radd__": _reflected(add), "__sub__": subtract, "__rsub__": _reflected(subtract),
    "__mul__": multiply, "__rmul__": _reflected(multiply), "__truediv__": true_divide,
    "__rtruediv__": _reflected(true_divide), "__floordiv__": floor_divide, "__rfloordiv__": _reflected(floor_divide),
    "__mod__": remainder, "__rmod__": _reflected(remainder), "__divmod__": divmod,
    "__rdivmod__": _reflected(divmod), "__pow__": power, "__rpow__": _reflected(power),
    "__matmul__": matmul, "__rmatmul__": _reflected(matmul), "__neg__": negative, "__pos__": positive,
    "__abs__": absolute, "__eq__": equal, "__ne__": not_equal, "__lt__": less, "__le__": less_equal,
    "__gt__": greater, "__ge__": greater_equal, "__and__": bitwise_and, "__rand__": _reflected(bitwise_and),
    "__or__": bitwise_or, "__ror__": _reflected(bitwise_or), "__xor__": bitwise_xor,
    "__rxor__": _reflected(bitwise_xor), "__invert__": invert, "__getitem__": _getitem,
    "T": property(lambda self: transpose(self)), "mT": property(lambda self: swapaxes(self, -1, -2)),
    "reshape": _method_reshape, "transpose": _method_transpose, "astype": astype, "sum": sum, "mean": mean,
    "max": max, "min": min, "argmax": argmax, "argmin": argmin, "all": all, "any": any, "var": var, "std": std,
    "at": property(_IndexUpdateHelper), "take": take, "nonzero": nonzero, "compress": _method_compress,
    "sort": sort, "argsort": argsort, "searchsorted": searchsorted, "cumsum": cumsum, "cumprod": cumprod,
    "ravel": ravel, "flatten": ravel, "squeeze": squeeze, "dot": dot, "clip": clip, "swapaxes": swapaxes,
}


def _array_namespace(self: Any, /, *, api_version: str | None = None) -> Any:
    """The array API namespace of ember arrays: ember.numpy."""
    # ember.numpy installed this method when it was imported: it is there (a module import here would reach
    # up a layer)
    namespace = sys.modules["ember.numpy"]
    if api_version is not None and api_version not in namespace.__array_api_supported_versions__:
        raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported (supported: "
                         f"{', '.join(namespace.__array_api_supported_versions__)})")
    return namespace


def _to_device(self: Any, device: Any, /, *, stream: Any = None) -> Any:
    """The array on device (the array API's to_device)."""
    if stream is not None:
        raise ValueError("to_device: streams are not supported")
    return device_put(self, device)


def _round_builtin(self: Any, ndigits: int | None = None) -> Any:
    """Python's round(x[, ndigits]) as JAX's: to even; without ndigits, an integer array."""
    out = round_(self, ndigits or 0)
    return astype(out, int) if ndigits is None else out


_METHODS.update({
    "__round__": _round_builtin, "copy": copy,
    "__lshift__": left_shift, "__rlshift__": _reflected(left_shift), "__rshift__": right_shift,
    "__rrshift__": _reflected(right_shift), "__array_namespace__": _array_namespace, "to_device": _to_device,
    "prod": prod, "ptp": ptp, "repeat": repeat, "diagonal": diagonal, "trace": trace, "round": round_,
    "conj": conj, "conjugate": conj, "real": property(real), "imag": property(imag), "view": _method_view,
})
_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "divmod", "pow", "matmul", "and", "or", "xor",
           "lshift", "rshift")
_DEFERRING = [f"__{op}__" for op in _BINARY] + [f"__r{op}__" for op in _BINARY] + [
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"]


def _accepted(other: Any) -> bool:
    """An operand an array operator computes with (as JAX's): an array (ember's, numpy's, one with __jax_array__),
    a number or a numpy scalar. Anything else makes the operator return NotImplemented, so that Python asks the
    other operand (its __radd__, __rpow__, ...: a library's own types, such as equinox's ω) and, failing that,
    raises its TypeError."""
    return isinstance(other, _ACCEPTED) or hasattr(other, "__jax_array__")


def _deferring(name: str, method: Any) -> Any:
    common = _COMMON

    def deferring(self: Any, other: Any) -> Any:
        # (the common operand types by a set look-up: an operator is on eager dispatch's hot path)
        return method(self, other) if type(other) in common or _accepted(other) else NotImplemented
    deferring.__name__ = name
    return deferring


# (Array: typed key arrays too; Literal: a scalar of an IR, which evaluating an IR passes as it is)
_ACCEPTED = (int, float, complex, _np.ndarray, _np.generic, ArrayMethods, Array, Literal)
_COMMON = frozenset({Array, Tracer, int, float, bool, _np.ndarray})
_METHODS.update({name: _deferring(name, _METHODS[name]) for name in _DEFERRING})
# Array defines its own __len__ and __iter__ (on concrete values), which take precedence over these.
install_array_methods({**_METHODS, "__len__": _tracer_len, "__iter__": _tracer_iter})
