"""Data-parallel training on CPU with several processes: each process computes the gradients of its share of the
batch with a jitted function, MPI averages them (ember.distributed.allreduce_gradients), every process applies the
same update. Run it with MPI's launcher (pip install 'ember[distributed]' brings mpi4py and MPICH's mpiexec):

    mpiexec -n 2 python -m mpi4py examples/data_parallel_mpi.py
    mpiexec -n 2 python -m mpi4py examples/data_parallel_mpi.py --check   # and compare with one process

(`-m mpi4py`: an exception in one process ends them all, where the others would wait in MPI for it forever.)
The processes start from different random parameters on purpose: broadcast_parameters gives them process 0's."""
import argparse
import time

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember.tree_util import tree_map


def init_params(rng, sizes):
    return [{"w": (rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32), "b": np.zeros(n, np.float32)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def loss(params, x, labels_onehot):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    logits = x @ params[-1]["w"] + params[-1]["b"]
    return -jnp.mean(jnp.sum(ember.nn.log_softmax(logits) * labels_onehot, axis=-1))


loss_and_grads = ember.jit(ember.value_and_grad(loss))


@ember.jit
def sgd(params, grads, lr):
    return tree_map(lambda p, g: p - lr * g, params, grads)


def data(batch, classes=3):
    """The same synthetic batch in every process (each trains on its own share of it)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(classes, 2)) * 3
    labels = rng.integers(0, classes, size=batch)
    x = (centers[labels] + rng.normal(size=(batch, 2))).astype(np.float32)
    return x, np.eye(classes, dtype=np.float32)[labels]


def train(params, x, y, steps, lr, average=None):
    """steps of SGD on (x, y); average: how the processes combine their gradients (None: one process)."""
    for _ in range(steps):
        value, grads = loss_and_grads(params, x, y)
        if average is not None:
            grads = average(grads)
        params = sgd(params, grads, lr)
    return params, value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=512, help="the global batch, shared out among the processes")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--check", action="store_true",
                        help="also train on the whole batch in one process and compare the parameters")
    return parser.parse_args(argv)


def run(args):
    """Train with every process of the run (after ember.distributed.initialize); with args.check, compare."""
    rank, size = ember.process_index(), ember.process_count()
    if args.batch % size:
        raise SystemExit(f"--batch {args.batch} is not a multiple of the {size} processes")
    x, y = data(args.batch)
    mine = slice(rank * args.batch // size, (rank + 1) * args.batch // size)

    params = init_params(np.random.default_rng(rank), [2, 32, 32, 3])  # different in each process...
    params = ember.distributed.broadcast_parameters(params)  # ...until process 0's are everyone's
    start = time.perf_counter()
    trained, value = train(params, x[mine], y[mine], args.steps, args.lr, ember.distributed.allreduce_gradients)
    seconds = time.perf_counter() - start
    mean_loss = ember.distributed.allreduce_gradients(value)
    if rank == 0:
        print(f"{size} processes, {args.steps} steps of {args.batch // size} examples each: last loss "
              f"{float(mean_loss):.4f} ({seconds:.2f}s, including compilation)")

    if args.check:
        alone, _ = train(params, x, y, args.steps, args.lr)
        difference = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(ember.tree.leaves(trained),
                                                                        ember.tree.leaves(alone)))
        largest = ember.distributed.allreduce_gradients(np.float32(difference), op="max")
        if rank == 0:
            print(f"data-parallel parameters match one process on the whole batch: {bool(largest < 1e-4)} "
                  f"(max |difference| {float(largest):.2e})")
        if not largest < 1e-4:
            raise SystemExit(1)


def main():
    args = parse_args()
    ember.distributed.initialize()  # rank and size from MPI (mpiexec), as jax.distributed.initialize()
    run(args)
    ember.distributed.shutdown()


if __name__ == "__main__":
    main()
