"""Custom calls to ember's own XLA FFI handlers: emitting them, and knowing which exist in this process.

The handlers are C functions that the runtime registers with the PJRT plugin through its FFI extension
(ember/_runtime/ffi.py). Lowering rules sit below the runtime, so a family of handlers (all targets whose name
starts with a prefix, e.g. "ember_lapack_") is made known here by a *provider* the runtime installs: a function that
loads the family (its extension module, the libraries it calls) on first use and returns the names it provides, or
an empty set when it cannot (a missing extension or library). A lowering asks `available(name)` and emits
`custom_call(...)`, or falls back to XLA's own ops. (The providers' registry is ember/_hlo/targets.py, below the
lowering interpreter, which asks it too: row regions, ember/_hlo/row_fusion.py.)"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember._core import dtypes as dt
from ember._core.dtypes import ShapedArray
from ember._hlo.emitter import dense_text, emit_custom_call, row_major, scalar_text, value_rank
from ember._hlo.targets import available, set_provider, unavailable_reason
from ember._hlo.lower import EFFECT, LoweringContext

def column_major(rank: int) -> tuple[int, ...]:
    """The minor-to-major layout of an array whose last two dimensions are a column-major (Fortran) matrix and
    whose leading dimensions are a row-major batch of them (row-major for rank < 2)."""
    if rank < 2:
        return row_major(rank)
    return (rank - 2, rank - 1) + tuple(range(rank - 3, -1, -1))


def rank_of(ctx: LoweringContext, value: str) -> int:
    """The rank of an SSA value of the body being emitted (ember._hlo.emitter.value_rank)."""
    return value_rank(ctx.emitter, value)


def custom_call(ctx: LoweringContext, target: str, operands: Sequence[str], results: Sequence[ShapedArray],
                attrs: dict[str, int] | None = None, operand_layouts: Sequence[Sequence[int]] | None = None,
                result_layouts: Sequence[Sequence[int]] | None = None, *, has_side_effect: bool = False,
                ordered: bool = False, once: bool = False) -> list[str]:
    """Emit `stablehlo.custom_call @target` to a typed FFI handler (api_version 4): integer attrs are passed to
    the handler as int64 scalars (its call frame's attributes, sorted by name); the layouts (minor-to-major, one
    per operand/result; row-major when omitted) are the memory layouts XLA hands the handler its buffers in.

    has_side_effect: XLA keeps the call though its results are unused, and never merges two of them. ordered: the
    call also takes and returns the body's effect value (an int8 scalar, see LoweringContext.effect), so
    XLA runs the ordered calls of a body in program order; the handler is told by the attributes effect_in and
    effect_out. A call without results returns an effect value (unused unless ordered), as XLA needs a result."""
    if operand_layouts is None:
        operand_layouts = [row_major(rank_of(ctx, o)) for o in operands]
    result_layouts = [row_major(a.ndim) for a in results] if result_layouts is None else result_layouts
    effect_out = ordered or not results  # (once: see emit_custom_call)
    if ordered or effect_out:
        attrs = {**(attrs or {}), "effect_in": int(ordered), "effect_out": int(effect_out)}
    out = emit_custom_call(ctx.emitter, target, ([ctx.effect] if ordered else []) + list(operands),
                           ([EFFECT] if effect_out else []) + list(results), attrs or {}, has_side_effect,
                           ([()] if ordered else []) + list(operand_layouts),
                           ([()] if effect_out else []) + list(result_layouts), once=once)
    if ordered:
        ctx.effect = out[0]
    return out[1:] if effect_out else out


# ---------------------------------------------------------------------------------------------------------------
# A user's FFI call (ember.ffi.ffi_call): its keyword arguments become the handler's attributes. They are params of
# an IR equation, so they must hash: arrays and dicts travel as AttrArray and AttrDict.
class AttrArray:
    """An array attribute, hashable by value (its dtype, shape and bytes)."""
    __slots__ = ("value", "_key")

    def __init__(self, value: np.ndarray):
        self.value = np.array(value, copy=True)
        self.value.flags.writeable = False
        self._key = (self.value.dtype.str, self.value.shape, self.value.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttrArray) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return repr(self.value)


class AttrDict:
    """A dictionary attribute (str keys), hashable by its sorted items."""
    __slots__ = ("items",)

    def __init__(self, items: tuple[tuple[str, Any], ...]):
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttrDict) and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items) + "}"


def hashable_attribute(name: str, value: Any) -> Any:
    """An ffi_call keyword argument as an equation param: numpy arrays and dicts wrapped, anything else as given
    if it hashes (a list does not: JAX's TypeError); attribute_text checks the types."""
    if isinstance(value, np.ndarray):
        return AttrArray(value)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"ffi_call: the dictionary attribute {name!r} must have str keys, got "
                            f"{sorted(map(repr, value))}")
        return AttrDict(tuple((k, hashable_attribute(f"{name}.{k}", v)) for k, v in sorted(value.items())))
    try:
        hash(value)
    except TypeError as err:
        raise TypeError(f"Non-hashable keyword argument to ffi_call {name}: {value}") from err
    return value


def _string_text(text: str) -> str:
    """An MLIR string attribute: printable ASCII as itself, anything else as a backslash and two hex digits."""
    return '"' + "".join(f"\\{b:02X}" if b in b'"\\' or not 0x20 <= b < 0x7F else chr(b)
                         for b in text.encode()) + '"'


_INT64 = (-2**63, 2**63 - 1)


def attribute_text(name: str, value: Any) -> str:
    """The MLIR attribute an ffi_call keyword argument is, as JAX writes it (the handler reads it through XLA's
    FFI attributes): a Python bool `true`/`false`, int an i64 scalar, float an f64 one; a numpy scalar of its own
    type; a str a string; a numpy array a dense array of its dtype; a tuple an array of attributes; a dict a
    dictionary. Anything else is JAX's TypeError."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, int) and not isinstance(value, np.generic):
        if not _INT64[0] <= value <= _INT64[1]:
            raise OverflowError(f"ffi_call: the integer attribute {name}={value} does not fit in int64")
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{scalar_text(value, np.dtype(np.float64))} : f64"
    if isinstance(value, np.generic):
        dtype = np.dtype(value.dtype)
        if dtype not in dt.SUPPORTED_DTYPES or dt.is_complex(dtype):
            raise TypeError(f"Unsupported scalar attribute type: {type(value)} (ffi_call attribute {name!r})")
        return f"{scalar_text(value, dtype)} : {dt.mlir_type(dtype)}"
    if isinstance(value, str):
        return _string_text(value)
    if isinstance(value, AttrArray):
        array = value.value
        if array.dtype not in dt.SUPPORTED_DTYPES:
            raise TypeError(f"ffi_call: the array attribute {name!r} has dtype {array.dtype}, which ember has no "
                            "MLIR type for")
        return dense_text(array, ShapedArray(array.shape, array.dtype))
    if isinstance(value, AttrDict):
        return "{" + ", ".join(f"{_key_text(k)} = {attribute_text(f'{name}.{k}', v)}" for k, v in value.items) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(attribute_text(f"{name}[{i}]", v) for i, v in enumerate(value)) + "]"
    raise TypeError(f"No attribute handler defined for type: {type(value)} (ffi_call attribute {name!r})")


def _key_text(key: str) -> str:
    """A dictionary key: a bare identifier where MLIR takes one, else a string."""
    bare = key and (key[0].isalpha() or key[0] == "_") and all(c.isalnum() or c in "_$." for c in key) and key.isascii()
    return key if bare else _string_text(key)


def config_text(attributes: Sequence[tuple[str, Any]]) -> str:
    """The backend_config dictionary of a user's FFI call: its attributes, by name."""
    return "{" + ", ".join(f"{_key_text(k)} = {attribute_text(k, v)}" for k, v in attributes) + "}"


def user_custom_call(ctx: LoweringContext, target: str, operands: Sequence[str], results: Sequence[ShapedArray],
                     attributes: Sequence[tuple[str, Any]], operand_layouts: Sequence[Sequence[int]],
                     result_layouts: Sequence[Sequence[int]], aliases: Sequence[tuple[int, int]] = (), *,
                     has_side_effect: bool = False) -> list[str]:
    """Emit `stablehlo.custom_call @target` to a handler a user registered (ember.ffi): its attributes (see
    attribute_text) and the layouts (minor-to-major) it asked for; aliases pairs (operand, result) that share a
    buffer. A call without results (a side effect alone) returns the effect value XLA needs as a result."""
    config = config_text(attributes)
    if results:
        return emit_custom_call(ctx.emitter, target, list(operands), list(results), {}, has_side_effect,
                                list(operand_layouts), list(result_layouts), config=config, aliases=aliases)
    emit_custom_call(ctx.emitter, target, list(operands), [EFFECT], {}, has_side_effect, list(operand_layouts), [()],
                     config=config)
    return []


__all__ = ["AttrArray", "AttrDict", "attribute_text", "available", "column_major", "config_text", "custom_call",
           "hashable_attribute", "rank_of", "row_major", "set_provider", "unavailable_reason", "user_custom_call"]
