"""Oracle test harness for primitives: forward values against numpy; reverse and forward derivatives against JAX
and finite differences; batching against a loop over the batch (numpy per member).

A test module for primitives defines CASES, a list of Case, and gets its tests from oracle_tests(CASES); the meta
test (tests/test_meta.py) reads every tests/prims/test_*.py module's CASES to check that each registered primitive
is exercised for every rule kind it has, and that each differentiable one has a derivative check."""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import ember
from ember._transforms import batch_ir, jvp_ir

Shape = tuple[int, ...]


@dataclasses.dataclass
class Case:
    prim: str                                   # the primitive this case exercises
    ember: Callable[..., Any]                   # the computation on ember values (ember.lax or ember.numpy)
    numpy: Callable[..., Any]                   # the same on numpy arrays: the forward oracle
    shapes: Sequence[tuple[Shape, ...]]         # argument shapes; the quick run has the first (two for grads)
    dtypes: Sequence[str]                       # dtypes to try; all are in the quick run for the first shape
    jax: Callable[..., Any] | None = None       # the same on jax arrays: the gradient oracle
    domain: str = "any"                         # any | positive | nonzero | unit (|x| < 0.9) | int_small
    arg_dtypes: Sequence[str | None] | None = None  # per-argument dtype overrides (None: the case dtype)
    grad: bool = True                           # check derivatives (float64) for float arguments
    reverse: bool = True                        # reverse mode too (False: the primitive refuses it, clearly)
    forward: bool = True                        # forward mode too (False: the primitive refuses it, clearly)
    finite_differences: bool = True             # also against finite differences (not for stop_gradient)
    grad_shapes: Sequence[tuple[Shape, ...]] | None = None
    rtol: float | None = None
    name: str = ""

    def label(self) -> str:
        return self.name or self.prim


_TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


def sample(rng: np.random.Generator, shape: Shape, dtype: str, domain: str) -> np.ndarray:
    dt = ember.numpy.dtype(ember._core.dtypes.canonicalize_dtype(dtype))
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = (1, 6) if domain in ("positive", "nonzero") else (0, 6) if dt.kind == "u" else (-5, 6)
        if domain == "int_small":
            lo, hi = (0, 4)
        values = rng.integers(lo, hi, size=shape)
        if domain == "nonzero":
            values = np.where(values == 0, 1, values)
        return values.astype(dt)
    if domain == "positive":
        values = rng.uniform(0.5, 2.0, size=shape)
    elif domain == "unit":
        values = rng.uniform(-0.9, 0.9, size=shape)
    elif domain == "nonzero":
        values = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    else:
        values = rng.normal(size=shape) * 1.5
    return np.asarray(values).astype(dt)


def make_args(case: Case, shapes: tuple[Shape, ...], dtype: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dtypes = case.arg_dtypes or [None] * len(shapes)
    return [sample(rng, s, d or dtype, case.domain) for s, d in zip(shapes, dtypes)]


def forward_params(cases: Sequence[Case]) -> list[Any]:
    params = []
    for case in cases:
        for i, shapes in enumerate(case.shapes):
            for dtype in case.dtypes:
                marks = [pytest.mark.slow] if i > 0 else []
                params.append(pytest.param(case, shapes, dtype, marks=marks,
                                           id=f"{case.label()}-{'x'.join(map(str, shapes))}-{dtype}"))
    return params


def grad_params(cases: Sequence[Case]) -> list[Any]:
    params = []
    for case in cases:
        if not case.grad:
            continue
        for i, shapes in enumerate(case.grad_shapes or case.shapes):
            marks = [pytest.mark.slow] if i > (1 if case.reverse else 0) else []  # two shapes in the quick run
            params.append(pytest.param(case, shapes, marks=marks, id=f"{case.label()}-{'x'.join(map(str, shapes))}"))
    return params


def assert_close(actual: Any, expected: Any, dtype: str, rtol: float | None = None) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    r, a = _TOL.get(dtype, (1e-5, 1e-6))
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol or r, atol=a,
                               equal_nan=True)


def check_forward(case: Case, shapes: tuple[Shape, ...], dtype: str) -> None:
    args = make_args(case, shapes, dtype)
    expected = case.numpy(*args)
    eager = case.ember(*[ember.asarray(a) for a in args])
    assert np.asarray(eager).dtype == np.asarray(expected).dtype, \
        f"dtype {np.asarray(eager).dtype} != expected {np.asarray(expected).dtype}"
    assert_close(eager, expected, dtype, case.rtol)
    jitted = ember.jit(case.ember)(*args)
    assert_close(jitted, expected, dtype, case.rtol)


def _float_argnums(args: Sequence[np.ndarray]) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(args) if a.dtype.kind == "f")


def check_grad(case: Case, shapes: tuple[Shape, ...]) -> None:
    """Gradient of sum(f(args) * ct) in float64, against JAX and against central finite differences (or, for a
    primitive marked as refusing reverse mode, the clear error naming the primitive and the reason)."""
    import jax
    import jax.numpy as jnp

    args = make_args(case, shapes, "float64", seed=1)
    if not case.reverse:
        reason = ember._core.PRIMITIVES[case.prim].marks["vjp"]
        with pytest.raises(NotImplementedError, match=f"primitive '{case.prim}': " + re.escape(reason)):
            ember.grad(lambda *xs: ember.numpy.sum(case.ember(*xs)), argnums=_float_argnums(args))(*args)
        return
    argnums = _float_argnums(args)
    assert argnums, "a gradient case needs float arguments"
    out_shape = np.shape(case.numpy(*args))
    ct = np.random.default_rng(2).normal(size=out_shape)

    def loss(*xs: Any) -> Any:
        return ember.numpy.sum(case.ember(*xs) * ct)

    grads = ember.grad(loss, argnums=argnums)(*args)
    # the gradient IR (the seed design's grad(ir)) type-checks
    grad_ir = ember.grad(ember.stage_out(loss, *[ember.ShapedArray(a.shape, a.dtype) for a in args]), argnums)
    ember.check_ir(grad_ir)

    if case.jax is not None:
        def jax_loss(*xs: Any) -> Any:
            return jnp.sum(case.jax(*xs) * ct)
        expected = jax.grad(jax_loss, argnums=argnums)(*[jnp.asarray(a) for a in args])
        for g, e, i in zip(grads, expected, argnums):
            tight = args[i].dtype == np.float64
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-9 if tight else 1e-5,
                                       atol=1e-12 if tight else 1e-6)

    if not case.finite_differences:
        return
    loss_jit = ember.jit(loss)
    for g, i in zip(grads, argnums):
        tight = args[i].dtype == np.float64
        eps, rtol = (1e-6, 1e-5) if tight else (1e-2, 1e-2)
        numeric = np.zeros_like(args[i])
        for index in np.ndindex(args[i].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[i][index] += eps
            minus[i][index] -= eps
            numeric[index] = (float(loss_jit(*plus)) - float(loss_jit(*minus))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(g), numeric, rtol=rtol, atol=rtol / 10)


def check_jvp(case: Case, shapes: tuple[Shape, ...]) -> None:
    """Forward mode in float64: the jvp IR type-checks, and its output tangent matches jax.jvp and central finite
    differences along the tangent (or, for a primitive marked as refusing forward mode, the clear error)."""
    import jax

    args = make_args(case, shapes, "float64", seed=3)
    if not case.forward:
        reason = ember._core.PRIMITIVES[case.prim].marks["jvp"]
        with pytest.raises(NotImplementedError, match=f"primitive '{case.prim}': " + re.escape(reason)):
            ember.jvp(case.ember, tuple(args), tuple(np.ones_like(a) for a in args))
        return
    floats = _float_argnums(args)
    tangents = [np.random.default_rng(4 + i).normal(size=args[i].shape).astype(args[i].dtype) for i in floats]
    ir = ember.stage_out(case.ember, *[ember.ShapedArray(a.shape, a.dtype) for a in args])
    jir = jvp_ir(ir)
    ember.check_ir(jir)
    outs = ember.compile(jir).call_flat(list(args) + tangents)
    tangent_out = np.asarray(outs[len(ir.outs)])

    def with_floats(fn: Callable[..., Any], lift: Callable[[np.ndarray], Any]) -> Callable[..., Any]:
        def at(*xs: Any) -> Any:
            full = [lift(a) for a in args]
            for i, x in zip(floats, xs):
                full[i] = x
            return fn(*full)
        return at

    if case.jax is not None:
        _, expected = jax.jvp(with_floats(case.jax, jax.numpy.asarray), [args[i] for i in floats], tangents)
        np.testing.assert_allclose(tangent_out, np.asarray(expected), rtol=1e-9, atol=1e-12)
    if case.finite_differences:
        f = ember.jit(with_floats(case.ember, lambda a: a))
        tight = all(args[i].dtype == np.float64 for i in floats)
        eps, rtol = (1e-6, 1e-5) if tight else (1e-2, 1e-2)

        def at(sign: float) -> np.ndarray:
            moved = [(args[i].astype(np.float64) + sign * eps * t).astype(args[i].dtype)
                     for i, t in zip(floats, tangents)]
            return np.asarray(f(*moved)).astype(np.float64)
        numeric = (at(1.0) - at(-1.0)) / (2 * eps)
        np.testing.assert_allclose(tangent_out, numeric, rtol=rtol, atol=rtol / 10)


def check_jacobians(case: Case, shapes: tuple[Shape, ...]) -> None:
    """In float64, per float argument: jacfwd == jacrev, and the Hessian of sum(f(args) * ct) equals JAX's."""
    import jax
    import jax.numpy as jnp

    args = make_args(case, shapes, "float64", seed=6)
    argnums = _float_argnums(args)
    fwd = ember.jacfwd(case.ember, argnums=argnums)(*args)
    rev = ember.jacrev(case.ember, argnums=argnums)(*args)
    for a, b in zip(fwd, rev):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    if case.jax is None:
        return
    ct = np.random.default_rng(7).normal(size=np.shape(case.numpy(*args)))
    hessian = ember.hessian(lambda *xs: ember.numpy.sum(case.ember(*xs) * ct), argnums=argnums)(*args)
    expected = jax.hessian(lambda *xs: jnp.sum(case.jax(*xs) * ct), argnums=argnums)(*args)
    for got_row, expected_row in zip(hessian, expected):
        for got, want in zip(got_row, expected_row):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


def check_not_differentiable(case: Case, shapes: tuple[Shape, ...]) -> None:
    """A primitive marked not differentiable, alone in an IR with all-float inputs where it has any: forward mode
    gives zero tangents, and its outputs are not active for reverse mode."""
    from ember._core import IR, Eqn, Var
    from ember._transforms.ad import active_vars

    args = make_args(case, shapes, case.dtypes[0], seed=3)
    staged = ember.stage_out(case.ember, *[ember.ShapedArray(a.shape, a.dtype) for a in args])
    eqn = next(e for e in staged.eqns if e.prim.name == case.prim)
    ins = [Var(a.aval) for a in eqn.inputs]
    outs = [Var(v.aval) for v in eqn.outputs]
    ir = IR([], [], ins, [Eqn(eqn.prim, ins, outs, eqn.params)], outs)
    jir = jvp_ir(ir, [True] * len(ins))
    ember.check_ir(jir)
    rng = np.random.default_rng(5)
    values = [sample(rng, v.aval.shape, v.aval.dtype.name, case.domain) for v in ins]
    tangents = [np.ones(v.aval.shape, v.aval.dtype) for v in ins]
    results = ember.compile(jir).call_flat(values + tangents)
    for t in results[len(outs):]:
        assert not np.any(np.asarray(t)), "a non-differentiable primitive produced a nonzero tangent"
    assert not active_vars(ir, [True] * len(ins)) & set(outs)


BATCH = 7  # a batch size that no test shape uses, so a batch dimension cannot be confused with another


def check_vmap(case: Case, shapes: tuple[Shape, ...], dtype: str, where: str) -> None:
    """Every combination of batched and unbatched arguments, batched at axis 0 or at the last axis (`where`):
    the batched IR type-checks and equals numpy applied member by member, stacked at axis 0 (or at the last axis
    of the output, with `where` "last")."""
    members = [make_args(case, shapes, dtype, seed=10 + b) for b in range(BATCH)]
    avals = [ember.ShapedArray(a.shape, a.dtype) for a in members[0]]
    ir = ember.stage_out(case.ember, *avals)
    for batched in itertools.product([False, True], repeat=len(shapes)):
        if not any(batched):
            continue
        dims = [(0 if where == "first" else len(s)) if b else None for s, b in zip(shapes, batched)]
        args = [np.stack([m[i] for m in members], axis=d) if d is not None else members[0][i]
                for i, d in enumerate(dims)]
        out_dim = 0 if where == "first" else -1
        expected = np.stack([np.asarray(case.numpy(*[m[i] if d is not None else members[0][i]
                                                     for i, d in enumerate(dims)])) for m in members], axis=out_dim)
        bir, out_dims = batch_ir(ir, dims, BATCH, out_dims=[out_dim] * len(ir.outs))
        ember.check_ir(bir)
        got = ember.compile(bir).call_flat(args)[0]
        assert_close(got, expected, dtype, case.rtol)


def jvp_params(cases: Sequence[Case]) -> list[Any]:
    params = []
    for case in cases:
        differentiable = ember._core.PRIMITIVES[case.prim].differentiable
        if case.grad or not differentiable:
            for i, shapes in enumerate((case.grad_shapes or case.shapes) if case.grad else case.shapes[:1]):
                marks = [pytest.mark.slow] if i > 0 else []
                params.append(pytest.param(case, shapes, marks=marks,
                                           id=f"{case.label()}-{'x'.join(map(str, shapes))}"))
    return params


def jacobian_params(cases: Sequence[Case]) -> list[Any]:
    """The differentiable cases at their first gradient shape (the rest of the shapes in the slow sweep)."""
    return [pytest.param(case, shapes, marks=[pytest.mark.slow] if i > 0 else [],
                         id=f"{case.label()}-{'x'.join(map(str, shapes))}")
            for case in cases if case.grad and case.reverse and case.forward
            for i, shapes in enumerate(case.grad_shapes or case.shapes)]


def vmap_params(cases: Sequence[Case]) -> list[Any]:
    params = []
    for case in cases:
        for i, shapes in enumerate(case.shapes):
            for j, dtype in enumerate(case.dtypes):
                for where in ("first", "last"):
                    marks = [pytest.mark.slow] if i > 0 or j > 0 else []
                    params.append(pytest.param(case, shapes, dtype, where, marks=marks, id=(
                        f"{case.label()}-{'x'.join(map(str, shapes))}-{dtype}-{where}")))
    return params


def oracle_tests(cases: Sequence[Case]) -> tuple[Callable[..., None], ...]:
    """The tests of a primitive test module:
    `test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)`."""
    @pytest.mark.parametrize("case,shapes,dtype", forward_params(cases))
    def test_forward(case: Case, shapes: tuple[Shape, ...], dtype: str) -> None:
        check_forward(case, shapes, dtype)

    @pytest.mark.parametrize("case,shapes", grad_params(cases))
    def test_grad(case: Case, shapes: tuple[Shape, ...]) -> None:
        check_grad(case, shapes)

    @pytest.mark.parametrize("case,shapes", jvp_params(cases))
    def test_jvp(case: Case, shapes: tuple[Shape, ...]) -> None:
        if ember._core.PRIMITIVES[case.prim].differentiable:
            check_jvp(case, shapes)
        else:
            check_not_differentiable(case, shapes)

    @pytest.mark.parametrize("case,shapes", jacobian_params(cases))
    def test_jacobians(case: Case, shapes: tuple[Shape, ...]) -> None:
        check_jacobians(case, shapes)

    @pytest.mark.parametrize("case,shapes,dtype,where", vmap_params(cases))
    def test_vmap(case: Case, shapes: tuple[Shape, ...], dtype: str, where: str) -> None:
        check_vmap(case, shapes, dtype, where)

    return test_forward, test_grad, test_jvp, test_vmap, test_jacobians
