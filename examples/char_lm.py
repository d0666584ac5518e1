"""A small causal transformer, trained on text every machine has (the Python standard library's own source files),
predicting the next byte; then it writes some Python of its own. ember alone: ember.nn layers, ember.optim's
AdamW with a warm-up cosine schedule and gradient clipping, ember.random for dropout and sampling, tqdm, a
loss-curve PNG and a checkpoint that --resume continues from.

    python3 examples/char_lm.py                # 2000 steps (the time it takes: docs/nn.md)
    python3 examples/char_lm.py --resume --steps 4000
    python3 examples/char_lm.py --quick        # the short run CI does
"""
from __future__ import annotations

import argparse
import glob
import os
import sysconfig
import time

import numpy as np

import ember
import ember.numpy as jnp
from ember import checkpoints, nn, optim, random


def load_text(max_bytes: int) -> np.ndarray:
    """The standard library's .py files, in a fixed order, as bytes (the vocabulary is the 256 byte values)."""
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    chunks, total = [], 0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8).astype(np.int32)


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(norm(x)), then x + MLP(norm(x))."""

    def __init__(self, dim: int, heads: int, dropout: float, *, key):
        k1, k2, k3 = random.split(key, 3)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = nn.MultiHeadAttention(heads, dim, key=k1)
        self.up = nn.Linear(dim, 4 * dim, key=k2)
        self.down = nn.Linear(4 * dim, dim, key=k3)
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x, *, key=None, training=False):
        k1, k2 = random.split(key) if key is not None else (None, None)
        x = x + self.dropout(self.attention(self.norm1(x), is_causal=True), key=k1, training=training)
        return x + self.dropout(self.down(nn.gelu(self.up(self.norm2(x)))), key=k2, training=training)


class CharLM(nn.Module):
    def __init__(self, block_size: int, dim: int, heads: int, layers: int, dropout: float, *, key):
        keys = random.split(key, layers + 2)
        self.tokens = nn.Embedding(256, dim, key=keys[0], embedding_init=nn.initializers.normal(0.02))
        self.positions = nn.initializers.normal(0.02)(keys[1], (block_size, dim))
        self.blocks = [Block(dim, heads, dropout, key=k) for k in keys[2:]]
        self.norm = nn.LayerNorm(dim)

    def __call__(self, ids, *, key=None, training=False):
        x = self.tokens(ids) + self.positions[: ids.shape[-1]]
        keys = random.split(key, len(self.blocks)) if key is not None else [None] * len(self.blocks)
        for block, k in zip(self.blocks, keys):
            x = block(x, key=k, training=training)
        return self.tokens.attend(self.norm(x))  # logits over the 256 bytes (tied embeddings)


def make_functions(optimizer, block_size: int):
    def loss_fn(model, batch, key):
        logits = model(batch[:, :-1], key=key, training=True)
        return optim.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    @ember.jit
    def train_step(model, opt_state, batch, key):
        loss, grads = ember.value_and_grad(loss_fn)(model, batch, key)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    @ember.jit
    def eval_loss(model, batch):
        logits = model(batch[:, :-1])
        return optim.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    @ember.jit
    def next_byte(model, context, key, temperature):
        logits = model(context[None])[0, -1] / temperature
        return random.categorical(key, logits)
    return train_step, eval_loss, next_byte


def sample(model, next_byte, context: bytes, length: int, block_size: int, key, temperature: float = 0.8) -> str:
    """length more bytes after context, drawn one at a time from the model's predicted distribution (the last
    block_size bytes as the model's context, so every call is the same compiled program)."""
    ids = list(context)
    assert len(ids) >= block_size, "the context fills the model's window"
    for _ in range(length):
        key, sub = random.split(key)
        ids.append(int(next_byte(model, np.array(ids[-block_size:], np.int32), sub, temperature)))
    return bytes(ids[len(context):]).decode("utf-8", errors="replace")


def prompt_from(text: np.ndarray, block_size: int) -> bytes:
    """A real context to continue: the block_size bytes of held-out source ending in a new function's "def "."""
    data = text.astype(np.uint8).tobytes()
    at = data.find(b"\ndef ", block_size)
    at = at + 5 if at >= 0 else block_size
    return data[at - block_size:at]


def plot(losses, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(losses, linewidth=0.6, label="training batch")
    window = max(1, len(losses) // 50)
    if len(losses) > window:
        ax.plot(np.arange(window - 1, len(losses)), np.convolve(losses, np.ones(window) / window, "valid"),
                label=f"mean of {window}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title("char-level transformer on the Python standard library")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"loss curve: {path}")


def main() -> None:
    from tqdm import tqdm

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    parser.add_argument("--quick", action="store_true", help="a short run (CI)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.quick:
        steps, batch, block, dim, heads, layers, text_bytes = args.steps or 150, 16, 64, 64, 4, 1, 300_000
    else:
        steps, batch, block, dim, heads, layers, text_bytes = args.steps or 2000, 32, 128, 128, 4, 2, 4_000_000
    data = load_text(text_bytes)
    split = int(0.95 * len(data))
    train_data, valid_data = data[:split], data[split:]
    print(f"{len(data):,} bytes of the standard library's source; {steps} steps of batch {batch} x {block}")

    model = CharLM(block, dim, heads, layers, dropout=0.0 if args.quick else 0.1, key=random.key(0))
    schedule = optim.warmup_cosine_decay_schedule(0.0, 2e-3 if args.quick else 1e-3, min(100, steps // 10), steps,
                                                  1e-4)
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(schedule, weight_decay=0.01))
    opt_state = optimizer.init(model)
    key, start, losses = random.key(1), 0, []
    path = os.path.join(args.out, "char_lm.safetensors")
    if args.resume and os.path.exists(path):
        n = checkpoints.load(path)["losses"].shape
        state = checkpoints.load(path, target={"model": model, "opt_state": opt_state, "key": key,
                                               "step": jnp.asarray(0), "losses": jnp.zeros(n)})
        model, opt_state, key = state["model"], state["opt_state"], state["key"]
        start, losses = int(state["step"]), list(np.asarray(state["losses"]))
        print(f"resumed from {path} at step {start}")

    train_step, eval_loss, next_byte = make_functions(optimizer, block)
    rng = np.random.default_rng(start)

    def batch_of(source):
        starts = rng.integers(0, len(source) - block - 1, size=batch)
        return np.stack([source[s:s + block + 1] for s in starts])

    bar = tqdm(range(start, steps), desc="training", initial=start, total=steps)
    began = time.perf_counter()
    for step in bar:
        key, sub = random.split(key)
        model, opt_state, loss = train_step(model, opt_state, batch_of(train_data), sub)
        losses.append(float(loss))
        if step % 10 == 0 or step == steps - 1:
            tokens_per_s = (step + 1 - start) * batch * block / (time.perf_counter() - began)
            bar.set_postfix(loss=f"{np.mean(losses[-10:]):.3f}", tokens_per_s=f"{tokens_per_s:,.0f}")
        if (step + 1) % 500 == 0 or step == steps - 1:
            checkpoints.save(path, {"model": model, "opt_state": opt_state, "key": key,
                                    "step": jnp.asarray(step + 1), "losses": jnp.asarray(np.array(losses, np.float32))})
    bar.close()
    valid = float(np.mean([float(eval_loss(model, batch_of(valid_data))) for _ in range(8)]))
    first, last = float(np.mean(losses[:10])), float(np.mean(losses[-10:]))
    print(f"training loss {first:.3f} -> {last:.3f} nats per byte; validation {valid:.3f}")
    plot(losses, os.path.join(args.out, "char_lm_loss.png"))
    context = prompt_from(valid_data, block)
    text = sample(model, next_byte, context, 150 if args.quick else 400, block, random.key(2))
    print("sample:\ndef " + text)


if __name__ == "__main__":
    main()
