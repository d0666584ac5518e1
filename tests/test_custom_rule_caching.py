"""Custom rules are Python, and outside jit JAX runs them on every call: grad, value_and_grad, vjp, jvp, vmap and
the Jacobians of a function with a custom_vjp or custom_jvp see a rule whose result changed (a scale read from
Python state), and a bwd that raises raises again. jit's caches key on the function object, so one jitted
function keeps what its first trace computed, in JAX and in ember alike; a fresh jit wrapper traces anew. Each
case runs side by side with JAX (jax 0.10.2), the oracle of what each call returns."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api import templates
from ember._core.ir import structural_key
from ember._runtime import compiler

LIBS = [(ember, enp), (jax, jnp)]
X = np.float32(0.5)
XS = np.linspace(0.1, 0.9, 3, dtype=np.float32)
ONE = np.float32(1.0)
SCALES = (1.0, 2.0, 3.0)


class Rules:
    """One library's custom_vjp function f and custom_jvp function h, both sin, whose derivative rules scale the
    true derivative by `scale` (read when a rule runs) and raise while `fail` is set. calls counts rule runs."""

    def __init__(self, lib, np_):
        self.lib, self.np, self.scale, self.fail, self.calls = lib, np_, 1.0, False, 0

        def check():
            self.calls += 1
            if self.fail:
                raise ValueError("the rule raised")

        @lib.custom_vjp
        def f(x):
            return np_.sin(x)

        def bwd(res, g):
            check()
            return (g * np_.cos(res) * self.scale,)
        f.defvjp(lambda x: (np_.sin(x), x), bwd)

        @lib.custom_jvp
        def h(x):
            return np_.sin(x)

        @h.defjvp
        def h_jvp(primals, tangents):
            check()
            return np_.sin(primals[0]), tangents[0] * np_.cos(primals[0]) * self.scale
        self.f, self.h = f, h


def per_scale(rules, call):
    """call(rules) once per scale in SCALES, as floats (the first element of an array result)."""
    out = []
    for scale in SCALES:
        rules.scale = scale
        out.append(float(np.asarray(call(rules)).reshape(-1)[0]))
    return out


def both(call):
    """per_scale for ember and for JAX, each with its own Rules."""
    return [per_scale(Rules(lib, np_), call) for lib, np_ in LIBS]


def new_values():
    return [np.cos(X) * s for s in SCALES]


# Outside jit every call runs the rules' Python again (JAX re-traces grad, vjp, jvp and vmap on each call)
EAGER = {
    "grad custom_vjp": lambda r: r.lib.grad(r.f)(X),
    "grad custom_jvp": lambda r: r.lib.grad(r.h)(X),
    "value_and_grad": lambda r: r.lib.value_and_grad(r.f)(X)[1],
    "vjp custom_vjp": lambda r: r.lib.vjp(r.f, X)[1](ONE)[0],
    "vjp custom_jvp": lambda r: r.lib.vjp(r.h, X)[1](ONE)[0],
    "jvp custom_jvp": lambda r: r.lib.jvp(r.h, (X,), (ONE,))[1],
    "linearize": lambda r: r.lib.linearize(r.h, X)[1](ONE),
    "jacrev": lambda r: r.lib.jacrev(r.f)(X),
    "jacfwd": lambda r: r.lib.jacfwd(r.h)(X),
    "vmap(grad)": lambda r: r.lib.vmap(r.lib.grad(r.f))(np.full(2, X)),
    "grad of a closure": lambda r: r.lib.grad(lambda x: r.f(x) * 1.0)(X),
    "fresh jit(grad)": lambda r: r.lib.jit(r.lib.grad(r.f))(X),
    "fresh jit(vmap(grad))": lambda r: r.lib.jit(r.lib.vmap(r.lib.grad(r.h)))(np.full(2, X)),
}


@pytest.mark.parametrize("case", ["grad custom_vjp", "jvp custom_jvp", "fresh jit(grad)"])
def test_rules_run_again_on_every_call(case):
    got, expected = both(EAGER[case])
    np.testing.assert_allclose(expected, new_values(), rtol=1e-6)  # (what JAX does)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(EAGER))
def test_rules_run_again_on_every_call_in_every_api(case):
    test_rules_run_again_on_every_call(case)


def test_a_made_once_wrapper_is_not_a_jit():
    """grad(f) and vmap(grad(f)) made once and called again still run the rules (they are not jit)."""
    def run(rules):
        lib = rules.lib
        g, vg = lib.grad(rules.f), lib.vmap(lib.grad(rules.h))
        return [float(g(X)) + float(vg(np.full(2, X))[0]) for rules.scale in SCALES]
    got, expected = [run(Rules(lib, np_)) for lib, np_ in LIBS]
    np.testing.assert_allclose(expected, [2 * v for v in new_values()], rtol=1e-6)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def grad_of_one_jit(lib, rules):
    """A function calling grad of one jitted function (a new grad wrapper on each call)."""
    jitted = lib.jit(rules.f)
    return lambda x: lib.grad(jitted)(x)


# jit keys on the function object: one jitted function keeps its first trace (JAX's documented behaviour)
TRACED_ONCE = {
    "one jit(grad)": lambda lib, r: lib.jit(lib.grad(r.f)),
    "one jit(jvp)": lambda lib, r: lib.jit(lambda x: lib.jvp(r.h, (x,), (ONE,))[1]),
    "grad of one jit": grad_of_one_jit,
}


@pytest.mark.parametrize("case", list(TRACED_ONCE))
def test_one_jitted_function_keeps_its_first_trace(case):
    def run(rules):
        fun = TRACED_ONCE[case](rules.lib, rules)
        return per_scale(rules, lambda r: fun(X))
    got, expected = [run(Rules(lib, np_)) for lib, np_ in LIBS]
    np.testing.assert_allclose(expected, [np.cos(X)] * len(SCALES), rtol=1e-6)  # (what JAX does)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


RAISING = {
    "grad": lambda r: r.lib.grad(r.f)(X),
    "vjp": lambda r: r.lib.vjp(r.f, X)[1](ONE),
    "jvp": lambda r: r.lib.jvp(r.h, (X,), (ONE,)),
    "fresh jit(grad)": lambda r: r.lib.jit(r.lib.grad(r.f))(X),
    "fresh vmap(grad)": lambda r: r.lib.vmap(r.lib.grad(r.f))(XS),
    "fresh jit(vmap(grad))": lambda r: r.lib.jit(r.lib.vmap(r.lib.grad(r.h)))(XS),
}


@pytest.mark.parametrize("case", list(RAISING))
def test_a_rule_that_raises_after_a_successful_call_raises(case):
    for lib, np_ in LIBS:
        rules = Rules(lib, np_)
        RAISING[case](rules)
        rules.fail = True
        with pytest.raises(ValueError, match="the rule raised"):
            RAISING[case](rules)


def test_one_jitted_function_does_not_call_its_rule_again():
    for lib, np_ in LIBS:
        rules = Rules(lib, np_)
        jitted = lib.jit(lib.grad(rules.f))
        first = float(jitted(X))
        rules.fail = True
        assert float(jitted(X)) == first  # (JAX: the traced program runs; the rule is not called)


# ---------------------------------------------------------------------------------------------------------------
# The boundary the other way: what does not depend on a rule is still shared
def test_rules_run_each_call_but_one_program_is_compiled():
    """Running the rule again re-stages and re-transforms; a rule that gives the same program reuses its
    executable (executables are shared by their StableHLO text)."""
    rules = Rules(ember, enp)
    grad_f = ember.grad(rules.f)
    grad_f(X)
    programs, calls = set(compiler._executables), rules.calls
    for _ in range(3):
        np.testing.assert_allclose(float(grad_f(X)), np.cos(X), rtol=1e-6)
    assert rules.calls == calls + 3
    assert set(compiler._executables) <= programs  # nothing compiled anew


def test_fresh_closures_without_rules_share_their_transformation(monkeypatch):
    """A fresh closure over new arrays of the same shapes (no custom rules) is staged anew and gets a view of the
    cached transformed template: the transformation itself runs once."""
    transforms = []
    transform_once = templates.transform_once

    def counted(what, ir, transform):
        return transform_once(what, ir, lambda *a: transforms.append(1) or transform(*a))
    monkeypatch.setattr("ember._api.autodiff.transform_once", counted)
    for k in range(4):
        w = ember.asarray(np.full(3, k, np.float32))
        got = ember.grad(lambda x, w=w: (enp.sin(x) * w).sum())(ember.asarray(XS))
        np.testing.assert_allclose(np.asarray(got), np.cos(XS) * k, rtol=1e-6)
    assert len(transforms) <= 1  # (none when an earlier test cached this structure)


def test_structural_keys_tell_callables_apart_by_identity():
    """Two IRs of one structure whose custom rules are different function objects (even of the same code) have
    different keys; the same IR's key is stable."""
    def staged(scale):
        @ember.custom_jvp
        def h(x):
            return enp.sin(x)

        @h.defjvp
        def h_jvp(primals, tangents):
            return enp.sin(primals[0]), tangents[0] * scale
        return ember.stage_out(lambda x: h(x) * 2.0, X)
    first, second = staged(1.0), staged(1.0)
    assert structural_key(first) == structural_key(first)
    assert structural_key(first) != structural_key(second)
    plain = [ember.stage_out(lambda x: enp.sin(x) * 2.0, X) for _ in range(2)]
    assert structural_key(plain[0]) == structural_key(plain[1])


def test_embers_own_rules_keep_the_cache():
    """ember's own custom_jvp functions (relu, softmax, logsumexp: pure_custom_jvp) read no Python state, so grad
    outside jit keeps what it built with them (staged once per signature), while a user's rule runs each call."""
    from ember._control.custom import rule_runs

    def loss(x):
        return enp.sum(ember.nn.relu(x) * ember.nn.softmax(x)) + ember.nn.logsumexp(x)

    x = np.linspace(-1.0, 1.0, 6).astype(np.float32)
    expected = jax.grad(lambda v: jnp.sum(jax.nn.relu(v) * jax.nn.softmax(v)) + jax.nn.logsumexp(v))(x)
    before = rule_runs()
    staged = []
    grad = ember.grad(lambda v: (staged.append(1), loss(v))[1])
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(grad(x)), expected, rtol=1e-5, atol=1e-6)
    assert rule_runs() == before and len(staged) == 1
