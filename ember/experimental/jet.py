"""ember.experimental.jet, as jax.experimental.jet: Taylor-mode differentiation along a polynomial path
(docs/transformations.md).

`jet(fun, primals, series)` takes the truncated Taylor series of the inputs, x_i(t) = primals[i] + sum over
j = 1..K of series[i][j-1] * t**j / j! (each term with primals[i]'s structure, shapes and dtypes), and returns fun's
value at t = 0 and the first K derivatives of t -> fun(*x(t)) at t = 0 (with factorial_scaled=False, as jet2: the
terms are the normalized coefficients c_j of x_i(t) = primals[i] + sum c_j t**j, in and out).

ember computes the K derivatives as K nested forward-mode derivatives (ember.jvp) of that scalar path, so jet works
for every primitive that has a JVP rule (all of ember's differentiable ones), and composes with jit, vmap and grad
like any ember function. Nesting repeats the lower-order derivatives in the traced program (2**K copies before
simplification); under jit XLA merges the identical computations. JAX propagates the coefficients through a Taylor
rule per primitive instead: the values agree to rounding (JAX's factorials are exp(lgamma(n + 1)), off by an ulp or
so), and where JAX has no rule (a custom_jvp function such as nn.softplus: JAX's jet fails) ember still
differentiates. Primals may be pytrees (JAX's are arrays), each term of series[i] with primals[i]'s structure; they
must be floating (or complex): an integer primal is a TypeError naming it (JAX passes integer primals through
without checking); series whose lengths or shapes do not match the primals are a ValueError naming the argument."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember import numpy as jnp
from ember._api.forward import jvp
from ember._core import aval_of
from ember._core.pytree import tree_flatten, tree_unflatten


def fact(n: int) -> float:
    """n! (as jax.experimental.jet.fact)."""
    return float(math.factorial(int(n)))


def jet(fun: Callable[..., Any], primals: Sequence[Any], series: Sequence[Sequence[Any]],
        factorial_scaled: bool = True, **_: Any) -> tuple[Any, Any]:
    """(fun(*primals), the derivatives of order 1..K of t -> fun(*x(t)) at t = 0, each leaf of fun's output a list
    of K arrays), x(t) the inputs' truncated Taylor series; with factorial_scaled=False both are normalized
    coefficients (the k-th derivative over k!)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise TypeError(f"jet: primals and series must be tuples or lists, got {type(primals).__name__} and "
                        f"{type(series).__name__}")
    if len(primals) != len(series):
        raise ValueError(f"jet: {len(primals)} primals but series for {len(series)} arguments")
    orders = {len(terms) for terms in series}
    if len(orders) > 1:
        raise ValueError("jet terms have inconsistent lengths for different arguments")
    order = orders.pop() if orders else 0
    flat_primals, in_tree = tree_flatten(tuple(primals))
    flat_primals = [jnp.asarray(x) for x in flat_primals]
    for i, x in enumerate(flat_primals):
        if not jnp.issubdtype(aval_of(x).dtype, jnp.inexact):
            raise TypeError(f"jet: primal {i} must be a floating-point or complex array, got "
                            f"{aval_of(x).str_short()}")
    # flat_terms[k][i]: term k + 1 of flat primal i
    flat_terms = []
    for k in range(order):
        leaves, tree = tree_flatten(tuple(terms[k] for terms in series))
        if tree != in_tree:
            raise ValueError(f"jet: the series' term {k + 1} has the structure {tree}, the primals {in_tree}")
        leaves = [jnp.asarray(leaf) for leaf in leaves]
        for i, (term, x) in enumerate(zip(leaves, flat_primals)):
            if aval_of(term).shape != aval_of(x).shape:
                raise ValueError(f"jet: term {k + 1} of primal {i} has shape {aval_of(term).shape}, the primal "
                                 f"{aval_of(x).shape}")
        flat_terms.append(leaves)
    scale = [fact(k + 1) if factorial_scaled else 1.0 for k in range(order)]
    out_trees = []

    def path(t: Any) -> list[Any]:
        xs = list(flat_primals)
        for k, terms in enumerate(flat_terms):
            power = t ** (k + 1) / scale[k]
            xs = [x + term * (power if aval_of(power).weak_type else power.astype(aval_of(term).dtype))
                  for x, term in zip(xs, terms)]
        out, tree = tree_flatten(fun(*tree_unflatten(in_tree, xs)))
        out_trees.append(tree)
        return out

    def derivatives(k: int) -> Callable[[Any], list[list[Any]]]:
        """t -> [the path's value, its first derivative, ..., its k-th], each a list of fun's output leaves."""
        if k == 0:
            return lambda t: [path(t)]
        lower = derivatives(k - 1)

        def upto(t: Any) -> list[list[Any]]:
            values, slopes = jvp(lower, (t,), (jnp.ones_like(t),))
            return values + [slopes[-1]]
        return upto

    inputs = flat_primals + [term for terms in flat_terms for term in terms]
    if all(aval_of(x).weak_type for x in inputs):  # (Python numbers: the path and the results weakly typed, as JAX's)
        t = jnp.asarray(0.0)
    else:
        t = jnp.zeros((), np.dtype(jnp.result_type(*inputs)).type(0).real.dtype)
    result = derivatives(order)(t)
    out_tree = out_trees[-1]
    primal_out = tree_unflatten(out_tree, result[0])
    coefficients = [[leaf if factorial_scaled else leaf / fact(k) for leaf in result[k]]
                    for k in range(1, order + 1)]
    series_out = tree_unflatten(out_tree, [[coefficients[k][i] for k in range(order)]
                                           for i in range(len(result[0]))])
    return primal_out, series_out


def jet2(fun: Callable[..., Any], primals: Sequence[Any], series: Sequence[Sequence[Any]], *,
         factorial_scaled: bool = False, **kwargs: Any) -> tuple[Any, Any]:
    """jet with normalized Taylor coefficients in and out by default (as jax.experimental.jet.jet2)."""
    return jet(fun, primals, series, factorial_scaled=factorial_scaled, **kwargs)


# (JAX's module has these names too, from its imports)
from ember._core.pytree import (register_pytree_node as register_pytree_node,  # noqa: E402
                                tree_structure as tree_structure)
from ember.example_libraries.optimizers import safe_zip as safe_zip, unzip2 as unzip2  # noqa: E402
from ember.tree_util import treedef_is_leaf as treedef_is_leaf  # noqa: E402


__all__ = ["fact", "jet", "jet2"]
