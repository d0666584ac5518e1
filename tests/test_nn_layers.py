"""ember.nn's layers: forward against numpy or JAX references with the same parameters, gradients against jax.grad
of the reference, modules through jit, grad, vmap, tree_map and ember.optim, and clear errors."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import random as jr

import ember
import ember.numpy as enp
from ember import nn, optim, random
from ember._core.dtypes import x64_enabled
from recorded import jax_result


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


KEY = random.key(0)
RNG = np.random.default_rng(0)
F = np.dtype("float64" if x64_enabled() else "float32")  # the layers' default dtype (float64 with enable_x64)


class _Params:
    """A module's parameters and settings as attributes, for the JAX references: a JAX pytree whose children are
    the module's children (in ember's order) and whose other attributes are static."""

    def __init__(self, children, static):
        self.__dict__.update(static)
        self.__dict__.update(children)
        self._names = list(children)


jax.tree_util.register_pytree_node(
    _Params, lambda p: ([p.__dict__[n] for n in p._names], (tuple(p._names), tuple(
        (k, v) for k, v in p.__dict__.items() if k not in p._names and k != "_names"))),
    lambda aux, values: _Params(dict(zip(aux[0], values)), dict(aux[1])))


def _np(tree):
    """ember module -> {"children": ..., "static": ...} dicts of numpy arrays and settings (recursively): plain
    values, which the fingerprint of a recorded JAX result can see; _params makes them _Params."""
    if isinstance(tree, nn.Module):
        children = tree._children()
        return {"children": {k: _np(tree.__dict__[k]) for k in children},
                "static": {k: v for k, v in tree.__dict__.items() if k not in children and not k.startswith("_ember")}}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_np(x) for x in tree)
    return None if tree is None else np.asarray(tree)


def _params(tree):
    """_np's dicts -> _Params (recursively)."""
    if isinstance(tree, dict):
        return _Params({k: _params(v) for k, v in tree["children"].items()}, tree["static"])
    if isinstance(tree, (list, tuple)):
        return type(tree)(_params(x) for x in tree)
    return tree


def _check(ours_fn, theirs_fn, module, *inputs, rtol=1e-5, atol=1e-6):
    """ours_fn(module, *inputs) against theirs_fn(params as numpy/jax arrays, *inputs): values and the gradient of
    the sum of squares with respect to every parameter."""
    params = _np(module)
    want = jax_result(lambda: theirs_fn(_params(params), *inputs))
    np.testing.assert_allclose(np.asarray(ours_fn(module, *inputs)), want, rtol=rtol, atol=atol)
    ours = ember.grad(lambda m: enp.sum(ours_fn(m, *inputs) ** 2))(module)
    theirs = jax_result(lambda: jax.tree.leaves(jax.grad(lambda p: jnp.sum(theirs_fn(p, *inputs) ** 2))(
        jax.tree.map(jnp.asarray, _params(params)))))
    for a, b in zip(ember.tree.leaves(ours), theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_linear():
    layer = nn.Linear(5, 3, key=KEY)
    assert layer.weight.shape == (5, 3) and layer.bias.shape == (3,)
    x = RNG.normal(size=(2, 4, 5)).astype(F)
    _check(lambda m, x: m(x), lambda p, x: x @ p.weight + p.bias, layer, x)
    # the initial weights are JAX's lecun_normal with the first of two split keys
    want = jax_result(lambda: jax.nn.initializers.lecun_normal()(jr.split(jr.key(0))[0], (5, 3)))
    np.testing.assert_array_equal(np.asarray(layer.weight), want)
    assert nn.Linear(5, 3, use_bias=False, key=KEY).bias is None


@pytest.mark.parametrize("kwargs", [{}, {"strides": 2, "padding": "VALID"}, {"dilation": 2, "padding": 1},
                                    {"groups": 2}])
def test_conv2d(kwargs):
    layer = nn.Conv2d(4, 6, (3, 3), key=KEY, **kwargs)
    x = RNG.normal(size=(2, 9, 9, 4)).astype(F)

    def reference(p, x):
        padding = p.padding
        y = jax.lax.conv_general_dilated(x, p.kernel, p.strides, padding, rhs_dilation=p.dilation,
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=p.groups)
        return y + p.bias
    _check(lambda m, x: m(x), reference, layer, x)
    np.testing.assert_allclose(np.asarray(layer(x[0])), np.asarray(layer(x))[0], rtol=1e-6)


def test_conv1d():
    layer = nn.Conv1d(3, 5, 4, key=KEY, padding="VALID")
    x = RNG.normal(size=(2, 10, 3)).astype(F)
    kernel, bias = np.asarray(layer.kernel), np.asarray(layer.bias)
    ref = jax_result(lambda: jax.lax.conv_general_dilated(x, kernel, (1,), "VALID",
                                                          dimension_numbers=("NWC", "WIO", "NWC")) + bias)
    np.testing.assert_allclose(np.asarray(layer(x)), ref, rtol=1e-5, atol=1e-6)


def test_embedding():
    layer = nn.Embedding(10, 4, key=KEY)
    ids = np.array([[1, 2, 2], [9, 0, 1]], np.int32)
    _check(lambda m, i: m(i), lambda p, i: p.weight[i], layer, ids)
    np.testing.assert_allclose(np.asarray(layer.attend(np.ones((2, 4), np.float32))),
                               np.ones((2, 4)) @ np.asarray(layer.weight).T, rtol=1e-6)
    with pytest.raises(TypeError, match="Embedding: ids must be integers"):
        layer(np.ones(2, np.float32))


def test_layer_norm_and_rms_norm():
    x = RNG.normal(size=(3, 4, 6)).astype(F)
    ln = nn.LayerNorm(6).replace(weight=enp.asarray(RNG.normal(size=6).astype(F)),
                                 bias=enp.asarray(RNG.normal(size=6).astype(F)))

    def ln_ref(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p.weight + p.bias
    _check(lambda m, x: m(x), ln_ref, ln, x)
    ln2 = nn.LayerNorm((4, 6), use_bias=False)
    ref2 = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(ln2(x)), ref2, rtol=1e-5, atol=1e-5)
    rms = nn.RMSNorm(6).replace(weight=enp.asarray(RNG.normal(size=6).astype(F)))
    _check(lambda m, x: m(x), lambda p, x: x / jnp.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * p.weight, rms, x)
    with pytest.raises(ValueError, match=r"LayerNorm: expected input ending in \(6,\), got shape \(2, 5\)"):
        nn.LayerNorm(6)(enp.ones((2, 5)))


def test_batch_norm_training_and_evaluation():
    x = RNG.normal(size=(8, 5, 3)).astype(F) * 2 + 1
    bn = nn.BatchNorm(3, momentum=0.9)
    y, bn2 = bn(x, training=True)
    mean, var = x.mean((0, 1)), x.var((0, 1))
    np.testing.assert_allclose(np.asarray(y), (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(bn2.running_mean), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(bn2.running_var), 0.9 + 0.1 * var, rtol=1e-5)
    y_eval, same = bn2(x, training=False)
    assert same is bn2
    np.testing.assert_allclose(np.asarray(y_eval), (x - np.asarray(bn2.running_mean)) /
                               np.sqrt(np.asarray(bn2.running_var) + 1e-5), rtol=1e-5, atol=1e-5)
    # inside a jitted training step, the new running averages come out as a module
    step = ember.jit(lambda bn, x: bn(x, training=True))
    _, bn3 = step(bn, x)
    np.testing.assert_allclose(np.asarray(bn3.running_mean), np.asarray(bn2.running_mean), rtol=1e-6)
    g = ember.grad(lambda bn: enp.sum(bn(x, training=True)[0] * x))(bn)
    assert np.all(np.asarray(g.running_mean) == 0)  # statistics are not trained


def test_dropout_matches_jax_bernoulli():
    x = RNG.normal(size=(4, 50)).astype(F)
    drop = nn.Dropout(0.3)
    y = drop(x, key=random.key(5))
    keep = jax_result(lambda: jr.bernoulli(jr.key(5), 0.7, (4, 50)))
    np.testing.assert_allclose(np.asarray(y), np.where(keep, x / 0.7, 0), rtol=1e-6)
    assert drop(x, training=False) is x
    with pytest.raises(TypeError, match="Dropout: training needs key="):
        drop(x)
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\)"):
        nn.Dropout(1.0)
    masks = ember.vmap(lambda k: drop(enp.ones(1000), key=k))(random.split(random.key(1), 8))
    assert abs(float(np.mean(np.asarray(masks) > 0)) - 0.7) < 0.02


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_matches_a_jax_reference(causal):
    mha = nn.MultiHeadAttention(num_heads=2, features=8, qkv_features=6, key=KEY)
    x = RNG.normal(size=(3, 5, 8)).astype(F)
    mask = RNG.random(size=(3, 1, 5, 5)) < 0.8

    def reference(p, x):
        def project(layer, t):
            return t @ layer.weight + layer.bias
        q, k, v = (project(layer, x).reshape(3, 5, 2, 3) for layer in (p.query, p.key, p.value))
        out = jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal).reshape(3, 5, 6)
        return project(p.out, out)
    _check(lambda m, x: m(x, mask=mask, is_causal=causal), reference, mha, x, rtol=1e-5, atol=1e-5)
    # cross-attention, unbatched
    kv = RNG.normal(size=(7, 8)).astype(F)
    assert mha(x[0], kv).shape == (5, 8)


def test_sequential_mlp_and_the_module_protocol():
    k1, k2, k3 = random.split(KEY, 3)
    seq = nn.Sequential(nn.Linear(4, 8, key=k1), nn.relu, nn.Dropout(0.5), nn.Linear(8, 2, key=k2))
    x = RNG.normal(size=(6, 4)).astype(F)
    manual = seq[3](nn.relu(seq[0](x)))
    np.testing.assert_allclose(np.asarray(seq(x)), np.asarray(manual), rtol=1e-6)  # no dropout when evaluating
    assert seq(x, key=k3, training=True).shape == (6, 2)
    mlp = nn.MLP(4, 3, 16, depth=2, activation=nn.gelu, key=k3)
    assert len(ember.tree.leaves(mlp)) == 6
    out = mlp(x)
    np.testing.assert_allclose(np.asarray(ember.jit(lambda m, x: m(x))(mlp, x)), np.asarray(out), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.vmap(mlp)(x)), np.asarray(out), rtol=1e-5, atol=1e-6)
    doubled = ember.tree.map(lambda p: 2 * p, mlp)
    assert isinstance(doubled, nn.MLP) and doubled.activation is nn.gelu
    with pytest.raises(AttributeError, match="immutable"):
        mlp.activation = nn.relu
    with pytest.raises(AttributeError, match=r"replace: no attribute\(s\) \['nope'\]"):
        mlp.replace(nope=1)
    assert f"Linear(weight={F.name}[4, 16]" in repr(mlp)


def test_a_training_loop_with_modules_and_optim():
    k1, k2 = random.split(KEY)
    model = nn.Sequential(nn.Linear(2, 16, key=k1), nn.tanh, nn.Linear(16, 1, key=k2))
    x = RNG.uniform(-1, 1, size=(64, 2)).astype(F)
    y = (x[:, :1] * x[:, 1:]).astype(F)
    opt = optim.adam(3e-2)
    state = opt.init(model)

    @ember.jit
    def step(model, state):
        loss, grads = ember.value_and_grad(lambda m: enp.mean((m(x) - y) ** 2))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss
    first = None
    for _ in range(150):
        model, state, loss = step(model, state)
        first = float(loss) if first is None else first
    assert float(loss) < first / 5


def test_init_errors():
    with pytest.raises(TypeError, match="Linear: pass key="):
        nn.Linear(2, 3, key=None)
    with pytest.raises(ValueError, match=r"Linear: expected input with 3 features in its last dimension, got shape "
                                         r"\(2, 4\)"):
        nn.Linear(3, 2, key=KEY)(enp.ones((2, 4)))
    with pytest.raises(ValueError, match=r"qkv_features \(5\) must be a multiple of num_heads \(2\)"):
        nn.MultiHeadAttention(2, 5, key=KEY)
    with pytest.raises(TypeError, match="Sequential: BatchNorm returns an updated layer"):
        nn.Sequential(nn.BatchNorm(2))(enp.ones((3, 2)))


@functools.cache
def _layers_with_parameters():
    """name -> (a layer, an input shape it takes); the sizes of the tests above (their eager programs are cached)."""
    k1, k2, k3 = random.split(KEY, 3)
    return {"Linear": (nn.Linear(5, 3, key=KEY), (2, 5)), "Conv2d": (nn.Conv2d(4, 6, (3, 3), key=KEY), (1, 5, 5, 4)),
            "LayerNorm": (nn.LayerNorm(6), (2, 6)), "RMSNorm": (nn.RMSNorm(6), (2, 6)),
            "BatchNorm": (lambda x: nn.BatchNorm(3)(x, training=True)[0], (4, 3)),
            "MLP": (nn.MLP(4, 3, 16, depth=2, key=k3), (2, 4)),
            "Embedding.attend": (nn.Embedding(10, 4, key=KEY).attend, (2, 4)),
            "MultiHeadAttention": (nn.MultiHeadAttention(num_heads=2, features=8, qkv_features=6, key=KEY), (3, 8))}


def _out_dtype(fn, x):
    return ember.jit(fn).trace(x).out_avals[0].dtype


def test_lower_precision_float_inputs_are_promoted_to_the_parameters_dtype():
    """One dtype policy (flax's promote_dtype): float16 and bfloat16 inputs compute in the float32 parameters'
    dtype (Conv2d used to refuse them; Linear promoted). Every layer's output dtype from its staged IR; values
    of Conv2d against JAX's convolution of the promoted input, of Linear against numpy."""
    for name, (layer, shape) in _layers_with_parameters().items():
        for dtype in ("float16", "bfloat16"):
            assert _out_dtype(layer, enp.zeros(shape, dtype)) == F, (name, dtype)
    assert _out_dtype(lambda x: nn.BatchNorm(3)(x, training=True)[1].running_mean, enp.zeros((4, 3), "bfloat16")) \
        == F  # the state keeps its dtype
    conv = _layers_with_parameters()["Conv2d"][0]
    x = enp.asarray(RNG.normal(size=(1, 5, 5, 4))).astype("bfloat16")
    xs, kernel, bias = np.asarray(x), np.asarray(conv.kernel), np.asarray(conv.bias)
    ref = jax_result(lambda: jax.lax.conv_general_dilated(jnp.asarray(xs, F), kernel, (1, 1), "SAME",
                                                          dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias)
    np.testing.assert_allclose(np.asarray(conv(x)), ref, rtol=1e-5, atol=1e-6)
    linear = _layers_with_parameters()["Linear"][0]
    x = RNG.normal(size=(2, 5)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(linear(x)), x.astype(F) @ np.asarray(linear.weight) +
                               np.asarray(linear.bias), rtol=1e-6, atol=1e-6)


def test_float64_inputs_promote_float32_parameters():
    layer = _layers_with_parameters()["Linear"][0]
    x = RNG.normal(size=(2, 5))
    with ember.config.override(enable_x64=True):
        y = layer(enp.asarray(x, "float64"))
    assert y.dtype == np.float64
    np.testing.assert_allclose(np.asarray(y), x @ np.asarray(layer.weight, np.float64) + np.asarray(layer.bias),
                               rtol=1e-12)


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_non_float_inputs_are_refused_naming_the_layer(dtype):
    layers = _layers_with_parameters()
    layers["Dropout"] = (nn.Dropout(0.5), (2, 4))
    for name, (layer, shape) in layers.items():
        with pytest.raises(TypeError, match=rf"ember.nn.{name}: expected a floating-point input .*got "
                                            rf"{dtype}\[{', '.join(map(str, shape))}\]"):
            layer(np.ones(shape, dtype))


def test_multi_head_attention_checks_its_inputs_and_mask():
    mha = nn.MultiHeadAttention(2, 4, key=KEY)
    x = RNG.normal(size=(2, 5, 4)).astype(F)
    with pytest.raises(ValueError, match=r"MultiHeadAttention: expected x of shape \(\.\.\., T, 4\).*got shape "
                                         r"\(4,\)"):
        mha(x[0, 0])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: expected key_value of shape \(\.\.\., T, 4\).*got "
                                         r"shape \(2, 7, 3\)"):
        mha(x, np.ones((2, 7, 3), F))
    with pytest.raises(ValueError, match=r"key_value's batch dimensions \(3,\) differ from x's \(2,\)"):
        mha(x, np.ones((3, 7, 4), F))
    with pytest.raises(ValueError, match=r"mask of shape \(3,\) does not broadcast to \(\*batch, num_heads, T, S\) = "
                                         r"\(2, 5, 5\)"):
        mha(x[0], mask=np.ones(3, bool))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 5, 3\) does not broadcast to .* = \(2, 2, 5, 5\)"):
        mha(x, mask=np.ones((2, 1, 5, 3), bool))
    with pytest.raises(TypeError, match=r"mask must be boolean \(True = attend\), got float32\[5, 5\]"):
        mha(x, mask=np.ones((5, 5), np.float32))


def test_multi_head_attention_mask_with_several_batch_dimensions():
    """A (3, 1, T, T) mask for (2, 3, T, features) inputs broadcasts over both batch dimensions (it used to be
    applied to the flattened batch of 6, and fail)."""
    mha = nn.MultiHeadAttention(2, 4, key=KEY)
    x = RNG.normal(size=(2, 3, 5, 4)).astype(F)
    mask = RNG.random(size=(3, 1, 5, 5)) < 0.7
    mask[..., 0] = True
    whole, parts = ember.jit(lambda x: (mha(x, mask=mask), [mha(x[i], mask=mask) for i in range(2)]))(x)
    for i in range(2):
        np.testing.assert_allclose(np.asarray(whole)[i], np.asarray(parts[i]), rtol=1e-6, atol=1e-6)
