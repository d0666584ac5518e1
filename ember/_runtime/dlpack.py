"""DLPack: ember arrays shared with numpy, torch, JAX and any other DLPack library, without copies on the CPU.

Export (Array.__dlpack__, Array.__dlpack_device__) follows the Python array API standard (2023.12): a versioned
DLPack 1.0 capsule ("dltensor_versioned") when the consumer's max_version is at least (1, 0), else a legacy one
("dltensor"). The capsule points at the PJRT buffer's own memory (no copy; READ_ONLY flag set in the versioned
form, since ember arrays are immutable) and keeps the buffer alive until the consumer calls the deleter: the
buffer is pinned (an Array.delete() meanwhile marks the array deleted and destroys the buffer after the deleter)
and its PJRT external reference count raised. copy=True exports a host copy (IS_COPIED flag). The capsule itself
is numpy's (see _SharedMemory), so that what consumers call is C code.

Import (from_dlpack) wraps the producer's memory in a PJRT buffer with PJRT_Client_CreateViewOfDeviceBuffer (no
copy) when it is dense row-major and 64-byte aligned (the CPU plugin's requirement: numpy's default allocations
are only 16-byte aligned, torch's, JAX's and PJRT's are 64-byte aligned); the producer's deleter runs when PJRT is
done with the memory (the buffer destroyed and every computation using it finished). Otherwise it copies.

The C structs follow dlpack.h (v1.0); capsules are read through the CPython C API with ctypes. PJRT's on_delete
callback of the views is kept alive for the life of the process and reads no module global when it runs, so it
still works while the interpreter shuts down (when the PJRT clients are already closed: nothing is then released
in PJRT, and nothing is destroyed after its client). docs/dlpack.md has the details."""
from __future__ import annotations

import ctypes
import itertools
import math
import weakref
from typing import Any

import ml_dtypes
import numpy as np

from ember._core import ShapedArray
from ember._core import dtypes as dt
from ember._runtime import pjrt as _pjrt
from ember._runtime.array import Array, canonical_aval, device_put
from ember._runtime.backends import get_client
from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.structs import ON_DELETE_CALLBACK

c_void_p, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64 = (
    ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32,
    ctypes.c_uint64)

# ---------------------------------------------------------------------------------------------------------------
# dlpack.h (v1.0)
kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM = 1, 2, 3, 10
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6
DLPACK_VERSION = (1, 0)
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1
ALIGNMENT = 64  # what PJRT_Client_CreateViewOfDeviceBuffer of the CPU plugin requires of the memory it wraps


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(c_int64)), ("strides", ctypes.POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(ctypes.Structure):  # the legacy (unversioned) form; deleter: void (*)(DLManagedTensor*)
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):  # deleter: void (*)(DLManagedTensorVersioned*)
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p), ("flags", c_uint64),
                ("dl_tensor", DLTensor)]


assert ctypes.sizeof(DLTensor) == 48 and ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80

_FOREIGN_DELETER = ctypes.PYFUNCTYPE(None, c_void_p)  # a producer's deleter, called with the GIL held


# ember dtype <-> DLDataType (code, bits); lanes are always 1
_DL_TYPES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.bool_): (kDLBool, 8),
    **{np.dtype(f"int{b}"): (kDLInt, b) for b in (8, 16, 32, 64)},
    **{np.dtype(f"uint{b}"): (kDLUInt, b) for b in (8, 16, 32, 64)},
    np.dtype(np.float16): (kDLFloat, 16), np.dtype(np.float32): (kDLFloat, 32), np.dtype(np.float64): (kDLFloat, 64),
    np.dtype(ml_dtypes.bfloat16): (kDLBfloat, 16),
    np.dtype(np.complex64): (kDLComplex, 64), np.dtype(np.complex128): (kDLComplex, 128),
}
_DTYPES_OF_DL: dict[tuple[int, int], np.dtype] = {code: dtype for dtype, code in _DL_TYPES.items()}
def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of dtype can cross DLPack (as jax.dlpack.is_supported_dtype)."""
    try:
        return np.dtype(dtype) in _DL_TYPES
    except TypeError:
        return False


_DL_CODE_NAMES = {kDLInt: "int", kDLUInt: "uint", kDLFloat: "float", 3: "opaque handle", kDLBfloat: "bfloat",
                  kDLComplex: "complex", kDLBool: "bool", 7: "float8_e3m4", 8: "float8_e4m3"}
_DL_DEVICE_NAMES = {kDLCPU: "CPU", kDLCUDA: "CUDA", kDLCUDAHost: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan",
                    8: "Metal", 9: "VPI", kDLROCM: "ROCm", 11: "ROCm host", 12: "ExtDev", 13: "CUDA managed",
                    14: "oneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA"}
_PLATFORM_DL_DEVICE = {"cuda": kDLCUDA, "gpu": kDLCUDA, "rocm": kDLROCM}


def _dl_dtype_name(dl: DLDataType) -> str:
    name = _DL_CODE_NAMES.get(dl.code, f"type code {dl.code}")
    return f"{name}{dl.bits}" + (f"x{dl.lanes}" if dl.lanes != 1 else "")


# ---------------------------------------------------------------------------------------------------------------
# PyCapsule through ctypes, for the capsules we are given (alive and valid while we read them). Private
# prototypes: ctypes.pythonapi's attributes are shared, and other code may set their argtypes.
def _c_api(name: str, restype: Any, *argtypes: Any) -> Any:
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _c_api("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, c_void_p)
_capsule_get_pointer = _c_api("PyCapsule_GetPointer", c_void_p, ctypes.py_object, c_void_p)
_capsule_set_name = _c_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, c_void_p)
_py_incref = _c_api("Py_IncRef", None, ctypes.py_object)

# Capsule names, as addresses of C strings that live as long as the process (a renamed capsule keeps a pointer).
_NAME_BUFFERS = {name: ctypes.create_string_buffer(name.encode()) for name in
                 ("dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned")}
_NAMES = {name: ctypes.addressof(buffer) for name, buffer in _NAME_BUFFERS.items()}
_LEGACY, _VERSIONED = _NAMES["dltensor"], _NAMES["dltensor_versioned"]


def _managed_tensor(capsule: Any) -> tuple[Any, bool] | None:
    """The DLManagedTensor(Versioned) of an unconsumed DLPack capsule, and whether it is versioned; None if it
    is not one (or was consumed)."""
    if _capsule_is_valid(capsule, _VERSIONED):
        return DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, _VERSIONED)), True
    if _capsule_is_valid(capsule, _LEGACY):
        return DLManagedTensor.from_address(_capsule_get_pointer(capsule, _LEGACY)), False
    return None


# ---------------------------------------------------------------------------------------------------------------
# Export. The capsule, its C struct and its deleter are numpy's (ndarray.__dlpack__ of an array over the buffer's
# memory), so that the code consumers and the capsule's destructor call is C: a capsule destructor written in
# Python would run with the consumer's exception in flight (numpy's from_dlpack of a dtype it lacks drops the
# capsule with its error set) and lose it. What releases the buffer is the __del__ of that array's base, a
# _SharedMemory: Python runs finalizers with the current exception saved, on any thread, also at exit.
_NUMPY_VERSIONED = np.lib.NumpyVersion(np.__version__) >= "2.1.0"  # ndarray.__dlpack__(max_version=...)
_live_exports: "weakref.WeakSet[_SharedMemory]" = weakref.WeakSet()  # (for tests and debugging)


class _SharedMemory:
    """The memory of an exported PJRT buffer as numpy sees it (the base of the array the capsule holds): shared
    by Buffer.share_memory (pinned, external reference count raised) until this object dies, when the consumer
    calls the capsule's deleter (or an unconsumed capsule is dropped)."""
    __slots__ = ("buffer", "handle", "counted", "__array_interface__", "__weakref__")

    def __init__(self, buffer: _pjrt.Buffer, read_only: bool):
        self.buffer = None
        self.handle, address, self.counted = buffer.share_memory("__dlpack__")
        self.buffer = buffer
        dtype = buffer.dtype
        typestr = f"<u{dtype.itemsize}" if dtype.kind == "V" else dtype.str  # (bfloat16: its bits)
        self.__array_interface__ = {"shape": buffer.shape, "typestr": typestr, "version": 3,
                                    "data": (address, read_only)}

    def __del__(self) -> None:
        buffer, self.buffer = self.buffer, None
        if buffer is not None:
            try:
                buffer.unshare_memory(self.handle, self.counted)
            except BaseException:  # noqa: BLE001 - a finalizer never raises (module globals may be gone at exit)
                pass


def dlpack_device(array: Any) -> tuple[int, int]:
    """Array.__dlpack_device__: (kDLCPU, 0) for arrays of a CPU plugin (all of whose devices share the host's
    memory); (kDLCUDA or kDLROCM, the device id) for a GPU plugin's."""
    client = array._buffer.client
    if client.host_memory:
        return (kDLCPU, 0)
    kind = _PLATFORM_DL_DEVICE.get(client.platform_name.lower())
    if kind is None:
        raise BufferError(f"__dlpack_device__: ember arrays of the {client.platform_name} platform have no DLPack "
                          "device type")
    return (kind, array._buffer.device.id)


def _check_copy(copy: Any, who: str) -> None:
    if copy is not None and type(copy) is not bool:
        raise ValueError(f"{who}: copy must be True, False or None, got {copy!r}")


def to_dlpack(array: Any, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
              copy: bool | None = None) -> Any:
    """Array.__dlpack__: a DLPack capsule of an Array (see the module's docstring)."""
    _check_copy(copy, "__dlpack__")
    buffer = array.buffer  # (raises when deleted)
    if buffer.dtype not in _DL_TYPES:  # (JAX's narrow types: before any memory is shared)
        raise TypeError(f"__dlpack__: ember exports no DLPack type for dtype {buffer.dtype.name} (is_supported_dtype "
                        "is False for it, as in jax.dlpack); convert the array first, e.g. x.astype('float32')")
    own_device = dlpack_device(array)
    if stream is not None and own_device[0] == kDLCPU:
        raise BufferError(f"__dlpack__: stream must be None for a CPU array (there are no streams), got {stream!r}")
    versioned = max_version is not None and tuple(max_version)[0] >= DLPACK_VERSION[0] and _NUMPY_VERSIONED
    if dl_device is not None:
        dl_device = tuple(int(v) for v in dl_device)
    host_copy = bool(copy)
    if dl_device is not None and dl_device != own_device:
        if dl_device[0] != kDLCPU or copy is False:
            raise BufferError(f"__dlpack__: cannot export an array on DLPack device {own_device} to "
                              f"{dl_device}" + (" without a copy (copy=False)" if dl_device[0] == kDLCPU else ""))
        host_copy = True
    if not host_copy and own_device[0] != kDLCPU:
        raise BufferError(f"__dlpack__: exporting the memory of a {buffer.client.platform_name} array is not "
                          "supported; ask for a host copy with dl_device=(1, 0) (kDLCPU)")
    flags = 0
    if host_copy:
        host = buffer.to_numpy()
        flags = DLPACK_FLAG_BITMASK_IS_COPIED
    elif 0 in buffer.shape:  # nothing to share: an empty host array (no data is copied)
        host = np.empty(buffer.shape, buffer.dtype)
        host.flags.writeable = not versioned
    else:
        # Read-only where DLPack can say so (numpy refuses to export a read-only array in a legacy capsule).
        host = np.asarray(_SharedMemory(buffer, read_only=versioned))
        _live_exports.add(host.base)
    if host.dtype.kind == "V":  # bfloat16: numpy exports its bits as uint16, retyped below
        host = host.view(f"u{host.dtype.itemsize}")
    capsule = host.__dlpack__(max_version=DLPACK_VERSION) if versioned else host.__dlpack__()
    managed, _ = _managed_tensor(capsule)  # (ours until a consumer takes it)
    dl_code, bits = _DL_TYPES[buffer.dtype]
    managed.dl_tensor.dtype.code, managed.dl_tensor.dtype.bits = dl_code, bits
    if versioned:
        managed.flags |= flags
    return capsule


def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


# ---------------------------------------------------------------------------------------------------------------
# Import: the producers' tensors our views hold, by the key given to PJRT as on_delete's argument.
def _import_callback() -> tuple[dict[int, tuple[int, int]], Any]:
    """The registry of imported tensors (key -> (managed tensor address, its deleter's address)) and PJRT's
    on_delete callback of our views, which calls the producer's deleter. It reads no module global (they may be
    gone when it runs, at interpreter exit)."""
    imports: dict[int, tuple[int, int]] = {}
    foreign_deleter = _FOREIGN_DELETER

    def on_delete(_address: int | None, key: int | None) -> None:
        try:
            entry = imports.pop(key, None)
            if entry is not None and entry[1]:
                foreign_deleter(entry[1])(entry[0])
        except BaseException:  # noqa: BLE001 - a C callback never raises
            pass

    return imports, ON_DELETE_CALLBACK(on_delete)


_imports, _on_delete = _import_callback()
_import_keys = itertools.count(1)

# The callback that PJRT calls and the capsule names live as long as the process: they are never freed, not even
# at interpreter exit (PJRT may call back, and renamed capsules keep pointing at the names, until the end).
_py_incref((_on_delete, _NAME_BUFFERS, _imports))


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An ember Array from an object with __dlpack__ (a numpy array, a torch CPU tensor, a JAX or ember array;
    also a DLPack capsule), as the array API standard's from_dlpack (2023.12).

    No copy (the Array is a view of the producer's memory, which stays alive until the Array's buffer is gone)
    when the data is on the CPU, dense row-major and 64-byte aligned, and copy is not True; otherwise the data is
    copied, unless copy=False, which raises BufferError. A view sees later writes the producer makes to its
    memory: ember assumes it is not modified. device: an ember device (by default the first CPU device).
    Dtypes ember lacks (complex, float8, ...) raise TypeError."""
    _check_copy(copy, "from_dlpack")
    target = x.device if type(x) is Array and device is None else _target_device(device)
    if type(x) is Array:  # ours already: no capsule needed
        if x.device is target:
            return x.copy() if copy else x
        if copy is False:
            raise BufferError(f"from_dlpack: moving an array from {x.device} to {target} needs a copy (copy=False)")
        return device_put(x, target)
    if _is_capsule(x):
        capsule = x
    else:
        capsule = _capsule_of(x, copy)
    return _import(capsule, target, copy)


def _target_device(device: Any) -> _pjrt.Device:
    if device is None:
        client = get_client()
        return client.devices[0] if client.host_memory else get_client("cpu").devices[0]
    if isinstance(device, _pjrt.Device):
        return device
    if isinstance(device, str) and device == "cpu":
        return get_client("cpu").devices[0]
    raise TypeError(f"from_dlpack: device must be an ember device (from ember.devices()) or None, got {device!r}")


def _is_capsule(x: Any) -> bool:
    return type(x).__name__ == "PyCapsule" and type(x).__module__ == "builtins"


def _capsule_of(x: Any, copy: bool | None) -> Any:
    export = getattr(x, "__dlpack__", None)
    if export is None:
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ (a numpy array, a torch tensor, a JAX or "
                        f"ember array) or a DLPack capsule, got {type(x).__name__}")
    kwargs: dict[str, Any] = {"max_version": DLPACK_VERSION}
    get_device = getattr(x, "__dlpack_device__", None)
    if get_device is not None:
        source = tuple(get_device())
        if source[0] != kDLCPU:
            if copy is False:
                raise BufferError(f"from_dlpack: the array is on DLPack device {_device_name(source)}; moving it "
                                  "to the CPU needs a copy (copy=False)")
            kwargs["dl_device"] = (kDLCPU, 0)
    if copy is False:
        kwargs["copy"] = False  # (a producer that would have to copy raises)
    # Producers of older versions of the standard take fewer keywords: ask again without the newer ones.
    try:
        return export(**kwargs)
    except TypeError:
        if "copy" not in kwargs and "dl_device" not in kwargs:
            return export()
    del kwargs["max_version"]
    try:
        return export(**kwargs)
    except TypeError:
        return export()


def _device_name(device: tuple[int, int]) -> str:
    return f"{_DL_DEVICE_NAMES.get(device[0], f'type {device[0]}')} {device[1]}"


def _import(capsule: Any, target: _pjrt.Device, copy: bool | None) -> Any:
    found = _managed_tensor(capsule)
    if found is None:
        raise ValueError("from_dlpack: not a DLPack capsule, or one already consumed (a capsule can be used once)")
    managed, versioned = found
    if versioned and managed.version.major != DLPACK_VERSION[0]:  # (unconsumed: its destructor frees it)
        raise BufferError(f"from_dlpack: DLPack version {managed.version.major}.{managed.version.minor} is not "
                          f"supported (ember reads {DLPACK_VERSION[0]}.x)")
    tensor = managed.dl_tensor
    device = (tensor.device.device_type, tensor.device.device_id)
    if device[0] != kDLCPU:
        raise BufferError(f"from_dlpack: the tensor is on DLPack device {_device_name(device)}; ember reads CPU "
                          "tensors only")
    dtype = _DTYPES_OF_DL.get((tensor.dtype.code, tensor.dtype.bits)) if tensor.dtype.lanes == 1 else None
    if dtype is None:
        raise TypeError(f"from_dlpack: DLPack dtype {_dl_dtype_name(tensor.dtype)} is not supported by ember; "
                        "supported: " + ", ".join(d.name for d in _DL_TYPES))
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    strides = tuple(tensor.strides[i] for i in range(ndim)) if ndim and tensor.strides else None
    address = (tensor.data or 0) + tensor.byte_offset
    size = math.prod(shape)
    dense = strides is None or all(s == e for s, e, n in zip(strides, _row_major_strides(shape), shape) if n != 1)
    client = target.client
    reason = None
    narrowed = dt.canonical_dtype(dtype)  # (float64 is float32 without enable_x64, as JAX's from_dlpack)
    if size == 0:  # no data: an empty buffer (nothing is copied, so copy=False is no obstacle)
        pass
    elif narrowed != dtype:
        reason = f"its dtype {dtype.name} becomes {narrowed.name} (64-bit dtypes are off: enable_x64)"
    elif copy:
        reason = "copy=True"
    elif not dense:
        reason = f"its strides {strides} (in elements) are not dense row-major for shape {shape}"
    elif address % ALIGNMENT:
        reason = f"its data at {address:#x} is not {ALIGNMENT}-byte aligned (the CPU plugin's requirement)"
    elif not client.can_view_memory:
        reason = f"the {client.platform_name} backend cannot wrap host memory"
    else:
        key = next(_import_keys)
        _imports[key] = (ctypes.addressof(managed), managed.deleter or 0)
        try:
            buffer = client.view_of_memory(address, shape, dtype, target, _on_delete, key)
        except PjrtError as err:  # (PJRT calls nothing back then)
            _imports.pop(key, None)
            reason = f"PJRT could not wrap it ({err})"
        else:  # consumed: the producer's deleter is ours to call (on_delete), not its capsule's destructor
            _capsule_set_name(capsule, _NAMES["used_dltensor_versioned" if versioned else "used_dltensor"])
            return _new_array(buffer, dtype)
    if copy is False and size:
        raise BufferError(f"from_dlpack: the tensor cannot be used without a copy (copy=False): {reason}")
    # A copy, made while the capsule (unconsumed: its destructor would free the tensor) holds the producer's
    # memory; then the capsule is consumed (a capsule is used once) and the tensor freed.
    itemsize = dtype.itemsize
    raw = np.dtype(f"u{itemsize}") if dtype.kind == "V" else dtype  # (bfloat16 has no array-interface code)
    view = np.asarray(_Memory(address, shape, None if strides is None else tuple(s * itemsize for s in strides),
                              raw.str)).view(dtype) if size else np.empty(shape, dtype)
    if narrowed != dtype:
        view = view.astype(narrowed)
    array = _new_array(client.buffer_from_numpy(view, target), narrowed)
    del view
    _capsule_set_name(capsule, _NAMES["used_dltensor_versioned" if versioned else "used_dltensor"])
    if managed.deleter:
        _FOREIGN_DELETER(managed.deleter)(ctypes.addressof(managed))
    return array


class _Memory:
    """Foreign memory as numpy sees it (read-only)."""

    def __init__(self, address: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, typestr: str):
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "version": 3, "strides": strides,
                                    "data": (address, True)}


def _new_array(buffer: _pjrt.Buffer, dtype: np.dtype) -> Any:
    """An imported array: committed to its device (as JAX's from_dlpack)."""
    return Array._from_buffer(buffer, canonical_aval(ShapedArray(buffer.shape, dtype, False)), None, True)


def _array_dlpack(self: Any, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                  dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
    """A DLPack capsule of this array's memory (no copy on the CPU; read-only), as the array API standard's
    __dlpack__ (2023.12): np.from_dlpack(x), torch.from_dlpack(x), jax.dlpack.from_dlpack(x). See
    docs/dlpack.md."""
    return to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def _array_dlpack_device(self: Any) -> tuple[int, int]:
    """(kDLCPU, 0) = (1, 0) for arrays of the CPU backend."""
    return dlpack_device(self)


# Array's DLPack protocol, installed here (the module comes after array.py; ember._runtime imports it)
Array.__dlpack__ = _array_dlpack  # type: ignore[attr-defined]
Array.__dlpack_device__ = _array_dlpack_device  # type: ignore[attr-defined]
