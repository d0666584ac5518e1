"""The rest of jax.scipy.linalg's names in ember.scipy.linalg (issue #48): convolution_matrix, dft, eigh_tridiagonal,
fiedler_companion, hadamard, hessenberg, invhilbert, invpascal, pascal, qr_multiply, solve_sylvester, against scipy
(values, in float64) and JAX 0.10.2 (values, dtypes in ember's 32-bit default and in x64 mode, vmap, grad where
JAX's differentiates), eager and under ember.jit, with their errors for bad input."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jl
import numpy as np
import pytest
import scipy.linalg as sl

import ember
import ember.numpy as enp
import ember.scipy.linalg as el
from ember._core import dtypes as dt
from recorded import jax_result

# JAX's dtypes in ember's mode: 32-bit by default (the default dtypes below are ember's, 64-bit under EMBER_ENABLE_X64)
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

RNG = np.random.default_rng(48)


@pytest.fixture(autouse=True)
def _reseed():
    """Each test's inputs from a fresh generator, whichever tests run before it (the recorded JAX results are keyed
    by their inputs)."""
    global RNG
    RNG = np.random.default_rng(48)


def _cases(default, slow):
    """Parameters: the default run's, then the sweep's others marked slow (a real and a complex case stay in the
    default run where a test has both)."""
    return list(default) + [pytest.param(*case if isinstance(case, tuple) else (case,), marks=pytest.mark.slow)
                            for case in slow]


def _close(x, y, rtol=2e-5, atol=2e-5):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _x64():
    """ember and JAX both in 64-bit mode."""
    class Both:
        def __enter__(self):
            self.ember = ember.config.override(enable_x64=True)
            self.jax = jax.enable_x64(True)
            self.ember.__enter__()
            self.jax.__enter__()

        def __exit__(self, *exc):
            self.jax.__exit__(*exc)
            self.ember.__exit__(*exc)
    return Both()


NAMES = ["convolution_matrix", "dft", "eigh_tridiagonal", "fiedler_companion", "hadamard", "hessenberg", "invhilbert",
         "invpascal", "pascal", "qr_multiply", "solve_sylvester"]


def test_signatures_match_jax():
    """Each name's parameters: JAX's names, kinds and defaults, in JAX's order."""
    def parameters(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
    for name in NAMES:
        assert name in el.__all__
        assert parameters(getattr(el, name)) == parameters(getattr(jl, name)), name


# ---- the constant matrices: pascal, invpascal, invhilbert, hadamard, dft -------------------------------------------

KINDS = [None, "symmetric", "lower", "upper"]


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9])
def test_pascal_and_invpascal_match_scipy_and_jax(n):
    for kind in KINDS:
        expected = sl.pascal(n, kind or "symmetric").astype(np.float64)
        got = el.pascal(n, kind)
        assert got.dtype == np.float32 == jax_result(lambda: jl.pascal(n, kind)).dtype
        _close(got, expected, rtol=1e-7, atol=0)
        inverse = el.invpascal(n, kind)
        assert inverse.dtype == dt.default_float_dtype() == jax_result(lambda: jl.invpascal(n, kind)).dtype
        _close(inverse, sl.invpascal(n, kind or "symmetric").astype(np.float64), rtol=1e-7, atol=0)
        _close(inverse, jax_result(lambda: jl.invpascal(n, kind)), rtol=1e-4, atol=1e-4)
        if n:
            _close(np.asarray(got, np.float64) @ np.asarray(inverse, np.float64), np.eye(n), atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 10])
def test_invhilbert_matches_scipy_and_jax(n):
    got = el.invhilbert(n)
    theirs = jax_result(lambda: jl.invhilbert(n))
    assert got.dtype == theirs.dtype == dt.default_float_dtype()
    _close(got, sl.invhilbert(n), rtol=1e-6, atol=0)
    _close(got, theirs, rtol=2e-2, atol=0)  # (JAX's come from lgamma in float32)


def test_constant_matrices_in_x64_mode():
    with _x64():
        for n in (0, 3, 13):
            for kind in KINDS:
                assert el.pascal(n, kind).dtype == np.float32  # (as JAX's, whatever the mode)
                inverse = el.invpascal(n, kind)
                assert inverse.dtype == np.float64 == jax_result(lambda: jl.invpascal(n, kind)).dtype
                np.testing.assert_array_equal(inverse, sl.invpascal(n, kind or "symmetric"))  # (exact integers)
            _close(el.invhilbert(n), sl.invhilbert(n), rtol=1e-14, atol=0)
            assert el.invhilbert(n).dtype == jax_result(lambda: jl.invhilbert(n)).dtype == np.float64
        h = el.hadamard(8)
        assert h.dtype == np.int64 == jax_result(lambda: jl.hadamard(8)).dtype
        assert el.hadamard(8, dtype=np.float64).dtype == np.float64
        w = el.dft(7)
        assert w.dtype == np.complex128 == jax_result(lambda: jl.dft(7)).dtype
        _close(w, sl.dft(7), rtol=0, atol=1e-14)


def test_invhilbert_overflows_to_inf_as_the_dtype_does():
    n = 28 if dt.default_float_dtype() == np.float32 else 204
    big = np.asarray(el.invhilbert(n))
    assert np.isinf(big).any() and np.isfinite(big[0, 0])
    assert np.isfinite(np.asarray(el.invhilbert(n - 1))).all()
    _close(big[:4, :4], sl.invhilbert(n)[:4, :4], rtol=1e-6, atol=0)


@pytest.mark.parametrize("n", [1, 2, 4, 16])
def test_hadamard_matches_scipy_and_jax(n):
    got = el.hadamard(n)
    np.testing.assert_array_equal(got, sl.hadamard(n))
    assert got.dtype == dt.default_int_dtype() == jax_result(lambda: jl.hadamard(n)).dtype
    for dtype in (np.float32, np.int8, np.complex64):
        ours = el.hadamard(n, dtype=dtype)
        assert ours.dtype == jax_result(lambda: jl.hadamard(n, dtype=dtype)).dtype == dtype
        np.testing.assert_array_equal(ours, sl.hadamard(n, dtype=dtype))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 64])
def test_dft_matches_scipy_and_jax(n):
    for scale in (None, "sqrtn", "n"):
        got = el.dft(n, scale)
        theirs = jax_result(lambda: jl.dft(n, scale))
        assert got.dtype == theirs.dtype == dt.default_complex_dtype()
        _close(got, sl.dft(n, scale), rtol=0, atol=1e-6)
        _close(got, theirs, rtol=0, atol=1e-4)
    assert el.dft(3, dtype=np.complex64).dtype == np.complex64


def test_constant_matrices_under_jit():
    f = ember.jit(lambda x: (el.pascal(4) @ x, el.dft(4, "n") @ x.astype(np.complex64), el.hadamard(4) @ x,
                             el.invhilbert(4) @ x, el.invpascal(4, "lower") @ x))
    x = np.arange(4.0, dtype=np.float32)
    outs = f(x)
    _close(outs[0], sl.pascal(4) @ x)
    _close(outs[1], sl.dft(4, "n") @ x, atol=1e-5)
    _close(outs[2], sl.hadamard(4) @ x)
    _close(outs[3], sl.invhilbert(4) @ x, rtol=1e-5)
    _close(outs[4], sl.invpascal(4, "lower") @ x)


@pytest.mark.parametrize("call,error,match", [
    (lambda: el.pascal(3, kind="diagonal"), ValueError, "pascal: kind must be 'symmetric', 'lower' or 'upper'"),
    (lambda: el.invpascal(3, kind="full"), ValueError, "invpascal: kind must be"),
    (lambda: el.pascal(-1), ValueError, "pascal: n must be non-negative, got -1"),
    (lambda: el.invhilbert(-2), ValueError, "invhilbert: n must be non-negative"),
    (lambda: el.invpascal(2.5), TypeError, "invpascal: n must be an integer, got 2.5"),
    (lambda: el.invhilbert(3.0), TypeError, "invhilbert: n must be an integer"),
    (lambda: el.hadamard(6), ValueError, "hadamard: n must be a positive power of 2, got 6"),
    (lambda: el.hadamard(0), ValueError, "hadamard: n must be a positive power of 2, got 0"),
    (lambda: el.dft(4, scale="unitary"), ValueError, "dft: scale must be None, 'sqrtn' or 'n', got 'unitary'"),
    (lambda: el.dft(4, dtype=np.float32), ValueError, "dft: dtype must be a complex floating-point dtype"),
])
def test_constant_matrix_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_constant_matrix_errors_match_jax_and_scipy():
    for module, kwargs in ((jl, {}), (sl, {})):
        with pytest.raises(ValueError):
            module.pascal(3, kind="diagonal", **kwargs)
        with pytest.raises(ValueError):
            module.hadamard(6)
    with pytest.raises(ValueError):
        jl.dft(4, scale="unitary")
    with pytest.raises(ValueError):
        jl.dft(4, dtype=np.float32)
    with pytest.raises(ValueError):
        sl.pascal(-1)
    with pytest.raises(TypeError):
        sl.invpascal(2.5)


# ---- convolution_matrix, fiedler_companion -------------------------------------------------------------------------

@pytest.mark.parametrize("m,ns", _cases([(3, (5,))], [(3, (1, 2)), (1, (1, 2, 5)), (5, (1, 2, 5, 7))]))
def test_convolution_matrix_matches_scipy(m, ns):
    a = RNG.standard_normal(m).astype(np.float32)
    for n in ns:
        for mode in ("full", "same", "valid"):
            got = el.convolution_matrix(a, n, mode)
            _close(got, sl.convolution_matrix(a, n, mode), rtol=0, atol=0)
            v = RNG.standard_normal(n).astype(np.float32)
            _close(np.asarray(got) @ v, np.convolve(a, v, mode), atol=1e-5)


def test_convolution_matrix_batches_dtypes_grad_and_jit_as_jax():
    ints = np.array([-1, 4, -2])
    got = el.convolution_matrix(ints, 5, mode="same")
    theirs = jax_result(lambda: jl.convolution_matrix(ints, 5, mode="same"))
    assert got.dtype == theirs.dtype == dt.default_int_dtype()
    np.testing.assert_array_equal(got, theirs)
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    _close(el.convolution_matrix(a, 3, "valid"), jax_result(lambda: jl.convolution_matrix(a, 3, "valid")))
    _close(ember.jit(el.convolution_matrix, static_argnums=(1, 2))(a, 6, "same"),
           jax_result(lambda: jl.convolution_matrix(a, 6, "same")))
    weights = RNG.standard_normal((6, 6)).astype(np.float32)
    grad = ember.grad(lambda x: enp.sum(el.convolution_matrix(x, 4, "same") * weights[:4, :4]))(a[0, 0])
    _close(grad, jax_result(lambda: jax.grad(lambda x: jnp.sum(jl.convolution_matrix(x, 4, "same")
                                                                * weights[:4, :4]))(a[0, 0])))


@pytest.mark.parametrize("call,error,match", [
    (lambda: el.convolution_matrix([1.0, 2.0], 0), ValueError, "convolution_matrix: n must be a positive integer"),
    (lambda: el.convolution_matrix([1.0, 2.0], 2.5), TypeError, "convolution_matrix: n must be an integer"),
    (lambda: el.convolution_matrix(1.0, 3), ValueError, "convolution_matrix: a must be at least 1-dimensional"),
    (lambda: el.convolution_matrix(np.zeros((2, 0)), 3), ValueError,
     r"a must have at least 1 element along its last axis, got shape \(2, 0\)"),
    (lambda: el.convolution_matrix([1.0], 3, mode="circular"), ValueError,
     "convolution_matrix: mode must be 'full', 'same' or 'valid', got 'circular'"),
])
def test_convolution_matrix_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("coefficients", _cases([[2.0], [2.0, 3.0], [1.0, -16.0, 86.0, -176.0, 105.0, 3.0]],
                                                [[1.0, 2.0, 3.0], [1.0, -16.0, 86.0, -176.0, 105.0],
                                                 list(range(1, 10))]))
def test_fiedler_companion_matches_scipy(coefficients):
    got = el.fiedler_companion(coefficients)
    expected = sl.fiedler_companion(np.asarray(coefficients, np.float64))
    _close(got, expected.reshape(got.shape), rtol=1e-6)  # (scipy's 0 x 0 result has shape (0,); JAX's (0, 0))
    assert got.dtype == dt.default_float_dtype() and got.shape == (len(coefficients) - 1,) * 2
    if len(coefficients) > 2:  # (its eigenvalues are the roots)
        _close(np.sort_complex(np.linalg.eigvals(np.asarray(got, np.float64))),
               np.sort_complex(np.roots(coefficients)), rtol=1e-4, atol=1e-4)


def test_fiedler_companion_batches_grad_and_errors_as_jax():
    a = RNG.standard_normal((3, 6)).astype(np.float32)
    _close(el.fiedler_companion(a), jax_result(lambda: jl.fiedler_companion(a)))
    _close(ember.jit(el.fiedler_companion)(a), jax_result(lambda: jl.fiedler_companion(a)))
    assert el.fiedler_companion(np.ones((2, 1))).shape == (2, 0, 0)
    weights = RNG.standard_normal((5, 5)).astype(np.float32)
    grad = ember.grad(lambda x: enp.sum(el.fiedler_companion(x) * weights))(a[0])
    _close(grad, jax_result(lambda: jax.grad(lambda x: jnp.sum(jl.fiedler_companion(x) * weights))(a[0])), rtol=1e-4)
    with pytest.raises(ValueError):
        jl.fiedler_companion(np.zeros((2, 0)))
    with pytest.raises(ValueError, match=r"fiedler_companion: a must have at least one coefficient .* \(2, 0\)"):
        el.fiedler_companion(np.zeros((2, 0)))


# ---- hessenberg ----------------------------------------------------------------------------------------------------

def _matrix(*shape, complex_=False, dtype=np.float32):
    a = RNG.standard_normal(shape)
    if complex_:
        a = a + 1j * RNG.standard_normal(shape)
        dtype = np.complex64 if dtype == np.float32 else np.complex128
    return a.astype(dtype)


@pytest.mark.parametrize("n,complex_", _cases([(0, False), (1, True), (4, False), (4, True)],
                                              [(2, False), (2, True), (3, True), (7, False), (7, True)]))
def test_hessenberg_matches_jax_and_scipy(n, complex_):
    a = _matrix(n, n, complex_=complex_)
    h, q = el.hessenberg(a, calc_q=True)
    jh, jq = jax_result(lambda: jl.hessenberg(a, calc_q=True))
    assert h.dtype == q.dtype == jh.dtype
    _close(h, jh, atol=1e-5)
    _close(q, jq, atol=1e-5)
    _close(el.hessenberg(a), h)
    if not (complex_ and n == 2):  # (scipy returns a 2x2 matrix unchanged; LAPACK, and JAX, make H[1, 0] real)
        sh, sq = sl.hessenberg(a, calc_q=True)
        _close(h, sh, atol=1e-5)
        _close(q, sq, atol=1e-5)
    h, q = np.asarray(h), np.asarray(q)
    assert np.all(np.tril(h, -2) == 0)
    _close(q @ h @ q.conj().T, a, atol=1e-5)
    _close(q.conj().T @ q, np.eye(n), atol=1e-5)


def test_hessenberg_batches_vmaps_and_jits():
    a = _matrix(2, 3, 5, 5)
    expected = jax_result(lambda: jl.hessenberg(a, calc_q=True))
    _close(ember.vmap(el.hessenberg)(a[0]), expected[0][0], atol=1e-5)
    _close(ember.jit(el.hessenberg, static_argnames="calc_q")(a, calc_q=True)[0], expected[0], atol=1e-5)


def test_hessenberg_differentiates():
    """JAX's hessenberg (LAPACK's gehrd) has no derivative; ember's (Householder steps in ember.numpy) does: checked
    against central differences in float64, in two directions."""
    with _x64():
        a = _matrix(4, 4, dtype=np.float64)
        weights = RNG.standard_normal((2, 4, 4))

        def f(x):
            h, q = el.hessenberg(x, calc_q=True)
            return enp.sum(h * weights[0]) + enp.sum(q * weights[1])
        grad = np.asarray(ember.grad(f)(a))
        jf = ember.jit(f)
        for _ in range(2):
            direction = RNG.standard_normal((4, 4))
            numeric = (float(jf(a + 1e-6 * direction)) - float(jf(a - 1e-6 * direction))) / 2e-6
            np.testing.assert_allclose(np.sum(grad * direction), numeric, rtol=1e-6, atol=1e-7)


def test_hessenberg_errors():
    with pytest.raises(ValueError, match=r"hessenberg: a must be a \(stack of\) square matrices, got shape \(2, 3\)"):
        el.hessenberg(np.ones((2, 3)))
    with pytest.raises(ValueError, match="hessenberg: a must have at least 2 dimensions"):
        el.hessenberg(np.ones(3))


# ---- qr_multiply ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,complex_", _cases([((6, 4), False), ((3, 5), True)],
                                                  [((4, 4), False), ((6, 4), True), ((3, 5), False)]))
def test_qr_multiply_matches_scipy_and_jax(shape, complex_):
    m, n = shape
    k = min(m, n)
    a = _matrix(m, n, complex_=complex_)
    for mode, c_shape in (("right", (3, m)), ("left", (k, 2)), ("right", (m,)), ("left", (k,))):
        c = _matrix(*c_shape, complex_=complex_)
        for conjugate in (False, True):
            got, r = el.qr_multiply(a, c, mode=mode, conjugate=conjugate)
            expected, expected_r = sl.qr_multiply(a, c, mode=mode, conjugate=conjugate)
            assert got.shape == expected.shape and got.dtype == a.dtype
            _close(got, expected, atol=1e-5)
            _close(r, expected_r, atol=1e-5)
        theirs = jax_result(lambda: jl.qr_multiply(a, c, mode=mode))
        _close(el.qr_multiply(a, c, mode=mode)[0], theirs[0], atol=1e-5)


def test_qr_multiply_promotes_batches_jits_and_differentiates():
    a = _matrix(2, 5, 3)
    c = np.arange(10.0).reshape(2, 5)
    got = el.qr_multiply(a, c)
    theirs = jax_result(lambda: jl.qr_multiply(a, c))
    _close(got[0], theirs[0], atol=1e-4)
    _close(got[1], theirs[1], atol=1e-5)
    ints = el.qr_multiply(np.array([[2, 1], [1, 3]]), np.array([1, 2]))
    assert ints[0].dtype == dt.default_float_dtype() == jax_result(lambda: jl.qr_multiply(np.array([[2, 1], [1, 3]]),
                                                                             np.array([1, 2]))[0]).dtype
    _close(ember.jit(el.qr_multiply, static_argnames="mode")(a, c[:, :3, None], mode="left")[0],
           jax_result(lambda: jl.qr_multiply(a, c[:, :3, None], mode="left")[0]), atol=1e-5)
    # JAX's goes through geqrf, which has no derivative; ember's is economic qr times c: checked against JAX's
    # gradient of that same product through jnp.linalg.qr
    weights = np.arange(3.0, dtype=np.float32)
    grad = ember.grad(lambda x: enp.sum(el.qr_multiply(x, c[0, :, None].T)[0] ** 2 * weights))(a[0])
    expected = jax_result(lambda: jax.grad(lambda x: jnp.sum((c[0, None, :] @ jnp.linalg.qr(x)[0]) ** 2 * weights))(
        a[0]))
    _close(grad, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call,error,match", [
    (lambda a: el.qr_multiply(a, np.ones((2, 4))), ValueError,
     r"qr_multiply: a has shape \(5, 3\), so c @ Q needs c with 5 columns \(mode='right'\), got c of shape \(2, 4\)"),
    (lambda a: el.qr_multiply(a, np.ones(4), mode="left"), ValueError,
     r"so Q @ c needs c with 3 rows \(mode='left'\), got c of shape \(4,\)"),
    (lambda a: el.qr_multiply(a, np.ones((2, 5)), mode="both"), ValueError,
     "qr_multiply: mode must be 'right' or 'left', got 'both'"),
    (lambda a: el.qr_multiply(a, np.ones((2, 5)), pivoting=True), NotImplementedError,
     r"qr_multiply: pivoting=True \(column-pivoted QR\) is not supported"),
    (lambda a: el.qr_multiply(a[0], np.ones(3)), ValueError, "qr_multiply: a must have at least 2 dimensions"),
])
def test_qr_multiply_errors(call, error, match):
    a = np.ones((5, 3), np.float32)
    with pytest.raises(error, match=match):
        call(a)


# ---- eigh_tridiagonal ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", _cases([1, 7], [2, 30]))
def test_eigh_tridiagonal_matches_scipy_and_jax(n):
    d, e = _matrix(n), _matrix(n - 1)
    w = el.eigh_tridiagonal(d, e, eigvals_only=True)
    assert w.dtype == np.float32
    _close(w, sl.eigh_tridiagonal(d.astype(np.float64), e.astype(np.float64), eigvals_only=True), atol=1e-5)
    _close(w, jax_result(lambda: jl.eigh_tridiagonal(d, e, eigvals_only=True)), atol=1e-5)
    values, vectors = ember.jit(el.eigh_tridiagonal)(d, e)
    _close(values, w, rtol=0, atol=1e-6)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    vectors = np.asarray(vectors)
    _close(t @ vectors, vectors * np.asarray(values), atol=1e-5)
    _close(vectors.T @ vectors, np.eye(n), atol=1e-5)


@pytest.mark.slow  # (the default run: eigenvalues, eigenvectors and select='i' above and below, under jit)
def test_eigh_tridiagonal_select_complex_and_clusters():
    d, e = _matrix(8), _matrix(7)
    w, v = el.eigh_tridiagonal(d, e, select="i", select_range=(2, 5))
    _close(w, sl.eigh_tridiagonal(d, e, select="i", select_range=(2, 5), eigvals_only=True), atol=1e-5)
    assert v.shape == (8, 4)
    dc, ec = _matrix(6, complex_=True), _matrix(5, complex_=True)
    w, v = el.eigh_tridiagonal(dc, ec)
    assert w.dtype == np.float32 and v.dtype == np.complex64
    _close(w, jax_result(lambda: jl.eigh_tridiagonal(dc, ec, eigvals_only=True)), atol=1e-5)
    t = np.diag(dc.real) + np.diag(ec, 1) + np.diag(ec.conj(), -1)
    _close(t @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-5)
    # (a matrix with a double eigenvalue: the eigenvectors are still orthonormal)
    w, v = el.eigh_tridiagonal(np.array([1.0, 1.0, 3.0, 3.0], np.float32), np.array([0.0, 1e-9, 0.0], np.float32))
    _close(np.asarray(v).T @ np.asarray(v), np.eye(4), atol=1e-6)


@pytest.mark.slow  # (the default run: eigh_tridiagonal under jit, above)
def test_eigh_tridiagonal_jit_vmap_and_x64():
    d, e = _matrix(3, 6), _matrix(3, 5)
    expected = jax_result(lambda: jax.vmap(lambda d, e: jl.eigh_tridiagonal(d, e, eigvals_only=True))(d, e))
    _close(ember.vmap(lambda d, e: el.eigh_tridiagonal(d, e, eigvals_only=True))(d, e), expected, atol=1e-5)
    _close(ember.jit(lambda d, e: el.eigh_tridiagonal(d, e, select="i", select_range=(1, 2))[0])(d[0], e[0]),
           expected[0, 1:3], atol=1e-5)
    with _x64():
        d64, e64 = d[0].astype(np.float64), e[0].astype(np.float64)
        w = el.eigh_tridiagonal(d64, e64, eigvals_only=True)
        assert w.dtype == np.float64
        _close(w, sl.eigh_tridiagonal(d64, e64, eigvals_only=True), rtol=1e-13, atol=1e-13)
        _close(el.eigh_tridiagonal(d64, e64, eigvals_only=True, tol=1e-3), w, atol=1e-3)


@pytest.mark.parametrize("call,error,match", [
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.complex64)), TypeError,
     "eigh_tridiagonal: d and e must have the same dtype, got float32 and complex64"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.int32), np.ones(2, np.int32)), TypeError,
     "eigh_tridiagonal: d and e must be float32, float64, complex64 or complex128, got int32"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(3, np.float32)), ValueError,
     r"d must be a vector \(n,\) and e a vector \(n - 1,\), got shapes \(3,\) and \(3,\)"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="v"), NotImplementedError,
     "eigh_tridiagonal: select='v'"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="x"), ValueError,
     "select must be 'a', 'i' or 'v', got 'x'"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="i"), ValueError,
     "select='i' needs select_range"),
    (lambda: el.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="i", select_range=(2, 1)),
     ValueError, r"select_range must be indices 0 <= first <= last < 3, got \(2, 1\)"),
])
def test_eigh_tridiagonal_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- solve_sylvester -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,method", _cases([(4, 2, "schur")],  # (method 'eigen': the NaN test below)
                                               [(2, 3, "eigen"), (1, 1, "schur"), (1, 1, "eigen"), (3, 3, "schur"),
                                                (3, 3, "eigen"), (2, 5, "schur")]))
def test_solve_sylvester_matches_scipy(m, n, method):
    a, b, c = _matrix(m, m), _matrix(n, n), _matrix(m, n)
    a += 3 * np.eye(m, dtype=np.float32)  # (eigenvalue sums away from 0)
    b += 3 * np.eye(n, dtype=np.float32)
    x = el.solve_sylvester(a, b, c, method=method)
    assert x.dtype == np.float32
    expected = sl.solve_sylvester(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64))
    _close(x, expected, rtol=1e-4, atol=1e-4)


def test_solve_sylvester_complex_and_batched_as_jax():
    a, b, c = _matrix(2, 3, 3, complex_=True), _matrix(2, 2, complex_=True), _matrix(2, 3, 2, complex_=True)
    x = el.solve_sylvester(a, b, c)
    assert x.dtype == np.complex64
    x_np = np.asarray(x)
    _close(a @ x_np + x_np @ b, c, atol=1e-4)
    _close(x, jax_result(lambda: jl.solve_sylvester(a, b, c)), atol=1e-4)


@pytest.mark.slow  # (the default run: solve_sylvester eagerly, batched, above)
def test_solve_sylvester_jit_and_vmap_as_jax():
    real = _matrix(2, 3, 3), _matrix(2, 2, 2), _matrix(2, 3, 2)
    expected = jax_result(lambda: jl.solve_sylvester(*real))
    _close(ember.jit(el.solve_sylvester, static_argnames="method")(*real, method="eigen"), expected, atol=1e-3)
    _close(ember.vmap(el.solve_sylvester)(*real), expected, atol=1e-4)


def test_solve_sylvester_without_a_unique_solution_is_nan():
    a = np.diag([1.0, 2.0]).astype(np.float32)
    b = -a  # (eigenvalue sums 1 - 1 = 0: A X + X B = C has no unique solution)
    c = np.ones((2, 2), np.float32)
    for method in ("schur", "eigen"):
        assert np.isnan(np.asarray(el.solve_sylvester(a, b, c, method=method))).all()
    assert np.isnan(np.asarray(jax_result(lambda: jl.solve_sylvester(a, b, c)))).all()
    near = np.diag([-1.0 + 1e-3, -3.0]).astype(np.float32)  # (a smallest sum of 1e-3: refused below tol 1e-2)
    assert np.isfinite(np.asarray(el.solve_sylvester(a, near, c))).all()
    assert np.isnan(np.asarray(el.solve_sylvester(a, near, c, tol=1e-2))).all()
    assert np.isnan(np.asarray(jax_result(lambda: jl.solve_sylvester(a, near, c, tol=1e-2)))).all()


@pytest.mark.parametrize("call,error,match", [
    (lambda: el.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2))), ValueError,
     r"solve_sylvester: A must be \(..., m, m\), B \(..., n, n\) and C \(..., m, n\); got A \(2, 2\), B \(3, 3\), "
     r"C \(3, 2\)"),
    (lambda: el.solve_sylvester(np.eye(2), np.eye(2), np.ones(2)), ValueError,
     r"solve_sylvester: C must have at least 2 dimensions, got shape \(2,\)"),
    (lambda: el.solve_sylvester(np.eye(2), np.eye(2), np.ones((2, 2)), method="bartels"), ValueError,
     "solve_sylvester: method must be 'schur' or 'eigen', got 'bartels'"),
])
def test_solve_sylvester_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_solve_sylvester_is_not_differentiable_as_in_jax():
    a, b, c = np.eye(2, dtype=np.float32) * 2, np.eye(2, dtype=np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(NotImplementedError, match="schur"):
        ember.grad(lambda a: enp.sum(el.solve_sylvester(a, b, c)))(a)
    with pytest.raises(NotImplementedError):
        jax.grad(lambda a: jnp.sum(jl.solve_sylvester(a, b, c)))(a)
