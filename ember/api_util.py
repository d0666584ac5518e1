"""jax.api_util on ember: the helpers libraries use with jax.extend.linear_util to flatten a function for JAX's
internal transformations (flatten_fun, flatten_fun_nokwargs), fix some of its arguments (argnums_partial), describe
it (debug_info), type an argument (shaped_abstractify), and the argument bookkeeping of jit-like wrappers
(donation_vector, rebase_donate_argnums, flatten_axes; safe_map)."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from ember._api.staging import fun_name
from ember._core import ShapedArray, aval_of
from ember._core import dtypes as _dt
from ember._core.pytree import PyTreeDef, prefix_entries, tree_flatten
from ember.extend.linear_util import DebugInfo, Store, WrappedFun, transformation2, transformation_with_aux2


def debug_info(traced_for: str, fun: Callable[..., Any], args: Any, kwargs: Any, *,
               static_argnums: Any = (), static_argnames: Any = (), result_paths_thunk: Any = None,
               sourceinfo: str | None = None, signature: Any = None) -> DebugInfo:
    """The DebugInfo of fun traced for traced_for (its name and file:line; argument names are not tracked)."""
    try:
        code = inspect.unwrap(fun).__code__
        where = f"{fun_name(fun)} at {code.co_filename}:{code.co_firstlineno}"
    except (AttributeError, ValueError):
        where = fun_name(fun)
    return DebugInfo(traced_for, sourceinfo or where, None)


def _flatten(f: Callable[..., Any], store: Store, in_tree: PyTreeDef, kwargs_in_tree: bool, *leaves: Any
             ) -> list[Any]:
    """The transformation flatten_fun stacks: f called on in_tree's leaves, its outputs' structure stored."""
    if kwargs_in_tree:
        args, kwargs = in_tree.unflatten(leaves)
    else:
        args, kwargs = in_tree.unflatten(leaves), {}
    out_leaves, tree = tree_flatten(f(*args, **kwargs))
    store.store(tree)
    return out_leaves


def flatten_fun(f: WrappedFun, in_tree: PyTreeDef) -> tuple[WrappedFun, Store]:
    """f of the leaves of (args, kwargs) (in_tree's) returning its outputs' leaves; the second result, called,
    gives the outputs' structure once the function has run. (A transformation stacked on f: two flattenings of
    one function with one structure are equal WrappedFuns, for linear_util.cache.)"""
    return transformation_with_aux2(_flatten)(f, in_tree, True)


def flatten_fun_nokwargs(f: WrappedFun, in_tree: PyTreeDef) -> tuple[WrappedFun, Store]:
    """flatten_fun for in_tree the structure of the positional arguments alone (a tuple)."""
    return transformation_with_aux2(_flatten)(f, in_tree, False)


def shaped_abstractify(x: Any) -> ShapedArray:
    """The abstract value of an array, a number, or an object with shape and dtype (a ShapeDtypeStruct)."""
    try:
        return aval_of(x)
    except TypeError:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return ShapedArray(tuple(x.shape), _dt.canonicalize_dtype(x.dtype), bool(getattr(x, "weak_type", False)))
        raise


def safe_map(f: Callable[..., Any], *args: Any) -> list[Any]:
    """list(map(f, *args)), its iterables of equal lengths (a ValueError naming the first that is not, as JAX's)."""
    lists = [list(a) for a in args]
    for i, items in enumerate(lists[1:], start=2):
        if len(items) != len(lists[0]):
            relation = "shorter" if len(items) < len(lists[0]) else "longer"
            raise ValueError(f"safe_map() argument {i} is {relation} than argument 1")
    return list(map(f, *lists))


def _argnums_in_bounds(argnums: Any, count: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for i in nums:
        if not -count <= i < count:
            raise ValueError("Positional argument indices, e.g. for `static_argnums`, must have value greater than "
                             f"or equal to -len(args) and less than len(args), but got value {i} for len(args) == "
                             f"{count}.")
        out.append(i % count)
    return tuple(out)


class _Fixed:
    """A static argument kept by argnums_partial, compared by exact type and value (a cache key's part), or by
    identity where it does not hash (require_static_args_hashable=False)."""
    __slots__ = ("val", "_by_id")

    def __init__(self, val: Any):
        self.val = val
        try:
            hash(val)
            self._by_id = False
        except TypeError:
            self._by_id = True

    def __hash__(self) -> int:
        return id(self.val) if self._by_id else hash(self.val)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Fixed) or type(self.val) is not type(other.val):
            return False
        return self.val is other.val if self._by_id or other._by_id else bool(self.val == other.val)


def _partial(f: Callable[..., Any], dyn_argnums: tuple[int, ...], fixed_args: tuple[_Fixed, ...], *dyn_args: Any,
             **kwargs: Any) -> Any:
    """The transformation argnums_partial stacks: the arguments at dyn_argnums given, the others fixed."""
    given = dict(zip(dyn_argnums, dyn_args))
    rest = iter(fixed_args)
    full = [given[i] if i in given else next(rest).val for i in range(len(fixed_args) + len(dyn_args))]
    return f(*full, **kwargs)


def argnums_partial(f: WrappedFun, dyn_argnums: int | Sequence[int], args: Sequence[Any],
                    require_static_args_hashable: bool = True) -> tuple[WrappedFun, tuple[Any, ...]]:
    """(f of the arguments at dyn_argnums alone, the others fixed to their values in args; those arguments), as
    jax.api_util.argnums_partial. A fixed argument must hash unless require_static_args_hashable=False (JAX's
    ValueError)."""
    nums = _argnums_in_bounds(dyn_argnums, len(args))
    fixed = []
    for i, arg in enumerate(args):
        if i in nums:
            continue
        if require_static_args_hashable:
            try:
                hash(arg)
            except TypeError:
                raise ValueError("Non-hashable static arguments are not supported, as this can lead to unexpected "
                                 f"cache-misses. Static argument (index {i}) of type {type(arg)} for function "
                                 f"{f.__name__} is non-hashable.") from None
        fixed.append(_Fixed(arg))
    return transformation2(_partial)(f, nums, tuple(fixed)), tuple(args[i] for i in nums)


def donation_vector(donate_argnums: Sequence[int], donate_argnames: Sequence[str], in_tree: PyTreeDef,
                    kws: bool = True) -> tuple[bool, ...]:
    """Per leaf of the arguments (in_tree: of (args, kwargs), or of args alone with kws=False), whether it is
    donated: the leaves of the positional arguments at donate_argnums and of the keywords in donate_argnames."""
    args_tree, kwargs_tree = in_tree.children if kws else (in_tree, None)
    flags: list[bool] = []
    for i, arg in enumerate(args_tree.children):
        flags.extend([i in donate_argnums] * arg.num_leaves)
    if kwargs_tree is not None and kwargs_tree.node_type is not None:
        for key, value in zip(kwargs_tree.aux, kwargs_tree.children):
            flags.extend([key in donate_argnames] * value.num_leaves)
    return tuple(flags)


def rebase_donate_argnums(donate_argnums: Sequence[int], static_argnums: Sequence[int]) -> tuple[int, ...]:
    """donate_argnums as positions among the arguments left once static_argnums are taken out (sorted, unique):
    rebase_donate_argnums((3, 4), (0, 1)) == (1, 2). A position both static and donated is JAX's ValueError."""
    statics, donated = sorted(set(static_argnums)), sorted(set(donate_argnums))
    both = set(statics) & set(donated)
    if both:
        raise ValueError(f"`static_argnums` {statics} and `donate_argnums` {donated} cannot intersect.")
    return tuple(d - sum(1 for s in statics if s < d) for d in donated)


def flatten_axes(name: str, treedef: PyTreeDef, axis_tree: Any, *, kws: bool = False,
                 tupled_args: bool = False) -> list[Any]:
    """The entry of axis_tree (a tree prefix of treedef's trees, None a leaf: vmap's in_axes) for each leaf of
    treedef, as jax.api_util.flatten_axes; a tree that is no prefix is JAX's ValueError, naming name."""
    placeholders = treedef.unflatten([_Leaf()] * treedef.num_leaves)
    try:
        return prefix_entries(axis_tree, placeholders, lambda x: x is None)
    except ValueError as err:
        hint = (f" Note that {name} that are non-trivial pytrees should always be wrapped in a tuple representing "
                "the argument list.") if tupled_args else ""
        raise ValueError(f"{name} specification must be a tree prefix of the corresponding value; {hint}\n  "
                         f"{err} (the value's structure: {treedef}, the specification: {axis_tree!r})") from None


class _Leaf:
    """A leaf standing for one of a structure's leaves (flatten_axes)."""


__all__ = ["DebugInfo", "argnums_partial", "debug_info", "donation_vector", "flatten_axes", "flatten_fun",
           "flatten_fun_nokwargs", "rebase_donate_argnums", "safe_map", "shaped_abstractify"]
