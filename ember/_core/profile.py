"""What the profiler records (ember.profiler): spans of time, each with a name, a category and arguments, from any
thread. Off by default; `start()` turns recording on and `stop()` returns the events.

The layers mark their work with `profiled(category)` (a decorator: staging, transforms, lowering, compiling) or
`span(name, category)` (a context manager), both a flag test and nothing else while not recording. The hot paths
(running a compiled program, reading an array) are instrumented by the runtime only while recording (it swaps its
instrumented methods in), so they cost nothing otherwise."""
from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    events: list[dict[str, Any]] | None = None  # None: not recording
    start_ns = 0
    hooks: list[Callable[[bool], None]] = []  # called with True on start, False on stop (the runtime's swaps)


_lock = threading.Lock()


def recording() -> bool:
    return _State.events is not None


def add_hook(hook: Callable[[bool], None]) -> None:
    """hook(True) when recording starts, hook(False) when it stops (a layer instruments its hot paths)."""
    _State.hooks.append(hook)


def start() -> None:
    with _lock:
        if _State.events is not None:
            raise RuntimeError("ember.profiler: a trace is already being recorded (stop_trace() it first)")
        _State.events, _State.start_ns = [], time.perf_counter_ns()
    for hook in _State.hooks:
        hook(True)


def stop() -> list[dict[str, Any]]:
    with _lock:
        events, _State.events = _State.events, None
    if events is None:
        raise RuntimeError("ember.profiler: no trace is being recorded (start_trace() first)")
    for hook in _State.hooks:
        hook(False)
    return events


def record(name: str, category: str, start_ns: int, end_ns: int, args: dict[str, Any] | None = None) -> None:
    """One complete event (Chrome trace "X"): times from time.perf_counter_ns()."""
    events = _State.events
    if events is None:
        return
    event = {"name": name, "cat": category, "ph": "X", "ts": (start_ns - _State.start_ns) / 1000,
             "dur": (end_ns - start_ns) / 1000, "pid": os.getpid(), "tid": threading.get_ident()}
    if args:
        event["args"] = {k: str(v) for k, v in args.items()}
    events.append(event)  # (list.append is atomic under the GIL)


@contextlib.contextmanager
def span(name: str, category: str, **args: Any) -> Iterator[None]:
    """Record the with-block as one event (nothing while not recording)."""
    if _State.events is None:
        yield
        return
    start_ns = time.perf_counter_ns()
    try:
        yield
    finally:
        record(name, category, start_ns, time.perf_counter_ns(), args)


def profiled(category: str, name: Callable[..., str] | str | None = None) -> Callable[[F], F]:
    """Decorate a function whose calls are events of this category while recording; name is the event's name (a
    string, or a function of the call's arguments), by default the function's."""
    def decorate(fn: F) -> F:
        default = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _State.events is None:
                return fn(*args, **kwargs)
            start_ns = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                label = name(*args, **kwargs) if callable(name) else (name or default)
                record(label, category, start_ns, time.perf_counter_ns())
        return wrapper  # type: ignore[return-value]
    return decorate


__all__ = ["add_hook", "profiled", "record", "recording", "span", "start", "stop"]
