"""The persistent compilation cache: a new process's first call, cold (empty cache) and warm (the cache a previous
process filled), ember beside JAX (each with its own cache directory, min compile time 0).

    python3 bench/compile_cache.py [--repeat 3]

Programs: an MLP training step (jit of value_and_grad plus an SGD update, 784-512-512-10, batch 128) and a chain
of 1000 elementwise ops (jit). Each number is the wall time of the first call in a fresh process (staging,
lowering, compile or cache load, run), the least of --repeat processes; the process start and imports are not
counted. The last columns are warm/cold for each library and ember-warm / JAX-warm."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = {
    "mlp train step": """
        def init(shape, i):
            return (np.random.default_rng(i).standard_normal(shape) * 0.05).astype(np.float32)
        params = [init((784, 512), 0), init((512,), 1), init((512, 512), 2), init((512,), 3), init((512, 10), 4),
                  init((10,), 5)]
        x, y = init((128, 784), 6), init((128, 10), 7)
        def loss(p, x, y):
            h = x
            for i in range(0, len(p) - 2, 2):
                h = np_.tanh(h @ p[i] + p[i + 1])
            return np_.mean((h @ p[-2] + p[-1] - y) ** 2)
        def step(p, x, y):
            value, grads = lib.value_and_grad(loss)(p, x, y)
            return [w - 0.01 * g for w, g in zip(p, grads)], value
        run = lambda: lib.jit(step)(params, x, y)[1]
    """,
    "1000-op chain": """
        def chain(x):
            for i in range(1000):
                x = np_.sin(x) * 1.001 + 0.001 * i
            return x
        x = np.linspace(0, 1, 64, dtype=np.float32)
        run = lambda: lib.jit(chain)(x)
    """,
}

HEADER = {
    "ember": """
        import ember as lib, ember.numpy as np_
        lib.config.update("jax_compilation_cache_dir", CACHE)
        lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    """,
    "jax": """
        import jax as lib, jax.numpy as np_
        lib.config.update("jax_platforms", "cpu")
        lib.config.update("jax_compilation_cache_dir", CACHE)
        lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        lib.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    """,
}


def first_call_seconds(library: str, program: str, cache: str) -> float:
    code = "import time, numpy as np\nCACHE = " + repr(cache) + "\n" + textwrap.dedent(HEADER[library]) + \
        textwrap.dedent(PROGRAMS[program]) + textwrap.dedent("""
        start = time.perf_counter()
        out = run()
        np.asarray(out)
        print(time.perf_counter() - start)
    """)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{library} {program}: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'program':16} {'ember cold':>11} {'ember warm':>11} {'jax cold':>9} {'jax warm':>9} "
          f"{'ember w/c':>10} {'jax w/c':>8} {'warm e/j':>9}")
    for program in PROGRAMS:
        row = {}
        for library in ("ember", "jax"):
            cold, warm = [], []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as cache:
                    cold.append(first_call_seconds(library, program, cache))
                    warm.append(first_call_seconds(library, program, cache))
            row[library] = (min(cold), min(warm))
        (ec, ew), (jc, jw) = row["ember"], row["jax"]
        print(f"{program:16} {ec:11.3f} {ew:11.3f} {jc:9.3f} {jw:9.3f} {ew / ec:10.2f} {jw / jc:8.2f} "
              f"{ew / jw:9.2f}")


if __name__ == "__main__":
    main()
