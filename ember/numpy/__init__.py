"""ember.numpy: numpy's API on ember arrays, with numpy-style broadcasting and JAX's dtype promotion
(Python scalars are weakly typed: x_f16 * 2.0 stays float16)."""
# The implementation lives in ember._numpy; importing ember._numpy.methods installs the operators and methods
# of Array and Tracer.
from ember._numpy import methods as _methods  # noqa: F401
from ember._numpy.logexp import logaddexp as logaddexp, logsumexp as logsumexp
from ember._numpy.dtypes import bfloat16 as bfloat16
from ember._numpy.dtypes import bool_ as bool_
from ember._numpy.dtypes import dtype as dtype
from ember._numpy.dtypes import e as e
from ember._numpy.dtypes import finfo as finfo
from ember._numpy.dtypes import float16 as float16
from ember._numpy.dtypes import float32 as float32
from ember._numpy.dtypes import float64 as float64
from ember._numpy.dtypes import iinfo as iinfo
from ember._numpy.dtypes import inf as inf
from ember._numpy.dtypes import int8 as int8
from ember._numpy.dtypes import int16 as int16
from ember._numpy.dtypes import int32 as int32
from ember._numpy.dtypes import int64 as int64
from ember._numpy.dtypes import nan as nan
from ember._numpy.dtypes import ndarray as ndarray
from ember._numpy.dtypes import newaxis as newaxis
from ember._numpy.dtypes import pi as pi
from ember._numpy.dtypes import uint8 as uint8
from ember._numpy.dtypes import uint16 as uint16
from ember._numpy.dtypes import uint32 as uint32
from ember._numpy.dtypes import uint64 as uint64
from ember._numpy.promotion import broadcast_shapes as broadcast_shapes
from ember._numpy.promotion import promote_types as promote_types
from ember._numpy.promotion import result_type as result_type
from ember._numpy.selection import argwhere as argwhere
from ember._numpy.selection import compress as compress
from ember._numpy.selection import diff as diff
from ember._numpy.selection import extract as extract
from ember._numpy.selection import flatnonzero as flatnonzero
from ember._numpy.selection import flip as flip
from ember._numpy.selection import fliplr as fliplr
from ember._numpy.selection import flipud as flipud
from ember._numpy.selection import nonzero as nonzero
from ember._numpy.selection import put_along_axis as put_along_axis
from ember._numpy.selection import roll as roll
from ember._numpy.selection import rot90 as rot90
from ember._numpy.selection import select as select
from ember._numpy.selection import take as take
from ember._numpy.selection import take_along_axis as take_along_axis
from ember._numpy.selection import tri as tri
from ember._numpy.selection import tril as tril
from ember._numpy.selection import triu as triu
from ember._numpy.sorting import argpartition as argpartition
from ember._numpy.sorting import argsort as argsort
from ember._numpy.sorting import lexsort as lexsort
from ember._numpy.sorting import partition as partition
from ember._numpy.sorting import searchsorted as searchsorted
from ember._numpy.sorting import sort as sort
from ember._numpy.sorting import unique as unique
from ember._numpy.sorting import unique_all as unique_all
from ember._numpy.sorting import unique_counts as unique_counts
from ember._numpy.sorting import unique_inverse as unique_inverse
from ember._numpy.sorting import unique_values as unique_values
from ember._numpy.cumulative import cumprod as cumprod
from ember._numpy.cumulative import cumsum as cumsum
from ember._numpy.cumulative import cumulative_prod as cumulative_prod
from ember._numpy.cumulative import cumulative_sum as cumulative_sum
from ember._numpy.cumulative import nancumprod as nancumprod
from ember._numpy.cumulative import nancumsum as nancumsum
from ember._numpy.ufuncs import abs as abs  # noqa: A004
from ember._numpy.ufuncs import absolute as absolute
from ember._numpy.ufuncs import add as add
from ember._numpy.ufuncs import arctan2 as arctan2
from ember._numpy.ufuncs import around as around
from ember._numpy.ufuncs import bitwise_and as bitwise_and
from ember._numpy.ufuncs import bitwise_not as bitwise_not
from ember._numpy.ufuncs import bitwise_or as bitwise_or
from ember._numpy.ufuncs import bitwise_xor as bitwise_xor
from ember._numpy.ufuncs import ceil as ceil
from ember._numpy.ufuncs import clip as clip
from ember._numpy.ufuncs import cos as cos
from ember._numpy.ufuncs import divide as divide
from ember._numpy.ufuncs import divmod as divmod  # noqa: A004
from ember._numpy.ufuncs import equal as equal
from ember._numpy.ufuncs import exp as exp
from ember._numpy.ufuncs import exp2 as exp2
from ember._numpy.ufuncs import expm1 as expm1
from ember._numpy.ufuncs import fix as fix
from ember._numpy.ufuncs import floor as floor
from ember._numpy.ufuncs import floor_divide as floor_divide
from ember._numpy.ufuncs import fmod as fmod
from ember._numpy.ufuncs import greater as greater
from ember._numpy.ufuncs import greater_equal as greater_equal
from ember._numpy.ufuncs import invert as invert
from ember._numpy.ufuncs import isfinite as isfinite
from ember._numpy.ufuncs import less as less
from ember._numpy.ufuncs import less_equal as less_equal
from ember._numpy.ufuncs import log as log
from ember._numpy.ufuncs import log10 as log10
from ember._numpy.ufuncs import log1p as log1p
from ember._numpy.ufuncs import log2 as log2
from ember._numpy.ufuncs import logical_and as logical_and
from ember._numpy.ufuncs import logical_not as logical_not
from ember._numpy.ufuncs import logical_or as logical_or
from ember._numpy.ufuncs import logical_xor as logical_xor
from ember._numpy.ufuncs import maximum as maximum
from ember._numpy.ufuncs import minimum as minimum
from ember._numpy.ufuncs import mod as mod
from ember._numpy.ufuncs import multiply as multiply
from ember._numpy.ufuncs import negative as negative
from ember._numpy.ufuncs import not_equal as not_equal
from ember._numpy.ufuncs import positive as positive
from ember._numpy.ufuncs import power as power
from ember._numpy.ufuncs import reciprocal as reciprocal
from ember._numpy.ufuncs import remainder as remainder
from ember._numpy.ufuncs import rint as rint
from ember._numpy.ufuncs import round as round  # noqa: A004
from ember._numpy.ufuncs import sign as sign
from ember._numpy.ufuncs import sin as sin
from ember._numpy.ufuncs import sqrt as sqrt
from ember._numpy.ufuncs import square as square
from ember._numpy.ufuncs import subtract as subtract
from ember._numpy.ufuncs import tan as tan
from ember._numpy.ufuncs import tanh as tanh
from ember._numpy.ufuncs import true_divide as true_divide
from ember._numpy.ufuncs import trunc as trunc
from ember._numpy.ufuncs import where as where
from ember._numpy.creation import arange as arange
from ember._numpy.creation import array as array
from ember._numpy.creation import asarray as asarray
from ember._numpy.creation import eye as eye
from ember._numpy.creation import full as full
from ember._numpy.creation import full_like as full_like
from ember._numpy.creation import identity as identity
from ember._numpy.creation import linspace as linspace
from ember._numpy.creation import ones as ones
from ember._numpy.creation import ones_like as ones_like
from ember._numpy.creation import zeros as zeros
from ember._numpy.creation import zeros_like as zeros_like
from ember._numpy.shape import array_split as array_split
from ember._numpy.shape import astype as astype
from ember._numpy.shape import atleast_1d as atleast_1d
from ember._numpy.shape import atleast_2d as atleast_2d
from ember._numpy.shape import broadcast_to as broadcast_to
from ember._numpy.shape import concatenate as concatenate
from ember._numpy.shape import dsplit as dsplit
from ember._numpy.shape import expand_dims as expand_dims
from ember._numpy.shape import hsplit as hsplit
from ember._numpy.shape import hstack as hstack
from ember._numpy.shape import moveaxis as moveaxis
from ember._numpy.shape import ndim as ndim
from ember._numpy.shape import ravel as ravel
from ember._numpy.shape import reshape as reshape
from ember._numpy.shape import shape as shape
from ember._numpy.shape import size as size
from ember._numpy.shape import split as split
from ember._numpy.shape import squeeze as squeeze
from ember._numpy.shape import stack as stack
from ember._numpy.shape import swapaxes as swapaxes
from ember._numpy.shape import transpose as transpose
from ember._numpy.shape import vsplit as vsplit
from ember._numpy.shape import vstack as vstack
from ember._numpy.reductions import all as all  # noqa: A004
from ember._numpy.reductions import amax as amax
from ember._numpy.reductions import amin as amin
from ember._numpy.reductions import any as any  # noqa: A004
from ember._numpy.reductions import argmax as argmax
from ember._numpy.reductions import argmin as argmin
from ember._numpy.reductions import max as max  # noqa: A004
from ember._numpy.reductions import mean as mean
from ember._numpy.reductions import min as min  # noqa: A004
from ember._numpy.reductions import std as std
from ember._numpy.reductions import sum as sum  # noqa: A004
from ember._numpy.reductions import var as var
from ember._numpy.linalg import dot as dot
from ember._numpy.linalg import inner as inner
from ember._numpy.linalg import matmul as matmul
from ember._numpy.linalg import outer as outer
from ember._numpy.linalg import tensordot as tensordot
from ember._numpy.linalg import vdot as vdot
from ember._numpy.einsum import einsum as einsum

__all__ = [
    "abs", "absolute", "add", "all", "amax", "amin", "any", "arange", "arctan2", "argmax", "argmin",
    "around", "array", "array_split", "asarray", "astype", "atleast_1d", "atleast_2d", "bfloat16", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "bool_", "broadcast_shapes", "broadcast_to", "ceil", "clip",
    "concatenate", "cos", "divide", "divmod", "dot", "dsplit", "dtype", "e", "einsum", "equal", "exp", "exp2",
    "expand_dims", "expm1", "eye", "finfo", "fix", "float16", "float32", "float64", "floor", "floor_divide", "fmod",
    "full", "full_like", "greater", "greater_equal", "hsplit", "hstack", "identity", "iinfo", "inf", "inner",
    "int16", "int32", "int64", "int8", "invert", "isfinite", "less", "less_equal", "linspace", "log", "log10",
    "log1p", "log2", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "matmul",
    "max", "maximum", "mean", "min", "minimum", "mod", "moveaxis", "multiply", "nan", "ndarray", "ndim", "negative",
    "newaxis", "not_equal", "ones", "ones_like", "outer", "pi", "positive", "power", "promote_types", "ravel",
    "reciprocal", "remainder", "reshape", "result_type", "rint", "round", "shape", "sign", "sin", "size", "split",
    "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "tan", "tanh", "tensordot",
    "transpose", "true_divide", "trunc", "uint16", "uint32", "uint64", "uint8", "var", "vdot", "vsplit", "vstack",
    "where", "zeros", "zeros_like",
    # selection
    "argwhere", "compress", "diff", "extract", "flatnonzero", "flip", "fliplr", "flipud", "nonzero",
    "put_along_axis", "roll", "rot90", "select", "take", "take_along_axis", "tri", "tril", "triu",
    # sorting
    "argpartition", "argsort", "lexsort", "partition", "searchsorted", "sort", "unique", "unique_all",
    "unique_counts", "unique_inverse", "unique_values",
    # cumulative
    "cumprod", "cumsum", "cumulative_prod", "cumulative_sum", "nancumprod", "nancumsum",
]
