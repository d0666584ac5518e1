"""ember.random's f, maxwell, double_sided_maxwell, weibull_min, rayleigh, wald, geometric, triangular, binomial and
multinomial against jax.random (JAX 0.10.2): the same keys give the same numbers bit for bit (eagerly, under jit,
under vmap, with typed and raw keys, in float32 and float64), with JAX's shapes, dtypes and errors.

Exactness: all bit-exact except f, which is built on chisquare (the gamma family: see tests/test_random.py) and is
checked to 2e-5 with most values exactly equal, and maxwell (and double_sided_maxwell), a norm whose three squares
XLA sums in an order of its choosing (another in jaxlib's program, by dtype and size), checked to two ulps of its
dtype with most values exactly equal (docs/random.md)."""
import jax
import ml_dtypes
import numpy as np
import pytest
from jax import random as jr

import ember
from ember import P
from ember import random as er
from ember.dtypes import TypePromotionError
from recorded import jax_result
from test_random import assert_exact

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

F32 = np.float32
P3 = np.array([0.1, 0.5, 0.9], F32)


def assert_same(name, ours, theirs, what=""):
    """assert_exact, but maxwell's norms to two ulps of their dtype (the order of a sum of three squares)."""
    if "maxwell" not in name:
        return assert_exact(ours, theirs, what or name)
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    eps = float(ml_dtypes.finfo(ours.dtype).eps)
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=2 * eps, atol=0,
                               err_msg=what or name)
    assert (ours == theirs).mean() >= 0.5, what or name


def assert_nearly_exact(ours, theirs, what="", exact_fraction=0.8, rtol=2e-5):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-30, err_msg=what)
    assert (ours == theirs).mean() >= exact_fraction, what


# ---------------------------------------------------------------------------------------------------------------
# bit for bit: (name, call); each call takes (module, key)
CASES = {
    "maxwell": lambda r, k: r.maxwell(k, (100,)),
    "maxwell_2d_f16": lambda r, k: r.maxwell(k, (4, 6), "float16"),
    "maxwell_bf16": lambda r, k: r.maxwell(k, (50,), ml_dtypes.bfloat16),
    "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, 1.0, 2.0, (50,)),
    "double_sided_maxwell_arrays": lambda r, k: r.double_sided_maxwell(k, P3, F32(2.0), (5,)),  # shape (5, 3)
    "double_sided_maxwell_no_shape": lambda r, k: r.double_sided_maxwell(k, P3, 2.0),  # shape (3, 3), as JAX's
    "weibull_min": lambda r, k: r.weibull_min(k, 2.0, 1.5, (100,)),
    "weibull_min_arrays": lambda r, k: r.weibull_min(k, P3, np.array([0.5, 1.0, 3.0], F32), (20, 3)),
    "weibull_min_beyond_shape": lambda r, k: r.weibull_min(k, P3, 2.0),  # shape () broadcast up to (3,)
    "rayleigh": lambda r, k: r.rayleigh(k, 2.0, (100,)),
    "rayleigh_array": lambda r, k: r.rayleigh(k, P3, (20, 3)),
    "rayleigh_bf16": lambda r, k: r.rayleigh(k, 2.0, (30,), ml_dtypes.bfloat16),
    "wald": lambda r, k: r.wald(k, 1.5, (100,)),
    "wald_array": lambda r, k: r.wald(k, P3, (20, 3)),
    "wald_f16": lambda r, k: r.wald(k, 1.0, (30,), "float16"),
    "geometric": lambda r, k: r.geometric(k, 0.3, (100,)),
    "geometric_array": lambda r, k: r.geometric(k, P3, (20, 3)),
    "geometric_int8": lambda r, k: r.geometric(k, 0.05, (50,), "int8"),
    "geometric_edges": lambda r, k: r.geometric(k, np.array([0.0, 1.0, 1e-30, 0.999999, 0.5], F32)),
    "triangular": lambda r, k: r.triangular(k, -1.0, 0.5, 2.0, (100,)),
    "triangular_arrays": lambda r, k: r.triangular(k, np.array([-1.0, 0.0, 1.0], F32), P3 + 1, F32(3.0), (20, 3)),
    "binomial_inversion": lambda r, k: r.binomial(k, 5, 0.3, (100,)),
    "binomial_btrs": lambda r, k: r.binomial(k, 100, 0.3, (100,)),
    "binomial_p_above_half": lambda r, k: r.binomial(k, 100, 0.8, (100,)),
    "binomial_edges": lambda r, k: r.binomial(  # zero, both regimes, fractional n, nan/negative/inf n, nan p
        k, np.array([0.0, 3.0, 20.0, 1000.0, 1e6, -1.0, np.nan, np.inf, 50.5, 7.0, 1e7], F32),
        np.array([0.2, 0.7, 0.5, 0.01, 0.4, 0.5, 0.5, 0.3, 0.6, np.nan, 0.45], F32)),
    "binomial_int_n_f16": lambda r, k: r.binomial(k, np.array([10, 40, 400], np.int32), np.float16(0.4), None,
                                                  "float16"),
    "multinomial": lambda r, k: r.multinomial(k, 20, np.array([0.2, 0.3, 0.5], F32)),
    "multinomial_batched": lambda r, k: r.multinomial(k, np.array([10.0, 1000.0], F32),
                                                      np.array([0.1, 0.2, 0.3, 0.4], F32), shape=(5, 2, 4)),
    "multinomial_unnormalised_unrolled": lambda r, k: r.multinomial(
        k, 37, np.array([[1.0, 2.0, 0.0, 3.0], [0.0, 0.0, 5.0, 1.0]], F32), unroll=2),
    "multinomial_int32": lambda r, k: r.multinomial(k, 10, np.array([0.5, 0.5], F32), dtype="int32"),
}
# variants compared with JAX in the slow tier only (every sampler keeps its plain form in the default run)
SLOW_VARIANTS = {"maxwell_bf16", "double_sided_maxwell", "double_sided_maxwell_no_shape", "weibull_min",
                 "weibull_min_beyond_shape", "rayleigh", "rayleigh_bf16", "wald", "wald_f16", "geometric",
                 "geometric_int8", "triangular", "binomial_inversion", "binomial_btrs", "binomial_p_above_half",
                 "binomial_int_n_f16", "multinomial", "multinomial_int32", "multinomial_unnormalised_unrolled"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow if n in SLOW_VARIANTS else ())
                                  for n in sorted(CASES)])
@pytest.mark.parametrize("seed", [0, pytest.param(1701, marks=pytest.mark.slow)])
def test_sampler_matches_jax_bit_for_bit(name, seed):
    fn = CASES[name]
    assert_same(name, fn(er, er.key(seed)), jax_result(lambda: fn(jr, jr.key(seed))))


@pytest.mark.parametrize("name", ["maxwell"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ["wald_array", "binomial_edges", "double_sided_maxwell_arrays",
                                                      "weibull_min_arrays",
                                                      "rayleigh_array", "geometric_array", "triangular_arrays",
                                                      "multinomial_batched"]])
def test_sampler_matches_jax_under_jit_and_with_raw_keys(name):
    fn = CASES[name]
    expected = jax_result(lambda: jax.jit(lambda k: fn(jr, k))(jr.key(3)))
    assert_same(name, ember.jit(lambda k: fn(er, k))(er.key(3)), expected, f"jit {name}")
    assert_same(name, fn(er, er.PRNGKey(3)), jax_result(lambda: fn(jr, jr.PRNGKey(3))), f"raw key {name}")


@pytest.mark.parametrize("name", ["geometric_array", "triangular_arrays"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ["binomial_edges", "maxwell", "double_sided_maxwell_arrays",
                                                      "weibull_min_arrays", "rayleigh_array", "wald_array",
                                                      "multinomial_batched"]])
def test_sampler_matches_jax_under_vmap(name):
    # ember's vmap stages the whole function (Python-float parameters become constants XLA may fold): the
    # like-for-like oracle is jax.jit(jax.vmap(...)), as in tests/test_random.py
    fn = CASES[name]
    expected = jax_result(lambda: jax.jit(jax.vmap(lambda k: fn(jr, k)))(jr.split(jr.key(11), 4)))
    assert_same(name, ember.vmap(lambda k: fn(er, k))(er.split(er.key(11), 4)), expected, f"vmap {name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["geometric_array", "binomial_edges", "maxwell", "multinomial_batched"])
def test_sampler_matches_jax_under_jit_of_vmap_with_raw_keys(name):
    fn = CASES[name]
    raw = jax_result(lambda: jax.jit(jax.vmap(lambda k: fn(jr, k)))(jr.split(jr.PRNGKey(11), 4)))
    assert_same(name, ember.jit(ember.vmap(lambda k: fn(er, k)))(er.split(er.PRNGKey(11), 4)), raw,
                f"raw vmap {name}")


X64_CASES = {
    "f": lambda r, k: r.f(k, 3.0, 5.0, (60,)),
    "maxwell": lambda r, k: r.maxwell(k, (60,)),
    "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, 1.0, 2.0, (60,)),
    "weibull_min": lambda r, k: r.weibull_min(k, 2.0, 1.5, (60,)),
    "rayleigh": lambda r, k: r.rayleigh(k, np.linspace(0.5, 3.0, 60), (60,)),
    "wald": lambda r, k: r.wald(k, np.linspace(0.5, 3.0, 60)),
    "geometric": lambda r, k: r.geometric(k, 0.3, (60,)),  # int64, from float64 uniforms
    "geometric_f32_p": lambda r, k: r.geometric(k, np.float32(0.3), (60,), "int32"),
    "triangular": lambda r, k: r.triangular(k, -1.0, 0.5, 2.0, (60,), "float64"),
    "binomial": lambda r, k: r.binomial(k, np.arange(1, 121, dtype=np.float64) * 5, np.linspace(0.01, 0.99, 120)),
    "binomial_f32": lambda r, k: r.binomial(k, 100, np.float32(0.3), (60,), "float32"),
    "multinomial": lambda r, k: r.multinomial(k, 300, np.array([0.2, 0.3, 0.5])),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in ("maxwell", "wald", "geometric") else
                                               pytest.mark.slow) for n in sorted(X64_CASES)])
def test_float64_samplers_match_jax_x64(name):
    fn = X64_CASES[name]
    with jax.enable_x64(True), ember.config.override(enable_x64=True):
        ours = fn(er, er.key(4))
        theirs = jax_result(lambda: fn(jr, jr.key(4)))
        if name == "f":  # (gamma family)
            assert_nearly_exact(ours, theirs, name, rtol=1e-12)
        else:
            assert_same(name, ours, theirs)
        if name in ("wald", "binomial", "multinomial"):
            assert_exact(ember.jit(lambda k: fn(er, k))(er.key(5)), jax_result(lambda: jax.jit(
                lambda k: fn(jr, k))(jr.key(5))), f"jit {name}")


# ---------------------------------------------------------------------------------------------------------------
# f: the gamma family (its chi-squares), nearly bit for bit, eagerly and with the constants of a staged program
F_CASES = {
    "scalars": lambda r, k: r.f(k, 3.0, 5.0, (200,)),
    "arrays": lambda r, k: r.f(k, np.linspace(1, 9, 60).astype(F32), np.linspace(2, 5, 60).astype(F32)),
}
F_SLOW = {"arrays"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow if n in F_SLOW else ())
                                  for n in sorted(F_CASES)])
def test_f_matches_jax_nearly_bit_for_bit(name):
    fn = F_CASES[name]
    assert_nearly_exact(fn(er, er.key(2)), jax_result(lambda: fn(jr, jr.key(2))), name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(F_CASES))
def test_f_matches_jax_nearly_bit_for_bit_under_jit(name):
    fn = F_CASES[name]
    # (constants of a jitted program: each XLA folds them its own way; within rounding)
    assert_nearly_exact(ember.jit(lambda k: fn(er, k))(er.key(2)),
                        jax_result(lambda: jax.jit(lambda k: fn(jr, k))(jr.key(2))), f"jit {name}", 0.3)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(F_CASES))
def test_f_matches_jax_nearly_bit_for_bit_under_vmap(name):
    fn = F_CASES[name]
    keys, jkeys = er.split(er.key(6), 3), jr.split(jr.key(6), 3)
    assert_nearly_exact(ember.vmap(lambda k: fn(er, k))(keys),
                        jax_result(lambda: jax.jit(jax.vmap(lambda k: fn(jr, k)))(jkeys)), f"vmap {name}", 0.3)


@pytest.mark.slow
def test_f_broadcasts_its_degrees_of_freedom():
    # (JAX's f refuses dfnum of shape (3,) with shape (4, 3): it divides with lax.div; ember broadcasts)
    dfnum = np.array([2.0, 5.0, 10.0], F32)
    x = np.asarray(er.f(er.key(1), dfnum, 4.0, (4, 3)))
    assert x.shape == (4, 3) and x.dtype == np.float32 and (x > 0).all()
    full = np.asarray(er.f(er.key(1), np.broadcast_to(dfnum, (4, 3)), np.full((4, 3), 4.0, F32)))
    np.testing.assert_allclose(x, full, rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# maxwell's norm: jaxlib's XLA sums the three squares in an order that depends on the dtype and on the size of the
# whole (batched) array (another from 4096 elements on); ember's is the plain norm, within two ulps of it
@pytest.mark.parametrize("dtype,shape", [("float32", (1365,)), ("float32", (3, 700)),
                                         pytest.param("float64", (1366,), marks=pytest.mark.slow),
                                         pytest.param("float16", (2000,), marks=pytest.mark.slow),
                                         pytest.param(ml_dtypes.bfloat16, (3000,), marks=pytest.mark.slow)])
def test_maxwell_is_jax_s_to_rounding_on_both_sides_of_4096_elements(dtype, shape):
    with jax.enable_x64(dtype == "float64"), ember.config.override(enable_x64=dtype == "float64"):
        assert_same("maxwell", er.maxwell(er.key(0), shape, dtype),
                    jax_result(lambda: jr.maxwell(jr.key(0), shape, dtype)))


def test_maxwell_under_vmap():
    keys, jkeys = er.split(er.key(9), 4), jr.split(jr.key(9), 4)
    expected = jax_result(lambda: jax.jit(jax.vmap(lambda k: jr.maxwell(k, (500,))))(jkeys))
    assert_same("maxwell", ember.vmap(lambda k: er.maxwell(k, (500,)))(keys), expected, "vmap maxwell")


# ---------------------------------------------------------------------------------------------------------------
# binomial and multinomial over their parameter ranges (both of binomial's algorithms, p near 0 and 1)
def _binomial_params(rng, size, dtype):
    n = np.floor(10 ** rng.uniform(0, 6, size)).astype(dtype)
    p = rng.uniform(0, 1, size).astype(dtype)
    p[:size // 20] = rng.uniform(0, 1e-3, size // 20)
    p[size // 20:size // 10] = 1 - rng.uniform(0, 1e-3, size // 20)
    return n, p


@pytest.mark.slow
def test_binomial_over_n_and_p_matches_jax():
    n, p = _binomial_params(np.random.RandomState(0), 1000, F32)
    assert_exact(er.binomial(er.key(3), n, p), jax_result(lambda: jr.binomial(jr.key(3), n, p)), "binomial sweep")


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_binomial_and_multinomial_sweeps_match_jax(x64):
    rng = np.random.RandomState(1)
    dtype = np.float64 if x64 else F32
    with jax.enable_x64(x64), ember.config.override(enable_x64=x64):
        for seed in range(4):
            n, p = _binomial_params(rng, 2000, dtype)
            assert_exact(er.binomial(er.key(seed), n, p), jr.binomial(jr.key(seed), n, p), f"binomial {seed}")
            p = rng.dirichlet(np.ones(rng.randint(2, 12)) * 0.5, size=40).astype(dtype)
            n = np.floor(10 ** rng.uniform(0, 5, 40)).astype(dtype)
            assert_exact(er.multinomial(er.key(seed), n, p), jr.multinomial(jr.key(seed), n, p), f"multinomial {seed}")


@pytest.mark.slow
def test_binomial_and_multinomial_distributions():
    n, p = 50.0, 0.3
    x = np.asarray(er.binomial(er.key(0), n, p, (20000,)))
    assert (x == np.floor(x)).all() and x.min() >= 0 and x.max() <= n
    assert abs(x.mean() - n * p) < 5 * np.sqrt(n * p * (1 - p) / x.size)
    assert abs(x.var() - n * p * (1 - p)) < 0.1 * n * p * (1 - p)
    probs = np.array([0.1, 0.2, 0.3, 0.4], F32)
    counts = np.asarray(er.multinomial(er.key(1), 30, probs, shape=(5000, 4)))
    assert counts.shape == (5000, 4) and counts.dtype == np.float32
    np.testing.assert_array_equal(counts.sum(-1), 30)
    np.testing.assert_allclose(counts.mean(0), 30 * probs, rtol=0.03)


# ---------------------------------------------------------------------------------------------------------------
# shapes, dtypes and defaults, as JAX's
def test_shapes_and_dtypes_as_jax():
    key, jkey = er.key(0), jr.key(0)
    calls = [
        lambda r, k: r.f(k, np.ones(3, F32), 2),
        lambda r, k: r.maxwell(k),
        lambda r, k: r.double_sided_maxwell(k, np.zeros(2, F32), 1.0, (4, 2)),
        lambda r, k: r.weibull_min(k, np.ones((2, 1), F32), np.ones(3, F32)),
        lambda r, k: r.rayleigh(k, 2),
        lambda r, k: r.wald(k, np.ones(3, np.int32)),
        lambda r, k: r.geometric(k, 1, (2,)),
        lambda r, k: r.geometric(k, np.float16(0.5), (2,), "uint8"),
        lambda r, k: r.triangular(k, 0, 1, 2),
        lambda r, k: r.binomial(k, 10, 1, (2,)),
        lambda r, k: r.binomial(k, np.ones((3, 1), F32), np.ones(2, F32) / 2),
        lambda r, k: r.multinomial(k, 10, np.ones(3, np.float16) / 3),
        lambda r, k: r.multinomial(k, np.ones(2) * 5, np.ones(3, F32) / 3, shape=(2, 3), dtype=bool),
    ]
    for x64 in (False, True):  # (by abstract evaluation: nothing is compiled)
        with jax.enable_x64(x64), ember.config.override(enable_x64=x64):
            for i, call in enumerate(calls):
                ours = ember.eval_shape(lambda k: call(er, k), key)
                theirs = jax.eval_shape(lambda k: call(jr, k), jkey)
                assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype), (x64, i, ours, theirs)


def test_new_samplers_are_exported_with_jax_signatures():
    import inspect
    for name in ("f", "maxwell", "double_sided_maxwell", "weibull_min", "rayleigh", "wald", "geometric",
                 "triangular", "binomial", "multinomial"):
        assert name in er.__all__
        ours, theirs = inspect.signature(getattr(er, name)), inspect.signature(getattr(jr, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name


def test_out_sharding():
    mesh = ember.make_mesh((2,), ("X",))
    with ember.sharding.set_mesh(mesh):
        for name, call in [("rayleigh", lambda **kw: er.rayleigh(er.key(0), 2.0, (8,), **kw)),
                           ("geometric", lambda **kw: er.geometric(er.key(0), 0.2, (8,), **kw))]:
            x = call(out_sharding=P("X"))
            assert "8@X" in str(ember.typeof(x)), (name, ember.typeof(x))
            np.testing.assert_array_equal(np.asarray(x), np.asarray(call()))


def test_gradients_of_reparameterised_samples_match_jax():
    for name, fn in [("double_sided_maxwell", lambda r, k, s: r.double_sided_maxwell(k, 0.5, s, (5,)).sum()),
                     ("weibull_min", lambda r, k, s: r.weibull_min(k, 2.0, s, (5,)).sum())]:
        ours = ember.grad(lambda s: fn(er, er.key(1), s))(F32(1.5))
        theirs = jax_result(lambda: jax.grad(lambda s: fn(jr, jr.key(1), s))(F32(1.5)))
        np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-5, err_msg=name)


# ---------------------------------------------------------------------------------------------------------------
# errors (JAX's types)
def test_errors():
    key = er.key(0)
    with pytest.raises(ValueError, match=r"ember.random.f: dtype must be a float dtype, got int32"):
        er.f(key, 2.0, 3.0, (2,), "int32")
    with pytest.raises(ValueError, match=r"f: parameter shapes must broadcast to the shape argument \(2,\), got "
                                         r"dfnum \(3,\)"):
        er.f(key, np.ones(3, F32), 3.0, (2,))
    with pytest.raises(TypePromotionError, match="f: cannot safely cast dfnum of dtype complex64 to float32"):
        er.f(key, np.complex64(1j), 3.0, (2,), "float32")
    with jax.enable_x64(True), ember.config.override(enable_x64=True):
        for call in (lambda: er.rayleigh(key, np.ones(2), (2,), "float32"),
                     lambda: er.wald(key, np.ones(2), (2,), "float16"),
                     lambda: er.triangular(key, 0.0, np.float64(0.5), 1.0, (2,), "float32")):
            with pytest.raises(TypePromotionError, match="cannot safely cast"):
                call()
    with pytest.raises(ValueError, match=r"ember.random.maxwell accepts a single key"):
        er.maxwell(er.split(key, 3))
    with pytest.raises(TypeError, match=r"ember.random.wald: key must be a PRNG key"):
        er.wald(np.zeros(2, F32), 1.0)
    for call in (lambda: er.maxwell(key, (2,), "int32"), lambda: er.double_sided_maxwell(key, 0.0, 1.0, (2,), "int32"),
                 lambda: er.weibull_min(key, 1.0, 1.0, (2,), "int32"), lambda: er.rayleigh(key, 1.0, (2,), "int32"),
                 lambda: er.wald(key, 1.0, (2,), "int32"), lambda: er.triangular(key, 0.0, 0.5, 1.0, (2,), "int32"),
                 lambda: er.binomial(key, 10, 0.5, (2,), "int32")):
        with pytest.raises(ValueError, match="dtype must be a float dtype, got int32"):
            call()
    with pytest.raises(ValueError, match="geometric: dtype must be an integer dtype, got float32"):
        er.geometric(key, 0.5, (2,), "float32")
    with pytest.raises(ValueError, match=r"double_sided_maxwell: parameter shapes \(2,\), \(3,\) do not broadcast"):
        er.double_sided_maxwell(key, np.zeros(2), np.ones(3), (2,))
    with pytest.raises(TypeError, match=r"weibull_min: shape \(2,\), scale's shape \(3,\) .* do not broadcast"):
        er.weibull_min(key, np.ones(3, F32), 1.0, (2,))
    for call, arg in ((lambda: er.geometric(key, [0.5, 0.2]), "p"), (lambda: er.binomial(key, [10, 3], 0.5), "n"),
                      (lambda: er.multinomial(key, 10, [0.5, 0.5]), "p")):
        with pytest.raises(TypeError, match=f"{arg} must be an array or a scalar, got list"):
            call()
    with pytest.raises(ValueError, match=r"binomial: parameter shapes \(3,\), \(2,\) do not broadcast together"):
        er.binomial(key, np.ones(3), np.ones(2) / 2)
    with pytest.raises(ValueError, match=r"triangular: parameter shapes must broadcast to the shape argument"):
        er.triangular(key, 0.0, np.ones(3) / 2, 1.0, (2,))
    with pytest.raises(ValueError, match=r"multinomial: n of shape \(3,\) does not broadcast to \(2,\)"):
        er.multinomial(key, np.ones(3) * 10, np.ones((2, 2), F32) / 2)
    with pytest.raises(ValueError, match=r"multinomial: p of shape \(3,\) does not broadcast to \(2, 4\)"):
        er.multinomial(key, 10, np.ones(3, F32) / 3, shape=(2, 4))
    with pytest.raises(ValueError, match="multinomial: p must have at least one dimension"):
        er.multinomial(key, 10, F32(0.5))
    with pytest.raises(TypeError, match="takes 3 positional arguments"):
        er.multinomial(key, 10, np.ones(3, F32) / 3, (3,))
