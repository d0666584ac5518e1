"""Argument checks of the primitives' abstract evaluation rules (clear errors naming the op, shapes and dtypes),
and the coercion of Python scalars given to strict lax functions."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import ShapedArray, aval_of, is_python_scalar, scalar_literal
from ember._core import dtypes as dt

FLOAT = "f"
NUMERIC = "fiu"
INTEGRAL = "iub"
ANY = "fiub"
# The same with complex ('c'): the primitives whose kinds include it accept complex64/complex128 operands.
INEXACT = "fc"
NUMERIC_C = "fiuc"
ANY_C = "fiubc"


def dtype_kind(dtype: Any) -> str:
    """The kind letter of check_dtype: 'f', 'c', 'i', 'u' or 'b'."""
    return ("f" if dt.is_float(dtype) else "c" if dt.is_complex(dtype) else "b" if dt.is_bool(dtype)
            else "i" if dt.is_signed_int(dtype) else "u" if dt.is_unsigned_int(dtype) else "V")  # (V: a token)


def check_dtype(op: str, aval: ShapedArray, allowed: str, arg: str = "operand") -> None:
    """allowed: a string of kinds, 'f' float, 'c' complex, 'i' signed int, 'u' unsigned int, 'b' bool. A complex
    operand of a primitive that does not accept complex is refused here, naming the primitive and the dtype."""
    kind = dtype_kind(aval.dtype)
    if kind not in allowed:
        names = {"f": "floating-point", "c": "complex", "i": "signed integer", "u": "unsigned integer",
                 "b": "boolean", "V": "a token"}
        wanted = " or ".join(names[k] for k in allowed)
        extra = " (this primitive does not accept complex dtypes)" if kind == "c" else ""
        raise TypeError(f"{op}: {arg} must be {wanted}, got {aval.str_short()}{extra}")


_JAX_REFUSES = "JAX's narrow types take part in few operations, and JAX refuses this one too"


def refuse_narrow(op: str, aval: ShapedArray, kinds: str, arg: str = "operand", why: str = _JAX_REFUSES) -> None:
    """A TypeError naming op and the dtype where JAX 0.10.2 refuses an op on JAX's narrow types, or XLA's CPU
    cannot compute it (each case measured: tests/test_narrow_dtypes.py; `why` says which). kinds: 'f' the narrow
    floats (float8_*, float4_e2m1fn), 'i' the narrow integers (int4, uint4, int2, uint2), 's' the 4- and 2-bit
    types (float4_e2m1fn and the narrow integers, which XLA's CPU packs two or four to a byte), '2' the 2-bit
    integers."""
    d = aval.dtype
    if ("f" in kinds and d in dt.NARROW_FLOATS) or ("i" in kinds and d in dt.NARROW_INTS) or \
            ("s" in kinds and dt.is_sub_byte(d)) or ("2" in kinds and d in (dt.int2, dt.uint2)):
        wanted = "x.astype('float32')" if dt.is_float(d) else "x.astype('int8')"
        raise TypeError(f"{op} does not accept dtype {d.name} ({arg} {aval.str_short()}): {why}; convert first, "
                        f"e.g. {wanted}")


# Why the 2-bit integers are refused where JAX 0.10.2 fails or computes wrong numbers on them (XLA's CPU)
TWO_BIT_FAILS = "XLA's CPU cannot compile it for 2-bit integers (JAX 0.10.2 fails too)"
TWO_BIT_MISSORTS = "XLA's CPU orders 2-bit integers wrongly (JAX 0.10.2 returns its wrong order)"


def check_same_dtypes(op: str, avals: Sequence[ShapedArray]) -> None:
    if len({a.dtype for a in avals}) > 1:
        got = ", ".join(a.str_short() for a in avals)
        raise TypeError(f"{op}: operands must have the same dtype, got {got} "
                        "(use ember.numpy for automatic promotion, or lax.convert_element_type)")


def elementwise_shape(op: str, avals: Sequence[ShapedArray]) -> tuple[int, ...]:
    """Operands of an elementwise op have one shape, except that rank-0 operands broadcast."""
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        got = ", ".join(a.str_short() for a in avals)
        raise TypeError(f"{op}: operands must have equal shapes (or be scalars), got {got} "
                        "(use ember.numpy for numpy-style broadcasting)")
    return shapes.pop() if shapes else ()


def all_weak(avals: Sequence[ShapedArray]) -> bool:
    return all(a.weak_type for a in avals)


def coerce_scalars(args: Sequence[Any]) -> list[Any]:
    """Python scalars given to a strict lax op take the dtype of the op's array operands (weakly, like JAX)."""
    ref = next((aval_of(a) for a in args if not is_python_scalar(a)), None)
    if ref is None:
        return list(args)
    return [scalar_literal(a, ref.dtype, ref.weak_type) if is_python_scalar(a) else a for a in args]
