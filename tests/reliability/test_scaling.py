"""ember's own work on a program grows linearly with its length: staging, reverse mode (the transform, the
forward/backward split, the transform cache) and lowering to StableHLO. Measured in CPU time of this process (the
least of a few runs, so that other load on the machine counts little), without XLA's compile, whose cost is XLA's
(see bench/scaling.py and docs/reliability.md)."""
import gc
import math
import time
from typing import Any, Callable

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._core.cache import clear_all_caches
from ember._core.ir import structural_key
from ember._hlo import lower

REPEATS = 3
MAX_RATIO = 3.0  # time(2n) / time(n): 2 when linear, 4 when quadratic


def chain(n: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        for _ in range(n):
            x = enp.sin(x) * 1.01 + 0.1
        return enp.sum(x)
    return f


def vjp_program(n: int) -> str:
    """Stage the vjp of an n-step chain and its pullback (transform, split, inlining), key and lower the result."""
    clear_all_caches()
    ir = ember.make_ir(lambda x: ember.vjp(chain(n), x)[1](enp.float32(1.0)))(enp.ones((3,), enp.float32))
    structural_key(ir)
    return lower(ir)


def grad_program(n: int) -> str:
    clear_all_caches()
    return lower(ember.make_ir(ember.grad(chain(n)))(enp.ones((3,), enp.float32)))


def least_cpu_seconds(work: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        gc.collect()
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def growth(program: Callable[[int], str], n: int) -> float:
    program(n // 4)  # (warm-up: first uses of each primitive)
    return least_cpu_seconds(lambda: program(2 * n)) / least_cpu_seconds(lambda: program(n))


@pytest.mark.parametrize("program", [vjp_program])
def test_reverse_mode_is_linear_in_program_length(program):
    ratio = growth(program, 300)
    assert ratio < MAX_RATIO, f"doubling the program multiplied ember's staging+vjp+lowering time by {ratio:.2f}"


@pytest.mark.slow
@pytest.mark.parametrize("program", [vjp_program, grad_program])
def test_reverse_mode_is_linear_for_long_programs(program):
    ratio = growth(program, 2000)
    assert ratio < MAX_RATIO, f"doubling the program multiplied ember's staging+transform+lowering by {ratio:.2f}"


def test_the_measured_programs_differentiate_the_chain():
    """The programs timed above are reverse mode of the chain: a few steps, against finite differences."""
    n, x = 3, 0.3
    ir = ember.make_ir(lambda v: ember.vjp(chain(n), v)[1](enp.float32(1.0)))(enp.full((3,), x, enp.float32))
    assert "cosine" in lower(ir)

    def value(v: float) -> float:
        for _ in range(n):
            v = math.sin(v) * 1.01 + 0.1
        return v
    grad = ember.eval_ir(ir, enp.full((3,), x, enp.float32))
    expected = (value(x + 1e-4) - value(x - 1e-4)) / 2e-4
    assert abs(float(grad[0][0]) - expected) < 1e-3


def residual_count(f: Callable[[Any], Any], x: Any) -> int:
    """How many residuals the forward program of ember.vjp(f, x) outside jit hands to the pullback."""
    from ember._api.autodiff import _vjp_plan
    from ember._core import aval_of
    from ember._core.pytree import tree_flatten
    _, in_tree = tree_flatten(((x,), {}))
    return _vjp_plan(f, in_tree, (aval_of(x),), False, "vjp").num_residuals


def test_vjp_recomputes_elementwise_values_instead_of_saving_them():
    """Outside jit, ember.vjp's forward program saves no value of an elementwise chain, however long (the pullback
    recomputes them, fused with the cotangents that read them): XLA's CPU fusion would copy the chain into every
    saved step's fusion, a compile quadratic in the length (400 steps took a minute, 5000 ran out of memory).
    What is not elementwise (a matmul's result) is still saved. Values match JAX."""
    jax = pytest.importorskip("jax")
    x = enp.asarray(np.linspace(0.1, 0.9, 3, dtype=np.float32))
    assert residual_count(chain(10), x) == residual_count(chain(300), x) == 1  # (x itself)

    def mlp(np_: Any, h: Any, ws: Any) -> Any:
        for w in ws:
            h = np_.tanh(h @ w) * 0.5 + np_.sin(h @ w)
        return np_.sum(h * h)
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((3, 3)).astype(np.float32) for _ in range(4)]
    h0 = rng.standard_normal((2, 3)).astype(np.float32)
    # residuals: h0 and the four weights, and each layer's matmul (one after CSE)
    assert residual_count(lambda h: mlp(enp, h, [enp.asarray(w) for w in ws]), enp.asarray(h0)) <= 4 + 1 + 4
    out, pullback = ember.vjp(lambda h, w: mlp(enp, h, w), enp.asarray(h0), [enp.asarray(w) for w in ws])
    jax_out, jax_pullback = jax.vjp(lambda h, w: mlp(jax.numpy, h, w), h0, ws)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax_out), rtol=1e-5)
    for got, want in zip(jax.tree_util.tree_leaves(pullback(enp.float32(2.0))),
                         jax.tree_util.tree_leaves(jax_pullback(np.float32(2.0)))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("checkpointed", [False, True])
def test_vjp_of_a_long_chain_finishes_and_matches_jax(checkpointed):
    """The vjp of a 2000-step elementwise chain outside jit, plain or under ember.checkpoint, compiles in seconds
    (see docs/reliability.md) and matches jax.grad."""
    jax = pytest.importorskip("jax")
    n = 2000

    def f(np_: Any, x: Any) -> Any:
        for _ in range(n):
            x = x + 0.01 * np_.sin(x)
        return np_.sum(x)
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32)

    def fun(v: Any) -> Any:
        return f(enp, v)
    _, pullback = ember.vjp(ember.checkpoint(fun) if checkpointed else fun, enp.asarray(x))
    expected = jax.grad(lambda v: f(jax.numpy, v))(x)
    np.testing.assert_allclose(np.asarray(pullback(enp.float32(1.0))[0]), np.asarray(expected), rtol=1e-4)


def test_the_gradient_program_grows_as_the_function_does():
    """What ember hands XLA for jit(grad(f)) of an n-step chain grows linearly (counted, not timed): each step adds
    the same number of equations and of StableHLO lines. (XLA's own compile of it is not linear: its CPU fusion pass
    re-sorts a growing fusion's operands, the saved values of every step, after each step it fuses: 1.2 s of a
    4.1 s compile at 1000 steps of sin/cos, 4.8 s of about 11 s at 2000; JAX's program compiles alike. See
    bench/compile_scaling.py and docs/reliability.md.)"""
    x = enp.ones((3,), enp.float32)
    irs = [ember.make_ir(ember.grad(chain(n)))(x) for n in (50, 100, 200)]
    eqns = [len(ir.eqns) for ir in irs]
    lines = [len(lower(ir).splitlines()) for ir in irs]
    for counts in (eqns, lines):
        assert counts[2] - counts[1] == 2 * (counts[1] - counts[0]), counts
        assert counts[1] - counts[0] <= 50 * 12, counts  # (a few equations per step)


def test_no_garbage_collection_while_a_program_is_built():
    """Python's cyclic collector, whose full collections traverse every object the build made so far, made
    building a long program super-linear (jit(grad) of a 4000-step chain: 3.7 s of ember's work, 1.7 s of it in
    the collector). It is paused while a transformation stages, transforms and lowers its program (counted by
    gc.callbacks: no full collection, at most a young one outside the build), and enabled again afterwards, also
    after an error; a collector the user disabled stays disabled."""
    x = enp.ones((3,), enp.float32)
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])
    f = chain(400)
    gc.callbacks.append(count)
    try:
        ember.grad(f)(x)
    finally:
        gc.callbacks.remove(count)
    assert len(collections) <= 2 and 2 not in collections and gc.isenabled(), collections  # (outside the build)
    with pytest.raises(TypeError):
        ember.grad(lambda v: v)(x)  # (a non-scalar output: the build raises)
    assert gc.isenabled()
    gc.disable()
    try:
        ember.grad(chain(3))(x)
        assert not gc.isenabled()
    finally:
        gc.enable()
