"""jax.extend.source_info_util on ember: where the operations being staged come from (the user's line, and the
named scopes around it: ember.named_scope), and the files whose frames are not the user's (register_exclusion:
what code in them binds is attributed to the code that called it, as flax excludes its own files).

JAX's name stack is ember's stack of named scopes (TRACE_STATE.scope, carried by each equation's Source): a
NameStack is a value of it, current_name_stack() reads it, and extend_name_stack / set_name_stack /
reset_name_stack / transform_name_stack change it for a with-block (or, as decorators, for a function's calls).
A transformation's name (transform_name_stack('jvp')) wraps the scope entered after it: 'outer/jvp(inner)', in the
printed IR (pretty_print(name_stack=True)) and in the StableHLO locations, as JAX writes them. user_context(source)
attributes what is bound in its block to a source (an equation's, from current() or eqn.source_info)."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, Iterator, TypeVar

from ember._api.scopes import named_scope
from ember._core.ir import Source, TransformName, scope_text
from ember._core.primitive import TRACE_STATE, exclude_from_sources, user_source

SourceInfo = Source
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class NameStack:
    """A stack of named scopes, outermost first (JAX's NameStack): `stack` holds the scope names (str) and the
    transformations' names (TransformName); str() writes it as JAX does ('outer/jvp(inner)')."""
    stack: tuple[str, ...] = ()

    def extend(self, name: str) -> "NameStack":
        """This stack with a named scope inside it."""
        return NameStack((*self.stack, str(name)))

    def transform(self, transform_name: str) -> "NameStack":
        """This stack with a transformation's name inside it (wrapping the scope that follows)."""
        return NameStack((*self.stack, TransformName(transform_name)))

    def __getitem__(self, index: slice) -> "NameStack":
        return NameStack(self.stack[index])

    def __len__(self) -> int:
        return len(self.stack)

    def __add__(self, other: "NameStack") -> "NameStack":
        return NameStack(self.stack + other.stack)

    def __str__(self) -> str:
        return scope_text(self.stack)


def new_name_stack(name: str = "") -> NameStack:
    """An empty name stack, or one of the single scope name."""
    return NameStack((name,)) if name else NameStack()


def new_source_info() -> Source:
    """A source of no known user line, in no named scope (JAX's new_source_info; summarize gives "")."""
    return Source("", 0, "")


def register_exclusion(path: str) -> None:
    exclude_from_sources(path)


def current() -> Source | None:
    """The source an operation bound now is attributed to."""
    return user_source()


def current_name_stack() -> NameStack:
    """The named scopes (and transformations' names) current now; str() of it joins them with '/'."""
    return NameStack(tuple(TRACE_STATE.scope))


def summarize(source_info: Source | None, num_frames: int = 1) -> str:
    """file:line:column (function) of a source, as JAX's (file:line where the column is unknown; "" for a source
    of no known line, new_source_info's)."""
    if source_info is None:
        return "unknown"
    return source_info.with_column() if source_info.filename else ""


class _ScopeChange:
    """A change of the current name stack for a with-block, or, used as a decorator, for each call of a function;
    `with ... as stack` gives the name stack inside."""

    def _inner(self, outer: tuple[str, ...]) -> tuple[str, ...]:
        raise NotImplementedError  # (each subclass says what the stack inside is)

    def __enter__(self) -> NameStack:
        state = TRACE_STATE
        self._outer = state.scope
        state.scope = self._inner(self._outer)
        return NameStack(tuple(state.scope))

    def __exit__(self, *exc: Any) -> None:
        TRACE_STATE.scope = self._outer

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(*self._args()):
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def _args(self) -> tuple[Any, ...]:
        raise NotImplementedError


class extend_name_stack(_ScopeChange):
    """A named scope around the with-block (as ember.named_scope, a span of the profiler's trace too)."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"extend_name_stack: the name must be a string, got {name!r}")
        self.name = name

    def _args(self) -> tuple[Any, ...]:
        return (self.name,)

    def __enter__(self) -> NameStack:
        self._scope = named_scope(self.name)
        self._scope.__enter__()
        return NameStack(tuple(TRACE_STATE.scope))

    def __exit__(self, *exc: Any) -> None:
        self._scope.__exit__(*exc)


class set_name_stack(_ScopeChange):
    """The with-block in exactly the scopes of name_stack (a NameStack), whatever the current ones are."""

    def __init__(self, name_stack: NameStack):
        if not isinstance(name_stack, NameStack):
            raise TypeError(f"set_name_stack: expected a NameStack (new_name_stack, current_name_stack), got "
                            f"{type(name_stack).__name__}")
        self.name_stack = name_stack

    def _args(self) -> tuple[Any, ...]:
        return (self.name_stack,)

    def _inner(self, outer: tuple[str, ...]) -> tuple[str, ...]:
        return self.name_stack.stack


class transform_name_stack(_ScopeChange):
    """A transformation's name around the with-block: the scope entered next inside it is written wrapped in it
    ('jvp(inner)'), as JAX's transformations name what they stage."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"transform_name_stack: the name must be a string, got {name!r}")
        self.name = name

    def _args(self) -> tuple[Any, ...]:
        return (self.name,)

    def _inner(self, outer: tuple[str, ...]) -> tuple[str, ...]:
        return (*outer, TransformName(self.name))


@contextlib.contextmanager
def reset_name_stack() -> Iterator[None]:
    """The with-block in no named scope."""
    with set_name_stack(NameStack()):
        yield


@contextlib.contextmanager
def user_context(traceback: Source | None, *, name_stack: NameStack | None = None) -> Iterator[None]:
    """What the with-block binds is attributed to the user line of traceback (a Source: an equation's source_info,
    or current()), in the scopes of name_stack when one is given (as an interpreter re-binding an equation does).
    ember keeps one frame per source, where JAX keeps a traceback; an exception raised inside is not rewritten."""
    state = TRACE_STATE
    outer_source, outer_scope = state.source, state.scope
    if traceback is not None and not isinstance(traceback, Source):
        raise TypeError(f"user_context: expected a source (source_info_util.current(), an equation's source_info) "
                        f"or None, got {type(traceback).__name__}")
    if traceback is not None:
        state.source = traceback._replace(scope=())
    if name_stack is not None:
        state.scope = tuple(name_stack.stack)
    try:
        yield
    finally:
        state.source, state.scope = outer_source, outer_scope


__all__ = ["NameStack", "SourceInfo", "current", "current_name_stack", "extend_name_stack", "new_name_stack",
           "new_source_info", "register_exclusion", "reset_name_stack", "set_name_stack", "summarize",
           "transform_name_stack", "user_context"]
