"""jax.api_util on ember: the helpers libraries use with jax.extend.linear_util to flatten a function for JAX's
internal transformations (flatten_fun, flatten_fun_nokwargs), describe it (debug_info), and type an argument
(shaped_abstractify)."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Sequence

from ember._api.staging import fun_name
from ember._core import ShapedArray, aval_of
from ember._core import dtypes as _dt
from ember._core.pytree import PyTreeDef, tree_flatten
from ember.extend.linear_util import Store, WrappedFun


@dataclasses.dataclass(frozen=True)
class DebugInfo:
    """What a traced function is, for messages (jax.extend.core.DebugInfo): what traced it, the function's name and
    place, its arguments' names (None where unknown), its results' paths (None until known)."""
    traced_for: str
    func_src_info: str | None
    arg_names: tuple[str | None, ...] | None
    result_paths: tuple[str, ...] | None = None

    @property
    def func_name(self) -> str:
        return (self.func_src_info or "<unknown>").split(" ")[0]


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


def flatten_fun(f: WrappedFun, in_tree: PyTreeDef) -> tuple[WrappedFun, Store]:
    """f of the leaves of (args, kwargs) (in_tree's) returning its outputs' leaves; the second result, called,
    gives the outputs' structure once the function has run."""
    def call(leaves: Sequence[Any]) -> Any:
        args, kwargs = in_tree.unflatten(leaves)
        return f.call_wrapped(*args, **kwargs)
    return _flat(f, call)


def flatten_fun_nokwargs(f: WrappedFun, in_tree: PyTreeDef) -> tuple[WrappedFun, Store]:
    """flatten_fun for in_tree the structure of the positional arguments alone (a tuple)."""
    return _flat(f, lambda leaves: f.call_wrapped(*in_tree.unflatten(leaves)))


def _flat(f: WrappedFun, call: Callable[[Sequence[Any]], Any]) -> tuple[WrappedFun, Store]:
    store = Store()

    def flat(*leaves: Any) -> list[Any]:
        out_leaves, tree = tree_flatten(call(leaves))
        store.store(tree)
        return out_leaves
    return WrappedFun(flat, (), f.debug_info), store


def shaped_abstractify(x: Any) -> ShapedArray:
    """The abstract value of an array, a number, or an object with shape and dtype (a ShapeDtypeStruct)."""
    try:
        return aval_of(x)
    except TypeError:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return ShapedArray(tuple(x.shape), _dt.canonicalize_dtype(x.dtype), bool(getattr(x, "weak_type", False)))
        raise


__all__ = ["DebugInfo", "debug_info", "flatten_fun", "flatten_fun_nokwargs", "shaped_abstractify"]
