"""ember.example_libraries.stax against jax.example_libraries.stax: the same public names; each layer's init (output
shape and params, bit for bit for the same key) and its outputs for the same params and inputs; the composites (an
MLP, a CNN, a residual block); Dropout's modes; the MNIST-classifier example's training with adam under jit and
grad, step by step; clear errors for bad input. Each case is built by one function applied to either module, so
ember's and JAX's layers are made by the same code."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.example_libraries import optimizers as joptimizers
from jax.example_libraries import stax as jstax

import ember
import ember.numpy as enp
from ember.example_libraries import optimizers, stax
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # JAX 32-bit, as ember by default
_FLOAT = np.dtype(np.float64 if ember.config.read("enable_x64") else np.float32)  # (the params' dtype)


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def _cnn(s):
    return s.serial(s.Conv(4, (3, 3), padding="SAME"), s.BatchNorm(), s.Relu, s.MaxPool((2, 2), (2, 2)),
                    s.Conv(6, (2, 2)), s.Tanh, s.Flatten, s.Dense(5), s.LogSoftmax)


def _residual(s):
    main = s.serial(s.Dense(6), s.Relu, s.Dense(6))
    return s.serial(s.FanOut(2), s.parallel(main, s.Identity), s.FanInSum, s.Relu)


# name: (layer maker over a stax module, input shape)
CASES = {
    "Dense": (lambda s: s.Dense(7), (4, 5)),
    "Dense_rank3": (lambda s: s.Dense(3, s.glorot(), s.randn(0.5)), (2, 3, 5)),
    "Conv": (lambda s: s.Conv(4, (3, 3)), (2, 7, 7, 3)),
    "Conv_strided_same": (lambda s: s.Conv(4, (3, 2), (2, 1), "SAME"), (2, 7, 6, 3)),
    "Conv_explicit_pads": (lambda s: s.Conv(3, (2, 2), padding=((1, 0), (0, 2))), (1, 5, 5, 2)),
    "GeneralConv_NCHW": (lambda s: s.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3, 3), (1, 2), "SAME"),
                         (2, 3, 6, 6)),
    "GeneralConv_1d": (lambda s: s.GeneralConv(("NWC", "WIO", "NWC"), 3, (3,)), (2, 8, 2)),
    "ConvTranspose_same": (lambda s: s.ConvTranspose(3, (3, 3), (2, 2), "SAME"), (2, 4, 4, 2)),
    "ConvTranspose_valid": (lambda s: s.ConvTranspose(2, (2, 3)), (1, 3, 4, 3)),
    "Conv1DTranspose": (lambda s: s.Conv1DTranspose(3, (3,), (2,)), (2, 5, 2)),
    "GeneralConvTranspose_NCHW": (lambda s: s.GeneralConvTranspose(("NCHW", "OIHW", "NCHW"), 2, (2, 2), (2, 2),
                                                                   "SAME"), (1, 3, 3, 4)),
    "BatchNorm": (lambda s: s.BatchNorm(), (3, 4, 4, 2)),
    "BatchNorm_axis0": (lambda s: s.BatchNorm(axis=0, epsilon=1e-3), (6, 3)),
    "BatchNorm_no_center": (lambda s: s.BatchNorm((0, 1), center=False), (4, 3, 2)),
    "BatchNorm_no_scale": (lambda s: s.BatchNorm((0, 1), scale=False), (4, 3, 2)),
    "BatchNorm_plain": (lambda s: s.BatchNorm((0,), center=False, scale=False), (5, 3)),
    **{name: (lambda s, name=name: getattr(s, name), (3, 5))
       for name in ["Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu",
                    "Selu", "Gelu", "Identity"]},
    "elementwise": (lambda s: s.elementwise(s.leaky_relu, negative_slope=0.2), (3, 5)),
    "elementwise_elu": (lambda s: s.elementwise(s.elu, alpha=0.5), (3, 5)),
    "MaxPool": (lambda s: s.MaxPool((2, 2)), (2, 5, 5, 3)),
    "MaxPool_same": (lambda s: s.MaxPool((3, 3), (2, 2), "SAME"), (2, 5, 6, 3)),
    "SumPool": (lambda s: s.SumPool((2, 3), (1, 2)), (2, 5, 7, 2)),
    "AvgPool": (lambda s: s.AvgPool((2, 2), (2, 2)), (2, 6, 6, 2)),
    "AvgPool_same": (lambda s: s.AvgPool((3, 3), (2, 2), "SAME"), (2, 5, 6, 2)),
    "AvgPool_spec_NCHW": (lambda s: s.AvgPool((2, 2), (1, 1), "SAME", spec="NCHW"), (2, 3, 4, 5)),
    "MaxPool_spec_1d": (lambda s: s.MaxPool((3,), (2,), "SAME", spec="NCW"), (2, 3, 8)),
    "Flatten": (lambda s: s.Flatten, (2, 3, 4, 5)),
    "FanInConcat": (lambda s: s.serial(s.FanOut(3), s.parallel(s.Dense(2), s.Identity, s.Dense(4)),
                                       s.FanInConcat()), (3, 5)),
    "FanInConcat_axis1": (lambda s: s.serial(s.FanOut(2), s.parallel(s.Relu, s.Tanh), s.FanInConcat(1)),
                          (2, 3, 4)),
    "shape_dependent": (lambda s: s.shape_dependent(lambda shape: s.Dense(2 * shape[-1])), (3, 4)),
    "serial_mlp": (lambda s: s.serial(s.Dense(8), s.Relu, s.Dense(8), s.Sigmoid, s.Dense(3), s.Softmax), (4, 6)),
    "cnn": (_cnn, (2, 8, 8, 1)),
    "residual": (_residual, (3, 6)),
}


def _shape(shape):
    return tuple(_shape(d) if isinstance(d, (tuple, list)) else int(d) for d in shape)


def _numpy_tree(tree):
    if isinstance(tree, (tuple, list, zip)):
        return type(tree)(_numpy_tree(t) for t in tree) if not isinstance(tree, zip) else tuple(map(_numpy_tree, tree))
    return np.asarray(tree)


def _perturbed(tree, seed):
    """The params made different from their init (BatchNorm's zeros and ones, the small conv biases), so that
    each enters the outputs visibly."""
    rng = np.random.default_rng(seed)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_perturbed(t, seed + i + 1) for i, t in enumerate(tree))
    return (tree + 0.3 * rng.normal(size=tree.shape)).astype(tree.dtype)


def _inputs(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(_FLOAT)


def _jax_init(name, shape):
    out_shape, params = CASES[name][0](jstax)[0](jax.random.PRNGKey(0), shape)
    return _shape(out_shape), _numpy_tree(params)


def _jax_apply(name, params, x):
    return np.asarray(CASES[name][0](jstax)[1](params, x))


def _assert_trees_equal(got, want, exact):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _assert_trees_equal(g, w, exact)
        return
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_public_names_match_jax():
    assert _public(stax) == _public(jstax)
    for name in _public(stax):
        value = getattr(stax, name)
        if callable(value) and getattr(value, "__module__", "") == stax.__name__:
            assert value.__doc__, name
    assert "stax" in ember.example_libraries.__all__ and ember.example_libraries.stax is stax


def _layer_params():
    """Every case of a layer's first form (Dense, Conv, BatchNorm, ...) and every other further form of the same
    layer (Dense_rank3, Conv_strided_same, ...) by default; all of them with -m slow."""
    seen = {}
    for name in CASES:
        layer = name.split("_")[0]
        seen[layer] = seen.get(layer, -1) + 1
        yield pytest.param(name, id=name, marks=pytest.mark.slow if seen[layer] % 2 else ())


@pytest.mark.parametrize("name", _layer_params())
def test_layer_matches_jax(name):
    make, shape = CASES[name]
    init_fun, apply_fun = make(stax)
    out_shape, params = init_fun(ember.random.PRNGKey(0), shape)
    want_shape, want_params = jax_result(lambda: _jax_init(name, shape))
    assert _shape(out_shape) == want_shape
    _assert_trees_equal(_numpy_tree(params), want_params, exact=True)  # JAX's params, bit for bit
    assert all(p.dtype == _FLOAT for p in ember.tree_util.tree_leaves(params))
    params = _perturbed(want_params, 1)
    x = _inputs(shape)
    got = ember.jit(apply_fun)(params, x)  # (one compile; eager apply: test_cnn_under_jit_and_unknown_batch)
    assert tuple(got.shape) == want_shape
    _assert_trees_equal(got, jax_result(lambda: _jax_apply(name, params, x)), exact=False)


def test_cnn_under_jit_and_unknown_batch():
    init_fun, apply_fun = _cnn(stax)
    out_shape, params = init_fun(ember.random.PRNGKey(3), (-1, 8, 8, 1))  # -1: any batch size
    assert out_shape == (-1, 5)
    _, same = init_fun(ember.random.PRNGKey(3), (2, 8, 8, 1))
    _assert_trees_equal(_numpy_tree(params), _numpy_tree(same), exact=True)
    x = _inputs((3, 8, 8, 1), 4)
    np.testing.assert_allclose(np.asarray(ember.jit(apply_fun)(params, x)), np.asarray(apply_fun(params, x)),
                               rtol=1e-5, atol=1e-6)


def _jax_dropout(x, rate, mode, key_seed):
    init_fun, apply_fun = jstax.serial(jstax.Dense(4), jstax.Dropout(rate, mode))
    _, params = init_fun(jax.random.PRNGKey(0), x.shape)
    return np.asarray(apply_fun(params, x, rng=jax.random.PRNGKey(key_seed)))


def test_dropout_modes_match_jax():
    x = _inputs((6, 5), 2)
    for mode in ("train", "test"):
        init_fun, apply_fun = stax.serial(stax.Dense(4), stax.Dropout(0.7, mode))
        _, params = init_fun(ember.random.PRNGKey(0), x.shape)
        got = np.asarray(apply_fun(params, x, rng=ember.random.PRNGKey(5)))  # (serial splits the key)
        want = jax_result(lambda: _jax_dropout(x, 0.7, mode, 5))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        dense = np.asarray(stax.Dense(4)[1](params[0], x))
        if mode == "test":
            np.testing.assert_allclose(got, dense, rtol=1e-6)
        else:  # stax's rate is the keep probability: kept values are scaled by 1 / rate
            kept = got != 0
            assert 0 < kept.sum() < kept.size
            np.testing.assert_allclose(got[kept], dense[kept] / 0.7, rtol=1e-6)
    # the fraction kept, on a large input
    big = stax.Dropout(0.8)[1]((), enp.ones((100, 100), np.float32), rng=ember.random.PRNGKey(1))
    assert 0.77 < float(enp.mean(big != 0)) < 0.83
    with pytest.raises(ValueError, match="stax.Dropout: apply_fun needs a PRNG key"):
        stax.Dropout(0.5)[1]((), x)
    with pytest.raises(ValueError, match="stax.Dropout: apply_fun needs a PRNG key"):
        init_fun, apply_fun = stax.serial(stax.Dense(4), stax.Dropout(0.5, "test"))
        apply_fun(init_fun(ember.random.PRNGKey(0), x.shape)[1], x)


# The MNIST-classifier example of JAX's examples/, smaller, on synthetic data, with adam.
_data_rng = np.random.default_rng(7)
IMAGES = _data_rng.normal(size=(32, 36)).astype(_FLOAT)
LABELS = np.eye(10, dtype=_FLOAT)[_data_rng.integers(0, 10, size=32)]


def _train(s, opt, lib, np_):
    init_random_params, predict = s.serial(s.Dense(32), s.Relu, s.Dense(32), s.Relu, s.Dense(10), s.LogSoftmax)

    def loss(params, batch):
        inputs, targets = batch
        preds = predict(params, inputs)
        return -np_.mean(np_.sum(preds * targets, axis=1))

    opt_init, opt_update, get_params = opt.adam(1e-2)

    @lib.jit
    def update(i, opt_state, batch):
        params = get_params(opt_state)
        return opt_update(i, lib.grad(loss)(params, batch), opt_state)

    _, init_params = init_random_params(lib.random.PRNGKey(0), (-1, 36))
    opt_state = opt_init(init_params)
    batch = (IMAGES, LABELS)
    losses = []
    for i in range(6):
        losses.append(float(lib.jit(loss)(get_params(opt_state), batch)))
        opt_state = update(i, opt_state, batch)
    losses.append(float(lib.jit(loss)(get_params(opt_state), batch)))
    return losses, _numpy_tree(get_params(opt_state))


def test_mnist_classifier_training_matches_jax():
    losses, params = _train(stax, optimizers, ember, enp)
    want_losses, want_params = jax_result(lambda: _train(jstax, joptimizers, jax, jnp))
    assert losses[-1] < losses[0] - 0.5  # (it learns)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4)
    _assert_trees_equal(params, want_params, exact=False)


def _train_vae(s, opt, lib, np_):
    """JAX's examples/mnist_vae.py in small (16-pixel images, latent 3, hidden 24, synthetic binary data): the
    encoder's two heads by FanOut + parallel, a reparameterized Gaussian sample, a Bernoulli decoder by logits,
    the negative ELBO minimised by momentum under jit, keys split per step."""
    random = lib.random
    encoder_init, encode = s.serial(s.Dense(24), s.Relu, s.FanOut(2),
                                    s.parallel(s.Dense(3), s.serial(s.Dense(3), s.Softplus)))
    decoder_init, decode = s.serial(s.Dense(24), s.Relu, s.Dense(16))
    images = (np.random.default_rng(3).random((8, 16)) > 0.5).astype(_FLOAT)

    def elbo(rng, params, x):
        enc_params, dec_params = params
        mu, sigmasq = encode(enc_params, x)
        z = mu + np_.sqrt(sigmasq) * random.normal(rng, mu.shape)
        logits = decode(dec_params, z)
        log_px = np_.sum(x * logits - np_.logaddexp(0.0, logits), axis=1)  # Bernoulli log-likelihood
        kl = 0.5 * np_.sum(1.0 + np_.log(sigmasq) - mu ** 2 - sigmasq, axis=1)
        return np_.mean(log_px + kl)

    opt_init, opt_update, get_params = opt.momentum(0.01, mass=0.9)
    key = random.PRNGKey(0)
    enc_key, dec_key, key = random.split(key, 3)
    _, enc_params = encoder_init(enc_key, (-1, 16))
    _, dec_params = decoder_init(dec_key, (-1, 3))
    state = opt_init((enc_params, dec_params))

    @lib.jit
    def step(i, state, rng):
        loss, grads = lib.value_and_grad(lambda p: -elbo(rng, p, images))(get_params(state))
        return opt_update(i, grads, state), loss
    losses = []
    for i in range(5):
        key, rng = random.split(key)
        state, loss = step(i, state, rng)
        losses.append(float(loss))
    return losses, _numpy_tree(get_params(state))


def test_vae_training_matches_jax():
    losses, params = _train_vae(stax, optimizers, ember, enp)
    want_losses, want_params = jax_result(lambda: _train_vae(jstax, joptimizers, jax, jnp))
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4)
    _assert_trees_equal(params, want_params, exact=False)


def _jax_cnn_grads(params, x, y):
    predict = _cnn(jstax)[1]
    return _numpy_tree(jax.grad(lambda p: -jnp.mean(jnp.sum(predict(p, x) * y, axis=1)))(params))


def test_cnn_gradients_match_jax():
    init_fun, predict = _cnn(stax)
    _, params = init_fun(ember.random.PRNGKey(1), (4, 8, 8, 1))
    params = _perturbed(_numpy_tree(params), 2)
    x, y = _inputs((4, 8, 8, 1), 3), np.eye(5, dtype=_FLOAT)[[0, 3, 1, 4]]
    grads = ember.jit(ember.grad(lambda p: -enp.mean(enp.sum(predict(p, x) * y, axis=1))))(params)
    _assert_trees_equal(_numpy_tree(grads), jax_result(lambda: _jax_cnn_grads(params, x, y)), exact=False)


def test_errors_name_the_layer():
    key = ember.random.PRNGKey(0)
    init_fun, apply_fun = stax.Conv(4, (3, 3))
    with pytest.raises(ValueError, match=r"stax.Conv: expected inputs \(NHWC\) of rank 4, got shape \(8, 8, 3\)"):
        init_fun(key, (8, 8, 3))
    _, params = init_fun(key, (1, 8, 8, 3))
    with pytest.raises(ValueError, match=r"stax.Conv: expected inputs \(NHWC\) of rank 4"):
        apply_fun(params, np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="stax.Conv: inputs of shape .* have 2 channels"):
        apply_fun(params, np.zeros((1, 8, 8, 2), np.float32))
    with pytest.raises(TypeError, match="stax.Conv: inputs of dtype int32 and a kernel of dtype float"):
        apply_fun(params, np.zeros((1, 8, 8, 3), np.int32))
    with pytest.raises(ValueError, match="stax.GeneralConv: a filter_shape of 1 spatial dimensions"):
        stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3,))
    with pytest.raises(TypeError, match="stax.GeneralConvTranspose: dimension_numbers must be three strings"):
        stax.GeneralConvTranspose("NHWC", 4, (3, 3))
    init_fun, apply_fun = stax.Dense(4)
    _, params = init_fun(key, (2, 5))
    with pytest.raises(ValueError, match=r"stax.Dense: inputs of shape \(2, 6\) do not fit a weight of shape \(5, 4\)"):
        apply_fun(params, np.zeros((2, 6), np.float32))
    with pytest.raises(ValueError, match="stax.Dense: inputs of shape"):
        ember.jit(apply_fun)(params, np.zeros((2, 6), np.float32))
    with pytest.raises(ValueError, match="stax.Dense: the input must have at least one dimension"):
        init_fun(key, ())
    with pytest.raises(TypeError, match="stax.Dense: input_shape must be a tuple of ints"):
        init_fun(key, (2, 5.0))
    with pytest.raises(ValueError, match=r"stax.MaxPool: expected inputs of rank 4, got shape \(5, 5\)"):
        stax.MaxPool((2, 2))[0](key, (5, 5))
    with pytest.raises(ValueError, match="stax.AvgPool: expected inputs of rank 4"):
        stax.AvgPool((2, 2))[1]((), np.zeros((5, 5), np.float32))
    with pytest.raises(ValueError, match="stax.SumPool: spec 'NHW'"):
        stax.SumPool((2, 2), spec="NHW")
    with pytest.raises(TypeError, match="stax.MaxPool: padding must be"):
        stax.MaxPool((2, 2), padding=((0, 1), (0, 1)))
    with pytest.raises(ValueError, match="stax.BatchNorm: axis 3 is out of bounds"):
        stax.BatchNorm(axis=3)[0](key, (2, 3))
    with pytest.raises(TypeError, match=r"stax.serial: layer 1 is not an \(init_fun, apply_fun\) pair.*not called"):
        stax.serial(stax.Dense(3), stax.FanOut)
    with pytest.raises(ValueError, match="stax.parallel: 2 layers but 3 input shapes"):
        stax.parallel(stax.Relu, stax.Tanh)[0](key, [(2,), (2,), (2,)])
    with pytest.raises(ValueError, match="stax.FanInConcat: cannot concatenate"):
        stax.FanInConcat(0)[0](key, [(2, 3), (2, 4)])
