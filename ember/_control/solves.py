"""Solves differentiated implicitly (jax.lax.custom_linear_solve, jax.lax.custom_root): the solver's own operations
are never differentiated; derivatives come from the equation the solution satisfies.

custom_linear_solve is a higher-order primitive, linear_solve (JAX's linear_solve_p), because its derivative is
itself a linear solve with the same operator and, in reverse mode, a solve with the transposed operator
(transpose_solve): forward mode needs the first, reverse mode the second, and only a primitive's vjp rule can give
that transpose (ember's custom_jvp transposes its rule's tangent map, which would contain the user's solve, a
while loop perhaps). It carries four closed sub-IRs, each with its consts among the operands: matvec, vecmat (its
transpose, None without transpose_solve), solve and transpose_solve (None: reverse mode is JAX's TypeError).

custom_root is a composition: a pure_custom_jvp (ember/_control/custom.py) of staged sub-IRs whose rule is the
implicit function theorem, as JAX's; its tangent_solve is differentiable ember code (or a custom_linear_solve), so
reverse mode transposes the rule."""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember._control.common import Closed, close_over, split_sizes
from ember._control.custom import pure_custom_jvp
from ember._core import IR, Primitive, ShapedArray, aval_of, eval_ir
from ember._core.ir import Literal
from ember._core import dtypes as dt
from ember._core.pytree import PyTreeDef, tree_flatten, tree_leaves
from ember._hlo import LoweringContext, lower_into
from ember._prims.elementwise import neg, sub
from ember._prims.shape import BatchDim, batch_at_front, batch_size, convert_element_type, full, zeros
from ember._transforms.ad import backward_pass
from ember._transforms.batching import batch_ir
from ember._transforms.jvp import jvp_ir


class LinearSolveIRs(NamedTuple):
    """The sub-IRs of a linear_solve equation (or the numbers of their consts), in its operand order."""
    matvec: Any
    vecmat: Any
    solve: Any
    transpose_solve: Any

    def transpose(self) -> "LinearSolveIRs":
        """The transposed system's: vecmat for matvec, transpose_solve for solve, and back."""
        return LinearSolveIRs(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _check_tree(func_name: str, expected_name: str, actual: PyTreeDef, expected: PyTreeDef,
                has_aux: bool = False) -> None:
    """JAX's check of a function's output structure (has_aux: a pair whose first part is checked)."""
    if has_aux:
        if actual.node_type is None or len(actual.children) != 2:
            raise ValueError(f"{func_name}() produced a pytree with structure {actual}, but a pytree tuple with "
                             "auxiliary output was expected because has_aux was set to True.")
        actual = actual.children[0]
    if actual != expected:
        raise TypeError(f"{func_name}() output pytree structure must match {expected_name}, got {actual} and "
                        f"{expected}.")


def _shape_checked(fun: Callable[[Any], Any], name: str, b_shapes: list[tuple[int, ...]], has_aux: bool
                   ) -> Callable[[Any], Any]:
    """fun, its output's shapes (the first part's, has_aux) checked against b's (JAX's ValueError)."""
    def checked(x: Any) -> Any:
        y = fun(x)
        if has_aux:
            solution, _ = y  # (a ValueError where y is no pair, as JAX's)
        shapes = [tuple(np.shape(leaf)) for leaf in tree_leaves(solution if has_aux else y)]
        if shapes != b_shapes:
            raise ValueError(f"{name}() output shapes must match b, got {shapes} and {b_shapes}")
        return y
    return checked


def _as_tangents(tree: PyTreeDef, avals: Sequence[ShapedArray], value: Any, name: str) -> list[Any]:
    """The leaves of value (a tangent: a pytree shaped as tree; Python scalars allowed) at the avals' dtypes."""
    leaves, got = tree_flatten(value)
    if got != tree:
        raise TypeError(f"{name}: a tangent must have the structure {tree}, got {got}")
    return [full(a.shape, x, a.dtype) if isinstance(x, (int, float, complex))
            else convert_element_type(x, a.dtype) for x, a in zip(leaves, avals)]


def _none_ir(closed: Closed | None) -> tuple[IR | None, list[Any]]:
    return (None, []) if closed is None else (closed.ir, closed.consts)


# ---------------------------------------------------------------------------------------------------------------
# linear_solve(matvec consts..., vecmat consts..., solve consts..., transpose_solve consts..., b...;
#              irs: LinearSolveIRs of closed IRs (vecmat and transpose_solve may be None), const_lengths)
# Its outputs are solve's: x (shaped as b) and the auxiliary values of a solve with has_aux.
linear_solve_p = Primitive("linear_solve", multiple_results=True, own_vma=True)
linear_solve_p.none_cotangents = True  # (the auxiliary outputs get no cotangent, as JAX's symbolic zeros)


def _parts(values: Sequence[Any], const_lengths: LinearSolveIRs) -> tuple[LinearSolveIRs, list[Any]]:
    *consts, b = split_sizes(values, *const_lengths)
    return LinearSolveIRs(*consts), b


def _all_consts(consts: LinearSolveIRs) -> list[Any]:
    return [x for part in consts for x in part]


@linear_solve_p.def_rule("abstract_eval")
def _linear_solve_abstract_eval(*avals: ShapedArray, irs: LinearSolveIRs, const_lengths: LinearSolveIRs
                                ) -> list[ShapedArray]:
    return list(irs.solve.out_avals)


@linear_solve_p.def_rule("lowering")
def _linear_solve_lowering(ctx: LoweringContext, *operands: str, irs: LinearSolveIRs,
                           const_lengths: LinearSolveIRs) -> list[str]:
    consts, b = _parts(operands, const_lengths)
    return lower_into(ctx.emitter, irs.solve, list(consts.solve) + b)


def _matvec_tangent(matvec: IR, consts: list[Any], const_tangents: list[Any], x: list[Any]) -> list[Any] | None:
    """dA x: matvec's tangent at x from its consts' tangents (None: zero), or None where none has one."""
    with_tangent = [t is not None and dt.is_inexact(aval_of(c).dtype) for c, t in zip(consts, const_tangents)]
    if not any(with_tangent):
        return None
    jvp = jvp_ir(matvec, with_tangent + [False] * len(x))
    results = eval_ir(jvp, consts + x + [t for t, w in zip(const_tangents, with_tangent) if w])
    return results[len(x):]


@linear_solve_p.def_rule("jvp")
def _linear_solve_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, irs: LinearSolveIRs,
                      const_lengths: LinearSolveIRs) -> tuple[list[Any], list[Any]]:
    """A x = b gives dA x + A dx = db: dx = A^-1 (db - dA x), one more solve of the same system (the tangents of
    solve's, vecmat's and transpose_solve's consts do not enter: the solver is not differentiated)."""
    outs = linear_solve_p.bind(*primals, irs=irs, const_lengths=const_lengths)
    consts, b = _parts(primals, const_lengths)
    const_tangents, b_dot = _parts(tangents, const_lengths)
    n = len(b)
    d_ax = _matvec_tangent(irs.matvec, list(consts.matvec), list(const_tangents.matvec), outs[:n])
    if d_ax is None and all(t is None for t in b_dot):
        return outs, [None] * len(outs)
    rhs = [zeros(aval_of(x).strip_weak_type()) if t is None else t for x, t in zip(b, b_dot)]
    if d_ax is not None:
        rhs = [sub(r, d) for r, d in zip(rhs, d_ax)]
    x_dot = linear_solve_p.bind(*_all_consts(consts), *rhs, irs=irs, const_lengths=const_lengths)
    return outs, list(x_dot[:n]) + [None] * (len(outs) - n)


@linear_solve_p.def_rule("vjp")
def _linear_solve_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, irs: LinearSolveIRs,
                      const_lengths: LinearSolveIRs) -> list[Any]:
    """b's cotangent is A^-T x's: the transposed system solved by transpose_solve; matvec's consts get dA's part,
    -(d(A x)/d consts)^T of it (the other consts: none, the solver is not differentiated)."""
    consts, b = _parts(ins, const_lengths)
    n, result = len(b), [None] * len(ins)
    if all(c is None for c in cts[:n]):
        return result
    if irs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic differentiation of "
                        "custom_linear_solve")
    ct_x = [zeros(aval_of(x).strip_weak_type()) if c is None else c for x, c in zip(outs, cts[:n])]
    ct_b = linear_solve_p.bind(*_all_consts(consts.transpose()), *ct_x, irs=irs.transpose(),
                               const_lengths=const_lengths.transpose())[:n]
    start = len(ins) - n
    result[start:] = [c if need else None for c, need in zip(ct_b, needs[start:])]
    mv = list(consts.matvec)
    wrt = [need and dt.is_inexact(aval_of(c).dtype) for c, need in zip(mv, needs)]
    if any(wrt):
        _, mv_cts = backward_pass(irs.matvec, mv + list(outs[:n]), wrt + [False] * n, [neg(c) for c in ct_b])
        result[:len(mv)] = mv_cts[:len(mv)]
    return result


@linear_solve_p.def_rule("batching")
def _linear_solve_batching(args: list[Any], dims: list[BatchDim], *, irs: LinearSolveIRs,
                           const_lengths: LinearSolveIRs) -> tuple[list[Any], list[BatchDim]]:
    """Every vector batched (b broadcast where it is not: x, A x and the solves' results are then batched alike
    in all four sub-IRs), a const batched where it is, at the front."""
    size = batch_size(args, dims)
    consts, b = _parts(args, const_lengths)
    const_dims, _ = _parts(dims, const_lengths)
    n = len(b)
    new_consts = [[x if d is None else batch_at_front(x, d, size) for x, d in zip(xs, ds)]
                  for xs, ds in zip(consts, const_dims)]
    new_b = [batch_at_front(x, d, size) for x, d in zip(b, dims[len(args) - n:])]

    def batched(ir: IR | None, ds: Sequence[BatchDim]) -> IR | None:
        if ir is None:
            return None
        in_dims = [None if d is None else 0 for d in ds] + [0] * n
        return batch_ir(ir, in_dims, size, [0] * len(ir.outs))[0]
    new_irs = LinearSolveIRs(*[batched(ir, ds) for ir, ds in zip(irs, const_dims)])
    outs = linear_solve_p.bind(*[x for xs in new_consts for x in xs], *new_b, irs=new_irs,
                               const_lengths=const_lengths)
    return outs, [0] * len(outs)


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """solve(matvec, b) (a pytree shaped as b; with has_aux, (solution, aux)), differentiated as the solution x of
    matvec(x) == b rather than through solve (like jax.lax.custom_linear_solve): forward mode solves again,
    reverse mode solves the transposed system with transpose_solve(vecmat, ct), vecmat being matvec's transpose
    (symmetric: matvec itself, and transpose_solve defaults to solve). matvec must be linear and differentiable;
    solve and transpose_solve need not be differentiable."""
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    leaves, args_tree = tree_flatten((b,))
    b_tree = args_tree.children[0]
    avals = [aval_of(x) for x in leaves]
    b_shapes = [a.shape for a in avals]

    def stage(fun: Callable[[Any], Any], name: str, aux: bool) -> Closed:
        closed = close_over(_shape_checked(fun, name, b_shapes, aux), args_tree, avals, f"custom_linear_solve {name}")
        _check_tree(name, "b", closed.out_tree, b_tree, aux)
        return closed

    matvec_c = stage(matvec, "matvec", False)
    solve_c = stage(functools.partial(solve, matvec), "solve", has_aux)
    vecmat_c = tr_solve_c = None
    if transpose_solve is not None:
        if symmetric:
            vecmat: Callable[[Any], Any] = matvec
            vecmat_c = matvec_c
        else:
            def vecmat(y: Any) -> Any:
                cts = _as_tangents(b_tree, avals, y, "custom_linear_solve vecmat")
                mv = list(matvec_c.consts)
                _, in_cts = backward_pass(matvec_c.ir, mv + [zeros(a.strip_weak_type()) for a in avals],
                                          [False] * len(mv) + [True] * len(avals), cts, linear=True)
                return b_tree.unflatten([zeros(a.strip_weak_type()) if c is None else c
                                         for c, a in zip(in_cts[len(mv):], avals)])
            vecmat_c = stage(vecmat, "vecmat", False)
        tr_solve_c = stage(functools.partial(transpose_solve, vecmat), "transpose_solve", has_aux)
    staged = [_none_ir(c) for c in (matvec_c, vecmat_c, solve_c, tr_solve_c)]
    irs = LinearSolveIRs(*[ir for ir, _ in staged])
    const_lengths = LinearSolveIRs(*[len(consts) for _, consts in staged])
    outs = linear_solve_p.bind(*[x for _, consts in staged for x in consts], *leaves, irs=irs,
                               const_lengths=const_lengths)
    return solve_c.out_tree.unflatten(outs)


# ---------------------------------------------------------------------------------------------------------------
# custom_root: a pure_custom_jvp of three staged IRs (f, solve, linearize-and-solve), their consts its arguments.
class RootIRs(NamedTuple):
    f: Any
    solve: Any
    l_and_s: Any


@functools.partial(pure_custom_jvp, nondiff_argnums=(0, 1))
def _custom_root(const_lengths: RootIRs, irs: RootIRs, *args: Any) -> list[Any]:
    *consts, guess = split_sizes(args, *const_lengths)
    return [convert_element_type(full((), v.value, v.aval.dtype), v.aval.dtype, v.aval.weak_type)
            if isinstance(v, Literal) else v  # (a constant output, run outside staging: an array)
            for v in eval_ir(irs.solve, RootIRs(*consts).solve + guess)]


@_custom_root.defjvp
def _custom_root_jvp(const_lengths: RootIRs, irs: RootIRs, primals: tuple[Any, ...], tangents: tuple[Any, ...]
                     ) -> tuple[list[Any], list[Any]]:
    """F(m, u*(m)) = 0 gives d_u F du* = -d_m F dm: the tangent of the solution is tangent_solve's solution of the
    linearised f at the root, for the right-hand side -(f's tangent from its consts' tangents)."""
    *consts, guess = split_sizes(primals, *const_lengths)
    *const_tangents, _ = split_sizes(tangents, *const_lengths)
    consts_, const_tangents_ = RootIRs(*consts), RootIRs(*const_tangents)
    outs = _custom_root(const_lengths, irs, *primals)
    n = len(guess)
    solution = list(outs[:n])
    rhs = _matvec_tangent(irs.f, consts_.f, const_tangents_.f, solution)
    if rhs is None:
        rhs = [zeros(aval_of(x).strip_weak_type()) for x in solution]
    solution_dot = [neg(t) for t in eval_ir(irs.l_and_s, consts_.l_and_s + solution + rhs)]
    return outs, solution_dot + [zeros(aval_of(a).strip_weak_type()) for a in outs[n:]]


def custom_root(f: Callable[[Any], Any], initial_guess: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any], has_aux: bool = False) -> Any:
    """solve(f, initial_guess) (with has_aux, (solution, aux)), differentiated by the implicit function theorem
    (like jax.lax.custom_root), with respect to what f closes over: the solution's tangent is tangent_solve(g, -y),
    g being f linearised at the solution and y f's tangent there (tangent_solve(g, y) solves g(x) = y: for a
    scalar, `lambda g, y: y / g(1.0)`). solve is not differentiated."""
    leaves, args_tree = tree_flatten((initial_guess,))
    guess_tree = args_tree.children[0]
    avals = [aval_of(x) for x in leaves]
    f_c = close_over(f, args_tree, avals, "custom_root f")
    _check_tree("f", "initial_guess", f_c.out_tree, guess_tree)
    solve_c = close_over(lambda x: solve(f, x), args_tree, avals, "custom_root solve")
    _check_tree("solve", "initial_guess", solve_c.out_tree, guess_tree, has_aux)
    t_avals = [a.strip_weak_type() for a in avals]
    n = len(avals)

    def linearize_and_solve(x: Any, rhs: Any) -> Any:
        x_leaves = guess_tree.flatten_up_to(x)

        def f_jvp(t: Any) -> Any:
            ts = _as_tangents(guess_tree, t_avals, t, "custom_root tangent_solve")
            outs = eval_ir(jvp_ir(f_c.ir, [False] * len(f_c.consts) + [True] * n), list(f_c.consts) + x_leaves + ts)
            return guess_tree.unflatten(outs[n:])
        return tangent_solve(f_jvp, rhs)

    pair_tree = tree_flatten((initial_guess, initial_guess))[1]
    l_and_s_c = close_over(linearize_and_solve, pair_tree, avals + t_avals, "custom_root tangent_solve")
    _check_tree("tangent_solve", "x", l_and_s_c.out_tree, guess_tree)
    closed = (f_c, solve_c, l_and_s_c)
    irs = RootIRs(*[c.ir for c in closed])
    const_lengths = RootIRs(*[len(c.consts) for c in closed])
    outs = _custom_root(const_lengths, irs, *[x for c in closed for x in c.consts], *leaves)
    return solve_c.out_tree.unflatten(outs)


__all__ = ["custom_linear_solve", "custom_root"]
