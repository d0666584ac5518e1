"""Derivatives with respect to sparse arrays (jax.experimental.sparse.ad): grad, value_and_grad, jacfwd, jacrev
and jacobian as ember's, except that a sparse argument is differentiated through its data alone (its indices are
integers, not variables) and its derivative is returned as a sparse array with the argument's indices: the
derivative in the subspace of its sparsity pattern."""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Sequence

import ember
from ember._core.pytree import tree_flatten, tree_leaves, tree_unflatten
from ember.experimental.sparse._base import JAXSparse


def _is_sparse(x: Any) -> bool:
    return isinstance(x, JAXSparse)


def _argnums(api: str, argnums: int | Sequence[int]) -> tuple[int, ...]:
    try:
        return (operator.index(argnums),) if not isinstance(argnums, (tuple, list)) else \
            tuple(operator.index(a) for a in argnums)
    except TypeError:
        raise TypeError(f"{api}: argnums must be an int or a sequence of ints, got {argnums!r}") from None


def _flatten_for_sparse_ad(api: str, fun: Callable[..., Any], argnums: tuple[int, ...], args: tuple[Any, ...]
                           ) -> tuple[Callable[..., Any], tuple[int, ...], list[Any], Callable[[Any], Any]]:
    """fun of the flat buffers of args, the flat argnums to differentiate (each sparse argument's data buffer, each
    dense argument's leaves), the flat buffers, and the function that gives the derivatives back args' shape
    (sparse ones rebuilt around their indices)."""
    if any(not 0 <= a < len(args) for a in argnums):
        raise ValueError(f"{api}: argnums {argnums} out of range for {len(args)} positional arguments")
    outer, outer_tree = [], []
    for i, arg in enumerate(args):
        leaves, tree = tree_flatten(arg, is_leaf=_is_sparse)
        outer.append(leaves)
        outer_tree.append(tree)
    flat, spans, starts = [], [], []
    for i, leaves in enumerate(outer):
        arg_spans = []
        for leaf in leaves:
            bufs, tree = tree_flatten(leaf)
            arg_spans.append((len(flat), bufs, tree))
            flat.extend(bufs)
        spans.append(arg_spans)
        starts.append(len(flat))
    diff = []
    for i in argnums:
        for leaf, (start, bufs, _) in zip(outer[i], spans[i]):
            diff.extend([start] if _is_sparse(leaf) else range(start, start + len(bufs)))

    def fun_flat(*values: Any, **kwargs: Any) -> Any:
        rebuilt = []
        for i, arg_spans in enumerate(spans):
            leaves = [tree_unflatten(tree, values[start:start + len(bufs)]) for start, bufs, tree in arg_spans]
            rebuilt.append(tree_unflatten(outer_tree[i], leaves))
        return fun(*rebuilt, **kwargs)

    def postprocess(grads: Any) -> Any:
        grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
        by_position = dict(zip(diff, grads))
        results = []
        for i in argnums:
            leaves = []
            for leaf, (start, bufs, tree) in zip(outer[i], spans[i]):
                if _is_sparse(leaf):
                    leaves.append(_rebuild(tree, bufs, by_position[start]))
                else:
                    leaves.append(tree_unflatten(tree, [by_position[start + k] for k in range(len(bufs))]))
            results.append(tree_unflatten(outer_tree[i], leaves))
        results = [r for r in results if tree_leaves(r)]
        return results[0] if len(argnums) == 1 and results else tuple(results)
    return fun_flat, tuple(diff), flat, postprocess


def _rebuild(tree: Any, bufs: list[Any], grad: Any) -> Any:
    """The sparse array of tree with grad for its data (a Jacobian's leading output dimensions become batch
    dimensions, as vmap stacks sparse arrays)."""
    rebuild = lambda g: tree_unflatten(tree, [g, *bufs[1:]])  # noqa: E731
    for _ in range(grad.ndim - bufs[0].ndim):
        rebuild = ember.vmap(rebuild)
    return rebuild(grad)


def _sparse_ad(api: str, transform: Callable[..., Any], doc: str) -> Callable[..., Callable[..., Any]]:
    def make(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
             **kwargs: Any) -> Callable[..., Any]:
        nums = _argnums(api, argnums)
        single = not isinstance(argnums, (tuple, list))

        @functools.wraps(fun)
        def wrapped(*args: Any, **call_kwargs: Any) -> Any:
            fun_flat, diff, flat, post = _flatten_for_sparse_ad(api, fun, nums, args)
            out = transform(fun_flat, argnums=diff, has_aux=has_aux, **kwargs)(*flat, **call_kwargs)
            fix = (lambda g: post(g)) if single else (lambda g: _as_tuple(post(g), len(nums)))
            if api == "value_and_grad":
                (value, grads) = out
                return value, fix(grads)
            if has_aux:
                return fix(out[0]), out[1]
            return fix(out)
        return wrapped
    make.__name__ = make.__qualname__ = api
    make.__doc__ = doc
    return make


def _as_tuple(result: Any, n: int) -> Any:
    return result if isinstance(result, tuple) else (result,)


grad = _sparse_ad("grad", ember.grad, "Like ember.grad; a sparse argument's gradient is sparse, on its pattern.")
value_and_grad = _sparse_ad("value_and_grad", ember.value_and_grad,
                            "Like ember.value_and_grad; a sparse argument's gradient is sparse, on its pattern.")
jacfwd = _sparse_ad("jacfwd", ember.jacfwd,
                    "Like ember.jacfwd; a sparse argument's Jacobian is sparse (the output dimensions as batch "
                    "dimensions), for dense outputs.")
jacrev = _sparse_ad("jacrev", ember.jacrev,
                    "Like ember.jacrev; a sparse argument's Jacobian is sparse (the output dimensions as batch "
                    "dimensions), for dense outputs.")
jacobian = jacrev

__all__ = ["grad", "jacfwd", "jacobian", "jacrev", "value_and_grad"]
