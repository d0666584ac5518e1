"""Ahead-of-time stages with JAX's names: `jit(f).trace(*args)` -> Traced, `.lower()` -> Lowered, `.compile()` ->
Compiled; `ShapeDtypeStruct` to trace and lower without data, and `eval_shape` (no compile).

Arguments may be arrays, numbers, ShapeDtypeStructs (or ShapedArrays) in any mix, in any pytree. A Compiled is
called as the function is, without its static arguments; its arguments are checked against the traced types (the
tree structure, then each leaf's shape and dtype, naming the leaf). Lowered and Compiled extend the runtime stages
of `ember.compile` (ember._runtime.Lowered / Compiled), so everything those offer works on them too."""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Callable, Protocol, Sequence, Union

import numpy as np

from ember._core import IR, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.shape_poly import is_symbolic_dim, is_symbolic_shape
from ember._core.pytree import PyTreeDef, tree_flatten, tree_map, tree_unflatten
from ember._api.staging import first_mismatch
from ember._hlo import lower
from ember._transforms.discharge import pure_for_lowering
from ember._runtime import Array, Compiled as _RuntimeCompiled, Lowered as _RuntimeLowered
from ember._runtime.hlo_text import hlo_module_text
from ember._runtime.spmd import program_placement, sharded_call_plan, spmd_text
from ember._runtime.pjrt.structs import option_overrides
from ember._core.sharding import SingleDeviceSharding, explicit_of


class ShapeDtypeStruct:
    """A shape and a dtype standing for an array that is not there (as jax.ShapeDtypeStruct): for trace, lower
    and eval_shape. sharding: where the argument lives (jit(f).lower of a ShapeDtypeStruct with a sharding over
    several devices gives the program partitioned for it)."""
    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape: Any, dtype: Any, *, sharding: Any = None, weak_type: bool = False):
        try:
            self.shape = tuple(d if is_symbolic_dim(d) else int(d) for d in shape)
        except TypeError:
            raise TypeError(f"ShapeDtypeStruct: shape must be a sequence of ints, got {shape!r}") from None
        if any(not is_symbolic_dim(d) and d < 0 for d in self.shape):
            raise ValueError(f"ShapeDtypeStruct: dimensions must be >= 0, got shape {self.shape}")
        if dtype is None:
            raise TypeError("ShapeDtypeStruct: dtype is required")
        self.dtype = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
        self.sharding, self.weak_type = sharding, bool(weak_type)

    size = property(lambda self: math.prod(self.shape) if is_symbolic_shape(self.shape)
                    else int(np.prod(self.shape, dtype=np.int64)))
    ndim = property(lambda self: len(self.shape))

    @property
    def aval(self) -> ShapedArray:
        """The ShapedArray of this struct (the dtype made canonical: float64 is float32 without x64), typed with its
        sharding's Explicit mesh axes (JAX's explicit sharding mode: over a Mesh or an AbstractMesh)."""
        aval = ShapedArray(self.shape, dt.canonicalize_dtype(self.dtype), self.weak_type)
        explicit = explicit_of(self.sharding, len(self.shape)) if self.sharding is not None else None
        return aval if explicit is None else aval.with_explicit(explicit)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype, self.weak_type, self.sharding) ==
                (other.shape, other.dtype, other.weak_type, other.sharding))

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    @staticmethod
    def like(x: Any) -> "ShapeDtypeStruct":
        """The ShapeDtypeStruct of x (an Array, a numpy array, a Python number, a ShapeDtypeStruct or anything with
        shape and dtype): its shape, its dtype as ember holds it (float64 is float32 without x64), its weak type
        and, for an Array, its sharding (as jax.ShapeDtypeStruct.like)."""
        if isinstance(x, ShapeDtypeStruct):
            return ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
        try:
            aval = aval_of(x)
        except TypeError:
            if not (hasattr(x, "shape") and hasattr(x, "dtype")):
                raise TypeError(f"ShapeDtypeStruct.like: expected an array, a number or an object with shape and "
                                f"dtype, got {type(x).__name__}") from None
            aval = ShapedArray(tuple(x.shape), dt.canonicalize_dtype(x.dtype), bool(getattr(x, "weak_type", False)))
        sharding = x.sharding if isinstance(x, Array) else None
        return ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)


def struct_of(aval: ShapedArray, sharding: Any = None) -> Any:
    """The ShapeDtypeStruct of a value of this aval (a token's is its type, AbstractToken(), as JAX's)."""
    if dt.is_token(aval):
        return aval
    return ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type, sharding=sharding)


class _Abstract:
    """Stands for an argument given as a ShapeDtypeStruct or ShapedArray while the function is traced: staging
    reads its `aval` (as it reads an Array's). Never seen outside trace/lower/eval_shape."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval


def _is_abstract(x: Any) -> bool:
    return isinstance(x, ShapeDtypeStruct | ShapedArray)


def abstractify(tree: Any) -> Any:
    """tree with its ShapeDtypeStructs and ShapedArrays replaced by placeholders that staging takes as arguments."""
    return tree_map(lambda x: _Abstract(x.aval if isinstance(x, ShapeDtypeStruct) else x) if _is_abstract(x)
                    else x, tree, is_leaf=_is_abstract)


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument (a leaf) of a traced, lowered or compiled function, as jax.stages.ArgInfo: its abstract value
    (`_aval`), whether its buffer is donated to the program, and its `shape` and `dtype`."""
    _aval: ShapedArray
    donated: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._aval.dtype


CompilerOptions = dict[str, Union[str, bool]]
"""The XLA options `Lowered.compile(compiler_options)` and `jit(..., compiler_options=)` take (jax.stages'): option
name -> value."""


class Wrapped(Protocol):
    """What jit returns (jax.stages.Wrapped, a protocol): called, it compiles and runs; `trace(*args)` gives a
    Traced, `lower(*args)` a Lowered."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function, tracing, lowering and compiling it for these arguments' types as needed."""
        raise NotImplementedError

    def trace(self, *args: Any, **kwargs: Any) -> "Traced":
        """The function traced for these arguments: its IR, not yet lowered."""
        raise NotImplementedError

    def lower(self, *args: Any, **kwargs: Any) -> "Lowered":
        """The function lowered for these arguments (trace(...).lower()): its StableHLO, not yet compiled."""
        raise NotImplementedError


def args_info_of(in_tree: PyTreeDef, avals: Any, donated: Sequence[bool] | None = None) -> Any:
    """The pytree (args, kwargs) of the dynamic arguments' ArgInfos (JAX's args_info)."""
    flags = list(donated) if donated is not None else [False] * len(avals)
    return tree_unflatten(in_tree, [ArgInfo(a, bool(d)) for a, d in zip(avals, flags)])


def donor_plan(in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], donated: Sequence[bool],
               read: Sequence[bool] | None = None) -> tuple[list[bool], list[ShapedArray]]:
    """(per input, whether its buffer is donated to the program; the avals of the donated inputs that cannot be):
    as in JAX, a donated input is usable when an output has its shape and dtype (matched in order, each output
    once); an input the program does not read (read False) is not usable."""
    available: dict[tuple[Any, Any], int] = {}
    for aval in out_avals:
        available[(aval.shape, aval.dtype)] = available.get((aval.shape, aval.dtype), 0) + 1
    donors, unusable = [], []
    for i, (aval, wanted) in enumerate(zip(in_avals, donated)):
        usable = wanted and (read is None or read[i]) and available.get((aval.shape, aval.dtype), 0) > 0
        if usable:
            available[(aval.shape, aval.dtype)] -= 1
        elif wanted:
            unusable.append(aval)
        donors.append(bool(usable))
    return donors, unusable


def warn_unusable(name: str, unusable: Sequence[ShapedArray]) -> None:
    if unusable:
        warnings.warn(f"{name}: Some donated buffers were not usable: {', '.join(a.str_short() for a in unusable)} "
                      "(no output of that shape and dtype, or not read); they are not donated", UserWarning,
                      stacklevel=5)


class Traced:
    """A function traced for some arguments (jit(f).trace(...)): its IR (`.jaxpr`, also `.ir`: ember's printable
    IR), the types of its arguments and results, and `.lower()`."""

    def __init__(self, name: str, ir: IR, in_tree: PyTreeDef, lower_fn: Callable[[], "Lowered"],
                 donated: Sequence[bool] | None = None):
        self.fun_name, self.ir, self.in_tree, self._lower = name, ir, in_tree, lower_fn
        self._donated = donated

    jaxpr = property(lambda self: self.ir)
    in_avals = property(lambda self: tree_unflatten(self.in_tree, list(self.ir.in_avals)))
    out_avals = property(lambda self: list(self.ir.out_avals))
    out_tree = property(lambda self: self.ir.out_tree)
    args_info = property(lambda self: args_info_of(self.in_tree, self.ir.in_avals, self._donated))
    out_info = property(lambda self: tree_unflatten(self.ir.out_tree, [struct_of(a) for a in self.ir.out_avals]))

    def lower(self) -> "Lowered":
        return self._lower()

    def __repr__(self) -> str:
        return f"<Traced {self.fun_name}>"


class Lowered(_RuntimeLowered):
    """A traced function lowered to StableHLO (jit(f).lower(...)): `.as_text()`, `.compile()`, the argument and
    result types (`in_tree`, `out_tree`, `args_info`, `out_info`), `.cost_analysis()`."""

    def __init__(self, ir: IR, name: str, in_tree: PyTreeDef, donated: Sequence[bool] | None = None,
                 shardings: tuple[Sequence[Any] | None, Sequence[Any] | None] | None = None):
        """shardings: (per input leaf, per output leaf) the Sharding or None of a program partitioned over several
        devices (jit's in_shardings / out_shardings, sharded arguments), whose module is then the partitioned
        one; None for a program on one device (unless its IR names a mesh)."""
        ir = pure_for_lowering(ir, name)
        donors = None
        if donated is not None and any(donated):
            donors, unusable = donor_plan(ir.in_avals, ir.out_avals, donated)
            warn_unusable(name, unusable)
        placement = program_placement(ir)
        if shardings is None and placement is None:
            text = lower(ir, donors)
        else:
            ins, outs = shardings or (None, None)
            _, plan = sharded_call_plan(name, ir, placement, [None] * len(ir.in_vars), ins, outs)
            text = spmd_text(ir, *plan[:3], donors)
        super().__init__(ir, name, text, donors=donors)  # (its calls give the donated leaves up: see the runtime)
        self.shardings = shardings
        self.in_tree = in_tree
        self._donated = donated

    @classmethod
    def restored(cls, ir: IR, name: str, text: str, in_tree: PyTreeDef, donated: Sequence[bool] | None,
                 donors: Sequence[bool] | None,
                 shardings: tuple[Sequence[Any] | None, Sequence[Any] | None] | None = None) -> "Lowered":
        """The Lowered of a program lowered in another process (ember.experimental.serialize_executable): its
        StableHLO text and donors as that lowering gave them, not lowered again; ir stands for the program (its
        types, constants and output structure)."""
        self = cls.__new__(cls)
        _RuntimeLowered.__init__(self, ir, name, text, donors=donors)
        self.shardings, self.in_tree, self._donated = shardings, in_tree, donated
        return self

    out_tree = property(lambda self: self.ir.out_tree)
    in_avals = property(lambda self: tree_unflatten(self.in_tree, list(self.ir.in_avals)))
    args_info = property(lambda self: args_info_of(self.in_tree, self.ir.in_avals, self._donated))
    out_info = property(lambda self: tree_unflatten(self.ir.out_tree, [struct_of(a) for a in self.ir.out_avals]))

    def as_text(self, dialect: str | None = None) -> str:
        """The StableHLO module (dialect None or "stablehlo"). XLA's HLO before optimization is not available from
        the plugin: `.compile().as_text()` gives the optimized HLO."""
        if dialect not in (None, "stablehlo"):
            raise ValueError(f"Lowered.as_text: dialect must be 'stablehlo' (ember lowers to StableHLO; the "
                             f"optimized HLO is compile().as_text()), got {dialect!r}")
        return self.text

    def compiler_ir(self, dialect: str | None = None) -> str:
        """The module as text (JAX returns an MLIR module, or for "hlo" an XlaComputation; ember has no MLIR
        bindings): dialect None or "stablehlo" gives the StableHLO text (as_text()); "hlo" gives XLA's HLO text
        of the compiled program, after XLA's optimizations (the plugin gives no HLO before them), as a str that
        also has the XlaComputation's as_hlo_text()."""
        if dialect in (None, "stablehlo"):
            return self.text
        if dialect == "hlo":
            return HloText(self.compile().as_text())
        raise ValueError(f"Lowered.compiler_ir: dialect must be 'stablehlo' or 'hlo', got {dialect!r}")

    def compile(self, compiler_options: dict[str, Any] | None = None) -> "Compiled":
        """Compile with XLA (or load the executable from the caches). compiler_options: XLA options for this compile
        ({"xla_cpu_enable_fast_math": False, ...}, as JAX's; the plugin refuses an unknown one with a
        JaxRuntimeError); for a program partitioned over several devices, give XLA_FLAGS in the environment."""
        if compiler_options:
            if self.shardings is not None or program_placement(self.ir) is not None:
                raise NotImplementedError("Lowered.compile: compiler_options for a program partitioned over several "
                                          "devices are not supported; set XLA options with the XLA_FLAGS environment "
                                          "variable before the first compile")
            return Compiled(self, self._executable(option_overrides(dict(compiler_options))))
        if self.shardings is not None or program_placement(self.ir) is not None:
            compiled = Compiled(self, None)  # (partitioned over several devices)
            compiled.runtime_executable()  # (compiled now, as a one-device program is)
            return compiled
        return Compiled(self, self._executable())

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost estimate ("flops", "transcendentals", "bytes accessed", ...) of the compiled program."""
        return self.compile().cost_analysis()

    def __repr__(self) -> str:
        return f"<Lowered {self.name}>"


class HloText(str):
    """HLO module text, with XlaComputation's as_hlo_text() (Lowered.compiler_ir(dialect="hlo"))."""

    def as_hlo_text(self) -> str:
        return str(self)


class CompiledMemoryStats(dict):
    """Memory statistics of a compiled program in bytes (as JAX's: argument, output, alias, temp and generated
    code sizes, their host counterparts, and peak memory), readable as attributes or keys."""

    def __getattr__(self, name: str) -> int:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Compiled(_RuntimeCompiled):
    """A compiled function (jit(f).lower(...).compile()), called as the function is without its static
    arguments; `.as_text()` is the optimized HLO, `.cost_analysis()`, `.memory_analysis()`."""

    def __init__(self, lowered: Lowered, executable: Any):
        super().__init__(lowered, executable)
        self.in_tree = lowered.in_tree
        self.args_info = lowered.args_info
        self.out_info = lowered.out_info

    out_tree = property(lambda self: self.ir.out_tree)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise self._structure_error(args, kwargs, tree)
        mismatch = first_mismatch(args, kwargs, leaves, self.ir.in_avals, skip_non_arrays=True)
        if mismatch is not None:
            where, expected, got = mismatch
            raise TypeError(f"{self.name}: {where}: expected {expected.str_short()}, got {got.str_short()} (a compiled "
                            "function takes the types it was lowered for)")
        outs = self.call_flat(leaves)
        return self.ir.out_tree.unflatten(outs) if self.ir.out_tree is not None else outs

    call = __call__

    def _structure_error(self, args: tuple[Any, ...], kwargs: dict[str, Any], tree: PyTreeDef) -> TypeError:
        expected_args, expected_kwargs = self.args_info
        if len(args) != len(expected_args):
            kinds = ", ".join(_short(info) for info in expected_args)
            return TypeError(f"{self.name}: expected {len(expected_args)} arguments ({kinds}), got {len(args)} "
                             "(static arguments are left out of a compiled function's call)")
        if sorted(kwargs) != sorted(expected_kwargs):
            return TypeError(f"{self.name}: expected the keyword arguments {sorted(expected_kwargs)}, got "
                             f"{sorted(kwargs)}")
        return TypeError(f"{self.name}: called with arguments of structure {tree}, but it was compiled for "
                         f"{self.in_tree}")

    def as_text(self) -> str:
        """The HLO module XLA compiled, after its optimizations (fusions, layouts; for a program partitioned over
        several devices, one device's program with the collectives XLA inserted), as text."""
        _, code = self.runtime_executable().optimized_program()
        return hlo_module_text(code)

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost analysis of the compiled program: "flops", "transcendentals", "bytes accessed", ..."""
        return self.runtime_executable().cost_analysis()

    def memory_analysis(self) -> CompiledMemoryStats:
        return CompiledMemoryStats(self.runtime_executable().memory_stats())

    def runtime_executable(self) -> Any:
        """The PJRT executable (for a partitioned program, the one its calls run: compiled here if need be)."""
        if self.executable is not None:
            return self.executable
        return self._partitioned().executable

    def _partitioned(self) -> Any:
        """The program partitioned with the shardings it was lowered for (a program over several devices)."""
        ins, outs = self.preset_shardings or (None, None)
        return self.spmd_program([None] * len(self.in_avals), ins, outs)

    @property
    def input_shardings(self) -> Any:
        """The shardings of the arguments (as a pytree (args, kwargs), as JAX's Compiled.input_shardings)."""
        if self.executable is not None:
            device = self.executable._device
            return tree_unflatten(self.in_tree, [SingleDeviceSharding(device)] * len(self.in_avals))
        return tree_unflatten(self.in_tree, self._partitioned().in_shardings)

    @property
    def output_shardings(self) -> Any:
        """The shardings of the results (a pytree as the results), XLA's choice where none was given."""
        if self.executable is not None:
            device = self.executable._device
            shardings = [SingleDeviceSharding(device)] * len(self.out_avals)
        else:
            shardings = self._partitioned().out_shardings
        return self.ir.out_tree.unflatten(shardings) if self.ir.out_tree is not None else shardings

    def __repr__(self) -> str:
        return f"<Compiled {self.name}>"


def _short(info: Any) -> str:
    """f32[2] for a ShapeDtypeStruct, "a pytree" for a container of them."""
    if isinstance(info, ArgInfo):
        return info._aval.str_short()
    if isinstance(info, ShapeDtypeStruct):
        return info.aval.str_short()
    return f"a pytree of {len(tree_flatten(info)[0])} arrays"


__all__ = ["Compiled", "CompiledMemoryStats", "Lowered", "ShapeDtypeStruct", "Traced", "abstractify",
           "args_info_of", "donor_plan", "struct_of", "warn_unusable", "ArgInfo", "CompilerOptions", "Wrapped"]
