"""ember.optim against optax (a test-only dependency): the same updates and states, step after step, to 1e-6; a
jitted train step equals the eager one; schedules and losses equal optax's; masks, None leaves and errors."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ember
import ember.numpy as enp
from ember import optim
from recorded import jax_result


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def _params(lib_asarray):
    rng = np.random.default_rng(0)
    return {"w": lib_asarray(rng.normal(size=(4, 3)).astype(np.float32)),
            "b": lib_asarray(rng.normal(size=(3,)).astype(np.float32)),
            "layers": [lib_asarray(rng.normal(size=(2,)).astype(np.float32))]}


def _grads(step):
    rng = np.random.default_rng(100 + step)
    return {"w": rng.normal(size=(4, 3)).astype(np.float32), "b": rng.normal(size=(3,)).astype(np.float32),
            "layers": [rng.normal(size=(2,)).astype(np.float32)]}


def _optax_steps(opt, steps):
    """The leaves of optax's initial state, then of its updates, state and parameters after each step."""
    params = _params(jnp.asarray)
    state = opt.init(params)
    init, after = jax.tree.leaves(state), []
    for step in range(steps):
        updates, state = opt.update(jax.tree.map(jnp.asarray, _grads(step)), state, params)
        params = optax.apply_updates(params, updates)
        after.append(tuple(jax.tree.leaves(tree) for tree in (updates, state, params)))
    return init, after


def _close(ours, theirs, what, rtol=1e-6, atol=1e-6):
    ours_leaves, theirs_leaves = ember.tree.leaves(ours), jax.tree.leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves), what
    for a, b in zip(ours_leaves, theirs_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def _wd_mask(params):
    return {"w": True, "b": False, "layers": [True]}


OPTIMIZERS = {
    "sgd": lambda o: o.sgd(0.1),
    "sgd_momentum": lambda o: o.sgd(0.1, momentum=0.9),
    "sgd_nesterov": lambda o: o.sgd(0.1, momentum=0.9, nesterov=True),
    "adam": lambda o: o.adam(1e-2),
    "adam_eps_root": lambda o: o.adam(1e-2, b1=0.8, b2=0.99, eps=1e-6, eps_root=1e-8),
    "nadam": lambda o: o.nadam(1e-2),
    "adamw": lambda o: o.adamw(1e-2, weight_decay=0.1),
    "adamw_mask": lambda o: o.adamw(1e-2, weight_decay=0.1, mask=_wd_mask),
    "nadamw": lambda o: o.nadamw(1e-2),
    "rmsprop": lambda o: o.rmsprop(1e-2),
    "rmsprop_momentum": lambda o: o.rmsprop(1e-2, momentum=0.9, nesterov=True, eps_in_sqrt=False),
    "rmsprop_centered": lambda o: o.rmsprop(1e-2, centered=True),
    "rmsprop_bias_correction": lambda o: o.rmsprop(1e-2, bias_correction=True, initial_scale=0.1),
    "adam_schedule": lambda o: o.adam(o.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 8, 1e-4)),
    "sgd_schedule": lambda o: o.sgd(o.exponential_decay(0.1, 2, 0.5, staircase=True), momentum=0.5),
    "clipped_adam": lambda o: o.chain(o.clip_by_global_norm(1.0), o.adam(1e-2)),
    "clip_then_sgd": lambda o: o.chain(o.clip(0.5), o.sgd(0.1)),
    "ema": lambda o: o.chain(o.ema(0.9), o.scale(-0.1)),
    "trace_sign": lambda o: o.chain(o.trace(0.5), o.scale_by_sign(), o.scale_by_learning_rate(0.01)),
    "decayed_weights_schedule": lambda o: o.chain(o.add_decayed_weights(o.linear_schedule(0.1, 0.0, 4)),
                                                  o.sgd(0.1)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_optax(name):
    ours_opt = OPTIMIZERS[name](optim)
    ours_params = _params(ember.asarray)
    ours_state = ours_opt.init(ours_params)
    theirs_init, theirs_after = jax_result(lambda: _optax_steps(OPTIMIZERS[name](optax), 6))
    _close(ours_state, theirs_init, f"{name} init")
    for step in range(6):
        grads = _grads(step)
        ours_updates, ours_state = ours_opt.update(ember.tree.map(ember.asarray, grads), ours_state, ours_params)
        theirs_updates, theirs_state, theirs_params = theirs_after[step]
        ours_params = optim.apply_updates(ours_params, ours_updates)
        _close(ours_updates, theirs_updates, f"{name} updates at step {step}")
        _close(ours_state, theirs_state, f"{name} state at step {step}")
        _close(ours_params, theirs_params, f"{name} params at step {step}")


@pytest.mark.parametrize("name", ["adamw_mask", "sgd_nesterov", "adam_schedule", "clipped_adam"])
def test_jitted_train_step_equals_eager(name):
    opt = OPTIMIZERS[name](optim)

    def loss(params, x):
        return enp.sum((x @ params["w"] + params["b"]) ** 2) + enp.sum(params["layers"][0] ** 2)

    def step(params, state, x):
        value, grads = ember.value_and_grad(loss)(params, x)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, value
    x = ember.asarray(np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32))
    eager_params = jit_params = _params(ember.asarray)
    eager_state = jit_state = opt.init(eager_params)
    jstep = ember.jit(step)
    for _ in range(4):
        eager_params, eager_state, eager_value = step(eager_params, eager_state, x)
        jit_params, jit_state, jit_value = jstep(jit_params, jit_state, x)
    _close(jit_params, eager_params, f"{name} params", rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(jit_value), float(eager_value), rtol=1e-5)


SCHEDULES = {
    "constant": lambda o: o.constant_schedule(0.3),
    "linear": lambda o: o.linear_schedule(1.0, 0.1, 5, transition_begin=2),
    "polynomial": lambda o: o.polynomial_schedule(1.0, 0.1, 2.0, 6),
    "piecewise": lambda o: o.piecewise_constant_schedule(1.0, {2: 0.5, 5: 0.1}),
    "exponential": lambda o: o.exponential_decay(1.0, 3, 0.5, transition_begin=1, end_value=0.2),
    "exponential_staircase": lambda o: o.exponential_decay(1.0, 3, 0.5, staircase=True),
    "cosine": lambda o: o.cosine_decay_schedule(1.0, 7, alpha=0.1, exponent=2.0),
    "warmup_cosine": lambda o: o.warmup_cosine_decay_schedule(0.0, 1.0, 3, 10, 0.05),
    "warmup_exponential": lambda o: o.warmup_exponential_decay_schedule(0.0, 1.0, 2, 3, 0.5),
    "join": lambda o: o.join_schedules([o.constant_schedule(1.0), o.linear_schedule(1.0, 0.0, 4)], [3]),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_match_optax(name):
    ours = SCHEDULES[name](optim)
    for count in range(12):
        for c in (count, np.int32(count)):
            np.testing.assert_allclose(float(ours(c)), float(jax_result(lambda: SCHEDULES[name](optax)(c))), rtol=1e-6,
                                       err_msg=f"{name}({count})")
    traced = ember.jit(lambda c: enp.asarray(ours(c), dtype="float32"))(np.int32(4))
    np.testing.assert_allclose(float(traced), float(jax_result(lambda: SCHEDULES[name](optax)(4))), rtol=1e-6)


def test_losses_match_optax():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=(6,)).astype(np.int32)
    scores = rng.normal(size=(6, 5)).astype(np.float32)
    probs = jax_result(lambda: jax.nn.softmax(scores))
    preds, targets = rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=(6, 5)).astype(np.float32)
    binary = (rng.random(size=(6, 5)) < 0.5).astype(np.float32)
    cases = [
        ("softmax_cross_entropy", (logits, probs), {}),
        ("softmax_cross_entropy_with_integer_labels", (logits, labels), {}),
        ("sigmoid_binary_cross_entropy", (logits, binary), {}),
        ("l2_loss", (preds, targets), {}),
        ("squared_error", (preds, targets), {}),
        ("huber_loss", (preds, targets), {"delta": 0.5}),
        ("log_cosh", (preds, targets), {}),
        ("hinge_loss", (preds, np.sign(targets)), {}),
        ("cosine_similarity", (preds, targets), {}),
        ("cosine_distance", (preds, targets), {}),
    ]
    for name, args, kwargs in cases:
        ours = getattr(optim.losses, name)(*args, **kwargs)
        theirs = jax_result(lambda: getattr(optax.losses, name)(*args, **kwargs))
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-6, err_msg=name)
        assert getattr(optim, name) is getattr(optim.losses, name)
    # gradients of the classification losses
    for name, args in [("softmax_cross_entropy_with_integer_labels", (logits, labels)),
                       ("sigmoid_binary_cross_entropy", (logits, binary))]:
        ours = ember.grad(lambda z: getattr(optim.losses, name)(z, args[1]).mean())(args[0])
        theirs = jax_result(lambda: jax.grad(lambda z: getattr(optax.losses, name)(z, args[1]).mean())(args[0]))
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-7, err_msg=name)


def test_global_norm_apply_updates_and_none_leaves():
    tree = {"a": ember.asarray(np.array([3.0, 4.0], np.float32)), "b": None}
    assert np.isclose(float(optim.global_norm(tree)), 5.0)
    params = {"a": ember.asarray(np.ones(2, np.float16)), "b": None}
    new = optim.apply_updates(params, {"a": ember.asarray(np.full(2, 0.5, np.float32)), "b": None})
    assert new["b"] is None and new["a"].dtype == np.float16 and np.allclose(np.asarray(new["a"]), 1.5)
    opt = optim.sgd(0.1, momentum=0.9)
    state = opt.init(params)
    updates, state = opt.update({"a": ember.asarray(np.ones(2, np.float16)), "b": None}, state, params)
    assert updates["b"] is None


def test_errors():
    with pytest.raises(ValueError, match="add_decayed_weights: update needs params"):
        opt = optim.adamw(1e-3)
        p = {"w": enp.ones(3)}
        opt.update(p, opt.init(p))
    with pytest.raises(TypeError, match=r"softmax_cross_entropy_with_integer_labels: labels must be integers"):
        optim.softmax_cross_entropy_with_integer_labels(enp.zeros((2, 3)), enp.zeros(2))
    with pytest.raises(ValueError, match=r"labels \(3,\) must have logits' shape \(2, 3\) without axis -1"):
        optim.softmax_cross_entropy_with_integer_labels(enp.zeros((2, 3)), enp.zeros(3, "int32"))
    with pytest.raises(ValueError, match="cosine_decay_schedule: decay_steps must be positive"):
        optim.cosine_decay_schedule(1.0, 0)
    with pytest.raises(ValueError, match=r"chain: the state has 1 parts for 2 transformations"):
        optim.chain(optim.scale(1.0), optim.scale(2.0)).update({"w": enp.ones(2)}, (optim.EmptyState(),))
