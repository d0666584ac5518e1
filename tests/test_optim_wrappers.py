"""ember.optim's wrappers against optax's, step by step (updates, states and parameters to 1e-6), with NaN and Inf
gradients at some steps: apply_if_finite, zero_nans, MultiSteps (mean, sum, a schedule, skip_not_finite,
skip_large_updates), flatten, lookahead and inject_hyperparams. The default run checks all of them composed in one
jitted update; the slow tier checks each alone, eagerly."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ember
from ember import optim
from test_optim import _close, _grads, _params


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def _bad_grads(step, bad_steps):
    """_grads(step), with a NaN (even steps) or an Inf (odd steps) in "w" at bad_steps."""
    grads = _grads(step)
    if step in bad_steps:
        grads["w"][1, 2] = np.nan if step % 2 == 0 else np.inf
    return grads


WRAPPERS = {  # name -> (optimizer from a library, steps with a NaN or an Inf gradient)
    "apply_if_finite": (lambda o: o.apply_if_finite(o.adam(1e-2), max_consecutive_errors=2), {1, 3, 4, 5}),
    "zero_nans": (lambda o: o.chain(o.zero_nans(), o.sgd(0.1, momentum=0.9)), {2, 4}),
    "multi_steps_mean": (lambda o: o.MultiSteps(o.adam(1e-2), 3).gradient_transformation(), set()),
    "multi_steps_sum_schedule": (lambda o: o.MultiSteps(o.sgd(0.1, momentum=0.9), lambda step: 2 + (step >= 1),
                                                        use_grad_mean=False).gradient_transformation(), set()),
    "multi_steps_skip_not_finite": (lambda o: o.MultiSteps(o.adam(1e-2), 2, should_skip_update_fn=o.skip_not_finite
                                                           ).gradient_transformation(), {1, 2}),
    "multi_steps_skip_large": (lambda o: o.MultiSteps(o.sgd(0.1), 2, should_skip_update_fn=functools.partial(
        o.skip_large_updates, max_squared_norm=17.0)).gradient_transformation(), set()),
    "flatten": (lambda o: o.flatten(o.adam(1e-2)), set()),
    "inject_adam_schedule": (lambda o: o.inject_hyperparams(o.adam)(o.linear_schedule(1e-2, 1e-3, 4), b1=0.8),
                             set()),
    "inject_sgd_static": (lambda o: o.inject_hyperparams(o.sgd, static_args="nesterov")(0.1, 0.9, nesterov=True),
                          set()),
    "lookahead": (lambda o: o.lookahead(o.adam(1e-2), sync_period=3, slow_step_size=0.5), set()),
    "lookahead_reset": (lambda o: o.lookahead(o.sgd(0.1, momentum=0.9), 2, 0.3, reset_state=True), set()),
}


def _composite(o):
    """Every wrapper at once, each seeing its case: zero_nans zeroes the NaN of step 1; apply_if_finite rejects the
    Inf of step 2 and gives up at step 3 (max_consecutive_errors=1), where MultiSteps' skip_not_finite drops it;
    MultiSteps accumulates pairs of steps for the flattened SGD with momentum whose learning rate is a schedule
    injected by inject_hyperparams; lookahead syncs every third step.
    (optax's reset_state turns boolean states into int32 ones, (1 - sync) * state + sync * init: ember keeps the
    dtypes, so reset_state is compared on float states only, in the slow tier.)"""
    sgd = o.inject_hyperparams(o.sgd)(o.linear_schedule(0.1, 0.01, 4), momentum=0.9)
    inner = o.MultiSteps(o.flatten(sgd), 2, should_skip_update_fn=o.skip_not_finite)
    fast = o.chain(o.zero_nans(), o.apply_if_finite(inner.gradient_transformation(), max_consecutive_errors=1))
    return o.lookahead(fast, sync_period=3, slow_step_size=0.5)


def test_all_wrappers_composed_and_jitted_match_optax():
    _compare_with_optax(_composite, {1, 2, 3}, jit=True, synced_pair=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_wrapper_matches_optax(name):
    make, bad_steps = WRAPPERS[name]
    _compare_with_optax(make, bad_steps, jit=False, synced_pair=name.startswith("lookahead"))


def _compare_with_optax(make, bad_steps, jit, synced_pair):
    """Six steps of make(optim) and make(optax) side by side (each update jitted when jit); the parameters are a
    LookaheadParams pair when synced_pair."""
    ours_opt, theirs_opt = make(optim), make(optax)
    ours_init, ours_update = (ember.jit(ours_opt.init), ember.jit(ours_opt.update)) if jit else ours_opt
    theirs_init, theirs_update = (jax.jit(theirs_opt.init), jax.jit(theirs_opt.update)) if jit else theirs_opt
    ours_params, theirs_params = _params(ember.asarray), _params(jnp.asarray)
    if synced_pair:
        ours_params = optim.LookaheadParams.init_synced(ours_params)
        theirs_params = optax.LookaheadParams.init_synced(theirs_params)
    ours_state, theirs_state = ours_init(ours_params), theirs_init(theirs_params)
    _close(ours_state, theirs_state, "init")
    for step in range(6):
        grads = _bad_grads(step, bad_steps)
        ours_updates, ours_state = ours_update(ember.tree.map(ember.asarray, grads), ours_state, ours_params)
        theirs_updates, theirs_state = theirs_update(jax.tree.map(jnp.asarray, grads), theirs_state, theirs_params)
        ours_params = optim.apply_updates(ours_params, ours_updates)
        theirs_params = optax.apply_updates(theirs_params, theirs_updates)
        _close(ours_updates, theirs_updates, f"updates at step {step}")
        _close(ours_state, theirs_state, f"state at step {step}")
        _close(ours_params, theirs_params, f"params at step {step}")


def test_injected_hyperparameters_can_be_changed_in_the_state():
    ours_opt, theirs_opt = optim.inject_hyperparams(optim.sgd)(0.1), optax.inject_hyperparams(optax.sgd)(0.1)
    ours_params, theirs_params = _params(ember.asarray), _params(jnp.asarray)
    ours_state, theirs_state = ours_opt.init(ours_params), theirs_opt.init(theirs_params)
    ours_state.hyperparams["learning_rate"] = ember.asarray(np.float32(0.5))
    theirs_state.hyperparams["learning_rate"] = jnp.asarray(np.float32(0.5))
    grads = _grads(0)
    ours_updates, ours_state = ours_opt.update(ember.tree.map(ember.asarray, grads), ours_state, ours_params)
    theirs_updates, theirs_state = theirs_opt.update(jax.tree.map(jnp.asarray, grads), theirs_state, theirs_params)
    _close(ours_updates, theirs_updates, "updates")
    _close(ours_state, theirs_state, "state")
    np.testing.assert_allclose(np.asarray(ours_updates["w"]), -0.5 * grads["w"], rtol=1e-6)
    with pytest.raises(ValueError, match=r"inject_hyperparams: static_args \['nope'\] must name parameters"):
        optim.inject_hyperparams(optim.sgd, static_args="nope")
