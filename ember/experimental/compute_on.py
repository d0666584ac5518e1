"""ember.experimental.compute_on, as jax.experimental.compute_on: where a computation runs (the host's CPU beside an
accelerator, the accelerator, a TPU's SparseCore, a GPU stream).

`with compute_on("device_host"): ...` (also a decorator) and `compute_on2(f, compute_type=..., out_memory_spaces=...)`
take JAX's compute types and check them as JAX does (a TypeError for a non-string, a ValueError naming the supported
values otherwise). On ember's CPU backend the host is the device: the computations inside run where every
computation runs, with the same values, and out_memory_spaces (checked: memory Spaces in a tree prefix of f's
outputs) place nothing elsewhere. JAX's CPU backend behaves the same (it accepts every compute type and ignores
them); a plugin with host offloading would need the annotations lowered (frontend attribute _xla_compute_type), which
ember does not emit yet. The current compute type is readable (current_compute_type) for code that asks."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

from ember._core.pytree import tree_map
from ember._core.sharding import MemorySpace

_state = threading.local()


def _check_valid(compute_type: Any) -> None:
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    if compute_type not in {"device_host", "device", "tpu_sparsecore"} and not compute_type.startswith("gpu_stream:"):
        raise ValueError(f"Invalid compute type {compute_type}. Current supported values are `device_host`, "
                         "`device`, `tpu_sparsecore`, and `gpu_stream:#`.")


def current_compute_type() -> str | None:
    """The compute type of the innermost compute_on around this point (None outside every one)."""
    return getattr(_state, "compute_type", None)


@contextlib.contextmanager
def compute_on(compute_type: str) -> Iterator[None]:
    """Run what is inside on compute_type (JAX's compute_on): checked; on the CPU backend, where it runs anyway."""
    _check_valid(compute_type)
    before = current_compute_type()
    _state.compute_type = compute_type
    try:
        yield
    finally:
        _state.compute_type = before


def compute_on2(f: Callable[..., Any] | None = None, *, compute_type: str, out_memory_spaces: Any,
                compiler_options: dict[str, Any] | None = None) -> Any:
    """f run on compute_type with its outputs in out_memory_spaces (a memory Space per output leaf, or one for all),
    as JAX's compute_on2; a decorator without f."""
    _check_valid(compute_type)
    if compiler_options is not None and not isinstance(compiler_options, dict):
        raise TypeError(f"compute_on2: compiler_options must be a dict or None, got {type(compiler_options).__name__}")

    def decorate(g: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            with compute_on(compute_type):
                out = g(*args)
            _check_spaces(out_memory_spaces, out)
            return out
        return wrapped
    return decorate if f is None else decorate(f)


def _check_spaces(spaces: Any, out: Any) -> None:
    """out_memory_spaces must be a tree prefix of the outputs with a memory Space at each of its leaves (JAX's)."""
    def check(space: Any, _: Any) -> None:
        if not isinstance(space, MemorySpace):
            raise TypeError(f"compute_on2: out_memory_spaces must hold memory Spaces (ember.memory.Space.Device or "
                            f".Host), got {space!r}")
    if isinstance(spaces, MemorySpace):
        return
    try:
        tree_map(check, spaces, out, is_leaf=lambda x: isinstance(x, MemorySpace) or x is None)
    except ValueError as err:
        raise ValueError(f"compute_on out_memory_spaces specification must be a tree prefix of the corresponding "
                         f"value; {err}") from None


__all__ = ["compute_on", "compute_on2"]
