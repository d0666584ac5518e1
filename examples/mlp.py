"""Train a small MLP classifier on synthetic data with ember: pytrees of parameters, jit(value_and_grad)."""
import time

import numpy as np

import ember
import ember.numpy as jnp
from ember.tree_util import tree_map


def init_params(rng, sizes):
    return [{"w": (rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32), "b": np.zeros(n, np.float32)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def forward(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def log_softmax(logits):
    shifted = logits - ember.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))


def loss(params, x, labels_onehot):
    return -jnp.mean(jnp.sum(log_softmax(forward(params, x)) * labels_onehot, axis=-1))


@ember.jit
def train_step(params, x, y, lr):
    value, grads = ember.value_and_grad(loss)(params, x, y)
    return tree_map(lambda p, g: p - lr * g, params, grads), value


@ember.jit
def accuracy(params, x, labels):
    return jnp.mean((jnp.argmax(forward(params, x), axis=-1) == labels).astype("float32"))


def main():
    rng = np.random.default_rng(0)
    n, classes = 512, 3
    centers = rng.normal(size=(classes, 2)) * 3
    labels = rng.integers(0, classes, size=n)
    x = (centers[labels] + rng.normal(size=(n, 2))).astype(np.float32)
    y = np.eye(classes, dtype=np.float32)[labels]
    params = init_params(rng, [2, 32, 32, classes])
    start = time.perf_counter()
    for step in range(301):
        params, value = train_step(params, x, y, 0.1)
        if step % 100 == 0:
            print(f"step {step:3d}  loss {float(value):.4f}  accuracy {float(accuracy(params, x, labels)):.3f}")
    print(f"{time.perf_counter() - start:.2f}s for 301 steps (including compilation)")


if __name__ == "__main__":
    main()
