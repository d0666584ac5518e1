"""The C side of the PJRT API in ctypes: argument structs, enum values, compile options, memory helpers.

Struct layouts follow pjrt_c_api.h (API 0.81) of the xla-cpu-pjrt wheel; every argument struct starts with its
own size, which lets newer plugins accept it. Also here: the PJRT_Buffer_Type table behind numpy_dtype_to_pjrt,
the serialized compile options, and the helpers that read a C string and find the address of a numpy array's
data. Nothing here calls into a plugin."""
from __future__ import annotations

import ctypes
import struct
from struct import Struct
from typing import Any

import ml_dtypes
import numpy as np

c_size_t, c_void_p, c_char_p, c_int, c_int64 = (ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                                ctypes.c_int64)
_POINTER_TO_VOID_P = ctypes.POINTER(c_void_p)


# Element types: enum PJRT_Buffer_Type
_PJRT_BUFFER_TYPES: dict[np.dtype, int] = {
    np.dtype(np.bool_): 1,  # PRED
    np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4, np.dtype(np.int64): 5,
    np.dtype(np.uint8): 6, np.dtype(np.uint16): 7, np.dtype(np.uint32): 8, np.dtype(np.uint64): 9,
    np.dtype(np.float16): 10, np.dtype(np.float32): 11, np.dtype(np.float64): 12,
    np.dtype(ml_dtypes.bfloat16): 13,
    np.dtype(np.complex64): 14, np.dtype(np.complex128): 15,
    np.dtype(ml_dtypes.float8_e5m2): 16, np.dtype(ml_dtypes.float8_e4m3fn): 17,
    np.dtype(ml_dtypes.float8_e4m3b11fnuz): 18, np.dtype(ml_dtypes.float8_e5m2fnuz): 19,
    np.dtype(ml_dtypes.float8_e4m3fnuz): 20,
    np.dtype(ml_dtypes.int4): 21, np.dtype(ml_dtypes.uint4): 22,  # (23 is TOKEN)
    np.dtype(ml_dtypes.int2): 24, np.dtype(ml_dtypes.uint2): 25,
    np.dtype(ml_dtypes.float8_e4m3): 26, np.dtype(ml_dtypes.float8_e3m4): 27, np.dtype(ml_dtypes.float8_e8m0fnu): 28,
    np.dtype(ml_dtypes.float4_e2m1fn): 29,
}

# The 4- and 2-bit types: numpy holds one element per byte, the CPU plugin packs them in its buffers (two or four
# to a byte; measured): uploads and PJRT_Buffer_ToHostBuffer convert, but a buffer's memory is not a numpy array's.
PACKED_ON_DEVICE: frozenset[np.dtype] = frozenset(
    np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2, ml_dtypes.float4_e2m1fn))

# enum PJRT_HostBufferSemantics: the host data is copied before PJRT_Client_BufferFromHostBuffer returns.
_IMMUTABLE_ONLY_DURING_CALL = 0

# A serialized xla.CompileOptionsProto: executable_build_options {num_replicas: 1, num_partitions: 1}.
# Empty options abort the CPU plugin: never send them. The portable variant adds compile_portable_executable:
# true, for an executable that runs on any device its call names (executing it costs a few microseconds more).
COMPILE_OPTIONS = b"\x1a\x04\x20\x01\x28\x01"
_PORTABLE_COMPILE_OPTIONS = COMPILE_OPTIONS + b"\x20\x01"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    """One protobuf field: a varint, or a length-delimited payload (bytes)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def option_overrides(options: dict[str, Any]) -> bytes:
    """XLA options for one compile (jit(f).lower(...).compile(compiler_options=...)) as the fields to append to a
    serialized xla.CompileOptionsProto: env_option_overrides (7), a map from the option's name to an
    OptionOverrideProto {string_field (1), bool_field (2), int_field (3), double_field (4)}; in the order of the
    names, so equal options give equal bytes. The plugin refuses an option it does not know at compile time."""
    out = b""
    for name in sorted(options):
        value = options[name]
        if isinstance(value, bool):
            field = _field(2, int(value))
        elif isinstance(value, int):
            field = _field(3, value & 0xFFFFFFFFFFFFFFFF)
        elif isinstance(value, float):
            field = _varint(4 << 3 | 1) + struct.pack("<d", value)
        elif isinstance(value, str):
            field = _field(1, value.encode())
        else:
            raise TypeError(f"compiler_options: the value of {name!r} must be a bool, int, float or str, got "
                            f"{type(value).__name__}")
        out += _field(7, _field(1, str(name).encode()) + _field(2, field))
    return out


def spmd_compile_options(device_ids: list[int], propagate_to_outputs: list[bool]) -> bytes:
    """A serialized xla.CompileOptionsProto for a program partitioned by XLA's SPMD partitioner over the devices
    with these ids (partition i runs on device_ids[i]): executable_build_options {num_replicas: 1 (4),
    num_partitions (5), use_spmd_partitioning (6), device_assignment (9) {replica_count (1), computation_count
    (2), computation_devices (3) {replica_device_ids (1)} per partition}, allow_spmd_sharding_propagation_to_output
    (12, packed bools: per output, whether XLA chooses its sharding)} (field numbers as jaxlib serializes them)."""
    assignment = _field(1, 1) + _field(2, len(device_ids)) + b"".join(
        _field(3, _field(1, int(i))) for i in device_ids)
    build = (_field(4, 1) + _field(5, len(device_ids)) + _field(6, 1) + _field(9, assignment)
             + _field(12, bytes(int(bool(p)) for p in propagate_to_outputs or [False])))
    return _field(3, build)


def one_device_compile_options(device_id: int) -> bytes:
    """A serialized xla.CompileOptionsProto for a program on the one device with this id: executable_build_options
    {num_replicas: 1 (4), num_partitions: 1 (5), device_assignment (9) {replica_count 1, computation_count 1,
    computation_devices {replica_device_ids: device_id}}} (an executable compiled for that device runs there at
    full speed; a portable one given an execute_device costs about 3x per call)."""
    assignment = _field(1, 1) + _field(2, 1) + _field(3, _field(1, int(device_id)))
    return _field(3, _field(4, 1) + _field(5, 1) + _field(9, assignment))


def numpy_dtype_to_pjrt(dtype: Any) -> int:
    """The PJRT_Buffer_Type of a numpy dtype."""
    try:
        dtype = np.dtype(dtype)
        return _PJRT_BUFFER_TYPES[dtype]
    except (KeyError, TypeError):
        supported = ", ".join(d.name for d in _PJRT_BUFFER_TYPES)
        raise TypeError(f"dtype {dtype!r} has no PJRT buffer type; supported dtypes: {supported}") from None


# Argument structs. Each begins with struct_size and extension_start; field order follows pjrt_c_api.h.
class _Args(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p)]


_STRUCTS: dict[str, Any] = {}  # every argument struct below, by name


def _args_type(name: str, fields: list[tuple[str, Any]]) -> Any:
    cls = type(name, (_Args,), {"_fields_": fields})
    cls.SIZE = ctypes.sizeof(cls)
    _STRUCTS[name] = cls
    return cls


def _new(cls: Any, **values: Any) -> Any:
    return cls(struct_size=cls.SIZE, **values)


_ApiVersion = _args_type("PJRT_Api_Version", [("major_version", c_int), ("minor_version", c_int)])
_ApiHeader = _args_type("PJRT_Api_Header", [("pjrt_api_version", _ApiVersion)])  # the function pointers follow

_ErrorMessageArgs = _args_type("PJRT_Error_Message_Args", [
    ("error", c_void_p), ("message", c_void_p), ("message_size", c_size_t)])
_ErrorGetCodeArgs = _args_type("PJRT_Error_GetCode_Args", [("error", c_void_p), ("code", c_int)])
_PluginInitializeArgs = _args_type("PJRT_Plugin_Initialize_Args", [])


class _NamedValueUnion(ctypes.Union):
    _fields_ = [("string_value", c_void_p), ("int64_value", c_int64), ("int64_array_value", c_void_p),
                ("float_value", ctypes.c_float), ("bool_value", ctypes.c_bool)]


# PJRT_NamedValue: a named option (enum PJRT_NamedValue_Type: 0 string, 1 int64, 2 int64 list, 3 float, 4 bool)
_NamedValue = _args_type("PJRT_NamedValue", [
    ("name", c_void_p), ("name_size", c_size_t), ("type", c_int), ("value", _NamedValueUnion),
    ("value_size", c_size_t)])
_NAMED_VALUE_INT64 = 1


def named_int64_values(options: dict[str, int]) -> tuple[Any, list[bytes]]:
    """A PJRT_NamedValue array of int64 options, and the encoded names it points into (keep both alive)."""
    names = [name.encode() for name in options]
    values = (_NamedValue * max(len(options), 1))()
    for value, name, number in zip(values, names, options.values()):
        value.struct_size = _NamedValue.SIZE
        value.name = ctypes.cast(ctypes.c_char_p(name), c_void_p)
        value.name_size = len(name)
        value.type = _NAMED_VALUE_INT64
        value.value.int64_value = int(number)
        value.value_size = 1
    return values, names
_ClientCreateArgs = _args_type("PJRT_Client_Create_Args", [
    ("create_options", c_void_p), ("num_options", c_size_t),
    ("kv_get_callback", c_void_p), ("kv_get_user_arg", c_void_p),
    ("kv_put_callback", c_void_p), ("kv_put_user_arg", c_void_p),
    ("client", c_void_p),
    ("kv_try_get_callback", c_void_p), ("kv_try_get_user_arg", c_void_p)])
_ClientPlatformNameArgs = _args_type("PJRT_Client_PlatformName_Args", [
    ("client", c_void_p), ("platform_name", c_void_p), ("platform_name_size", c_size_t)])
_ClientAddressableDevicesArgs = _args_type("PJRT_Client_AddressableDevices_Args", [
    ("client", c_void_p), ("addressable_devices", _POINTER_TO_VOID_P), ("num_addressable_devices", c_size_t)])
_Program = _args_type("PJRT_Program", [
    ("code", c_char_p), ("code_size", c_size_t), ("format", c_char_p), ("format_size", c_size_t)])
_ClientCompileArgs = _args_type("PJRT_Client_Compile_Args", [
    ("client", c_void_p), ("program", ctypes.POINTER(_Program)),
    ("compile_options", c_char_p), ("compile_options_size", c_size_t), ("executable", c_void_p)])
_ClientBufferFromHostBufferArgs = _args_type("PJRT_Client_BufferFromHostBuffer_Args", [
    ("client", c_void_p), ("data", c_void_p), ("type", c_int),
    ("dims", ctypes.POINTER(c_int64)), ("num_dims", c_size_t),
    ("byte_strides", ctypes.POINTER(c_int64)), ("num_byte_strides", c_size_t),
    ("host_buffer_semantics", c_int), ("device", c_void_p), ("memory", c_void_p), ("device_layout", c_void_p),
    ("done_with_host_buffer", c_void_p), ("buffer", c_void_p)])
_DeviceGetDescriptionArgs = _args_type("PJRT_Device_GetDescription_Args", [
    ("device", c_void_p), ("device_description", c_void_p)])
_DeviceDescriptionIdArgs = _args_type("PJRT_DeviceDescription_Id_Args", [
    ("device_description", c_void_p), ("id", c_int)])
_DeviceDescriptionProcessIndexArgs = _args_type("PJRT_DeviceDescription_ProcessIndex_Args", [
    ("device_description", c_void_p), ("process_index", c_int)])
_DeviceDescriptionKindArgs = _args_type("PJRT_DeviceDescription_Kind_Args", [
    ("device_description", c_void_p), ("device_kind", c_void_p), ("device_kind_size", c_size_t)])
_LoadedExecutableGetExecutableArgs = _args_type("PJRT_LoadedExecutable_GetExecutable_Args", [
    ("loaded_executable", c_void_p), ("executable", c_void_p)])
_LoadedExecutableAddressableDevicesArgs = _args_type("PJRT_LoadedExecutable_AddressableDevices_Args", [
    ("executable", c_void_p), ("addressable_devices", _POINTER_TO_VOID_P), ("num_addressable_devices", c_size_t)])
_ExecutableNumOutputsArgs = _args_type("PJRT_Executable_NumOutputs_Args", [
    ("executable", c_void_p), ("num_outputs", c_size_t)])
_ExecutableOptimizedProgramArgs = _args_type("PJRT_Executable_OptimizedProgram_Args", [
    ("executable", c_void_p), ("program", ctypes.POINTER(_Program))])
_ExecutableGetCostAnalysisArgs = _args_type("PJRT_Executable_GetCostAnalysis_Args", [
    ("executable", c_void_p), ("num_properties", c_size_t), ("properties", ctypes.POINTER(_NamedValue))])
MEMORY_STATS = ("generated_code_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
                "alias_size_in_bytes", "temp_size_in_bytes", "host_generated_code_size_in_bytes",
                "host_argument_size_in_bytes", "host_output_size_in_bytes", "host_alias_size_in_bytes",
                "host_temp_size_in_bytes", "peak_memory_in_bytes")
_ExecutableGetCompiledMemoryStatsArgs = _args_type("PJRT_Executable_GetCompiledMemoryStats_Args", [
    ("executable", c_void_p)] + [(name, c_int64) for name in MEMORY_STATS])
# void (*serialized_executable_deleter)(PJRT_SerializedExecutable*) of PJRT_Executable_Serialize_Args
SERIALIZED_DELETER = ctypes.CFUNCTYPE(None, c_void_p)
_ExecutableSerializeArgs = _args_type("PJRT_Executable_Serialize_Args", [
    ("executable", c_void_p), ("serialized_bytes", c_void_p), ("serialized_bytes_size", c_size_t),
    ("serialized_executable", c_void_p), ("serialized_executable_deleter", SERIALIZED_DELETER)])
_ExecutableDeserializeAndLoadArgs = _args_type("PJRT_Executable_DeserializeAndLoad_Args", [
    ("client", c_void_p), ("serialized_executable", c_char_p), ("serialized_executable_size", c_size_t),
    ("loaded_executable", c_void_p), ("overridden_serialized_compile_options", c_char_p),
    ("overridden_serialized_compile_options_size", c_size_t)])
_ExecuteOptions = _args_type("PJRT_ExecuteOptions", [
    ("send_callbacks", c_void_p), ("recv_callbacks", c_void_p), ("num_send_ops", c_size_t),
    ("num_recv_ops", c_size_t), ("launch_id", c_int),
    ("non_donatable_input_indices", c_void_p), ("num_non_donatable_input_indices", c_size_t),
    ("context", c_void_p), ("call_location", c_char_p),
    ("num_tasks", c_size_t), ("task_ids", c_void_p), ("incarnation_ids", c_void_p)])
_LoadedExecutableExecuteArgs = _args_type("PJRT_LoadedExecutable_Execute_Args", [
    ("executable", c_void_p), ("options", ctypes.POINTER(_ExecuteOptions)),
    ("argument_lists", ctypes.POINTER(_POINTER_TO_VOID_P)), ("num_devices", c_size_t), ("num_args", c_size_t),
    ("output_lists", ctypes.POINTER(_POINTER_TO_VOID_P)), ("device_complete_events", c_void_p),
    ("execute_device", c_void_p)])
_BufferToHostBufferArgs = _args_type("PJRT_Buffer_ToHostBuffer_Args", [
    ("src", c_void_p), ("host_layout", c_void_p), ("dst", c_void_p), ("dst_size", c_size_t), ("event", c_void_p)])
_BufferUnsafePointerArgs = _args_type("PJRT_Buffer_UnsafePointer_Args", [
    ("buffer", c_void_p), ("buffer_pointer", c_size_t)])
_BufferReadyEventArgs = _args_type("PJRT_Buffer_ReadyEvent_Args", [("buffer", c_void_p), ("event", c_void_p)])
# PJRT_Buffer_IncreaseExternalReferenceCount_Args and PJRT_Buffer_DecreaseExternalReferenceCount_Args
_BufferExternalReferenceArgs = _args_type("PJRT_Buffer_ExternalReferenceCount_Args", [("buffer", c_void_p)])
_BufferOpaqueDeviceMemoryDataPointerArgs = _args_type("PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args", [
    ("buffer", c_void_p), ("device_memory_ptr", c_void_p)])
# void (*on_delete_callback)(void* device_buffer_ptr, void* user_arg) of PJRT_Client_CreateViewOfDeviceBuffer
ON_DELETE_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
_ClientCreateViewOfDeviceBufferArgs = _args_type("PJRT_Client_CreateViewOfDeviceBuffer_Args", [
    ("client", c_void_p), ("device_buffer_ptr", c_void_p), ("dims", ctypes.POINTER(c_int64)), ("num_dims", c_size_t),
    ("element_type", c_int), ("layout", c_void_p), ("device", c_void_p), ("on_delete_callback", ON_DELETE_CALLBACK),
    ("on_delete_callback_arg", c_void_p), ("stream", ctypes.c_ssize_t), ("buffer", c_void_p), ("memory", c_void_p)])

_EventIsReadyArgs = _args_type("PJRT_Event_IsReady_Args", [("event", c_void_p), ("is_ready", ctypes.c_bool)])
# void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg): the callback owns the error
ON_READY_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
_EventOnReadyArgs = _args_type("PJRT_Event_OnReady_Args", [
    ("event", c_void_p), ("callback", ON_READY_CALLBACK), ("user_arg", c_void_p)])

# The many calls whose args are {struct_size, extension_start, one handle} and that only read them (the
# *_Destroy calls, PJRT_Event_Await) get those args packed into a bytes object, which is cheaper to build.
_HandleArgs = _args_type("PJRT_Handle_Args", [("handle", c_void_p)])
_HANDLE_ARGS = Struct("NPP")
assert _HANDLE_ARGS.size == _HandleArgs.SIZE


def _handle_args(handle: int) -> bytes:
    return _HANDLE_ARGS.pack(_HandleArgs.SIZE, 0, handle)


def _string_at(address: int | None, size: int) -> str:
    return ctypes.string_at(address, size).decode("utf-8", "replace") if address else ""


def _data_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's data (array.ctypes.data is several times slower)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, zero-size, or a dtype numpy cannot export (bfloat16)
        return array.__array_interface__["data"][0]


Layout = tuple[int, tuple[tuple[str, int], ...]]  # a struct's size and its (field, offset) pairs


def struct_layout(name: str) -> Layout:
    """The layout of an argument struct declared here (its header fields first)."""
    cls = _STRUCTS[name]
    fields = [field for base in reversed(cls.__mro__) for field, _ in getattr(base, "_fields_", [])
              if base is cls or base is _Args]
    return ctypes.sizeof(cls), tuple((field, getattr(cls, field).offset) for field in fields)


def check_struct_layouts(layouts: dict[str, Layout], where: str) -> None:
    """Check the struct layouts that another declaration of them reports (the C extension's) against the ctypes
    declarations here, the reference: a RuntimeError lists every difference."""
    problems = []
    for name, layout in sorted(layouts.items()):
        if name not in _STRUCTS:
            problems.append(f"{name} is not declared in pjrt/structs.py")
        elif layout != struct_layout(name):
            problems.append(f"{name}: {where} has (size, fields) {layout}, pjrt/structs.py {struct_layout(name)}")
    if problems:
        raise RuntimeError(f"{where} declares PJRT structs unlike pjrt/structs.py (fix the C declarations and "
                           "rebuild: python3 setup.py build_ext --inplace):\n  " + "\n  ".join(problems))
