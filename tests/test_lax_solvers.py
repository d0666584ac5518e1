"""ember.lax.custom_linear_solve, custom_root, approx_max_k and approx_min_k side by side with jax.lax: values,
dtypes, errors, and derivatives (grad, jvp, vmap, under jit) of the same programs. The linear_solve primitive's
oracle Case is in tests/prims/test_control.py."""
import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # (JAX's defaults: Python scalars are float32)
RNG = np.random.default_rng(0)
_M = RNG.normal(size=(4, 4))
SPD = (_M @ _M.T + 4 * np.eye(4)).astype(np.float32)  # symmetric positive definite
GEN = (RNG.normal(size=(4, 4)) + 4 * np.eye(4)).astype(np.float32)  # not symmetric
B = RNG.normal(size=4).astype(np.float32)


def close(got, want, rtol=2e-5, atol=2e-6):
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _cg(lib, np_, steps=12):
    """A conjugate-gradient solve (a while loop: reverse mode could not differentiate through it)."""
    def solve(matvec, b):
        def body(state):
            x, r, p, i = state
            ap = matvec(p)
            rr = np_.vdot(r, r)
            alpha = rr / np_.maximum(np_.vdot(p, ap), 1e-30)
            x, r2 = x + alpha * p, r - alpha * ap
            return x, r2, r2 + np_.vdot(r2, r2) / np_.maximum(rr, 1e-30) * p, i + 1
        return lib.while_loop(lambda s: s[3] < steps, body, (np_.zeros_like(b), b, b, 0))[0]
    return solve


def _dense(lib, np_):
    return lambda matvec, b: np_.linalg.solve(jax.jacfwd(matvec)(b) if lib is jlax else ember.jacfwd(matvec)(b), b)


def _linear_program(lib, np_, how):
    """b -> x with a x = b, a given as a matvec closing over it (so derivatives reach a through matvec)."""
    def f(a, b):
        matvec = lambda x: a @ x  # noqa: E731
        if how == "symmetric":
            return lib.custom_linear_solve(matvec, b, _cg(lib, np_), symmetric=True)
        if how == "transpose":
            return lib.custom_linear_solve(matvec, b, _dense(lib, np_), transpose_solve=_dense(lib, np_))
        return lib.custom_linear_solve(matvec, b, _dense(lib, np_))  # (no transpose_solve: forward mode only)
    return f


@pytest.mark.slow
@pytest.mark.parametrize("how,a", [("symmetric", SPD), ("transpose", GEN)])
def test_custom_linear_solve_values_and_derivatives_as_jax(how, a):
    fe, fj = _linear_program(lax, enp, how), _linear_program(jlax, jnp, how)
    close(fe(a, B), fj(a, B))
    close(ember.jit(fe)(a, B), jax.jit(fj)(a, B))
    loss_e = lambda a, b: enp.sum(fe(a, b) ** 2)  # noqa: E731
    loss_j = lambda a, b: jnp.sum(fj(a, b) ** 2)  # noqa: E731
    close(ember.jit(ember.grad(loss_e, (0, 1)))(a, B), jax.grad(loss_j, (0, 1))(a, B), rtol=1e-4, atol=1e-5)
    da, db = RNG.normal(size=a.shape).astype(np.float32), RNG.normal(size=4).astype(np.float32)
    close(ember.jvp(fe, (a, B), (da, db)), jax.jvp(fj, (a, B), (da, db)), rtol=1e-4, atol=1e-5)
    bs, as_ = np.stack([B, 2 * B, -B]), np.stack([a, a + np.eye(4, dtype=np.float32), 2 * a])
    close(ember.vmap(fe, (None, 0))(a, bs), jax.vmap(fj, (None, 0))(a, bs))
    close(ember.vmap(fe, (0, None))(as_, B), jax.vmap(fj, (0, None))(as_, B))
    close(ember.vmap(ember.grad(loss_e), (0, 0))(as_, bs), jax.vmap(jax.grad(loss_j), (0, 0))(as_, bs), rtol=1e-4,
          atol=1e-5)


@pytest.mark.slow
def test_custom_linear_solve_second_derivatives_and_the_solve_is_not_differentiated():
    """The Hessian comes from solves too; a solve returning a wrong answer shows it: the derivative is the system's,
    A^-1 db, not the derivative of the solve's computation (here zero: it ignores b after one step)."""
    fe, fj = _linear_program(lax, enp, "transpose"), _linear_program(jlax, jnp, "transpose")
    h_e = ember.hessian(lambda b: enp.sum(fe(GEN, b) ** 3))(B)
    h_j = jax.hessian(lambda b: jnp.sum(fj(GEN, b) ** 3))(B)
    close(h_e, h_j, rtol=1e-4, atol=1e-5)
    wrong_e = lambda b: lax.custom_linear_solve(lambda x: 2.0 * x, b, lambda mv, r: lax.stop_gradient(r) * 0.5,  # noqa
                                                symmetric=True)
    wrong_j = lambda b: jlax.custom_linear_solve(lambda x: 2.0 * x, b, lambda mv, r: jlax.stop_gradient(r) * 0.5,  # noqa
                                                 symmetric=True)
    close(ember.grad(lambda b: enp.sum(wrong_e(b)))(B), jax.grad(lambda b: jnp.sum(wrong_j(b)))(B))
    close(ember.jvp(wrong_e, (B,), (B,)), jax.jvp(wrong_j, (B,), (B,)))


def test_custom_linear_solve_pytrees_aux_and_errors_as_jax():
    def prog(lib, np_):
        def f(b):
            matvec = lambda x: {"u": 3.0 * x["u"], "v": x["v"] * 2.0}  # noqa: E731
            solve = lambda mv, r: ({"u": r["u"] / 3.0, "v": r["v"] / 2.0}, np_.sum(r["u"]))  # noqa: E731
            return lib.custom_linear_solve(matvec, b, solve, symmetric=True, has_aux=True)
        return f
    b = {"u": B, "v": B[:2]}
    fe, fj = prog(lax, enp), prog(jlax, jnp)
    close(fe(b), fj(b))
    close(ember.jit(fe)(b), jax.jit(fj)(b))
    close(ember.grad(lambda b: enp.sum(fe(b)[0]["u"] * fe(b)[0]["v"][0]))(b),
          jax.grad(lambda b: jnp.sum(fj(b)[0]["u"] * fj(b)[0]["v"][0]))(b))
    close(ember.jvp(fe, (b,), (b,)), jax.jvp(fj, (b,), (b,)))
    no_transpose_e, no_transpose_j = _linear_program(lax, enp, "forward"), _linear_program(jlax, jnp, "forward")
    close(ember.jvp(no_transpose_e, (GEN, B), (GEN, B)), jax.jvp(no_transpose_j, (GEN, B), (GEN, B)), rtol=1e-4,
          atol=1e-5)
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        ember.grad(lambda b: enp.sum(no_transpose_e(GEN, b)))(B)
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        jax.grad(lambda b: jnp.sum(no_transpose_j(GEN, b)))(B)
    for lib in (lax, jlax):
        with pytest.raises(ValueError, match=r"matvec\(\) output shapes must match b"):
            lib.custom_linear_solve(lambda x: x[:2], B, lambda mv, r: r)
        with pytest.raises(TypeError, match=r"solve\(\) output pytree structure must match b"):
            lib.custom_linear_solve(lambda x: x, B, lambda mv, r: (r,))
        with pytest.raises(ValueError, match="too many values to unpack"):
            lib.custom_linear_solve(lambda x: x, B, lambda mv, r: r, has_aux=True)


def _newton(lib):
    def solve(f, x0):
        step = lambda _, x: x - f(x) / (jax.grad(f) if lib is jlax else ember.grad(f))(x)  # noqa: E731
        return lib.fori_loop(0, 20, step, x0)
    return solve


def _scalar_root(lib):
    def sqrt(c):
        return lib.custom_root(lambda x: x ** 2 - c, 1.0, _newton(lib), lambda g, y: y / g(1.0))
    return sqrt


def _vector_root(lib, np_):
    def root(a, c):
        """x with tanh(x) + a x = c, a (4, 4), by Newton's method on the Jacobian; the tangent solve a dense
        solve of the linearised f's Jacobian."""
        f = lambda x: np_.tanh(x) + a @ x - c  # noqa: E731
        jac = jax.jacfwd if lib is jlax else ember.jacfwd

        def solve(f, x0):
            return lib.fori_loop(0, 12, lambda _, x: x - np_.linalg.solve(jac(f)(x), f(x)), x0)
        return lib.custom_root(f, np_.zeros_like(c), solve, lambda g, y: np_.linalg.solve(jac(g)(y), y))
    return root


@pytest.mark.slow
def test_custom_root_scalar_newton_as_jax():
    fe, fj = _scalar_root(lax), _scalar_root(jlax)
    c = np.float32(2.0)
    np.testing.assert_allclose(np.asarray(fe(c)), np.asarray(fj(c)), rtol=1e-6)
    close(ember.jit(fe)(c), jax.jit(fj)(c).astype(np.float32))
    for te, tj in ((ember.grad(fe), jax.grad(fj)), (ember.grad(ember.grad(fe)), jax.grad(jax.grad(fj))),
                   (ember.jit(ember.grad(fe)), jax.jit(jax.grad(fj)))):
        close(te(c), tj(c))
    (pe, te), (pj, tj) = ember.jvp(fe, (c,), (np.float32(0.5),)), jax.jvp(fj, (c,), (np.float32(0.5),))
    np.testing.assert_allclose([np.asarray(pe), np.asarray(te)], [np.asarray(pj), np.asarray(tj)], rtol=1e-6)
    cs = np.array([2.0, 3.0, 9.0], np.float32)
    np.testing.assert_allclose(np.asarray(ember.vmap(fe)(cs)), np.asarray(jax.vmap(fj)(cs)), rtol=1e-6)
    close(ember.vmap(ember.grad(fe))(cs), jax.vmap(jax.grad(fj))(cs))


@pytest.mark.slow
def test_custom_root_vector_newton_as_jax():
    fe, fj = _vector_root(lax, enp), _vector_root(jlax, jnp)
    close(fe(GEN, B), fj(GEN, B), rtol=1e-5, atol=1e-5)
    loss_e = lambda a, c: enp.sum(fe(a, c) ** 2)  # noqa: E731
    loss_j = lambda a, c: jnp.sum(fj(a, c) ** 2)  # noqa: E731
    close(ember.jit(ember.grad(loss_e, (0, 1)))(GEN, B), jax.grad(loss_j, (0, 1))(GEN, B), rtol=1e-4, atol=1e-5)
    close(ember.jvp(fe, (GEN, B), (GEN, B)), jax.jvp(fj, (GEN, B), (GEN, B)), rtol=1e-4, atol=1e-5)
    cs = np.stack([B, -B])
    close(ember.vmap(fe, (None, 0))(GEN, cs), jax.vmap(fj, (None, 0))(GEN, cs), rtol=1e-5, atol=1e-5)


def test_custom_root_aux_and_errors_as_jax():
    def prog(lib, aux):
        def f(c):
            def solve(f, x):
                x = _newton(lib)(f, x)
                return x, (f(x) if aux == "residual" else 7)
            return lib.custom_root(lambda x: x ** 2 - c, 1.0, solve, lambda g, y: y / g(1.0), has_aux=True)
        return f
    c = np.float32(3.0)
    close(prog(lax, "residual")(c), prog(jlax, "residual")(c))
    close(ember.grad(lambda c: enp.sum(enp.stack(prog(lax, "residual")(c))))(c),
          jax.grad(lambda c: jnp.sum(jnp.stack(prog(jlax, "residual")(c))))(c))  # (the aux: no derivative)
    (_, ae), (_, aj) = prog(lax, "int")(c), prog(jlax, "int")(c)
    assert int(ae) == int(aj) == 7 and ae.dtype == aj.dtype == np.int32
    # (an integer aux under grad: JAX 0.10.2's rule gives it an int32 tangent and fails; ember's a float0 one)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda c: prog(lax, "int")(c)[0])(c)), 0.5 / np.sqrt(3.0),
                               rtol=1e-6)
    for lib in (lax, jlax):
        with pytest.raises(TypeError, match=r"f\(\) output pytree structure must match initial_guess"):
            lib.custom_root(lambda x: (x, x), 1.0, lambda f, x: x, lambda g, y: y)
        with pytest.raises(TypeError, match=r"solve\(\) output pytree structure must match initial_guess"):
            lib.custom_root(lambda x: x, 1.0, lambda f, x: [x], lambda g, y: y)
        with pytest.raises(ValueError, match="a pytree tuple with auxiliary output was expected"):
            lib.custom_root(lambda x: x, 1.0, lambda f, x: x, lambda g, y: y, has_aux=True)


# ---------------------------------------------------------------------------------------------------------------
# approx_max_k / approx_min_k: exact on the CPU, in JAX too
X = RNG.normal(size=(3, 7)).astype(np.float32)


def _same(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8) if g.dtype.kind == "f" else g,
                                      w.view(np.uint8) if w.dtype.kind == "f" else w)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["approx_max_k", "approx_min_k"])
def test_approx_k_values_indices_and_dimensions_as_jax(name):
    fe, fj = getattr(lax, name), getattr(jlax, name)
    for dim in (-1, 0, 1):
        _same(fe(X, 2, reduction_dimension=dim), fj(X, 2, reduction_dimension=dim))
        _same(ember.jit(lambda x: fe(x, 3, dim))(X), fj(X, 3, dim))
    ties = np.array([1.0, 2.0, 2.0, 1.0, 2.0, -0.0, 0.0, -0.0], np.float32)  # ties to the lower index; -0.0 == 0.0
    for k in (3, 8):
        _same(fe(ties, k), fj(ties, k))
    _same(fe(X.astype(np.float16), 2), fj(X.astype(np.float16), 2))
    _same(fe(X, 7, aggregate_to_topk=False), fj(X, 7, aggregate_to_topk=False))  # (a short row: all of it)
    _same(fe(X, 2, recall_target=0.5), fj(X, 2, recall_target=0.5))
    w = np.arange(14.0, dtype=np.float32).reshape(2, 7)
    close(ember.grad(lambda x: enp.sum(fe(x, 2, 0)[0] * w))(X), jax.grad(lambda x: jnp.sum(fj(x, 2, 0)[0] * w))(X))
    t = X[::-1] * 3.0
    close(ember.jvp(lambda x: fe(x, 2)[0], (X,), (t,)), jax.jvp(lambda x: fj(x, 2)[0], (X,), (t,)))
    _same(ember.vmap(lambda x: fe(x, 2, 0), 1)(X), jax.vmap(lambda x: fj(x, 2, 0), 1)(X))


def test_approx_k_quick_as_jax():
    for fe, fj in ((lax.approx_max_k, jlax.approx_max_k), (lax.approx_min_k, jlax.approx_min_k)):
        _same(fe(X, 2, 0), fj(X, 2, 0))
    w = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    close(ember.grad(lambda x: enp.sum(lax.approx_max_k(x, 2)[0] * w))(X),
          jax.grad(lambda x: jnp.sum(jlax.approx_max_k(x, 2)[0] * w))(X))


def test_approx_k_nans_follow_top_ks_order_and_errors_as_jax():
    """NaNs: JAX's CPU fallback compares with > (< for min), which orders no NaN; ember puts them where top_k's
    total order does (max: NaN first, -NaN last; min: mirrored), the other entries as JAX's."""
    y = np.array([1.0, np.nan, 3.0, 0.5], np.float32)
    v, i = lax.approx_max_k(y, 4)
    np.testing.assert_array_equal(np.asarray(i), [1, 2, 0, 3])
    v, i = lax.approx_min_k(y, 4)
    np.testing.assert_array_equal(np.asarray(i), [3, 0, 2, 1])
    assert np.isnan(np.asarray(v)[3])
    for bad, error in [((X, 0), "k must be positive, got 0"), ((X, 8), "k must be smaller than the size of "
                                                                        "reduction_dim 7, got 8"),
                       ((X.astype(np.int32), 2), "operand must be a floating type")]:
        for lib in (lax, jlax):
            with pytest.raises(ValueError, match=error):
                lib.approx_max_k(*bad)
    for lib in (lax, jlax):
        with pytest.raises(TypeError, match="approx_top_k operand must have >= 1 dimension"):
            lib.approx_min_k(np.float32(1.0), 1)
        with pytest.raises(IndexError):
            lib.approx_max_k(X, 2, reduction_dimension=2)
    with pytest.raises(NotImplementedError, match="aggregate_to_topk=False"):
        lax.approx_max_k(np.zeros((2, 200), np.float32), 3, aggregate_to_topk=False)
