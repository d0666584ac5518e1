"""jax.extend.source_info_util on ember: where the operations being staged come from (the user's line, and the
named scopes around it: ember.named_scope), and the files whose frames are not the user's (register_exclusion:
what code in them binds is attributed to the code that called it, as flax excludes its own files)."""
from __future__ import annotations

import contextlib
from typing import Iterator

from ember._api.scopes import named_scope
from ember._core.ir import Source
from ember._core.primitive import TRACE_STATE, exclude_from_sources, user_source

SourceInfo = Source


def register_exclusion(path: str) -> None:
    exclude_from_sources(path)


def current() -> Source | None:
    """The source an operation bound now is attributed to."""
    return user_source()


def current_name_stack() -> str:
    """The named scopes current now, joined with '/'."""
    return "/".join(TRACE_STATE.scope)


@contextlib.contextmanager
def extend_name_stack(name: str) -> Iterator[None]:
    """A named scope around the with-block (ember.named_scope)."""
    with named_scope(name):
        yield


def summarize(source_info: Source | None, num_frames: int = 1) -> str:
    """file:line:column (function) of a source, as JAX's (file:line where the column is unknown)."""
    return "unknown" if source_info is None else source_info.with_column()


__all__ = ["SourceInfo", "current", "current_name_stack", "extend_name_stack", "register_exclusion", "summarize"]
