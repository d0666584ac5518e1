"""ember.experimental.control_deps against jax.experimental.control_deps: the same values as JAX's (eagerly and
under jit), the order written into the lowered program (the destination's operation after the source's, through
an optimization barrier), schedule's chain, the cycle refused, and what JAX refuses (grad, vmap) computed."""
import re

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.experimental import control_deps as jax_cd

import ember
import ember.numpy as enp
from ember._hlo import LoweringError
from ember.experimental import control_deps as cd


def _ordered(np_, deps):
    def f(x):
        b = np_.cos(x)  # (the destination comes first in program order)
        a = np_.sin(x)
        deps.control_dep(a, b)
        return a + b * 3.0
    return f


def _line(text, op):
    return next(i for i, line in enumerate(text.splitlines()) if f'"stablehlo.{op}"' in line)


@pytest.mark.parametrize("jit", [False, True])
def test_values_as_jax(jit):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    e, j = _ordered(enp, cd), _ordered(jnp, jax_cd)
    got = (ember.jit(e) if jit else e)(x)
    want = (jax.jit(j) if jit else j)(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_destination_runs_after_the_source():
    text = ember.jit(_ordered(enp, cd)).lower(np.ones(3, np.float32)).as_text()
    sine, barrier, cosine = _line(text, "sine"), _line(text, "optimization_barrier"), _line(text, "cosine")
    assert sine < barrier < cosine
    barrier_line = text.splitlines()[barrier]
    result = re.match(r"\s*(%\d+):\d+ = ", barrier_line).group(1)
    assert f"{result}#1" in text.splitlines()[cosine]  # (cos reads x through the barrier)
    # JAX writes the custom call XLA's rewriter turns into a control edge
    assert "custom_call @control_dep" in jax.jit(_ordered(jnp, jax_cd)).lower(np.ones(3, np.float32)).as_text()


def test_schedule_chains_the_order():
    def f(x):
        c, b, a = x + 3.0, enp.sin(x), enp.exp(x)
        cd.schedule([a, b, c])
        return a * b * c
    text = ember.jit(f).lower(np.ones(2, np.float32)).as_text()
    assert _line(text, "exponential") < _line(text, "sine") < _line(text, "add")
    assert text.count("optimization_barrier") == 2
    x = np.float32(0.5)
    np.testing.assert_allclose(ember.jit(f)(x), (x + 3) * np.sin(x) * np.exp(x), rtol=1e-6)


def test_a_cycle_is_refused():
    def f(x):
        a = x * 2.0
        b = enp.sin(a)
        cd.control_dep(b, a)  # (b is computed from a: it cannot run first)
        return b
    with pytest.raises(LoweringError, match="control_dep: the source .* \\(sin\\) depends on the destination .* "
                                            "\\(mul\\).*a cycle"):
        ember.jit(f)(1.0)


def test_kept_by_the_passes_and_composes():
    f = _ordered(enp, cd)
    jaxpr = str(ember.make_jaxpr(ember.jit(f))(1.0))
    assert "control_dep" in jaxpr
    x = np.linspace(0, 1, 4, dtype=np.float32)
    # JAX refuses both (an FFI call without rules); ember orders the primal and the batched computations
    with pytest.raises(ValueError):
        jax.grad(lambda x: _ordered(jnp, jax_cd)(x).sum())(x)
    g = ember.jit(ember.grad(lambda x: f(x).sum()))(x)
    np.testing.assert_allclose(g, np.cos(x) - 3 * np.sin(x), rtol=1e-6)
    assert "optimization_barrier" in ember.jit(ember.grad(lambda x: f(x).sum())).lower(x).as_text()
    v = ember.jit(ember.vmap(f))(x.reshape(2, 2))
    np.testing.assert_allclose(v, (np.sin(x) + 3 * np.cos(x)).reshape(2, 2), rtol=1e-6)
    out = ember.jit(lambda x: ember.lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0])(x)
    np.testing.assert_allclose(out, f(f(x)), rtol=1e-6)
