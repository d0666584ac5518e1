"""Benchmarks: ember side by side with JAX, in one run, on the same machine. Prints times and ratios.

    python3 -m pip install -e ".[bench]" && python3 bench/run.py [--quick]

A ratio below 1 means ember is faster. Both run on the CPU (JAX_PLATFORMS=cpu)."""
from __future__ import annotations

import argparse
import os
import timeit
from typing import Any, Callable, NamedTuple, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402


def best_time(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best mean seconds per call over `repeat` rounds of `number` calls (after a warm-up call)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


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


def mlp_problem(jax: Any, jnp: Any) -> Mlp:
    rng = np.random.default_rng(0)
    sizes = [(64, 256), (256, 256), (256, 10)]
    params = [(rng.normal(size=s).astype(np.float32) * 0.05, np.zeros(s[1], np.float32)) for s in sizes]
    x = rng.normal(size=(128, 64)).astype(np.float32)
    y = rng.normal(size=(128, 10)).astype(np.float32)

    def make_loss(np_: Any) -> Callable[..., Any]:
        def loss(params: Any, x: Any, y: Any) -> Any:
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = np_.tanh(h)
            return np_.mean((h - y) ** 2)
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


def run_time(problem: Problem) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """Calls of one jitted function per library (compiled once), checked against each other first."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        (emake, eargs), (jmake, jargs) = problem(ember, enp, ember.asarray), problem(jax, jnp, jnp.asarray)
        return checked_pair(jax, emake(), eargs, jmake(), jargs)
    bench.__name__ = f"run_{problem.__name__}"
    return bench


def compile_time(problem: Problem) -> Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]:
    """The first call of a freshly made jitted function (trace, lower, compile, run): each timed call makes a new
    function object, so neither library's caches are hit (JAX's persistent compilation cache is turned off)."""
    def bench(jax: Any, jnp: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        jax.config.update("jax_enable_compilation_cache", False)
        (emake, eargs), (jmake, jargs) = problem(ember, enp, ember.asarray), problem(jax, jnp, jnp.asarray)
        return (lambda: ember.tree.leaves(emake()(*eargs))[0].block_until_ready()), \
            (lambda: jax.tree.leaves(jmake()(*jargs))[0].block_until_ready())
    bench.__name__ = f"compile_{problem.__name__}"
    return bench


BENCHMARKS = [
    ("jit: tiny f32[4] add (dispatch overhead)", tiny_call, 2000),
    ("eager: f32[4] add (op-by-op dispatch)", eager_add, 2000),
    ("jit: 512x512 f32 matmul", matmul_512, 50),
    ("jit(grad): 3-layer MLP loss, batch 128", mlp_grad, 50),
    ("jit(vmap(grad)): MLP per-example grads, 128", per_example_grad, 50),
    ("jit(jvp(grad)): MLP Hessian-vector product", mlp_hvp, 50),
    ("jit(jacfwd): tanh(W @ x + b), W 64x64", small_jacobian("jacfwd"), 200),
    ("jit(jacrev): tanh(W @ x + b), W 64x64", small_jacobian("jacrev"), 200),
    ("eager vmap: x @ w, xs f32[128,64], w 64x64", eager_vmap, 500),
    ("jit(value_and_grad): RNN lax.scan 1000, h 64", run_time(rnn_problem), 20),
    ("jit: lax.fori_loop 1000, f32[256] update", run_time(fori_problem), 200),
]

# (name, make, repeat): the best of `repeat` single first calls, each of a new function (compile time)
COMPILE_BENCHMARKS = [
    ("compile: jit(value_and_grad) RNN scan 1000", compile_time(rnn_problem), 3),
    ("compile: jit lax.fori_loop 1000", compile_time(fori_problem), 3),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise SystemExit("the benchmarks compare against JAX: python3 -m pip install -e '.[bench]'") from None
    repeat = 3 if args.quick else 7
    print(f"ember {ember.__version__} vs jax {jax.__version__}, device: {ember.default_device()}")
    print(f"{'benchmark':45s} {'ember':>12s} {'jax':>12s} {'ember/jax':>10s}")
    for name, make, number in BENCHMARKS:
        number = max(1, number // 5) if args.quick else number
        ours, theirs = make(jax, jnp)
        t_ours = best_time(ours, number, repeat)
        t_theirs = best_time(theirs, number, repeat)
        print(f"{name:45s} {t_ours * 1e6:10.1f}us {t_theirs * 1e6:10.1f}us {t_ours / t_theirs:10.2f}")
    for name, make, repeat in COMPILE_BENCHMARKS:
        ours, theirs = make(jax, jnp)
        t_ours = min(timeit.repeat(ours, number=1, repeat=repeat))
        t_theirs = min(timeit.repeat(theirs, number=1, repeat=repeat))
        print(f"{name:45s} {t_ours * 1e3:10.1f}ms {t_theirs * 1e3:10.1f}ms {t_ours / t_theirs:10.2f}")


if __name__ == "__main__":
    main()
