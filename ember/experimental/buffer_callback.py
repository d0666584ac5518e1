"""ember.experimental.buffer_callback (jax.experimental.buffer_callback): a host callback that writes its results
in place, `callback(ctx, out, *args, **kwargs) -> None`, where `out` (a pytree shaped as result_shape_dtypes) and
the arguments are Buffers: array-likes that numpy reads and writes through `np.asarray(buffer)` (the `__array__`
protocol) or DLPack.

    def add_one(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x) + 1

    f = buffer_callback(add_one, ember.ShapeDtypeStruct((3,), "float32"))
    f(enp.arange(3.0))  # [1, 2, 3], eagerly, under jit, vmap (given a vmap_method), in loops

As JAX's: not differentiable (wrap it in custom_jvp/custom_vjp); vmap by vmap_method as pure_callback's (none
given: vmap refuses); a call without side effects (has_side_effect=False, the default) may be dropped when its
results are unused; input_output_aliases={i: o} starts result o as a copy of flat argument i (XLA's buffer
aliasing: the callback may update it in place). ctx.stage is ExecutionStage.EXECUTE (the CPU runs the callback at
execution only); ctx.stream is the GPU stream, which the CPU has not (reading it raises, as JAX's on the CPU).

Where ember differs, on purpose: the Buffers are host arrays that ember copies into the program's result buffers
after the callback returns (JAX's point into the device buffers themselves). The callback cannot tell the
difference while it runs; a Buffer it keeps afterwards is an ordinary array, where JAX's would point into memory
XLA has reused. A result the callback leaves unwritten is zeros (JAX's holds whatever the memory held). Arguments
must be arrays (numpy, ember, Python scalars), as JAX's; command_buffer_compatible (GPU command buffers) changes
nothing on the CPU."""
from __future__ import annotations

import enum
from typing import Any, Callable

import numpy as np

from ember._api.callbacks import _result_avals, _run_now
from ember._control.callbacks import VMAP_METHODS, HostCallback, buffer_callback_p
from ember._core import ShapedArray, Tracer, is_tracing
from ember._core.dtypes import aval_of_value
from ember._core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.ffi import _checked_aliases


class ExecutionStage(enum.Enum):
    """The stage of XLA's FFI at which a callback runs (jax.experimental.buffer_callback.ExecutionStage); the CPU
    calls buffer callbacks at EXECUTE only."""
    INSTANTIATE = 0
    PREPARE = 1
    INITIALIZE = 2
    EXECUTE = 3


class ExecutionContext:
    """What a buffer callback learns of its call: the stage (always EXECUTE here) and the GPU stream (none)."""
    __slots__ = ()

    @property
    def stage(self) -> ExecutionStage:
        return ExecutionStage.EXECUTE

    @property
    def stream(self) -> int:
        raise RuntimeError("buffer_callback: ExecutionContext.stream is the GPU stream of the call, and this call "
                           "runs on the CPU (no stream; as JAX's CPU backend: 'XLA FFI GPU context is not "
                           "available')")

    def __repr__(self) -> str:
        return "ExecutionContext(stage=ExecutionStage.EXECUTE)"


class Buffer:
    """An argument or result of a buffer callback: shape, dtype, ndim, writeable (results only), and the array
    itself through `np.asarray(buffer)` (writes to a result's array are the result) or `__dlpack__`."""
    __slots__ = ("_array", "_writeable")

    def __init__(self, array: np.ndarray, writeable: bool):
        self._array, self._writeable = array, writeable

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def writeable(self) -> bool:
        return self._writeable

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy:
            return np.array(self._array, dtype=dtype)
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            if copy is False:
                raise ValueError(f"buffer_callback: a Buffer of {self._array.dtype.name} cannot be viewed as "
                                 f"{np.dtype(dtype).name} without a copy")
            return self._array.astype(dtype)
        return self._array

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"Buffer(shape={self.shape}, dtype={self.dtype.name}, writeable={self._writeable})"


class _BufferCallback(HostCallback):
    """A buffer callback as the callback primitives' param: called with the flat arguments (numpy arrays), it makes
    a zeroed array per declared result (a copy of the aliased argument for an aliased one), hands the function
    Buffers of both, and returns the results it filled (checked by HostCallback against their types)."""

    def __init__(self, fn: Callable[..., Any], in_tree: PyTreeDef, result_avals: tuple[ShapedArray, ...],
                 result_tree: PyTreeDef, aliases: tuple[tuple[int, int], ...]):
        super().__init__(fn, in_tree, (), result_avals, result_tree, "buffer_callback")
        self.aliases = aliases

    def with_results(self, result_avals: tuple[ShapedArray, ...]) -> HostCallback:
        return _BufferCallback(self.fn, self.in_tree, result_avals, self.result_tree, self.aliases)

    def call_flat(self, args: Any) -> list[np.ndarray]:
        outs = [np.zeros(a.shape, a.dtype) for a in self.result_avals]
        for i, o in self.aliases:
            outs[o][...] = args[i]
        call_args, call_kwargs = self.in_tree.unflatten([Buffer(np.asarray(a), False) for a in args])
        # (what it returns is ignored, as JAX ignores it: the results are what it wrote)
        self.fn(ExecutionContext(), tree_unflatten(self.result_tree, [Buffer(o, True) for o in outs]),
                *call_args, **call_kwargs)
        return outs


def buffer_callback(callback: Callable[..., None], result_shape_dtypes: Any, *, has_side_effect: bool = False,
                    vmap_method: str | None = None, input_output_aliases: dict[int, int] | None = None,
                    command_buffer_compatible: bool = False) -> Callable[..., Any]:
    """A function of arrays that calls `callback(ctx, out, *args, **kwargs)` to compute results shaped as
    result_shape_dtypes (a pytree of ShapeDtypeStructs): see the module's docstring."""
    if not callable(callback):
        raise TypeError(f"buffer_callback: the callback must be callable, got {type(callback).__name__}")
    if vmap_method not in VMAP_METHODS + (None,):
        raise ValueError(f"buffer_callback: vmap_method must be one of {list(VMAP_METHODS) + [None]}, got "
                         f"{vmap_method!r}")
    result_avals, result_tree = _result_avals("buffer_callback", result_shape_dtypes)
    del command_buffer_compatible  # (GPU command buffers: nothing to do on the CPU)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, in_tree = tree_flatten((args, kwargs))
        avals = []
        for i, leaf in enumerate(leaves):
            try:
                avals.append(leaf.aval if isinstance(leaf, Tracer) else aval_of_value(leaf))
            except TypeError:
                raise TypeError(f"buffer_callback: argument leaf {i} ({type(leaf).__name__}) is not an array; a "
                                "buffer callback takes arrays (pass other values by closing over them)") from None
        aliases = tuple(_checked_aliases("buffer_callback: ", input_output_aliases, len(args), avals,
                                        result_avals))
        host = _BufferCallback(callback, in_tree, result_avals, result_tree, aliases)
        if not is_tracing() and not any(isinstance(a, Tracer) for a in leaves):
            outs = _run_now(host, leaves)
        else:
            outs = buffer_callback_p.bind(*leaves, callback=host, vmap_method=vmap_method,
                                          has_side_effect=bool(has_side_effect))
        return tree_unflatten(result_tree, outs)

    return wrapped


__all__ = ["Buffer", "ExecutionContext", "ExecutionStage", "buffer_callback"]
