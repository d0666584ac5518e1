"""Benchmarks: ember side by side with JAX, in one run, on the same machine. Prints times and ratios.

    python3 -m pip install -e ".[bench]" && python3 bench/run.py [--quick]

A ratio below 1 means ember is faster. Both run on the CPU (JAX_PLATFORMS=cpu)."""
from __future__ import annotations

import argparse
import os
import timeit
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402


def best_time(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best mean seconds per call over `repeat` rounds of `number` calls (after a warm-up call)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def tiny_call(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    x = np.arange(4, dtype=np.float32)
    ex, ey = ember.asarray(x), ember.asarray(x)
    jx, jy = jnp.asarray(x), jnp.asarray(x)
    ef = ember.jit(lambda a, b: a + b)
    jf = jax.jit(lambda a, b: a + b)
    return (lambda: ef(ex, ey).block_until_ready()), (lambda: jf(jx, jy).block_until_ready())


def matmul_512(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    rng = np.random.default_rng(0)
    a, b = (rng.normal(size=(512, 512)).astype(np.float32) for _ in range(2))
    ea, eb = ember.asarray(a), ember.asarray(b)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    ef = ember.jit(lambda x, y: x @ y)
    jf = jax.jit(lambda x, y: x @ y)
    return (lambda: ef(ea, eb).block_until_ready()), (lambda: jf(ja, jb).block_until_ready())


def mlp_grad(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    rng = np.random.default_rng(0)
    sizes = [(64, 256), (256, 256), (256, 10)]
    params = [(rng.normal(size=s).astype(np.float32) * 0.05, np.zeros(s[1], np.float32)) for s in sizes]
    x = rng.normal(size=(128, 64)).astype(np.float32)
    y = rng.normal(size=(128, 10)).astype(np.float32)

    def make_loss(np_: Any) -> Callable[..., Any]:
        def loss(params: Any, x: Any, y: Any) -> Any:
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = np_.tanh(h)
            return np_.mean((h - y) ** 2)
        return loss

    eparams = ember.tree_util.tree_map(ember.asarray, params)
    jparams = jax.tree_util.tree_map(jnp.asarray, params)
    ex, ey, jx, jy = ember.asarray(x), ember.asarray(y), jnp.asarray(x), jnp.asarray(y)
    ef = ember.jit(ember.grad(make_loss(enp)))
    jf = jax.jit(jax.grad(make_loss(jnp)))
    return (lambda: ef(eparams, ex, ey)[0][0].block_until_ready()), \
        (lambda: jf(jparams, jx, jy)[0][0].block_until_ready())


def eager_add(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    x = np.arange(4, dtype=np.float32)
    ex, jx = ember.asarray(x), jnp.asarray(x)
    return (lambda: (ex + ex).block_until_ready()), (lambda: (jx + jx).block_until_ready())


BENCHMARKS = [
    ("jit: tiny f32[4] add (dispatch overhead)", tiny_call, 2000),
    ("eager: f32[4] add (op-by-op dispatch)", eager_add, 2000),
    ("jit: 512x512 f32 matmul", matmul_512, 50),
    ("jit(grad): 3-layer MLP loss, batch 128", mlp_grad, 50),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise SystemExit("the benchmarks compare against JAX: python3 -m pip install -e '.[bench]'") from None
    repeat = 3 if args.quick else 7
    print(f"ember {ember.__version__} vs jax {jax.__version__}, device: {ember.default_device()}")
    print(f"{'benchmark':45s} {'ember':>12s} {'jax':>12s} {'ember/jax':>10s}")
    for name, make, number in BENCHMARKS:
        number = max(1, number // 5) if args.quick else number
        ours, theirs = make(jax, jnp)
        t_ours = best_time(ours, number, repeat)
        t_theirs = best_time(theirs, number, repeat)
        print(f"{name:45s} {t_ours * 1e6:10.1f}us {t_theirs * 1e6:10.1f}us {t_ours / t_theirs:10.2f}")


if __name__ == "__main__":
    main()
