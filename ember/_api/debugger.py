"""debug.breakpoint (jax.debug.breakpoint): stop a program, eager or compiled, in an interactive debugger that shows
the Python frames that called it with their local variables' values.

The frames are taken when breakpoint is called (staging time under jit): each frame's locals are flattened, and
the leaves that are arrays (tracers under a staging) become a debug callback's operands, so that when the program
runs the debugger sees their values; other leaves are kept as they are. The callback picks a debugger and calls
it with the frames: the debuggers registered with register_debugger, highest priority first, else ember's command
line debugger (jdb, as JAX's: p/pp expression, up/down, list, where, continue, quit; any other line is evaluated
in the frame). Keyword arguments of breakpoint go to the debugger (the CLI debugger takes stdin= and stdout=)."""
from __future__ import annotations

import cmd
import dataclasses
import inspect
import os
import pprint
import sys
import threading
import traceback
from typing import IO, Any, Callable

from ember._api.callbacks import debug_callback, pure_callback
from ember._core import Tracer
from ember._core.pytree import tree_flatten, tree_unflatten
from ember._prims.elementwise import stop_gradient
from ember._runtime.array import Array, asarray

_EMBER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # (ember's own files)


@dataclasses.dataclass(frozen=True)
class DebuggerFrame:
    """One Python frame as the debugger shows it: its file, line, source and local variables (arrays with their
    values when the program runs)."""
    filename: str
    locals: dict[str, Any]
    globals: dict[str, Any]
    code_context: Any
    source: list[str]
    lineno: int
    offset: int | None

    @classmethod
    def from_frameinfo(cls, info: inspect.FrameInfo) -> "DebuggerFrame":
        try:
            lines, start = inspect.getsourcelines(info.frame)
            source = "".join(lines).split("\n")
            offset: int | None = info.lineno - max(start, 1)
            if offset is None or offset >= len(source):
                source, offset = [], None
        except (OSError, TypeError):
            source, offset = [], None
        return cls(info.filename, dict(info.frame.f_locals), {}, info.code_context, source, info.lineno, offset)


_registry: dict[str, tuple[int, Callable[..., None]]] = {}
_debug_lock = threading.Lock()


def register_debugger(name: str, debugger: Callable[..., None], priority: int) -> None:
    """Add a debugger: debugger(frames, thread_id, **kwargs); the highest priority one is used by default."""
    if name in _registry:
        raise ValueError(f'Debugger with name "{name}" already registered.')
    _registry[name] = (priority, debugger)


def get_debugger(backend: str | None = None) -> Callable[..., None]:
    if backend is not None and backend in _registry:
        return _registry[backend][1]
    if not _registry:
        raise ValueError("No debuggers registered!")
    return max(_registry.values(), key=lambda entry: entry[0])[1]


def _split(frames: list[DebuggerFrame]) -> tuple[list[Any], Callable[[list[Any]], list[DebuggerFrame]]]:
    """The frames' array leaves (the callback's operands), and how to rebuild the frames from their values."""
    dynamic: list[Any] = []
    rebuilds = []
    for frame in frames:
        entries = []
        for key, value in frame.locals.items():
            try:
                leaves, tree = tree_flatten(value)
            except Exception:  # (a value that cannot be flattened is shown as it is)
                entries.append((key, None, value, ()))
                continue
            positions = []
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, (Tracer, Array)):
                    positions.append((i, len(dynamic)))
                    dynamic.append(leaf)
            entries.append((key, tree, leaves, tuple(positions)))
        rebuilds.append((frame, entries))

    def rebuild(values: list[Any]) -> list[DebuggerFrame]:
        out = []
        for frame, entries in rebuilds:
            local = {}
            for key, tree, leaves, positions in entries:
                if tree is None:
                    local[key] = leaves
                    continue
                filled = list(leaves)
                for i, k in positions:
                    filled[i] = values[k]
                local[key] = tree_unflatten(tree, filled)
            out.append(dataclasses.replace(frame, locals=local))
        return out
    return dynamic, rebuild


def breakpoint(*, backend: str | None = None, filter_frames: bool = True, num_frames: int | None = None,  # noqa: A001
               ordered: bool = False, token: Any = None, **kwargs: Any) -> Any:
    """Enter the debugger when the program reaches this point (as jax.debug.breakpoint): eagerly at once, inside
    jit when the compiled program runs, with the values of the caller's arrays. filter_frames leaves out ember's
    own frames; num_frames keeps the innermost ones; ordered orders it among ordered debug effects; token (a pytree
    of arrays) makes it run when the token's value is computed, and is returned unchanged (use it: an unused token
    lets the call be dropped). kwargs go to the debugger (stdin=, stdout= for the command line one)."""
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    infos = inspect.stack()[1:]
    if filter_frames:
        infos = [info for info in infos if not info.filename.startswith(_EMBER)]
    frames = [DebuggerFrame.from_frameinfo(info) for info in infos]
    if num_frames is not None:
        frames = frames[:num_frames]
    dynamic, rebuild = _split(frames)

    def enter(*values: Any) -> None:
        thread = None if threading.current_thread() is threading.main_thread() else threading.get_ident()
        debugger = get_debugger(backend)
        with _debug_lock:
            debugger(rebuild([asarray(v) for v in values]), thread, **kwargs)

    if token is None:
        debug_callback(enter, *dynamic, ordered=ordered)
        return None
    token, dynamic = stop_gradient((token, dynamic))

    def enter_and_pass(tok: Any, *values: Any) -> Any:
        enter(*values)
        return tok
    return pure_callback(enter_and_pass, token, token, *dynamic)


class CliDebugger(cmd.Cmd):
    """ember's command-line debugger (jdb): evaluate expressions in a frame, move between frames, continue."""
    prompt = "(jdb) "

    def __init__(self, frames: list[DebuggerFrame], thread_id: int | None, stdin: IO[str] | None = None,
                 stdout: IO[str] | None = None, completekey: str = "tab"):
        super().__init__(stdin=stdin, stdout=stdout, completekey=completekey)
        self.use_rawinput = stdin is None
        self.frames, self.frame_index, self.thread_id = frames, 0, thread_id
        self.intro = "Entering jdb:"

    def evaluate(self, expression: str) -> Any:
        frame = self.frames[self.frame_index]
        return eval(expression, {}, {**frame.globals, **frame.locals})

    def _show(self, text: str) -> None:
        print(text, file=self.stdout)

    def _error_message(self) -> None:
        kind, value = sys.exc_info()[:2]
        self._show("*** " + traceback.format_exception_only(kind, value)[-1].strip())

    def default(self, line: str) -> None:
        """Evaluate an expression and print its repr."""
        self.do_p(line)

    def do_p(self, arg: str) -> None:
        """p expression: evaluate it and print its repr."""
        try:
            self._show(repr(self.evaluate(arg)))
        except Exception:
            self._error_message()

    def do_pp(self, arg: str) -> None:
        """pp expression: evaluate it and pretty-print it."""
        try:
            self._show(pprint.pformat(self.evaluate(arg)))
        except Exception:
            self._error_message()

    def print_context(self, num_lines: int = 2) -> None:
        frame = self.frames[self.frame_index]
        lines = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for i, line in enumerate(frame.source):
                if frame.offset - 1 - num_lines <= i <= frame.offset + num_lines:
                    lines.append(f"->  {line}" if i == frame.offset else f"    {line}")
        self._show("\n".join(lines))

    def do_up(self, arg: str) -> None:
        """u(p): move up a frame (to the caller)."""
        if self.frame_index == len(self.frames) - 1:
            self._show("At topmost frame.")
        else:
            self.frame_index += 1
        self.print_context()
    do_u = do_up

    def do_down(self, arg: str) -> None:
        """d(own): move down a frame."""
        if self.frame_index == 0:
            self._show("At bottommost frame.")
        else:
            self.frame_index -= 1
        self.print_context()
    do_d = do_down

    def do_list(self, arg: str) -> None:
        """l(ist): show the source around the current line."""
        self.print_context(num_lines=5)
    do_l = do_list

    def do_continue(self, arg: str) -> bool:
        """c(ont(inue)): let the program go on."""
        return True
    do_c = do_cont = do_continue

    def do_quit(self, arg: str) -> None:
        """q(uit), exit: leave the program (SystemExit)."""
        sys.exit(0)
    do_q = do_EOF = do_exit = do_quit

    def do_where(self, arg: str) -> None:
        """w(here), bt: print the frames, the most recent last."""
        lines = ["Traceback:"]
        for frame in self.frames[::-1]:
            lines.append(f'  File "{frame.filename}", line {frame.lineno}')
            lines.append("    <no source>" if frame.offset is None else f"    {frame.source[frame.offset].strip()}")
        self._show("\n".join(lines))
    do_w = do_bt = do_where

    def run(self) -> None:
        while True:
            try:
                self.cmdloop()
                break
            except KeyboardInterrupt:
                print("--KeyboardInterrupt--", file=sys.stdout)


def run_cli_debugger(frames: list[DebuggerFrame], thread_id: int | None, **kwargs: Any) -> None:
    CliDebugger(frames, thread_id, **kwargs).run()


register_debugger("cli", run_cli_debugger, -1)

__all__ = ["CliDebugger", "DebuggerFrame", "breakpoint", "get_debugger", "register_debugger"]
