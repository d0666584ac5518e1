"""A ctypes binding to the PJRT C API: plugin, client, devices, buffers, compile, execute.

Struct layouts and the order of the function pointers in PJRT_Api follow pjrt_c_api.h (API 0.81) of the
xla-cpu-pjrt wheel. Every argument struct starts with its own size, which lets newer plugins accept it.
Every PJRT error becomes a PjrtError that names the failing call.

One module per PJRT object; imports point one way: errors and structs (the C side) <- plugin, device, buffer
<- executable <- client, with discovery (finding plugin files) on its own. The binding imports nothing from
the rest of ember but ember._runtime.fastpath (which picks the C extension of the hot path, or pure Python).
"""
from ember._runtime.pjrt.buffer import Buffer as Buffer
from ember._runtime.pjrt.client import Client as Client
from ember._runtime.pjrt.device import Device as Device
from ember._runtime.pjrt.discovery import cpu_plugin_path as cpu_plugin_path
from ember._runtime.pjrt.discovery import default_plugin_path as default_plugin_path
from ember._runtime.pjrt.discovery import find_cuda_plugin as find_cuda_plugin
from ember._runtime.pjrt.errors import PjrtError as PjrtError, PjrtOutOfMemoryError as PjrtOutOfMemoryError
from ember._runtime.pjrt.executable import Executable as Executable
from ember._runtime.pjrt.plugin import Plugin as Plugin
from ember._runtime.pjrt.spmd import SpmdExecutable as SpmdExecutable
from ember._runtime.pjrt.structs import COMPILE_OPTIONS as COMPILE_OPTIONS
from ember._runtime.pjrt.structs import numpy_dtype_to_pjrt as numpy_dtype_to_pjrt
