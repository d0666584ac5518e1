"""jax.extend.linear_util on ember: a function wrapped for JAX's function transformations (WrappedFun), as the
libraries that use JAX's internals build one (`lu.wrap_init(f, debug_info=...)`, then
`jax.api_util.flatten_fun_nokwargs` and `jax.interpreters.partial_eval.trace_to_jaxpr_nounits`: flax's
lazy_init, partial_eval_by_shape and nn.scan). ember stages every transformation as an IR, so a WrappedFun is the
function and the transformations stacked on it, called with `call_wrapped`.

A transformation is a function `gen(f, *static_args, *args, **kwargs)` of the function below it (`f`) and the call's
arguments: `transformation2(gen, fun, *static_args)` stacks it on fun; `transformation_with_aux2` also gives it a
Store for an auxiliary output, read after the call through the thunk it returns. `transformation` and
`transformation_with_aux` take JAX's older generator form (the generator yields the arguments to call f with,
receives f's result, and yields the transformed result, with the auxiliary output). A WrappedFun compares equal to
another that wraps the same function under the same transformations, static arguments and params, so that
`cache(call)` memoizes `call(fun, *args)` on it (and, on a hit, fills fun's stores as the first call did)."""
from __future__ import annotations

import functools
import re
import time
import weakref
from typing import Any, Callable, Hashable, NamedTuple, Sequence

from ember._core.cache import LRUCache, on_clear
from ember._core.dtypes import StagingOptions
from ember._core.pytree import tree_flatten_with_path, keystr


class StoreException(Exception):
    """A value read from a Store before the function that fills it has run (or merge_linear_aux finding both or
    neither of two stores filled)."""


_EMPTY = object()


class Store:
    """Where a wrapped function leaves a value for its caller (the output structure flatten_fun finds). A later
    call of the function stores again, over the earlier value (JAX's refuses a second store; ember's staging may
    run a function twice, once to learn its output types)."""
    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: Any = _EMPTY

    def store(self, value: Any) -> None:
        self._value = value

    def reset(self) -> None:
        self._value = _EMPTY

    @property
    def val(self) -> Any:
        if self._value is _EMPTY:
            raise StoreException("Store empty: the wrapped function has not been called yet")
        return self._value

    def __bool__(self) -> bool:
        return self._value is not _EMPTY

    def __call__(self) -> Any:  # (flatten_fun's out_tree is called: out_tree())
        return self.val


class EqualStore(Store):
    """A Store that a second call may fill again only with an equal value (transformation_with_aux2's
    use_eq_store: a function traced twice must find the same auxiliary output)."""
    __slots__ = ()

    def store(self, value: Any) -> None:
        if self._value is not _EMPTY:
            try:
                same = bool(self._value == value)
            except Exception as err:  # (an auxiliary value without a truthful ==: say which)
                raise StoreException(f"Store occupied by {self._value!r}, which cannot be compared with "
                                     f"{value!r}: {err}") from None
            if not same:
                raise StoreException(f"Store occupied with a value not equal to the new one: {self._value!r} "
                                     f"then {value!r}")
        self._value = value


class DebugInfo(NamedTuple):
    """What a traced function is, for messages (jax.extend.core.DebugInfo): what traced it (traced_for: 'jit',
    'vmap', ...), the function's name and place (func_src_info: 'name at file:line', or 'name'), its flattened
    arguments' names (arg_names; None where unknown) and its flattened results' paths (result_paths; None until
    known, or a thunk giving them once the function has run)."""
    traced_for: str
    func_src_info: str | None
    arg_names: tuple[str | None, ...] | None
    result_paths: Any = None

    @property
    def func_name(self) -> str:
        return (self.func_src_info or "<unknown>").split(" ")[0]

    @property
    def func_filename(self) -> str | None:
        found = _SRC_INFO.match(self.func_src_info or "")
        return found.group(2) if found else None

    @property
    def func_lineno(self) -> int | None:
        found = _SRC_INFO.match(self.func_src_info or "")
        return int(found.group(3)) if found and found.group(3) else None

    def replace_func_name(self, name: str) -> "DebugInfo":
        parts = (self.func_src_info or "<unknown>").split(" ")
        return self._replace(func_src_info=" ".join([name, *parts[1:]]))

    def resolve_result_paths(self) -> "DebugInfo":
        """This debug info with result_paths a tuple (a thunk given for them called now)."""
        if callable(self.result_paths):
            return self._replace(result_paths=tuple(self.result_paths()))
        return self

    def set_result_paths(self, ans: Any) -> "DebugInfo":
        """This debug info with the paths of ans's leaves as result_paths ('result', 'result[0]', "result['a']")."""
        leaves, _ = tree_flatten_with_path(ans)
        return self._replace(result_paths=tuple(f"result{keystr(path)}" for path, _ in leaves))

    def safe_arg_names(self, expected_count: int) -> tuple[str | None, ...]:
        """arg_names, or expected_count empty names where they are unknown or do not number expected_count."""
        if self.arg_names is not None and len(self.arg_names) == expected_count:
            return self.arg_names
        return ("",) * expected_count

    def filter_arg_names(self, keep: Sequence[bool]) -> tuple[str | None, ...] | None:
        """The names of the arguments marked in keep (None where the names are unknown)."""
        if self.arg_names is None:
            return None
        return tuple(n for n, k in zip(self.safe_arg_names(len(keep)), keep) if k)

    def safe_result_paths(self, expected_count: int) -> tuple[str, ...]:
        paths = self.result_paths
        if isinstance(paths, tuple) and len(paths) == expected_count:
            return paths
        return ("",) * expected_count

    def filter_result_paths(self, keep: Sequence[bool]) -> tuple[str, ...] | None:
        if not isinstance(self.result_paths, tuple):
            return None
        return tuple(p for p, k in zip(self.result_paths, keep) if k)

    def with_unknown_names(self) -> "DebugInfo":
        return self._replace(arg_names=None, result_paths=None)


_SRC_INFO = re.compile(r"([^ ]+)(?: at (.+):(\d+))?$")


class WrappedFun:
    """f, the transformations stacked on it and the params it is called with (as keywords); `call_wrapped(*args,
    **kwargs)` calls the whole stack: the last transformation stacked receives the arguments first. Fields as JAX's:
    f, f_transformed (the stack as one function), transforms ((gen, static_args) pairs, the last stacked first),
    stores (their auxiliary-output Stores), params, in_type, debug_info. Made by wrap_init."""
    __slots__ = ("f", "f_transformed", "transforms", "stores", "params", "in_type", "debug_info")

    def __init__(self, f: Callable[..., Any], f_transformed: Callable[..., Any],
                 transforms: tuple[tuple[Callable[..., Any], tuple[Hashable, ...]], ...],
                 stores: tuple[Store | None, ...], params: tuple[tuple[str, Any], ...], in_type: Any,
                 debug_info: DebugInfo | None):
        self.f, self.f_transformed = f, f_transformed
        self.transforms, self.stores, self.params = tuple(transforms), tuple(stores), tuple(params)
        self.in_type, self.debug_info = in_type, debug_info

    @property
    def __name__(self) -> str:
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, gen: Callable[..., Any], gen_static_args: tuple[Hashable, ...], out_store: Store | None
             ) -> "WrappedFun":
        """This function with gen stacked on it: gen(f, [out_store,] *gen_static_args, *args, **kwargs)."""
        lead = (out_store,) if out_store is not None else ()
        return WrappedFun(self.f, functools.partial(gen, self.f_transformed, *lead, *gen_static_args),
                          ((gen, tuple(gen_static_args)),) + self.transforms, (out_store,) + self.stores,
                          self.params, None, self.debug_info)

    def populate_stores(self, stores: Sequence[Store | None]) -> None:
        """Fill this function's stores with the values of stores (those of an equal WrappedFun already called)."""
        for mine, theirs in zip(self.stores, stores):
            if mine is not None:
                mine.store(theirs.val)

    def call_wrapped(self, *args: Any, **kwargs: Any) -> Any:
        return self.f_transformed(*args, **kwargs)

    def replace_debug_info(self, debug_info: DebugInfo) -> "WrappedFun":
        return WrappedFun(self.f, self.f_transformed, self.transforms, self.stores, self.params, self.in_type,
                          debug_info)

    def with_unknown_names(self) -> "WrappedFun":
        return self if self.debug_info is None else self.replace_debug_info(self.debug_info.with_unknown_names())

    def _key(self) -> tuple[Any, ...]:
        return (self.f, self.transforms, self.params, self.in_type, self.debug_info)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WrappedFun) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        stack = "".join(f"\n{i}   : {getattr(gen, '__name__', gen)}   {args}"
                        for i, (gen, args) in enumerate(self.transforms))
        return f"Wrapped function:{stack}\nCore: {self.__name__}\n"


def wrap_init(f: Callable[..., Any], params: dict[str, Any] | None = None, *, debug_info: DebugInfo | None = None
              ) -> WrappedFun:
    """f as a WrappedFun with no transformations (called with params as keywords)."""
    items = tuple(sorted((params or {}).items()))
    return WrappedFun(f, functools.partial(f, **dict(items)) if items else f, (), (), items, None,
                      debug_info if debug_info is None else debug_info._replace(result_paths=None))


def _curry(impl: Callable[..., Any]) -> Callable[..., Any]:
    """JAX's curried form of a transformation maker: `maker(gen)` is the transformation, and `maker(gen)(fun,
    *static)` or `maker(gen, fun, *static)` is a partial application, called with () to apply it (as JAX's
    `lu.transformation2(gen, fun, *args)()`)."""
    maker = functools.partial(functools.partial, impl)
    functools.update_wrapper(maker, impl)
    return maker


def _transformation2(gen: Callable[..., Any], fun: WrappedFun, *gen_static_args: Hashable) -> WrappedFun:
    """fun with gen stacked on it: called, gen(f, *gen_static_args, *args, **kwargs), f the function below."""
    return fun.wrap(gen, gen_static_args, None)


def _transformation_with_aux2(gen: Callable[..., Any], fun: WrappedFun, *gen_static_args: Hashable,
                              use_eq_store: bool = False, unk_names: bool = False
                              ) -> tuple[WrappedFun, Callable[[], Any]]:
    """(fun with gen stacked on it, a thunk giving its auxiliary output: its Store): called, gen(f, store,
    *gen_static_args, *args, **kwargs) stores the auxiliary output in store."""
    store = EqualStore() if use_eq_store else Store()
    wrapped = fun.wrap(gen, gen_static_args, store)
    return (wrapped.with_unknown_names() if unk_names else wrapped), store  # (a Store called gives its value)


def _generator_call(gen: Callable[..., Any], f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One call through a generator-form transformation: its first yield gives (args, kwargs) for f; sent f's
    result, its second gives the transformed result."""
    inst = gen(*args, **kwargs)
    f_args, f_kwargs = next(inst)
    return inst.send(f(*f_args, **f_kwargs))


def _transformation(gen: Callable[..., Any], fun: WrappedFun, *gen_static_args: Hashable) -> WrappedFun:
    """transformation2 for a generator gen(*gen_static_args, *args, **kwargs) (see _generator_call)."""
    return _transformation2(functools.partial(_generator_call, gen), fun, *gen_static_args)


def _generator_call_with_aux(gen: Callable[..., Any], f: Callable[..., Any], store: Store, *args: Any,
                             **kwargs: Any) -> Any:
    result, aux = _generator_call(gen, f, *args, **kwargs)
    store.store(aux)
    return result


def _transformation_with_aux(gen: Callable[..., Any], fun: WrappedFun, *gen_static_args: Hashable
                             ) -> tuple[WrappedFun, Callable[[], Any]]:
    """transformation_with_aux2 for a generator whose second yield is (the result, the auxiliary output)."""
    return _transformation_with_aux2(functools.partial(_generator_call_with_aux, gen), fun, *gen_static_args)


transformation2 = _curry(_transformation2)
transformation_with_aux2 = _curry(_transformation_with_aux2)
transformation = _curry(_transformation)
transformation_with_aux = _curry(_transformation_with_aux)


def merge_linear_aux(aux1: Callable[[], Any], aux2: Callable[[], Any]) -> tuple[bool, Any]:
    """Of two auxiliary-output thunks exactly one of which was filled (two paths, one taken): (whether it was the
    first, its value); a StoreException when both or neither were."""
    try:
        first = aux1()
    except StoreException:
        try:
            return False, aux2()
        except StoreException:
            raise StoreException("merge_linear_aux: neither store occupied") from None
    try:
        aux2()
    except StoreException:
        return True, first
    raise StoreException("merge_linear_aux: both stores occupied")


_CACHES: "weakref.WeakSet[Any]" = weakref.WeakSet()


def cache(call: Callable[..., Any], *, explain: Callable[..., None] | None = None) -> Callable[..., Any]:
    """call(fun, *args), memoized on fun (a WrappedFun: its function, held weakly, its transformations, params and
    input types), args (hashable) and the options that change what a function stages to (enable_x64 and the
    others jit's caches key on). A hit fills fun's stores with what the first call stored, so that its auxiliary
    outputs read as after a call. explain(fun, first_use_of_fun, its_cache, key, seconds) is called on each miss.
    The memoized function has cache_clear() and evict_function(f); ember.clear_caches() empties it too. Each
    function keeps at most jit_cache_size entries, as jit's caches (the least recently used dropped)."""
    per_function: "weakref.WeakKeyDictionary[Any, LRUCache]" = weakref.WeakKeyDictionary()

    def memoized(fun: WrappedFun, *args: Any) -> Any:
        if not isinstance(fun, WrappedFun):
            raise TypeError(f"linear_util.cache({getattr(call, '__name__', call)}): the first argument must be a "
                            f"WrappedFun (linear_util.wrap_init), got {type(fun).__name__}")
        table = per_function.get(fun.f)
        first_use = table is None
        if table is None:
            table = per_function[fun.f] = LRUCache("jit_cache_size")  # (the option bounding jit's per-function caches)
        key = (fun.transforms, fun.params, fun.in_type, args, StagingOptions.token)
        found = table.lookup(key)
        if found is not None:
            ans, stores = found
            fun.populate_stores(stores)
            return ans
        start = time.time()
        ans = call(fun, *args)
        if explain is not None:
            explain(fun, first_use, table, key, time.time() - start)
        table.store(key, (ans, fun.stores))
        return ans

    memoized.cache_clear = per_function.clear  # type: ignore[attr-defined]
    memoized.evict_function = lambda f: per_function.pop(f, None)  # type: ignore[attr-defined]
    functools.update_wrapper(memoized, call)
    _CACHES.add(memoized)
    return memoized


on_clear(lambda: [memoized.cache_clear() for memoized in list(_CACHES)])

__all__ = ["Store", "StoreException", "WrappedFun", "cache", "merge_linear_aux", "transformation",
           "transformation2", "transformation_with_aux", "transformation_with_aux2", "wrap_init"]
