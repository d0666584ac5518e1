"""ember.profiler, as jax.profiler: record what ember does (tracing, transforms, lowering, compiling, executions,
transfers to the host) and the user's annotations, as a Chrome trace that Perfetto (ui.perfetto.dev),
chrome://tracing and TensorBoard's trace viewer open.

    with ember.profiler.trace("/tmp/ember-trace"):
        with ember.profiler.TraceAnnotation("train step"):
            params = step(params, batch)

The trace is written to <log_dir>/plugins/profile/<run>/<host>.trace.json.gz (JAX's and TensorBoard's layout: a
run is any directory under plugins/profile) when the trace stops; stop_trace() returns its path. The run is named
as JAX names it, by the time to the second (YYYY_MM_DD_HH_MM_SS); it is a new directory, made with os.mkdir, so a
name another trace has taken (in the same second, from this process or another) gets a suffix (_1, _2, ...) and
no trace ever replaces another. The file is written under a temporary name in the run and renamed into place, so
a reader (TensorBoard watching the directory) never sees part of one. While recording, each execution is waited
for, so that its event lasts as long as the computation (programs that would overlap run one after another). The
CPU plugin has no profiler extension: the events are ember's, not XLA's kernels.

The run also holds <host>.xplane.pb, the same events as XLA's profile format (XSpace: a plane /host:CPU, a line per
thread), which TensorBoard's profile plugin and ProfileData.from_file read (jax.profiler's ProfileData too).
ProfileData reads XSpace files, serialized bytes and text protos (as jax.profiler's). device_memory_profile is a
pprof profile of the live arrays (by type: ember records no allocation sites). JAX's profiler server (start_server,
for TensorBoard's "capture profile" over gRPC, and register_subprocess) needs a gRPC profiler service that ember
does not have: those raise, saying so."""
from __future__ import annotations

import contextlib
import errno
import functools
import gzip
import json
import os
import socket
import time
from typing import Any, Callable, Iterator

from ember._api.environment import live_arrays as _live_arrays
from ember._core import profile as _profile
from ember._runtime import xspace as _xspace

_log_dir: list[str] = []
_started_epoch_ns: list[int] = []


class ProfileOptions:
    """The options of a profiling session (jax.profiler.ProfileOptions), JAX's fields and defaults. ember's
    profiler records its own events whatever they say: start_trace accepts them (profiler_options=) and reads
    none."""

    def __init__(self) -> None:
        self.host_tracer_level = 2
        self.python_tracer_level = 1
        self.start_timestamp_ns = 0
        self.duration_ms = 0
        self.include_dataset_ops = True
        self.raise_error_on_start_failure = False
        self.advanced_configuration: dict[str, Any] = {}
        self.enable_hlo_proto = True
        self.repository_path = ""
        self.session_id = ""

    def __repr__(self) -> str:
        return f"ProfileOptions({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def start_trace(log_dir: str | os.PathLike, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options: ProfileOptions | None = None) -> None:
    """Start recording (as jax.profiler.start_trace); stop_trace() writes the trace under log_dir."""
    if create_perfetto_link:
        raise NotImplementedError("ember.profiler: create_perfetto_link is not supported; open the written trace "
                                  "at ui.perfetto.dev")
    if profiler_options is not None and not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"start_trace: profiler_options must be a ProfileOptions, got {type(profiler_options)}")
    _profile.start()
    _started_epoch_ns[:] = [time.time_ns()]
    _log_dir[:] = [os.fspath(log_dir)]


def stop_trace() -> str:
    """Stop recording and write the trace: returns the path of the .trace.json.gz file."""
    events = _profile.stop()
    directory = _new_run(_log_dir.pop())
    path = os.path.join(directory, f"{socket.gethostname()}.trace.json.gz")
    names = [{"name": "process_name", "ph": "M", "pid": os.getpid(), "args": {"name": "ember"}}]
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp")  # (no tool's suffix: TensorBoard ignores it)
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as raw, \
                gzip.open(raw, "wt", encoding="utf-8") as f:
            json.dump({"displayTimeUnit": "ms", "traceEvents": names + events}, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    _write_new(os.path.join(directory, f"{socket.gethostname()}.xplane.pb"),
               _xspace.trace_xspace(events, _started_epoch_ns[0] if _started_epoch_ns else 0, socket.gethostname(),
                                    os.getpid()))
    return path


def _write_new(path: str, data: bytes) -> None:
    """Write a file of the run under a temporary name and rename it into place (see the module docstring)."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


_MAX_RUNS_PER_SECOND = 10000  # (suffixes tried before stop_trace gives up naming a run)


def _new_run(log_dir: str) -> str:
    """A new run directory <log_dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>[_<n>], created by this call."""
    profile = os.path.join(log_dir, "plugins", "profile")
    os.makedirs(profile, exist_ok=True)
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S")
    for n in range(_MAX_RUNS_PER_SECOND):
        directory = os.path.join(profile, f"{stamp}_{n}" if n else stamp)
        try:
            os.mkdir(directory)
        except FileExistsError:
            continue
        return directory
    raise FileExistsError(errno.EEXIST, f"ember.profiler.stop_trace: {_MAX_RUNS_PER_SECOND} runs named {stamp} "
                          "already exist", os.path.join(profile, stamp))


@contextlib.contextmanager
def trace(log_dir: str | os.PathLike, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False, profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """Record the with-block (as jax.profiler.trace)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A span of the user's in the trace (as jax.profiler.TraceAnnotation): a context manager; keyword arguments
    are shown with the event."""

    def __init__(self, name: str, **kwargs: Any):
        self.name, self.kwargs = name, kwargs
        self._start = 0

    def __enter__(self) -> "TraceAnnotation":
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        _profile.record(self.name, "annotation", self._start, time.perf_counter_ns(), self.kwargs)


class StepTraceAnnotation(TraceAnnotation):
    """A training step's span (as jax.profiler.StepTraceAnnotation): the step number is shown with the event."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)


def annotate_function(func: Callable[..., Any], name: str | None = None, **kwargs: Any) -> Callable[..., Any]:
    """func, each call of which is a span in the trace (as jax.profiler.annotate_function)."""
    label = name or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

    @functools.wraps(func)
    def wrapper(*args: Any, **call_kwargs: Any) -> Any:
        with TraceAnnotation(label, **kwargs):
            return func(*args, **call_kwargs)
    return wrapper


# ---------------------------------------------------------------------------------------------------------------
# Reading profiles (XSpace), as jax.profiler's ProfileData
class ProfileEvent:
    """One event of a profile: its name, start and end (ns since the epoch), duration (ns) and stats (name, value)
    pairs (jax.profiler.ProfileEvent)."""
    __slots__ = ("name", "start_ns", "duration_ns", "_stats")

    def __init__(self, event: _xspace.Event):
        self.name, self.start_ns, self.duration_ns, self._stats = (event.name, event.start_ns, event.duration_ns,
                                                                   event.stats)

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns

    @property
    def stats(self) -> Iterator[tuple[str, Any]]:
        return iter(self._stats)

    def __repr__(self) -> str:
        return f"ProfileEvent({self.name!r}, start_ns={self.start_ns}, duration_ns={self.duration_ns})"


class ProfileLine:
    """A line of a plane (a thread, a stream): its name and events."""
    __slots__ = ("name", "_events")

    def __init__(self, line: _xspace.Line):
        self.name, self._events = line.name, line.events

    @property
    def events(self) -> Iterator[ProfileEvent]:
        return (ProfileEvent(e) for e in self._events)


class ProfilePlane:
    """A plane of a profile (a host, a device): its name, lines and stats (jax.profiler.ProfilePlane)."""
    __slots__ = ("name", "_lines", "_stats")

    def __init__(self, plane: _xspace.Plane):
        self.name, self._lines, self._stats = plane.name, plane.lines, plane.stats

    @property
    def lines(self) -> Iterator[ProfileLine]:
        return (ProfileLine(line) for line in self._lines)

    @property
    def stats(self) -> Iterator[tuple[str, Any]]:
        return iter(self._stats)

    def __repr__(self) -> str:
        return f"ProfilePlane({self.name!r})"


class ProfileData:
    """A profile in XLA's format, XSpace (jax.profiler.ProfileData): its planes. Read from a file (an
    .xplane.pb: ember's traces write one), serialized bytes or the protobuf text format."""

    def __init__(self, planes: list[_xspace.Plane]):
        self._planes = planes

    @property
    def planes(self) -> Iterator[ProfilePlane]:
        return (ProfilePlane(p) for p in self._planes)

    def find_plane_with_name(self, name: str) -> ProfilePlane | None:
        """The plane of that name, or None."""
        return next((ProfilePlane(p) for p in self._planes if p.name == name), None)

    @staticmethod
    def from_serialized_xspace(serialized_xspace: bytes) -> "ProfileData":
        """The profile of a serialized XSpace (ValueError when it is not one)."""
        if not isinstance(serialized_xspace, (bytes, bytearray, memoryview)):
            raise TypeError(f"from_serialized_xspace: expected bytes, got {type(serialized_xspace).__name__}")
        return ProfileData(_xspace.read_xspace(bytes(serialized_xspace)))

    @staticmethod
    def from_file(proto_file_path: str | os.PathLike) -> "ProfileData":
        """The profile of a serialized XSpace file (an .xplane.pb)."""
        with open(proto_file_path, "rb") as f:
            return ProfileData.from_serialized_xspace(f.read())

    @staticmethod
    def from_text_proto(text: str) -> "ProfileData":
        """The profile of an XSpace in the protobuf text format."""
        return ProfileData.from_serialized_xspace(_xspace.text_to_xspace(text))

    @staticmethod
    def text_proto_to_serialized_xspace(text: str) -> bytes:
        """An XSpace in the protobuf text format, serialized."""
        return _xspace.text_to_xspace(text)

    @staticmethod
    def from_raw_cpp_ptr(capsule: Any) -> "ProfileData":
        """JAX's reader of a C++ XSpace object: ember has no C++ profiler objects to read."""
        raise NotImplementedError("ProfileData.from_raw_cpp_ptr reads a C++ XSpace of jaxlib's profiler; ember's "
                                  "profiles are files and bytes: use from_file or from_serialized_xspace")


# ---------------------------------------------------------------------------------------------------------------
# Device memory
def device_memory_profile(backend: str | None = None) -> bytes:
    """A snapshot of the live arrays as a gzipped pprof profile (as jax.profiler.device_memory_profile): one
    sample per array, its values (allocations: 1, space: its bytes), labelled kind=buffer and its device, its one
    location the array's type (ember records no allocation sites, where JAX records the Python stack)."""
    samples = []
    for array in _live_arrays(backend):
        nbytes = int(array.size) * int(array.dtype.itemsize)
        device = next(iter(array.devices()))
        samples.append(([f"{array.aval.str_short()} array"], [1, nbytes],
                         {"kind": "buffer", "device": f"{device.platform}:{device.id}"}))
    return gzip.compress(_xspace.pprof([("allocations", "count"), ("space", "bytes")], samples))


def save_device_memory_profile(filename: str | os.PathLike, backend: str | None = None) -> None:
    """Write device_memory_profile(backend) to filename (pprof reads it: `pprof --web file`)."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)


# ---------------------------------------------------------------------------------------------------------------
# The profiler server (JAX's gRPC ProfilerService, for TensorBoard's "capture profile")
_NO_SERVER = ("ember has no profiler server: JAX's serves TensorBoard's \"capture profile\" over gRPC (its "
              "ProfilerService), which ember does not implement; record with ember.profiler.trace(log_dir) (or "
              "start_trace/stop_trace) and point TensorBoard at log_dir")


def start_server(port: int, requires_backend: bool = True) -> Any:
    """JAX's profiler server: a NotImplementedError on ember (see _NO_SERVER)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
        raise ValueError(f"start_server: port must be an int in [0, 65536), got {port!r}")
    raise NotImplementedError(f"start_server({port}): {_NO_SERVER}")


def stop_server() -> None:
    """Stop the profiler server: none is ever active on ember (JAX's ValueError)."""
    raise ValueError("No active profiler server.")


def register_subprocess(pid: int, port: int) -> Callable[[], None]:
    """Profile a subprocess's profiler server with this process's (JAX's): a RuntimeError on ember, which has no
    profiler server to connect to (as JAX raises when it cannot connect)."""
    raise RuntimeError(f"register_subprocess(pid={pid}, port={port}): cannot register the subprocess's profiler "
                       f"server: {_NO_SERVER}")


__all__ = ["ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane", "StepTraceAnnotation", "TraceAnnotation",
           "annotate_function", "device_memory_profile", "register_subprocess", "save_device_memory_profile",
           "start_server", "start_trace", "stop_server", "stop_trace", "trace"]
