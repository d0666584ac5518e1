"""JAX's documentation on stateful computations (docs/stateful-computations.md) and on training a simple network
(docs/notebooks/neural_network_with_tfds_data.md), run with ember in place of jax and compared with real JAX.

Adaptations: printed values are returned; the tutorial's MNIST batches (from tensorflow-datasets) become random
batches drawn with jax.random (so both frameworks see the same data: ember draws JAX's numbers), and the training
loop runs 5 steps instead of 10 epochs; a getting-started loop of optax's docs uses ember.optim in place of optax."""
import optax
import pytest
from test_jax_docs import doc_example  # tests/ is on sys.path (conftest.py)
from typing import NamedTuple

import ember
from ember._core.dtypes import x64_enabled


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


# ------------------------------------------------------------------------------------------ Stateful computations
class Counter:
    """A simple counter."""

    def __init__(self):
        self.n = 0

    def count(self) -> int:
        """Increments the counter and returns the new value."""
        self.n += 1
        return self.n

    def reset(self):
        """Resets the counter to zero."""
        self.n = 0


@doc_example(x64=x64_enabled())
def test_stateful_counter_and_its_jit_sharp_bit(jax, jnp):
    counter = Counter()
    plain = [counter.count() for _ in range(3)]  # 1 2 3
    counter.reset()
    fast_count = jax.jit(counter.count)
    jitted = [fast_count() for _ in range(3)]    # 1 1 1: the side effect ran once, when traced
    return plain, jitted


class CounterV2:
    def count(self, n):
        # You could just return n+1, but here we separate its role as
        # the output and as the counter state for didactic purposes.
        return n + 1, n + 1

    def reset(self):
        return 0


@doc_example(x64=x64_enabled())
def test_stateful_counter_with_explicit_state(jax, jnp):
    counter = CounterV2()
    state = counter.reset()
    values = []
    for _ in range(3):
        value, state = counter.count(state)
        values.append(value)
    state = counter.reset()
    fast_count = jax.jit(counter.count)
    for _ in range(3):
        value, state = fast_count(state)
        values.append(value)
    return values


class Params(NamedTuple):
    weight: object
    bias: object


@doc_example(x64=x64_enabled(), rtol=1e-5, atol=1e-6)
def test_stateful_linear_regression(jax, jnp):
    def init(rng) -> Params:
        """Returns the initial model params."""
        weights_key, bias_key = jax.random.split(rng)
        weight = jax.random.normal(weights_key, ())
        bias = jax.random.normal(bias_key, ())
        return Params(weight, bias)

    def loss(params: Params, x, y):
        """Computes the least squares error of the model's predictions on x against y."""
        pred = params.weight * x + params.bias
        return jnp.mean((pred - y) ** 2)

    LEARNING_RATE = 0.005  # noqa: N806 (the docs' name)

    @jax.jit
    def update(params: Params, x, y) -> Params:
        """Performs one SGD update step on params using the given data."""
        grad = jax.grad(loss)(params, x, y)
        new_params = jax.tree_util.tree_map(lambda param, g: param - g * LEARNING_RATE, params, grad)
        return new_params

    rng = jax.random.key(42)
    # Generate true data from y = w*x + b + noise
    true_w, true_b = 2, -1
    x_rng, noise_rng = jax.random.split(rng)
    xs = jax.random.normal(x_rng, (128, 1))
    noise = jax.random.normal(noise_rng, (128, 1)) * 0.5
    ys = xs * true_w + true_b + noise
    params = init(rng)
    for _ in range(1000):
        params = update(params, xs, ys)
    return xs, ys, params  # the docs plot these: the fitted line is close to (2, -1)


# ------------------------------------------------------------------------------- Training a simple neural network
def _simple_network(jax, jnp):
    from_jax_scipy = jax.scipy.special if hasattr(jax, "scipy") else None
    logsumexp = from_jax_scipy.logsumexp
    random, grad, jit, vmap = jax.random, jax.grad, jax.jit, jax.vmap

    # A helper function to randomly initialize weights and biases
    # for a dense neural network layer
    def random_layer_params(m, n, key, scale=1e-2):
        w_key, b_key = random.split(key)
        return scale * random.normal(w_key, (n, m)), scale * random.normal(b_key, (n,))

    # Initialize all layers for a fully-connected neural network with sizes "sizes"
    def init_network_params(sizes, key):
        keys = random.split(key, len(sizes))
        return [random_layer_params(m, n, k) for m, n, k in zip(sizes[:-1], sizes[1:], keys)]

    layer_sizes = [784, 512, 512, 10]
    step_size = 0.01
    params = init_network_params(layer_sizes, random.key(0))

    def relu(x):
        return jnp.maximum(0, x)

    def predict(params, image):
        # per-example predictions
        activations = image
        for w, b in params[:-1]:
            outputs = jnp.dot(w, activations) + b
            activations = relu(outputs)
        final_w, final_b = params[-1]
        logits = jnp.dot(final_w, activations) + final_b
        return logits - logsumexp(logits)

    batched_predict = vmap(predict, in_axes=(None, 0))

    def one_hot(x, k, dtype=jnp.float32):
        """Create a one-hot encoding of x of size k."""
        return jnp.array(x[:, None] == jnp.arange(k), dtype)

    def accuracy(params, images, targets):
        target_class = jnp.argmax(targets, axis=1)
        predicted_class = jnp.argmax(batched_predict(params, images), axis=1)
        return jnp.mean(predicted_class == target_class)

    def loss(params, images, targets):
        preds = batched_predict(params, images)
        return -jnp.mean(preds * targets)

    @jit
    def update(params, x, y):
        grads = grad(loss)(params, x, y)
        return [(w - step_size * dw, b - step_size * db) for (w, b), (dw, db) in zip(params, grads)]
    return locals()


@doc_example(x64=x64_enabled(), rtol=1e-4, atol=1e-6)
def test_simple_network_predictions(jax, jnp):
    ns = _simple_network(jax, jnp)
    random = jax.random
    random_flattened_image = random.normal(random.key(1), (28 * 28,))
    preds = ns["predict"](ns["params"], random_flattened_image)
    random_flattened_images = random.normal(random.key(1), (10, 28 * 28))
    try:
        ns["predict"](ns["params"], random_flattened_images)
        invalid = "no error"
    except TypeError:
        invalid = "Invalid shapes!"
    batched_preds = ns["batched_predict"](ns["params"], random_flattened_images)
    return preds.shape, invalid, batched_preds.shape, batched_preds


@doc_example(x64=x64_enabled(), rtol=1e-4, atol=1e-6)
def test_simple_network_training_loop(jax, jnp):
    ns = _simple_network(jax, jnp)
    random = jax.random
    params = ns["params"]
    key = random.key(3)
    losses = []
    for _ in range(5):  # random batches of 128 "images" with labels in place of MNIST
        key, image_key, label_key = random.split(key, 3)
        x = random.uniform(image_key, (128, 28 * 28))
        y = ns["one_hot"](random.randint(label_key, (128,), 0, 10), 10)
        params = ns["update"](params, x, y)
        losses.append(ns["loss"](params, x, y))
    return losses, ns["accuracy"](params, x, y), params[-1]


@doc_example(x64=x64_enabled(), rtol=1e-4, atol=1e-6)
def test_optax_style_training_loop_with_ember_optim(jax, jnp):
    """optax's "getting started" loop (adam on a linear model), optax replaced by ember.optim on the ember side."""
    optim = ember.optim if jax is ember else optax
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    xs = jax.random.normal(k1, (16, 3))
    ys = xs @ jnp.array([1.0, -2.0, 0.5]) + 0.1 * jax.random.normal(k2, (16,))
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    optimizer = optim.adam(learning_rate=0.1)
    opt_state = optimizer.init(params)

    def compute_loss(params, x, y):
        return optim.l2_loss(x @ params["w"] + params["b"], y).mean()

    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(compute_loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss
    losses = []
    for _ in range(50):
        params, opt_state, loss = step(params, opt_state, xs, ys)
        losses.append(loss)
    return params, losses[::10]
