"""ember.nn's functions and initializers and ember.scipy.special against jax.nn, jax.nn.initializers and
jax.scipy.special: values and gradients (eagerly and under jit), initializers bit for bit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import nn as jnn
from jax import random as jr

import ember
import ember.numpy as enp
import ember.scipy.special as es
import jax.scipy.special as js
from ember import nn as enn
from ember import random as er
from recorded import jax_result


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


X = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32) * 3
X[0, :3] = [0.0, 6.0, -1.0]  # the kinks of relu, relu6, hard_tanh
WEIGHTS = np.arange(24, dtype=np.float32).reshape(4, 6) / 10

ACTIVATIONS = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu", "swish", "gelu", "elu",
               "leaky_relu", "celu", "selu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish",
               "squareplus", "glu", "softmax", "log_softmax", "standardize"]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_values_and_gradients_match_jax(name):
    ours_fn, theirs_fn = getattr(enn, name), getattr(jnn, name)
    np.testing.assert_allclose(np.asarray(ours_fn(X)), jax_result(lambda: theirs_fn(X)), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(ours_fn)(X)), jax_result(lambda: theirs_fn(X)), rtol=2e-6,
                               atol=1e-6)
    weights = WEIGHTS[:, :3] if name == "glu" else WEIGHTS
    ours = ember.grad(lambda x: enp.sum(ours_fn(x) * weights))(X)
    theirs = jax_result(lambda: jax.grad(lambda x: jnp.sum(theirs_fn(x) * weights))(X))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_activation_options_and_axes():
    for ours, theirs in [(enn.gelu(X, approximate=False), jax_result(lambda: jnn.gelu(X, approximate=False))),
                         (enn.elu(X, alpha=0.5), jax_result(lambda: jnn.elu(X, alpha=0.5))),
                         (enn.leaky_relu(X, 0.2), jax_result(lambda: jnn.leaky_relu(X, 0.2))),
                         (enn.softmax(X, axis=0), jax_result(lambda: jnn.softmax(X, axis=0))),
                         (enn.softmax(X, axis=(0, 1)), jax_result(lambda: jnn.softmax(X, axis=(0, 1)))),
                         (enn.log_softmax(X, axis=0), jax_result(lambda: jnn.log_softmax(X, axis=0))),
                         (enn.logsumexp(X, axis=1), jax_result(lambda: jnn.logsumexp(X, axis=1))),
                         (enn.logsumexp(X, axis=0, keepdims=True),
                          jax_result(lambda: jnn.logsumexp(X, axis=0, keepdims=True))),
                         (enn.logsumexp(X, b=np.abs(X)), jax_result(lambda: jnn.logsumexp(X, b=np.abs(X)))),
                         (enn.glu(X, axis=0), jax_result(lambda: jnn.glu(X, axis=0)))]:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-6, atol=1e-6)
    # E[x^2] - E[x]^2 cancels: the reductions' rounding shows at 1e-5
    np.testing.assert_allclose(np.asarray(enn.standardize(X, axis=0)), jax_result(lambda: jnn.standardize(X, axis=0)),
                               rtol=2e-5, atol=1e-5)
    mask = np.arange(24).reshape(4, 6) % 3 != 0
    np.testing.assert_allclose(np.asarray(enn.softmax(X, where=mask)), jax_result(lambda: jnn.softmax(X, where=mask)),
                               rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(np.isinf(np.asarray(enn.log_softmax(X, where=mask))), ~mask)
    value, sign = enn.logsumexp(X, axis=1, b=-np.ones_like(X), return_sign=True)
    jvalue, jsign = jax_result(lambda: jnn.logsumexp(X, axis=1, b=-np.ones_like(X), return_sign=True))
    np.testing.assert_allclose(np.asarray(value), np.asarray(jvalue), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(sign), np.asarray(jsign))


def test_relu_derivative_is_zero_at_the_kink_as_in_jax():
    assert float(ember.grad(enn.relu)(0.0)) == float(jax_result(lambda: jax.grad(jnn.relu)(0.0))) == 0.0
    assert float(ember.grad(enn.relu6)(6.0)) == float(jax_result(lambda: jax.grad(jnn.relu6)(6.0))) == 0.0
    jac = ember.jacfwd(enn.relu)(np.array([-1.0, 0.0, 2.0], np.float32))
    np.testing.assert_array_equal(np.asarray(jac), np.diag([0.0, 0.0, 1.0]))


def test_one_hot():
    labels = np.array([0, 2, 5, -1, 3], np.int32)
    for kwargs in [{}, {"axis": 0}, {"dtype": "int32"}]:
        np.testing.assert_array_equal(np.asarray(enn.one_hot(labels, 4, **kwargs)),
                                      jax_result(lambda: jnn.one_hot(labels, 4, **kwargs)))
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda y: enn.one_hot(y, 6))(labels)),
                                  jax_result(lambda: jnn.one_hot(labels, 6)))
    with pytest.raises(TypeError, match="num_classes must be a concrete integer"):
        ember.jit(lambda y, n: enn.one_hot(y, n))(labels, 4)


@pytest.mark.parametrize("case", ["plain", "causal", pytest.param("mask_bias", marks=pytest.mark.slow), "grouped",
                                  pytest.param("unbatched", marks=pytest.mark.slow)])
def test_dot_product_attention_matches_jax(case):
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 5, 4, 8)).astype(np.float32)
    kv_heads = 2 if case == "grouped" else 4
    k = rng.normal(size=(2, 5, kv_heads, 8)).astype(np.float32)
    v = rng.normal(size=(2, 5, kv_heads, 8)).astype(np.float32)
    kwargs = {}
    if case == "causal":
        kwargs = {"is_causal": True}
    if case == "mask_bias":
        kwargs = {"mask": rng.random(size=(2, 1, 5, 5)) < 0.7, "bias": rng.normal(size=(1, 4, 5, 5)).astype(
            np.float32), "scale": 0.3}
    if case == "unbatched":
        q, k, v = q[0], k[0], v[0]
    ours = enn.dot_product_attention(q, k, v, **kwargs)
    theirs = jax_result(lambda: jnn.dot_product_attention(q, k, v, **kwargs))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-6)
    g = ember.grad(lambda q: enp.sum(enn.dot_product_attention(q, k, v, **kwargs) ** 2))(q)
    jg = jax_result(lambda: jax.grad(lambda q: jnp.sum(jnn.dot_product_attention(q, k, v, **kwargs) ** 2))(q))
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-4, atol=1e-5)


def test_dot_product_attention_errors():
    q = np.zeros((1, 2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"query heads \(3\) must be a multiple of key/value heads \(2\)"):
        enn.dot_product_attention(q, np.zeros((1, 2, 2, 4), np.float32), np.zeros((1, 2, 2, 4), np.float32))
    with pytest.raises(ValueError, match="mask must be boolean"):
        enn.dot_product_attention(q, q, q, mask=np.ones((1, 1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="implementation 'cudnn' is not available"):
        enn.dot_product_attention(q, q, q, implementation="cudnn")


INITIALIZERS = [
    ("glorot_uniform", (), (30, 20)), ("glorot_normal", (), (30, 20)), ("xavier_uniform", (), (5, 7)),
    ("lecun_uniform", (), (30, 20)), ("lecun_normal", (), (30, 20)), ("he_uniform", (), (3, 3, 4, 8)),
    ("he_normal", (), (3, 3, 4, 8)), ("kaiming_normal", (), (16, 4)), ("normal", (0.1,), (7,)),
    ("uniform", (0.1,), (7,)), ("truncated_normal", (0.1,), (7, 2)), ("constant", (0.5,), (3,)),
]


@pytest.mark.parametrize("name,args,shape", INITIALIZERS, ids=[i[0] for i in INITIALIZERS])
def test_initializers_match_jax_bit_for_bit(name, args, shape):
    ours = getattr(enn.initializers, name)(*args)(er.key(3), shape)
    theirs = jax_result(lambda: getattr(jnn.initializers, name)(*args)(jr.key(3), shape))
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_variance_scaling_modes_and_zeros_ones():
    for mode in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        for distribution in ("truncated_normal", "normal", "uniform"):
            ours = enn.initializers.variance_scaling(0.5, mode, distribution, in_axis=0, out_axis=(1, 2))(
                er.key(1), (4, 3, 5), "float32")
            theirs = jax_result(lambda: jnn.initializers.variance_scaling(
                0.5, mode, distribution, in_axis=0, out_axis=(1, 2))(jr.key(1), (4, 3, 5), jnp.float32))
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_array_equal(np.asarray(enn.initializers.zeros(er.key(0), (2, 3))), np.zeros((2, 3)))
    np.testing.assert_array_equal(np.asarray(enn.initializers.ones(er.key(0), (2,), "float16")), np.ones(2))
    with pytest.raises(ValueError, match="invalid mode 'fan'"):
        enn.initializers.variance_scaling(1.0, "fan", "normal")
    with pytest.raises(ValueError, match="cannot compute the fans of a 1-dimensional weight"):
        enn.initializers.he_normal()(er.key(0), (5,))
    with pytest.raises(ValueError, match="orthogonal: needs a shape of at least 2 dimensions"):
        enn.initializers.orthogonal()(er.key(0), (3,))


def test_complex_and_integer_initializers_as_jax():
    """The variance-scaling family, normal and orthogonal take complex dtypes (complex normal; uniform on the disk;
    a normal truncated in modulus), zeros, ones and constant any dtype, bit for bit with JAX; uniform and
    truncated_normal refuse complex, as JAX's."""
    for distribution in ("truncated_normal", "normal", "uniform"):
        ours = enn.initializers.variance_scaling(2.0, "fan_in", distribution)(er.key(4), (6, 5), np.complex64)
        theirs = jax_result(lambda: jnn.initializers.variance_scaling(2.0, "fan_in", distribution)(
            jr.key(4), (6, 5), jnp.complex64))
        assert np.asarray(ours).dtype == np.complex64
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    ours = enn.initializers.orthogonal()(er.key(5), (4, 4), np.complex64)  # (the rest are variance scaling's)
    theirs = jax_result(lambda: jnn.initializers.orthogonal()(jr.key(5), (4, 4), jnp.complex64))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert enn.initializers.constant(3, np.int32)(er.key(0), (2,)).dtype == np.int32
    assert enn.initializers.zeros(er.key(0), (2,), np.uint8).dtype == np.uint8
    with pytest.raises(TypeError, match="must be a float dtype, got complex64"):
        enn.initializers.uniform()(er.key(0), (2,), np.complex64)
    with pytest.raises(TypeError, match="must be a float or complex dtype, got int32"):
        enn.initializers.glorot_normal()(er.key(0), (2, 2), np.int32)


def test_orthogonal_initializer_matches_jax():
    # orthonormal columns of (rows, columns); a column axis other than the last (ember.random.orthogonal's tests
    # cover rows < columns)
    for shape, column_axis, scale in [((6, 4), -1, 2.0), ((4, 2, 3), 0, 0.5)]:
        ours = enn.initializers.orthogonal(scale, column_axis)(er.key(5), shape)
        theirs = jax_result(lambda: jnn.initializers.orthogonal(scale, column_axis)(jr.key(5), shape))
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype and ours.shape == shape
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-6)
        q = np.moveaxis(np.asarray(ours, np.float64), column_axis, -1).reshape(-1, shape[column_axis]) / scale
        gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
        np.testing.assert_allclose(gram, np.eye(len(gram)), atol=1e-5)
    assert enn.initializers.orthogonal()(er.key(0), (0, 3)).shape == (0, 3)


def test_scipy_special_matches_jax():
    x = np.array([0.1, 0.3, 1.0, 2.5, 7.0], np.float32)
    y = np.array([0.0, 0.5, 2.0, 3.0, 0.2], np.float32)
    for name, args in [("expit", (X,)), ("logit", (x / 8,)), ("erf", (X,)), ("erfc", (X,)), ("erfinv", (x / 8,)),
                       ("gammaln", (x,)), ("digamma", (x,)), ("xlogy", (x, y)), ("xlogy", (np.zeros(5), y)),
                       ("xlog1py", (x, y)), ("entr", (np.array([-1.0, 0.0, 0.5], np.float32),)),
                       ("logsumexp", (X,)), ("softmax", (X,)), ("log_softmax", (X,))]:
        np.testing.assert_allclose(np.asarray(getattr(es, name)(*args)), jax_result(lambda: getattr(js, name)(*args)),
                                   rtol=2e-6, atol=1e-6, err_msg=name)
    for name in ("xlogy", "xlog1py"):
        ours = ember.grad(lambda a, b: enp.sum(getattr(es, name)(a, b)), argnums=(0, 1))(x, y + 0.5)
        theirs = jax_result(lambda: jax.grad(lambda a, b: jnp.sum(getattr(js, name)(a, b)), argnums=(0, 1))(x, y + 0.5))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(np.asarray(es.expit(np.arange(3))), jax_result(lambda: js.expit(np.arange(3))),
                               rtol=1e-6)
