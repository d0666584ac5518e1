"""Staging cost of vmap(grad(f)) for loops nested d deep: milliseconds per depth and the growth from one depth to
the next, ember beside JAX in one run (both on the CPU, JAX_PLATFORMS=cpu). Only staging is timed (ember.make_ir,
jax.make_jaxpr), nothing is compiled. Each round stages a fresh closure (after clearing ember's caches), so
neither library reuses an earlier trace.

    python3 bench/staging_depth.py [--depth 5] [--repeat 7] [--kind scan|cond|while]

With sub-IR transforms computed once per request the cost grows linearly with depth (a roughly constant ratio
near 1 + 1/d); recomputing them grows it geometrically (a ratio near 2 or more)."""
from __future__ import annotations

import argparse
import os
import time
import timeit
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402
from ember._core.cache import clear_all_caches  # noqa: E402

BATCH, WIDTH, STEPS = 4, 3, 3


def nested(lax: Any, np_: Any, kind: str, depth: int) -> Callable[[Any], Any]:
    """x (WIDTH,) -> scalar: `depth` loops of `kind` nested in each other around a sin (a cond nests in one of
    its branches, so the program grows linearly with depth whatever the kind)."""
    def level(k: int, c: Any) -> Any:
        if k == 0:
            return np_.sin(c)
        if kind == "scan":
            return lax.scan(lambda carry, _: (level(k - 1, carry) * 0.9 + carry, None), c, None, length=STEPS)[0]
        if kind == "cond":
            return lax.cond(np_.sum(c) > 0, lambda y: level(k - 1, y) * 2.0, lambda y: y - 1.0, c)
        return lax.fori_loop(0, np_.int32(STEPS), lambda i, carry: level(k - 1, carry) * 0.9 + carry, c)

    def f(x: Any) -> Any:
        return np_.sum(level(depth, x))
    return f


def staging_ms(stage: Callable[[], Any], repeat: int) -> float:
    """Median milliseconds of one staging (after one warm-up), in CPU time of this process (other work on a shared
    machine then counts less)."""
    stage()
    return 1e3 * float(np.median([timeit.timeit(stage, timer=time.process_time, number=1) for _ in range(repeat)]))


def derivative(lib: Any, f: Callable[[Any], Any], kind: str) -> Callable[[Any], Any]:
    """grad of f; for a while_loop (not reverse-differentiable, as in JAX) its directional derivative (jvp)."""
    if kind != "while":
        return lib.grad(f)
    return lambda x: lib.jvp(f, (x,), (lib.numpy.ones_like(x),))[1]


def ember_stage(kind: str, depth: int, x: Any) -> Callable[[], Any]:
    def stage() -> Any:
        clear_all_caches()
        return ember.make_ir(ember.vmap(derivative(ember, nested(ember.lax, enp, kind, depth), kind)))(x)
    return stage


def jax_stage(jax: Any, kind: str, depth: int, x: Any) -> Callable[[], Any]:
    def stage() -> Any:
        return jax.make_jaxpr(jax.vmap(derivative(jax, nested(jax.lax, jax.numpy, kind, depth), kind)))(x)
    return stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--kind", choices=("scan", "cond", "while"), default="scan")
    opts = parser.parse_args()
    try:
        import jax
    except ImportError:
        jax = None
    x = np.linspace(0.1, 0.9, BATCH * WIDTH, dtype=np.float32).reshape(BATCH, WIDTH)
    kind = opts.kind
    what = "vmap(jvp(f))" if kind == "while" else "vmap(grad(f))"
    print(f"staging {what} of {kind} nested d deep (ms, median of {opts.repeat}; ratio: d over d-1)")
    print(f"{'d':>3} {'ember':>9} {'ratio':>6} {'jax':>9} {'ratio':>6}")
    last: list[float | None] = [None, None]
    for depth in range(1, opts.depth + 1):
        times: list[float | None] = [staging_ms(ember_stage(kind, depth, ember.asarray(x)), opts.repeat)]
        times.append(None if jax is None else staging_ms(jax_stage(jax, kind, depth, x), opts.repeat))
        cells = []
        for i, t in enumerate(times):
            ratio = "" if t is None or last[i] is None else f"{t / last[i]:.2f}"
            cells.append(f"{'-' if t is None else f'{t:.1f}':>9} {ratio:>6}")
        print(f"{depth:>3} " + " ".join(cells))
        last = times


if __name__ == "__main__":
    main()
