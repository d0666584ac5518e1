"""Moving a call's arguments to the device: Arrays are checked and passed through (an uncommitted one on another
device is moved), host values (numpy arrays, Python scalars, literals) are copied, device scalars are shared. And
JAX's error for arguments committed to different devices (incompatible_devices)."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ember._core.cache import on_clear
from ember._core import (Literal, ShapedArray, Tracer, UnexpectedTracerError, aval_of_value, check_live,
                         is_python_scalar)
from ember._core import dtypes as dt
from ember._core.dtypes import canonicalize_dtype, check_int_fits
from ember._runtime import pjrt as _pjrt
from ember._runtime.array import Array, Token
from ember._runtime.backends import default_device
from ember._runtime.guards import Guards, check as check_transfer


class DeviceMismatchError(ValueError):
    """An Array argument lives on another device than the one the computation runs on."""


class IncompatibleDevicesError(DeviceMismatchError):
    """Arguments (or shardings) of one computation committed to different devices (JAX's ValueError)."""


def devices_text(devices: Any) -> str:
    """JAX's words for a device assignment in its incompatible-devices error."""
    devices = list(devices)
    return f"with device ids {[d.id for d in devices]} on platform {devices[0].platform.upper()}"


def argument_text(what: str, aval: ShapedArray, devices: Any) -> str:
    """JAX's words for an argument (`what`: "argument x of f") in its incompatible-devices error (its shape as JAX
    writes it there: float32[2,3])."""
    shape = f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"
    return f"{what} with shape {shape} and {devices_text(devices)}"


def incompatible_devices(first: str, second: str) -> IncompatibleDevicesError:
    """JAX's error for a computation whose arguments (or shardings) are committed to different devices; first and
    second describe two of them (argument_text, or e.g. "explicit output sharding " + devices_text(...))."""
    return IncompatibleDevicesError(f"Received incompatible devices for jitted computation. Got {first} and {second}")


@functools.lru_cache(maxsize=512)
def _scalar_buffer(kind: type, text: str, dtype: np.dtype, value: Any, device: _pjrt.Device) -> _pjrt.Buffer:
    """Device scalars are immutable, so equal ones are shared (keyed by repr: -0.0 and 0.0 differ)."""
    return device.client.buffer_from_numpy(np.asarray(value, dtype=dtype), device)


on_clear(_scalar_buffer.cache_clear)


def _describe(x: Any) -> str:
    try:
        return aval_of_value(x).str_short()
    except TypeError:
        return type(x).__name__


def to_buffer(x: Any, expected: ShapedArray, where: str,
              device: _pjrt.Device | None = None) -> _pjrt.Buffer:
    """A buffer on `device` (by default the default device) for argument x, checked against the expected shape
    and dtype. Host values are copied there, and an uncommitted Array on another device (JAX's placement rules: it
    moves to where the computation runs, an implicit device-to-device transfer); a committed Array must already
    live there."""
    device = device or default_device()
    if type(x) is np.ndarray and x.dtype == expected.dtype and x.shape == expected.shape:
        return device.client.buffer_from_numpy(x, device)  # the common host input: one copy, no conversion
    if type(x) is Token:
        if expected.dtype is not dt.token:
            raise TypeError(f"{where}: expected {expected.str_short()}, got a token")
        if x.device is not device:
            raise DeviceMismatchError(f"{where}: the token was made on {x.device} but the computation runs on "
                                      f"{device}; make one there (lax.create_token() inside the computation)")
        return x._buffer
    if type(x) is Array:
        aval = x.aval
        if aval.shape != expected.shape or aval.dtype != expected.dtype:
            raise TypeError(f"{where}: expected {expected.str_short()}, got {aval.str_short()}")
        if x.device is not device:
            if x._committed:
                raise DeviceMismatchError(f"{where}: the array is committed to {x.device} but the computation runs "
                                          f"on {device}; device_put it there")
            if Guards.device_to_device:
                check_transfer("device_to_device", lambda: f"{where}, {aval.str_short()} from {x.device} to {device}")
            return device.client.buffer_from_numpy(x._value(), device)
        return x.buffer
    if isinstance(x, Tracer):
        check_live(x, where)  # a leaked tracer, or one of another thread's staging
        raise UnexpectedTracerError(f"{where}: got a tracer {x!r}: a compiled program runs on concrete arrays (while "
                                    "staging a function, call the function, not its compiled program)")
    if isinstance(x, Literal):
        if x.aval.shape != expected.shape or x.aval.dtype != expected.dtype:
            raise TypeError(f"{where}: expected {expected.str_short()}, got the literal {x!r}")
        return _scalar_buffer(type(x.value), repr(x.value), expected.dtype, x.value, device)
    if is_python_scalar(x):
        value = x
        if expected.shape != ():
            raise TypeError(f"{where}: expected {expected.str_short()}, got the scalar {value!r}")
        if (isinstance(value, float) and expected.dtype.kind not in "fc") or \
                (type(value) is complex and expected.dtype.kind != "c") or \
                (type(value) is int and expected.dtype.kind == "b"):
            raise TypeError(f"{where}: expected {expected.str_short()}, got the {type(value).__name__} {value!r}")
        try:
            check_int_fits(value, expected.dtype)
        except OverflowError as err:
            raise OverflowError(f"{where}: {err}") from None
        return _scalar_buffer(type(value), repr(value), expected.dtype, value, device)
    if isinstance(x, np.ndarray | np.generic):
        try:
            dtype = canonicalize_dtype(x.dtype)
        except TypeError as err:
            raise TypeError(f"{where}: {err}") from None
        if np.shape(x) != expected.shape or dtype != expected.dtype:
            raise TypeError(f"{where}: expected {expected.str_short()}, got {_describe(x)}")
        # (a 64-bit value without enable_x64 is narrowed, as it was when its aval was taken)
        return device.client.buffer_from_numpy(np.require(x, dtype, requirements="C"), device)
    raise TypeError(f"{where}: expected an array {expected.str_short()}, got a value of type {type(x).__name__}")
