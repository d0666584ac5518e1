"""ember.numpy: numpy's API on ember arrays, with numpy-style broadcasting and JAX's dtype promotion
(Python scalars are weakly typed: x_f16 * 2.0 stays float16)."""
# The implementation lives in ember._numpy; importing ember._numpy.methods installs the operators and methods
# of Array and Tracer.
from ember._numpy import methods as _methods  # noqa: F401

# The Python array API standard: the versions whose names and semantics ember.numpy follows (see
# docs/conformance.md for what the conformance suite finds)
__array_api_version__ = "2023.12"
__array_api_supported_versions__ = ("2021.12", "2022.12", "2023.12")
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

from ember._numpy.mathfuncs import isnan as isnan
from ember._numpy.mathfuncs import isinf as isinf
from ember._numpy.mathfuncs import isposinf as isposinf
from ember._numpy.mathfuncs import isneginf as isneginf
from ember._numpy.mathfuncs import signbit as signbit
from ember._numpy.mathfuncs import copysign as copysign
from ember._numpy.mathfuncs import hypot as hypot
from ember._numpy.mathfuncs import logaddexp2 as logaddexp2
from ember._numpy.mathfuncs import fmax as fmax
from ember._numpy.mathfuncs import fmin as fmin
from ember._numpy.mathfuncs import heaviside as heaviside
from ember._numpy.mathfuncs import deg2rad as deg2rad
from ember._numpy.mathfuncs import rad2deg as rad2deg
from ember._numpy.mathfuncs import radians as radians
from ember._numpy.mathfuncs import degrees as degrees
from ember._numpy.mathfuncs import fabs as fabs
from ember._numpy.mathfuncs import sinc as sinc
from ember._numpy.mathfuncs import frexp as frexp
from ember._numpy.mathfuncs import ldexp as ldexp
from ember._numpy.mathfuncs import modf as modf
from ember._numpy.mathfuncs import spacing as spacing
from ember._numpy.mathfuncs import nextafter as nextafter
from ember._numpy.mathfuncs import float_power as float_power
from ember._numpy.mathfuncs import nan_to_num as nan_to_num
from ember._numpy.mathfuncs import gcd as gcd
from ember._numpy.mathfuncs import lcm as lcm
from ember._numpy.mathfuncs import left_shift as left_shift
from ember._numpy.mathfuncs import right_shift as right_shift
from ember._numpy.mathfuncs import bitwise_left_shift as bitwise_left_shift
from ember._numpy.mathfuncs import bitwise_right_shift as bitwise_right_shift
from ember._numpy.mathfuncs import bitwise_count as bitwise_count
from ember._numpy.mathfuncs import bitwise_invert as bitwise_invert
from ember._numpy.mathfuncs import arcsin as arcsin
from ember._numpy.mathfuncs import asin as asin
from ember._numpy.mathfuncs import arccos as arccos
from ember._numpy.mathfuncs import acos as acos
from ember._numpy.mathfuncs import arctan as arctan
from ember._numpy.mathfuncs import atan as atan
from ember._numpy.mathfuncs import sinh as sinh
from ember._numpy.mathfuncs import cosh as cosh
from ember._numpy.mathfuncs import arcsinh as arcsinh
from ember._numpy.mathfuncs import asinh as asinh
from ember._numpy.mathfuncs import arccosh as arccosh
from ember._numpy.mathfuncs import acosh as acosh
from ember._numpy.mathfuncs import arctanh as arctanh
from ember._numpy.mathfuncs import atanh as atanh
from ember._numpy.mathfuncs import cbrt as cbrt
from ember._numpy.mathfuncs import i0 as i0
from ember._numpy.mathfuncs import real as real
from ember._numpy.mathfuncs import imag as imag
from ember._numpy.mathfuncs import conj as conj
from ember._numpy.mathfuncs import conjugate as conjugate
from ember._numpy.mathfuncs import angle as angle
from ember._numpy.mathfuncs import iscomplex as iscomplex
from ember._numpy.mathfuncs import isreal as isreal
from ember._numpy.mathfuncs import iscomplexobj as iscomplexobj
from ember._numpy.mathfuncs import isrealobj as isrealobj
from ember._numpy.mathfuncs import pow as pow  # noqa: A004
from ember._numpy.mathfuncs import atan2 as atan2
from ember._numpy.creation import fromfile as fromfile
from ember._runtime.dlpack import from_dlpack as from_dlpack
from ember._numpy.utilities import __array_namespace_info__ as __array_namespace_info__
from ember._numpy.reductions import prod as prod
from ember._numpy.statistics import nansum as nansum
from ember._numpy.statistics import nanprod as nanprod
from ember._numpy.statistics import nanmax as nanmax
from ember._numpy.statistics import nanmin as nanmin
from ember._numpy.statistics import nanmean as nanmean
from ember._numpy.statistics import nanvar as nanvar
from ember._numpy.statistics import nanstd as nanstd
from ember._numpy.statistics import nanargmax as nanargmax
from ember._numpy.statistics import nanargmin as nanargmin
from ember._numpy.statistics import count_nonzero as count_nonzero
from ember._numpy.statistics import ptp as ptp
from ember._numpy.statistics import average as average
from ember._numpy.statistics import quantile as quantile
from ember._numpy.statistics import nanquantile as nanquantile
from ember._numpy.statistics import percentile as percentile
from ember._numpy.statistics import nanpercentile as nanpercentile
from ember._numpy.statistics import median as median
from ember._numpy.statistics import nanmedian as nanmedian
from ember._numpy.statistics import cov as cov
from ember._numpy.statistics import corrcoef as corrcoef
from ember._numpy.statistics import bincount as bincount
from ember._numpy.statistics import digitize as digitize
from ember._numpy.statistics import histogram_bin_edges as histogram_bin_edges
from ember._numpy.statistics import histogram as histogram
from ember._numpy.statistics import histogram2d as histogram2d
from ember._numpy.statistics import histogramdd as histogramdd
from ember._numpy.creation import logspace as logspace
from ember._numpy.creation import geomspace as geomspace
from ember._numpy.creation import empty as empty
from ember._numpy.creation import empty_like as empty_like
from ember._numpy.creation import copy as copy  # noqa: A004
from ember._numpy.creation import fromfunction as fromfunction
from ember._numpy.creation import frombuffer as frombuffer
from ember._numpy.creation import fromiter as fromiter
from ember._numpy.creation import fromstring as fromstring
from ember._numpy.grids import indices as indices
from ember._numpy.grids import meshgrid as meshgrid
from ember._numpy.grids import mgrid as mgrid
from ember._numpy.grids import ogrid as ogrid
from ember._numpy.grids import r_ as r_
from ember._numpy.grids import c_ as c_
from ember._numpy.grids import index_exp as index_exp
from ember._numpy.grids import s_ as s_
from ember._numpy.grids import ix_ as ix_
from ember._numpy.grids import tril_indices as tril_indices
from ember._numpy.grids import triu_indices as triu_indices
from ember._numpy.grids import tril_indices_from as tril_indices_from
from ember._numpy.grids import triu_indices_from as triu_indices_from
from ember._numpy.grids import diag_indices as diag_indices
from ember._numpy.grids import diag_indices_from as diag_indices_from
from ember._numpy.grids import mask_indices as mask_indices
from ember._numpy.grids import ravel_multi_index as ravel_multi_index
from ember._numpy.grids import unravel_index as unravel_index
from ember._numpy.manipulation import atleast_3d as atleast_3d
from ember._numpy.manipulation import column_stack as column_stack
from ember._numpy.manipulation import dstack as dstack
from ember._numpy.manipulation import concat as concat
from ember._numpy.manipulation import block as block
from ember._numpy.manipulation import permute_dims as permute_dims
from ember._numpy.manipulation import matrix_transpose as matrix_transpose
from ember._numpy.manipulation import rollaxis as rollaxis
from ember._numpy.manipulation import unstack as unstack
from ember._numpy.manipulation import broadcast_arrays as broadcast_arrays
from ember._numpy.manipulation import tile as tile
from ember._numpy.manipulation import repeat as repeat
from ember._numpy.manipulation import resize as resize
from ember._numpy.manipulation import append as append
from ember._numpy.manipulation import delete as delete
from ember._numpy.manipulation import insert as insert
from ember._numpy.manipulation import trim_zeros as trim_zeros
from ember._numpy.manipulation import pad as pad
from ember._numpy.manipulation import choose as choose
from ember._numpy.manipulation import place as place
from ember._numpy.manipulation import put as put
from ember._numpy.manipulation import fill_diagonal as fill_diagonal
from ember._numpy.manipulation import diagonal as diagonal
from ember._numpy.manipulation import diag as diag
from ember._numpy.manipulation import diagflat as diagflat
from ember._numpy.manipulation import trace as trace
from ember._numpy.manipulation import apply_along_axis as apply_along_axis
from ember._numpy.manipulation import apply_over_axes as apply_over_axes
from ember._numpy.manipulation import vectorize as vectorize
from ember._numpy.manipulation import piecewise as piecewise
from ember._numpy.setops import isin as isin
from ember._numpy.setops import union1d as union1d
from ember._numpy.setops import intersect1d as intersect1d
from ember._numpy.setops import setdiff1d as setdiff1d
from ember._numpy.setops import setxor1d as setxor1d
from ember._numpy.setops import ediff1d as ediff1d
from ember._numpy.setops import isclose as isclose
from ember._numpy.setops import allclose as allclose
from ember._numpy.setops import array_equal as array_equal
from ember._numpy.setops import array_equiv as array_equiv
from ember._numpy.signal import convolve as convolve
from ember._numpy.signal import correlate as correlate
from ember._numpy.signal import polyval as polyval
from ember._numpy.signal import polyadd as polyadd
from ember._numpy.signal import polysub as polysub
from ember._numpy.signal import polymul as polymul
from ember._numpy.signal import polydiv as polydiv
from ember._numpy.signal import polyder as polyder
from ember._numpy.signal import polyint as polyint
from ember._numpy.signal import poly as poly
from ember._numpy.signal import interp as interp
from ember._numpy.signal import trapezoid as trapezoid
from ember._numpy.signal import gradient as gradient
from ember._numpy.signal import unwrap as unwrap
from ember._numpy.signal import bartlett as bartlett
from ember._numpy.signal import blackman as blackman
from ember._numpy.signal import hamming as hamming
from ember._numpy.signal import hanning as hanning
from ember._numpy.signal import kaiser as kaiser
from ember._numpy.linalg import kron as kron
from ember._numpy.linalg import cross as cross
from ember._numpy.linalg import vecdot as vecdot
from ember._numpy.linalg import matvec as matvec
from ember._numpy.linalg import vecmat as vecmat
from ember._numpy.linalg import vander as vander
from ember._numpy.einsum import einsum_path as einsum_path
from ember._numpy.utilities import can_cast as can_cast
from ember._numpy.utilities import issubdtype as issubdtype
from ember._numpy.utilities import isdtype as isdtype
from ember._numpy.utilities import isscalar as isscalar
from ember._numpy.utilities import iterable as iterable
from ember._numpy.utilities import get_printoptions as get_printoptions
from ember._numpy.utilities import set_printoptions as set_printoptions
from ember._numpy.utilities import printoptions as printoptions
from ember._numpy.utilities import array_repr as array_repr
from ember._numpy.utilities import array_str as array_str
from ember._numpy.utilities import save as save
from ember._numpy.utilities import savez as savez
from ember._numpy.utilities import load as load
from ember._numpy.utilities import packbits as packbits
from ember._numpy.utilities import unpackbits as unpackbits
from ember._numpy.dtypes import generic as generic
from ember._numpy.dtypes import number as number
from ember._numpy.dtypes import integer as integer
from ember._numpy.dtypes import signedinteger as signedinteger
from ember._numpy.dtypes import unsignedinteger as unsignedinteger
from ember._numpy.dtypes import inexact as inexact
from ember._numpy.dtypes import floating as floating
from ember._numpy.dtypes import complexfloating as complexfloating
from ember._numpy.dtypes import flexible as flexible
from ember._numpy.dtypes import character as character
from ember._numpy.dtypes import object_ as object_
from ember._numpy.dtypes import bool as bool  # noqa: A004
from ember._numpy.dtypes import int_ as int_
from ember._numpy.dtypes import uint as uint
from ember._numpy.dtypes import float_ as float_
from ember._numpy.dtypes import double as double
from ember._numpy.dtypes import single as single
from ember._numpy.dtypes import euler_gamma as euler_gamma
from ember._numpy import docstrings as _docstrings
from ember.numpy import linalg as linalg  # noqa: E402 (the array API extension, so far without factorisations)

_docstrings.apply(globals())

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
    # breadth (issue 15)
    "isnan", "isinf", "isposinf", "isneginf", "signbit", "copysign", "hypot", "logaddexp2", "fmax", "fmin",
    "heaviside", "deg2rad", "rad2deg", "radians", "degrees", "fabs", "sinc", "frexp", "ldexp", "modf", "spacing",
    "nextafter", "float_power", "nan_to_num", "gcd", "lcm", "left_shift", "right_shift", "bitwise_left_shift",
    "bitwise_right_shift", "bitwise_count", "bitwise_invert", "arcsin", "asin", "arccos", "acos", "arctan", "atan",
    "sinh", "cosh", "arcsinh", "asinh", "arccosh", "acosh", "arctanh", "atanh", "cbrt", "i0", "real", "imag",
    "conj", "conjugate", "angle", "iscomplex", "isreal", "iscomplexobj", "isrealobj", "pow", "atan2", "fromfile",
    "from_dlpack", "linalg",
    "prod",
    "nansum",
    "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "count_nonzero", "ptp",
    "average", "quantile", "nanquantile", "percentile", "nanpercentile", "median", "nanmedian", "cov", "corrcoef",
    "bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d", "histogramdd", "logspace",
    "geomspace", "empty", "empty_like", "copy", "fromfunction", "frombuffer", "fromiter", "fromstring", "indices",
    "meshgrid", "mgrid", "ogrid", "r_", "c_", "index_exp", "s_", "ix_", "tril_indices", "triu_indices",
    "tril_indices_from", "triu_indices_from", "diag_indices", "diag_indices_from", "mask_indices",
    "ravel_multi_index", "unravel_index", "atleast_3d", "column_stack", "dstack", "concat", "block", "permute_dims",
    "matrix_transpose", "rollaxis", "unstack", "broadcast_arrays", "tile", "repeat", "resize", "append", "delete",
    "insert", "trim_zeros", "pad", "choose", "place", "put", "fill_diagonal", "diagonal", "diag", "diagflat",
    "trace", "apply_along_axis", "apply_over_axes", "vectorize", "piecewise", "isin", "union1d", "intersect1d",
    "setdiff1d", "setxor1d", "ediff1d", "isclose", "allclose", "array_equal", "array_equiv", "convolve",
    "correlate", "polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "poly", "interp",
    "trapezoid", "gradient", "unwrap", "bartlett", "blackman", "hamming", "hanning", "kaiser", "kron", "cross",
    "vecdot", "matvec", "vecmat", "vander", "einsum_path", "can_cast", "issubdtype", "isdtype", "isscalar",
    "iterable", "get_printoptions", "set_printoptions", "printoptions", "array_repr", "array_str", "save", "savez",
    "load", "packbits", "unpackbits", "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact",
    "floating", "complexfloating", "flexible", "character", "object_", "bool", "int_", "uint", "float_", "double",
    "single", "euler_gamma",
]
