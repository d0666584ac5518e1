"""Peak memory of reverse mode with and without checkpointing (ember.checkpoint / jax.checkpoint), ember and JAX
side by side. Each configuration runs in its own process; the peak resident set size (ru_maxrss) after one
jit(grad) step of a deep tanh network with large activations is compared with the process's size before it.

    python3 bench/memory.py

Measured 2026-11-23 on 2 cores: neither library saves peak RSS with checkpointing at this size on the XLA CPU
plugin (ember 1301 -> 1502 MiB, JAX 599 -> 710 MiB), and ember's plain step peaks at about twice JAX's: both are
open questions for the runtime work (the plugin's buffer assignment and scheduling), kept here to be re-run."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

LAYERS, BLOCK, BATCH, WIDTH = 16, 4, 8192, 1024  # activations: 32 MiB each; 16 layers


def probe(lib_name: str, remat: bool) -> float:
    """In this process: the growth of peak RSS (MiB) over compiling and running one jit(grad) step."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np
    if lib_name == "ember":
        import ember as lib
        import ember.numpy as np_
    else:
        import jax as lib
        import jax.numpy as np_
    rng = np.random.default_rng(0)
    ws = [lib.numpy.asarray(rng.normal(size=(WIDTH, WIDTH)).astype(np.float32) / np.sqrt(WIDTH))
          for _ in range(LAYERS)]
    x = lib.numpy.asarray(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))

    def block(h: object, block_ws: list) -> object:
        for w in block_ws:
            h = np_.tanh(h @ w)
        return h

    def loss(ws: list, x: object) -> object:
        h = x
        for start in range(0, LAYERS, BLOCK):
            run = lib.checkpoint(block) if remat else block
            h = run(h, ws[start:start + BLOCK])
        return np_.sum(h * h)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # inputs in place, nothing compiled yet
    grads = lib.jit(lib.grad(loss))(ws, x)
    lib.tree_util.tree_leaves(grads)[0].block_until_ready()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def main() -> None:
    if len(sys.argv) == 3:
        print(f"{probe(sys.argv[1], sys.argv[2] == 'remat'):.1f}")
        return
    print(f"peak RSS growth of one jit(grad) step: {LAYERS} tanh layers of {BATCH}x{WIDTH} f32 "
          f"(32 MiB activations), checkpoint every {BLOCK} layers")
    print(f"{'':12s} {'plain':>10s} {'checkpoint':>12s} {'saved':>8s}")
    for lib_name in ("ember", "jax"):
        results = []
        for mode in ("plain", "remat"):
            out = subprocess.run([sys.executable, __file__, lib_name, mode], capture_output=True, text=True,
                                 check=True)
            results.append(float(out.stdout.strip().splitlines()[-1]))
        plain, remat = results
        print(f"{lib_name:12s} {plain:8.0f}MiB {remat:10.0f}MiB {1 - remat / plain:7.0%}")


if __name__ == "__main__":
    main()
