"""Arrays and programs over several CPU devices, ember side by side with JAX (both on the CPU, in one run).

    python3 bench/sharding.py [--quick] [--devices 1 2 4] [--only train|eager]

The number of CPU devices is fixed per process (EMBER_NUM_CPU_DEVICES for ember, JAX_NUM_CPU_DEVICES for JAX, both
read at start-up), so each device count runs in its own subprocess, ember and JAX side by side there on the same
mesh shape (a 1-D mesh "x" of all the devices, Auto axes: both leave the partitioning to XLA's SPMD partitioner).
Times are the median of interleaved rounds (bench/run.py's interleaved_times); a ratio ember/JAX below 1 means
ember is faster. Each library's outputs are checked against the other's before timing.

With --explicit the mesh's axis is Explicit (JAX's explicit sharding mode, make_mesh's default): the shardings are
part of the types, and both libraries constrain each typed value in the program they give XLA.

  train    a data-parallel step of an MLP 784-512-512-10 (softmax cross-entropy, value_and_grad and the SGD update
           in one jit): parameters replicated, the batch split by rows (NamedSharding(mesh, P("x"))), the new
           parameters fed back each step; ms/step at each device count and the speed-up over 1 device
  compile  the first call of that step (trace, lower, SPMD-partition, compile, run; a new function each time, the
           program caches cleared, JAX's persistent cache off): the best of a few
  eager    operations outside jit on arrays sharded by rows over 2 devices (a + b, sin(a), a.sum(), a @ b on
           f32[1024,1024], and on f32[8,8] where the dispatch is all there is), beside the same on one device, and
           a jitted call on one device vs on sharded inputs (the cost of dispatching to 2 devices)

The CPU devices share the machine's cores: on a 2-core machine 2 devices can at best halve a step, and 4 devices
oversubscribe the cores (XLA's CPU client runs max(cores, devices) threads), so the speed-ups say how each library
copes with that, not how it scales on real accelerators."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402
from ember._core.cache import clear_all_caches  # noqa: E402
from run import interleaved_times, mlp_forward  # noqa: E402 (bench/run.py, beside this file)

SIZES = (784, 512, 512, 10)
BATCHES = (1024, 256)
LEARNING_RATE = 0.01


# ---------------------------------------------------------------------------------------------------------------
# one library's side of each benchmark (lib is ember or jax, np_ its numpy)

class Side:
    """One library: its module, numpy module, and the mesh "x" of all its devices with the shardings used here."""

    def __init__(self, lib: Any, np_: Any, sharding: Any):
        self.lib, self.np_ = lib, np_
        kind = sharding.AxisType.Explicit if os.environ.get("BENCH_AXIS_TYPE") == "explicit" else sharding.AxisType.Auto
        self.mesh = sharding.Mesh(np.array(lib.devices()), ("x",), axis_types=(kind,))
        self.rows = sharding.NamedSharding(self.mesh, sharding.PartitionSpec("x"))
        self.replicated = sharding.NamedSharding(self.mesh, sharding.PartitionSpec())
        self.one_device = lib.devices()[0]

    def put(self, x: Any, where: Any) -> Any:
        return self.lib.device_put(x, where)


def ember_side() -> Side:
    return Side(ember, enp, ember.sharding)


def jax_side() -> Side:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_compilation_cache", False)
    return Side(jax, jnp, jax.sharding)


def mlp_data(batch: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    params = [((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
              for m, n in zip(SIZES[:-1], SIZES[1:])]
    x = rng.normal(size=(batch, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], batch)]
    return params, x, y


def make_train_step(side: Side) -> Callable[..., Any]:
    """A new jitted SGD step (params, x, y) -> (loss, new params) of the MLP, in side's library."""
    lib, np_ = side.lib, side.np_

    def loss(params: Any, x: Any, y: Any) -> Any:
        return -np_.mean(np_.sum(lib.nn.log_softmax(mlp_forward(np_, params, x)) * y, axis=-1))

    def step(params: Any, x: Any, y: Any) -> Any:
        value, grads = lib.value_and_grad(loss)(params, x, y)
        return value, lib.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return lib.jit(step)


def placed_mlp(side: Side, batch: int) -> tuple[Any, Any, Any]:
    """The MLP's parameters (replicated) and a batch (split by rows) on side's mesh."""
    params, x, y = mlp_data(batch)
    return side.put(params, side.replicated), side.put(x, side.rows), side.put(y, side.rows)


def train_loop(side: Side, batch: int) -> tuple[Callable[[], Any], Any]:
    """A function running one step (the parameters carried from call to call), and the first step's outputs."""
    step = make_train_step(side)
    params, x, y = placed_mlp(side, batch)
    first = step(params, x, y)
    state = [params]

    def run() -> Any:
        value, state[0] = step(state[0], x, y)
        return value.block_until_ready()
    return run, first


def first_call(side: Side, batch: int, clear: Callable[[], None]) -> Callable[[], Any]:
    """A function making a new jitted train step and calling it once (after clear: emptying the program caches)."""
    params, x, y = placed_mlp(side, batch)

    def call() -> Any:
        clear()
        return make_train_step(side)(params, x, y)[0].block_until_ready()
    return call


def sharding_text(x: Any) -> str:
    """"replicated" (or on one device), else the sharding's spec."""
    return "replicated" if x.sharding.is_fully_replicated else str(getattr(x.sharding, "spec", x.sharding))


def check_close(what: str, ours: Any, theirs: Any, rtol: float = 2e-4, atol: float = 2e-4) -> None:
    for a, b in zip(ember.tree_util.tree_leaves(ours), ember.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


# ---------------------------------------------------------------------------------------------------------------
# the workers (one process per device count)

def worker_train(quick: bool) -> dict[str, Any]:
    e, j = ember_side(), jax_side()
    out: dict[str, Any] = {"devices": len(ember.devices()), "train": {}, "compile": {}, "notes": []}
    number, repeat = (3, 3) if quick else (10, 7)
    for batch in BATCHES:
        erun, efirst = train_loop(e, batch)
        jrun, jfirst = train_loop(j, batch)
        check_close(f"train step, batch {batch}", efirst, jfirst)
        eparams, jparams = efirst[1], jfirst[1]
        if sharding_text(eparams[0][0]) != sharding_text(jparams[0][0]):
            out["notes"].append(f"batch {batch}: new params sharded {sharding_text(eparams[0][0])} in ember, "
                                f"{sharding_text(jparams[0][0])} in JAX")
        n = number * (4 if batch < 1024 else 1)
        out["train"][str(batch)] = interleaved_times([erun, jrun], n, repeat)
    batch = BATCHES[0]
    ecall, jcall = first_call(e, batch, clear_all_caches), first_call(j, batch, lambda: None)
    tries = 2 if quick else 3
    times: list[list[float]] = [[], []]
    for _ in range(tries):
        for fn, t in zip((ecall, jcall), times):
            start = time.perf_counter()
            fn()
            t.append(time.perf_counter() - start)
    out["compile"][str(batch)] = [min(t) for t in times]
    return out


def eager_ops() -> list[tuple[str, Callable[[Any, Any, Any], Any]]]:
    return [("a + b", lambda np_, a, b: a + b), ("sin(a)", lambda np_, a, b: np_.sin(a)),
            ("a.sum()", lambda np_, a, b: a.sum()), ("a @ b", lambda np_, a, b: a @ b)]


def worker_eager(quick: bool) -> dict[str, Any]:
    e, j = ember_side(), jax_side()
    rows: list[tuple[str, float, float]] = []
    repeat = 5 if quick else 11
    rng = np.random.default_rng(1)
    for n, number in ((1024, 5), (8, 400)):
        a, b = (rng.normal(size=(n, n)).astype(np.float32) for _ in range(2))
        for placement in ("one device", "2 devices"):
            where = (lambda s: s.one_device) if placement == "one device" else (lambda s: s.rows)
            ea, eb = e.put(a, where(e)), e.put(b, where(e))
            ja, jb = j.put(a, where(j)), j.put(b, where(j))
            for name, op in eager_ops():
                check_close(f"{name} f32[{n},{n}] on {placement}", op(e.np_, ea, eb), op(j.np_, ja, jb),
                            rtol=1e-4, atol=1e-3 * n)
                fns = [lambda op=op: op(e.np_, ea, eb).block_until_ready(),
                       lambda op=op: op(j.np_, ja, jb).block_until_ready()]
                count = max(1, number // 4) if quick else number
                rows.append((f"eager {name} f32[{n},{n}], {placement}", *interleaved_times(fns, count, repeat)))
    # a jitted call: one device vs the same program on arrays sharded over 2 devices
    a, b = (rng.normal(size=(8, 8)).astype(np.float32) for _ in range(2))
    ef, jf = e.lib.jit(lambda x, y: x * y + 1.0), j.lib.jit(lambda x, y: x * y + 1.0)
    for placement in ("one device", "2 devices"):
        where = (lambda s: s.one_device) if placement == "one device" else (lambda s: s.rows)
        ea, eb, ja, jb = e.put(a, where(e)), e.put(b, where(e)), j.put(a, where(j)), j.put(b, where(j))
        check_close(f"jit f32[8,8] on {placement}", ef(ea, eb), jf(ja, jb))
        fns = [lambda: ef(ea, eb).block_until_ready(), lambda: jf(ja, jb).block_until_ready()]
        rows.append((f"jit x * y + 1 f32[8,8], {placement}",
                     *interleaved_times(fns, 400 if quick else 2000, repeat)))
    return {"devices": len(ember.devices()), "eager": rows}


def run_worker(kind: str, devices: int, quick: bool) -> dict[str, Any]:
    """Run this file as a worker process with `devices` CPU devices for both libraries; its result."""
    env = dict(os.environ, EMBER_NUM_CPU_DEVICES=str(devices), JAX_NUM_CPU_DEVICES=str(devices),
               JAX_PLATFORMS="cpu")
    command = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--devices", str(devices)]
    done = subprocess.run(command + (["--quick"] if quick else []), env=env, capture_output=True, text=True)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"the {kind} worker on {devices} devices failed (exit status {done.returncode})")
    return json.loads(results[-1][len("RESULT "):])


# ---------------------------------------------------------------------------------------------------------------

def print_train(results: Sequence[dict[str, Any]]) -> None:
    print(f"\ntrain: data-parallel MLP {'-'.join(map(str, SIZES))} SGD step, ms/step (speed-up over 1 device)")
    print(f"{'batch':>6s} {'devices':>8s} {'ember':>16s} {'jax':>16s} {'ember/jax':>10s}")
    for batch in map(str, BATCHES):
        base = next((r["train"][batch] for r in results if r["devices"] == 1), None)
        for r in results:
            t = r["train"][batch]
            cells = [f"{t[i] * 1e3:7.2f}" + (f" ({base[i] / t[i]:4.2f}x)" if base else "") for i in range(2)]
            print(f"{batch:>6s} {r['devices']:8d} {cells[0]:>16s} {cells[1]:>16s} {t[0] / t[1]:10.2f}")
    for r in results:
        for note in r["notes"]:
            print(f"  note ({r['devices']} devices): {note}")


def print_compile(results: Sequence[dict[str, Any]]) -> None:
    print("\ncompile: first call of the sharded train step (new function, caches cleared), best of a few, ms")
    print(f"{'batch':>6s} {'devices':>8s} {'ember':>10s} {'jax':>10s} {'ember/jax':>10s}")
    for r in results:
        for batch, (t_ours, t_theirs) in r["compile"].items():
            print(f"{batch:>6s} {r['devices']:8d} {t_ours * 1e3:10.1f} {t_theirs * 1e3:10.1f} "
                  f"{t_ours / t_theirs:10.2f}")


def print_eager(result: dict[str, Any]) -> None:
    print(f"\neager and dispatch, {result['devices']} CPU devices (sharded: rows split over the mesh), us/call")
    print(f"{'operation':45s} {'ember':>10s} {'jax':>10s} {'ember/jax':>10s}")
    for name, t_ours, t_theirs in result["eager"]:
        print(f"{name:45s} {t_ours * 1e6:10.1f} {t_theirs * 1e6:10.1f} {t_ours / t_theirs:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4], help="device counts of the train step")
    parser.add_argument("--only", choices=("train", "eager"), help="one part (train includes the compile times)")
    parser.add_argument("--worker", choices=("train", "eager"), help=argparse.SUPPRESS)
    parser.add_argument("--explicit", action="store_true",
                        help="Explicit mesh axes (JAX's explicit sharding mode: shardings in types) instead of Auto")
    args = parser.parse_args()
    if args.explicit:  # (read by each worker's Side)
        os.environ["BENCH_AXIS_TYPE"] = "explicit"
    if args.worker:
        if len(ember.devices()) != args.devices[0]:
            raise SystemExit(f"worker: asked for {args.devices[0]} devices, ember has {len(ember.devices())}")
        work = worker_train if args.worker == "train" else worker_eager
        print("RESULT " + json.dumps(work(args.quick)), flush=True)
        return
    import jax
    print(f"ember {ember.__version__} vs jax {jax.__version__}, {os.cpu_count()} CPU cores; devices "
          f"{args.devices}, each count in its own process" + (" (quick)" if args.quick else "")
          + f"; load average {os.getloadavg()[0]:.1f} (other work on the machine slows both libraries)")
    if any(n > (os.cpu_count() or 1) for n in args.devices):
        print(f"note: {os.cpu_count()} cores: more devices than cores oversubscribe them (each device's partition "
              "competes for the same cores), so no speed-up is to be expected there")
    if args.only in (None, "train"):
        results = []
        for n in args.devices:
            print(f"(train step on {n} device{'s' if n > 1 else ''} ...)", flush=True)
            results.append(run_worker("train", n, args.quick))
        print_train(results)
        print_compile(results)
    if args.only in (None, "eager"):
        print_eager(run_worker("eager", 2, args.quick))

if __name__ == "__main__":
    main()
