"""dtype predicates and host-side utilities of ember.numpy: can_cast, issubdtype, isdtype, isscalar, iterable,
printing options and array_repr/array_str, save/load/savez (numpy's .npy/.npz files, through the host),
packbits/unpackbits."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from ember import _prims as lax
from ember._core import aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis
from ember._runtime.backends import default_device, devices

from ember._numpy.creation import asarray
from ember._numpy.manipulation import pad
from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.shape import moveaxis, ndim, ravel, reshape, shape


def _dtype_of(x: Any) -> _np.dtype:
    if hasattr(x, "aval"):
        return aval_of(x).dtype
    if isinstance(x, (_np.ndarray, _np.generic)):
        return x.dtype
    return dt.parse_dtype(x)


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether a cast from from_ (a dtype or an array) to the dtype to is allowed under casting (numpy's rules)."""
    if is_python_scalar(from_):
        raise TypeError("can_cast: from_ must be a dtype or an array, not a Python scalar (numpy 2)")
    return bool(_np.can_cast(_dtype_of(from_), _np.dtype(to), casting))


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """numpy's issubdtype, knowing bfloat16 as a floating type and a typed key's dtype as a prng_key (an extended
    dtype, as jax.numpy)."""
    if dt.is_key_dtype(arg1) or dt.is_key_dtype(arg2) or arg2 in (dt.extended, dt.prng_key) or \
            arg1 in (dt.extended, dt.prng_key):
        if dt.is_key_dtype(arg1):
            return arg2 in (dt.extended, dt.prng_key) or (dt.is_key_dtype(arg2) and str(arg1) == str(arg2))
        return arg1 is dt.prng_key and arg2 in (dt.extended, dt.prng_key) or arg1 is arg2
    d1 = _np.dtype(arg1) if not (isinstance(arg1, type) and issubclass(arg1, _np.generic) and
                                 arg1 in _ABSTRACT) else arg1
    if isinstance(d1, _np.dtype) and _ml_kind(d1):
        if isinstance(arg2, type) and arg2 in _ABSTRACT:
            return arg2 in _ML_PARENTS[_ml_kind(d1)]
        return _np.dtype(arg2) == d1
    if isinstance(arg2, type) and arg2 in _ABSTRACT:
        return bool(_np.issubdtype(d1, arg2))
    d2 = _np.dtype(arg2)
    if _ml_kind(d2):
        return isinstance(d1, _np.dtype) and d1 == d2
    return bool(_np.issubdtype(d1, d2))


# ml_dtypes' types (bfloat16, JAX's narrow floats and integers), which numpy does not place among its abstract types
_ML_PARENTS = {"f": (_np.generic, _np.number, _np.inexact, _np.floating),
               "i": (_np.generic, _np.number, _np.integer, _np.signedinteger),
               "u": (_np.generic, _np.number, _np.integer, _np.unsignedinteger)}


def _ml_kind(d: _np.dtype) -> str:
    """'f', 'i' or 'u' for an ml_dtypes type (float8_e5m2's numpy kind is 'f', the others' 'V'), else ''."""
    if d.type.__module__ != "ml_dtypes":
        return ""
    return "u" if d.name.startswith("uint") else "i" if d.name.startswith("int") else "f"


_ABSTRACT = (_np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger, _np.inexact,
             _np.floating, _np.complexfloating, _np.flexible, _np.character, _np.bool_)

_KINDS = {
    "bool": lambda d: d == dt.bool_,
    "signed integer": dt.is_signed_int,
    "unsigned integer": dt.is_unsigned_int,
    "integral": dt.is_int,
    "real floating": dt.is_float,
    "complex floating": dt.is_complex,
    "numeric": lambda d: dt.is_int(d) or dt.is_inexact(d),
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """The array API's isdtype: whether dtype is of kind (a dtype, a kind name such as 'integral' or
    'real floating', or a tuple of them)."""
    d = dt.parse_dtype(dtype) if not isinstance(dtype, _np.dtype) else dtype
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; kinds are {', '.join(_KINDS)}")
            if _KINDS[k](d):
                return True
        elif d == _np.dtype(k):
            return True
    return False


def isscalar(element: Any) -> bool:
    """True for Python and numpy scalars and for 0-d ember arrays (as jax.numpy)."""
    if hasattr(element, "aval"):
        return ndim(element) == 0
    return bool(_np.isscalar(element)) or (isinstance(element, _np.ndarray) and element.ndim == 0)


def iterable(y: Any) -> bool:
    try:
        iter(y)
    except TypeError:
        return False
    return True


# printing: numpy's options, which ember arrays print with
get_printoptions = _np.get_printoptions
set_printoptions = _np.set_printoptions
printoptions = _np.printoptions


def array_repr(arr: Any, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    return repr(_as_operand(arr, "array_repr", 0)) if hasattr(arr, "aval") else _np.array_repr(
        _np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a: Any, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    return _np.array_str(_np.asarray(a), max_line_width, precision, suppress_small)


# files: numpy's formats, written and read on the host
def save(file: Any, arr: Any, allow_pickle: bool = True) -> None:
    """arr written to a .npy file (through the host)."""
    _np.save(file, _np.asarray(arr), allow_pickle=allow_pickle)


def savez(file: Any, *args: Any, **kwds: Any) -> None:
    """Arrays written to an uncompressed .npz file (through the host)."""
    _np.savez(file, *[_np.asarray(a) for a in args], **{k: _np.asarray(v) for k, v in kwds.items()})


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """An array from a .npy file, placed on the device (a .npz file gives numpy's lazy mapping, as numpy), as
    JAX's: numpy writes bfloat16, a type it does not know, as 2-byte void, read back as bfloat16; an array of a
    type ember arrays cannot hold (strings, objects) stays the numpy array."""
    out = _np.load(file, *args, **kwargs)
    if not isinstance(out, _np.ndarray):
        return out
    if out.dtype == _np.dtype("V2"):
        out = out.view(dt.bfloat16)
    try:
        return asarray(out)
    except TypeError:
        return out


# bit packing
def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """The elements of a boolean or integer array packed as bits into uint8 (8 per byte, padded with zeros)."""
    x = _as_operand(a, "packbits", 0)
    x = _promote("packbits", x)[0] if is_python_scalar(x) else x
    if not (dt.is_int(aval_of(x).dtype) or aval_of(x).dtype == dt.bool_):
        raise TypeError(f"packbits: a must be boolean or integer, got {aval_of(x).str_short()}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"packbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("packbits", axis, ndim(x))
    bits = lax.convert_element_type(lax.ne(x, lax.full_like(x, 0)), dt.uint8)
    bits = moveaxis(bits, axis, -1)
    n = shape(bits)[-1]
    extra = (-n) % 8
    if extra:
        bits = pad(bits, [(0, 0)] * (ndim(bits) - 1) + [(0, extra)])
    groups = reshape(bits, shape(bits)[:-1] + ((n + extra) // 8, 8))
    weights = _np.array([1 << (7 - i) for i in range(8)] if bitorder == "big" else [1 << i for i in range(8)],
                        dtype=_np.uint8)
    packed = lax.reduce_sum(lax.mul(groups, lax.broadcast_in_dim(asarray(weights), shape(groups),
                                                                   (ndim(groups) - 1,))), (ndim(groups) - 1,))
    return moveaxis(packed, -1, axis)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The bits of a uint8 array as a uint8 array of 0s and 1s (8 per byte), optionally only count of them."""
    x = _as_operand(a, "unpackbits", 0)
    x = _promote("unpackbits", x)[0] if is_python_scalar(x) else x
    if aval_of(x).dtype != dt.uint8:
        raise TypeError(f"unpackbits: a must be uint8, got {aval_of(x).str_short()}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"unpackbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("unpackbits", axis, ndim(x))
    x = moveaxis(x, axis, -1)
    shifts = _np.array(list(range(7, -1, -1)) if bitorder == "big" else list(range(8)), dtype=_np.uint8)
    expanded = lax.broadcast_in_dim(x, shape(x) + (8,), tuple(range(ndim(x))))
    sh = lax.broadcast_in_dim(asarray(shifts), shape(expanded), (ndim(expanded) - 1,))
    bits = lax.bitwise_and(lax.shift_right_logical(expanded, sh), lax.full_like(expanded, 1))
    bits = reshape(bits, shape(x)[:-1] + (shape(x)[-1] * 8,))
    if count is not None:
        total = shape(bits)[-1]
        count = count if count >= 0 else builtins.max(total + count, 0)
        if count <= total:
            bits = bits[..., :count]
        else:
            bits = pad(bits, [(0, 0)] * (ndim(bits) - 1) + [(0, count - total)])
    return moveaxis(bits, -1, axis)




class _NamespaceInfo:
    """The array API's inspection object (2023.12): what ember.numpy's arrays can be, and where."""

    def capabilities(self) -> dict[str, Any]:
        # boolean indexing and nonzero/unique have data-dependent shapes: eager only (size= under jit)
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self) -> Any:
        return default_device()

    def devices(self) -> list[Any]:
        return list(devices())

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        return {"real floating": dt.default_float_dtype(), "complex floating": dt.default_complex_dtype(),
                "integral": dt.default_int_dtype(), "indexing": dt.default_int_dtype()}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        """The dtypes ember supports, by name, of kind (as isdtype's kinds; None: all)."""
        # the standard's dtypes (ember's float16 and bfloat16 are extras)
        table = {d.name: d for d in dt.SUPPORTED_DTYPES if d not in (dt.bfloat16, dt.float16)}
        if kind is None:
            return table
        return {name: d for name, d in table.items() if isdtype(d, kind)}


def __array_namespace_info__() -> _NamespaceInfo:  # noqa: N807 - the array API's name
    """The array API's inspection utilities: capabilities, devices, default and supported dtypes."""
    return _NamespaceInfo()


__all__ = ["can_cast", "issubdtype", "isdtype", "isscalar", "iterable", "get_printoptions", "set_printoptions",
           "printoptions", "array_repr", "array_str", "save", "savez", "load", "packbits", "unpackbits"]
