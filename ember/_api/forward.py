"""Forward mode and Jacobians: jvp, linearize, jacfwd, jacrev (jacobian), hessian.

jvp stages the function out once per signature and applies the forward-mode pass (IR -> IR); linearize splits
that IR into the primal part and the linear tangent part; the Jacobians are vmap of jvp (one column per input
element) or of vjp (one row per output element), as in JAX."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._api.autodiff import PlanCall, _check_argnums, vjp
from ember._api.caches import cache_for, call_with_fallback, compiled_outside_traces, plan_for
from ember._api.staging import fun_name, leaf_avals, stage_with_aux, with_outputs, wraps
from ember._api.templates import transform_once
from ember._api.vmap import vmap
from ember._core import IR, ShapedArray, aval_of, eval_ir, stage_flat
from ember._core import dtypes as dt
from ember._core.pytree import (Partial, PyTreeDef, leaf_def, tree_flatten, tree_map, tree_structure,
                                tree_unflatten, treedef_tuple)
from ember._prims import reshape, slice_in_dim
from ember._prims.shape import zeros
from ember._transforms.jvp import jvp_ir
from ember._transforms.passes import split_known


def _tangent_aval(name: str, tangent: Any, primal: ShapedArray, i: int) -> None:
    """A tangent must have its primal's shape, and its dtype (float0 for an integer or boolean primal)."""
    if isinstance(tangent, np.ndarray | np.generic) and tangent.dtype == dt.float0:
        shape, dtype = np.shape(tangent), dt.float0
    else:
        got = aval_of(tangent)
        shape, dtype = got.shape, got.dtype
    expected = primal.dtype if dt.is_inexact(primal.dtype) else dt.float0
    if dtype != expected:
        raise TypeError(f"{name}: primal and tangent {i} do not match: dtypes must be equal, or float0 for an "
                        f"integer or boolean primal; the primal is {primal.str_short()}, so the tangent must be "
                        f"{'float0' if expected == dt.float0 else expected.name}, but it is "
                        f"{'float0' if dtype == dt.float0 else np.dtype(dtype).name}")
    if tuple(shape) != primal.shape:
        raise ValueError(f"{name}: primal and tangent {i} have different shapes: primal {primal.str_short()}, "
                         f"tangent shape {tuple(shape)}")


def _flatten_pair(name: str, primals: Any, tangents: Any) -> tuple[list[Any], PyTreeDef, list[Any]]:
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple | list):
            raise TypeError(f"{name}: {what} must be a tuple or a list with one entry per argument, got "
                            f"{type(value).__name__}")
    if len(primals) != len(tangents):
        raise ValueError(f"{name}: {len(primals)} primals but {len(tangents)} tangents")
    p_leaves, p_tree = tree_flatten((tuple(primals), {}))
    t_leaves, t_tree = tree_flatten((tuple(tangents), {}))
    if p_tree != t_tree:
        raise TypeError(f"{name}: primals and tangents must have the same tree structure, got {p_tree} and "
                        f"{t_tree}")
    return p_leaves, p_tree, t_leaves


def _jvp_build(fun: Callable[..., Any], name: str, has_aux: bool) -> Callable[..., IR]:
    """build(in_tree, avals, values=None) -> the IR (primals, float tangents) -> (outputs, aux, tangents of the
    float outputs), returned structured as (outputs, aux, tuple of float tangents)."""
    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], values: Sequence[Any] | None = None) -> IR:
        primal_values = None if values is None else list(values)[:len(avals)]  # values also hold the tangents
        ir, store = stage_with_aux(fun, in_tree, avals, has_aux, name, primal_values)
        n_out = store.tree.num_leaves
        with_tangent = [dt.is_inexact(a.dtype) for a in avals]
        if values is not None and len(values) == len(avals):  # tangents not given yet (linearize): zeros
            values = list(values) + [zeros(a.strip_weak_type()) for a, w in zip(avals, with_tangent) if w]

        def transform(staged: IR, lifted: int) -> IR:
            """The forward-mode IR of staged, whose first `lifted` inputs are constants (without tangents)."""
            jir = jvp_ir(staged, [False] * lifted + with_tangent, values)
            tangents = [t for t, v in zip(jir.outs[len(staged.outs):len(staged.outs) + n_out], staged.outs)
                        if dt.is_inexact(v.aval.dtype)]
            # (structures composed, not templates: aux may hold Python values, which are nodes of its structure)
            aux_def = store.aux_tree if has_aux else tree_structure(None)
            return with_outputs(jir, jir.outs[:len(staged.outs)] + tangents,
                                treedef_tuple([store.tree, aux_def, treedef_tuple([leaf_def()] * len(tangents))]))

        if values is not None:  # staged concretely: specialised to the values, not shared
            return transform(ir, 0)
        return transform_once(("jvp", in_tree, store.tree, store.aux_tree, has_aux), ir, transform)
    return build


def _with_float0(outs: Any, float_tangents: Sequence[Any]) -> Any:
    """The output tangents: the computed ones for float outputs, float0 zeros for the others."""
    given = iter(float_tangents)
    return tree_map(lambda o: next(given) if dt.is_inexact(aval_of(o).dtype) else dt.float0_zeros(aval_of(o).shape),
                    outs)


def jvp(fun: Any, primals: Sequence[Any] | None = None, tangents: Sequence[Any] | None = None,
        has_aux: bool = False) -> Any:
    """(outputs, output tangents) of fun at primals along tangents (like jax.jvp); with has_aux, fun returns
    (output, aux) and jvp returns (outputs, output tangents, aux). Integer and boolean primals take float0
    tangents, and their outputs get float0 tangents.

    Given a staged IR alone, returns a NEW IR (primals..., tangents of the float inputs...) -> (outputs...,
    output tangents...), like grad(ir)."""
    if isinstance(fun, IR) and primals is None and tangents is None:
        jir = jvp_ir(fun)
        return with_outputs(jir, jir.outs, None)
    if primals is None or tangents is None:
        raise TypeError("jvp: expected jvp(fun, primals, tangents), or jvp(ir) for a staged IR")
    if not callable(fun):
        raise TypeError(f"jvp: expected a function, got {type(fun).__name__}")
    name = f"jvp({fun_name(fun)})"
    p_leaves, in_tree, t_leaves = _flatten_pair(name, primals, tangents)
    avals = leaf_avals(name, tuple(primals), {}, p_leaves)
    for i, (t, a) in enumerate(zip(t_leaves, avals)):
        _tangent_aval(name, t, a, i)
    float_tangents = [t for t, a in zip(t_leaves, avals) if dt.is_inexact(a.dtype)]
    cache = cache_for(fun, ("jvp", has_aux), name)
    outs, aux, tangents_out = call_with_fallback(cache, (in_tree, avals), list(p_leaves) + float_tangents,
                                                 _jvp_build(fun, name, has_aux), in_tree, avals)
    tangents_out = _with_float0(outs, tangents_out)
    return (outs, tangents_out, aux) if has_aux else (outs, tangents_out)


# ---------------------------------------------------------------------------------------------------------------
# linearize
class _LinearizePlan:
    """The primal part of a function's forward-mode IR, (primals) -> (outputs, residuals), and its linear part,
    (residuals, float tangents) -> (float output tangents), at one signature."""

    def __init__(self, fun: Callable[..., Any], name: str, in_tree: PyTreeDef, avals: tuple[ShapedArray, ...],
                 values: Sequence[Any] | None):
        jir = _jvp_build(fun, name, False)(in_tree, avals, values)
        out_template, _, float_template = jir.out_tree.unflatten(list(range(len(jir.outs))))
        self.num_outs = len(jir.outs) - len(float_template)
        self.out_tree = tree_structure(out_template)
        self.floats = [dt.is_inexact(a.dtype) for a in avals]
        unknown = [False] * len(avals) + [True] * sum(self.floats)
        try:
            self.known, self.linear, _ = split_known(jir, unknown, self.num_outs)
        except ValueError:  # (an equation computes primal outputs from tangents too: a JAX-defined primitive's JVP
            # rule binding one primitive on both, as equinox's loops do) the linear part reruns the whole forward
            # IR from the primals, which are its residuals
            self.known, self.linear = self._whole(jir, avals)
        self.irs = (self.known, self.linear)

    def _whole(self, jir: IR, avals: Sequence[ShapedArray]) -> tuple[IR, IR]:
        n, t_avals = self.num_outs, [a.strip_weak_type() for a, f in zip(avals, self.floats) if f]
        known = stage_flat(lambda *ps: eval_ir(jir, list(ps) + [zeros(a) for a in t_avals])[:n] + list(ps),
                           list(avals))
        linear = stage_flat(lambda *args: eval_ir(jir, list(args))[n:], list(avals) + t_avals)
        return known, linear


def linearize(fun: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """(outputs, f_jvp) where f_jvp(*tangents) gives the output tangents, evaluating only the linear part
    (like jax.linearize): the forward-mode IR is split into the primal computation, run now, and the tangent
    computation, which reuses its residuals. The split is kept per signature, like jit's programs."""
    if not callable(fun):
        raise TypeError(f"linearize: expected a function, got {type(fun).__name__}")
    name = f"linearize({fun_name(fun)})"
    leaves, in_tree = tree_flatten((primals, {}))
    avals = leaf_avals(name, primals, {}, leaves)
    plan, run = plan_for(fun, "linearize", (in_tree, avals), leaves,
                         lambda values: _LinearizePlan(fun, name, in_tree, avals, values))
    results = run(plan.known, leaves, f"{name}.primal")
    out = plan.out_tree.unflatten(results[:plan.num_outs])
    residuals = results[plan.num_outs:]

    return out, Partial(_Linearized(name, plan, run, in_tree, avals), tuple(residuals), out)


class _Linearized(PlanCall):
    """The function linearize returns, a Partial over the residuals and the outputs: (residuals, outputs,
    *tangents) -> the output tangents (see PlanCall)."""
    __slots__ = ()

    def __call__(self, residuals: tuple[Any, ...], out: Any, *tangents: Any) -> Any:
        name, plan = self.name, self.plan
        t_leaves, t_tree = tree_flatten((tangents, {}))
        if t_tree != self.in_tree:
            raise TypeError(f"{name}: tangents must have the structure of the primals {self.in_tree}, got {t_tree}")
        for i, (t, a) in enumerate(zip(t_leaves, self.avals)):
            _tangent_aval(name, t, a, i)
        float_tangents = self.run(plan.linear, list(residuals) + [t for t, f in zip(t_leaves, plan.floats) if f],
                                  f"{name}.linear")
        return _with_float0(out, float_tangents)


# ---------------------------------------------------------------------------------------------------------------
# Jacobians and the Hessian
def _basis(leaves: Sequence[Any]) -> tuple[int, list[np.ndarray]]:
    """The standard basis of the space of leaves: one stacked identity slice per leaf, shaped (n,) + its shape,
    where n is the total number of elements."""
    avals = [aval_of(x) for x in leaves]
    n = sum(a.size for a in avals)
    basis, offset = [], 0
    for a in avals:
        eye = np.zeros((n, a.size), a.dtype)
        eye[offset:offset + a.size] = np.eye(a.size, dtype=a.dtype)
        basis.append(eye.reshape((n,) + a.shape))
        offset += a.size
    return n, basis


def _split_columns(jac: Any, out_shape: tuple[int, ...], in_avals: Sequence[ShapedArray]) -> list[Any]:
    """The blocks of a Jacobian whose last axis runs over all input elements (one block per input leaf), each
    shaped out_shape + in_shape."""
    blocks, offset = [], 0
    for a in in_avals:
        block = slice_in_dim(jac, offset, offset + a.size, axis=len(out_shape))
        blocks.append(reshape(block, out_shape + a.shape))
        offset += a.size
    return blocks


def _check_float_inputs(name: str, leaves: Sequence[Any], holomorphic: bool = False) -> None:
    """Differentiated values must be floating-point or complex; with holomorphic=True, complex (as JAX). Without
    it, a complex output of jacrev is refused as JAX does (its Jacobian needs holomorphic=True)."""
    for x in leaves:
        aval = aval_of(x)
        if holomorphic and not dt.is_complex(aval.dtype):
            raise TypeError(f"{name} with holomorphic=True requires complex inputs and outputs, got "
                            f"{aval.str_short()}")
        if not dt.is_inexact(aval.dtype):
            raise TypeError(f"{name} requires floating-point inputs, got {aval.str_short()}")


def _differentiated(name: str, fun: Callable[..., Any], argnums: int | Sequence[int], args: tuple[Any, ...],
                    kwargs: dict[str, Any], holomorphic: bool = False
                    ) -> tuple[tuple[int, ...], tuple[Any, ...], list[Any], Callable[..., Any]]:
    """(argnums normalized, the differentiated arguments, their leaves, fun of those arguments alone)."""
    nums = _check_argnums(name, argnums, len(args))
    dyn = tuple(args[i] for i in nums)
    in_leaves = tree_flatten(dyn)[0]
    _check_float_inputs(name, in_leaves, holomorphic)

    def f_dyn(*values: Any) -> Any:
        full = list(args)
        for i, value in zip(nums, values):
            full[i] = value
        return fun(*full, **kwargs)
    return nums, dyn, in_leaves, f_dyn


def _assemble(argnums: int | Sequence[int], nums: tuple[int, ...], dyn: tuple[Any, ...], out: Any,
              blocks_for: Callable[[int, Any], list[Any]]) -> Any:
    """The Jacobian pytree: the output's structure, each leaf replaced by the structure of the differentiated
    arguments (one argument, or a tuple of them for a tuple argnums) holding out_shape + in_shape blocks."""
    in_leaves, in_tree = tree_flatten(dyn)

    def per_output(j: int, o: Any) -> Any:
        blocks = tree_unflatten(in_tree, blocks_for(j, o))
        return blocks[0] if isinstance(argnums, int) else blocks

    out_leaves, out_tree = tree_flatten(out)
    return out_tree.unflatten([per_output(j, o) for j, o in enumerate(out_leaves)])


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of fun by forward mode, one jvp per input element under vmap (like jax.jacfwd). Complex
    inputs need holomorphic=True (the Jacobian is then the complex one, as JAX)."""
    name = f"jacfwd({fun_name(fun)})"

    def jacfun(*args: Any, **kwargs: Any) -> Any:
        nums, dyn, in_leaves, f_dyn = _differentiated(name, fun, argnums, args, kwargs, holomorphic)
        _refuse_complex_unless_holomorphic(name, in_leaves, holomorphic)
        in_tree = tree_structure(dyn)
        n, basis = _basis(in_leaves)

        def push(*basis_leaves: Any) -> Any:
            return jvp(f_dyn, dyn, tree_unflatten(in_tree, basis_leaves), has_aux=has_aux)

        out_axes = (None, -1, None) if has_aux else (None, -1)
        results = vmap(push, out_axes=out_axes, axis_size=n)(*basis)
        out, jac = results[0], results[1]
        jac_leaves = tree_flatten(jac)[0]
        in_avals = [aval_of(x) for x in in_leaves]
        result = _assemble(argnums, nums, dyn, out,
                           lambda j, o: _split_columns(jac_leaves[j], aval_of(o).shape, in_avals))
        return (result, results[2]) if has_aux else result

    return wraps(fun)(compiled_outside_traces(fun, ("jacfwd", argnums, has_aux, holomorphic),
                                                                    name, jacfun))


def _refuse_complex_unless_holomorphic(name: str, leaves: Sequence[Any], holomorphic: bool) -> None:
    """A complex input (jacfwd) or output (jacrev) without holomorphic=True is refused, as JAX does."""
    for x in leaves:
        aval = aval_of(x)
        if dt.is_complex(aval.dtype) and not holomorphic:
            raise TypeError(f"{name}: got {aval.str_short()}, a complex value: pass holomorphic=True for the "
                            "Jacobian of a holomorphic function, or use ember.vjp / ember.jvp directly")


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of fun by reverse mode, one vjp per output element under vmap (like jax.jacrev). Complex
    outputs need holomorphic=True (the Jacobian is then the complex one, as JAX)."""
    name = f"jacrev({fun_name(fun)})"

    def jacfun(*args: Any, **kwargs: Any) -> Any:
        nums, dyn, in_leaves, f_dyn = _differentiated(name, fun, argnums, args, kwargs, holomorphic)
        result = vjp(f_dyn, *dyn, has_aux=has_aux)
        out, pullback = result[0], result[1]
        out_leaves, out_tree = tree_flatten(out)
        _check_float_inputs(name + " (outputs)", out_leaves, holomorphic)
        _refuse_complex_unless_holomorphic(name + " (outputs)", out_leaves, holomorphic)
        n, basis = _basis(out_leaves)
        rows = vmap(lambda *cts: pullback(out_tree.unflatten(cts)), axis_size=n)(*basis)
        row_leaves = tree_flatten(rows)[0]  # per input leaf: (n,) + in_shape
        in_avals = [aval_of(x) for x in in_leaves]
        offsets = np.cumsum([0] + [aval_of(o).size for o in out_leaves])

        def blocks_for(j: int, o: Any) -> list[Any]:
            out_shape = aval_of(o).shape
            return [reshape(slice_in_dim(r, int(offsets[j]), int(offsets[j + 1]), axis=0), out_shape + a.shape)
                    for r, a in zip(row_leaves, in_avals)]
        jac = _assemble(argnums, nums, dyn, out, blocks_for)
        return (jac, result[2]) if has_aux else jac

    return wraps(fun)(compiled_outside_traces(fun, ("jacrev", argnums, has_aux, holomorphic),
                                                                    name, jacfun))


jacobian = jacrev


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Hessian of a scalar function: jacfwd of jacrev (like jax.hessian)."""
    composed = jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)
    return wraps(fun)(compiled_outside_traces(
        fun, ("hessian", argnums, has_aux), f"hessian({fun_name(fun)})", composed))
