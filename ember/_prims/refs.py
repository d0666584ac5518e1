"""Mutable array references: ember.Ref, new_ref, freeze, and the four primitives that make, read, write and end
them (new_ref, ref_get, ref_swap, freeze), each with its rules.

A Ref is a box holding an array. Outside staging it is a Python object (Ref) whose reads and writes happen at once;
while a function is staged out, a Ref it receives, closes over or makes is a RefTracer, and its reads and writes
are equations of the IR on a value of type `Ref{f32[3]}` (RefAval): the effect is explicit in the IR. Indexed reads
and writes (`ref[1:3]`, `ref[i] = v`, `ref[...] += v`) are a whole read (ref_get), numpy indexing or an `.at`
update of the value read, and a whole write (ref_swap): only whole values cross the reference, so every rule below
is one of a whole value, and XLA updates in place once the references are discharged.

Before any transformation and before lowering, ember._transforms.discharge turns the references into values
(state discharge): a Ref made inside the program becomes the value it holds, threaded through the program; a Ref
the program receives (an input, or one it closed over) is read when first used and written once at the end. So
the transformations see only those boundary reads and writes, whose rules are here: a read has no derivative (the
Ref is not differentiated), a write of a differentiated value is an error (as JAX's: the Ref would need a
gradient), vmap batches a Ref argument along an axis like an array, and writing a batched value into an unbatched
Ref is an error. new_ref and freeze never reach a transformation or the lowering (their marks say so). See
docs/refs.md."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ember._core import TRACE_STATE, ArrayMethods, Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.refs import RefAval, RefMethods, install_ref_methods
from ember._core.trace import RefTracer
from ember._prims.shape import (BatchDim, batch_at_front, convert_element_type, convert_element_type_p, moveaxis,
                                zeros)

_DISCHARGED = "discharged before {} (ember._transforms.discharge turns references into values first)"


class RefPrimitive(Primitive):
    """A primitive on references: staged while tracing; outside staging it acts on the Ref object at once (impl),
    without compiling anything."""

    def __init__(self, name: str, impl: Any, **kwargs: Any):
        super().__init__(name, effectful=True, **kwargs)
        self.impl = impl

    def bind(self, *args: Any, **params: Any) -> Any:
        if TRACE_STATE.stack:
            return super().bind(*args, **params)
        return self.impl(*args, **params)


# ---------------------------------------------------------------------------------------------------------------
# The concrete reference
class InvalidRefError(RuntimeError):
    """A Ref used after ember.freeze or ember.free_ref ended it."""


class _RefMeta(type):
    """isinstance(x, ember.Ref) is also true of a Ref being staged (a RefTracer), as isinstance(x, ember.Array) is
    of a traced array."""

    def __instancecheck__(cls, x: Any) -> bool:
        return type.__instancecheck__(cls, x) or isinstance(x, RefTracer)


class Ref(RefMethods, metaclass=_RefMeta):
    """A mutable array reference (as jax.Ref): a box holding an array, read and written by indexing (`ref[...]`,
    `ref[i] = v`, `ref[1:] += v`) eagerly, inside jit, loops and branches, and under grad and vmap. Made by
    ember.new_ref; ember.freeze ends it and returns its value. A Ref is not an array: compute on `ref[...]`.
    isinstance(x, Ref) is also true of a Ref inside a staged function.

    Threads: each Ref has a lock (reentrant: a host callback of a program that holds it may use the Ref on the same
    thread). A compiled program holds the locks of the Refs it takes from reading them to writing them back
    (ember._runtime.refs.RefCompiled), and each eager read, write or swap holds it, so calls from several threads on
    one Ref run one after another, each seeing the last one's value."""
    __slots__ = ("_value", "_aval", "_lock", "_shared", "__weakref__")

    def __init__(self, value: Any):
        self._value = value
        self._aval = RefAval.of(aval_of(value))
        self._lock = threading.RLock()
        # whether the value it holds may be held elsewhere too: it was given to it (new_ref, a write) or read out of
        # it; a program's final value, written back, is its own until read (then a call may donate its buffer)
        self._shared = True

    aval = property(lambda self: self._aval)
    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: self._aval.ndim)
    size = property(lambda self: self._aval.size)

    def read(self) -> Any:
        """The array the Ref holds now (what `ref[...]` returns outside staging): from now on held elsewhere too."""
        value = self.peek()
        self._shared = True
        return value

    def peek(self) -> Any:
        """The array the Ref holds now, for a program that takes the Ref (not given out)."""
        value = self._value  # (one read: a program on another thread may replace it meanwhile)
        if value is None:
            raise InvalidRefError(f"a Ref {self._aval.str_short()} was used after ember.freeze or ember.free_ref "
                                  "ended it")
        return value

    def write(self, value: Any, own: bool = False) -> None:
        """Hold value from now on. own: nothing else holds it (a program's final value)."""
        with self._lock:
            self.peek()
            self._value = value
            self._shared = not own

    @property
    def owns_value(self) -> bool:
        """Whether nothing but the Ref holds its value (a program that replaces it may then donate its buffer)."""
        return not self._shared

    def __len__(self) -> int:
        if not self._aval.shape:
            raise TypeError("len() of an unsized Ref (a scalar)")
        return self._aval.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"a Ref {self._aval.str_short()} is not an array: read its value first (np.asarray(ref[...]))")

    def __iter__(self) -> Any:
        raise TypeError(f"a Ref {self._aval.str_short()} is not iterable: iterate over its value (ref[...])")

    def __repr__(self) -> str:
        if self._value is None:
            return f"Ref(<ended>, {self._aval.str_short()})"
        text = np.array2string(np.asarray(self._value), separator=", ", prefix="Ref(")
        return f"Ref({text}, dtype={self._aval.dtype.name})"


def _checked_ref(ref: Any, what: str) -> Any:
    if isinstance(ref, Ref | RefTracer):
        return ref
    raise TypeError(f"{what}: expected a Ref (from ember.new_ref), got {type(ref).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# new_ref(x) -> Ref holding x
def _new_ref_impl(x: Any) -> Ref:
    return Ref(x)


new_ref_p = RefPrimitive("new_ref", _new_ref_impl, takes_refs=True, checks=())  # (it makes one: staging notes that)


@new_ref_p.def_rule("abstract_eval")
def _new_ref_abstract_eval(x: ShapedArray) -> RefAval:
    if type(x) is RefAval:
        raise TypeError(f"new_ref: the initial value is a Ref {x.str_short()}: references to references are not "
                        "supported")
    return RefAval.of(x)


for _kind, _where in (("lowering", "lowering"), ("jvp", "forward mode"), ("vjp", "reverse mode"),
                      ("batching", "vmap")):
    new_ref_p.mark(_kind, _DISCHARGED.format(_where))


# ---------------------------------------------------------------------------------------------------------------
# freeze(ref) -> its value; the Ref ends
def _freeze_impl(ref: Ref) -> Any:
    with ref._lock:
        value = ref.read()
        ref._value = None
    return value


freeze_p = RefPrimitive("freeze", _freeze_impl, takes_refs=True, checks=())


@freeze_p.def_rule("abstract_eval")
def _freeze_abstract_eval(ref: RefAval) -> ShapedArray:
    return ref.inner


for _kind, _where in (("lowering", "lowering"), ("jvp", "forward mode"), ("vjp", "reverse mode"),
                      ("batching", "vmap")):
    freeze_p.mark(_kind, _DISCHARGED.format(_where))


# ---------------------------------------------------------------------------------------------------------------
# ref_get(ref) -> the value it holds (printed `b:f32[3] <- a[...]`)
def _ref_get_impl(ref: Ref) -> Any:
    with ref._lock:  # (after a program running on it has written it back)
        return ref.read()


ref_get_p = RefPrimitive("ref_get", _ref_get_impl, takes_refs=True, checks=())


@ref_get_p.def_rule("abstract_eval")
def _ref_get_abstract_eval(ref: ShapedArray) -> ShapedArray:
    if type(ref) is not RefAval:
        raise TypeError(f"ref_get: expected a Ref, got {ref.str_short()}")
    return ref.inner


ref_get_p.mark("lowering", _DISCHARGED.format("lowering"))
ref_get_p.mark_not_differentiable()  # (a Ref is not differentiated: what it holds is a constant to the derivative)


@ref_get_p.def_rule("batching")
def _ref_get_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    return [ref_get_p.bind(args[0])], [dims[0]]


# ---------------------------------------------------------------------------------------------------------------
# ref_swap(ref, value) -> the value it held; it holds value from now on (printed `b:f32[3], a[...] <- a[...], c`)
def _ref_swap_impl(ref: Ref, value: Any) -> Any:
    with ref._lock:
        old = ref.read()
        ref.write(value)  # (given by the caller: shared)
    return old


ref_swap_p = RefPrimitive("ref_swap", _ref_swap_impl, takes_refs=True, checks=())


@ref_swap_p.def_rule("abstract_eval")
def _ref_swap_abstract_eval(ref: ShapedArray, value: ShapedArray) -> ShapedArray:
    if type(ref) is not RefAval:
        raise TypeError(f"ref_swap: expected a Ref, got {ref.str_short()}")
    if type(value) is RefAval:
        raise TypeError(f"ref_swap: a Ref {value.str_short()} cannot be stored in a Ref (no references to references)")
    if value.shape != ref.shape or value.dtype != ref.dtype:
        raise TypeError(f"ref_swap: a {value.str_short()} cannot be stored in a {ref.str_short()}")
    return ref.inner


ref_swap_p.mark("lowering", _DISCHARGED.format("lowering"))


def differentiated_write_error() -> Exception:
    return ValueError(
        "performing a set/swap operation with a differentiated value on a non-differentiated array reference: a "
        "value that depends on the differentiated inputs cannot be written into a Ref the function receives or "
        "closes over (its old value would need a gradient). Write ember.lax.stop_gradient(value), or make the Ref "
        "inside the differentiated function (ember.new_ref) and return ember.freeze(ref)")


@ref_swap_p.def_rule("jvp")
def _ref_swap_jvp(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
    """The Ref gets the primal value. A tangent here is zero: forward mode refused the program beforehand if the
    value depends on the differentiated inputs (check_ref_writes), so what reaches here is a loop's or branch's
    zero tangent of a value beside differentiated ones."""
    return [ref_swap_p.bind(*primals)], [None]


@ref_swap_p.def_rule("vjp_split")
def _ref_swap_vjp_split(ins: list[Any], active: list[bool]) -> Any:
    if active[1]:
        raise differentiated_write_error()
    raise AssertionError("ref_swap: a Ref is never differentiated")


@ref_swap_p.def_rule("vjp")
def _ref_swap_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    if needs[1]:
        raise differentiated_write_error()
    return [None, None]


@ref_swap_p.def_rule("batching")
def _ref_swap_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    ref, value = args
    ref_dim, value_dim = dims
    if ref_dim is None:
        raise ValueError(f"performing a set/swap operation with vmapped value on an unbatched array reference of type "
                         f"{aval_of(ref).str_short()}: a Ref that vmap does not map (closed over, or in_axes None) "
                         "cannot hold a different value per member. Pass the Ref as an argument of the vmapped "
                         "function, mapped along an axis")
    size = aval_of(ref).shape[ref_dim]
    value = moveaxis(batch_at_front(value, value_dim, size), 0, ref_dim)
    return [ref_swap_p.bind(ref, value)], [ref_dim]


# ---------------------------------------------------------------------------------------------------------------
# The public functions
def new_ref(init_val: Any, *, memory_space: Any = None, kind: str | None = None) -> Any:
    """A new mutable array reference holding init_val (as jax.new_ref). Inside a staged function it is local to
    it: the function stays pure for its callers (ember.freeze ends it and gives its final value)."""
    if memory_space is not None:
        raise NotImplementedError("new_ref: memory_space is not supported by ember (only None)")
    if kind not in (None, "no_grad_no_remat"):
        raise ValueError(f"new_ref: kind must be None or 'no_grad_no_remat', got {kind!r}")
    if isinstance(init_val, RefMethods):
        raise TypeError("new_ref: the initial value is a Ref; references to references are not supported (pass "
                        "its value, ref[...])")
    value = _as_array("new_ref", init_val)
    return new_ref_p.bind(value)


def _as_array(api: str, x: Any) -> Any:
    """x as an ember array (a Python scalar or numpy array made one, of its default dtype, not weakly typed)."""
    try:
        aval = aval_of(x)
    except TypeError:
        raise TypeError(f"{api}: expected an array or a number, got {type(x).__name__}") from None
    if isinstance(x, ArrayMethods) and not aval.weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=aval.dtype, weak_type=False)


def empty_ref(ty: Any, memory_space: Any = None) -> Any:
    """A new Ref of the shape and dtype of ty (a ShapeDtypeStruct, or anything with .shape and .dtype), holding
    zeros (as jax.empty_ref: its initial contents are not to be relied on)."""
    try:
        shape, dtype = tuple(ty.shape), ty.dtype
    except AttributeError:
        raise TypeError(f"empty_ref: expected a type with .shape and .dtype (ember.ShapeDtypeStruct), got "
                        f"{type(ty).__name__}") from None
    return new_ref(zeros(ShapedArray(shape, dt.canonicalize_dtype(dt.parse_dtype(dtype)))), memory_space=memory_space)


def freeze(ref: Any) -> Any:
    """End a Ref and return its final value (as jax.freeze). While staging, only a Ref made by the same function
    can be frozen."""
    ref = _checked_ref(ref, "freeze")
    if isinstance(ref, RefTracer):
        stack = TRACE_STATE.stack
        made_here = bool(stack) and ref.builder is stack[-1] and any(
            e.prim is new_ref_p and e.outputs[0] is ref.ir_var for e in ref.builder.eqns)
        if not made_here:
            raise ValueError(f"freeze: a Ref {ref.aval.str_short()} can only be frozen in the function that made it "
                             "(with ember.new_ref); this one was passed in or closed over")
    return freeze_p.bind(ref)


def free_ref(ref: Any) -> None:
    """End a Ref without reading it (as jax.free_ref)."""
    ref = _checked_ref(ref, "free_ref")
    if not isinstance(ref, RefTracer):  # (a staged one: nothing reads it after; discharge drops its value)
        _freeze_impl(ref)
    return None


def _is_whole(index: Any) -> bool:
    """Whether an index is the whole Ref (None, `...` or `()`, as jax.ref's functions take)."""
    return index is None or index is Ellipsis or (isinstance(index, tuple) and (len(index) == 0 or len(index) == 1
                                                                and index[0] is Ellipsis))


def _checked_value(api: str, ref: Any, value: Any, shape: tuple[int, ...]) -> Any:
    """value as the Ref's dtype, checked as JAX's swap checks it: the dtype must be the Ref's (a Python scalar of
    the same kind is converted) and the shape must be that of the indexed part (no broadcasting)."""
    ref_dtype = ref.aval.dtype
    if isinstance(value, RefMethods):
        raise TypeError(f"{api}: a Ref cannot be stored in a Ref (no references to references)")
    try:
        aval = aval_of(value)
    except TypeError:
        value = np.asarray(value)
        aval = aval_of(value)
    if aval.dtype != ref_dtype:
        if not (aval.weak_type and _kind(aval.dtype) == _kind(ref_dtype)):
            raise ValueError(f"Invalid dtype for `{api}`. Ref dtype: {ref_dtype.name}. Value dtype: "
                             f"{aval.dtype.name}.")
    if aval.shape != shape:
        raise ValueError(f"Invalid shape for `{api}`. Ref shape: {ref.aval.shape}. Expected shape: {shape}. "
                         f"Value shape: {aval.shape}.")
    return convert_element_type(value, ref_dtype)


def _kind(dtype: np.dtype) -> str:
    """b, i (signed or unsigned integers), f or c: the kinds within which a Python scalar converts."""
    return "i" if dtype.kind == "u" else "f" if dt.is_float(dtype) else dtype.kind


def get(ref: Any, idx: Any = None) -> Any:
    """ref[idx] (as jax.ref.get): the indexed part of the value the Ref holds now."""
    value = ref_get_p.bind(_checked_ref(ref, "get"))
    return value if _is_whole(idx) else value[idx]


def swap(ref: Any, idx: Any, value: Any) -> Any:
    """Write value into ref[idx] and return what was there (as jax.ref.swap)."""
    ref = _checked_ref(ref, "swap")
    if _is_whole(idx):
        return ref_swap_p.bind(ref, _checked_value("swap", ref, value, ref.aval.shape))
    whole = ref_get_p.bind(ref)
    old = whole[idx]
    value = _checked_value("swap", ref, value, aval_of(old).shape)
    ref_swap_p.bind(ref, whole.at[idx].set(value))
    return old


def set(ref: Any, idx: Any, value: Any) -> None:  # noqa: A001  (jax.ref.set)
    """ref[idx] = value (as jax.ref.set)."""
    swap(ref, idx, value)


def addupdate(ref: Any, idx: Any, x: Any) -> None:
    """ref[idx] += x (as jax.ref.addupdate)."""
    ref = _checked_ref(ref, "addupdate")
    whole = ref_get_p.bind(ref)
    if _is_whole(idx):
        ref_swap_p.bind(ref, whole + _checked_value("addupdate", ref, x, ref.aval.shape))
        return
    ref_swap_p.bind(ref, whole.at[idx].add(_checked_value("addupdate", ref, x, aval_of(whole[idx]).shape)))


def _getitem(self: Any, idx: Any) -> Any:
    return get(self, idx)


def _setitem(self: Any, idx: Any, value: Any) -> None:
    swap(self, idx, value)


install_ref_methods({"__getitem__": _getitem, "__setitem__": _setitem})

REF_PRIMITIVES = frozenset({new_ref_p, ref_get_p, ref_swap_p, freeze_p})

__all__ = ["Ref", "InvalidRefError", "new_ref", "empty_ref", "freeze", "free_ref", "get", "swap", "set", "addupdate"]
