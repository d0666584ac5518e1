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
CPU plugin has no profiler extension: the events are ember's, not XLA's kernels."""
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

from ember._core import profile as _profile

_log_dir: list[str] = []


def start_trace(log_dir: str | os.PathLike, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False) -> None:
    """Start recording (as jax.profiler.start_trace); stop_trace() writes the trace under log_dir."""
    if create_perfetto_link:
        raise NotImplementedError("ember.profiler: create_perfetto_link is not supported; open the written trace "
                                  "at ui.perfetto.dev")
    _profile.start()
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
    return path


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
          create_perfetto_trace: bool = False) -> Iterator[None]:
    """Record the with-block (as jax.profiler.trace)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace)
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


__all__ = ["StepTraceAnnotation", "TraceAnnotation", "annotate_function", "start_trace", "stop_trace", "trace"]
