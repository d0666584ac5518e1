"""Compiling and running IRs, in separate stages that later features (AOT, a persistent cache) can cache and
expose: staged IR --lower_ir--> Lowered (StableHLO text) --.compile()--> Compiled (an XLA executable) --call-->
Arrays. A Compiled places the IR's constants on a device the first time it runs there."""
from __future__ import annotations

import atexit
import contextlib
import contextvars
import itertools
import os
import re
import threading
import time
import warnings
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from ember._core.shape_poly import PLACEHOLDER_OPEN
from ember._core import IR, ShapedArray, Tracer, eval_ir
from ember._core.ir import NotKeyable, structural_key
from ember._core import dtypes as dt
from ember._core.cache import LRUCache
from ember._core.config import config
from ember._core.sharding import MeshContexts as _MeshContexts, context_mesh
from ember._core.primitive import user_source
from ember._core import monitoring, profile
from ember._hlo import lower
from ember._hlo.lower import DevicesNeeded
from ember._transforms.cache import paused_gc
from ember._transforms.discharge import discharge_ir, has_refs, ref_positions
from ember._runtime.refs import RefCompiled
from ember._runtime import callbacks as _callbacks, pjrt as _pjrt
from ember._runtime.array import Array, Token
from ember._runtime.backends import default_device, get_client
from ember._runtime.compile_cache import compile_with_cache
from ember._runtime.dispatch import argument_text, incompatible_devices, to_buffer
from ember._runtime.fastpath import C
from ember._runtime.guards import DIRECTIONS as _GUARDED, Guards as _Guards, check as _check_transfer
from ember._runtime.spmd import SpmdProgram, program_placement, report_one_device_inspections, sharded_call_plan
from ember._runtime.sharded import ShardedArray


T = TypeVar("T")


_helpers_in_flight: set[threading.Thread] = set()  # helper threads still compiling or executing (an interrupted
# call's too)


def _wait_for_helpers_at_exit() -> None:
    """At exit, let the compiles and executions still running on helper threads finish before the PJRT clients
    are destroyed (backends' exit handler, registered earlier, runs after this one): destroying a client under a
    running compile crashes the process. An execution blocked in a host callback (an interrupted call's) would
    never end: past callbacks.EXIT_WAIT_S the exit goes on, and backends' handler leaves the clients alone."""
    if _callbacks.blocked_at_exit():
        return
    for thread in list(_helpers_in_flight):
        thread.join()


atexit.register(_wait_for_helpers_at_exit)


def interruptible(fn: Callable[[], T], what: str = "compile") -> T:
    """fn() run so that Ctrl-C reaches the main thread at once: a PJRT call (an XLA compile, or a program XLA runs
    inside the execute call, can take minutes) holds no GIL but delays Python's signal handling until it
    returns, so on the main thread fn runs on a helper thread while the main thread waits in short, interruptible
    steps. An interrupted fn finishes in the background and its result is dropped; the process stays usable."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    done = threading.Event()
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, err))
        finally:
            _helpers_in_flight.discard(thread)
            done.set()

    thread = threading.Thread(target=work, name=f"ember-{what}", daemon=True)
    _helpers_in_flight.add(thread)
    thread.start()
    while not done.wait(0.25):
        pass
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _may_run_long_inline(text: str) -> bool:
    """Whether XLA may run a program inside the execute call itself, for long. The CPU client runs a program
    whose estimated cost is under 1000 flops in the calling thread, and its estimate counts a loop's body once and
    a custom call as nothing; other programs run on its threads (waiting for their results is interruptible).
    The Runners of such programs are marked interruptible: on the main thread their execute call runs on a helper
    thread while the main thread waits in short steps, running signal handlers (see "Interruptible executions" in
    _fastpath.c; about 2.3 us more per call of a tiny program on the 2-core machine; the Python twin uses a
    helper thread per call). Not a program with host callbacks: its callbacks, run inline, must run on the thread
    that executes it (callbacks.running marks that thread); it keeps _InlineRunGuard."""
    return "stablehlo.while" in text or "stablehlo.custom_call" in text


_MAIN_THREAD = threading.main_thread()


class _InlineRunGuard:
    """Keeps Ctrl-C working during a program with host callbacks, which may run long inside the execute call: on
    the main thread its calls run on a helper thread (interruptible), which costs about 0.1 ms a call, until one
    has ended within _QUICK_S; later calls run directly, until one of them blocks longer than _SLOW_S."""
    __slots__ = ("direct",)

    def __init__(self) -> None:
        self.direct = False

    def run(self, fn: Callable[[], T]) -> T:
        """fn() (a call of the program; None where nothing ran: that says nothing of the program's time)."""
        if threading.current_thread() is not _MAIN_THREAD:
            return fn()
        start = time.perf_counter()
        result = fn() if self.direct else interruptible(fn, "execute")
        if result is not None:
            self.direct = time.perf_counter() - start <= (_SLOW_S if self.direct else _QUICK_S)
        return result


def _ready(outs: list[Array] | None) -> list[Array] | None:
    """outs, once computed: a program with host callbacks is awaited inside its call, so that a callback's error
    is raised there (from the callback's exception) rather than where the results are read."""
    if outs is not None:
        _ready_buffers([x._buffer for x in outs])
    return outs


def _ready_buffers(buffers: list[_pjrt.Buffer]) -> list[_pjrt.Buffer]:
    for b in buffers:
        b.block_until_ready()
    return buffers


_QUICK_S = 0.01
_SLOW_S = 0.25


class CompileError(RuntimeError):
    """XLA rejected a lowered module; the message holds XLA's diagnostics and the module text."""


class DeletedArrayError(RuntimeError):
    """A compiled program was called with an array (or a constant it closed over) that has been deleted."""


class Lowered:
    """An IR lowered to a StableHLO module, not yet compiled."""

    def __init__(self, ir: IR, name: str, text: str, unlowerable: DevicesNeeded | None = None,
                 donors: Sequence[bool] | None = None):
        """donors: per input, whether a call gives its buffer up (text was lowered so: see ember._hlo.lower): the
        program's calls, on one device or partitioned, then delete the donated arguments whose buffers they
        used."""
        self.ir, self.name, self.text = ir, name, text
        self.donors = tuple(bool(d) for d in donors) if donors is not None and any(donors) else None
        self.shardings: tuple[Sequence[Any] | None, Sequence[Any] | None] | None = None  # (see Compiled)
        # (a program that runs on several devices only: why its one-device module could not be written, raised
        # by a call on one device)
        self.unlowerable = unlowerable

    def as_text(self) -> str:
        """The StableHLO module."""
        return self.text

    def compile(self, deferred: bool = False) -> "Compiled":
        """Compile the module with XLA (on the default backend), or reuse the executable of an identical module
        compiled before (the constants are arguments, not part of the text, so the program of a new function
        that closes over other arrays of the same shapes is the same text). deferred: compile it at its first
        call on one device (a program first called with sharded arrays is compiled for their devices instead)."""
        if self.shardings is not None or program_placement(self.ir) is not None:  # (partitioned when called)
            return Compiled(self, None)
        return Compiled(self, DEFERRED if deferred else self._executable())

    def _executable(self, overrides: bytes | None = None) -> _pjrt.Executable:
        """The module's executable (see compile): compiled, from the persistent cache, or reused. overrides: XLA
        options for this compile (structs.option_overrides; by default those of the compile_options block around
        it); one the plugin does not know is its PjrtError."""
        if self.unlowerable is not None:
            raise self.unlowerable
        if overrides is None:
            overrides = _OVERRIDES.get()
        client = get_client()  # a plugin that cannot load is its own error, not a compile error
        key = (self.text, client, overrides)
        executable = _executables.lookup(key)
        if executable is None:
            _dump_ir(self.name, self.text, self.ir)
            try:
                with profile.span(f"compile {self.name}", "compile"), \
                        monitoring.timed(monitoring.COMPILE_EVENT, self.name):
                    executable = interruptible(lambda: compile_with_cache(client, self.text, overrides))
            except _pjrt.PjrtOutOfMemoryError:
                raise
            except _pjrt.PjrtError as err:
                if overrides and "compile option" in str(err):  # (the options, not the module: JAX's error too)
                    raise _pjrt.PjrtError(f"{self.name}: {err}") from None
                if PLACEHOLDER_OPEN in self.text:  # (JAX's ValueError: a program with symbolic dimensions)
                    raise ValueError(f"{self.name} has symbolic shapes, which compile only once their dimension "
                                     "variables are bound: export it (ember.export.export) and call the Exported "
                                     "with arrays") from None
                numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(self.text.splitlines()))
                raise CompileError(f"XLA could not compile {self.name}: {err}\nStableHLO module:\n{numbered}"
                                   ) from None
            _executables.store(key, executable)
        return executable

    def __repr__(self) -> str:
        return f"<Lowered {self.name}>"


# (StableHLO text, client) -> executable, process-wide: a program is compiled once, whichever function staged it
_executables = LRUCache("program_cache_size")


def lower_ir(ir: IR, name: str = "main", donors: Sequence[bool] | None = None) -> Lowered:
    try:
        with monitoring.timed(monitoring.LOWER_EVENT, name):
            text = lower(ir, donors)
        return Lowered(ir, name, text, donors=donors)
    except DevicesNeeded as err:  # (a call of a program exported for several devices: see Lowered.unlowerable)
        return Lowered(ir, name, "", err, donors)


def compile_ir(ir: IR, name: str = "main", key: Any = None, deferred: bool = False,
               donors: Sequence[bool] | None = None) -> "Compiled":
    """Lower and compile an IR: the one way from an IR to a program that runs (jit's, the AOT stages', eager
    dispatch's, pmap's), on one device or partitioned over several when called so. The lowering of an IR of the
    same structure as one lowered before is reused (a function staged anew, as a fresh closure each step, gives a
    new IR of the same structure each time). key is ir's structural_key(ir, sources=False), where the caller knows
    it already. deferred: see Lowered.compile. donors: per input, whether calls give its buffer up (see Lowered).

    An IR that uses Refs is discharged first: one that takes Refs (arguments, or Refs it closed over) runs as a
    RefCompiled (ember._runtime.refs); one that only makes and uses its own is the pure program of its discharge."""
    if donors is not None and not any(donors):
        donors = None
    if has_refs(ir):  # (it reads and writes ember.Refs: ember._runtime.refs)
        const_refs, in_refs = ref_positions(ir)
        if not const_refs and not in_refs:  # (Refs made and used inside: their discharge is a pure program)
            return compile_ir(discharge_ir(ir).ir, name, None, deferred, donors)
        def compile_pure(pure: IR, pure_donors: Sequence[bool] | None = None) -> Compiled:
            return compile_ir(pure, name, None, deferred, pure_donors)
        return RefCompiled(ir, name, compile_pure, compile_pure, donors)
    try:
        if key is None:
            key = structural_key(ir, sources=False)  # (the text has no source locations)
        lowering_key = key if donors is None else (key, donors)
        text = _lowerings.lookup(lowering_key)
    except (NotKeyable, TypeError):
        return lower_ir(ir, name, donors).compile(deferred)
    if text is None:
        try:
            with paused_gc(), monitoring.timed(monitoring.LOWER_EVENT, name):
                text = lower(ir, donors)
        except DevicesNeeded as err:  # (it runs on several devices only: compiled for them when called)
            return Lowered(ir, name, "", err, donors).compile(True)
        _lowerings.store(lowering_key, text)
    return Lowered(ir, name, text, donors=donors).compile(deferred)


_OVERRIDES: contextvars.ContextVar[bytes] = contextvars.ContextVar("compile_option_overrides", default=b"")


@contextlib.contextmanager
def compile_options(overrides: bytes) -> Iterator[None]:
    """The programs compiled for one device in the block take these XLA options (structs.option_overrides), as
    jit(f, compiler_options=...) gives them to its programs."""
    token = _OVERRIDES.set(overrides)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


DEFERRED: Any = object()  # an executable compiled at the first call on one device (see Lowered.compile)


_lowerings = LRUCache("program_cache_size")  # structural key of an IR -> its StableHLO text


class _PyCaller:
    """A compiled program's call in the common case: the pure-Python twin of ember._runtime._fastpath.Caller.

    caller(args) runs the program when every argument is exactly an Array on `device` with the expected shape
    and dtype, `consts` (the program's constants as Buffers on that device) is set and the debug_nans/debug_infs
    checks are off, and returns the outputs as a list of Arrays (committed to the device when an argument is); in
    any other case (and when an argument has been deleted) it returns None, and Compiled's general path handles the
    call. A PJRT error is raised."""

    def __init__(self, runner: Any, executable: _pjrt.Executable, device: _pjrt.Device,
                 in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], no_args_ok: bool,
                 host_types: Sequence[int | None] | None = None, name: str | None = None):
        # (host_types: the C Caller uploads exact numpy arguments itself; here they take the general path, which
        # uploads them the same way)
        self.runner, self.executable, self.device = runner, executable, device
        self.in_avals, self.out_avals = tuple(in_avals), tuple(out_avals)
        self.no_args_ok = bool(no_args_ok)  # a call without arguments runs on `device`
        self.name = name  # the program's name: the origin of the Arrays it returns
        self.consts: tuple[_pjrt.Buffer, ...] | None = None
        self._out_specs = [(a.shape, a.dtype) for a in self.out_avals]

    def __call__(self, args: Sequence[Any]) -> list[Array] | None:
        consts = self.consts
        if consts is None or _Checks.active or len(args) != len(self.in_avals) or not (args or self.no_args_ok):
            return None
        device = self.device
        buffers = list(consts)
        committed = False
        for x, aval in zip(args, self.in_avals):
            if type(x) is not Array:
                return None
            buffer, x_aval = x._buffer, x.aval
            if buffer.device is not device or (x_aval is not aval and (
                    x_aval.shape != aval.shape or x_aval.dtype != aval.dtype)):
                return None
            buffers.append(buffer)
            committed = committed or x._committed
        outs = self.runner.run(buffers, self._out_specs, device, None)
        if outs is None:
            return None
        wrap, name = Array._from_buffer, self.name
        return [wrap(b, aval, name, committed) for b, aval in zip(outs, self.out_avals)]


Caller: Any = C.Caller if C is not None else _PyCaller


# A token's buffer, as the common case's Caller is told of it (it never runs a program taking or returning tokens:
# Compiled._tokens); and the (shape, dtype) an execute call is told of a token result (its buffer is XLA's token)
_ARRAY_OF_TOKEN = ShapedArray((), np.dtype(np.bool_))


def _spec(aval: ShapedArray) -> tuple[tuple[int, ...], np.dtype]:
    """The (shape, dtype) of a program's result buffer."""
    return (aval.shape, aval.dtype) if aval.dtype is not dt.token else ((), _ARRAY_OF_TOKEN.dtype)


def _host_type(aval: ShapedArray) -> int | None:
    """The PJRT type a numpy argument of this aval is uploaded as by the Caller, or None where numpy cannot export
    its memory as a buffer (ml_dtypes' types: the general path uploads those)."""
    return None if aval.dtype.kind == "V" else _pjrt.numpy_dtype_to_pjrt(aval.dtype)



_dumped = itertools.count()


def _dump_ir(name: str, text: str, ir: Any) -> None:
    """jax_dump_ir_to: write a program about to be compiled into the directory, as <n>_<name>.stablehlo.mlir (and
    its IR as <n>_<name>.ember_ir.txt with 'jaxpr' in jax_dump_ir_modes); a directory that cannot be written warns."""
    directory = config.read_canonical("dump_ir_to")
    if not directory:
        return
    if directory == "sponge":
        directory = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", "")
        if not directory:
            return
    modes = {m.strip() for m in config.read_canonical("dump_ir_modes").split(",")}
    stem = f"{next(_dumped):04d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:100]}"
    try:
        os.makedirs(directory, exist_ok=True)
        if "stablehlo" in modes:
            with open(os.path.join(directory, stem + ".stablehlo.mlir"), "w") as f:
                f.write(text)
        if "jaxpr" in modes:
            with open(os.path.join(directory, stem + ".ember_ir.txt"), "w") as f:
                f.write(str(ir))
    except OSError as err:
        warnings.warn(f"ember: jax_dump_ir_to: cannot write {directory!r} ({err})", UserWarning, stacklevel=4)


class Compiled:
    """An IR compiled by XLA: call it with the IR's inputs (arrays) to run it."""

    def __init__(self, lowered: Lowered, executable: Any):
        """executable: the program compiled for one device, DEFERRED (compiled at the first call on one device),
        or None for a program that names a mesh (its calls run partitioned over the mesh's devices:
        call_sharded)."""
        ir = lowered.ir
        self._lowered = lowered
        self.ir, self.name, self.text, self.executable = ir, lowered.name, lowered.text, executable
        self.in_avals = [v.aval for v in ir.in_vars]
        self.out_avals = ir.out_avals
        self._out_specs = [_spec(a) for a in self.out_avals]
        # (a program taking or returning tokens takes the general path: its Arrays' common case does not apply)
        self._tokens = any(a.dtype is dt.token for a in (*self.in_avals, *self.out_avals))
        self._device = default_device()
        self._consts_by_device: dict[_pjrt.Device, list[_pjrt.Buffer]] = {}
        self._where = [f"{self.name}: argument {i}" for i in range(len(self.in_avals))]
        # how errors name the program and its arguments (JAX's incompatible-devices error): jit sets them to the
        # function's name and its parameters' names (arg_names: a function giving one name per input, "a",
        # "params['w']"); by default the program's name and "args[i]" (as JAX names a primitive's operands)
        self.fun_name = self.name
        self.arg_names: Callable[[], Sequence[str]] | None = None
        self._spmd_programs = LRUCache("program_cache_size")
        self._spmd_by_placement = LRUCache("program_cache_size")  # (see spmd_program)
        self._placement = program_placement(ir)  # the mesh or sharding it names (None: runs on any one device)
        self._donors = getattr(lowered, "donors", None)  # (see Lowered; the slots given up by each call:)
        self._donor_slots = tuple(i for i, d in enumerate(self._donors or ()) if d)
        # (in_shardings, out_shardings) its calls run with (an AOT-compiled sharded program's), or None
        self.preset_shardings: tuple[Sequence[Any] | None, Sequence[Any] | None] | None = \
            getattr(lowered, "shardings", None)
        if executable is None or executable is DEFERRED:
            self.executable = None
            self._fast, self._guard, self._callbacks = _no_fast_path, None, False
            self._deferred = executable is DEFERRED
            return
        self._deferred = False
        self._install(executable)

    def _install(self, executable: _pjrt.Executable) -> None:
        """Use executable (compiled for one device) for the calls on one device."""
        ir = self.ir
        self.executable = executable
        # The common case (Arrays on the device the program was compiled for), in C when the extension is in use.
        device = executable._device
        in_avals, out_avals = ([_ARRAY_OF_TOKEN if a.dtype is dt.token else a for a in avals]
                               for avals in (self.in_avals, self.out_avals))
        self._caller = Caller(executable._runner, executable, device, in_avals, out_avals,
                              self._device is device, host_types=[_host_type(a) for a in in_avals],
                              name=self.name)
        if not ir.consts:
            self._caller.consts = ()
        self._callbacks = _callbacks.TARGET in self.text  # (its execute is marked: see callbacks.running)
        self._guard = _InlineRunGuard() if self._callbacks else None
        if _may_run_long_inline(self.text) and not self._callbacks:  # (Ctrl-C then interrupts its calls at once)
            executable._runner.interruptible = True
        # _fast(args): the common case's call (None where it is not the common case)
        self._fast = _no_fast_path if self._tokens else self._fast_with_callbacks if self._callbacks else \
            self._caller
        report_one_device_inspections(ir, device)  # (ember.debug.inspect_array_sharding, at compile time)

    def _consts_on(self, device: _pjrt.Device) -> list[_pjrt.Buffer]:
        """The IR's constants as buffers on a device (copied through the host when they live elsewhere)."""
        buffers = []
        for i, (value, var) in enumerate(zip(self.ir.consts, self.ir.const_vars)):
            if type(value) is Array and value.device is not device:
                if _Guards.device_to_device:
                    _check_transfer("device_to_device", lambda: f"constant {i} of {self.name}, "
                                    f"{value.aval.str_short()} from {value.device} to {device}")
                value = value._value()
            buffers.append(to_buffer(value, var.aval, f"{self.name}: constant {i}", device))
        return buffers

    def _fast_with_callbacks(self, args: Sequence[Any]) -> list[Array] | None:
        return self._guard.run(lambda: _callbacks.running(lambda: _ready(self._caller(args))))  # type: ignore

    def call_flat(self, args: Sequence[Any]) -> list[Any]:
        if _Checks.profiling and not getattr(_recording, "depth", 0):
            return _recorded(self, self.call_flat, args)
        if _callbacks.state.in_worker_callback:
            _callbacks.check_reentry(self.name)
        donating = self._donor_slots
        if donating:  # (the arguments it gives up: see _giving_up)
            args = _giving_up(list(args), donating)
        if _MeshContexts.active and context_mesh() is not None:  # (set_mesh: the call runs over its devices)
            return self._call_general(args, donating)
        try:
            outs = self._fast(args)
        except _pjrt.PjrtError as err:
            raise self._execute_error(err, args, [*self._caller.consts, *(getattr(x, "_buffer", x) for x in args)]) \
                from _callbacks.take_error(str(err))  # (a host callback's exception, with its traceback; or None)
        if outs is None:
            return self._call_general(args, donating)
        for slot in donating:  # (the common case took every Array argument's own buffer; a host value is a copy)
            if type(args[slot]) is Array:
                args[slot].delete()
        return outs

    def _call_general(self, args: Sequence[Any], donating: Sequence[int] = ()) -> list[Any]:
        """A call in any case: host values as arguments, another device, debug checks, errors. donating: the
        arguments given up (see Lowered.donors): an Array whose own buffer the program took is deleted after."""
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name}: expected {len(self.in_avals)} arguments "
                            f"({', '.join(a.str_short() for a in self.in_avals)}), got {len(args)}")
        if _Checks.no_execution:
            raise RuntimeError(f"ember tried to run {self.name}, but the no_execution option is set")
        if self._placement is not None or self.preset_shardings is not None or any(
                type(x) is ShardedArray for x in args) or (_MeshContexts.active and context_mesh() is not None):
            return self.call_sharded(args, *(self.preset_shardings or (None, None)), donating=donating)
        if self._deferred:  # (its first call on one device)
            self._deferred = False
            self._install(self._lowered._executable())
            return self._call_general(args, donating)
        # JAX's placement rules: the computation runs on the device its committed array arguments are committed to
        # (all the same one, else JAX's ValueError), else on the default device; the uncommitted ones move there
        # (to_buffer), and the results are committed when an argument was.
        device = committed_to = None
        for i, x in enumerate(args):
            if type(x) is Array and x._committed:
                if committed_to is None:
                    device, committed_to = x._buffer.device, i
                elif x._buffer.device is not device:
                    first = args[committed_to]
                    raise incompatible_devices(
                        argument_text(self.describe_arg(committed_to), first.aval, [device]),
                        argument_text(self.describe_arg(i), x.aval, [x._buffer.device]))
        committed = device is not None
        if device is None:
            device = self._device
        consts = self._consts_by_device.get(device)
        if consts is None:
            consts = self._consts_by_device[device] = self._consts_on(device)
        fast = self._caller
        if device is fast.device and fast.consts is None:
            fast.consts = tuple(consts)
        buffers = list(consts)
        taken = []  # (the given-up Arrays whose own buffers the program takes)
        for i, (x, aval, where) in enumerate(zip(args, self.in_avals, self._where)):
            if type(x) is Array and x.aval.shape == aval.shape and x.aval.dtype == aval.dtype \
                    and x._buffer.device is device:
                buffers.append(x._buffer)  # the common case, checked inline (deleted buffers fail in execute)
                if donating and i in donating:
                    taken.append(x)
            else:
                if _Guards.host_to_device and type(x) is not Array and type(x) is not Token:  # (no host data)
                    _check_transfer("host_to_device", lambda: f"{where}, {aval.str_short()} to {device}")
                buffers.append(to_buffer(x, aval, where, device))
        try:
            if not self._callbacks:
                outs = self.executable.execute(buffers, self._out_specs)
            else:
                outs = self._guard.run(lambda: _callbacks.running(lambda: _ready_buffers(  # type: ignore[union-attr]
                    self.executable.execute(buffers, self._out_specs))))
        except _pjrt.PjrtError as err:
            raise self._execute_error(err, args, buffers) from _callbacks.take_error(str(err))
        for x in taken:
            x.delete()
        wrap, name = Array._from_buffer, self.name
        results = [Token(b) if aval.dtype is dt.token else wrap(b, aval, name, committed)
                   for b, aval in zip(outs, self.out_avals)]
        if _Checks.nans or _Checks.infs:
            _check_results(self, args, results)
        return results

    def describe_arg(self, i: int) -> str:
        """How JAX's errors name argument i: "argument x of f" (see fun_name and arg_names)."""
        names = self.arg_names() if self.arg_names is not None else ()
        return f"argument {names[i] if i < len(names) else f'args[{i}]'} of {self.fun_name}"

    def call_sharded(self, args: Sequence[Any], in_shardings: Sequence[Any] | None = None,
                     out_shardings: Sequence[Any] | None = None, donating: Sequence[int] = ()) -> list[Any]:
        """Run the program partitioned over several devices (XLA's SPMD partitioner): with the given input and
        output shardings (None, or a None entry: an input's own sharding, else replicated; an output's chosen by
        XLA's propagation), on the devices of the shardings, of the sharded arguments, of the program's
        sharding constraints or of the context mesh (set_mesh)."""
        if _Checks.profiling and not getattr(_recording, "depth", 0):
            return _recorded(self, lambda xs: self.call_sharded(xs, in_shardings, out_shardings, donating), args)
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name}: expected {len(self.in_avals)} arguments "
                            f"({', '.join(a.str_short() for a in self.in_avals)}), got {len(args)}")
        for i, x in enumerate(args):
            if isinstance(x, Array) and not isinstance(x, Tracer) and x.is_deleted():
                raise DeletedArrayError(f"{self.name}: argument {i} ({x.aval.str_short()}) has been deleted")
        if donating and donating is not self._donor_slots:  # (a call from outside call_flat: see _giving_up)
            args = _giving_up(list(args), donating)
        results = self.spmd_program(args, in_shardings, out_shardings)(args, donating)
        if _Checks.nans or _Checks.infs:
            _check_results(self, args, results)
        return results

    def spmd_program(self, args: Sequence[Any], in_shardings: Sequence[Any] | None = None,
                     out_shardings: Sequence[Any] | None = None) -> SpmdProgram:
        """The program partitioned for a call with these arguments and shardings (see call_sharded), compiled on
        first use. A call placed as an earlier one (the same shardings of the sharded arguments, the same given
        shardings) finds its program without planning again."""
        context = context_mesh() if _MeshContexts.active and self._placement is None else None
        placed = (tuple([x._sharding if type(x) is ShardedArray else x._buffer.device if type(x) is Array and
                         x._committed else None for x in args]),
                  None if in_shardings is None else tuple(in_shardings),
                  None if out_shardings is None else tuple(out_shardings), context)
        program = self._spmd_by_placement.get(placed)
        if program is not None:
            return program
        key, plan = sharded_call_plan(self.name, self.ir, self._placement, args, in_shardings, out_shardings,
                                      self.describe_arg, context)
        program = self._spmd_programs.lookup(key)
        if program is None:
            program = SpmdProgram(self.ir, self.name, *plan, donors=self._donors)
            self._spmd_programs.store(key, program)
        self._spmd_by_placement.store(placed, program)
        return program

    def _execute_error(self, err: _pjrt.PjrtError, args: Sequence[Any], buffers: Sequence[_pjrt.Buffer]
                       ) -> Exception:
        """The error to raise for a failed execute of these buffers (the constants, then one per argument): a
        RuntimeError when one of them has been deleted, else the PJRT error (of the same type: e.g. out of memory
        is a MemoryError) with the program's name in front."""
        # (a buffer whose client is closed is not deleted: err says the client is closed)
        deleted = next((i for i, b in enumerate(buffers) if type(b) is _pjrt.Buffer and not b.handle), None)
        if deleted is None:
            return type(err)(f"{self.name}: {err}", call=err.call, code=err.code)
        index = deleted - (len(buffers) - len(args))  # the constants come first
        what = "an array it closed over" if index < 0 else f"argument {index} ({args[index]!r})"
        return DeletedArrayError(f"{self.name}: {what} has been deleted")

    def __call__(self, *args: Any) -> Any:
        outs = self.call_flat(args)
        tree = self.ir.out_tree
        if tree is not None:
            if tree.node_type is None and len(outs) == 1:  # a single leaf (tree.unflatten's result, sooner)
                return outs[0]
            return tree.unflatten(outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def as_text(self) -> str:
        """The StableHLO module that was compiled."""
        return self.text

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<Compiled {self.name}: ({ins}) -> ({outs})>"


def _giving_up(args: list[Any], slots: Sequence[int]) -> list[Any]:
    """args for a call that gives up args[slot] for each slot: an Array that cannot be given up (a numpy view or
    DLPack export of it is alive: its buffer is pinned; or it is passed twice) replaced by a host copy, uploaded
    anew, whose buffer is donated instead: no one sees its memory change."""
    for slot in slots:
        x = args[slot]
        if type(x) is Array:
            if x._buffer._pins or sum(y is x for y in args) > 1:
                args[slot] = np.array(x)
        elif type(x) is ShardedArray:
            if any(b._pins for b in x._shards) or sum(y is x for y in args) > 1:
                args[slot] = np.array(x)
    return args


def _no_fast_path(args: Sequence[Any]) -> None:
    return None


class _Checks:
    """The debug_nans / debug_infs options, kept here as plain attributes: every compiled call reads them. active:
    a check or a host-to-device transfer guard is on (calls take the general path)."""
    nans = infs = active = no_execution = False
    profiling = False  # (the profiler records: every call of a program is an event, see _profiling)

    @classmethod
    def update(cls, _: Any = None) -> None:
        cls.nans, cls.infs, cls.no_execution = config.debug_nans, config.debug_infs, config.no_execution
        cls.active = cls.nans or cls.infs or cls.no_execution or _Guards.host_to_device
        if C is not None:  # (its Callers then leave every call to the general path, or to call_flat)
            C.set_checks_active(cls.active or cls.profiling)


_Checks.update()
config.on_change("debug_nans", _Checks.update)
config.on_change("debug_infs", _Checks.update)
# the options besides debug_nans/debug_infs that send every call to the general path, which checks them
CALL_CHECK_OPTIONS = ("no_execution", "transfer_guard") + tuple(f"transfer_guard_{d}" for d in _GUARDED)
for _option_name in CALL_CHECK_OPTIONS:
    config.on_change(_option_name, _Checks.update)


def _profiling(on: bool) -> None:
    """While the profiler records, every call of a program (compiled before or after the profiler started: the
    calls check _Checks.profiling, so a program a jitted function holds is recorded too) is an event, each
    execution waited for so that its event lasts as long as the computation; arrays read to the host are events
    too. Nothing is recorded otherwise."""
    if on:
        plain_value = Array._value

        def value(self: Array) -> Any:
            if self._host is not None:
                return self._host
            start = time.perf_counter_ns()
            host = plain_value(self)
            profile.record(f"to host {self.aval.str_short()}", "transfer", start, time.perf_counter_ns())
            return host
        _profiling.saved = plain_value  # type: ignore[attr-defined]
        Array._value = value  # type: ignore[method-assign]
        _Checks.profiling = True
    else:
        Array._value = _profiling.saved  # type: ignore[attr-defined,method-assign]
        _Checks.profiling = False
    _Checks.update()


_recording = threading.local()  # (depth: the calls being recorded in this thread, so that one call is one event)


def _recorded(compiled: Compiled, call: Callable[[Sequence[Any]], list[Any]], args: Sequence[Any]) -> list[Any]:
    """call(args), a call of compiled, recorded as one "execute" event while the profiler records."""
    depth = getattr(_recording, "depth", 0)
    _recording.depth = depth + 1
    try:
        start = time.perf_counter_ns()
        outs = call(args)
        for out in outs:
            if isinstance(out, Array):
                out.block_until_ready()
        profile.record(compiled.name, "execute", start, time.perf_counter_ns(), {"arguments": len(args)})
        return outs
    finally:
        _recording.depth = depth


profile.add_hook(_profiling)


def _invalid_kind(value: Any) -> str | None:
    if type(value) is Token or not dt.is_inexact(value.dtype):
        return None
    host = np.asarray(value)
    if _Checks.nans and np.isnan(host).any():
        return "nan"
    if _Checks.infs and np.isinf(host).any():
        return "inf"
    return None


def _check_results(compiled: Compiled, args: Sequence[Any], results: Sequence[Any]) -> None:
    """With debug_nans/debug_infs: raise FloatingPointError if a result holds a NaN/Inf, naming the primitive that
    produced it and its user source line. A program of several equations is run again one primitive at a time
    (each checked in turn) to find that primitive."""
    kind = next(filter(None, map(_invalid_kind, results)), None)
    if kind is None:
        return
    eqns = compiled.ir.eqns
    if len(eqns) == 1:
        source = user_source() if eqns[0].source is None else eqns[0].source
        where = f" at {source}" if source is not None else ""
        raise FloatingPointError(f"invalid value ({kind}) encountered in {eqns[0].prim.name}{where} "
                                 f"(ember.config debug_{kind}s is on)")
    eval_ir(compiled.ir, list(args))  # raises at the first primitive producing it
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in the result of {compiled.name} (ember.config debug_{kind}s is on); "
        "running it again one primitive at a time, no primitive produced one (an input held it, or XLA's "
        "optimized arithmetic differs from the primitives')")
