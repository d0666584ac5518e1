"""linear_transpose: the transpose of a linear function, staged once at the primals' types and run without the
forward computation that vjp would do."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember._api.caches import run_transformed
from ember._api.running import as_arrays
from ember._api.staging import fun_name, stage_with_aux
from ember._core import IR, ShapedArray, aval_of, stage_flat
from ember._core import dtypes as dt
from ember._core.pytree import Partial, PyTreeDef, tree_flatten
from ember._prims.shape import convert_element_type, zeros
from ember._transforms.ad import backward_pass
from ember._transforms.passes import simplify


def _spec_aval(name: str, x: Any) -> ShapedArray:
    """The type of a primal: an array or number, or any object with shape and dtype (a ShapeDtypeStruct)."""
    try:
        return aval_of(x)
    except TypeError:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return ShapedArray(tuple(x.shape), dt.canonicalize_dtype(x.dtype))
        raise TypeError(f"{name}: primals must be arrays, numbers or objects with shape and dtype, got "
                        f"{type(x).__name__}") from None


def _transposed_ir(ir: IR, name: str) -> IR:
    """(output cotangents) -> (input cotangents) of the linear IR ir, each in its input's dtype."""
    in_avals = ir.in_avals

    def cotangents(*cts: Any) -> list[Any]:
        # linear: the transpose is the same at every point, and the forward values it needs are only constants
        _, in_cts = backward_pass(ir, [zeros(a) for a in in_avals], [True] * len(in_avals), cts, linear=True)
        return [zeros(a.strip_weak_type()) if ct is None else
                ct if aval_of(ct).dtype == a.dtype else convert_element_type(ct, a.dtype)
                for ct, a in zip(in_cts, in_avals)]

    return simplify(stage_flat(cotangents, [a.strip_weak_type() for a in ir.out_avals], label=name))


class _Transpose:
    """The function linear_transpose returns: out_cotangent -> the tuple of input cotangents (in_tree is that of
    (primals, {}))."""
    __slots__ = ("name", "ir", "out_tree", "out_avals", "in_tree")

    def __init__(self, name: str, ir: IR, out_tree: PyTreeDef, out_avals: Sequence[ShapedArray], in_tree: PyTreeDef):
        self.name, self.ir, self.out_tree, self.out_avals, self.in_tree = name, ir, out_tree, out_avals, in_tree

    def __call__(self, out_cotangent: Any) -> tuple[Any, ...]:
        leaves, tree = tree_flatten(out_cotangent)
        if tree != self.out_tree:
            raise TypeError(f"{self.name}: cotangent tree does not match the function's output: expected "
                            f"{self.out_tree}, got {tree}")
        got = [aval_of(x) for x in leaves]
        if any(g.shape != a.shape or g.dtype != a.dtype for g, a in zip(got, self.out_avals)):
            raise TypeError(f"{self.name}: cotangent type does not match the function's output: expected "
                            f"{[a.str_short() for a in self.out_avals]}, got {[g.str_short() for g in got]}")
        return self.in_tree.unflatten(as_arrays(run_transformed(self.ir, leaves, self.name)))[0]


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes: Sequence[Any] = ()) -> Callable[..., Any]:
    """The transpose of fun, which must be linear in its arguments (like jax.linear_transpose): primals (arrays, or
    objects with shape and dtype) give the arguments' types; the result maps a cotangent of fun's output to the
    tuple of cotangents of its arguments, in their dtypes. Floating-point arguments only."""
    if reduce_axes:
        raise NotImplementedError("linear_transpose: the reduce_axes argument is deprecated (as in JAX)")
    name = f"linear_transpose({fun_name(fun)})"
    leaves, in_tree = tree_flatten((primals, {}))
    avals = [_spec_aval(name, x) for x in leaves]
    for i, a in enumerate(avals):
        if not dt.is_inexact(a.dtype):
            raise TypeError(f"{name}: linear_transpose supports floating-point arguments only, got "
                            f"{a.str_short()} for primal leaf {i}")
    ir, store = stage_with_aux(fun, in_tree, avals, False, name)
    transposed = _transposed_ir(ir, name)
    out_avals = [a.strip_weak_type() for a in ir.out_avals]
    return Partial(_Transpose(name, transposed, store.tree, out_avals, in_tree))
