"""Benchmarks: ember side by side with JAX (and PyTorch where relevant, when installed), in one run, on the same
machine. Prints times and ratios.

    python3 -m pip install -e ".[bench]" && python3 bench/run.py [--quick] [--only SUBSTRING] [--roofline]

Each benchmark times rounds of calls of each library in turn (interleaved, so that a slow spell of the machine
hits both) and reports the median round. A ratio below 1 means ember is faster. All run on the CPU
(JAX_PLATFORMS=cpu). With --roofline, a table at the end gives each row's least work, its bound at this machine's
peaks and the fraction of it that ember and JAX reach (bench/roofline.py, bench/peaks.py)."""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import timeit
from functools import partial
from typing import Any, Callable, NamedTuple, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import peaks  # noqa: E402 (bench/peaks.py, beside this file)
import roofline  # noqa: E402 (bench/roofline.py: the rows' work and the report)

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402
import ember.scipy.special  # noqa: E402,F401 (the erf_inv rows)
from ember._core.cache import clear_all_caches  # noqa: E402 (the program caches, without ember.clear_caches's gc)


def interleaved_times(fns: Sequence[Callable[[], Any]], number: int, repeat: int) -> list[float]:
    """For each function, the median over `repeat` rounds of its mean seconds per call in a round of `number`
    calls; the rounds of the functions alternate (after a warm-up call of each)."""
    for fn in fns:
        fn()
    rounds: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, times in zip(fns, rounds):
            times.append(timeit.timeit(fn, number=number) / number)
    return [float(np.median(times)) for times in rounds]


def torch_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)
    return torch


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


class Mlp(NamedTuple):
    """The 3-layer MLP problem of the mlp_grad benchmark, as ember and as JAX arrays: params (a list of (w, b)
    pairs), a batch x, y of 128 examples (64 features in, 10 out), and the mean-squared-error loss for each
    library (which also takes a single example: x of shape (64,), y of shape (10,))."""
    eparams: Any
    jparams: Any
    ex: Any
    ey: Any
    jx: Any
    jy: Any
    eloss: Callable[..., Any]
    jloss: Callable[..., Any]
    rng: np.random.Generator


def mlp_forward(np_: Any, params: Any, x: Any) -> Any:
    """An MLP's output: x through the (w, b) layers of params, tanh between them."""
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = np_.tanh(h)
    return h


def mlp_problem(jax: Any, jnp: Any) -> Mlp:
    rng = np.random.default_rng(0)
    sizes = [(64, 256), (256, 256), (256, 10)]
    params = [(rng.normal(size=s).astype(np.float32) * 0.05, np.zeros(s[1], np.float32)) for s in sizes]
    x = rng.normal(size=(128, 64)).astype(np.float32)
    y = rng.normal(size=(128, 10)).astype(np.float32)

    def make_loss(np_: Any) -> Callable[..., Any]:
        def loss(params: Any, x: Any, y: Any) -> Any:
            return np_.mean((mlp_forward(np_, params, x) - y) ** 2)
        return loss

    return Mlp(ember.tree_util.tree_map(ember.asarray, params), jax.tree_util.tree_map(jnp.asarray, params),
               ember.asarray(x), ember.asarray(y), jnp.asarray(x), jnp.asarray(y), make_loss(enp), make_loss(jnp),
               rng)


def mlp_grad(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    m = mlp_problem(jax, jnp)
    eparams, jparams, ex, ey, jx, jy = m.eparams, m.jparams, m.ex, m.ey, m.jx, m.jy
    ef = ember.jit(ember.grad(m.eloss))
    jf = jax.jit(jax.grad(m.jloss))
    return (lambda: ef(eparams, ex, ey)[0][0].block_until_ready()), \
        (lambda: jf(jparams, jx, jy)[0][0].block_until_ready())


def eager_add(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    x = np.arange(4, dtype=np.float32)
    ex, jx = ember.asarray(x), jnp.asarray(x)
    return (lambda: (ex + ex).block_until_ready()), (lambda: (jx + jx).block_until_ready())


def eager_add_torch() -> Callable[[], Any] | None:
    torch = torch_or_none()
    if torch is None:
        return None
    tx = torch.arange(4, dtype=torch.float32)
    return lambda: tx + tx


def eager_scalar_mul(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    x = np.arange(4, dtype=np.float32)
    ex, jx = ember.asarray(x), jnp.asarray(x)
    return (lambda: (ex * 2.0).block_until_ready()), (lambda: (jx * 2.0).block_until_ready())


def eager_op(op: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """An eager operation op(numpy module, x f32[4], m f32[3,4]) in each library."""
    def make(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        x, m = np.arange(4, dtype=np.float32), np.ones((3, 4), np.float32)
        ex, em, jx, jm = ember.asarray(x), ember.asarray(m), jnp.asarray(x), jnp.asarray(m)
        return (lambda: op(enp, ex, em).block_until_ready()), (lambda: op(jnp, jx, jm).block_until_ready())
    return make


def eager_distinct_rows(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """200 reads x[i] outside jit, each call the next 200 rows of f32[65536,16]: no row is read twice in a run, so
    a cache keyed by the index's value (rather than its structure) would compile for every read."""
    x = np.random.default_rng(0).normal(size=(65536, 16)).astype(np.float32)

    def reader(array: Any) -> Callable[[], Any]:
        firsts = itertools.count(0, 200)

        def read() -> Any:
            first = next(firsts) % (x.shape[0] - 200)
            return [array[i] for i in range(first, first + 200)][-1].block_until_ready()
        return read
    return reader(ember.asarray(x)), reader(jnp.asarray(x))


# ---------------------------------------------------------------------------------------------------------------
# Calling conventions: the same tiny program (an add of f32[4]s) called with pytrees, keywords, static arguments
# and numpy inputs, each a signature the dispatch must compute on every call.
def calling(convention: str) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        x = np.arange(4, dtype=np.float32)
        e, j = ember.asarray(x), jnp.asarray(x)
        if convention == "numpy":
            ef, jf = ember.jit(lambda a, b: a + b), jax.jit(lambda a, b: a + b)
            return (lambda: ef(x, x).block_until_ready()), (lambda: jf(x, x).block_until_ready())
        if convention == "list":
            def total(xs: Any) -> Any:
                out = xs[0]
                for v in xs[1:]:
                    out = out + v
                return out
            ef, jf = ember.jit(total), jax.jit(total)
            el, jl = [e] * 10, [j] * 10
            return (lambda: ef(el).block_until_ready()), (lambda: jf(jl).block_until_ready())
        if convention == "dict":
            def affine(p: Any, v: Any) -> Any:
                return p["w"] * v + p["b"]
            ef, jf = ember.jit(affine), jax.jit(affine)
            ep, jp = {"w": e, "b": e}, {"w": j, "b": j}
            return (lambda: ef(ep, e).block_until_ready()), (lambda: jf(jp, j).block_until_ready())
        if convention == "kwargs":
            ef, jf = ember.jit(lambda a, b: a + b), jax.jit(lambda a, b: a + b)
            return (lambda: ef(e, b=e).block_until_ready()), (lambda: jf(j, b=j).block_until_ready())
        if convention == "static":
            ef = ember.jit(lambda a, n: a * n, static_argnums=1)
            jf = jax.jit(lambda a, n: a * n, static_argnums=1)
            return (lambda: ef(e, 3).block_until_ready()), (lambda: jf(j, 3).block_until_ready())
        raise ValueError(convention)
    bench.__name__ = f"calling_{convention}"
    return bench


def to_numpy(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """np.asarray of a fresh jitted result (the device -> host path, with the call)."""
    x = np.arange(4, dtype=np.float32)
    e, j = ember.asarray(x), jnp.asarray(x)
    ef, jf = ember.jit(lambda a: a * 2), jax.jit(lambda a: a * 2)
    return (lambda: np.asarray(ef(e))), (lambda: np.asarray(jf(j)))


def from_numpy(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """device_put of a numpy array f32[256, 256] (the host -> device path)."""
    x = np.random.default_rng(0).normal(size=(256, 256)).astype(np.float32)
    return (lambda: ember.device_put(x).block_until_ready()), (lambda: jax.device_put(x).block_until_ready())


# ---------------------------------------------------------------------------------------------------------------
# Compiled programs: reductions and a training step, where XLA's code (not the dispatch) is the cost.
def sum_1e7(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    x = np.random.default_rng(0).normal(size=10_000_000).astype(np.float32)
    ef, jf = ember.jit(enp.sum), jax.jit(jnp.sum)
    return checked_pair(jax, ef, (ember.asarray(x),), jf, (jnp.asarray(x),))


def softmax(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """softmax over the last axis of f32[1024, 1024]."""
    x = np.random.default_rng(0).normal(size=(1024, 1024)).astype(np.float32)

    def make(np_: Any) -> Callable[[Any], Any]:
        def softmax(v: Any) -> Any:
            z = np_.exp(v - np_.max(v, axis=-1, keepdims=True))
            return z / np_.sum(z, axis=-1, keepdims=True)
        return softmax
    return checked_pair(jax, ember.jit(make(enp)), (ember.asarray(x),), jax.jit(make(jnp)), (jnp.asarray(x),))


def sgd_loop(step: Callable[..., Any], params: Any, x: Any, y: Any) -> Callable[[], Any]:
    """A timed call of step(params, x, y) -> (loss, new params) that feeds the new parameters back each call."""
    state = [params]

    def run() -> Any:
        value, state[0] = step(state[0], x, y)
        return value.block_until_ready()
    return run


def mlp_train_step(batch: int) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """One SGD step of the 3-layer MLP (jit(value_and_grad) and the parameter update in one program), with the
    new parameters fed back each call, at a batch of `batch` examples."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        m = mlp_problem(jax, jnp)
        x = m.rng.normal(size=(batch, 64)).astype(np.float32)
        y = m.rng.normal(size=(batch, 10)).astype(np.float32)

        def make(lib: Any, loss: Callable[..., Any]) -> Callable[..., Any]:
            def step(params: Any, x: Any, y: Any) -> Any:
                value, grads = lib.value_and_grad(loss)(params, x, y)
                return value, lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
            return lib.jit(step)
        estep, jstep = make(ember, m.eloss), make(jax, m.jloss)
        ex, ey, jx, jy = ember.asarray(x), ember.asarray(y), jnp.asarray(x), jnp.asarray(y)
        checked_pair(jax, estep, (m.eparams, ex, ey), jstep, (m.jparams, jx, jy))
        return sgd_loop(estep, m.eparams, ex, ey), sgd_loop(jstep, m.jparams, jx, jy)
    bench.__name__ = f"mlp_train_step_{batch}"
    return bench


def mnist_fromscratch_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One SGD step of JAX's examples/mnist_classifier_fromscratch.py as its users write it: parameters made with
    numpy (float64: both libraries compute in float32 without 64-bit mode), 784-1024-1024-10 tanh, batch 128,
    the batch given as numpy arrays each call."""
    rng = np.random.RandomState(0)
    params = [(0.1 * rng.randn(m, n), 0.1 * rng.randn(n)) for m, n in zip([784, 1024, 1024], [1024, 1024, 10])]
    images = rng.rand(128, 784)
    labels = np.eye(10)[rng.randint(0, 10, 128)]

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        def predict(params: Any, inputs: Any) -> Any:
            activations = inputs
            for w, b in params[:-1]:
                activations = np_.tanh(np_.dot(activations, w) + b)
            w, b = params[-1]
            logits = np_.dot(activations, w) + b
            return logits - lib.scipy.special.logsumexp(logits, axis=1, keepdims=True)

        def loss(params: Any, x: Any, y: Any) -> Any:
            return -np_.mean(np_.sum(predict(params, x) * y, axis=1))

        @lib.jit
        def update(params: Any, x: Any, y: Any) -> Any:
            value, grads = lib.value_and_grad(loss)(params, x, y)
            return value, [(w - 0.001 * dw, b - 0.001 * db) for (w, b), (dw, db) in zip(params, grads)]
        return update
    estep, jstep = make(ember, enp), make(jax, jnp)
    evalue, jvalue = estep(params, images, labels)[0], jstep(params, images, labels)[0]
    assert evalue.dtype == jvalue.dtype == np.float32, (evalue.dtype, jvalue.dtype)
    np.testing.assert_allclose(float(evalue), float(jvalue), rtol=1e-5)
    e_state, j_state = [params], [params]

    def run_e() -> Any:
        value, e_state[0] = estep(e_state[0], images, labels)
        return value.block_until_ready()

    def run_j() -> Any:
        value, j_state[0] = jstep(j_state[0], images, labels)
        return value.block_until_ready()
    return run_e, run_j


def grad_fresh_closure(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """grad without jit of a new closure each call (the loss closing over the batch), as in a training loop
    written `grad(lambda p: loss(p, x, y))(params)`."""
    m = mlp_problem(jax, jnp)
    eparams, jparams, ex, ey, jx, jy = m.eparams, m.jparams, m.ex, m.ey, m.jx, m.jy
    eloss, jloss = m.eloss, m.jloss
    return (lambda: ember.grad(lambda p: eloss(p, ex, ey))(eparams)[0][0].block_until_ready()), \
        (lambda: jax.grad(lambda p: jloss(p, jx, jy))(jparams)[0][0].block_until_ready())


# ---------------------------------------------------------------------------------------------------------------
# Transformations: vmap, forward mode, Jacobians. Each checks first that ember and JAX agree on the result.
def checked_pair(jax: Any, ef: Callable[..., Any], eargs: Sequence[Any], jf: Callable[..., Any],
                 jargs: Sequence[Any]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The timed calls ef(*eargs) and jf(*jargs), each blocking on one output leaf, after checking that the two
    give the same result (as many leaves, each of the same shape and dtype and equal to rtol 1e-4)."""
    eout, jout = ef(*eargs), jf(*jargs)
    eleaves, etree = ember.tree.flatten(eout)
    jleaves, jtree = jax.tree.flatten(jout)
    assert etree.num_leaves == jtree.num_leaves, (etree, jtree)
    for e, j in zip(eleaves, (np.asarray(j) for j in jleaves)):
        # float32 sums in another order: elements far below the leaf's scale differ more than rtol
        np.testing.assert_allclose(np.asarray(e), j, rtol=1e-4, atol=1e-4 * float(np.abs(j).max()), strict=True)
    return (lambda: ember.tree.leaves(ef(*eargs))[0].block_until_ready()), \
        (lambda: jax.tree.leaves(jf(*jargs))[0].block_until_ready())


def ref_row_update(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A jitted function taking a Ref f32[1024,256] and updating one row of it in place (docs/refs.md): the
    dispatch of a call that reads and writes a Ref, and the program's in-place update."""
    def make(lib: Any, np_: Any) -> Callable[[], Any]:
        ref = lib.new_ref(np_.zeros((1024, 256), np_.float32))
        step = lib.jit(lambda r, i, v: r.__setitem__(i, r[i] * 0.5 + v))
        v, i = np_.ones(256, np_.float32), np_.int32(3)

        def run() -> Any:
            step(ref, i, v)
            return ref[0, 0]
        run()
        return run
    e, j = make(ember, ember.numpy), make(jax, jnp)
    return (lambda: e().block_until_ready()), (lambda: j().block_until_ready())


def ref_microbatch_grads(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """JAX's Ref guide recipe: gradients of 8 microbatches accumulated into a Ref inside a scan, under jit."""
    rng = np.random.default_rng(0)
    ws, batch = (rng.normal(size=(3, 64, 64)) * 0.2).astype(np.float32), rng.normal(size=(256, 64)).astype(np.float32)

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        def loss(w: Any, xs: Any) -> Any:
            act, _ = lib.lax.scan(lambda x, wi: (np_.tanh(x @ wi), None), xs, w)
            return np_.mean(act)

        @lib.jit
        def process_batch(w: Any, xs_batch: Any) -> Any:
            grad_acc = lib.new_ref(np_.zeros_like(w))

            def step(_: Any, xs: Any) -> Any:
                value, grads = lib.value_and_grad(loss)(w, xs)
                grad_acc[...] += grads
                return (), value
            (), losses = lib.lax.scan(step, (), xs_batch.reshape(8, 32, -1))
            return lib.freeze(grad_acc), losses
        return process_batch
    return checked_pair(jax, make(ember, ember.numpy), (ember.asarray(ws), ember.asarray(batch)),
                        make(jax, jnp), (jnp.asarray(ws), jnp.asarray(batch)))


def per_example_grad(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    m = mlp_problem(jax, jnp)
    ef = ember.jit(ember.vmap(ember.grad(m.eloss), in_axes=(None, 0, 0)))
    jf = jax.jit(jax.vmap(jax.grad(m.jloss), in_axes=(None, 0, 0)))
    return checked_pair(jax, ef, (m.eparams, m.ex, m.ey), jf, (m.jparams, m.jx, m.jy))


def mlp_hvp(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Hessian-vector product of the MLP loss in the params, forward over reverse; the batch is passed as
    arguments (not closed over) so that neither library folds it into the program as a constant."""
    m = mlp_problem(jax, jnp)
    v = [(m.rng.normal(size=w.shape).astype(np.float32), m.rng.normal(size=b.shape).astype(np.float32))
         for w, b in m.eparams]
    ev, jv = ember.tree_util.tree_map(ember.asarray, v), jax.tree_util.tree_map(jnp.asarray, v)

    def make_hvp(lib: Any, loss: Callable[..., Any]) -> Callable[..., Any]:
        return lib.jit(lambda p, v, x, y: lib.jvp(lib.grad(lambda p: loss(p, x, y)), (p,), (v,))[1])
    return checked_pair(jax, make_hvp(ember, m.eloss), (m.eparams, ev, m.ex, m.ey),
                        make_hvp(jax, m.jloss), (m.jparams, jv, m.jx, m.jy))


def small_jacobian(jacobian: str) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """jit(jacfwd(f)) or jit(jacrev(f)) of f(x, w, b) = tanh(w @ x + b) in x, with w 64x64: a 64x64 Jacobian."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        rng = np.random.default_rng(0)
        w = (rng.normal(size=(64, 64)) / 8).astype(np.float32)
        b, x = (rng.normal(size=64).astype(np.float32) for _ in range(2))
        ef = ember.jit(getattr(ember, jacobian)(lambda x, w, b: enp.tanh(w @ x + b)))
        jf = jax.jit(getattr(jax, jacobian)(lambda x, w, b: jnp.tanh(w @ x + b)))
        return checked_pair(jax, ef, [ember.asarray(a) for a in (x, w, b)], jf, [jnp.asarray(a) for a in (x, w, b)])
    bench.__name__ = f"small_{jacobian}"
    return bench


def eager_vmap(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """vmap without jit, the vmapped function made once and called again and again with the same shapes."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(64, 64)).astype(np.float32)
    xs = rng.normal(size=(128, 64)).astype(np.float32)
    ew, jw = ember.asarray(w), jnp.asarray(w)
    ef = ember.vmap(lambda x: x @ ew)
    jf = jax.vmap(lambda x: x @ jw)
    return checked_pair(jax, ef, (ember.asarray(xs),), jf, (jnp.asarray(xs),))


# ---------------------------------------------------------------------------------------------------------------
# Control flow: a long scan differentiated in reverse mode, a long fori_loop, and what each costs to compile.
# A problem, given a library (ember or jax), its numpy and its asarray, is (make, args): make() is a new jitted
# function each time (a new function object, so no cache of either library is hit), called with args.
Problem = Callable[[Any, Any, Callable[[Any], Any]], tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]]


def rnn_problem(lib: Any, np_: Any, asarray: Callable[[Any], Any]
                ) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    """jit(value_and_grad(loss)) of an RNN over 1000 steps with lax.scan, hidden size 64, input size 32:
    h_{t+1} = tanh(x_t @ Wx + h_t @ Wh + b), loss = mean(h_1000 ** 2) + mean(all h_t), in params (Wx, Wh, b)."""
    rng = np.random.default_rng(0)
    params = ((rng.normal(size=(32, 64)) / np.sqrt(32)).astype(np.float32),
              (rng.normal(size=(64, 64)) / 8).astype(np.float32), (rng.normal(size=64) * 0.1).astype(np.float32))
    xs = rng.normal(size=(1000, 32)).astype(np.float32)
    h0 = np.zeros(64, np.float32)

    def make() -> Callable[..., Any]:
        def loss(params: Any, xs: Any, h0: Any) -> Any:
            wx, wh, b = params

            def step(h: Any, x: Any) -> tuple[Any, Any]:
                h = np_.tanh(x @ wx + h @ wh + b)
                return h, h
            h, hs = lib.lax.scan(step, h0, xs)
            return np_.mean(h ** 2) + np_.mean(hs)
        return lib.jit(lib.value_and_grad(loss))
    return make, (tuple(asarray(p) for p in params), asarray(xs), asarray(h0))


def fori_problem(lib: Any, np_: Any, asarray: Callable[[Any], Any]
                 ) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    """jit of a 1000-iteration lax.fori_loop (static bounds) updating a float32[256] vector with
    v = v * 0.999 + sin(v) * 0.001."""
    v = np.random.default_rng(0).normal(size=256).astype(np.float32)

    def make() -> Callable[..., Any]:
        def run(v: Any) -> Any:
            return lib.lax.fori_loop(0, 1000, lambda i, v: v * 0.999 + np_.sin(v) * 0.001, v)
        return lib.jit(run)
    return make, (asarray(v),)


def while_grad_problem(lib: Any, np_: Any, asarray: Callable[[Any], Any]
                       ) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    """jit(grad) of 1000 steps of v = tanh(v @ W) * 0.5 + v * 0.5 (float32[256], W 256x256) through a
    lax.while_loop whose trip count is traced (ember: checkpointed reverse mode, docs/while_grad.md) against JAX's
    grad of the same loop as a fori_loop with static bounds (a scan: JAX refuses the while_loop)."""
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(256, 256)) / 16).astype(np.float32)
    v = rng.normal(size=256).astype(np.float32)

    def make() -> Callable[..., Any]:
        def step(i: Any, v: Any, w: Any) -> Any:
            return np_.tanh(v @ w) * 0.5 + v * 0.5

        def loss(w: Any, v: Any) -> Any:
            if lib is ember:  # (a traced bound: a while_loop)
                return np_.sum(lib.lax.fori_loop(0, np_.asarray(1000, np_.int32), lambda i, v: step(i, v, w), v))
            return np_.sum(lib.lax.fori_loop(0, 1000, lambda i, v: step(i, v, w), v))
        return lib.jit(lib.grad(loss))
    return make, (asarray(w), asarray(v))


def run_time(problem: Problem) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """Calls of one jitted function per library (compiled once), checked against each other first."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        (emake, eargs), (jmake, jargs) = problem(ember, enp, ember.asarray), problem(jax, jnp, jnp.asarray)
        return checked_pair(jax, emake(), eargs, jmake(), jargs)
    bench.__name__ = f"run_{problem.__name__}"
    return bench


def compile_time(problem: Problem, shared_programs: bool = False
                 ) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """The first call of a freshly made jitted function (trace, lower, compile, run): each timed call makes a new
    function object, so neither library's per-function caches are hit (JAX's persistent compilation cache is
    turned off). ember's process-wide program caches (which find the executable of a new function that stages out
    to the same program) are cleared before each call too, unless shared_programs: then the time is that of a
    new function whose program was compiled before (JAX compiles it again)."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        jax.config.update("jax_enable_compilation_cache", False)
        (emake, eargs), (jmake, jargs) = problem(ember, enp, ember.asarray), problem(jax, jnp, jnp.asarray)

        def ours() -> Any:
            if not shared_programs:
                clear_all_caches()
            return ember.tree.leaves(emake()(*eargs))[0].block_until_ready()
        return ours, (lambda: jax.tree.leaves(jmake()(*jargs))[0].block_until_ready())
    bench.__name__ = f"compile_{problem.__name__}"
    return bench


# ---------------------------------------------------------------------------------------------------------------
# Indexing: an embedding lookup (gather) and its gradient (scatter-add), as in a language model's input layer.
def embedding_grad(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """value_and_grad of a bag-of-embeddings loss in the table: a vocabulary of 32768 x 128, 64 x 128 token ids
    (repeated ids accumulate), looked up, averaged per row, and scored against targets."""
    rng = np.random.default_rng(0)
    table = (rng.normal(size=(32768, 128)) / 10).astype(np.float32)
    ids = rng.integers(0, 32768, size=(64, 128)).astype(np.int32)
    targets = rng.normal(size=(64, 128)).astype(np.float32)

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        def loss(table: Any, ids: Any, targets: Any) -> Any:
            return np_.mean((table[ids].mean(axis=1) - targets) ** 2)
        return lib.jit(lib.value_and_grad(loss))
    return checked_pair(jax, make(ember, enp), [ember.asarray(a) for a in (table, ids, targets)],
                        make(jax, jnp), [jnp.asarray(a) for a in (table, ids, targets)])


def take_along_axis_bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The log-probabilities of labels, take_along_axis over f32[1024,1000] (a classifier's loss), and its grad."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(1024, 1000)).astype(np.float32)
    labels = rng.integers(0, 1000, size=(1024, 1)).astype(np.int32)

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        return lib.jit(lib.grad(lambda z, y: -np_.take_along_axis(z, y, axis=1).mean()))
    return checked_pair(jax, make(ember, enp), [ember.asarray(logits), ember.asarray(labels)],
                        make(jax, jnp), [jnp.asarray(logits), jnp.asarray(labels)])


def sort_input(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(2).normal(size=shape).astype(np.float32)


def sort_case(fn_name: str, shape: tuple[int, ...], **kwargs: Any
              ) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """A sort-family function (enp/jnp.`fn_name`(x, **kwargs)) of a float32 normal array, jitted."""
    x = sort_input(shape)

    def pair(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        ef = ember.jit(lambda a: getattr(enp, fn_name)(a, **kwargs))
        jf = jax.jit(lambda a: getattr(jnp, fn_name)(a, **kwargs))
        return checked_pair(jax, ef, [ember.asarray(x)], jf, [jnp.asarray(x)])
    return pair


def numpy_case(fn_name: str, shape: tuple[int, ...], **kwargs: Any) -> Callable[[], Callable[[], Any]]:
    """The third column of a sort row: numpy's own function on the same input (its SIMD sort, on one core)."""
    def make() -> Callable[[], Any]:
        x = sort_input(shape)
        return lambda: getattr(np, fn_name)(x, **kwargs)
    make.library = "numpy"  # type: ignore[attr-defined]
    return make


# float32 transcendentals of f32[2^22] (sin: ember's kernel, ember/_runtime/vmath.h; tan, log1p, erf_inv, tanh: XLA's
# ops in both, see backend_forms.KERNEL_OPS), on inputs where each lives; the third column numpy's (float32 ufuncs,
# scipy's erfinv).
TRANSCENDENTALS = {"sin": (-100.0, 100.0), "tan": (-1.5, 1.5), "log1p": (-0.9, 100.0), "erf_inv": (-1.0, 1.0),
                   "tanh": (-10.0, 10.0)}


def transcendental_input(name: str) -> np.ndarray:
    lo, hi = TRANSCENDENTALS[name]
    return np.random.default_rng(5).uniform(lo, hi, 1 << 22).astype(np.float32)


def transcendental_case(name: str) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    def pair(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        x = transcendental_input(name)
        ef = ember.jit(ember.scipy.special.erfinv if name == "erf_inv" else getattr(enp, name))
        jf = jax.jit(jax.scipy.special.erfinv if name == "erf_inv" else getattr(jnp, name))
        return checked_pair(jax, ef, [ember.asarray(x)], jf, [jnp.asarray(x)])
    return pair


def transcendental_numpy(name: str) -> Callable[[], Callable[[], Any]]:
    def make() -> Callable[[], Any]:
        import scipy.special
        x = transcendental_input(name)
        fn = scipy.special.erfinv if name == "erf_inv" else getattr(np, name)
        return lambda: fn(x)
    make.library = "numpy"  # type: ignore[attr-defined]
    return make


def top_k_case(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """lax.top_k(k=10) of f32[1000,1000] (rows of a classifier's scores)."""
    x = np.random.default_rng(3).normal(size=(1000, 1000)).astype(np.float32)
    return checked_pair(jax, ember.jit(lambda a: ember.lax.top_k(a, 10)), [ember.asarray(x)],
                        jax.jit(lambda a: jax.lax.top_k(a, 10)), [jnp.asarray(x)])


def approx_max_k_case(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """lax.approx_max_k(k=10) of f32[1000,1000] (on the CPU JAX's runs its exact fallback, and so does ember's)."""
    x = np.random.default_rng(3).normal(size=(1000, 1000)).astype(np.float32)
    return checked_pair(jax, ember.jit(lambda a: ember.lax.approx_max_k(a, 10)), [ember.asarray(x)],
                        jax.jit(lambda a: jax.lax.approx_max_k(a, 10)), [jnp.asarray(x)])


def ragged_dot_case(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """lax.ragged_dot of f32[4096,256] rows in 8 groups of uneven sizes (one empty) with f32[8,256,256]: JAX's CPU
    form masks the rows once per group (8 dots' work); ember's gathers each group's rows into tiles (one dot's)."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4096, 256)).astype(np.float32)
    w = (rng.normal(size=(8, 256, 256)) / 16).astype(np.float32)
    sizes = np.array([500, 600, 0, 700, 300, 800, 696, 500], np.int32)
    return checked_pair(jax, ember.jit(ember.lax.ragged_dot), [ember.asarray(a) for a in (x, w, sizes)],
                        jax.jit(jax.lax.ragged_dot), [jnp.asarray(a) for a in (x, w, sizes)])


def rng_bit_generator_case(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """lax.rng_bit_generator: 10^6 uint32 random bits and the next key (XLA's Philox on the CPU), jitted; the same
    bits in both (checked)."""
    key = np.array([1, 2, 3, 4], np.uint32)
    return checked_pair(jax, ember.jit(lambda k: ember.lax.rng_bit_generator(k, (10 ** 6,))), [ember.asarray(key)],
                        jax.jit(lambda k: jax.lax.rng_bit_generator(k, (10 ** 6,))), [jnp.asarray(key)])


def cnn_train_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """value_and_grad of a small CNN's loss, batch 64 of 28x28x1 (NHWC): conv 3x3x16, relu, 2x2 max pool,
    conv 3x3x32, relu, 2x2 max pool, dense to 10 classes, softmax cross-entropy with integer labels."""
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(3, 3, 1, 16)) / 3).astype(np.float32), np.zeros(16, np.float32),
              (rng.normal(size=(3, 3, 16, 32)) / 12).astype(np.float32), np.zeros(32, np.float32),
              (rng.normal(size=(7 * 7 * 32, 10)) / 40).astype(np.float32), np.zeros(10, np.float32)]
    images = rng.normal(size=(64, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, size=(64,)).astype(np.int32)

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        lax = lib.lax
        dn = ("NHWC", "HWIO", "NHWC")

        def pool(x: Any) -> Any:
            return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

        def loss(p: Any, x: Any, y: Any) -> Any:
            x = pool(np_.maximum(lax.conv_general_dilated(x, p[0], (1, 1), "SAME", dimension_numbers=dn) + p[1], 0))
            x = pool(np_.maximum(lax.conv_general_dilated(x, p[2], (1, 1), "SAME", dimension_numbers=dn) + p[3], 0))
            logits = x.reshape(x.shape[0], -1) @ p[4] + p[5]
            logp = logits - np_.log(np_.sum(np_.exp(logits - logits.max(axis=1, keepdims=True)), axis=1,
                                            keepdims=True)) - logits.max(axis=1, keepdims=True)
            return -np_.take_along_axis(logp, y[:, None], axis=1).mean()
        return lib.jit(lib.value_and_grad(loss))
    return checked_pair(jax, make(ember, enp), [[ember.asarray(a) for a in params], ember.asarray(images),
                                                ember.asarray(labels)],
                        make(jax, jnp), [[jnp.asarray(a) for a in params], jnp.asarray(images), jnp.asarray(labels)])


# ---------------------------------------------------------------------------------------------------------------
# Random numbers: ember.random draws JAX's numbers bit for bit (checked first); these time the drawing.
def normals_1e7(jax: Any, jnp: Any, impl: str = "threefry2x32") -> tuple[Callable[[], Any], Callable[[], Any]]:
    """10^7 float32 normals from one key (of impl), an eager call of each library's sampler (one compiled
    program)."""
    from jax import random as jr

    from ember import random as er
    ekey, jkey = er.key(0, impl=impl), jr.key(0, impl=impl)
    np.testing.assert_array_equal(np.asarray(er.normal(ekey, (10 ** 7,))), np.asarray(jr.normal(jkey, (10 ** 7,))))
    return (lambda: er.normal(ekey, (10 ** 7,)).block_until_ready()), \
        (lambda: jr.normal(jkey, (10 ** 7,)).block_until_ready())


def dropout_mask(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Dropout alone, as a training step does it: split the key, draw a keep-0.9 mask for f32[128, 512]
    activations and apply it, in one jitted program, the new key fed back each call."""
    from jax import random as jr

    from ember import random as er
    h = np.random.default_rng(0).normal(size=(128, 512)).astype(np.float32)

    def make(lib: Any, np_: Any, random: Any) -> Callable[..., Any]:
        def step(key: Any, h: Any) -> Any:
            key, sub = random.split(key)
            return np_.where(random.bernoulli(sub, 0.9, h.shape), h / 0.9, 0), key
        return lib.jit(step)

    def loop(step: Callable[..., Any], key: Any, h: Any) -> Callable[[], Any]:
        state = [key]

        def run() -> Any:
            out, state[0] = step(state[0], h)
            return out.block_until_ready()
        return run
    estep, jstep = make(ember, enp, er), make(jax, jnp, jr)
    np.testing.assert_array_equal(np.asarray(estep(er.key(1), h)[0]), np.asarray(jstep(jr.key(1), h)[0]))
    return loop(estep, er.key(1), ember.asarray(h)), loop(jstep, jr.key(1), jnp.asarray(h))


def dropout_train_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One SGD step of a 784-512-10 MLP with dropout (keep 0.9) on the hidden layer, batch 128: the key split,
    the mask drawn, value_and_grad and the update in one jitted program, the new key fed back each call."""
    from jax import random as jr

    from ember import random as er
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(784, 512)) / 28).astype(np.float32), np.zeros(512, np.float32),
              (rng.normal(size=(512, 10)) / 22).astype(np.float32), np.zeros(10, np.float32)]
    x = rng.normal(size=(128, 784)).astype(np.float32)
    y = rng.normal(size=(128, 10)).astype(np.float32)

    def make(lib: Any, np_: Any, random: Any) -> Callable[..., Any]:
        def loss(p: Any, key: Any, x: Any, y: Any) -> Any:
            h = np_.maximum(x @ p[0] + p[1], 0)
            h = np_.where(random.bernoulli(key, 0.9, h.shape), h / 0.9, 0)
            return np_.mean((h @ p[2] + p[3] - y) ** 2)

        def step(p: Any, key: Any, x: Any, y: Any) -> Any:
            key, sub = random.split(key)
            value, grads = lib.value_and_grad(loss)(p, sub, x, y)
            return value, [w - 0.01 * g for w, g in zip(p, grads)], key
        return lib.jit(step)

    def loop(step: Callable[..., Any], p: Any, key: Any, x: Any, y: Any) -> Callable[[], Any]:
        state = [p, key]

        def run() -> Any:
            value, state[0], state[1] = step(state[0], state[1], x, y)
            return value.block_until_ready()
        return run
    estep, jstep = make(ember, enp, er), make(jax, jnp, jr)
    eargs = ([ember.asarray(a) for a in params], er.key(1), ember.asarray(x), ember.asarray(y))
    jargs = ([jnp.asarray(a) for a in params], jr.key(1), jnp.asarray(x), jnp.asarray(y))
    evalue, jvalue = estep(*eargs)[0], jstep(*jargs)[0]
    np.testing.assert_allclose(float(evalue), float(jvalue), rtol=1e-5)  # the same masks: the same loss
    return loop(estep, *eargs), loop(jstep, *jargs)


# ---------------------------------------------------------------------------------------------------------------
# Training with ember.nn + ember.optim, against JAX + optax (the same model written functionally) and PyTorch eager.
def _digits_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random(size=(64, 64)).astype(np.float32), rng.integers(0, 10, size=64).astype(np.int32)


def digits_mlp_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One AdamW step of the digits MLP (64-128-128-10, ReLU, softmax cross-entropy), batch 64: ember.nn.MLP +
    ember.optim vs the same network in JAX + optax, parameters and optimizer state fed back each call."""
    import optax

    from ember import nn, optim, random
    x, y = _digits_batch()
    model = nn.MLP(64, 10, 128, depth=2, key=random.key(0))
    eopt, jopt = optim.adamw(1e-3, weight_decay=1e-4), optax.adamw(1e-3, weight_decay=1e-4)

    @ember.jit
    def estep(model: Any, state: Any, x: Any, y: Any) -> Any:
        loss, grads = ember.value_and_grad(
            lambda m: optim.softmax_cross_entropy_with_integer_labels(m(x), y).mean())(model)
        updates, state = eopt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    def jforward(params: Any, x: Any) -> Any:
        for w, b in params[:-1]:
            x = jax.nn.relu(x @ w + b)
        return x @ params[-1][0] + params[-1][1]

    @jax.jit
    def jstep(params: Any, state: Any, x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(
            lambda p: optax.softmax_cross_entropy_with_integer_labels(jforward(p, x), y).mean())(params)
        updates, state = jopt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    jparams = [(jnp.asarray(np.asarray(layer.weight)), jnp.asarray(np.asarray(layer.bias))) for layer in model.layers]
    return _train_loop(estep, model, eopt.init(model), (ember.asarray(x), ember.asarray(y)),
                       jstep, jparams, jopt.init(jparams), (jnp.asarray(x), jnp.asarray(y)))


def _train_loop(estep: Any, emodel: Any, estate: Any, eargs: Any, jstep: Any, jparams: Any, jstate: Any,
                jargs: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Timed calls of two train steps (params, state, *args) -> (params, state, loss), state fed back; the first
    steps are checked to agree."""
    e, j = [emodel, estate], [jparams, jstate]
    first_e = estep(e[0], e[1], *eargs)[2]
    first_j = jstep(j[0], j[1], *jargs)[2]
    np.testing.assert_allclose(float(first_e), float(first_j), rtol=1e-4)

    def run_e() -> Any:
        e[0], e[1], loss = estep(e[0], e[1], *eargs)
        return loss.block_until_ready()

    def run_j() -> Any:
        j[0], j[1], loss = jstep(j[0], j[1], *jargs)
        return loss.block_until_ready()
    return run_e, run_j


def digits_mlp_step_torch() -> Callable[[], Any] | None:
    torch = torch_or_none()
    if torch is None:
        return None
    x, y = (torch.from_numpy(a) for a in _digits_batch())
    y = y.long()
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-4)

    def step() -> Any:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


CHAR_LM = {"batch": 32, "block": 128, "dim": 128, "heads": 4, "layers": 2}


def _char_lm_batch() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(CHAR_LM["batch"], CHAR_LM["block"] + 1)).astype(np.int32)


def char_lm_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One AdamW step of examples/char_lm.py's transformer (2 pre-norm blocks, d 128, 4 heads, GELU MLP, tied
    byte embeddings), batch 32 x 128 bytes: ember.nn vs the same network in JAX + optax."""
    import importlib.util
    import pathlib

    import optax

    from ember import optim, random
    spec = importlib.util.spec_from_file_location(
        "char_lm", pathlib.Path(__file__).parent.parent / "examples" / "char_lm.py")
    char_lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(char_lm)
    c = CHAR_LM
    model = char_lm.CharLM(c["block"], c["dim"], c["heads"], c["layers"], dropout=0.0, key=random.key(0))
    eopt, jopt = optim.adamw(1e-3, weight_decay=0.01), optax.adamw(1e-3, weight_decay=0.01)

    @ember.jit
    def estep(model: Any, state: Any, batch: Any) -> Any:
        def loss_fn(m: Any) -> Any:
            return optim.softmax_cross_entropy_with_integer_labels(m(batch[:, :-1]), batch[:, 1:]).mean()
        loss, grads = ember.value_and_grad(loss_fn)(model)
        updates, state = eopt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    def layer_norm(p: Any, x: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["weight"] + p["bias"]

    def linear(p: Any, x: Any) -> Any:
        return x @ p["weight"] + p["bias"]

    def jforward(p: Any, ids: Any) -> Any:
        x = p["tokens"][ids] + p["positions"][: ids.shape[-1]]
        for b in p["blocks"]:
            h = layer_norm(b["norm1"], x)
            q, k, v = (linear(b[n], h).reshape(h.shape[0], h.shape[1], c["heads"], -1) for n in ("q", "k", "v"))
            att = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(h.shape)
            x = x + linear(b["o"], att)
            x = x + linear(b["down"], jax.nn.gelu(linear(b["up"], layer_norm(b["norm2"], x))))
        return layer_norm(p["norm"], x) @ p["tokens"].T

    def as_jax(layer: Any) -> Any:
        return {"weight": jnp.asarray(np.asarray(layer.weight)), "bias": jnp.asarray(np.asarray(layer.bias))}
    jparams = {"tokens": jnp.asarray(np.asarray(model.tokens.weight)),
               "positions": jnp.asarray(np.asarray(model.positions)), "norm": as_jax(model.norm),
               "blocks": [{"norm1": as_jax(b.norm1), "norm2": as_jax(b.norm2), "q": as_jax(b.attention.query),
                           "k": as_jax(b.attention.key), "v": as_jax(b.attention.value),
                           "o": as_jax(b.attention.out), "up": as_jax(b.up), "down": as_jax(b.down)}
                          for b in model.blocks]}

    @jax.jit
    def jstep(params: Any, state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return optax.softmax_cross_entropy_with_integer_labels(jforward(p, batch[:, :-1]), batch[:, 1:]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = jopt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    batch = _char_lm_batch()
    return _train_loop(estep, model, eopt.init(model), (ember.asarray(batch),),
                       jstep, jparams, jopt.init(jparams), (jnp.asarray(batch),))


def char_lm_step_torch() -> Callable[[], Any] | None:
    torch = torch_or_none()
    if torch is None:
        return None
    c = CHAR_LM

    class Net(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.tokens = torch.nn.Embedding(256, c["dim"])
            self.positions = torch.nn.Parameter(torch.zeros(c["block"], c["dim"]))
            self.blocks = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
                c["dim"], c["heads"], 4 * c["dim"], dropout=0.0, activation="gelu", batch_first=True,
                norm_first=True) for _ in range(c["layers"]))
            self.norm = torch.nn.LayerNorm(c["dim"])

        def forward(self, ids: Any) -> Any:
            x = self.tokens(ids) + self.positions[: ids.shape[1]]
            mask = torch.nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
            for block in self.blocks:
                x = block(x, src_mask=mask, is_causal=True)
            return self.norm(x) @ self.tokens.weight.T

    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    batch = torch.from_numpy(_char_lm_batch()).long()

    def step() -> Any:
        opt.zero_grad()
        logits = net(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()
    return step


# ---------------------------------------------------------------------------------------------------------------
# Reductions fed by elementwise work, normalisation and attention: XLA's generated code for the commonest shapes
# of a model (docs/performance.md, "Reductions", explains ember's lowering of each).
def array_fn(make: Callable[[Any], Callable[[Any], Any]], shape: tuple[int, ...]
             ) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """jit(make(np_)) of one normal f32 array of the given shape, for np_ = ember.numpy and jax.numpy."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
        return checked_pair(jax, ember.jit(make(enp)), (ember.asarray(x),), jax.jit(make(jnp)), (jnp.asarray(x),))
    return bench


def layer_norm(np_: Any) -> Callable[[Any], Any]:
    def norm(x: Any) -> Any:
        mean = np_.mean(x, axis=-1, keepdims=True)
        var = np_.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / np_.sqrt(var + 1e-5)
    return norm


def layer_norm_grad(np_: Any) -> Callable[[Any], Any]:
    """The gradient of sum(layer_norm(x) * x) (a layer norm's backward pass, the kind of program a training step
    has around every normalisation; not `* cos(x)`: the plugin's sin and cos are scalar libm calls, 20 ms of it)."""
    return library(np_).grad(lambda x: np_.sum(layer_norm(np_)(x) * x))


def library(np_: Any) -> Any:
    """ember for ember.numpy, jax for jax.numpy (imported by then: the pairs are made after JAX starts)."""
    return ember if np_ is enp else sys.modules["jax"]


def softmax_of(np_: Any) -> Callable[[Any], Any]:
    def softmax(v: Any) -> Any:
        z = np_.exp(v - np_.max(v, axis=-1, keepdims=True))
        return z / np_.sum(z, axis=-1, keepdims=True)
    return softmax


def _attention(lib: Any, np_: Any) -> Callable[..., Any]:
    def attend(q: Any, k: Any, v: Any) -> Any:
        s = np_.einsum("bhqd,bhkd->bhqk", q, k) / np_.sqrt(np_.float32(q.shape[-1]))
        causal = np_.tril(np_.ones((q.shape[2], k.shape[2]), bool))
        p = lib.nn.softmax(np_.where(causal, s, -1e9), axis=-1)
        return np_.einsum("bhqk,bhkd->bhqd", p, v)
    return attend


def attention(backward: bool) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """Causal softmax attention, b8 h8 t128 d64: the forward pass, or jit(grad) of sum(out * ct) in q, k, v."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        rng = np.random.default_rng(0)
        arrays = [rng.normal(size=(8, 8, 128, 64)).astype(np.float32) for _ in range(4)]

        def make(lib: Any, np_: Any) -> Callable[..., Any]:
            attend = _attention(lib, np_)
            if not backward:
                return lib.jit(lambda q, k, v, ct: attend(q, k, v))
            return lib.jit(lib.grad(lambda q, k, v, ct: np_.sum(attend(q, k, v) * ct), argnums=(0, 1, 2)))
        return checked_pair(jax, make(ember, enp), [ember.asarray(a) for a in arrays],
                            make(jax, jnp), [jnp.asarray(a) for a in arrays])
    bench.__name__ = "attention_backward" if backward else "attention_forward"
    return bench


def transformer_step(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One SGD step (jit of value_and_grad and the update) of one pre-norm transformer block, b16 t64 d128, four
    heads, a 4x MLP with gelu, mean-squared error against a target; the new parameters fed back each call."""
    rng = np.random.default_rng(0)
    d, heads = 128, 4
    params = {name: (rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32)
              for name, shape in (("wqkv", (d, 3 * d)), ("wo", (d, d)), ("w1", (d, 4 * d)), ("w2", (4 * d, d)))}
    params.update(g1=np.ones(d, np.float32), g2=np.ones(d, np.float32), b1=np.zeros(4 * d, np.float32))
    x = rng.normal(size=(16, 64, d)).astype(np.float32)
    y = rng.normal(size=(16, 64, d)).astype(np.float32)

    def make(lib: Any, np_: Any) -> Callable[..., Any]:
        norm, attend = layer_norm(np_), _attention(lib, np_)

        def split(t: Any) -> Any:  # [b, t, d] -> [b, h, t, d/h]
            return t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(0, 2, 1, 3)

        def loss(p: Any, x: Any, y: Any) -> Any:
            q, k, v = np_.split(norm(x) * p["g1"] @ p["wqkv"], 3, axis=-1)
            a = attend(split(q), split(k), split(v)).transpose(0, 2, 1, 3).reshape(x.shape)
            h = x + a @ p["wo"]
            h = h + lib.nn.gelu(norm(h) * p["g2"] @ p["w1"] + p["b1"]) @ p["w2"]
            return np_.mean((h - y) ** 2)

        def step(p: Any, x: Any, y: Any) -> Any:
            value, grads = lib.value_and_grad(loss)(p, x, y)
            return value, lib.tree_util.tree_map(lambda w, g: w - 0.01 * g, p, grads)
        return lib.jit(step)
    eargs = (ember.tree_util.tree_map(ember.asarray, params), ember.asarray(x), ember.asarray(y))
    jargs = (jax.tree_util.tree_map(jnp.asarray, params), jnp.asarray(x), jnp.asarray(y))
    estep, jstep = make(ember, enp), make(jax, jnp)
    checked_pair(jax, estep, eargs, jstep, jargs)
    return sgd_loop(estep, *eargs), sgd_loop(jstep, *jargs)


def mlp_step_problem(lib: Any, np_: Any, asarray: Callable[[Any], Any]
                     ) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    """jit of an SGD step (value_and_grad and the update) of a 784-512-512-10 tanh MLP, batch 128."""
    rng = np.random.default_rng(0)
    sizes = [(784, 512), (512, 512), (512, 10)]
    params = [((rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32), np.zeros(s[1], np.float32)) for s in sizes]
    x = rng.normal(size=(128, 784)).astype(np.float32)
    y = rng.normal(size=(128, 10)).astype(np.float32)

    def make() -> Callable[..., Any]:
        def loss(params: Any, x: Any, y: Any) -> Any:
            return np_.mean((mlp_forward(np_, params, x) - y) ** 2)

        def step(params: Any, x: Any, y: Any) -> Any:
            value, grads = lib.value_and_grad(loss)(params, x, y)
            return value, lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
        return lib.jit(step)
    return make, ([(asarray(w), asarray(b)) for w, b in params], asarray(x), asarray(y))


# (name, make, calls per round[, the PyTorch equivalent's maker])
def einsum_attention(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Attention scores and the weighted sum by einsum: bhqd,bhkd->bhqk then bhqk,bhkd->bhqd, b8 h8 q=k=128 d64."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(8, 8, 128, 64)).astype(np.float32) for _ in range(3))

    def make(np_: Any) -> Callable[..., Any]:
        def attend(q: Any, k: Any, v: Any) -> Any:
            s = np_.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
            return np_.einsum("bhqk,bhkd->bhqd", s, v)
        return attend
    return checked_pair(jax, ember.jit(make(enp)), [ember.asarray(a) for a in (q, k, v)],
                        jax.jit(make(jnp)), [jnp.asarray(a) for a in (q, k, v)])


def einsum_chain(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A three-operand einsum whose best order (opt_einsum's) contracts the small pair first."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(256, 8)).astype(np.float32)
    b = rng.normal(size=(8, 256)).astype(np.float32)
    c = rng.normal(size=(256, 64)).astype(np.float32)
    spec = "ij,jk,kl->il"
    return checked_pair(jax, ember.jit(lambda *xs: enp.einsum(spec, *xs)), [ember.asarray(x) for x in (a, b, c)],
                        jax.jit(lambda *xs: jnp.einsum(spec, *xs)), [jnp.asarray(x) for x in (a, b, c)])


def reduction(fn_name: str, **kwargs: Any) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """A reduction of ember.numpy's breadth over f32[1024, 1024], jitted, next to jax.numpy's."""
    def make(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        rng = np.random.default_rng(0)
        x = rng.uniform(0.5, 1.5, size=(1024, 1024)).astype(np.float32)
        x[::7, ::5] = np.nan if fn_name.startswith("nan") else x[::7, ::5]
        ef = ember.jit(lambda v: getattr(enp, fn_name)(v, **kwargs))
        jf = jax.jit(lambda v: getattr(jnp, fn_name)(v, **kwargs))
        return checked_pair(jax, ef, (ember.asarray(x),), jf, (jnp.asarray(x),))
    return make


def linalg_case(fn_name: str, *shapes: tuple[int, ...], spd: bool = False
                ) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """jit(fn) of ember.numpy.linalg and jax.numpy.linalg on float32 inputs of the given shapes (the first made
    symmetric positive definite with spd), results checked against each other first."""
    def make(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        rng = np.random.default_rng(0)
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        if spd:
            a = args[0]
            args[0] = (a @ np.swapaxes(a, -1, -2) / a.shape[-1] + np.eye(a.shape[-1])).astype(np.float32)
        else:
            args[0] = args[0] + 4 * np.eye(shapes[0][-1], dtype=np.float32) if shapes[0][-1] == shapes[0][-2] \
                else args[0]
        ours, theirs = LINALG_FUNCTIONS[fn_name]
        ef, jf = ember.jit(lambda *xs: ours(enp, *xs)), jax.jit(lambda *xs: theirs(jnp, *xs))
        eargs, jargs = [ember.device_put(a) for a in args], [jax.device_put(a) for a in args]
        for e, j in zip(jax.tree_util.tree_leaves(ef(*eargs)), jax.tree_util.tree_leaves(jf(*jargs))):
            np.testing.assert_allclose(np.abs(np.asarray(e)), np.abs(np.asarray(j)), rtol=2e-2, atol=2e-2)
        return (lambda: ef(*eargs).block_until_ready()), (lambda: jf(*jargs).block_until_ready())
    return make


LINALG_FUNCTIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    # (ember's, jax's), each given its numpy module first
    "cholesky_solve": (lambda np_, a, b: np_.linalg.solve(a, b) + np_.linalg.cholesky(a).sum(),
                       lambda np_, a, b: np_.linalg.solve(a, b) + np_.linalg.cholesky(a).sum()),
    "svd": (lambda np_, a: np_.linalg.svd(a, full_matrices=False)[1],
            lambda np_, a: np_.linalg.svd(a, full_matrices=False)[1]),
    "eigh": (lambda np_, a: np_.linalg.eigh(a)[0], lambda np_, a: np_.linalg.eigh(a)[0]),
    "qr": (lambda np_, a: np_.linalg.qr(a)[1], lambda np_, a: np_.linalg.qr(a)[1]),
    "inv": (lambda np_, a: np_.linalg.inv(a), lambda np_, a: np_.linalg.inv(a)),
    "solve": (lambda np_, a, b: np_.linalg.solve(a, b), lambda np_, a, b: np_.linalg.solve(a, b)),
}


def fft_case(fn_name: str, shape: tuple[int, ...], dtype: Any
             ) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """jit(numpy.fft.<fn_name>) of ember and JAX on one random input (complex parts drawn apart), checked first."""
    def make(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape)
        x = (x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else x).astype(dtype)
        ef = ember.jit(getattr(enp.fft, fn_name))
        jf = jax.jit(getattr(jnp.fft, fn_name))
        return checked_pair(jax, ef, (ember.asarray(x),), jf, (jnp.asarray(x),))
    return make


BENCHMARKS: list[tuple[Any, ...]] = [
    ("jit: tiny f32[4] add (dispatch overhead)", tiny_call, 2000),
    ("jit: numpy inputs", calling("numpy"), 2000),
    ("jit: a list of 10 arrays", calling("list"), 2000),
    ("jit: a dict of params", calling("dict"), 2000),
    ("jit: a keyword argument", calling("kwargs"), 2000),
    ("jit: a static argument", calling("static"), 2000),
    ("np.asarray(jit result) f32[4]", to_numpy, 2000),
    ("device_put(numpy f32[256,256])", from_numpy, 500),
    ("eager: f32[4] add (op-by-op dispatch)", eager_add, 2000, eager_add_torch),
    ("eager: f32[4] * 2.0", eager_scalar_mul, 2000),
    ("eager: exp(f32[4])", eager_op(lambda np_, x, m: np_.exp(x)), 2000),
    ("eager: f32[4].sum()", eager_op(lambda np_, x, m: x.sum()), 2000),
    ("eager: f32[3,4] + f32[4] (broadcast)", eager_op(lambda np_, x, m: m + x), 2000),
    ("eager: f32[3,4].mean(axis=0)", eager_op(lambda np_, x, m: m.mean(axis=0)), 2000),
    ("eager: where(f32[4] > 1, f32[4], 0.0)", eager_op(lambda np_, x, m: np_.where(x > 1, x, 0.0)), 2000),
    ("eager: 200 distinct x[i], f32[65536,16]", eager_distinct_rows, 5),
    ("grad (no jit) of a fresh closure, MLP", grad_fresh_closure, 20),
    ("jit: sum of f32[1e7]", sum_1e7, 50),
    ("jit: softmax f32[1024,1024]", softmax, 50),
    ("jit: sum(a * a, axis=1), f32[1024,1024]", array_fn(lambda np_: lambda a: np_.sum(a * a, axis=1), (1024, 1024)),
     100),
    ("jit: einsum ij,ij->i, f32[1024,1024]", array_fn(lambda np_: lambda a: np_.einsum("ij,ij->i", a, a),
                                                      (1024, 1024)), 100),
    ("jit: var(a, axis=1), f32[1024,1024]", array_fn(lambda np_: lambda a: np_.var(a, axis=1), (1024, 1024)), 100),
    ("jit: sum(exp(a), axis=0), f32[1024,1024]", array_fn(lambda np_: lambda a: np_.sum(np_.exp(a), axis=0),
                                                          (1024, 1024)), 100),
    ("jit: layer norm f32[4096,1024]", array_fn(layer_norm, (4096, 1024)), 20),
    ("jit: softmax f32[1024,1000]", array_fn(softmax_of, (1024, 1000)), 50),
    ("jit: log_softmax f32[1024,1000]", array_fn(lambda np_: lambda a: library(np_).nn.log_softmax(a, axis=-1),
                                                 (1024, 1000)), 50),
    ("jit(grad): layer norm f32[4096,1024]", array_fn(layer_norm_grad, (4096, 1024)), 20),
    ("jit: attention forward b8 h8 t128 d64", attention(False), 20),
    ("jit(grad): attention backward b8 h8 t128 d64", attention(True), 10),
    ("train step: transformer block b16 t64 d128, SGD", transformer_step, 20),
    ("jit: MLP train step, batch 128", mlp_train_step(128), 200),
    ("jit: MLP train step, batch 1024", mlp_train_step(1024), 50),
    ("jit: 512x512 f32 matmul", matmul_512, 50),
    ("jit(grad): 3-layer MLP loss, batch 128", mlp_grad, 50),
    ("jit(vmap(grad)): MLP per-example grads, 128", per_example_grad, 50),
    ("jit(jvp(grad)): MLP Hessian-vector product", mlp_hvp, 50),
    ("jit(jacfwd): tanh(W @ x + b), W 64x64", small_jacobian("jacfwd"), 200),
    ("jit(jacrev): tanh(W @ x + b), W 64x64", small_jacobian("jacrev"), 200),
    ("eager vmap: x @ w, xs f32[128,64], w 64x64", eager_vmap, 500),
    ("jit(value_and_grad): RNN lax.scan 1000, h 64", run_time(rnn_problem), 20),
    ("jit: lax.fori_loop 1000, f32[256] update", run_time(fori_problem), 200),
    ("jit(value_and_grad): embedding 32768x128, 64x128 ids", embedding_grad, 50),
    ("jit(grad): take_along_axis f32[1024,1000] labels", take_along_axis_bench, 100),
    ("jit(value_and_grad): CNN 2 conv + pool, batch 64", cnn_train_step, 20),
    ("random: 1e7 float32 normals", normals_1e7, 10),
    ("random: 1e7 float32 normals, rbg key (RngBitGenerator)", partial(normals_1e7, impl="rbg"), 10),
    ("jit: dropout mask + apply, f32[128,512]", dropout_mask, 500),
    ("jit: MLP train step with a dropout mask, b128", dropout_train_step, 100),
    ("train step: digits MLP + AdamW, batch 64", digits_mlp_step, 500, digits_mlp_step_torch),
    ("train step: JAX's MNIST from scratch (numpy float64 params), b128", mnist_fromscratch_step, 50),
    ("train step: char-LM transformer + AdamW, 32x128", char_lm_step, 5, char_lm_step_torch),
    ("jit: einsum attention b8 h8 128x128 d64", einsum_attention, 50),
    ("jit(grad) through a 1000-step while_loop vs JAX's static fori_loop (scan)", run_time(while_grad_problem), 20),
    ("Ref: jitted row update of a Ref f32[1024,256] (call + in-place write)", ref_row_update, 500),
    ("Ref: 8 microbatch gradients accumulated into a Ref in a scan, jit", ref_microbatch_grads, 50),
    ("jit: einsum ij,jk,kl->il (opt_einsum order)", einsum_chain, 200),
    ("jit: prod f32[1024,1024] axis=1", reduction("prod", axis=1), 100),
    ("jit: nansum f32[1024,1024]", reduction("nansum"), 100),
    ("jit: nanmean f32[1024,1024] axis=0", reduction("nanmean", axis=0), 100),
    ("jit: var f32[1024,1024] axis=1, correction=1", reduction("var", axis=1, correction=1), 100),
    ("jit: median f32[1024,1024] axis=1", reduction("median", axis=1), 20),
    ("jit: count_nonzero f32[1024,1024] axis=0", reduction("count_nonzero", axis=0), 100),
    ("jit: ptp f32[1024,1024] axis=1", reduction("ptp", axis=1), 100),
    ("jit: max f32[1024,1024] axis=1", reduction("max", axis=1), 100),
    ("jit: max f32[1024,1024] axis=0", reduction("max", axis=0), 100),
    ("jit: max f32[1024,1024]", reduction("max"), 100),
    ("fft: fft c64[2**20]", fft_case("fft", (2 ** 20,), np.complex64), 20),
    ("fft: rfft2 f32[1024,1024]", fft_case("rfft2", (1024, 1024), np.float32), 20),
    ("linalg: cholesky + solve f32 512x512", linalg_case("cholesky_solve", (512, 512), (512, 4), spd=True), 20),
    ("linalg: svd f32 256x256", linalg_case("svd", (256, 256)), 10),
    ("linalg: eigh f32 256x256", linalg_case("eigh", (256, 256), spd=True), 10),
    ("linalg: qr f32 512x256", linalg_case("qr", (512, 256)), 20),
    ("linalg: inv f32 512x512", linalg_case("inv", (512, 512)), 20),
    ("linalg: batched solve f32 64x(32x32)", linalg_case("solve", (64, 32, 32), (64, 32, 4)), 100),
    ("sort: sort f32[1e6]", sort_case("sort", (10 ** 6,)), 10, numpy_case("sort", (10 ** 6,))),
    ("sort: argsort f32[1e6]", sort_case("argsort", (10 ** 6,)), 5, numpy_case("argsort", (10 ** 6,))),
    ("sort: sort f32[1000,1000] axis=-1 (rows)", sort_case("sort", (1000, 1000), axis=-1), 20,
     numpy_case("sort", (1000, 1000), axis=-1)),
    ("sort: median f32[1024,1024] axis=0", sort_case("median", (1024, 1024), axis=0), 10,
     numpy_case("median", (1024, 1024), axis=0)),
    ("sort: lax.top_k f32[1000,1000] k=10", top_k_case, 20),
    ("sort: lax.approx_max_k f32[1000,1000] k=10", approx_max_k_case, 20),
    ("transcendental: sin f32[4194304]", transcendental_case("sin"), 5, transcendental_numpy("sin")),
    ("transcendental: tan f32[4194304]", transcendental_case("tan"), 5, transcendental_numpy("tan")),
    ("transcendental: log1p f32[4194304]", transcendental_case("log1p"), 5, transcendental_numpy("log1p")),
    ("transcendental: erf_inv f32[4194304]", transcendental_case("erf_inv"), 5, transcendental_numpy("erf_inv")),
    ("transcendental: tanh f32[4194304]", transcendental_case("tanh"), 5, transcendental_numpy("tanh")),
    ("jit: lax.ragged_dot f32[4096,256] x 8 groups of f32[256,256]", ragged_dot_case, 10),
    ("random: lax.rng_bit_generator 10^6 uint32", rng_bit_generator_case, 50),
]

# (name, make, repeat): the best of `repeat` single first calls, each of a new function (compile time)
COMPILE_BENCHMARKS = [
    ("compile: jit(value_and_grad) RNN scan 1000", compile_time(rnn_problem), 3),
    ("compile: jit lax.fori_loop 1000", compile_time(fori_problem), 3),
    ("compile: jit MLP 784-512-512-10 value_and_grad + SGD", compile_time(mlp_step_problem), 3),
    ("new function, same program: RNN scan 1000", compile_time(rnn_problem, shared_programs=True), 3),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default="", help="run the benchmarks whose name contains this text")
    parser.add_argument("--roofline", action="store_true",
                        help="measure this machine's peaks before and after the benchmarks (the best of each "
                             "figure) and print each row's fraction of its roof (bench/roofline.py)")
    parser.add_argument("--peaks", metavar="FILE", help="with --roofline, the peaks saved by bench/peaks.py --save "
                        "(on a quiet machine) instead of measuring them")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise SystemExit("the benchmarks compare against JAX: python3 -m pip install -e '.[bench]'") from None
    # JAX's backend starts first, with the XLA_FLAGS of the environment, as a JAX user's does: ember adds its own
    # flags to XLA_FLAGS when its backend starts, and a JAX started after that would run with them.
    jax.devices()
    repeat = 5 if args.quick else 11
    torch = torch_or_none()
    print(f"ember {ember.__version__} vs jax {jax.__version__}" + (f" and torch {torch.__version__}" if torch else "")
          + f", device: {ember.default_device()}")
    print(f"{'benchmark':45s} {'ember':>12s} {'jax':>12s} {'ember/jax':>10s} {'other':>12s} {'ember/other':>11s}"
          " (other: torch where installed, numpy for the sort and transcendental rows)")
    measured: list[tuple[str, float, float]] = []
    roof = (peaks.load(args.peaks) if args.peaks else peaks.measure()) if args.roofline else None
    for name, make, number, *other_maker in BENCHMARKS:
        if args.only not in name:
            continue
        number = max(1, number // 5) if args.quick else number
        ours, theirs = make(jax, jnp)
        other_fn = other_maker[0]() if other_maker else None
        times = interleaved_times([ours, theirs] + ([other_fn] if other_fn else []), number, repeat)
        t_ours, t_theirs = times[:2]
        line = f"{name:45s} {t_ours * 1e6:10.1f}us {t_theirs * 1e6:10.1f}us {t_ours / t_theirs:10.2f}"
        if other_fn:
            line += (f" {times[2] * 1e6:10.1f}us {t_ours / times[2]:11.2f} "
                     f"{getattr(other_maker[0], 'library', 'torch')}")
        print(line, flush=True)
        measured.append((name, t_ours, t_theirs))
    for name, make, repeat in COMPILE_BENCHMARKS:
        if args.only not in name:
            continue
        ours, theirs = make(jax, jnp)
        t_ours = min(timeit.repeat(ours, number=1, repeat=repeat))
        t_theirs = min(timeit.repeat(theirs, number=1, repeat=repeat))
        print(f"{name:45s} {t_ours * 1e3:10.1f}ms {t_theirs * 1e3:10.1f}ms {t_ours / t_theirs:10.2f}", flush=True)
        measured.append((name, t_ours, t_theirs))
    if args.roofline:
        print()
        print(roofline.report(measured, roof if args.peaks else peaks.best(roof, peaks.measure())), flush=True)


if __name__ == "__main__":
    main()
