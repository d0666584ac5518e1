"""Oracle test harness for primitives: forward values against numpy; reverse and forward derivatives against JAX
and finite differences; batching against a loop over the batch (numpy per member).

A test module for primitives defines CASES, a list of Case, and gets its tests from oracle_tests(CASES); the meta
test (tests/test_meta.py) reads every tests/prims/test_*.py module's CASES to check that each registered primitive
is exercised for every rule kind it has, and that each differentiable one has a derivative check.

A Case's function returns one array or a tuple of them; every check compares every output. check_grad pulls the
output cotangents back directly and sums its finite differences in numpy: a loss built in ember would run mul's and
reduce_sum's rules a second time, and a wrong one could cancel itself (a sign-flipped reduce_sum vjp did).
tests/test_harness_selftest.py plants wrong rules to show that each check catches them."""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import pathlib
import re
from typing import Any, Callable, Sequence

import numpy as np
import pytest
from recorded import jax_result

import ember
from ember._core import IR
from ember._core.ir import sub_irs
from ember._core import dtypes as dt
from ember._transforms import batch_ir, jvp_ir

Shape = tuple[int, ...]


@dataclasses.dataclass
class Case:
    prim: str                                   # the primitive this case exercises
    ember: Callable[..., Any]                   # the computation on ember values (ember.lax or ember.numpy)
    numpy: Callable[..., Any]                   # the same on numpy arrays: the forward oracle
    shapes: Sequence[tuple[Shape, ...]]         # argument shapes; the quick run has the first
    dtypes: Sequence[str]                       # dtypes to try; all are in the quick run for the first shape
    jax: Callable[..., Any] | None = None       # the same on jax arrays: the gradient oracle
    domain: str = "any"                         # any | positive | nonzero | unit (|x| < 0.9) | int_small |
                                                # signed_zeros_and_nans (floats of every class: +-0, +-inf, +-NaN)
    arg_dtypes: Sequence[str | None] | None = None  # per-argument dtype overrides (None: the case dtype)
    grad: bool = True                           # check derivatives (float64) for float arguments
    reverse: bool = True                        # reverse mode too (False: the primitive refuses it, clearly)
    forward: bool = True                        # forward mode too (False: the primitive refuses it, clearly)
    batching: bool = True                       # vmap too (False: the primitive refuses it, clearly: composite)
    finite_differences: bool = True             # also against finite differences (not for stop_gradient)
    grad_shapes: Sequence[tuple[Shape, ...]] | None = None
    rtol: float | None = None
    name: str = ""
    grad_dtype: str = "float64"                 # the dtype of the derivative checks (complex128 for complex cases)
    jacobians: bool = True                      # check jacfwd/jacrev/Hessians (False: second derivatives raise, as
                                                # JAX's: eig's eigenvalues, whose rule needs eigenvector derivatives)

    def label(self) -> str:
        return self.name or self.prim


_TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2),
        "complex128": (1e-10, 1e-12), "complex64": (2e-5, 2e-6)}
INEXACT_KINDS = "fc"  # the dtype kinds that carry derivatives


def sample(rng: np.random.Generator, shape: Shape, dtype: str, domain: str) -> np.ndarray:
    dt = ember.numpy.dtype(ember._core.dtypes.canonicalize_dtype(dtype))
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "c":  # the real and imaginary parts drawn as a float of the domain each (positive: Re > 0)
        part = np.dtype(np.float32 if dt == np.complex64 else np.float64)
        re = sample(rng, shape, part.name, domain)
        im = sample(rng, shape, part.name, "unit" if domain in ("positive", "nonzero") else domain)
        return np.asarray(re + 1j * im).astype(dt)
    if dt.kind in "iu":
        lo, hi = (1, 6) if domain in ("positive", "nonzero") else (0, 6) if dt.kind == "u" else (-5, 6)
        if domain == "int_small":
            lo, hi = (0, 4)
        values = rng.integers(lo, hi, size=shape)
        if domain == "nonzero":
            values = np.where(values == 0, 1, values)
        return values.astype(dt)
    if domain == "signed_zeros_and_nans":  # (the total-order comparisons: every class of value, ties likely)
        values = rng.choice(np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan, -np.nan]), size=shape)
    elif domain == "positive":
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


def outputs(value: Any) -> list[Any]:
    """The outputs of a Case's function, which returns one array or a tuple (or list) of them, as a list."""
    return list(value) if isinstance(value, (tuple, list)) else [value]


def float_outputs(value: Any) -> list[bool]:
    """Which outputs of a Case's function carry derivatives (the floating-point ones)."""
    return [np.asarray(v).dtype.kind in INEXACT_KINDS for v in outputs(value)]


def weighted_sum(value: Any, cts: Sequence[np.ndarray | None], total: Callable[[Any], Any]) -> Any:
    """sum(out * ct) over the outputs with a cotangent ct (None: an output without derivatives, left out): the scalar
    whose gradient pulls every cotangent back at once. total sums an array in the library of the outputs."""
    terms = [total(out * ct) for out, ct in zip(outputs(value), cts) if ct is not None]
    terms = [term.real if np.iscomplexobj(term) else term for term in terms]  # Re(sum(out * ct)): JAX's pairing
    assert terms, "a gradient case needs a floating-point output"
    result = terms[0]
    for term in terms[1:]:
        result = result + term
    return result


def output_cotangents(value: Any, seed: int) -> list[np.ndarray | None]:
    """A random float64 (complex128 for a complex output) cotangent for each floating-point or complex output of a
    Case's function (None for the others)."""
    rng = np.random.default_rng(seed)

    def draw(v: Any) -> np.ndarray:
        ct = rng.normal(size=np.shape(v))
        return ct + 1j * rng.normal(size=np.shape(v)) if np.iscomplexobj(v) else ct
    return [draw(v) if is_float else None for v, is_float in zip(outputs(value), float_outputs(value))]


def forward_params(cases: Sequence[Case]) -> list[Any]:
    """Forward values at the first shape in the quick run, in the first dtype of each case and in each other dtype
    for every other case of a file, alternating (every dtype of every case at every shape in the slow sweep)."""
    params = []
    for k, case in enumerate(cases):
        for i, shapes in enumerate(case.shapes):
            for j, dtype in enumerate(case.dtypes):
                marks = [pytest.mark.slow] if i > 0 or (j >= 1 and (j + k) % 2) else []
                params.append(pytest.param(case, shapes, dtype, marks=marks,
                                           id=f"{case.label()}-{'x'.join(map(str, shapes))}-{dtype}"))
    return params


def _variant_indices(cases: Sequence[Case], kind: Callable[[Case], Any]) -> list[int]:
    """Per case: how many cases before it share its primitive and kind(case) (0 for the first of them)."""
    seen: dict[tuple[str, Any], int] = {}
    indices = []
    for case in cases:
        key = (case.prim, kind(case))
        indices.append(seen.get(key, 0))
        seen[key] = indices[-1] + 1
    return indices


def grad_params(cases: Sequence[Case]) -> list[Any]:
    """Reverse mode at the first gradient shape in the quick run, for the first case of each primitive (and of its
    refusal, if any) in a file and every other one of its further cases (variants); all of them at every gradient
    shape in the slow sweep."""
    params = []
    eligible = [case for case in cases if case.grad]
    for case, r in zip(eligible, _variant_indices(eligible, lambda c: c.reverse)):
        for i, shapes in enumerate(case.grad_shapes or case.shapes):
            marks = [pytest.mark.slow] if i > 0 or r % 2 else []
            params.append(pytest.param(case, shapes, marks=marks, id=f"{case.label()}-{'x'.join(map(str, shapes))}"))
    return params


def assert_close(actual: Any, expected: Any, dtype: str, rtol: float | None = None) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    r, a = _TOL.get(dtype, (1e-5, 1e-6))
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(actual.astype(wide), expected.astype(wide), rtol=rtol or r, atol=a, equal_nan=True)


def assert_outputs_close(actual: Any, expected: Any, dtype: str, rtol: float | None = None) -> None:
    """Every output of a Case's function (one array or a tuple of them) against the oracle's, dtypes included."""
    actual, expected = outputs(actual), outputs(expected)
    assert len(actual) == len(expected), f"{len(actual)} outputs != expected {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"output {i}: dtype {got.dtype} != expected {want.dtype}"
        try:
            assert_close(got, want, dtype, rtol)
        except AssertionError as err:
            raise AssertionError(f"output {i}: {err}") from None


def check_forward(case: Case, shapes: tuple[Shape, ...], dtype: str) -> None:
    args = make_args(case, shapes, dtype)
    expected = case.numpy(*args)
    eager = case.ember(*[ember.asarray(a) for a in args])
    assert_outputs_close(eager, expected, dtype, case.rtol)
    jitted = ember.jit(case.ember)(*args)
    assert_outputs_close(jitted, expected, dtype, case.rtol)


def _float_argnums(args: Sequence[np.ndarray]) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(args) if a.dtype.kind in INEXACT_KINDS)


def _restricted(fn: Callable[..., Any], args: Sequence[np.ndarray], argnums: Sequence[int],
                keep: Sequence[bool], lift: Callable[[np.ndarray], Any] = lambda a: a) -> Callable[..., list[Any]]:
    """fn as a function of the arguments argnums alone (the others fixed at args, lifted into fn's library),
    returning the list of its outputs marked in keep."""
    def at(*xs: Any) -> list[Any]:
        full = [lift(a) for a in args]
        for i, x in zip(argnums, xs):
            full[i] = x
        return [out for out, k in zip(outputs(fn(*full)), keep) if k]
    return at


def check_grad(case: Case, shapes: tuple[Shape, ...]) -> None:
    """Reverse mode in float64: the cotangents pulled back from random output cotangents (every float output at
    once) against JAX's and against central finite differences of sum(f(args) * ct) computed in numpy (so that no
    primitive under test enters the oracle), or, for a primitive marked as refusing reverse mode, the clear error
    naming the primitive and the reason."""
    import jax
    import jax.numpy as jnp

    args = make_args(case, shapes, case.grad_dtype, seed=1)
    if not case.reverse:
        reason = ember._core.PRIMITIVES[case.prim].marks["vjp"]
        with pytest.raises(NotImplementedError, match=f"primitive '{case.prim}': " + re.escape(reason)):
            ember.grad(lambda *xs: ember.numpy.sum(case.ember(*xs)), argnums=_float_argnums(args))(*args)
        return
    argnums = _float_argnums(args)
    assert argnums, "a gradient case needs float arguments"
    all_cts = output_cotangents(case.numpy(*args), seed=2)
    is_float = [ct is not None for ct in all_cts]
    f = _restricted(case.ember, args, argnums, is_float)
    wrt = [args[i] for i in argnums]
    outs, pullback = ember.vjp(f, *wrt)
    cts = [ct.astype(np.asarray(out).dtype) for ct, out in zip([c for c in all_cts if c is not None], outs)]
    grads = pullback(cts)
    # the gradient IR (the seed design's grad(ir)) type-checks
    grad_ir = ember.grad(ember.stage_out(lambda *xs: weighted_sum(case.ember(*xs), all_cts, ember.numpy.sum),
                                         *[ember.ShapedArray(a.shape, a.dtype) for a in args]), argnums)
    ember.check_ir(grad_ir)

    if case.jax is not None:
        jfn = case.jax
        expected = jax_result(lambda: jax.vjp(_restricted(jfn, args, argnums, is_float, jnp.asarray), *wrt)[1](cts))
        for i, g, e, x in zip(argnums, grads, expected, wrt):
            tight = x.dtype in (np.float64, np.complex128)
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-9 if tight else 1e-5,
                                       atol=1e-12 if tight else 1e-6, err_msg=f"argument {i}")

    if not case.finite_differences:
        return
    f_jit = ember.jit(f)

    def loss(xs: list[np.ndarray]) -> float:  # Re(sum(out * ct)), the pairing of JAX's convention
        return sum(float(np.real(np.sum(np.asarray(out).astype(np.complex128) * ct)))
                   for out, ct in zip(f_jit(*xs), cts))

    for k, (g, x) in enumerate(zip(grads, wrt)):
        tight = x.dtype in (np.float64, np.complex128)
        eps, rtol = (1e-6, 1e-5) if tight else (1e-2, 1e-2)
        numeric = np.zeros_like(x)
        # a complex x = a + ib gets the cotangent dL/da - i dL/db (so that Re(ct * t) is L's derivative along t)
        for index in np.ndindex(x.shape):
            for step in ((1.0, -1j) if x.dtype.kind == "c" else (1.0,)):
                plus = [a.copy() for a in wrt]
                minus = [a.copy() for a in wrt]
                plus[k][index] += eps * (1j if step != 1.0 else 1.0)
                minus[k][index] -= eps * (1j if step != 1.0 else 1.0)
                numeric[index] += step * (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(np.asarray(g), numeric, rtol=rtol, atol=rtol / 10, err_msg=f"argument {argnums[k]}")


def check_jvp(case: Case, shapes: tuple[Shape, ...]) -> None:
    """Forward mode in float64: the jvp IR type-checks, and its output tangent matches jax.jvp and central finite
    differences along the tangent (or, for a primitive marked as refusing forward mode, the clear error)."""
    import jax

    args = make_args(case, shapes, case.grad_dtype, seed=3)
    if not case.forward:
        # (custom_vjp_call's jvp rule makes a custom_lin, whose running is the error: its mark's reason)
        prim = ember._core.PRIMITIVES[case.prim]
        reason = prim.marks.get("jvp") or ember._core.PRIMITIVES["custom_lin"].marks["jvp"]
        with pytest.raises(NotImplementedError, match=f"primitive '{case.prim}': " + re.escape(reason)):
            ember.jvp(case.ember, tuple(args), tuple(np.ones_like(a) for a in args))
        return
    floats = _float_argnums(args)
    tangents = [_random_like(np.random.default_rng(4 + i), args[i]) for i in floats]
    ir = ember.stage_out(case.ember, *[ember.ShapedArray(a.shape, a.dtype) for a in args])
    jir = jvp_ir(ir)
    ember.check_ir(jir)
    results = ember.compile(jir).call_flat(list(args) + tangents)
    tangents_out = [np.asarray(t) for t in results[len(ir.outs):]]
    is_float = [dt.is_inexact(v.aval.dtype) for v in ir.outs]
    for i, (t, f) in enumerate(zip(tangents_out, is_float)):
        assert f or not np.any(t), f"output {i} has no derivatives but a nonzero tangent"
    every = [True] * len(is_float)

    if case.jax is not None:
        jfn = case.jax
        expected = jax_result(lambda: jax.jvp(_restricted(jfn, args, floats, every, jax.numpy.asarray),
                                              [args[i] for i in floats], tangents)[1])
        # (float32 arguments: JAX's result may come from another CPU, whose float32 products round differently)
        tight = all(args[i].dtype in (np.float64, np.complex128) for i in floats)
        _assert_float_outputs_close(tangents_out, expected, is_float, rtol=1e-9 if tight else 1e-5,
                                    atol=1e-12 if tight else 1e-6)
    if case.finite_differences:
        f = ember.jit(_restricted(case.ember, args, floats, every))
        tight = all(args[i].dtype in (np.float64, np.complex128) for i in floats)
        eps, rtol = (1e-6, 1e-5) if tight else (1e-2, 1e-2)

        def at(sign: float) -> list[np.ndarray]:
            moved = [(args[i].astype(np.complex128 if args[i].dtype.kind == "c" else np.float64)
                      + sign * eps * t).astype(args[i].dtype) for i, t in zip(floats, tangents)]
            return [np.asarray(v).astype(np.complex128 if np.iscomplexobj(v) else np.float64) for v in f(*moved)]
        numeric = [(plus - minus) / (2 * eps) for plus, minus in zip(at(1.0), at(-1.0))]
        _assert_float_outputs_close(tangents_out, numeric, is_float, rtol=rtol, atol=rtol / 10)


def _random_like(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """A random tangent for x: normal parts, complex for a complex x."""
    t = rng.normal(size=x.shape)
    return (t + 1j * rng.normal(size=x.shape) if x.dtype.kind == "c" else t).astype(x.dtype)


def _assert_float_outputs_close(actual: Sequence[Any], expected: Sequence[Any], is_float: Sequence[bool],
                                rtol: float, atol: float) -> None:
    """Per output that carries derivatives: actual equals expected (a tangent or a Jacobian) to the tolerance."""
    assert len(actual) == len(expected) == len(is_float), f"{len(actual)} outputs != expected {len(expected)}"
    for i, (got, want, f) in enumerate(zip(actual, expected, is_float)):
        if f:
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol,
                                       err_msg=f"output {i}")


def check_jacobians(case: Case, shapes: tuple[Shape, ...]) -> None:
    """In float64, per float argument and float output: jacfwd == jacrev, and the Hessian of sum(f(args) * ct)
    (summed over the float outputs) equals JAX's."""
    import jax
    import jax.numpy as jnp

    args = make_args(case, shapes, "float64", seed=6)
    if any(np.iscomplexobj(o) for o in outputs(case.numpy(*args))):
        pytest.skip("complex outputs: jacfwd and jacrev need holomorphic=True (checked in tests/test_complex.py)")
    argnums = _float_argnums(args)
    is_float = float_outputs(case.numpy(*args))
    differentiable_outputs = _restricted(case.ember, args, range(len(args)), is_float)
    fwd = ember.tree_util.tree_leaves(ember.jacfwd(differentiable_outputs, argnums=argnums)(*args))
    rev = ember.tree_util.tree_leaves(ember.jacrev(differentiable_outputs, argnums=argnums)(*args))
    assert len(fwd) == len(rev) == sum(is_float) * len(argnums)
    for a, b in zip(fwd, rev):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    if case.jax is None:
        return
    cts = output_cotangents(case.numpy(*args), seed=7)
    hessian = ember.hessian(lambda *xs: weighted_sum(case.ember(*xs), cts, ember.numpy.sum), argnums=argnums)(*args)
    jfn = case.jax
    expected = jax_result(lambda: jax.hessian(lambda *xs: weighted_sum(jfn(*xs), cts, jnp.sum), argnums=argnums)(*args))
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


def bound_primitives(ir: IR) -> set[str]:
    """The names of the primitives ir's equations bind, in its sub-IRs (branches, loop bodies) too."""
    names: set[str] = set()
    for eqn in ir.eqns:
        names.add(eqn.prim.name)
        for sub in sub_irs(eqn.params):
            names |= bound_primitives(sub)
    return names


def staged(case: Case, shapes: tuple[Shape, ...], dtype: str) -> IR:
    """The IR of the case's function at these shapes and dtype (staging only: nothing is compiled)."""
    args = make_args(case, shapes, dtype)
    return ember.stage_out(case.ember, *[ember.ShapedArray(a.shape, a.dtype) for a in args])


PRIM_TEST_DIR = pathlib.Path(__file__).parent / "prims"


def load_cases() -> list[Case]:
    """The CASES of every tests/prims/test_*.py module, loaded under private module names."""
    cases: list[Case] = []
    for path in sorted(PRIM_TEST_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_cases_{path.stem}", path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(getattr(module, "CASES", []))
    return cases


BATCH = 7  # a batch size that no test shape uses, so a batch dimension cannot be confused with another


def _batched_patterns(n: int) -> list[tuple[bool, ...]]:
    """Which of n arguments are batched in check_vmap: every combination with at least one for up to 4 arguments;
    beyond (the 6- and 8-operand hashes: 63 and 255 compiles of their unrolled rounds took 22 s and 246 s), each
    argument alone, all of them and the two alternations, so each argument is seen batched beside batched and
    unbatched ones."""
    if n <= 4:
        return [b for b in itertools.product([False, True], repeat=n) if any(b)]
    alone = [tuple(i == j for j in range(n)) for i in range(n)]
    return alone + [(True,) * n, tuple(j % 2 == 0 for j in range(n)), tuple(j % 2 == 1 for j in range(n))]


def check_vmap(case: Case, shapes: tuple[Shape, ...], dtype: str, where: str) -> None:
    """The combinations of batched and unbatched arguments (_batched_patterns), batched at axis 0 or at the last
    axis (`where`):
    the batched IR type-checks and equals numpy applied member by member, stacked at axis 0 (or at the last axis
    of the output, with `where` "last")."""
    members = [make_args(case, shapes, dtype, seed=10 + b) for b in range(BATCH)]
    avals = [ember.ShapedArray(a.shape, a.dtype) for a in members[0]]
    ir = ember.stage_out(case.ember, *avals)
    if not case.batching:  # (the primitive's mark: the clear error naming it and the reason)
        reason = ember._core.PRIMITIVES[case.prim].marks["batching"]
        with pytest.raises(NotImplementedError, match=f"primitive '{case.prim}': " + re.escape(reason)):
            batch_ir(ir, [0 if where == "first" else len(s) for s in shapes], BATCH)
        return
    for batched in _batched_patterns(len(shapes)):
        dims = [(0 if where == "first" else len(s)) if b else None for s, b in zip(shapes, batched)]
        args = [np.stack([m[i] for m in members], axis=d) if d is not None else members[0][i]
                for i, d in enumerate(dims)]
        out_dim = 0 if where == "first" else -1
        per_member = [outputs(case.numpy(*[m[i] if d is not None else members[0][i] for i, d in enumerate(dims)]))
                      for m in members]
        expected = [np.stack([np.asarray(outs[k]) for outs in per_member], axis=out_dim)
                    for k in range(len(per_member[0]))]
        bir, out_dims = batch_ir(ir, dims, BATCH, out_dims=[out_dim] * len(ir.outs))
        ember.check_ir(bir)
        got = ember.compile(bir).call_flat(args)
        assert_outputs_close(got, expected, dtype, case.rtol)


def jvp_params(cases: Sequence[Case]) -> list[Any]:
    """Forward mode (or the not-differentiable check) as grad_params picks: the first gradient shape of the first
    case of each primitive (and of its refusal) in a file and of every other further case in the quick run."""
    params = []
    eligible = [case for case in cases if case.grad or not ember._core.PRIMITIVES[case.prim].differentiable]
    for case, r in zip(eligible, _variant_indices(eligible, lambda c: c.forward)):
        for i, shapes in enumerate((case.grad_shapes or case.shapes) if case.grad else case.shapes[:1]):
            marks = [pytest.mark.slow] if i > 0 or r % 2 else []
            params.append(pytest.param(case, shapes, marks=marks,
                                       id=f"{case.label()}-{'x'.join(map(str, shapes))}"))
    return params


def jacobian_params(cases: Sequence[Case], phase: int = 0) -> list[Any]:
    """The differentiable cases at their first gradient shape, every other case of a file in the quick run (the
    second derivatives compose the first-order rules that test_grad and test_jvp check; the other cases and shapes
    in the slow sweep; phase 1 takes the other half)."""
    eligible = [case for case in cases if case.grad and case.reverse and case.forward and case.jacobians
                and not case.grad_dtype.startswith("c")]
    return [pytest.param(case, shapes, marks=[pytest.mark.slow] if i > 0 or (k + phase) % 2 else [],
                         id=f"{case.label()}-{'x'.join(map(str, shapes))}")
            for k, case in enumerate(eligible)
            for i, shapes in enumerate(case.grad_shapes or case.shapes)]


def vmap_params(cases: Sequence[Case]) -> list[Any]:
    """Batching at the first or the last axis: the quick run takes the first shape and dtype, with the batch axis
    first for every other case of a file and last for the others, for the first case of each primitive in the file
    and every other one of its further cases (every case, both axes, in the slow sweep)."""
    params = []
    for k, (case, r) in enumerate(zip(cases, _variant_indices(cases, lambda c: None))):
        for i, shapes in enumerate(case.shapes):
            for j, dtype in enumerate(case.dtypes):
                for where in ("first", "last"):
                    quick = i == 0 and j == 0 and (where == "first") == (k % 2 == 0) and r % 2 == 0
                    marks = [] if quick else [pytest.mark.slow]
                    params.append(pytest.param(case, shapes, dtype, where, marks=marks, id=(
                        f"{case.label()}-{'x'.join(map(str, shapes))}-{dtype}-{where}")))
    return params


def oracle_tests(cases: Sequence[Case], jacobians_phase: int = 0) -> tuple[Callable[..., None], ...]:
    """The tests of a primitive test module:
    `test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)`. They run in ember's
    64-bit mode (the ember_x64 fixture): a Case's float64 inputs stay float64, as in JAX's x64 mode."""
    tests = _oracle_tests(cases, jacobians_phase)
    return tuple(pytest.mark.usefixtures("ember_x64")(test) for test in tests)


def _oracle_tests(cases: Sequence[Case], jacobians_phase: int) -> tuple[Callable[..., None], ...]:
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

    @pytest.mark.parametrize("case,shapes", jacobian_params(cases, jacobians_phase))
    def test_jacobians(case: Case, shapes: tuple[Shape, ...]) -> None:
        check_jacobians(case, shapes)

    @pytest.mark.parametrize("case,shapes,dtype,where", vmap_params(cases))
    def test_vmap(case: Case, shapes: tuple[Shape, ...], dtype: str, where: str) -> None:
        check_vmap(case, shapes, dtype, where)

    return test_forward, test_grad, test_jvp, test_vmap, test_jacobians
