"""numpy's ufunc type as jax.numpy has it (JAX 0.10.2): the class `ufunc`, `frompyfunc`, and the ufunc objects of
ember.numpy. Those are exactly jax.numpy's fourteen (add, subtract, multiply, negative, maximum, minimum,
bitwise_and/or/xor, logical_and/or/xor, logaddexp, logaddexp2), each made of the function that ufuncs.py (or
mathfuncs.py, logexp.py) defines, with JAX's fast paths for its methods: add.reduce is sum, add.accumulate cumsum,
add.at a scatter-add, maximum.reduce max, logaddexp.reduce a logsumexp, ... Every other method of every ufunc
(subtract.reduce, maximum.accumulate, any reduceat, a frompyfunc's all) is JAX's generic one: a loop over the axis
(fori_loop or scan) calling the ufunc, compiled once per ufunc and static arguments by ember.jit."""
from __future__ import annotations

import inspect
import math
import operator
from typing import Any, Callable

import numpy as _np

from ember import _prims as lax
from ember._api.jit import eval_shape, jit
from ember._api.stages import ShapeDtypeStruct
from ember._api.vmap import vmap
from ember._control import fori_loop, scan
from ember._core import Tracer, aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axes, normalize_axis
from ember._runtime.array import Array
from ember._numpy.creation import asarray, full
from ember._numpy.cumulative import cumprod, cumsum
from ember._numpy.logexp import logaddexp, logsumexp
from ember._numpy.manipulation import append, vectorize
from ember._numpy.mathfuncs import logaddexp2
from ember._numpy.promotion import _broadcast_shapes, _to_inexact
from ember._numpy.reductions import max as max_, min as min_, prod, sum as sum_
from ember._numpy.selection import take, where as where_
from ember._numpy.shape import broadcast_to, concatenate, expand_dims, moveaxis, ndim, ravel, reshape, shape
from ember._numpy import ufuncs as _ufuncs
from ember._numpy.ufuncs import UFUNC_REPR

_AT_INPLACE_WARNING = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""
# (JAX's words: ember arrays are immutable alike)

_ARRAYLIKE = (Array, Tracer, _np.ndarray, _np.generic, bool, int, float, complex)
# jax.numpy's ufunc.__call__ signature, which inspect.signature shows for every ufunc object
_CALL_SIGNATURE = inspect.Signature([
    inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
    inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None),
    inspect.Parameter("where", inspect.Parameter.KEYWORD_ONLY, default=None)])


def _check_arraylike(name: str, *args: Any) -> None:
    """jax.numpy's check: arrays and scalars only (a list is refused, naming the function and the position)."""
    for i, arg in enumerate(args):
        if not (isinstance(arg, _ARRAYLIKE) or hasattr(arg, "__jax_array__")):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(arg)} at position {i}.")


class ufunc:
    """Universal functions which operate element-by-element on arrays (jax.numpy.ufunc, numpy.ufunc).

    A ufunc applies func elementwise to broadcast arrays, and has numpy's attributes (nin, nout, nargs, identity,
    __name__) and methods: reduce, accumulate, at (inplace=False only: ember arrays are immutable), reduceat and
    outer. ember.numpy's add, multiply, maximum, logical_and, ... are ufuncs; frompyfunc makes one of any scalar
    function. call, reduce, accumulate, at and reduceat, where given, are the implementations of those methods
    (the fast paths: add.reduce is sum); the others loop over the axis calling the ufunc.

    Examples:
        >>> x = enp.array([1, 2, 3, 4, 5])
        >>> enp.add.outer(x, x).shape
        (5, 5)
        >>> enp.add.reduce(x)
        Array(15, dtype=int32)
        >>> enp.add.accumulate(x)
        Array([ 1,  3,  6, 10, 15], dtype=int32)
        >>> enp.add.at(x, 0, 100, inplace=False)
        Array([101,   2,   3,   4,   5], dtype=int32)
        >>> enp.add.reduceat(x, enp.array([0, 2]))
        Array([ 3, 12], dtype=int32)
    """

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None, call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None, accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None, reduceat: Callable[..., Any] | None = None):
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self.__signature__ = _CALL_SIGNATURE
        # read-only (properties below): a ufunc is hashable, and a static argument of jit, as JAX's
        self.__props = (func, operator.index(nin), operator.index(nout), operator.index(nargs or nin), identity)
        self.__rules = {"reduce": reduce, "accumulate": accumulate, "at": at, "reduceat": reduceat}
        self._call = _checked_call(self, call or _call_vectorized)

    # Calling a ufunc is calling self._call, through a property whose getter is C code (operator.attrgetter):
    # `enp.add(x, y)` then runs no Python frame besides the function's own, as when add was a function. A
    # __call__ method that calls self._call costs a frame: 0.2 us of enp.add's 2.7 us on f32[4] (7%); this, 0.05.
    __call__ = property(operator.attrgetter("_call"), doc="Apply the ufunc elementwise to broadcast arrays.")

    _func = property(lambda self: self.__props[0])
    nin = property(lambda self: self.__props[1])
    nout = property(lambda self: self.__props[2])
    nargs = property(lambda self: self.__props[3])
    identity = property(lambda self: self.__props[4])

    def _key(self) -> tuple[Any, ...]:
        # (JAX's: the implementations of the methods are details, not part of what the ufunc is)
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self) -> str:
        return UFUNC_REPR.format(self.__name__)

    def _binary_only(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def reduce(self, a: Any, axis: int | None = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Reduction operation derived from a binary function (numpy.ufunc.reduce): add.reduce is sum,
        logical_and.reduce is all, bitwise_or.reduce a bitwise any, ...

        Args:
          a: the input array.
          axis: the axis to reduce over (default 0); None: all of them.
          dtype: the dtype of the result.
          out: unsupported (ember arrays are immutable).
          keepdims: keep the reduced axes with size 1.
          initial: the value the reduction starts from.
          where: a boolean mask (broadcast to a) of the elements to reduce; a ufunc without identity needs
            initial with it.
        """
        name = f"{self.__name__}.reduce"
        _check_arraylike(name, a)
        self._binary_only("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {name}()")
        if initial is not None:
            _check_arraylike(name, initial)
        if where is not None:
            _check_arraylike(name, where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, so to use a "
                                 "where mask one has to specify 'initial'.")
            where_dtype = aval_of(asarray(where)).dtype
            if where_dtype != _np.dtype(bool):
                raise ValueError(f"where argument must have dtype=bool; got dtype={where_dtype}")
        rule = self.__rules["reduce"]
        if rule is not None:
            return rule(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
        return _reduce_via_loop(self, axis, dtype, keepdims, a, initial, where)

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Accumulate operation derived from a binary ufunc (numpy.ufunc.accumulate): add.accumulate is cumsum,
        multiply.accumulate cumprod, maximum.accumulate a running maximum, ...

        Args:
          a: the input array.
          axis: the axis to accumulate along (default 0).
          dtype: the dtype of the result.
          out: unsupported (ember arrays are immutable).
        """
        self._binary_only("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        rule = self.__rules["accumulate"]
        if rule is not None:
            return rule(a, axis=axis, dtype=dtype)
        _check_arraylike(f"{self.__name__}.accumulate", a)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        return _accumulate_via_scan(self, axis, dtype, a)

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """a with the ufunc applied at indices (numpy.ufunc.at, with b its second operand for a binary ufunc),
        repeated indices applying it repeatedly: add.at is a scatter-add. numpy updates a in place; ember arrays
        are immutable, so inplace=False is required (as JAX) and the updated copy is returned.

        Args:
          a: the array to update.
          indices: an index, an integer array or a tuple of them.
          b: the values (for a binary ufunc), broadcast against the indexed elements.
          inplace: must be False.
        """
        if inplace:
            raise NotImplementedError(_AT_INPLACE_WARNING)
        name = f"{self.__name__}.at"
        operands = (a,) if b is None else (a, b)
        _check_arraylike(name, *operands)
        for index in (indices if isinstance(indices, tuple) else (indices,)):
            if isinstance(index, list):  # (JAX's error for a list index)
                raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; use "
                                "`arr[array(seq)]` instead of `arr[seq]`. See https://github.com/jax-ml/jax/"
                                "issues/4564 for more information.")
        rule = self.__rules["at"]
        if rule is not None:
            return rule(asarray(a), indices, *operands[1:])
        if self.nout != 1:
            raise ValueError("at only supported for functions returning a single value")
        if any(isinstance(index, slice) for index in (indices if isinstance(indices, tuple) else (indices,))):
            raise TypeError(f"{name}: slice indices are not supported (its loop takes the indices as arrays); "
                            "use integer arrays")
        return _at_via_scan(self, a, indices, *operands[1:])

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Reductions of a between consecutive indices along axis (numpy.ufunc.reduceat): element k reduces
        a[indices[k]:indices[k + 1]], or a[indices[k]] alone where indices[k + 1] <= indices[k]. dtype is
        accepted and unused, as in JAX (the result has a's dtype).

        Args:
          a: the array to reduce (at least 1-D).
          indices: a 1-D integer array of segment starts.
          axis: the axis along which to reduce (default 0).
          dtype: unused.
          out: unsupported (ember arrays are immutable).
        """
        self._binary_only("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        rule = self.__rules["reduceat"]
        if rule is not None:
            return rule(a, indices, axis=axis, dtype=dtype)
        _check_arraylike(f"{self.__name__}.reduceat", a, indices)
        if ndim(a) == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape={shape(a)}")
        if ndim(indices) != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got indices.shape={shape(indices)}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        return _reduceat_via_loop(self, normalize_axis(f"{self.__name__}.reduceat", axis, ndim(a)), a, indices)

    def outer(self, A: Any, B: Any, /) -> Any:
        """The ufunc of every pair of elements of A and B (numpy.ufunc.outer): shape (*A.shape, *B.shape)."""
        self._binary_only("outer")
        _check_arraylike(f"{self.__name__}.outer", A, B)
        return _outer(self, A, B)


def _checked_call(uf: ufunc, call: Callable[..., Any]) -> Callable[..., Any]:
    """A ufunc's __call__ (as JAX's): the operands checked, out= and where= refused, then call."""
    def checked(*args: Any, out: Any = None, where: Any = None) -> Any:
        _check_arraylike(uf.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {uf}")
        if where is not None:
            raise NotImplementedError(f"where argument of {uf}")
        return call(uf, *args) if call is _call_vectorized else call(*args)
    return checked


@jit(static_argnums=0)
def _call_vectorized(uf: ufunc, *args: Any) -> Any:
    return vectorize(uf._func)(*args)


def _result_dtype(uf: ufunc, *operands: Any) -> Any:
    """The dtype of uf's result for scalars of the operands' dtypes and weak types (as JAX's: eval_shape of
    func on ones)."""
    scalars = [ShapeDtypeStruct((), aval_of(x).dtype, weak_type=aval_of(x).weak_type) for x in operands]
    result = eval_shape(uf._func, *scalars)
    if not hasattr(result, "dtype"):
        raise ValueError(f"{uf.__name__}: only supported for functions returning a single value")
    return result.dtype


@jit(static_argnums=(0, 1, 2, 3))
def _reduce_via_loop(uf: ufunc, axis: Any, dtype: Any, keepdims: bool, a: Any, initial: Any, where: Any) -> Any:
    name = f"{uf.__name__}.reduce"
    a = asarray(a)
    if initial is None:
        initial = uf.identity
    dtype = _result_dtype(uf, a, a) if dtype is None else dt.check_user_dtype(dtype, name)
    if where is not None:
        where = broadcast_to(where, shape(a))
    if isinstance(axis, tuple):
        normalize_axes(name, axis, ndim(a))
        raise NotImplementedError("tuple of axes")
    if axis is None:
        final_shape = (1,) * ndim(a) if keepdims else ()
        a, axis = ravel(a), 0
        if where is not None:
            where = ravel(where)
    else:
        axis = normalize_axis(name, axis, ndim(a))
        final_shape = (*shape(a)[:axis], *((1,) if keepdims else ()), *shape(a)[axis + 1:])
    if axis != 0:
        a = moveaxis(a, axis, 0)
        if where is not None:
            where = moveaxis(where, axis, 0)
    if shape(a)[0] == 0:
        if initial is None:
            raise ValueError(f"zero-size array to reduction operation {uf.__name__} which has no identity")
        return full(final_shape, initial, dtype)

    def body(i: Any, value: Any) -> Any:
        combined = uf(value, a[i].astype(dtype))
        return combined if where is None else where_(where[i], combined, value)
    start, first = (a[0], 1) if initial is None else (initial, 0)
    result = fori_loop(first, shape(a)[0], body, broadcast_to(asarray(start).astype(dtype), shape(a)[1:]))
    return reshape(result, final_shape) if keepdims else result


@jit(static_argnums=(0, 1, 2))
def _accumulate_via_scan(uf: ufunc, axis: int, dtype: Any, a: Any) -> Any:
    name = f"{uf.__name__}.accumulate"
    a = asarray(a)
    dtype = _result_dtype(uf, a, a) if dtype is None else dt.check_user_dtype(dtype, name)
    axis = normalize_axis(name, axis, ndim(a))
    if math.prod(shape(a)) == 0:
        return full(shape(a), 0, dtype)
    a = moveaxis(a, axis, 0).astype(dtype)

    def step(carry: Any, x: Any) -> tuple[Any, Any]:
        carry = uf(carry, x)
        return carry, carry
    first = a[0]
    if shape(a)[0] > 1:
        _, rest = scan(step, first, a[1:])
        first = concatenate([expand_dims(first, 0), rest])
    else:
        first = expand_dims(first, 0)
    return moveaxis(first, 0, axis)


@jit(static_argnums=0)
def _at_via_scan(uf: ufunc, a: Any, indices: Any, *args: Any) -> Any:
    dtype = _result_dtype(uf, a, *args)
    a = asarray(a).astype(dtype)
    args = tuple(asarray(arg).astype(dtype) for arg in args)
    indices = indices if isinstance(indices, tuple) else (indices,)
    if not indices:
        return a
    index_shape = _broadcast_shapes(f"{uf.__name__}.at", *(shape(index) for index in indices))
    if not index_shape:
        return a.at[indices].set(uf(a.at[indices].get(), *args))
    n = math.prod(index_shape)
    if args:
        tail = shape(args[0])[len(index_shape):]
        args = (reshape(broadcast_to(args[0], (*index_shape, *tail)), (n, *tail)),)
    flat = [ravel(broadcast_to(index, index_shape)) for index in indices]

    def step(i: Any, a: Any) -> Any:
        at = tuple(index[i] for index in flat)
        return a.at[at].set(uf(a.at[at].get(), *(arg[i] for arg in args)))
    return fori_loop(0, n, step, a)


@jit(static_argnums=(0, 1))
def _reduceat_via_loop(uf: ufunc, axis: int, a: Any, indices: Any) -> Any:
    a, indices = asarray(a), asarray(indices)
    out = take(a, indices, axis=axis)
    others = [d for d in range(ndim(out)) if d != axis]
    bounds = expand_dims(append(indices, shape(a)[axis]), others)
    count = shape(bounds)[axis]
    starts = lax.slice_in_dim(bounds, 0, count - 1, axis=axis)
    ends = lax.slice_in_dim(bounds, 1, count, axis=axis)

    def body(i: Any, out: Any) -> Any:
        inside = _ufuncs.logical_and(_ufuncs.greater(i, starts), _ufuncs.less(i, ends))
        return where_(inside, uf(out, take(a, expand_dims(i, 0), axis=axis)), out)
    return fori_loop(0, shape(a)[axis], body, out)


@jit(static_argnums=0)
def _outer(uf: ufunc, A: Any, B: Any) -> Any:
    flat = vmap(vmap(uf, (None, 0)), (0, None))(ravel(A), ravel(B))
    return reshape(flat, (*shape(A), *shape(B)))


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A ufunc made of func, a function of nin scalars returning nout values that ember can trace (as
    jax.numpy.frompyfunc): its call vectorizes func, and its methods loop over the axis calling it.

    Args:
      func: a function of nin scalar arguments returning nout outputs.
      nin: the number of inputs.
      nout: the number of outputs.
      identity: the identity of the operation, if it has one (reduce starts from it, and needs it for where=).

    Examples:
        >>> import operator
        >>> add = enp.frompyfunc(operator.add, nin=2, nout=1, identity=0)
        >>> add.reduce(enp.arange(4))
        Array(6, dtype=int32)
    """
    return ufunc(func, nin, nout, identity=identity)


# ---------------------------------------------------------------------------------------------------------------
# The fast paths of ember.numpy's ufuncs, where JAX has them: reductions and scatters of their own
def _reduce_by(reduction: Callable[..., Any]) -> Callable[..., Any]:
    """A reduce rule from max or min (which take no dtype: a is cast to it first)."""
    def reduce(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        if dtype is not None:
            a = asarray(a).astype(dt.check_user_dtype(dtype, f"{reduction.__name__}"))
        return reduction(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
    return reduce


def _bitwise_reduce(name: str, reducer: Callable[..., Any], combine: Callable[..., Any], logical: bool
                    ) -> Callable[..., Any]:
    """The reduce rule of bitwise_and/or/xor (integers and booleans only) and of logical_and/or/xor (any dtype,
    as truth values; dtype= casts the result). The identity, where where= masks: all ones for and, zero else."""
    all_ones = reducer is lax.reduce_and

    def reduce(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        a = asarray(a)
        d = aval_of(a).dtype
        if logical:
            a = _ufuncs.not_equal(a, 0) if d != _np.dtype(bool) else a
        elif not (dt.is_int(d) or d == _np.dtype(bool)):
            raise ValueError(f"integer argument required; got dtype={d}")
        elif dtype is not None:
            a = a.astype(dt.check_user_dtype(dtype, name))
        axes = normalize_axes(name, axis, ndim(a))
        if where is not None:
            zeros = lax.full_like(a, 0)
            a = where_(where, a, lax.bitwise_not(zeros) if all_ones else zeros)
        result = reducer(a, axes)
        if keepdims:
            result = expand_dims(result, axes)
        if initial is not None:
            result = combine(result, asarray(initial).astype(aval_of(result).dtype))
        return result.astype(dt.check_user_dtype(dtype, name)) if logical and dtype is not None else result
    return reduce


def _logsumexp_reduce(base2: bool) -> Callable[..., Any]:
    """The reduce rule of logaddexp (log of the sum of exp) and logaddexp2 (in base 2); dtype is unused (JAX)."""
    def reduce(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        a = _to_inexact(a, "logaddexp2.reduce" if base2 else "logaddexp.reduce")
        scale = math.log(2) if base2 else 1.0
        if base2:
            a = a * scale
        if where is not None:
            a = where_(where, a, -_np.inf)
        result = logsumexp(a, axis=axis, keepdims=keepdims)
        if initial is not None:
            result = logaddexp(asarray(initial) * scale if base2 else initial, result)
        return result / scale if base2 else result
    return reduce


def _scatter_at(method: str, booleans_as_int: bool) -> Callable[..., Any]:
    """The at rule of add, multiply, subtract: a.at[indices].add(b) (boolean a: in int32, as JAX)."""
    def at(a: Any, indices: Any, b: Any) -> Any:
        if booleans_as_int and aval_of(a).dtype == _np.dtype(bool):
            b = asarray(b).astype(bool).astype(_np.int32)
            return getattr(a.astype(_np.int32).at[indices], method)(b).astype(bool)
        return getattr(a.at[indices], method)(b)
    return at


def _builtin(fn: Callable[..., Any], nin: int, identity: Any = None, **rules: Any) -> ufunc:
    """An ember.numpy ufunc: called, it is fn itself (the eager fast path), which refuses out= and where= on its
    own (ufuncs.ufunc_slow); _checked_call's checks would cost every call a Python frame."""
    uf = ufunc(fn, nin, 1, identity=identity, **rules)
    uf._call = fn
    return uf


add = _builtin(_ufuncs.add, 2, 0, reduce=sum_, accumulate=cumsum, at=_scatter_at("add", True))
multiply = _builtin(_ufuncs.multiply, 2, 1, reduce=prod, accumulate=cumprod, at=_scatter_at("multiply", True))
subtract = _builtin(_ufuncs.subtract, 2, at=_scatter_at("subtract", False))
negative = _builtin(_ufuncs.negative, 1)
maximum = _builtin(_ufuncs.maximum, 2, reduce=_reduce_by(max_))
minimum = _builtin(_ufuncs.minimum, 2, reduce=_reduce_by(min_))
bitwise_and = _builtin(_ufuncs.bitwise_and, 2, -1,
                       reduce=_bitwise_reduce("bitwise_and.reduce", lax.reduce_and, _ufuncs.bitwise_and, False))
bitwise_or = _builtin(_ufuncs.bitwise_or, 2, 0,
                      reduce=_bitwise_reduce("bitwise_or.reduce", lax.reduce_or, _ufuncs.bitwise_or, False))
bitwise_xor = _builtin(_ufuncs.bitwise_xor, 2, 0,
                       reduce=_bitwise_reduce("bitwise_xor.reduce", lax.reduce_xor, _ufuncs.bitwise_xor, False))
logical_and = _builtin(_ufuncs.logical_and, 2, True,
                       reduce=_bitwise_reduce("logical_and.reduce", lax.reduce_and, _ufuncs.logical_and, True))
logical_or = _builtin(_ufuncs.logical_or, 2, False,
                      reduce=_bitwise_reduce("logical_or.reduce", lax.reduce_or, _ufuncs.logical_or, True))
logical_xor = _builtin(_ufuncs.logical_xor, 2, False,
                       reduce=_bitwise_reduce("logical_xor.reduce", lax.reduce_xor, _ufuncs.logical_xor, True))
logaddexp = _builtin(logaddexp, 2, -_np.inf, reduce=_logsumexp_reduce(False))
logaddexp2 = _builtin(logaddexp2, 2, -_np.inf, reduce=_logsumexp_reduce(True))

# jax.numpy's ufunc objects: ember.numpy's names for these are the ufuncs above, not the functions they wrap
UFUNCS = ["add", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp", "logaddexp2", "logical_and", "logical_or",
          "logical_xor", "maximum", "minimum", "multiply", "negative", "subtract"]
__all__ = ["ufunc", "frompyfunc", *UFUNCS]
