"""Oracle test of custom_vmap_call (ember.custom_batching.custom_vmap): values eagerly and under jit, forward-mode
derivatives against JAX and finite differences, reverse mode refused (as JAX), and batching (its rule, here the
same function written for a batch) against a loop over the batch."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from oracle import Case, oracle_tests


def _custom_vmap_fn(lib, np_):
    @lib.custom_batching.custom_vmap
    def f(x, y):
        return np_.sin(x) * y + x

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):  # batched values have the batch axis first; ys may be unbatched
        ys = ys if in_batched[1] or not in_batched[0] else np_.broadcast_to(ys, xs.shape)
        xs = xs if in_batched[0] or not in_batched[1] else np_.broadcast_to(xs, ys.shape)
        return np_.sin(xs) * ys + xs, any(in_batched)
    return f


CASES = [
    Case("custom_vmap_call", _custom_vmap_fn(ember, enp), lambda x, y: (np.sin(x) * y + x).astype(x.dtype),
         [((4,), (4,)), ((2, 3), (2, 3))], ["float32", "float64"], jax=_custom_vmap_fn(jax, jnp), reverse=False),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


def test_the_rule_decides_under_vmap_as_jax():
    def make(lib, np_):
        @lib.custom_batching.custom_vmap
        def f(x, y):
            return np_.sin(x) * y

        @f.def_vmap
        def rule(axis_size, in_batched, xs, ys):  # (not f batched: shows that the rule ran)
            return np_.sin(xs) * ys * 10.0, any(in_batched)

        @lib.custom_batching.sequential_vmap
        def g(x, y):
            return np_.sum(x) * y
        return f, g
    (f, g), (fj, gj) = make(ember, enp), make(jax, jnp)
    o, m = np.linspace(0.1, 1.0, 3, dtype=np.float32), np.ones((2, 3), np.float32)
    checks = [lambda lib, f, g: lib.vmap(f)(o, o), lambda lib, f, g: lib.vmap(f, in_axes=(0, None))(o, 2.0),
              lambda lib, f, g: lib.jvp(f, (1.0, 2.0), (1.0, 0.5)),
              lambda lib, f, g: lib.jit(lambda a, b: lib.jvp(lib.vmap(f), (a, b), (b, a)))(o, o),
              lambda lib, f, g: lib.vmap(lib.vmap(f))(m, m), lambda lib, f, g: f(0.5, 2.0),
              lambda lib, f, g: lib.vmap(g)(m.T, o), lambda lib, f, g: lib.vmap(g, in_axes=(0, None))(m.T, 2.0)]
    for check in checks:
        for ours, theirs in zip(jax.tree_util.tree_leaves(check(ember, f, g)),
                                jax.tree_util.tree_leaves(check(jax, fj, gj))):
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert "scan" in str(ember.make_ir(ember.vmap(g))(m.T, o))  # (a loop over the batch)
    with pytest.raises(NotImplementedError, match="custom_vmap"):
        ember.grad(f)(1.0, 2.0)
    with pytest.raises(AttributeError, match="No batching rule"):
        ember.jit(ember.custom_batching.custom_vmap(lambda x: x))(1.0)
    bad = ember.custom_batching.custom_vmap(lambda x: x)
    bad.def_vmap(lambda n, batched, xs: (xs[0], True))
    with pytest.raises(TypeError, match="vmap rule's output 0 is f32"):
        ember.vmap(bad)(o)
