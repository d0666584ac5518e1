"""Runtime: the PJRT client, compiling IR to executables, running them on Arrays, and eager primitives."""
from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Any, Sequence

import numpy as np

from ember import _pjrt
from ember._core import Primitive, Tracer, UnexpectedTracerError, set_eager_handler
from ember._dtypes import ShapedArray, aval_of_value, canonicalize_dtype
from ember._ir import IR, Eqn, Literal, Var
from ember._lowering import lower


class CompileError(RuntimeError):
    """XLA rejected a lowered module; the message holds XLA's diagnostics and the module text."""


_client_lock = threading.Lock()
_clients: dict[str, _pjrt.Client] = {}  # one per plugin


def _plugin_path(platform: str | None) -> str:
    platform = (platform or os.environ.get("EMBER_PLATFORM") or "").lower() or None
    if platform is None:
        if os.environ.get("EMBER_PJRT_PLUGIN"):
            return _pjrt.default_plugin_path()
        return _pjrt.find_cuda_plugin() or _pjrt.default_plugin_path()
    if platform == "cpu":
        return _pjrt.cpu_plugin_path()
    if platform in ("cuda", "gpu"):
        cuda = _pjrt.find_cuda_plugin()
        if cuda is None:
            raise RuntimeError("no CUDA PJRT plugin is installed (pip install jax-cuda12-pjrt, or set "
                               "EMBER_PJRT_PLUGIN to a plugin .so)")
        return cuda
    raise ValueError(f"unknown platform {platform!r}; known platforms: cpu, cuda")


def get_client(platform: str | None = None) -> _pjrt.Client:
    """The PJRT client of a platform ("cpu", "cuda"); by default the plugin named by EMBER_PJRT_PLUGIN, else an
    installed CUDA plugin, else the embedded XLA CPU plugin (EMBER_PLATFORM=cpu|cuda picks the default)."""
    path = _plugin_path(platform) if platform or not _clients else None
    if path is None:
        return _clients["default"]
    try:
        client = _client_for(path)
    except _pjrt.PjrtError as err:
        auto_cuda = platform is None and not os.environ.get("EMBER_PLATFORM") and \
            not os.environ.get("EMBER_PJRT_PLUGIN")
        if not auto_cuda:
            raise
        warnings.warn(f"ember: the CUDA PJRT plugin {path} could not start ({err}); using the CPU plugin",
                      RuntimeWarning, stacklevel=2)
        client = _client_for(_pjrt.cpu_plugin_path())
    if platform is None:
        _clients["default"] = client
    return client


def _client_for(path: str) -> _pjrt.Client:
    client = _clients.get(path)
    if client is None:
        with _client_lock:
            client = _clients.get(path)
            if client is None:
                client = _clients[path] = _pjrt.Client(_pjrt.Plugin(path))
    return client


def default_device() -> _pjrt.Device:
    return get_client().devices[0]


def devices(platform: str | None = None) -> list[_pjrt.Device]:
    """The addressable devices of a platform (by default, of the default backend)."""
    return list(get_client(platform).devices)


# ---------------------------------------------------------------------------------------------------------------
# Moving values to the device
@functools.lru_cache(maxsize=512)
def _scalar_buffer(kind: type, text: str, dtype: np.dtype, value: Any, device: _pjrt.Device) -> _pjrt.Buffer:
    """Device scalars are immutable, so equal ones are shared (keyed by repr: -0.0 and 0.0 differ)."""
    return device.client.buffer_from_numpy(np.asarray(value, dtype=dtype), device)


def _describe(x: Any) -> str:
    try:
        return aval_of_value(x).str_short()
    except TypeError:
        return type(x).__name__


_ARRAY_TYPE: type = type(None)  # ember.Array, registered by ember._array (which imports this module)


def register_array_type(cls: type) -> None:
    global _ARRAY_TYPE
    _ARRAY_TYPE = cls


def to_buffer(x: Any, expected: ShapedArray, where: str,
              device: _pjrt.Device | None = None) -> _pjrt.Buffer:
    """A buffer on `device` (by default the default device) for argument x, checked against the expected shape
    and dtype. Host values are copied there; an Array must already live there."""
    device = device or default_device()
    if type(x) is _ARRAY_TYPE:
        aval = x.aval
        if aval.shape != expected.shape or aval.dtype != expected.dtype:
            raise TypeError(f"{where}: expected {expected.str_short()}, got {aval.str_short()}")
        if x.device is not device:
            raise ValueError(f"{where}: the array is on {x.device} but the computation runs on {device}, the "
                             "device of its first array argument; device_put it there")
        return x.buffer
    if isinstance(x, Tracer):
        raise UnexpectedTracerError(f"{where}: got a tracer {x!r} outside of the staging that created it")
    if isinstance(x, Literal) or type(x) in (bool, int, float):
        value = x.value if isinstance(x, Literal) else x
        if expected.shape != ():
            raise TypeError(f"{where}: expected {expected.str_short()}, got the scalar {value!r}")
        if (isinstance(value, float) and expected.dtype.kind != "f") or \
                (type(value) is int and expected.dtype.kind == "b"):
            raise TypeError(f"{where}: expected {expected.str_short()}, got the {type(value).__name__} {value!r}")
        return _scalar_buffer(type(value), repr(value), expected.dtype, value, device)
    if isinstance(x, np.ndarray | np.generic):
        try:
            dtype = canonicalize_dtype(x.dtype)
        except TypeError as err:
            raise TypeError(f"{where}: {err}") from None
        if np.shape(x) != expected.shape or dtype != expected.dtype:
            raise TypeError(f"{where}: expected {expected.str_short()}, got {_describe(x)}")
        return device.client.buffer_from_numpy(np.require(x, requirements="C"), device)
    raise TypeError(f"{where}: expected an array {expected.str_short()}, got a value of type {type(x).__name__}")


# ---------------------------------------------------------------------------------------------------------------
class Compiled:
    """An IR compiled by XLA: call it with the IR's inputs (arrays) to run it."""

    def __init__(self, ir: IR, name: str = "main"):
        self.ir = ir
        self.name = name
        self.in_avals = [v.aval for v in ir.in_vars]
        self.out_avals = ir.out_avals
        self.text = lower(ir)
        try:
            self.executable = get_client().compile(self.text)
        except _pjrt.PjrtError as err:
            numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(self.text.splitlines()))
            raise CompileError(f"XLA could not compile {name}: {err}\nStableHLO module:\n{numbered}") from None
        self._out_specs = [(a.shape, a.dtype) for a in self.out_avals]
        self._device = default_device()
        self._consts_by_device = {self._device: self._consts_on(self._device)}
        self._where = [f"{name}: argument {i}" for i in range(len(self.in_avals))]

    def _consts_on(self, device: _pjrt.Device) -> list[_pjrt.Buffer]:
        """The IR's constants as buffers on a device (copied through the host when they live elsewhere)."""
        buffers = []
        for i, (value, var) in enumerate(zip(self.ir.consts, self.ir.const_vars)):
            if type(value) is _ARRAY_TYPE and value.device is not device:
                value = np.asarray(value)
            buffers.append(to_buffer(value, var.aval, f"{self.name}: constant {i}", device))
        return buffers

    def call_flat(self, args: Sequence[Any]) -> list[Any]:
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name}: expected {len(self.in_avals)} arguments "
                            f"({', '.join(a.str_short() for a in self.in_avals)}), got {len(args)}")
        # The computation runs on the device of its first array argument (else the default device).
        device = next((x._buffer.device for x in args if type(x) is _ARRAY_TYPE), self._device)
        consts = self._consts_by_device.get(device)
        if consts is None:
            consts = self._consts_by_device[device] = self._consts_on(device)
        buffers = list(consts)
        for x, aval, where in zip(args, self.in_avals, self._where):
            if type(x) is _ARRAY_TYPE and x.aval.shape == aval.shape and x.aval.dtype == aval.dtype \
                    and x._buffer.device is device:
                buffers.append(x._buffer)  # the common case, checked inline (deleted buffers fail in execute)
            else:
                buffers.append(to_buffer(x, aval, where, device))
        outs = self.executable.execute(buffers, self._out_specs)
        wrap = _ARRAY_TYPE._from_buffer
        return [wrap(b, aval) for b, aval in zip(outs, self.out_avals)]

    def __call__(self, *args: Any) -> Any:
        outs = self.call_flat(args)
        if self.ir.out_tree is not None:
            return self.ir.out_tree.unflatten(outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def as_text(self) -> str:
        """The StableHLO module that was compiled."""
        return self.text

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<Compiled {self.name}: ({ins}) -> ({outs})>"


def compile_ir(ir: IR, name: str = "main") -> Compiled:
    return Compiled(ir, name)


# ---------------------------------------------------------------------------------------------------------------
# Eager primitives: each (primitive, params, argument types) compiles once and is cached.
_eager_cache: dict[Any, Compiled] = {}


def _eager_aval(x: Any, prim: Primitive, i: int) -> ShapedArray:
    aval = getattr(x, "aval", None)
    if aval is not None and not isinstance(x, Tracer):
        return aval
    if isinstance(x, Tracer):
        raise UnexpectedTracerError(f"{prim.name}: operand {i} is a tracer {x!r} used after the staging that "
                                    "created it finished (it leaked out of a jit/grad/stage_out function)")
    try:
        return aval_of_value(x)
    except TypeError:
        raise TypeError(f"{prim.name}: operand {i} of type {type(x).__name__} is not a valid ember array") from None


def _freeze(params: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(params.items()))


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    avals = tuple(_eager_aval(x, prim, i) for i, x in enumerate(args))
    key = (prim, _freeze(params), avals)
    compiled = _eager_cache.get(key)
    if compiled is None:
        out_avals = prim.out_avals(avals, params)
        in_vars = [Var(a) for a in avals]
        out_vars = [Var(a) for a in out_avals]
        ir = IR([], [], in_vars, [Eqn(prim, in_vars, out_vars, params)], out_vars)
        compiled = _eager_cache[key] = Compiled(ir, prim.name)
    return compiled.call_flat(args)


set_eager_handler(apply_primitive)
