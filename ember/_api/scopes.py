"""Named scopes, as JAX's: `ember.named_scope(name)` and `ember.named_call(f, name=...)` name the operations staged
inside them. The names (nested scopes joined with '/') are carried by each equation's source (printed by
`IR.pretty_print(name_stack=True)`), become the StableHLO locations of its ops (`loc("outer/inner/sin"(...))`,
which XLA keeps as the instructions' op_name), and are spans of the profiler's trace (ember.profiler) while one is
recorded. Transformations keep them: the equations that grad, jvp or vmap derive from one are in its scopes.

More scopes about tracing, as JAX's: ensure_compile_time_eval() (operations on known values run while a function
is staged out, rather than being staged), checking_leaks() (check_tracer_leaks on: a tracer that outlives its
staging is reported when the staging ends) and make_user_context (a value jit's caches key on)."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

from ember._api.staging import wraps
from ember._core.config import config
from ember._core.dtypes import StagingOptions
from ember._core.primitive import TRACE_STATE
from ember._core.profile import span


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """Name the operations of the with-block (as jax.named_scope): scopes nest, their names joined with '/'."""
    if not isinstance(name, str):
        raise TypeError(f"ember.named_scope: the name must be a string, got {name!r} of type {type(name).__name__}")
    state = TRACE_STATE
    outer = state.scope
    state.scope = outer + (name,)
    try:
        with span(name, "named_scope"):
            yield
    finally:
        state.scope = outer


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """fun, whose calls are in a named scope (as jax.named_call): name, by default fun's __name__."""
    if not callable(fun):
        raise TypeError(f"ember.named_call: expected a function, got {fun!r} of type {type(fun).__name__}")
    scope_name = getattr(fun, "__name__", type(fun).__name__) if name is None else name
    if not isinstance(scope_name, str):
        raise TypeError(f"ember.named_call: name must be a string, got {scope_name!r}")

    @wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        with named_scope(scope_name):
            return fun(*args, **kwargs)
    return named


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Inside the with-block, an operation whose operands are all known (not traced) runs now and gives a concrete
    array, even while a function is staged out (as jax.ensure_compile_time_eval): under jit, `jnp.arange(3) * 2`
    is then a value Python may branch on; operations on traced values are staged as usual."""
    state = TRACE_STATE
    outer = state.compile_time_eval
    state.compile_time_eval = True
    try:
        yield
    finally:
        state.compile_time_eval = outer


@contextlib.contextmanager
def checking_leaks() -> Iterator[None]:
    """check_tracer_leaks on for the with-block (as jax.checking_leaks)."""
    with config.override(check_tracer_leaks=True):
        yield


class UserContext:
    """A value that jit's caches key on (ember.make_user_context, as jax.make_user_context): `with ctx(v): ...`
    sets it for the block, and a jitted function called under another value is traced again. ctx.value reads it;
    set_global / get_global change the value outside any block. The value is process-wide (JAX's is per thread
    inside a with-block) and must be hashable."""

    def __init__(self, default_value: Any = None):
        hash(default_value)
        self.default = self.value = default_value
        self._lock = threading.Lock()
        StagingOptions.contexts.append(self)

    def _set(self, value: Any) -> None:
        hash(value)  # (a key of jit's caches)
        with self._lock:
            self.value = value
            StagingOptions.update()

    def get_global(self) -> Any:
        return self.value

    def set_global(self, value: Any) -> None:
        self._set(value)

    @contextlib.contextmanager
    def __call__(self, value: Any) -> Iterator[None]:
        outer = self.value
        self._set(value)
        try:
            yield
        finally:
            self._set(outer)

    def __repr__(self) -> str:
        return f"UserContext(value={self.value!r})"


def make_user_context(default_value: Any = None) -> UserContext:
    """A new UserContext with this default value (as jax.make_user_context)."""
    return UserContext(default_value)
