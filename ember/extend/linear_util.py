"""jax.extend.linear_util on ember: a function wrapped for JAX's function transformations (WrappedFun), as the
libraries that use JAX's internals build one (`lu.wrap_init(f, debug_info=...)`, then
`jax.api_util.flatten_fun_nokwargs` and `jax.interpreters.partial_eval.trace_to_jaxpr_nounits`: flax's
lazy_init, partial_eval_by_shape and nn.scan). ember stages every transformation as an IR, so a WrappedFun is the
function and the transformations stacked on it, called with `call_wrapped`."""
from __future__ import annotations

from typing import Any, Callable


class StoreException(Exception):
    """A value read from a Store before the function that fills it has run."""


class Store:
    """Where a wrapped function leaves a value for its caller (the output structure flatten_fun finds)."""
    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: Any = _EMPTY

    def store(self, value: Any) -> None:
        self._value = value

    @property
    def val(self) -> Any:
        if self._value is _EMPTY:
            raise StoreException("the store is empty: the wrapped function has not been called yet")
        return self._value

    def __call__(self) -> Any:  # (flatten_fun's out_tree is called: out_tree())
        return self.val


_EMPTY = object()


class WrappedFun:
    """f with its params (keywords it is called with) and debug info; `call_wrapped(*args, **kwargs)` calls it."""
    __slots__ = ("f", "params", "debug_info")

    def __init__(self, f: Callable[..., Any], params: tuple[tuple[str, Any], ...] = (), debug_info: Any = None):
        self.f, self.params, self.debug_info = f, tuple(params), debug_info

    @property
    def __name__(self) -> str:
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def call_wrapped(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **dict(self.params), **kwargs)

    def __repr__(self) -> str:
        return f"Wrapped function: {self.__name__}"


def wrap_init(f: Callable[..., Any], params: dict[str, Any] | None = None, *, debug_info: Any = None) -> WrappedFun:
    """f as a WrappedFun (called with params as keywords)."""
    return WrappedFun(f, tuple((params or {}).items()), debug_info)


__all__ = ["Store", "StoreException", "WrappedFun", "wrap_init"]
