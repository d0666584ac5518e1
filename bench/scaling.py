"""Cost of reverse mode against program length: an unrolled chain of n elementwise steps
(`x = sin(x) * 1.01 + 0.1`, n times, then a sum), ember beside JAX in one run (both on the CPU).

    python3 bench/scaling.py [--sizes 250 500 1000 2000] [--repeat 3] [--vjp-forward]

Columns, per n (seconds; "x2" is the growth from the previous row: 2.0 is linear when the sizes double):
  ember-stage   ember's own work: staging f, the grad transform and lowering to StableHLO (CPU time, min of
                --repeat, caches cleared each time); no XLA
  jax-stage     jax.jit(jax.grad(f)).lower(x): JAX's staging, transform and lowering (CPU time, min)
  ember-xla, jax-xla   XLA compiling each library's grad program (wall time, once)
  ember-grad    ember.grad(f)(x) outside jit, end to end (stage, transform, compile, run; wall, once)
  jax-eager     jax.grad(f)(x) outside jit: JAX runs the ops one by one (wall, once)

With --vjp-forward (columns ember-fwd, jax-fwd), also the XLA compile of the forward program of a vjp:
jax.jit(vjp) outputs one residual per step, and XLA's CPU fusion recomputes the cheap elementwise chain inside
every residual's fusion (sin, cos, add and mul are "cheap" to duplicate), so its compile is quadratic in n (keep n
small: 400 takes a minute); ember's vjp saves no elementwise value (the pullback recomputes them), so its forward
program is one fusion."""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402
from ember._api.autodiff import _vjp_plan  # noqa: E402
from ember._core import aval_of  # noqa: E402
from ember._core.pytree import tree_flatten  # noqa: E402
from ember._core.cache import clear_all_caches  # noqa: E402
from ember._hlo import lower  # noqa: E402
from ember._runtime.compiler import get_client  # noqa: E402

WIDTH = 3


def chain(np_: Any, n: int) -> Callable[[Any], Any]:
    """x -> sum of x after n steps of sin(x) * 1.01 + 0.1 (ember.numpy or jax.numpy as np_)."""
    def f(x: Any) -> Any:
        for _ in range(n):
            x = np_.sin(x) * 1.01 + 0.1
        return np_.sum(x)
    return f


def min_cpu_seconds(work: Callable[[], Any], repeat: int) -> float:
    """The least CPU time of this process over `repeat` runs of work (other load on the machine counts less)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def wall_seconds(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def ember_grad_text(n: int) -> str:
    clear_all_caches()
    return lower(ember.make_ir(ember.grad(chain(enp, n)))(enp.ones((WIDTH,), enp.float32)))


def ember_vjp_forward_text(n: int) -> str:
    """The forward program that ember.vjp compiles outside jit (outputs and residuals)."""
    clear_all_caches()
    x = enp.ones((WIDTH,), enp.float32)
    _, in_tree = tree_flatten(((x,), {}))
    return lower(_vjp_plan(chain(enp, n), in_tree, (aval_of(x),), False, "vjp").forward)


def row(cells: list[tuple[float, float | None]]) -> str:
    return " ".join(f"{t:9.3f} {'' if last is None else f'{t / last:.2f}':>5}" for t, last in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vjp-forward", action="store_true")
    opts = parser.parse_args()
    client = get_client()
    x_jax, x_ember = jnp.ones((WIDTH,), jnp.float32), enp.ones((WIDTH,), enp.float32)
    np.asarray(jax.grad(chain(jnp, 2))(x_jax)), np.asarray(ember.grad(chain(enp, 2))(x_ember))  # (first uses)
    heads = ["ember-stage", "jax-stage", "ember-xla", "jax-xla", "ember-grad", "jax-eager"]
    if opts.vjp_forward:
        heads += ["ember-fwd", "jax-fwd"]
    print(f"{'n':>6} " + " ".join(f"{h:>9} {'x2':>5}" for h in heads))
    last: list[float | None] = [None] * len(heads)
    for n in opts.sizes:
        jax_lowered = jax.jit(jax.grad(chain(jnp, n))).lower(x_jax)
        ember_text = ember_grad_text(n)
        times = [min_cpu_seconds(lambda: ember_grad_text(n), opts.repeat),
                 min_cpu_seconds(lambda: jax.jit(jax.grad(chain(jnp, n))).lower(x_jax), opts.repeat),
                 wall_seconds(lambda: client.compile(ember_text)),
                 wall_seconds(lambda: client.compile(jax_lowered.as_text())),
                 wall_seconds(lambda: (clear_all_caches(), np.asarray(ember.grad(chain(enp, n))(x_ember)))),
                 wall_seconds(lambda: np.asarray(jax.grad(chain(jnp, n))(x_jax)))]
        if opts.vjp_forward:
            forward = ember_vjp_forward_text(n)
            jax_forward = jax.jit(lambda x: jax.vjp(chain(jnp, n), x)).lower(x_jax).as_text()
            times += [wall_seconds(lambda: client.compile(forward)), wall_seconds(lambda: client.compile(jax_forward))]
        print(f"{n:>6} " + row(list(zip(times, last))), flush=True)
        last = list(times)


if __name__ == "__main__":
    main()
