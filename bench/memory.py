"""Peak memory of reverse mode with and without checkpointing (ember.checkpoint / jax.checkpoint), ember and JAX
side by side. Each configuration runs in its own process: the growth of its peak resident set size (ru_maxrss)
over compiling and running one jit(grad) step, with the inputs already in place.

    python3 bench/memory.py

Two networks of tanh(h @ w) layers on float32 activations:
- scan: lax.scan over 16 layers of 4 sub-steps each, the scan body checkpointed (the pattern JAX's docs
  recommend): reverse mode then stacks only each layer's input, not its four intermediate activations;
- blocks: the same 16 layers as a Python loop, checkpointed in blocks of 4 layers: on the XLA CPU backend this
  saves nothing for either library (the CPU scheduler computes the recomputations early).

And the gradient w.r.t. the inputs xs alone of an RNN, h <- tanh(h @ w + x @ u) scanned over 128 steps, with
ember's loop DCE (the scan dce hook) and without it (the hook removed: the forward scan then stacks the states,
the xs and h_t for a weight cotangent nobody asked for, the backward scan carries that cotangent), and JAX; beside
the peak RSS growth, the bytes the grad IR's scans return (stacked residuals and carries) and the size of the
StableHLO program. Measured (2026-11-25, 2-core CPU): ember 325 MiB with loop DCE and 329 MiB without, JAX 554 MiB;
scan outputs 258 MiB against 650 MiB; 46 operations against 67 (JAX: 54). The peak barely moves because XLA's
while-loop simplifier also drops loop values nobody reads; the program handed to XLA no longer carries them.

And buffer donation (jit's donate_argnums): momentum SGD steps over DONATE_MIB of parameters with the parameters and
momentum donated or not: donated, each step writes its outputs into the donated buffers instead of allocating new
ones."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from typing import Any

LAYERS, SUB, BLOCK, WIDTH = 16, 4, 4, 1024
BATCH = {"scan": 4096, "blocks": 8192}  # activations of 16 and 32 MiB
RNN_STEPS, RNN_BATCH = 128, 256  # states of 1 MiB, 128 MiB per stacked sequence
DONATE_MIB = 256  # parameters of the donation case (and as much momentum and gradient)


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


def probe_rnn(lib_name: str, loop_dce: bool) -> tuple[float, float, int]:
    """In this process: the growth of peak RSS (MiB) over compiling and running jit(grad w.r.t. xs) of the RNN,
    the MiB that the scans of its grad IR return (ember only, else 0) and the number of operations of its
    StableHLO program."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np
    if lib_name == "ember":
        import ember as lib
        import ember.numpy as np_
        if not loop_dce:
            from ember._control.loops import scan_p
            del scan_p.rules["dce"]
    else:
        import jax as lib
        import jax.numpy as np_
    rng = np.random.default_rng(0)
    # drawn in float32 and kept alive, so that no freed temporary lowers the peak measured from here
    host = [rng.standard_normal(size=shape, dtype=np.float32) for shape in
            ((WIDTH, WIDTH), (WIDTH, WIDTH), (RNN_BATCH, WIDTH), (RNN_STEPS, RNN_BATCH, WIDTH))]
    for weight in host[:2]:
        weight /= WIDTH ** 0.5
    w, u, h0, xs = (lib.numpy.asarray(a) for a in host)

    def rnn(w: Any, u: Any, h0: Any, xs: Any) -> Any:
        h, _ = lib.lax.scan(lambda h, x: (np_.tanh(h @ w + x @ u),) * 2, h0, xs)
        return np_.sum(h)

    step = lib.jit(lib.grad(rnn, argnums=3))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step(w, u, h0, xs).block_until_ready()
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    program = step.lower(w, u, h0, xs).as_text()
    ops = sum(1 for line in program.splitlines() if " = " in line and '"' not in line.split(" = ")[0])
    if lib_name != "ember":
        return rss, 0.0, ops
    ir = lib.make_ir(lib.grad(rnn, argnums=3))(w, u, h0, xs)
    returned = sum(v.aval.size * v.aval.dtype.itemsize for e in ir.eqns if e.prim.name == "scan" for v in e.outputs)
    return rss, returned / 2**20, ops


def probe_donation(lib_name: str, donate: bool) -> float:
    """In this process: the growth of peak RSS (MiB) over 5 in-place optimizer updates (momentum SGD) of DONATE_MIB
    of parameters, with the parameters and momentum donated to the step or not."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np
    if lib_name == "ember":
        import ember as lib
        import ember.numpy as np_
    else:
        import jax as lib
        import jax.numpy as np_
    n = DONATE_MIB * 2**20 // 4 // 2  # two parameter arrays
    params = [lib.device_put(np.ones(n, np.float32)) for _ in range(2)]
    moms = [lib.device_put(np.zeros(n, np.float32)) for _ in range(2)]
    grads = [lib.device_put(np.full(n, 0.5, np.float32)) for _ in range(2)]

    def update(params, moms, grads):
        moms = [0.9 * m + g for m, g in zip(moms, grads)]
        return [p - 0.01 * m for p, m in zip(params, moms)], moms
    step = lib.jit(update, donate_argnums=(0, 1) if donate else ())
    step.lower(params, moms, grads).compile()  # (the compile's own memory is not counted)
    np_.sum(params[0]).block_until_ready()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(5):
        params, moms = step(params, moms, grads)
    params[0].block_until_ready()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


POLICY_SHAPE = dict(layers=4, batch=8, seq=128, width=256, heads=4)  # a scan over 4 transformer blocks


def policy_table() -> None:
    """XLA's temporary memory (buffer assignment, bytes beyond arguments and outputs: what the forward pass keeps
    for the backward pass is most of it) of jit(grad) of a scan over transformer blocks, the block checkpointed
    with each checkpoint policy, ember and JAX side by side. Offloading policies save on the CPU (no host memory
    space apart from the device's)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name as jax_name
    import ember
    import ember.numpy as enp
    from ember.ad_checkpoint import checkpoint_name
    L, B, T, D, H = (POLICY_SHAPE[k] for k in ("layers", "batch", "seq", "width", "heads"))
    rng = np.random.default_rng(0)
    weights = {"qkv": rng.normal(size=(L, D, 3 * D)) / np.sqrt(D), "out": rng.normal(size=(L, D, D)) / np.sqrt(D),
               "up": rng.normal(size=(L, D, 4 * D)) / np.sqrt(D), "down": rng.normal(size=(L, 4 * D, D)) / 32}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    x = rng.normal(size=(B, T, D)).astype(np.float32)

    def make(lib: Any, np_: Any, name: Any, policy: Any, plain: bool) -> Any:
        def norm(h: Any) -> Any:
            m = h.mean(-1, keepdims=True)
            return (h - m) / np_.sqrt(((h - m) ** 2).mean(-1, keepdims=True) + 1e-5)

        def block(h: Any, w: Any) -> tuple[Any, None]:
            qkv = name(norm(h) @ w["qkv"], "qkv")
            q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, T, H, D // H) for i in range(3))
            scores = np_.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D // H)
            attn = np_.einsum("bhqk,bkhd->bqhd", lib.nn.softmax(scores, axis=-1), v).reshape(B, T, D)
            h = h + name(attn @ w["out"], "attn_out")
            hidden = name(lib.nn.gelu(norm(h) @ w["up"]), "mlp_hidden")
            return h + hidden @ w["down"], None

        body = block if plain else lib.checkpoint(block, policy=policy)

        def loss(ws: Any, x: Any) -> Any:
            return np_.sum(lib.lax.scan(body, x, ws)[0] ** 2)
        return lib.jit(lib.grad(loss))

    def temp_mib(lib: Any, np_: Any, name: Any, policy: Any, plain: bool = False) -> float:
        ws = {k: np_.asarray(v) for k, v in weights.items()}
        compiled = make(lib, np_, name, policy, plain).lower(ws, np_.asarray(x)).compile()
        return compiled.memory_analysis().temp_size_in_bytes / 2 ** 20

    print(f"\njit(grad) of a scan over {L} transformer blocks (batch {B}, {T} tokens, width {D}, {H} heads), the block "
          "checkpointed: XLA's temporary memory")
    print(f"{'policy':48s} {'ember':>9s} {'jax':>9s}")
    names = ("no checkpoint", "nothing_saveable (default)", "everything_saveable", "dots_saveable",
             "dots_with_no_batch_dims_saveable", "save_only_these_names('mlp_hidden')",
             "save_any_names_but_these('mlp_hidden')", "save_from_both_policies(names qkv, no-batch dots)",
             "offload_dot_with_no_batch_dims (saves on the CPU)")

    def chosen(cp: Any) -> list[Any]:
        return [None, cp.nothing_saveable, cp.everything_saveable, cp.dots_saveable,
                cp.dots_with_no_batch_dims_saveable, cp.save_only_these_names("mlp_hidden"),
                cp.save_any_names_but_these("mlp_hidden"),
                cp.save_from_both_policies(cp.save_only_these_names("qkv"), cp.dots_with_no_batch_dims_saveable),
                cp.offload_dot_with_no_batch_dims("device", "pinned_host")]
    for i, (label, ep, jp) in enumerate(zip(names, chosen(ember.checkpoint_policies), chosen(jax.checkpoint_policies))):
        e = temp_mib(ember, enp, checkpoint_name, ep, plain=i == 0)
        j = temp_mib(jax, jnp, jax_name, jp, plain=i == 0)
        print(f"{label:48s} {e:7.1f}MiB {j:7.1f}MiB")


def main() -> None:
    if sys.argv[1:] == ["policies"]:
        policy_table()
        return
    if len(sys.argv) == 4 and sys.argv[2] == "donate":
        print(f"{probe_donation(sys.argv[1], sys.argv[3] == 'on'):.1f}")
        return
    if len(sys.argv) == 4 and sys.argv[2] == "rnn":
        print("{:.1f} {:.1f} {}".format(*probe_rnn(sys.argv[1], sys.argv[3] == "loop-dce")))
        return
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
    print(f"\ngrad w.r.t. xs of an RNN over {RNN_STEPS} steps, {RNN_BATCH}x{WIDTH} states (see the docstring)")
    print(f"{'library':24s} {'peak RSS growth':>16s} {'scan outputs':>14s} {'StableHLO ops':>14s}")
    for lib_name, mode in (("ember", "loop-dce"), ("ember", "no-loop-dce"), ("jax", "loop-dce")):
        rss, returned, ops = (float(v) for v in subprocess.run([sys.executable, __file__, lib_name, "rnn", mode],
                                                               capture_output=True, text=True, check=True
                                                               ).stdout.split())
        label = lib_name if lib_name == "jax" else f"ember, {mode.replace('-', ' ')}"
        print(f"{label:24s} {rss:13.0f}MiB {f'{returned:.0f}MiB' if returned else '-':>14s} {ops:14.0f}")
    print(f"\nmomentum SGD on {DONATE_MIB} MiB of parameters (and as much momentum), peak RSS growth over 5 steps")
    print(f"{'library':10s} {'not donated':>12s} {'donated':>10s}")
    for lib_name in ("ember", "jax"):
        plain, donated = (float(subprocess.run([sys.executable, __file__, lib_name, "donate", mode],
                                               capture_output=True, text=True, check=True).stdout.split()[-1])
                          for mode in ("off", "on"))
        print(f"{lib_name:10s} {plain:10.0f}MiB {donated:8.0f}MiB")


if __name__ == "__main__":
    main()
