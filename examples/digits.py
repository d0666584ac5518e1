"""Classify the handwritten digits bundled with scikit-learn (8x8 images, 1797 of them) with ember alone: an MLP
and a small CNN from ember.nn, trained with ember.optim (optax's API), progress with tqdm, a loss-curve PNG, and a
checkpoint after every epoch that --resume continues from.

    python3 examples/digits.py                 # both models, full training (accuracy and time: docs/nn.md)
    python3 examples/digits.py --model cnn --epochs 5 --resume   # continue the CNN from its checkpoint
    python3 examples/digits.py --quick         # the short run CI does
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import ember
import ember.numpy as jnp
from ember import checkpoints, nn, optim, random


def load_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]  # (1797, 8, 8, 1), in [0, 1]
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return images[train], labels[train], images[test], labels[test]


class MLP(nn.Module):
    def __init__(self, *, key):
        k1, k2 = random.split(key)
        self.net = nn.MLP(64, 10, width_size=128, depth=2, activation=nn.relu, key=k1)
        self.dropout = nn.Dropout(0.1)

    def __call__(self, x, *, key=None, training=False):
        x = self.dropout(x.reshape(x.shape[0], -1), key=key, training=training)
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, *, key):
        k1, k2, k3 = random.split(key, 3)
        self.conv1 = nn.Conv2d(1, 16, 3, key=k1)
        self.conv2 = nn.Conv2d(16, 32, 3, key=k2)
        self.head = nn.Linear(2 * 2 * 32, 10, key=k3)

    def __call__(self, x, *, key=None, training=False):
        def pool(x):
            return ember.lax.reduce_window(x, -jnp.inf, ember.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        x = pool(nn.relu(self.conv1(x)))           # (N, 4, 4, 16)
        x = pool(nn.relu(self.conv2(x)))           # (N, 2, 2, 32)
        return self.head(x.reshape(x.shape[0], -1))


def make_step(optimizer):
    def loss_fn(model, x, y, key):
        logits = model(x, key=key, training=True)
        return optim.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @ember.jit
    def train_step(model, opt_state, x, y, key):
        loss, grads = ember.value_and_grad(loss_fn)(model, x, y, key)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    @ember.jit
    def predict(model, x):
        return jnp.argmax(model(x), axis=-1)
    return train_step, predict


def train(kind: str, epochs: int, batch: int, out: str, resume: bool, seed: int = 0) -> float:
    from tqdm import tqdm

    x_train, y_train, x_test, y_test = load_data()
    steps_per_epoch = len(y_train) // batch
    model = (MLP if kind == "mlp" else CNN)(key=random.key(seed))
    schedule = optim.warmup_cosine_decay_schedule(0.0, 3e-3, steps_per_epoch, max(epochs, 2) * steps_per_epoch,
                                                  3e-5)
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(schedule, weight_decay=1e-4))
    opt_state = optimizer.init(model)
    key, start, losses = random.key(seed + 1), 0, []
    path = os.path.join(out, f"digits_{kind}.safetensors")
    if resume and os.path.exists(path):
        saved_losses = checkpoints.load(path)["losses"]  # (its length sets the template's)
        template = {"model": model, "opt_state": opt_state, "key": key, "epoch": jnp.asarray(0),
                    "losses": jnp.zeros(saved_losses.shape)}
        state = checkpoints.load(path, target=template)
        model, opt_state, key = state["model"], state["opt_state"], state["key"]
        start, losses = int(state["epoch"]), list(np.asarray(state["losses"]))
        print(f"{kind}: resumed from {path} at epoch {start}")
    train_step, predict = make_step(optimizer)
    for epoch in range(start, epochs):
        key, perm_key = random.split(key)
        order = np.asarray(random.permutation(perm_key, len(y_train)))
        # (a bar advanced by hand: iterating a tqdm updates its count lazily, and set_postfix redraws the stale
        # count, so the counter looked frozen while the loss moved)
        bar = tqdm(total=steps_per_epoch, desc=f"{kind} epoch {epoch + 1}/{epochs}", leave=False)
        began = time.perf_counter()
        for i in range(steps_per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            key, step_key = random.split(key)
            model, opt_state, loss = train_step(model, opt_state, x_train[idx], y_train[idx], step_key)
            losses.append(float(loss))
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False,
                            examples_per_s=f"{(i + 1) * batch / (time.perf_counter() - began):.0f}")
            bar.update(1)
        bar.close()
        accuracy = float(np.mean(np.asarray(predict(model, x_test)) == y_test))
        print(f"{kind} epoch {epoch + 1}: loss {np.mean(losses[-steps_per_epoch:]):.4f}, "
              f"test accuracy {accuracy:.4f}")
        checkpoints.save(path, {"model": model, "opt_state": opt_state, "key": key, "epoch": jnp.asarray(epoch + 1),
                                "losses": jnp.asarray(np.array(losses, np.float32))})
    accuracy = float(np.mean(np.asarray(predict(model, x_test)) == y_test))
    plot(losses, os.path.join(out, f"digits_{kind}_loss.png"), f"digits, {kind}")
    print(f"{kind}: test accuracy {accuracy:.4f} ({len(y_test)} test images)")
    return accuracy


def plot(losses: list[float], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(losses, linewidth=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"loss curve: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    parser.add_argument("--quick", action="store_true", help="a short run (CI)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    epochs = args.epochs or (15 if args.quick else 30)
    for kind in (["mlp", "cnn"] if args.model == "both" else [args.model]):
        train(kind, epochs, args.batch, args.out, args.resume)


if __name__ == "__main__":
    main()
