"""ember.custom_derivatives, as jax.custom_derivatives: functions with custom derivative rules (custom_jvp,
custom_vjp), custom_gradient and closure_convert, the primitives their calls stage to, linear_call (a linear function
with a custom transpose), and the helpers of symbolic-zero rules (custom_vjp_primal_tree_values, zero_from_primal,
SymbolicZero, CustomVJPPrimal).

linear_call and remat_opt are primitives defined the JAX way (ember.extend.core.Primitive, JAX's names and params):
`linear_call_p` calls a linear function whose transpose is the given one; `remat_opt_p` is the primitive JAX's
custom_vjp(optimize_remat=True) stages its forward rule to (ember accepts optimize_remat and stages no remat_opt:
the primitive is here for code that binds or names it)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember._api.closures import closure_convert as closure_convert, custom_gradient as custom_gradient
from ember._api.forward import jvp as _jvp
from ember._api.jit import make_jaxpr as _make_jaxpr
from ember._api.stages import ShapeDtypeStruct as _Struct
from ember._api.vmap import vmap as _vmap
from ember._control import custom_jvp as custom_jvp, custom_vjp as custom_vjp
from ember._control.custom import (CustomVJPPrimal as CustomVJPPrimal, SymbolicZero as SymbolicZero,
                                   custom_jvp_call_p as custom_jvp_call_p, custom_vjp_call_p as custom_vjp_call_p)
from ember._core import aval_of as _aval_of
from ember._core.pytree import tree_flatten as _tree_flatten, tree_map as _tree_map
from ember._core.pytree import tree_unflatten as _tree_unflatten
from ember.extend.core import Primitive as _Primitive, jaxpr_as_fun as _jaxpr_as_fun
from ember.interpreters import ad as _ad, batching as _batching, mlir as _mlir


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """tree with each CustomVJPPrimal leaf (what a symbolic_zeros forward rule receives) replaced by its value;
    any other leaf is JAX's TypeError."""
    def value(leaf: Any) -> Any:
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return _tree_map(value, tree)


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of each leaf of val: zeros of its tangent type (float0 for an integer or boolean leaf), or
    a SymbolicZero of it with symbolic_zeros=True (as jax.custom_derivatives.zero_from_primal)."""
    def zero(x: Any) -> Any:
        aval = _aval_of(x).to_tangent_aval()
        return SymbolicZero(aval) if symbolic_zeros else _ad.zeros_like_aval(aval)
    return _tree_map(zero, val)


def _staged(fun: Callable[..., Any], avals: Sequence[Any], n_res: int, res_tree: Any, lin_tree: Any
            ) -> tuple[Any, Any]:
    """(the IR of fun(residuals, linear inputs) over the flat avals, the structure of its outputs)."""
    found: list[Any] = []

    def flat(*leaves: Any) -> list[Any]:
        out, tree = _tree_flatten(fun(_tree_unflatten(res_tree, leaves[:n_res]),
                                      _tree_unflatten(lin_tree, leaves[n_res:])))
        found[:] = [tree]
        return out
    ir = _make_jaxpr(flat)(*[_Struct(a.shape, a.dtype) for a in avals])
    return ir, found[0]


# ---------------------------------------------------------------------------------------------------------------
# linear_call(residuals, linear inputs; callee, transpose_thunk, num_callee_consts, num_res)
linear_call_p = _Primitive("linear_call")
linear_call_p.multiple_results = True


def _linear_call_impl(*args: Any, callee: Any, transpose_thunk: Any, num_callee_consts: int, num_res: int) -> Any:
    return _jaxpr_as_fun(callee)(*args)


linear_call_p.def_impl(_linear_call_impl)
linear_call_p.def_abstract_eval(lambda *avals, callee, **params: list(callee.out_avals))
_mlir.register_lowering(linear_call_p, _mlir.lower_fun(_linear_call_impl, multiple_results=True))


def _linear_call_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, callee: Any, transpose_thunk: Any,
                     num_callee_consts: int, num_res: int) -> tuple[Any, Any]:
    fixed = num_callee_consts + num_res
    if any(type(t) is not _ad.Zero for t in tangents[:fixed]):
        raise ValueError("linear_call: a residual argument was differentiated; linear_call is linear in its "
                         "linear arguments only, and its residuals must be constants to differentiation (JAX "
                         "fails an assertion here)")
    params = dict(callee=callee, transpose_thunk=transpose_thunk, num_callee_consts=num_callee_consts,
                  num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    lin = [_ad.instantiate_zeros(t) for t in tangents[fixed:]]
    return outs, linear_call_p.bind(*primals[:fixed], *lin, **params)


def _linear_call_transpose(cts: Any, *args: Any, callee: Any, transpose_thunk: Any, num_callee_consts: int,
                           num_res: int) -> list[Any]:
    transpose, t_consts = transpose_thunk()
    fixed = num_callee_consts + num_res
    f_consts, res = args[:num_callee_consts], args[num_callee_consts:fixed]
    cts_avals = list(transpose.in_avals)[len(t_consts) + num_res:]
    cts = list(cts) if isinstance(cts, (list, tuple)) else [cts]
    cts = [_ad.zeros_like_aval(a) if type(ct) is _ad.Zero or ct is None else ct for ct, a in zip(cts, cts_avals)]
    outs = linear_call_p.bind(*t_consts, *res, *cts, callee=transpose, transpose_thunk=lambda: (callee, f_consts),
                              num_callee_consts=len(t_consts), num_res=len(res))
    return [None] * fixed + list(outs)


_ad.primitive_jvps[linear_call_p] = _linear_call_jvp
_ad.primitive_transposes[linear_call_p] = _linear_call_transpose


def linear_call(fun: Callable[..., Any], fun_transpose: Callable[..., Any], residual_args: Any,
                linear_args: Any) -> Any:
    """fun(residual_args, linear_args), linear in linear_args, whose transpose is fun_transpose(residual_args,
    cotangents) (as jax.custom_derivatives.linear_call): reverse mode, linear_transpose and forward mode use it, and
    the transpose of the transpose is fun again. The residuals must not be differentiated (ValueError); vmap has no
    rule for it (JAX's NotImplementedError)."""
    res_leaves, res_tree = _tree_flatten(residual_args)
    lin_leaves, lin_tree = _tree_flatten(linear_args)
    res_avals = [_aval_of(x) for x in res_leaves]
    lin_avals = [_aval_of(x) for x in lin_leaves]
    callee, out_tree = _staged(fun, res_avals + lin_avals, len(res_leaves), res_tree, lin_tree)
    cache: list[Any] = []

    def transpose_thunk() -> tuple[Any, tuple[()]]:
        if not cache:
            transpose, t_out_tree = _staged(fun_transpose, res_avals + list(callee.out_avals), len(res_leaves),
                                            res_tree, out_tree)
            if t_out_tree != lin_tree:
                raise TypeError("transpose output pytree structure must match that of linear inputs, got output "
                                f"structure {t_out_tree} and input structure {lin_tree}.")
            cache.append((transpose, ()))
        return cache[0]

    outs = linear_call_p.bind(*res_leaves, *lin_leaves, callee=callee, transpose_thunk=transpose_thunk,
                              num_callee_consts=0, num_res=len(res_leaves))
    return _tree_unflatten(out_tree, outs)


# ---------------------------------------------------------------------------------------------------------------
# remat_opt(consts, primals; num_consts, num_res, fwd_jaxpr, fun_jaxpr_thunk) -> residuals, outputs
remat_opt_p = _Primitive("remat_opt")
remat_opt_p.multiple_results = True


def _remat_opt_impl(*args: Any, num_consts: int, num_res: int, fwd_jaxpr: Any, fun_jaxpr_thunk: Any) -> Any:
    return _jaxpr_as_fun(fwd_jaxpr)(*args)


remat_opt_p.def_impl(_remat_opt_impl)
remat_opt_p.def_abstract_eval(lambda *avals, fwd_jaxpr, **params: list(fwd_jaxpr.out_avals))
_mlir.register_lowering(remat_opt_p, _mlir.lower_fun(_remat_opt_impl, multiple_results=True))


def _remat_opt_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, num_consts: int, num_res: int,
                   fwd_jaxpr: Any, fun_jaxpr_thunk: Any) -> tuple[Any, Any]:
    """A remat_opt of fwd_jaxpr's JVP (as JAX's rule): its outputs (residuals, their tangents, outputs, their
    tangents), the tangents of the consts and primals instantiated."""
    fwd = _jaxpr_as_fun(fwd_jaxpr)
    n = len(primals)
    tangents = [_ad.instantiate_zeros(t) for t in tangents]
    num_out = len(fwd_jaxpr.out_avals) - num_res

    def joint(*xs: Any) -> list[Any]:
        outs, dots = _jvp(lambda *p: list(fwd(*p)), list(xs[:n]), list(xs[n:]))
        return [*outs[:num_res], *dots[:num_res], *outs[num_res:], *dots[num_res:]]
    avals = [_aval_of(x) for x in (*primals, *tangents)]
    jvp_jaxpr = _make_jaxpr(joint)(*[_Struct(a.shape, a.dtype) for a in avals])
    outs = remat_opt_p.bind(*primals, *tangents, num_consts=num_consts, num_res=2 * num_res, fwd_jaxpr=jvp_jaxpr,
                            fun_jaxpr_thunk=fun_jaxpr_thunk)
    res, res_dot = outs[:num_res], outs[num_res:2 * num_res]
    out, out_dot = outs[2 * num_res:2 * num_res + num_out], outs[2 * num_res + num_out:]
    return [*res, *out], [*res_dot, *out_dot]


def _remat_opt_transpose(cts: Any, *args: Any, **params: Any) -> Any:
    raise NotImplementedError("remat optimization for custom_vjp does not support higher-order AD")


def _remat_opt_batching(args: Sequence[Any], dims: Sequence[Any], *, num_consts: int, num_res: int,
                        fwd_jaxpr: Any, fun_jaxpr_thunk: Any) -> tuple[Any, Any]:
    fwd = _jaxpr_as_fun(fwd_jaxpr)
    batched = _make_jaxpr(_vmap(lambda *xs: list(fwd(*xs)), in_axes=tuple(dims)))(
        *[_Struct(a.shape, a.dtype) for a in map(_aval_of, args)])
    outs = remat_opt_p.bind(*args, num_consts=num_consts, num_res=num_res, fwd_jaxpr=batched,
                            fun_jaxpr_thunk=fun_jaxpr_thunk)
    return outs, [0] * len(outs)


_ad.primitive_jvps[remat_opt_p] = _remat_opt_jvp
_ad.primitive_transposes[remat_opt_p] = _remat_opt_transpose
_batching.primitive_batchers[remat_opt_p] = _remat_opt_batching

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p", "custom_vjp_primal_tree_values", "linear_call", "remat_opt_p",
           "zero_from_primal"]
