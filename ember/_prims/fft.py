"""The fast Fourier transform: one primitive, `fft`, over the trailing 1 to 3 dimensions of its operand, lowered to
StableHLO's `fft` (the CPU plugin computes it with DUCC).

fft_type is one of FFT_TYPES: "FFT" (complex -> complex), "IFFT" (its inverse, scaled by 1/n as numpy's ifft),
"RFFT" (real -> the n // 2 + 1 non-negative frequencies of the last axis) and "IRFFT" (its inverse: those
frequencies -> real values of the given lengths). fft_lengths are the lengths of the transformed (trailing)
dimensions of the real side. Every fft_type is linear, so the JVP is the primitive on the tangent; the VJPs are the
transposes under JAX's pairing Re(ct * t) (docs/complex.md): FFT's is FFT and IFFT's is IFFT (the DFT matrix is
symmetric); RFFT's is the real part of FFT of the cotangent zero-padded to the full length (RFFT is "FFT of the
real input, sliced"); IRFFT's is conj(RFFT(ct)) / n with the frequencies that stand for two (all but the zero and,
for an even length, the Nyquist one) counted twice."""
from __future__ import annotations

import enum
import math
from typing import Any, Sequence

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import static_ints
from ember._hlo import LoweringContext, i64_array
from ember._prims.elementwise import conj, mul, real
from ember._prims.shape import BatchDim, broadcast_in_dim, convert_element_type, full, linear_jvp, moveaxis
from ember._prims.slicing import concatenate, pad
from ember._prims import explicit

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


class FftType(enum.IntEnum):
    """The kinds of transform (as jax.lax.FftType); lax.fft takes a member or its name."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


fft_p = Primitive("fft", checks=NAN_CHECK)
fft_p.def_rule("sharding_rule", explicit.same_as(0))  # (as JAX: XLA partitions a split FFT dimension)


def _real_side_shape(x: ShapedArray, fft_type: str, fft_lengths: tuple[int, ...]) -> tuple[int, ...]:
    """The trailing dimensions the operand must have."""
    if fft_type == "IRFFT":
        return fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    return fft_lengths


@fft_p.def_rule("abstract_eval")
def _fft_abstract_eval(x: ShapedArray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> ShapedArray:
    if fft_type not in FFT_TYPES:
        raise TypeError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise TypeError(f"fft: transforms 1 to 3 trailing dimensions, got fft_lengths {fft_lengths}")
    if k > x.ndim:
        raise TypeError(f"fft: fft_lengths {fft_lengths} name more dimensions than {x.str_short()} has")
    if any(n < 1 for n in fft_lengths) and fft_type in ("RFFT", "IRFFT"):
        raise TypeError(f"fft: {fft_type} needs positive fft_lengths, got {fft_lengths}")
    if fft_type == "RFFT":
        if x.dtype not in (dt.float32, dt.float64):
            raise TypeError(f"fft: RFFT needs a float32 or float64 operand, got {x.str_short()}")
    elif not dt.is_complex(x.dtype):
        raise TypeError(f"fft: {fft_type} needs a complex64 or complex128 operand, got {x.str_short()}")
    want = _real_side_shape(x, fft_type, fft_lengths)
    if x.shape[x.ndim - k:] != want:
        raise TypeError(f"fft: {fft_type} with fft_lengths {fft_lengths} needs trailing dimensions {want}, got "
                        f"{x.str_short()}")
    batch = x.shape[:x.ndim - k]
    if fft_type == "RFFT":
        return ShapedArray(batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,), dt.complex_dtype(x.dtype))
    if fft_type == "IRFFT":
        return ShapedArray(batch + fft_lengths, dt.real_dtype(x.dtype))
    return ShapedArray(x.shape, x.dtype)


@fft_p.def_rule("lowering")
def _fft_lowering(ctx: LoweringContext, x: str, *, fft_type: str, fft_lengths: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.fft", [x], ctx.aval_out, {
        "fft_type": f"#stablehlo<fft_type {fft_type}>", "fft_length": i64_array(fft_lengths)})]


fft_p.def_rule("jvp", linear_jvp(fft_p))


def _rfft_transpose(ct: Any, fft_lengths: tuple[int, ...]) -> Any:
    """RFFT(x) = slice(FFT(complex(x))): its transpose is Re(FFT(ct zero-padded to the full last length))."""
    aval = aval_of(ct)
    missing = fft_lengths[-1] - aval.shape[-1]
    config = [(0, 0, 0)] * (aval.ndim - 1) + [(0, missing, 0)]
    padded = pad(ct, full((), 0, aval.dtype), config)
    return real(fft_p.bind(padded, fft_type="FFT", fft_lengths=fft_lengths))


def _irfft_transpose(ct: Any, fft_lengths: tuple[int, ...]) -> Any:
    """IRFFT's transpose: conj(RFFT(ct)) / n, the frequencies that stand for a conjugate pair weighted by 2."""
    x = fft_p.bind(ct, fft_type="RFFT", fft_lengths=fft_lengths)
    aval = aval_of(x)
    m, odd = aval.shape[-1], fft_lengths[-1] % 2
    part = dt.real_dtype(aval.dtype)
    pieces = [full((1,), 1.0, part), full((m - 2 + odd,), 2.0, part), full((1 - odd,), 1.0, part)]
    weights = concatenate([p for p in pieces if aval_of(p).shape[0] > 0], 0)
    weights = mul(weights, full((), 1.0 / math.prod(fft_lengths), part))
    scale = broadcast_in_dim(convert_element_type(weights, aval.dtype), aval.shape, (aval.ndim - 1,))
    return conj(mul(scale, x))


@fft_p.def_rule("vjp")
def _fft_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, fft_type: str,
             fft_lengths: tuple[int, ...]) -> list[Any]:
    ct = cts[0]
    if fft_type == "RFFT":
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == "IRFFT":
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


@fft_p.def_rule("batching")
def _fft_batching(args: list[Any], dims: list[BatchDim], *, fft_type: str, fft_lengths: tuple[int, ...]
                  ) -> tuple[list[Any], list[BatchDim]]:
    """The transform acts on trailing dimensions: a batch dimension among the leading ones stays where it is."""
    x, d = args[0], dims[0]
    if d >= aval_of(x).ndim - len(fft_lengths):
        x, d = moveaxis(x, d, 0), 0
    return [fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)], [d]


def fft(x: Any, fft_type: str, fft_lengths: Sequence[int]) -> Any:
    """The FFT of x's trailing len(fft_lengths) dimensions (like jax.lax.fft; fft_type a name of FFT_TYPES or an
    object whose name is one, such as jax.lax.FftType.FFT)."""
    name = getattr(fft_type, "name", fft_type)
    if name not in FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    lengths = static_ints("fft", "fft_lengths", fft_lengths)
    return fft_p.bind(x, fft_type=str(name), fft_lengths=tuple(int(n) for n in lengths))


__all__ = ["fft", "FftType"]
