"""ember.scipy.stats against scipy.stats (float64 oracle: float32 tolerances in the default mode, tight ones under
enable_x64) and its gradients against jax.scipy.stats's (64-bit); every distribution's functions run under jit and
vmap (one program per distribution over a whole grid), a few eagerly; mode, rankdata, sem and gaussian_kde."""
import functools
import inspect

import jax
import jax.scipy.stats as jst
import numpy as np
import pytest
import scipy.stats as ss

import ember
import ember.scipy.stats as es
from ember._core.dtypes import x64_enabled
from recorded import jax_result

CONT = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
X = np.linspace(-3, 7, 21)  # steps of 1/2: every support boundary below is on the grid
X01 = np.linspace(-0.25, 1.25, 13)
ANGLES = np.linspace(-4, 8, 13)
K = np.arange(-2.0, 13.0)
Q = np.array([-0.1, 0.0, 1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 1.0, 1.1])

# name: (grid, parameter sets (after x; loc and scale where the function has them), functions,
#        argnums differentiated in the gradient check (0 is x or k), float32 rtol)
DISTS = {
    "norm": (X, [(0.0, 1.0), (0.5, 2.0)], CONT + ("ppf", "isf"), (0, 2), 2e-5),
    "t": (X, [(1.5, 0.0, 1.0), (4.0, 0.5, 2.0)], ("logpdf", "pdf"), (0, 1), 2e-5),
    "cauchy": (X, [(0.0, 1.0), (0.5, 2.0)], CONT + ("ppf", "isf"), (0, 2), 2e-5),
    "laplace": (X, [(0.0, 1.0), (0.5, 2.0)], ("logpdf", "pdf", "cdf"), (0, 2), 2e-5),
    "logistic": (X, [(0.0, 1.0), (0.5, 2.0)], ("logpdf", "pdf", "cdf", "sf", "ppf", "isf"), (0, 2), 2e-5),
    "expon": (X, [(0.0, 1.0), (1.0, 2.0)], CONT + ("ppf",), (0, 2), 2e-5),
    "gamma": (X, [(0.5, 0.0, 1.0), (2.5, 1.0, 2.0)], CONT, (0, 1), 1e-4),
    "chi2": (X, [(1.0, 0.0, 1.0), (3.0, 0.5, 2.0)], CONT, (0, 1), 1e-4),
    "beta": (X01, [(0.5, 0.8, 0.0, 1.0), (2.0, 3.0, 0.0, 1.0), (2.0, 3.0, -0.125, 1.25)], CONT, (0, 2), 1e-4),
    "uniform": (X, [(0.0, 1.0), (-1.0, 3.0)], ("logpdf", "pdf", "cdf", "ppf"), (0, 2), 2e-5),
    "pareto": (X, [(1.5, 0.0, 1.0), (3.0, 0.5, 2.0)], CONT + ("ppf",), (0, 1), 2e-5),
    "gennorm": (X, [(0.8,), (2.5,)], ("logpdf", "pdf", "cdf"), (0, 1), 1e-4),
    "gumbel_l": (X, [(0.0, 1.0), (0.5, 2.0)], CONT + ("ppf",), (0, 1), 2e-5),  # JAX's d/dscale fails (float0)
    "gumbel_r": (X, [(0.0, 1.0), (0.5, 2.0)], CONT + ("ppf",), (0, 1), 2e-5),
    "truncnorm": (X, [(-1.0, 2.0, 0.0, 1.0), (0.5, 3.0, 1.0, 2.0), (-np.inf, -0.5, 0.0, 1.0), (1.0, np.inf, 0.0, 1.0)],
                  CONT, (0, 2), 1e-4),
    "vonmises": (ANGLES, [(0.5,), (4.0,)], ("logpdf", "pdf"), (0, 1), 2e-5),
    "wrapcauchy": (ANGLES, [(0.3,), (0.8,)], ("logpdf", "pdf"), (0, 1), 2e-5),
    "poisson": (K, [(0.5, 0.0), (4.0, 1.0)], ("logpmf", "pmf", "cdf"), (1,), 1e-4),
    "bernoulli": (K, [(0.3,), (0.8,)], ("logpmf", "pmf", "cdf", "ppf"), (1,), 2e-5),
    "binom": (K, [(5.0, 0.3, 0.0), (10.0, 0.7, 1.0)], ("logpmf", "pmf"), (2,), 2e-5),
    "nbinom": (K, [(3.0, 0.4, 0.0), (1.5, 0.7, 1.0)], ("logpmf", "pmf"), (1, 2), 2e-5),
    "geom": (K, [(0.3, 0.0), (0.7, 1.0)], ("logpmf", "pmf"), (1,), 2e-5),
    "betabinom": (K, [(5.0, 2.0, 3.0, 0.0), (10.0, 0.5, 0.7, 1.0)], ("logpmf", "pmf"), (3,), 2e-5),
}
DISCRETE = ("poisson", "bernoulli", "binom", "nbinom", "geom", "betabinom")
KINKS = {"laplace": 0.0, "gennorm": 0.0}  # x where the first parameter set's log-density is not differentiable
# JAX's betaln is less accurate than ember's: at k = 0 its derivatives are off by up to 2e-6 (relative; ember's
# agree with the exact digamma differences, e.g. digamma(a + b) - digamma(a + b + n) in a)
GRAD_RTOL = {"betabinom": 1e-5}


def _grid(fn, grid):
    return Q if fn in ("ppf", "isf") else grid


def _scipy(name, fn, grid, params):
    with np.errstate(all="ignore"):
        out = np.stack([getattr(getattr(ss, name), fn)(_grid(fn, grid), *p) for p in params])
    if fn == "ppf" and name == "bernoulli":
        out[:, Q == 0] = 0.0  # scipy's discrete ppf(0) is the support's lower end - 1; JAX's (and ember's) 0
    return out


def _close(ours, expected, what, rtol, atol):
    """Equal NaN and infinite entries, the finite ones within tolerance."""
    ours, expected = np.asarray(ours, np.float64), np.asarray(expected, np.float64)
    assert ours.shape == expected.shape, (what, ours.shape, expected.shape)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(expected), err_msg=f"{what}: NaNs")
    np.testing.assert_array_equal(np.where(np.isinf(ours), ours, 0), np.where(np.isinf(expected), expected, 0),
                                  err_msg=f"{what}: infinities")
    finite = np.isfinite(expected)
    np.testing.assert_allclose(ours[finite], expected[finite], rtol=rtol, atol=atol, err_msg=what)


def _stacked(params):
    return tuple(np.array(column) for column in zip(*params))


@pytest.mark.parametrize("name", sorted(DISTS))
def test_distribution_matches_scipy_under_jit_and_vmap(name):
    """Every function over the grid (inside and outside the support) for each parameter set, vmapped over the
    parameter sets under one jit, at float32 (float32 results for float32 inputs)."""
    grid, params, fns, _, rtol = DISTS[name]
    module = getattr(es, name)
    grid32 = grid.astype(np.float32)
    q32 = Q.astype(np.float32)
    run = ember.jit(ember.vmap(lambda *p: tuple(getattr(module, fn)(q32 if fn in ("ppf", "isf") else grid32, *p)
                                                for fn in fns)))
    results = run(*(c.astype(np.float32) for c in _stacked(params)))
    for fn, ours in zip(fns, results):
        assert ours.dtype == np.float32, (name, fn, ours.dtype)
        atol = 1e-5 if fn.startswith("log") or fn in ("ppf", "isf") else 1e-6
        _close(ours, _scipy(name, fn, grid, params), f"{name}.{fn}", rtol, atol)


def _inside(name, grid, params, fn):
    """Where the log-density is finite and differentiable (not at a support boundary or a kink) on the grid."""
    ok = np.all(np.isfinite(_scipy(name, fn, grid, params)), axis=0)
    if name not in DISCRETE:
        ok &= np.all(np.isfinite(_scipy(name, fn, grid - 1e-3, params)) & np.isfinite(
            _scipy(name, fn, grid + 1e-3, params)), axis=0)
    return ok & (grid != KINKS.get(name, np.nan))


def _jax_gradient(name):
    fns, argnums, p0 = DISTS[name][2], DISTS[name][3], tuple(np.float64(v) for v in DISTS[name][1][0])
    return jax.vmap(jax.grad(getattr(getattr(jst, name), fns[0]), argnums=argnums),
                    in_axes=(0,) + (None,) * len(p0))(DISTS[name][0], *p0)


@functools.lru_cache(maxsize=None)
def _jax_gradients():
    """JAX's gradients of every distribution's log-density over its grid at its first parameter set, from one
    jax.jit (JAX's compile time is mostly per program: one program for all is several times faster)."""
    return jax_result(lambda: jax.jit(lambda: {name: _jax_gradient(name) for name in DISTS})())


# (the default run checks a continuous, a discrete, a bounded and a special-function-based family; -m slow all)
_X64_QUICK = {"norm", "gamma", "beta", "poisson", "truncnorm", "vonmises"}


@pytest.mark.parametrize("name", [n if n in _X64_QUICK else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(DISTS)])
def test_x64_values_and_gradients_match_scipy_and_jax(name):
    """Under enable_x64: the log-density over the grid within 1e-11 of scipy's, and its gradient in x and in a
    parameter (vmapped over the grid, first parameter set) as JAX's inside the support; zero in x where the
    log-density is -inf (no NaN leaking from masked branches)."""
    grid, params, fns, argnums, _ = DISTS[name]
    fn = fns[0]  # logpdf or logpmf
    ours_fn = getattr(getattr(es, name), fn)
    p0 = tuple(np.float64(v) for v in params[0])
    in_axes = (0,) + (None,) * len(p0)
    with ember.config.override(enable_x64=True):
        values, grads = ember.jit(lambda grid, params, p0: (
            ember.vmap(lambda *p: ours_fn(grid, *p))(*params),
            ember.vmap(ember.grad(ours_fn, argnums=argnums), in_axes=in_axes)(grid, *p0)))(grid, _stacked(params), p0)
    assert values.dtype == np.float64
    _close(values, _scipy(name, fn, grid, params), f"{name}.{fn} (x64)", 1e-11, 1e-12)
    inside = _inside(name, grid, params[:1], fn)
    for i, ours, expected in zip(argnums, grads, _jax_gradients()[name]):
        _close(np.asarray(ours)[inside], np.asarray(expected)[inside], f"d {name}.{fn} / d arg {i}",
               GRAD_RTOL.get(name, 1e-9), 1e-10)
    if name not in DISCRETE and argnums[0] == 0:
        outside = np.isneginf(_scipy(name, fn, grid, params[:1])[0])
        np.testing.assert_array_equal(np.asarray(grads[0])[outside], 0.0, err_msg=f"{name}: gradient outside")


def test_eager_calls_promotion_and_broadcasting():
    """Eager calls: Python scalars, lists and integers become the default float, float32 stays float32, parameters
    broadcast against x."""
    default = np.float64 if x64_enabled() else np.float32
    assert es.norm.logpdf(1).dtype == default
    assert es.poisson.logpmf([0, 1, 2], 3).dtype == default
    out = es.norm.cdf(np.float32([[0.0], [1.0]]), np.float32([0.0, 1.0, 2.0]), 2)
    assert out.shape == (2, 3) and out.dtype == np.float32
    _close(out, ss.norm.cdf([[0.0], [1.0]], [0.0, 1.0, 2.0], 2), "norm.cdf broadcast", 1e-6, 1e-7)
    _close(es.gamma.pdf(np.float32(2.0), 3), ss.gamma.pdf(2.0, 3), "gamma.pdf eager", 1e-6, 1e-7)
    _close(es.expon.logpdf([-1, 0, 1]), [-np.inf, 0.0, -1.0], "expon.logpdf list", 0, 0)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match=r"norm\.logpdf: argument 'loc'"):
        es.norm.logpdf(1.0, "a")
    with pytest.raises(TypeError, match=r"gamma\.cdf: argument 'x' must be real"):
        es.gamma.cdf(1j, 2.0)
    with pytest.raises(ValueError, match=r"beta\.logpdf: the shapes .* x\(2,\), a\(3,\)"):
        es.beta.logpdf(np.zeros(2), np.ones(3), 1.0)
    with pytest.raises(TypeError, match=r"t\.pdf"):
        es.t.pdf(1.0)
    with pytest.raises(ValueError, match=r"dirichlet\.logpdf: alpha must be one-dimensional"):
        es.dirichlet.logpdf(np.ones(3) / 3, np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"multinomial\.logpmf: x must be of integer type"):
        es.multinomial.logpmf(np.ones(3), 3, np.ones(3) / 3)
    with pytest.raises(ValueError, match=r"multivariate_normal\.logpdf: cov must have shape"):
        es.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(2))
    with pytest.raises(ValueError, match="rankdata: unknown method"):
        es.rankdata([1, 2], method="bogus")
    with pytest.raises(NotImplementedError, match="mode: nan_policy='omit'"):
        es.mode([1, 2], nan_policy="omit")


def test_multivariate_normal():
    """Against scipy: a full covariance (eagerly), a batch of covariances, a scalar mean, an isotropic scalar
    covariance (under jit); allow_singular (pseudo-inverse, -inf off the support) and gradients at x64."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    mean = rng.normal(size=3)
    x = rng.normal(size=(5, 3))
    expected = ss.multivariate_normal.logpdf(x, mean, cov)
    _close(es.multivariate_normal.logpdf(x, mean, cov), expected, "mvn.logpdf", 2e-5, 1e-5)
    batch = np.stack([cov, 2 * cov])
    ours = ember.jit(lambda x, mean, cov, batch: (
        es.multivariate_normal.pdf(x, mean, cov), es.multivariate_normal.logpdf(x[:2], mean, batch),
        es.multivariate_normal.logpdf(x[:, 0], mean[0], cov[0, 0]), es.multivariate_normal.logpdf(x, mean, 2.0)))(
        x, mean, cov, batch)
    _close(ours[0], np.exp(expected), "mvn.pdf", 2e-5, 1e-7)
    _close(ours[1], [ss.multivariate_normal.logpdf(x[i], mean, batch[i]) for i in range(2)], "mvn batch", 2e-5, 1e-5)
    _close(ours[2], ss.norm.logpdf(x[:, 0], mean[0], np.sqrt(cov[0, 0])), "mvn scalar", 2e-5, 1e-5)
    _close(ours[3], ss.multivariate_normal.logpdf(x, mean, 2.0 * np.eye(3)), "mvn isotropic", 2e-5, 1e-5)
    singular = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    on = np.array([[0.5, 0.5, 1.0], [-1.0, -1.0, 0.0], [1.0, 0.0, 0.0]])  # the last point is off the support
    with ember.config.override(enable_x64=True):
        ours = ember.jit(lambda x, mean, cov, on, singular: (
            es.multivariate_normal.logpdf(on, np.zeros(3), singular, allow_singular=True),
            es.multivariate_normal.logpdf(x, mean, cov),
            ember.grad(es.multivariate_normal.logpdf, argnums=(0, 1, 2))(x[0], mean, cov)))(x, mean, cov, on, singular)
    _close(ours[0], ss.multivariate_normal.logpdf(on, np.zeros(3), singular, allow_singular=True), "mvn singular",
           1e-10, 1e-12)
    _close(ours[1], expected, "mvn x64", 1e-12, 1e-12)
    theirs = jax_result(lambda: jax.jit(jax.grad(jst.multivariate_normal.logpdf, argnums=(0, 1, 2)))(x[0], mean, cov))
    for i in range(3):
        _close(ours[2][i], theirs[i], f"d mvn / d arg {i}", 1e-9, 1e-10)


def test_dirichlet_and_multinomial():
    """Against scipy (K or K - 1 components, a point off the simplex, a vmapped batch of counts); gradients as
    JAX's at x64."""
    alpha = np.array([0.5, 2.0, 3.0])
    x = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.6, 0.5, -0.1]]).T  # the last column is off the simplex
    counts = np.array([[1, 2, 2], [0, 0, 5], [1, 1, 1]])
    p = np.array([0.2, 0.3, 0.5])
    ours = ember.jit(lambda x, alpha, counts, p: (
        es.dirichlet.logpdf(x, alpha), es.dirichlet.pdf(x[:2, :2], alpha),
        ember.vmap(es.multinomial.logpmf, in_axes=(0, None, None))(counts, 5, p), es.multinomial.pmf(counts[0], 5, p)))(
        x.astype(np.float32), alpha.astype(np.float32), counts, p.astype(np.float32))
    expected = [ss.dirichlet.logpdf(x[:, 0], alpha), ss.dirichlet.logpdf(x[:, 1], alpha), -np.inf]
    _close(ours[0], expected, "dirichlet.logpdf", 2e-5, 1e-5)
    _close(ours[1], np.exp(expected[:2]), "dirichlet K-1", 2e-5, 1e-6)
    _close(ours[2], [ss.multinomial.logpmf(c, 5, p) for c in counts], "multinomial.logpmf", 2e-5, 1e-5)
    _close(ours[3], ss.multinomial.pmf(counts[0], 5, p), "multinomial.pmf", 2e-5, 1e-7)
    with ember.config.override(enable_x64=True):
        ours = ember.jit(lambda x, alpha, counts, p: (
            es.dirichlet.logpdf(x[:, :2], alpha), ember.grad(es.dirichlet.logpdf, argnums=(0, 1))(x[:, 0], alpha),
            ember.grad(es.multinomial.logpmf, argnums=2)(counts[0], 5, p)))(x, alpha, counts, p)
    _close(ours[0], expected[:2], "dirichlet x64", 1e-12, 1e-12)
    theirs = jax_result(lambda: jax.jit(lambda x, alpha, counts, p: (
        jax.grad(jst.dirichlet.logpdf, argnums=(0, 1))(x[:, 0], alpha),
        jax.grad(jst.multinomial.logpmf, argnums=2)(counts[0], 5, p)))(x, alpha, counts, p))
    _close(ours[1][0], theirs[0][0], "d dirichlet / dx", 1e-9, 1e-10)
    _close(ours[1][1], theirs[0][1], "d dirichlet / dalpha", 1e-9, 1e-10)
    _close(ours[2], theirs[1], "d multinomial / dp", 1e-12, 1e-12)


def test_poisson_entropy():
    """Against scipy on both sides of the switch to the asymptotic series (mu = 100); its gradient against scipy's
    central differences (not JAX's: JAX truncates its sums and series more coarsely, 5e-5 off at mu = 9.5, and its
    gradient is NaN from mu = 100)."""
    mu = np.array([0.0, 0.3, 2.0, 9.5, 10.5, 60.0, 99.0, 101.0, 500.0, 5000.0])
    ours = es.poisson.entropy(mu.astype(np.float32), np.zeros((2, 1), np.float32))
    assert ours.shape == (2, 10) and ours.dtype == np.float32
    _close(ours[0], ss.poisson.entropy(mu), "poisson.entropy", 2e-5, 1e-6)
    with ember.config.override(enable_x64=True):
        ours = ember.jit(lambda mu: (es.poisson.entropy(mu), ember.vmap(ember.grad(es.poisson.entropy))(mu[1:])))(mu)
    _close(ours[0], ss.poisson.entropy(mu), "poisson.entropy x64", 1e-9, 1e-12)
    step = 1e-4 * mu[1:]
    differences = (ss.poisson.entropy(mu[1:] + step) - ss.poisson.entropy(mu[1:] - step)) / (2 * step)
    _close(ours[1], differences, "d poisson.entropy / d mu", 1e-6, 1e-12)


def test_mode_rankdata_sem():
    """mode along each axis, rankdata's five methods (ties; all-NaN with a NaN), sem (omit too) against scipy,
    under jit."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, size=(5, 7)).astype(np.float32)
    ties = np.array([3.0, 1.0, 2.0, 2.0, 1.0, np.nan, 5.0], np.float32)
    methods = ("average", "min", "max", "dense", "ordinal")
    modes, ranks, nan_ranks, flat_ranks, kept, sems = ember.jit(lambda a, ties: (
        [es.mode(a, axis=axis) for axis in (0, 1, None)], [es.rankdata(a, m, axis=1) for m in methods],
        es.rankdata(ties), es.rankdata(ties[:5]), es.mode(a, axis=1, keepdims=True).mode,
        (es.sem(a), es.sem(a, axis=None, ddof=0), es.sem(ties, nan_policy="omit"))))(a, ties)
    for axis, ours in zip((0, 1, None), modes):
        expected = ss.mode(a, axis=axis)
        np.testing.assert_array_equal(ours.mode, expected.mode)
        np.testing.assert_array_equal(ours.count, expected.count)
    for method, ours in zip(methods, ranks):
        np.testing.assert_array_equal(ours, ss.rankdata(a, method, axis=1), err_msg=method)
    assert np.all(np.isnan(nan_ranks))
    np.testing.assert_array_equal(flat_ranks, ss.rankdata(ties[:5]))
    np.testing.assert_array_equal(kept, ss.mode(a, axis=1, keepdims=True).mode)
    _close(sems[0], ss.sem(a), "sem", 1e-6, 1e-7)
    _close(sems[1], ss.sem(a, axis=None, ddof=0), "sem None", 1e-6, 1e-7)
    _close(sems[2], ss.sem(ties, nan_policy="omit"), "sem omit", 1e-6, 1e-7)


@pytest.mark.slow  # (2.4 s)
def test_gaussian_kde_matches_scipy():
    """evaluate/pdf/logpdf and the integrals against scipy.stats.gaussian_kde (bandwidths, weights, 1-D), the
    estimates passing into one jit as pytrees; the gradient of logpdf against scipy's central differences;
    resample's shape, dtype and mean."""
    rng = np.random.default_rng(2)
    data = rng.normal(size=(2, 40))
    weights = rng.uniform(0.5, 1.5, size=40)
    points = rng.normal(size=(2, 9)) * 1.5
    variants = ({}, {"bw_method": "silverman", "weights": weights}, {"bw_method": 0.4})
    f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
    kdes = [es.gaussian_kde(f32(data), **{k: f32(v) if k == "weights" else v for k, v in kwargs.items()})
            for kwargs in variants]
    kdes += [es.gaussian_kde(f32(data[0])), es.gaussian_kde(f32(data + 0.3))]
    ours = ember.jit(lambda kdes, p: (
        [k.evaluate(p) for k in kdes[:3]], kdes[0].logpdf(p), kdes[3].pdf(p[0]),
        kdes[0].integrate_gaussian(np.float32([0.1, 0.2]), np.eye(2, dtype=np.float32)),
        kdes[0].integrate_kde(kdes[4]), kdes[3].integrate_box_1d(-0.5, 1.0),
        ember.grad(lambda q: kdes[0].logpdf(q)[0])(p[:, :1])))(kdes, f32(points))
    theirs = [ss.gaussian_kde(data, **kwargs) for kwargs in variants]
    for kwargs, value, kde in zip(variants, ours[0], theirs):
        _close(value, kde.evaluate(points), f"kde.evaluate {kwargs}", 2e-5, 1e-7)
    _close(ours[1], theirs[0].logpdf(points), "kde.logpdf", 2e-5, 1e-5)
    one = ss.gaussian_kde(data[0])
    _close(ours[2], one.pdf(points[0]), "kde 1-D pdf", 2e-5, 1e-7)
    _close(ours[3], theirs[0].integrate_gaussian([0.1, 0.2], np.eye(2)), "kde.integrate_gaussian", 2e-5, 1e-7)
    _close(ours[4], theirs[0].integrate_kde(ss.gaussian_kde(data + 0.3)), "kde.integrate_kde", 2e-5, 1e-7)
    _close(ours[5], one.integrate_box_1d(-0.5, 1.0), "kde.integrate_box_1d", 2e-5, 1e-7)
    step = 1e-5
    differences = [(theirs[0].logpdf(points[:, 0] + step * e) - theirs[0].logpdf(points[:, 0] - step * e))[0] /
                   (2 * step) for e in np.eye(2)]
    _close(ours[6][:, 0], differences, "kde gradient", 1e-3, 1e-4)
    sample = kdes[0].resample(ember.random.key(0), (2000,))
    assert sample.shape == (2, 2000) and sample.dtype == np.float32
    np.testing.assert_allclose(np.mean(np.asarray(sample), axis=1), data.mean(axis=1), atol=0.1)


def _signature(fn):
    return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values()]


def test_module_contents_and_signatures_match_jax():
    """The same submodules and top-level names as jax.scipy.stats, each submodule with the same functions, each
    function with JAX's parameter names, defaults and kinds."""
    public = lambda m: {n for n in dir(m) if not n.startswith("_")}  # noqa: E731
    assert public(es) == public(jst)
    for name in public(jst):
        ours, theirs = getattr(es, name), getattr(jst, name)
        if name in ("mode", "rankdata", "sem"):
            assert _signature(ours) == _signature(theirs), name
        elif name == "gaussian_kde":
            assert _signature(ours.__init__) == _signature(theirs.__init__)
            assert {"evaluate", "pdf", "logpdf", "resample", "integrate_gaussian", "integrate_box_1d", "integrate_kde",
                    "integrate_box", "set_bandwidth", "d", "n", "dataset", "weights", "covariance", "inv_cov",
                    "neff"} <= public(ours)
        else:
            assert public(ours) == public(theirs), name
            for fn in public(theirs):
                assert _signature(getattr(ours, fn)) == _signature(getattr(theirs, fn)), f"{name}.{fn}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DISTS))
def test_every_function_at_x64(name):
    """Every function of every distribution under enable_x64, at tight tolerances (the log-densities' tails too)."""
    grid, params, fns, _, _ = DISTS[name]
    module = getattr(es, name)
    wide = np.concatenate([grid, grid * 3 + (0.0 if name in DISCRETE else 0.25)])
    with ember.config.override(enable_x64=True):
        run = ember.jit(ember.vmap(lambda *p: tuple(getattr(module, fn)(Q if fn in ("ppf", "isf") else wide, *p)
                                                    for fn in fns)))
        results = run(*_stacked(params))
    for fn, ours in zip(fns, results):
        _close(ours, _scipy(name, fn, wide, params), f"{name}.{fn} (x64)", 1e-9, 1e-13)
