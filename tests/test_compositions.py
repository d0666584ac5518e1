"""Every transformation composes with every other, in any order: jit, grad, vjp, jvp, vmap, jacfwd, jacrev, each
wrapped to map R^n -> R^n, composed in pairs and triples, against the same composition in JAX (float64)."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

N = 6


def transformations(lib, np_):
    """Each maps a function R^n -> R^n to another one of the same type."""
    return {
        "jit": lambda f: lib.jit(f),
        "grad": lambda f: lib.grad(lambda x: np_.sum(f(x) * np_.cos(x))),
        "vjp": lambda f: lambda x: lib.vjp(f, x)[1](np_.sin(x))[0],
        "jvp": lambda f: lambda x: lib.jvp(f, (x,), (np_.cos(x),))[1],
        "vmap": lambda f: lambda x: lib.vmap(lambda row: f(np_.concatenate([row, row * 0.5]))[: N // 2])(
            x.reshape(2, N // 2)).reshape(N),
        "jacfwd": lambda f: lambda x: lib.jacfwd(f)(x) @ np_.cos(x),
        "jacrev": lambda f: lambda x: np_.sin(x) @ lib.jacrev(f)(x),
    }


def base(np_):
    return lambda x: np_.tanh(x) * np_.sum(x ** 2) + x ** 3


EMBER = transformations(ember, enp)
JAX = transformations(jax, jnp)
X = np.random.default_rng(3).normal(size=N)


def compose(table, names, np_):
    f = base(np_)
    for name in names:
        f = table[name](f)
    return f


def check(names):
    expected = jax_result(lambda: compose(JAX, names, jnp)(X))
    got = compose(EMBER, names, enp)(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-9, atol=1e-11)


def _pair_params():
    """Every pair in the slow tier; by default the pairs without jit on the outside (jit of a composition compiles
    what the composition stages, which the other pairs check) and jit inside every other transformation, each other
    pair of two transformations in one of its two orders (in turn) and each transformation composed with itself."""
    names = list(EMBER)
    for p in itertools.product(names, repeat=2):
        i, j = names.index(p[0]), names.index(p[1])
        other_order = p[0] != "jit" and p[1] != "jit" and i != j and (i < j) != ((i + j) % 2 == 0)
        quick = not (p[-1] == "jit" and p[0] != "jit") and not other_order
        yield pytest.param(p, id="-".join(p), marks=() if quick else pytest.mark.slow)


@pytest.mark.parametrize("names", _pair_params())
def test_pairs(names):
    check(names)


TRIPLES = [t for t in itertools.product(EMBER, repeat=3) if len(set(t)) == 3]


@pytest.mark.parametrize("names", [t if i < 4 else pytest.param(t, marks=pytest.mark.slow)
                                   for i, t in enumerate(TRIPLES[::21])], ids="-".join)
def test_triples(names):
    check(names)


@pytest.mark.slow
@pytest.mark.parametrize("names", [t for i, t in enumerate(TRIPLES) if i % 21], ids="-".join)
def test_all_triples(names):
    check(names)


def test_jit_of_a_composition_is_one_program():
    f = ember.jit(ember.vmap(ember.grad(lambda w, x: enp.sum(enp.tanh(x @ w))), in_axes=(None, 0)))
    w, xs = np.ones((3, 2)), np.ones((5, 3))
    assert f.lower(w, xs).as_text().count("func.func") == 1
    np.testing.assert_allclose(
        np.asarray(f(w, xs)),
        jax_result(lambda: jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w))), in_axes=(None, 0))(w, xs)),
        rtol=1e-9)
