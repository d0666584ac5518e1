"""Staging a function for a transformation: its arguments flattened to leaves, their abstract values and their
names (for error messages), tree prefixes broadcast over them, and the staged IR with its output structure."""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR, ShapedArray, Tracer, aval_of, check_live, stage_flat
from ember._core.cache import LRUCache
from ember._control.custom import runs_python_each_call
from ember._core import dtypes as dt
from ember._core.ir import Atom
from ember._core.refs import RefMethods, check_no_refs_returned
from ember._runtime import Array
from ember._transforms import key_reuse
from ember._core.pytree import (PyTreeDef, keystr, prefix_entries, register_pytree_node, tree_flatten,
                                tree_flatten_with_path, tree_map, tree_structure)


def wraps(fun: Any, updated: Sequence[str] = ("__dict__",)) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """functools.wraps(fun) for any callable, as JAX's transformations wrap functions: fun's attributes (its
    `__dict__`: an equinox Module's fields, so `vmap(module).field` reads it) are copied too, and an attribute fun
    lacks, or holds in a form a function cannot take (a callable object's `__name__` that is not a string), is left
    out. updated=() copies no `__dict__` (jit's object keeps its own attributes)."""
    def decorate(wrapper: Callable[..., Any]) -> Callable[..., Any]:
        for attr in functools.WRAPPER_ASSIGNMENTS:
            try:
                setattr(wrapper, attr, getattr(fun, attr))
            except (AttributeError, TypeError):
                pass
        for attr in updated:
            try:
                getattr(wrapper, attr).update(getattr(fun, attr, {}))
            except (AttributeError, TypeError):
                pass
        wrapper.__wrapped__ = fun  # type: ignore[attr-defined]
        return wrapper
    return decorate


def fun_name(fun: Any) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def leaf_avals(api: str, args: Sequence[Any], kwargs: dict[str, Any], leaves: Sequence[Any]
                ) -> tuple[ShapedArray, ...]:
    """The abstract values of a transformed function's argument leaves; a tracer leaked out of a finished staging
    is an UnexpectedTracerError here, even where the function would not use it."""
    try:
        avals = tuple(aval_of(x) for x in leaves)
    except TypeError:
        pass
    else:
        for x in leaves:
            if isinstance(x, Tracer):
                check_live(x, api)
        return avals
    for i, arg in enumerate(list(args) + list(kwargs.values())):  # find the culprit for the message
        for leaf in tree_flatten(arg)[0]:
            try:
                aval_of(leaf)
            except TypeError as err:
                where = f"argument {i}" if i < len(args) else f"keyword argument {list(kwargs)[i - len(args)]!r}"
                if isinstance(leaf, np.ndarray | np.generic | complex):  # a value of a dtype ember lacks
                    shape = f" of shape {np.shape(leaf)}" if np.ndim(leaf) else ""
                    raise TypeError(f"{api}: {where} contains a {type(leaf).__name__}{shape} that ember cannot "
                                    f"take: {err}") from None
                raise TypeError(f"{api}: {where} contains a value of type {type(leaf).__name__} ({leaf!r}), which "
                                "is not a valid ember array; pass arrays, numbers or pytrees of them, or mark the "
                                "argument static (static_argnums)") from None
    raise AssertionError("unreachable")


def check_ref_arguments(name: str, fun: Any, in_tree: PyTreeDef, leaves: Sequence[Any]) -> None:
    """A mutable array reference may be passed once to a function (as JAX: two names for one Ref would alias)."""
    seen: dict[int, int] = {}
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, RefMethods):
            j = seen.setdefault(id(leaf), i)
            if j != i:
                names = leaf_names(fun, in_tree)
                raise ValueError(f"only one reference to a mutable array may be passed as an argument to a function, "
                                 f"but when tracing {name} the mutable array reference of type "
                                 f"{leaf.aval.str_short()} appeared at both {names[j]} and {names[i]}")


def leaf_location(path: Sequence[Any], positions: Sequence[int] | None = None) -> str:
    """'argument 2['w']' or "keyword argument 'lr'" for a leaf's key path in (args, kwargs). positions maps an
    index of args to the argument's position in the call, where static arguments were taken out of args."""
    if len(path) < 2:
        return "the arguments"
    rest = keystr(tuple(path[2:]))
    if path[0].idx == 0:
        index = path[1].idx
        position = positions[index] if positions is not None and index < len(positions) else index
        return f"argument {position}{rest}"
    return f"keyword argument {path[1].key!r}{rest}"


def first_mismatch(args: Sequence[Any], kwargs: dict[str, Any], leaves: Sequence[Any],
                   expected: Sequence[ShapedArray], skip_non_arrays: bool = False
                   ) -> tuple[str, ShapedArray, ShapedArray] | None:
    """(where, expected type, given type) of the first of a call's leaves (those of (args, kwargs)) whose shape or
    dtype differs from the expected one, or None; its key path is found only then. With skip_non_arrays, leaves
    that are not arrays are passed over (the call that follows names what they are)."""
    for i, (leaf, want) in enumerate(zip(leaves, expected)):
        try:
            got = aval_of(leaf)
        except TypeError:
            if skip_non_arrays:
                continue
            raise
        if got.shape != want.shape or got.dtype != want.dtype:
            return leaf_location(tree_flatten_with_path((args, kwargs))[0][i][0]), want, got
    return None


def call_positions(num_dynamic: int, statics: Sequence[tuple[Any, Any]]) -> list[int]:
    """The positions in a call of its dynamic positional arguments, given the (position or name, value) pairs of
    its static ones (a jitted function's statics are taken out of its arguments)."""
    static_positions = {where for where, _ in statics if isinstance(where, int)}
    return [i for i in range(num_dynamic + len(static_positions)) if i not in static_positions]


def as_tuple(nums: int | Sequence[int] | None) -> tuple[int, ...]:
    if nums is None:
        return ()
    return (nums,) if isinstance(nums, int) else tuple(nums)


class Float0Result:
    """A float0 array (the tangent or cotangent of an integer or boolean value) that a staged function returns:
    it holds no data and no IR value can be one, so it is a pytree node with no children whose unflattening makes
    it again (its shape in the treedef). A program returns it as JAX's does."""
    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape


register_pytree_node(Float0Result, lambda x: ((), x.shape), lambda shape, _: dt.float0_zeros(shape))


class PythonResult:
    """A value of a function's aux output (has_aux) that is not an array: a string, a Python number, any object. As
    JAX's grad, vjp and jvp, it is returned as it is (a pytree node with no children, the value in its treedef),
    and the function's Python runs again on each call outside jit (its staging is not cached)."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


register_pytree_node(PythonResult, lambda x: ((), x.value), lambda value, _: value)


def is_array_leaf(x: Any) -> bool:
    """Whether a pytree leaf is an array (ember's, traced or not, numpy's, or one with __jax_array__), as opposed
    to a Python number or any other object (what vmap passes unmapped, and aux returns, as they are)."""
    return isinstance(x, Tracer | Array | np.ndarray | np.generic) or hasattr(x, "__jax_array__")


def _float0_node(x: Any) -> Any:
    """x, or a Float0Result node for a float0 array."""
    return Float0Result(np.shape(x)) if isinstance(x, np.ndarray) and x.dtype == dt.float0 else x


def _aux_as_nodes(aux: Any) -> Any:
    """aux with its float0 arrays and its values that are not arrays made pytree nodes (see PythonResult)."""
    found = []

    def node(x: Any) -> Any:
        if is_array_leaf(x):
            return _float0_node(x)
        found.append(x)
        return PythonResult(x)
    aux = tree_map(node, aux)
    if found:
        runs_python_each_call()
    return aux


class _OutStore:
    """Receives the output structure found while a function is staged out."""
    tree: PyTreeDef | None = None
    aux_tree: PyTreeDef | None = None


def stage_with_aux(fun: Callable[..., Any], in_tree: PyTreeDef, avals: Sequence[ShapedArray], has_aux: bool,
                    name: str, values: Sequence[Any] | None = None, named_like: Any = None) -> tuple[IR, _OutStore]:
    """Stage fun(*args, **kwargs) out (in_tree is that of (args, kwargs)). The IR's outputs are the leaves of
    the result, then (with has_aux, when fun returns (result, aux)) the leaves of aux. With values (the leaves'
    concrete values) the staging is concrete: Python code in fun may depend on them. Error messages name the
    inputs after the parameters of named_like (by default fun)."""
    store = _OutStore()

    def flat(*leaves: Any) -> list[Any]:
        args, kwargs = in_tree.unflatten(leaves)
        result = fun(*args, **kwargs)
        aux_leaves: list[Any] = []
        if has_aux:
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise TypeError(f"{name}: with has_aux=True the function must return a pair (output, aux)")
            result, aux = result
            aux_leaves, store.aux_tree = tree_flatten(_aux_as_nodes(aux))
        out_leaves, store.tree = tree_flatten(tree_map(_float0_node, result))
        check_no_refs_returned(name, out_leaves + aux_leaves)
        return out_leaves + aux_leaves

    # a concrete staging is always an autodiff API's: the function it differentiates
    ir = stage_flat(flat, avals, values, name, leaf_names(named_like or fun, in_tree),
                    differentiated=values is not None)
    if key_reuse.checking():
        key_reuse.check_ir(ir, name)
    return ir, store


def leaf_names(fun: Any, in_tree: PyTreeDef) -> list[str]:
    """Names of the leaves of (args, kwargs) for error messages: the parameter names of fun, with key paths
    inside pytree arguments ("params['w']", "args[1]"). Remembered per (code, in_tree) for plain functions, whose
    parameters their code fixes (a fresh closure per call stages the same code again and again)."""
    if type(fun) is not types.FunctionType or hasattr(fun, "__wrapped__") or hasattr(fun, "__signature__"):
        return _leaf_names(fun, in_tree)
    key = (fun.__code__, in_tree)
    names = _leaf_names_seen.lookup(key)
    if names is None:
        names = _leaf_names(fun, in_tree)
        _leaf_names_seen.store(key, names)
    return names


_leaf_names_seen = LRUCache("program_cache_size")


def _leaf_names(fun: Any, in_tree: PyTreeDef) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in tree_flatten_with_path(in_tree.unflatten([0] * in_tree.num_leaves))[0]:
        if path[0].idx == 1:  # a keyword argument: its key path starts with the keyword
            names.append(f"argument {path[1].key}{keystr(path[2:])}")
            continue
        position = path[1].idx
        head = params[position] if position < len(params) else f"args[{position}]"
        names.append(f"argument {head}{keystr(path[2:])}")
    return names


def broadcast_prefix(api: str, what: str, prefix: Any, tree: Any) -> list[Any]:
    """One entry of prefix per leaf of tree, where prefix is a tree prefix of tree (its leaves are ints or None,
    as vmap's in_axes and out_axes): an entry applies to every leaf of the subtree it stands at."""
    try:
        return prefix_entries(prefix, tree, lambda x: x is None)
    except ValueError as err:
        raise ValueError(f"{api}: {what} specification must be a tree prefix of the corresponding value, got "
                         f"specification {prefix!r} for value tree {tree_structure(tree)}: {err}") from None


def with_outputs(ir: IR, outs: Sequence[Atom], out_tree: PyTreeDef | None) -> IR:
    """A new IR computing ir's equations with other outputs and output structure (ir itself is left as it is: it
    may be shared by a cache)."""
    return IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, outs, out_tree)
