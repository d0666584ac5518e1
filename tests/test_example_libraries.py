"""ember.example_libraries.optimizers against jax.example_libraries.optimizers: the same optimizer, step sizes and
gradients, over a pytree of parameters, step by step under jit (and the state through jit as a pytree)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.example_libraries import optimizers as joptimizers

import ember
import ember.numpy as enp
from ember.example_libraries import optimizers
from recorded import jax_result

_rng = np.random.default_rng(0)
PARAMS = {"w": _rng.normal(size=(4, 3)).astype(np.float32), "b": _rng.normal(size=(3,)).astype(np.float32),
          "s": np.float32(0.5)}
GRADS = [{k: (_rng.normal(size=np.shape(v)) * (k != "b" or i != 0)).astype(np.float32) for k, v in PARAMS.items()}
         for i in range(5)]  # (b's first gradient is zero: adagrad's 0/0 guard)

OPTIMIZERS = [
    ("sgd", (0.1,)), ("sgd", (("exponential_decay", 0.1, 2, 0.5),)), ("momentum", (0.1, 0.9)),
    ("nesterov", (0.05, 0.9)), ("adagrad", (0.2,)), ("rmsprop", (0.01,)), ("rmsprop_momentum", (0.01, 0.8)),
    ("adam", (0.01,)), ("adam", (("inverse_time_decay", 0.01, 2, 0.5, True),)), ("adamax", (0.02, 0.8, 0.9)),
    ("sgd", (("polynomial_decay", 0.1, 3, 0.01, 2.0),)),
    ("momentum", (("piecewise_constant", [1, 3], [0.1, 0.05, 0.01]), 0.5)), ("sm3", (0.1,)), ("sm3", (0.05, 0.5)),
]


def _args(lib, args):
    first = args[0]
    if isinstance(first, tuple):
        first = getattr(lib, first[0])(*first[1:])
    return (first,) + tuple(args[1:])


def _run(lib, name, args, np_):
    init, update, get_params = getattr(lib, name)(*_args(lib, args))
    step = (ember if np_ is enp else jax).jit(update)
    state = init(PARAMS)
    for i, g in enumerate(GRADS):
        state = step(i, g, state)
    return {k: np.asarray(v) for k, v in get_params(state).items()}


@pytest.mark.parametrize("name, args", OPTIMIZERS, ids=lambda v: str(v))
def test_optimizers_match_jax(name, args):
    got = _run(optimizers, name, args, enp)
    want = jax_result(lambda: _run(joptimizers, name, args, jnp))
    for k in PARAMS:
        # (the parameters' dtype: float32; JAX in this test process runs with x64 on, where its piecewise_constant
        # schedule's values become float64 and promote them)
        assert got[k].dtype == np.float32 and got[k].shape == want[k].shape
        np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=2e-7)


def test_state_is_a_pytree_and_utilities_match_jax():
    init, update, get_params = optimizers.adam(1e-2)
    state = init(PARAMS)
    leaves, tree = ember.tree_util.tree_flatten(state)
    assert len(leaves) == 3 * len(PARAMS)  # (x, m, v per leaf)
    assert isinstance(ember.tree_util.tree_unflatten(tree, leaves), optimizers.OptimizerState)
    with pytest.raises(TypeError, match="does not match"):
        update(0, {"w": PARAMS["w"]}, state)
    got_norm = float(optimizers.l2_norm(GRADS[1]))
    want_norm = jax_result(lambda: float(joptimizers.l2_norm(GRADS[1])))
    np.testing.assert_allclose(got_norm, want_norm, rtol=1e-6)
    for limit in (0.5, 100.0):
        clipped = optimizers.clip_grads(GRADS[1], limit)
        want = jax_result(lambda: {k: np.asarray(v) for k, v in joptimizers.clip_grads(GRADS[1], limit).items()})
        for k in PARAMS:
            np.testing.assert_allclose(np.asarray(clipped[k]), want[k], rtol=1e-6)
    with pytest.raises(ValueError, match="one more entry"):
        optimizers.piecewise_constant([1, 2], [0.1])
    # a state unpacked to one pytree of JoinPoints (for saving) and packed back
    state = update(0, GRADS[0], state)
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked["w"], optimizers.JoinPoint) and len(marked["w"].subtree) == 3
    again = optimizers.pack_optimizer_state(marked)
    for a, b in zip(ember.tree_util.tree_leaves(again), ember.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    jstate = joptimizers.adam(1e-2)[0]({k: jnp.asarray(v) for k, v in PARAMS.items()})
    assert len(joptimizers.unpack_optimizer_state(jstate)["w"].subtree) == 3  # (JAX's shape of the same)
