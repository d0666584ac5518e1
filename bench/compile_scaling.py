"""Compile time against program size, for the two shapes of issue #44: a long unrolled program under jit(grad), and
grad over a pytree of many leaves. Prints seconds; "x2" is the growth from the previous row (2.0 is linear when the
sizes double).

    python3 bench/compile_scaling.py [--steps 250 500 1000 2000] [--leaves 10000 30000 100000] [--jax] [--passes]

Steps (an unrolled chain of n steps `x = sin(x) * 1.0001 + cos(x * (1 + i % 7))` on f32[3], five ops a step, then
a sum), for jit(f) and jit(grad(f)):
  stage   ember's own work: staging, the grad transform, lowering to StableHLO (CPU time, caches cleared)
  xla     XLA compiling ember's program (wall time)
  jax     (--jax) XLA compiling JAX's program of the same function (wall time; jax.jit(...).lower(x).compile())
  fusion  (--passes) the part of `xla` spent in XLA's HLO fusion pass, read from XLA's pass timing log in a
          subprocess (TF_CPP_VMODULE=hlo_pass_pipeline=1)
Measured 2026-12 on the 2-core machine (loaded): n=500/1000/2000 steps, jit(grad): xla 1.6/4.2/10.7 s, of which
fusion 0.28/1.24/~4.8 s; jax 1.6/4.1/11.1 s; jit(f): xla 0.3/0.7/1.3 s. ember's stage is linear; the super-linear
part is XLA's CPU instruction fusion, which re-sorts a growing fusion's operands (every step's saved values) after
each producer it fuses: reverse mode's long-range edges, in JAX's program as in ember's.

Leaves (grad of a function of a dict of n float32 scalars, outside jit: first call, then a second one):
  sum     loss = sum of the leaves: every gradient is the one value 1.0 (compiled: no parameter, one result)
  sq      loss = sum of squares: n distinct gradients (wider than MAX_COMPILED_WIDTH: run op by op)
Measured: n=100000, sum 4.0 s / 0.5 s (was: a program of 100000 parameters and 100000 results for XLA, 4.6 s at
10000, 18 s at 20000, minutes beyond); sq 16 s / 5 s (was 21.5 s / 6.9 s)."""
from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

import ember
import ember.numpy as enp
from ember._core.cache import clear_all_caches
from ember._runtime.backends import get_client


def chain(np_: Any, n: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        for i in range(n):
            x = np_.sin(x) * 1.0001 + np_.cos(x * (1 + i % 7))
        return np_.sum(x)
    return f


def ember_step_times(n: int, grad: bool) -> tuple[float, float, str]:
    """(ember's CPU seconds to stage and lower, XLA's wall seconds to compile, the module text)."""
    clear_all_caches()
    gc.collect()
    fn = ember.grad(chain(enp, n)) if grad else chain(enp, n)
    start = time.process_time()
    text = ember.jit(fn).lower(enp.ones(3, enp.float32)).as_text()
    stage = time.process_time() - start
    start = time.perf_counter()
    get_client().compile(text)
    return stage, time.perf_counter() - start, text


def jax_compile_seconds(n: int, grad: bool) -> float:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    fn = jax.grad(chain(jax.numpy, n)) if grad else chain(jax.numpy, n)
    lowered = jax.jit(fn).lower(np.ones(3, np.float32))
    start = time.perf_counter()
    lowered.compile()
    return time.perf_counter() - start


def fusion_seconds(n: int, grad: bool) -> float:
    """XLA's fusion pass time compiling ember's program, from XLA's pass log in a fresh process."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import compile_scaling as c; c.ember_step_times({n}, {grad})")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "hlo_pass_pipeline=1"}
    log = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stderr
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    return sum(float(t) * units[u] for t, u in re.findall(r"HLO pass: fusion time: ([\d.]+) (us|ms|s) ", log))


def grad_of_leaves(n: int, kind: str) -> tuple[float, float]:
    clear_all_caches()
    gc.collect()
    params = {str(i): np.float32(i % 11) for i in range(n)}

    def loss(p: Any) -> Any:
        return sum(p.values()) if kind == "sum" else sum(v * v for v in p.values())
    times = []
    for _ in range(2):
        start = time.perf_counter()
        grads = ember.grad(loss)(params)
        float(grads["1"])
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def growth(values: list[float], i: int) -> str:
    return f"x{values[i] / values[i - 1]:.1f}" if i and values[i - 1] > 0 else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="*", default=[250, 500, 1000])
    parser.add_argument("--leaves", type=int, nargs="*", default=[10000, 30000, 100000])
    parser.add_argument("--jax", action="store_true", help="also compile JAX's program of each function")
    parser.add_argument("--passes", action="store_true", help="also time XLA's fusion pass (a subprocess each)")
    args = parser.parse_args()
    for grad in (False, True):
        label = "jit(grad(f))" if grad else "jit(f)"
        print(f"\n{label}: steps, ember stage, xla" + (", jax" if args.jax else "") + (", fusion" if args.passes
                                                                                      else ""))
        stages: list[float] = []
        xlas: list[float] = []
        for i, n in enumerate(args.steps):
            stage, xla, text = ember_step_times(n, grad)
            stages.append(stage)
            xlas.append(xla)
            row = f"  {n:6d}  stage {stage:6.2f} {growth(stages, i):5}  xla {xla:6.2f} {growth(xlas, i):5}"
            if args.jax:
                row += f"  jax {jax_compile_seconds(n, grad):6.2f}"
            if args.passes:
                row += f"  fusion {fusion_seconds(n, grad):6.2f}"
            print(row + f"  ({len(text.splitlines())} lines)", flush=True)
    for kind in ("sum", "sq"):
        print(f"\ngrad over n leaves, loss = {'sum' if kind == 'sum' else 'sum of squares'}: first call, second")
        for n in args.leaves:
            first, second = grad_of_leaves(n, kind)
            print(f"  {n:7d}  {first:6.2f}  {second:6.2f}", flush=True)


if __name__ == "__main__":
    main()
