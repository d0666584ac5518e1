"""A flax.linen MNIST training run on synthetic data (offline), written against JAX's API: run it with JAX and on
ember through the drop-in, and compare the accuracies.

    python3 tools/flax_mnist.py                     # JAX
    python3 -m ember.as_jax tools/flax_mnist.py     # ember
    python3 tools/flax_mnist.py --compare           # both, in two processes, side by side

The model and the loop are those of flax's linen MNIST example (a CNN: two 3x3 convolutions with ReLU and average
pooling, then two dense layers; SGD with momentum; a jitted train step of value_and_grad; cross-entropy), on
synthetic 28x28 images: each of the 10 classes is a fixed random template, an image is its class's template plus
noise, so the task is learnable but not trivially (accuracy rises over the epochs)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def synthetic_mnist(seed: int, n_train: int, n_test: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    templates = rng.normal(size=(10, 28, 28, 1)).astype(np.float32)

    def split(n: int) -> dict:
        labels = rng.integers(0, 10, size=n)
        images = templates[labels] * 0.35 + rng.normal(size=(n, 28, 28, 1)).astype(np.float32)
        return {"image": images.astype(np.float32), "label": labels.astype(np.int32)}
    return split(n_train), split(n_test)


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--train", type=int, default=3072)
    parser.add_argument("--test", type=int, default=1024)
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args(argv)
    if args.compare:
        here = os.path.abspath(__file__)
        rest = [a for a in argv if a != "--compare"]
        results = {}
        for label, cmd in (("jax", [sys.executable, here, *rest]),
                           ("ember", [sys.executable, "-m", "ember.as_jax", here, *rest])):
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[label] = json.loads(out.strip().splitlines()[-1])
        for label, r in results.items():
            print(f"{label:6s} " + "  ".join(f"epoch {i + 1}: loss {loss:.4f} acc {a:.4f}" for i, (loss, a) in
                                             enumerate(zip(r["test_loss"], r["test_accuracy"]))) +
                  f"  ({r['seconds']:.1f} s)")
        return results

    import jax
    import jax.numpy as jnp
    import optax
    from flax import linen as nn
    from flax.training import train_state

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(features=32, kernel_size=(3, 3))(x))
            x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = nn.relu(nn.Conv(features=64, kernel_size=(3, 3))(x))
            x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(features=256)(x))
            return nn.Dense(features=10)(x)

    @jax.jit
    def apply_model(state, images, labels):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, images)
            loss = optax.softmax_cross_entropy(logits, jax.nn.one_hot(labels, 10)).mean()
            return loss, logits
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        return grads, loss, jnp.mean(jnp.argmax(logits, -1) == labels)

    @jax.jit
    def update_model(state, grads):
        return state.apply_gradients(grads=grads)

    train, test = synthetic_mnist(0, args.train, args.test)
    rng = jax.random.key(0)
    rng, init_rng = jax.random.split(rng)
    cnn = CNN()
    params = cnn.init(init_rng, jnp.ones([1, 28, 28, 1]))["params"]
    state = train_state.TrainState.create(apply_fn=cnn.apply, params=params, tx=optax.sgd(0.05, 0.9))
    start = time.perf_counter()
    history: dict = {"train_loss": [], "test_loss": [], "test_accuracy": []}
    for _ in range(args.epochs):
        rng, perm_rng = jax.random.split(rng)
        perms = jax.random.permutation(perm_rng, args.train)
        perms = np.asarray(perms)[:(args.train // args.batch) * args.batch].reshape((-1, args.batch))
        losses = []
        for perm in perms:
            grads, loss, _ = apply_model(state, train["image"][perm], train["label"][perm])
            state = update_model(state, grads)
            losses.append(float(loss))
        _, test_loss, test_accuracy = apply_model(state, test["image"], test["label"])
        history["train_loss"].append(float(np.mean(losses)))
        history["test_loss"].append(float(test_loss))
        history["test_accuracy"].append(float(test_accuracy))
    history["seconds"] = time.perf_counter() - start
    history["jax"] = jax.__version__
    print(json.dumps(history))
    return history


if __name__ == "__main__":
    main(sys.argv[1:])
