"""ember.scipy.sparse.linalg's cg, bicgstab and gmres against jax.scipy.sparse.linalg (the same iterations: equal
to rounding) and scipy / numpy (the solution): operators as matrices, callables and `@`-able objects,
preconditioners, x0, tol / atol / maxiter / restart / solve_method, complex systems, pytree vectors; under jit,
vmap and grad (implicit differentiation through custom_linear_solve, as JAX's); the errors JAX raises."""
import jax
import jax.numpy as jnp
import jax.scipy.sparse.linalg as jsl
import numpy as np
import pytest
import scipy.sparse.linalg as ssl

import ember
import ember.numpy as enp
import ember.scipy.sparse.linalg as esl
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")

R = np.random.default_rng(7)
N = 10
_A = R.normal(size=(N, N))
SPD = _A @ _A.T + N * np.eye(N)                 # symmetric positive definite (cg)
GEN = _A + 4 * np.eye(N)                        # nonsymmetric (bicgstab, gmres)
B = R.normal(size=N)
_C = _A + 1j * R.normal(size=(N, N))
HPD = _C @ _C.conj().T + N * np.eye(N)
CGEN = _C + 4 * np.eye(N)
BC = B + 1j * R.normal(size=N)


def _jacobi(a):
    return np.diag(1 / np.diag(a))


# (solver, matrix, keywords, in the default run): each against JAX's run of the same solver
CASES = [("cg", SPD, {}, True), ("cg", SPD, {"M": _jacobi(SPD)}, True),
         ("cg", SPD, {"tol": 1e-10, "maxiter": 3}, False), ("cg", SPD, {"atol": 1e-3, "x0": B}, False),
         ("bicgstab", GEN, {}, True), ("bicgstab", GEN, {"M": _jacobi(GEN)}, False),
         ("gmres", GEN, {}, True), ("gmres", GEN, {"restart": 3}, False),
         ("gmres", GEN, {"restart": 3, "solve_method": "incremental"}, True),
         ("gmres", GEN, {"restart": 4, "M": _jacobi(GEN), "solve_method": "incremental", "maxiter": 2}, False)]


@pytest.mark.parametrize("name,a,kw", [pytest.param(*c[:3], id=f"{c[0]}-{'-'.join(c[2])}",
                                                    marks=() if c[3] else pytest.mark.slow) for c in CASES])
def test_matches_jax_and_solves(name, a, kw):
    got, info = getattr(esl, name)(a, B, **kw)
    want = jax_result(lambda: getattr(jsl, name)(a, B, **kw)[0])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-11, atol=1e-13)
    if "maxiter" not in kw:     # converged: the residual within the tolerance (scipy's non-legacy test)
        res = np.linalg.norm(a @ np.asarray(got) - B)
        assert res <= max(kw.get("tol", 1e-5) * np.linalg.norm(B), kw.get("atol", 0.0)) * 1.01
    if name == "gmres":
        assert int(info) == 0
    else:
        assert info is None


def test_agrees_with_scipy():
    for name, a in (("cg", SPD), ("bicgstab", GEN), ("gmres", GEN)):
        want, code = getattr(ssl, name)(a, B, rtol=1e-10, atol=0.0)
        assert code == 0
        np.testing.assert_allclose(np.asarray(getattr(esl, name)(a, B, tol=1e-10)[0]), want, rtol=1e-8)


def test_complex_systems_match_jax():
    for name, a in (("cg", HPD), ("bicgstab", CGEN), ("gmres", CGEN)):
        got = getattr(esl, name)(a, BC)[0]
        assert got.dtype == np.complex128
        np.testing.assert_allclose(np.asarray(got), jax_result(lambda: getattr(jsl, name)(a, BC)[0]), rtol=1e-11,
                                   atol=1e-13)


def _tree_matvec(num):
    def matvec(t):
        y = num.dot(SPD, num.concatenate([t["u"], t["v"].ravel()]))
        return {"u": y[:4], "v": y[4:].reshape(2, 3)}
    return matvec


def test_pytree_vectors_and_operator_forms():
    bt = {"u": B[:4], "v": B[4:].reshape(2, 3)}
    for name in ("cg", "bicgstab", "gmres"):
        got = getattr(esl, name)(_tree_matvec(enp), bt)[0]
        want = jax_result(lambda: getattr(jsl, name)(_tree_matvec(jnp), bt)[0])
        assert set(got) == {"u", "v"} and got["v"].shape == (2, 3)
        for key in bt:
            np.testing.assert_allclose(np.asarray(got[key]), want[key], rtol=1e-11, atol=1e-13)

    class Operator:                                      # anything with @ (and a square shape)
        shape = SPD.shape

        def __matmul__(self, x):
            return enp.dot(SPD, x)

    want = np.asarray(esl.cg(SPD, B)[0])
    for op in (Operator(), enp.asarray(SPD), lambda x: enp.dot(SPD, x)):
        np.testing.assert_allclose(np.asarray(esl.cg(op, B)[0]), want, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(esl.cg(SPD, B, M=lambda r: r / np.diag(SPD))[0]),
                               np.asarray(esl.cg(SPD, B, M=_jacobi(SPD))[0]), rtol=1e-13)


@pytest.mark.parametrize("name,a", [("cg", SPD), ("bicgstab", GEN), ("gmres", GEN)])
def test_grad_jit_and_vmap_match_jax(name, a):
    w = np.arange(N, dtype=float)

    def loss(solve, num):
        return lambda a, b: num.sum(solve(lambda x: a @ x, b, tol=1e-12)[0] * w)

    got = ember.jit(ember.grad(loss(getattr(esl, name), enp), argnums=(0, 1)))(a, B)
    want = jax_result(lambda: jax.grad(loss(getattr(jsl, name), jnp), argnums=(0, 1))(a, B))
    for g, wt in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), wt, rtol=1e-9, atol=1e-11)
    # the implicit derivative: d(w . x)/db = A^-T w
    np.testing.assert_allclose(np.asarray(got[1]), np.linalg.solve(a.T, w), rtol=1e-8)
    bs = R.normal(size=(3, N))
    mapped = ember.vmap(lambda b: getattr(esl, name)(a, b)[0])(bs)
    np.testing.assert_allclose(np.asarray(mapped), jax_result(lambda: jax.vmap(
        lambda b: getattr(jsl, name)(a, b)[0])(bs)), rtol=1e-11, atol=1e-13)


def test_float32_default_mode():
    with ember.config.override(enable_x64=False):
        x, _ = esl.gmres(GEN.astype(np.float32), B.astype(np.float32), solve_method="incremental")
        assert x.dtype == np.float32
        np.testing.assert_allclose(np.asarray(x), np.linalg.solve(GEN, B), rtol=1e-4, atol=1e-5)
        x, _ = esl.cg(SPD.astype(np.float32), B.astype(np.float32))
        np.testing.assert_allclose(np.asarray(x), np.linalg.solve(SPD, B), rtol=1e-4, atol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="linear operator must be a square matrix"):
        esl.cg(np.ones((3, 4)), np.ones(3))
    with pytest.raises(TypeError, match="linear operator must be either a function or ndarray"):
        esl.bicgstab("A", np.ones(3))
    with pytest.raises(ValueError, match="x0 and b must have matching tree structure"):
        esl.cg(SPD, B, x0=(B,))
    with pytest.raises(ValueError, match="arrays in x0 and b must have matching shapes"):
        esl.bicgstab(GEN, B, x0=B[:3])
    with pytest.raises(ValueError, match="invalid solve_method"):
        esl.gmres(GEN, B, solve_method="qr")
