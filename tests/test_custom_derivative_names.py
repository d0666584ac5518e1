"""jax.custom_derivatives' and jax.ad_checkpoint's remaining names on ember, against JAX: linear_call (values,
forward and reverse mode, linear_transpose, transposing twice, its errors), remat_opt_p bound directly, the
symbolic-zero helpers, and the policy verdicts Saveable / Recompute / Offloadable."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import ember
import ember.numpy as enp
from ember.ad_checkpoint import Offloadable, Recompute, Saveable
from ember.custom_derivatives import (CustomVJPPrimal, SymbolicZero, custom_vjp_primal_tree_values, linear_call,
                                      remat_opt_p, zero_from_primal)


def _div_add(lib, call):
    def div_add(x, denom):
        return x + call(lambda r, x: x / r, lambda r, t: t / r, denom, x)
    return div_add


def _custom_id(call):
    return lambda x: call(lambda _, x: x, lambda _, t: 7.0 * t, (), x)


def _tree(call):
    def f(x):
        out = call(lambda r, v: {"a": v[0] * r, "b": v[1]}, lambda r, ct: (ct["a"] * r * 2.0, ct["b"] + 1.0),
                   3.0, (x, x * 2.0))
        return out["a"].sum() + (out["b"] ** 2).sum()
    return f


def test_linear_call_as_jax():
    ours, theirs = _div_add(ember, linear_call), _div_add(jax, jax.custom_derivatives.linear_call)
    x = np.float32(9.0)
    checks = [lambda lib, f: f(x, 3.0), lambda lib, f: lib.grad(f)(x, 3.0),
              lambda lib, f: lib.jvp(lambda v: f(v, 3.0), (x,), (np.float32(1.0),)),
              lambda lib, f: lib.linear_transpose(lambda v: f(v, 3.0), x)(np.float32(18.0)),
              lambda lib, f: lib.jit(lib.grad(f))(x, 3.0)]
    for check in checks:
        np.testing.assert_allclose(np.asarray(check(ember, ours), dtype=np.float32).ravel(),
                                   np.asarray(check(jax, theirs), dtype=np.float32).ravel(), rtol=1e-6)
    ours, theirs = _custom_id(linear_call), _custom_id(jax.custom_derivatives.linear_call)
    for lib, f in ((ember, ours), (jax, theirs)):
        assert float(lib.grad(f)(1.0)) == 7.0
        assert float(lib.grad(lambda v: lib.grad(f)(v) * v)(2.0)) == 7.0
        assert float(lib.linear_transpose(lib.linear_transpose(f, 1.0), 1.0)((1.0,))[0]) == 1.0  # (transposed back)
    ours, theirs = _tree(linear_call), _tree(jax.custom_derivatives.linear_call)
    v = np.arange(3.0, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(ember.grad(ours)(v)), np.asarray(jax.grad(theirs)(v)), rtol=1e-6)


def test_linear_call_errors():
    f = _div_add(ember, linear_call)
    with pytest.raises(ValueError, match="residual argument was differentiated"):
        ember.grad(f, 1)(9.0, 3.0)
    with pytest.raises(NotImplementedError, match="Batching rule for 'linear_call' not implemented"):
        ember.vmap(_custom_id(linear_call))(enp.ones(3))
    with pytest.raises(NotImplementedError, match="Batching rule for 'linear_call' not implemented"):  # (JAX's)
        jax.vmap(_custom_id(jax.custom_derivatives.linear_call))(jnp.ones(3))
    bad = ember.grad(lambda x: linear_call(lambda r, v: v * 2.0, lambda r, ct: (ct, ct), (), x))
    with pytest.raises(TypeError, match="transpose output pytree structure must match that of linear inputs"):
        bad(1.0)


def _remat_jaxpr():
    return ember.make_jaxpr(lambda x, y: (enp.sin(x), enp.sin(x) * y))(np.ones(3, np.float32), np.float32(2.0))


def test_remat_opt_bound_directly():
    ir = _remat_jaxpr()
    x, y = np.linspace(0, 1, 3, dtype=np.float32), np.float32(2.0)

    def f(x, y):
        return remat_opt_p.bind(x, y, num_consts=0, num_res=1, fwd_jaxpr=ir, fun_jaxpr_thunk=None)

    res, out = f(x, y)
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * y, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(f)(x, y)[1]), np.sin(x) * y, rtol=1e-6)
    (_, out), (res_dot, out_dot) = ember.jvp(f, (x, y), (np.ones(3, np.float32), np.float32(0.0)))
    np.testing.assert_allclose(np.asarray(res_dot), np.cos(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out_dot), np.cos(x) * y, rtol=1e-6)
    batched = ember.vmap(f, in_axes=(0, None))(np.stack([x, 2 * x]), y)
    np.testing.assert_allclose(np.asarray(batched[1]), np.sin(np.stack([x, 2 * x])) * y, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="does not support higher-order AD"):  # (JAX's transpose rule)
        ember.grad(lambda x: f(x, y)[1].sum())(x)
    assert remat_opt_p.name == jax.custom_derivatives.remat_opt_p.name == "remat_opt"
    assert remat_opt_p.multiple_results


def test_symbolic_zero_helpers_as_jax():
    tree = {"a": np.ones(2, np.float32), "b": np.int32(3), "c": np.arange(2, dtype=np.int32)}
    ours, theirs = zero_from_primal(tree), jax.custom_derivatives.zero_from_primal(tree)
    for key in tree:
        assert np.shape(ours[key]) == np.shape(theirs[key])
        assert np.dtype(ours[key].dtype) == np.dtype(theirs[key].dtype)  # (float0 for the integers)
    assert ours["b"].dtype == ember.float0
    zeros = zero_from_primal((np.ones(2, np.float32), 1.0), symbolic_zeros=True)
    assert all(isinstance(z, SymbolicZero) for z in zeros) and zeros[0].shape == (2,)
    assert custom_vjp_primal_tree_values({"a": CustomVJPPrimal(1.0, True)}) == {"a": 1.0}
    with pytest.raises(TypeError, match="unexpected leaf type <class 'float'>"):
        custom_vjp_primal_tree_values({"a": 1.0})


def test_policy_verdicts_as_jax():
    import jax.ad_checkpoint
    from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals  # (not public in JAX 0.10.2)

    def saved(lib, xs, policy):
        f = lib.checkpoint(lambda x: xs.sin(xs.sin(x) * 2.0).sum(), policy=policy)
        found = (ember.ad_checkpoint.saved_residuals if lib is ember else jax_saved_residuals)(
            f, xs.ones(3, xs.float32))
        return [(tuple(a.shape), np.dtype(a.dtype)) for a, _ in found]

    def sin_saved(verdicts):
        return lambda p, *a, **k: verdicts[0] if p.name == "sin" else verdicts[1]

    assert saved(ember, enp, sin_saved((Saveable, Recompute))) == \
        saved(jax, jnp, sin_saved((jax.ad_checkpoint.Saveable, jax.ad_checkpoint.Recompute)))
    assert saved(ember, enp, sin_saved((Offloadable("device", "pinned_host"), Recompute))) == \
        saved(jax, jnp, sin_saved((jax.ad_checkpoint.Saveable, jax.ad_checkpoint.Recompute)))
    assert saved(ember, enp, sin_saved((Recompute, Recompute))) == \
        saved(jax, jnp, sin_saved((jax.ad_checkpoint.Recompute, jax.ad_checkpoint.Recompute)))
    x = np.ones(3, np.float32)
    g = ember.grad(ember.checkpoint(lambda v: enp.sin(enp.sin(v)).sum(),
                                    policy=lambda p, *a, **k: Saveable if p.name == "sin" else Recompute))(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(np.sin(x)) * np.cos(x), rtol=1e-6)
    with pytest.raises(TypeError, match="Did you return `Offloadable` instead of an instantiated"):
        ember.grad(ember.checkpoint(lambda v: enp.sin(v).sum(), policy=lambda *a, **k: Offloadable))(x)
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool"):
        ember.grad(ember.checkpoint(lambda v: enp.sin(v).sum(), policy=lambda *a, **k: "yes"))(x)
    assert repr(Recompute) == "Recompute" and Offloadable("a", "b").dst == "b"


def test_names_match_jax():
    import ember.ad_checkpoint
    import ember.custom_derivatives
    for ours, theirs in [(ember.custom_derivatives, jax.custom_derivatives),
                         (ember.ad_checkpoint, jax.ad_checkpoint)]:
        assert [n for n in dir(theirs) if not n.startswith("_") and not hasattr(ours, n)] == []
