"""Peak memory of reverse mode with and without checkpointing (ember.checkpoint / jax.checkpoint), ember and JAX
side by side. Each configuration runs in its own process: the growth of its peak resident set size (ru_maxrss)
over compiling and running one jit(grad) step, with the inputs already in place.

    python3 bench/memory.py

Two networks of tanh(h @ w) layers on float32 activations:
- scan: lax.scan over 16 layers of 4 sub-steps each, the scan body checkpointed (the pattern JAX's docs
  recommend): reverse mode then stacks only each layer's input, not its four intermediate activations;
- blocks: the same 16 layers as a Python loop, checkpointed in blocks of 4 layers: on the XLA CPU backend this
  saves nothing for either library (the CPU scheduler computes the recomputations early)."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from typing import Any

LAYERS, SUB, BLOCK, WIDTH = 16, 4, 4, 1024
BATCH = {"scan": 4096, "blocks": 8192}  # activations of 16 and 32 MiB


def probe(lib_name: str, network: str, remat: bool) -> float:
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
    ws = lib.numpy.asarray((rng.normal(size=(LAYERS, WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32))
    x = lib.numpy.asarray(rng.normal(size=(BATCH[network], WIDTH)).astype(np.float32))
    maybe_remat = lib.checkpoint if remat else (lambda f: f)

    def layer(h: Any, w: Any) -> Any:
        for _ in range(SUB):
            h = np_.tanh(h @ w)
        return h

    def scan_net(ws: Any, x: Any) -> Any:
        body = maybe_remat(layer)
        h, _ = lib.lax.scan(lambda h, w: (body(h, w), None), x, ws)
        return np_.sum(h * h)

    def block(h: Any, block_ws: Any) -> Any:
        for i in range(BLOCK):
            h = np_.tanh(h @ block_ws[i])
        return h

    def blocks_net(ws: Any, x: Any) -> Any:
        h = x
        for start in range(0, LAYERS, BLOCK):
            h = maybe_remat(block)(h, ws[start:start + BLOCK])
        return np_.sum(h * h)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    grads = lib.jit(lib.grad(scan_net if network == "scan" else blocks_net))(ws, x)
    grads.block_until_ready()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def main() -> None:
    if len(sys.argv) == 4:
        print(f"{probe(sys.argv[1], sys.argv[2], sys.argv[3] == 'remat'):.1f}")
        return
    print("peak RSS growth of one jit(grad) step, tanh(h @ w) layers (see the docstring)")
    print(f"{'network':40s} {'library':8s} {'plain':>10s} {'checkpoint':>12s} {'saved':>7s}")
    labels = {"scan": f"scan over {LAYERS} layers x {SUB}, {BATCH['scan']}x{WIDTH}",
              "blocks": f"{LAYERS} layers, blocks of {BLOCK}, {BATCH['blocks']}x{WIDTH}"}
    for network in ("scan", "blocks"):
        for lib_name in ("ember", "jax"):
            plain, remat = (float(subprocess.run([sys.executable, __file__, lib_name, network, mode],
                                                 capture_output=True, text=True, check=True).stdout.split()[-1])
                            for mode in ("plain", "remat"))
            print(f"{labels[network]:40s} {lib_name:8s} {plain:8.0f}MiB {remat:10.0f}MiB {1 - remat / plain:7.0%}")


if __name__ == "__main__":
    main()
