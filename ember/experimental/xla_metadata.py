"""ember.experimental.xla_metadata (jax.experimental.xla_metadata): set_xla_metadata, XLA frontend attributes on
the operations staged in a block, a decorated function, or on the operation giving a value.

    with set_xla_metadata(stage="encoder", priority=2):
        y = jnp.sin(x) * 2          # under jit, its ops carry mhlo.frontend_attributes = {priority = "2", ...}

Each equation bound in the block carries the metadata in its Source (ember._core.ir); its lowering writes it on the
ops giving the equation's results, as JAX's does, and a transformation (grad, vmap, jvp) keeps it on what the
equation becomes. Nested blocks merge (the inner value wins; None removes a key); values are written as str(value),
booleans in lower case ("true"), as JAX writes them. The metadata is one of jit's staging options: a jitted function
called under other metadata is traced again. Computations are unchanged: XLA reads the attributes, the CPU runs
the same program. See docs/debugging.md."""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember._core.primitive import XLA_METADATA
from ember._core.pytree import tree_map
from ember._prims.shape import xla_metadata_value_p


def _text(value: Any) -> str:
    """A metadata value as XLA's attribute string: str(value), a boolean in lower case (as JAX's)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _merged(base: tuple[tuple[str, str], ...], updates: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    merged = dict(base)
    for key, value in updates.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _text(value)
    return tuple(sorted(merged.items()))


class _Decorated:
    """A function run inside a metadata block; its attributes are the function's, and calling one of them (a jitted
    function's lower or trace) runs inside the block too (as JAX's decorator)."""

    def __init__(self, fun: Callable[..., Any], block: "XlaMetadataContextManager"):
        self._fun, self._block = fun, block
        functools.update_wrapper(self, fun)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._block:
            return self._fun(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._fun, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def in_block(*args: Any, **kwargs: Any) -> Any:
            with self._block:
                return attr(*args, **kwargs)
        return in_block


class XlaMetadataContextManager:
    """set_xla_metadata(**metadata): a with-block (re-entrant, not thread-local: as ember's user contexts) and a
    decorator."""
    __slots__ = ("updates", "_before")

    def __init__(self, updates: dict[str, Any]):
        self.updates = updates
        self._before: list[tuple[tuple[str, str], ...]] = []

    def __enter__(self) -> None:
        self._before.append(XLA_METADATA.value)
        if self.updates:
            XLA_METADATA.set(_merged(XLA_METADATA.value, self.updates))

    def __exit__(self, *exc: Any) -> None:
        before = self._before.pop()
        if self.updates:
            XLA_METADATA.set(before)

    def __call__(self, fun: Callable[..., Any]) -> Any:
        if not callable(fun):
            raise TypeError(f"set_xla_metadata(...)(f): f must be callable, got {type(fun).__name__}")
        return _Decorated(fun, self)


def set_xla_metadata(x: Any = None, **metadata: Any) -> Any:
    """With no x: a context manager (and decorator) under which staged operations carry metadata as XLA frontend
    attributes. With x (a pytree of arrays): x, the op giving each of its leaves carrying metadata."""
    if x is None:
        return XlaMetadataContextManager(metadata)
    kvs = _merged((), metadata)
    return tree_map(lambda v: xla_metadata_value_p.bind(v, xla_metadata_kvs=kvs), x)


__all__ = ["set_xla_metadata"]
