"""Checkpoint policies, checkpoint_name and print_saved_residuals against JAX's (jax.checkpoint_policies,
jax.ad_checkpoint): the same values and gradients for every policy, and the same saved residuals (type and origin,
the source line aside) as JAX lists them; policies under jit, vmap and scan; their errors."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.ad_checkpoint import saved_residuals as jax_saved  # (not exported by jax.ad_checkpoint)
from jax.ad_checkpoint import checkpoint_name as jax_name

import ember
import ember.numpy as enp
from ember import lax
from ember.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals

RNG = np.random.default_rng(0)
W1, W2, W3 = (RNG.normal(size=s).astype(np.float32) * 0.5 for s in ((5, 4), (6, 5), (7, 6)))
X = RNG.normal(size=4).astype(np.float32)
ARGS = (W1, W2, W3, X)


def network(lib, np_, name):
    """JAX's three-layer example (its gradient-checkpointing docs), each layer's output named."""
    def g(W, x):
        return np_.sin(np_.dot(W, x))

    def f(W1, W2, W3, x):
        x = name(g(W1, x), name="a")
        x = name(g(W2, x), name="b")
        return np_.sum(name(g(W3, x), name="c") ** 2)
    return f


def policies(cp):
    return {
        "default": None,
        "nothing_saveable": cp.nothing_saveable,
        "everything_saveable": cp.everything_saveable,
        "dots_saveable": cp.dots_saveable,
        "checkpoint_dots": cp.checkpoint_dots,
        "dots_with_no_batch_dims_saveable": cp.dots_with_no_batch_dims_saveable,
        "checkpoint_dots_with_no_batch_dims": cp.checkpoint_dots_with_no_batch_dims,
        "save_only_these_names": cp.save_only_these_names("a", "c"),
        "save_any_names_but_these": cp.save_any_names_but_these("b"),
        "save_anything_except_these_names": cp.save_anything_except_these_names("b"),
        "save_from_both_policies": cp.save_from_both_policies(cp.save_only_these_names("b"),
                                                              cp.dots_with_no_batch_dims_saveable),
        "offload_dot_with_no_batch_dims": cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
        "save_and_offload_only_these_names": cp.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["c"], offload_src="device",
            offload_dst="pinned_host"),
    }


def _summary(residuals):
    """The residuals as (type, origin) with the source line dropped, sorted (the two list them in other orders)."""
    out = []
    for aval, where in residuals:
        kind = re.sub(r" from \S*\.py:.*$", "", where)
        short = aval.str_short(short_dtypes=True) if "jax" in type(aval).__module__ else aval.str_short()
        out.append((short, kind))
    return sorted(out)


@pytest.mark.parametrize("which", list(policies(jax.checkpoint_policies)))
def test_policy_matches_jax(which):
    policy, jpolicy = policies(ember.checkpoint_policies)[which], policies(jax.checkpoint_policies)[which]
    f = ember.checkpoint(network(ember, enp, checkpoint_name), policy=policy)
    jf = jax.checkpoint(network(jax, jnp, jax_name), policy=jpolicy)
    argnums = (0, 1, 2, 3)
    value, grads = ember.value_and_grad(f, argnums)(*ARGS)
    jvalue, jgrads = jax.value_and_grad(jf, argnums)(*ARGS)
    np.testing.assert_allclose(float(value), float(jvalue), rtol=1e-6)
    for g, j in zip(grads, jgrads):
        np.testing.assert_allclose(np.asarray(g), np.asarray(j), rtol=1e-5, atol=1e-6)
    if which in ("save_anything_except_these_names", "offload_dot_with_no_batch_dims",
                 "save_and_offload_only_these_names"):
        return  # (JAX lists offloaded values differently; ember saves them: compared with the saving policies)
    assert _summary(saved_residuals(f, *ARGS)) == _summary(jax_saved(jf, *ARGS)), which


def test_offloading_policies_save_on_the_cpu():
    cp = ember.checkpoint_policies
    f = network(ember, enp, checkpoint_name)
    offload = saved_residuals(ember.checkpoint(f, policy=cp.offload_dot_with_no_batch_dims("device", "pinned_host")),
                              *ARGS)
    assert offload == saved_residuals(ember.checkpoint(f, policy=cp.dots_with_no_batch_dims_saveable), *ARGS)
    both = cp.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["c"],
                                                offload_src="device", offload_dst="pinned_host")
    assert saved_residuals(ember.checkpoint(f, policy=both), *ARGS) == saved_residuals(
        ember.checkpoint(f, policy=cp.save_only_these_names("a", "c")), *ARGS)
    everything = saved_residuals(ember.checkpoint(f, policy=cp.everything_saveable), *ARGS)
    assert saved_residuals(ember.checkpoint(f, policy=cp.save_anything_except_these_names("b")), *ARGS) == everything


def test_print_saved_residuals_format(capsys):
    f = ember.checkpoint(network(ember, enp, checkpoint_name),
                         policy=ember.checkpoint_policies.save_only_these_names("a"))
    print_saved_residuals(f, *ARGS)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["f32[5,4] from the argument W1", "f32[6,5] from the argument W2",
                         "f32[7,6] from the argument W3", "f32[4] from the argument x"]
    assert re.fullmatch(r"f32\[5\] named 'a' from .*test_checkpointing\.py:\d+:\d+ \(f\)", lines[4]), lines[4]
    assert len(lines) == 5
    # pytree arguments and keywords are named by their paths; a nested jit's outputs by the function's name
    inner = ember.jit(lambda x: enp.sin(x))

    def h(params, *, scale):
        return enp.sum(inner(params["w"] * scale) * params["b"][0])
    kept = dict((where.split(" from ")[0] if "argument" not in where else where, aval.str_short())
                for aval, where in saved_residuals(h, {"w": np.ones(3, np.float32), "b": [np.ones(3, np.float32)]},
                                                   scale=np.float32(2.0)))
    assert "from the argument params['b'][0]" in kept and "from the argument scale" in kept
    assert any(k.startswith("output of jitted function '<lambda>'") for k in kept), kept


def test_policies_under_jit_vmap_and_scan():
    cp = ember.checkpoint_policies

    def layer(lib, np_, name):
        def body(h, w):
            h = name(np_.tanh(h @ w), name="act")
            return np_.tanh(h @ w), None
        return body
    ws = RNG.normal(size=(3, 8, 8)).astype(np.float32) * 0.3
    h0 = RNG.normal(size=(2, 8)).astype(np.float32)
    for policy, jpolicy in ((None, None), (cp.save_only_these_names("act"),
                                           jax.checkpoint_policies.save_only_these_names("act")),
                            (cp.dots_saveable, jax.checkpoint_policies.dots_saveable)):
        def f(ws, h, policy=policy):
            return enp.sum(lax.scan(ember.checkpoint(layer(ember, enp, checkpoint_name), policy=policy), h, ws)[0] ** 2)

        def jf(ws, h, jpolicy=jpolicy):
            return jnp.sum(jax.lax.scan(jax.checkpoint(layer(jax, jnp, jax_name), policy=jpolicy), h, ws)[0] ** 2)
        want = jax.grad(jf, (0, 1))(ws, h0)
        for g, j in zip(ember.jit(ember.grad(f, (0, 1)))(ws, h0), want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(j), rtol=2e-5, atol=1e-6)
        if policy is None:  # (eagerly and under vmap: one policy is enough, the rules are the same)
            for g, j in zip(ember.grad(f, (0, 1))(ws, h0), want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(j), rtol=2e-5, atol=1e-6)
            per_example = ember.jit(ember.vmap(ember.grad(f), in_axes=(None, 0)))(ws, h0[:, None])
            jper = jax.vmap(jax.grad(jf), in_axes=(None, 0))(ws, h0[:, None])
            np.testing.assert_allclose(np.asarray(per_example), np.asarray(jper), rtol=2e-5, atol=1e-6)


def test_the_policy_decides_what_the_backward_pass_recomputes():
    def f(x):
        y = checkpoint_name(enp.sin(x), "y")
        return enp.sum(enp.sin(y) * enp.cos(y))
    x = np.linspace(0.1, 1.0, 5).astype(np.float32)

    def sines(policy):
        ir = ember.make_ir(ember.value_and_grad(ember.checkpoint(f, policy=policy)))(x)
        return str(ir).count(" = sin ")
    cp = ember.checkpoint_policies
    assert sines(cp.everything_saveable) == 2  # each sine once, in the forward pass
    assert sines(cp.save_only_these_names("y")) == 3  # y kept: only sin(y) computed again
    assert sines(None) == 4  # both computed again in the backward pass
    assert "optimization_barrier" in str(ember.make_ir(ember.grad(ember.checkpoint(f)))(x))


def test_errors():
    cp = ember.checkpoint_policies
    with pytest.raises(ValueError, match="should be exclusive"):
        cp.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
                                             offload_src="device", offload_dst="pinned_host")
    with pytest.raises(TypeError, match="names must be str"):
        cp.save_only_these_names(3)
    with pytest.raises(TypeError, match="checkpoint_name: name must be a str"):
        checkpoint_name(np.ones(2), 3)
    with pytest.raises(TypeError, match="policy must be a callable"):
        ember.checkpoint(enp.sin, policy="dots")
    bad = ember.checkpoint(lambda x: enp.sum(enp.sin(x)), policy=lambda prim, *a, **k: "save")
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool or"):
        ember.grad(bad)(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="must return booleans"):
        ember.grad(ember.checkpoint(lambda x: enp.sum(enp.sin(x)), policy=cp.save_from_both_policies(
            lambda *a, **k: "save", cp.nothing_saveable)))(np.ones(3, np.float32))
    # checkpoint_name is the identity, under every transformation
    np.testing.assert_array_equal(np.asarray(ember.jit(ember.vmap(lambda v: checkpoint_name(v * 2, "v")))(
        np.ones((2, 3), np.float32))), 2.0)
    out, tangent = ember.jvp(lambda v: checkpoint_name(enp.sin(v), "s"), (np.float32(0.5),), (np.float32(1.0),))
    np.testing.assert_allclose(float(tangent), np.cos(0.5), rtol=1e-6)
