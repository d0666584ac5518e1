"""JAX's documentation on random numbers, run with ember in place of jax and compared with real JAX, exactly
(rtol = atol = 0: ember draws JAX's numbers bit for bit).

Sources: "Pseudorandom numbers" (docs/random-numbers.md), "The Sharp Bits › Random numbers", "Thinking in JAX ›
Pseudorandom numbers", "Key concepts" and the quickstart, and the doctest examples in the docstrings of
jax.random (the module, clone, wrap_key_data). Printing cells return what they print; typed keys are compared by
their key_data (ember's KeyArray and JAX's key arrays are different pytrees of the same bits)."""
import doctest

import jax as jax_oracle
import numpy as np
import pytest
from test_jax_docs import doc_example  # tests/ is on sys.path (conftest.py)
from test_jax_docs_indexing import _run

import ember
import ember.numpy as enp
from ember._core.dtypes import x64_enabled

exact = doc_example(x64=x64_enabled(), rtol=0, atol=0)  # JAX in the mode ember is in


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


# --------------------------------------------------------------------------------------- Pseudorandom numbers
@exact
def test_random_numbers_same_key_same_number(jax, jnp):
    random = jax.random
    key = random.key(42)
    return random.key_data(key), random.normal(key), random.normal(key)  # print(key); twice the same draw


@exact
def test_random_numbers_split_in_a_loop(jax, jnp):
    random = jax.random
    key = random.key(42)
    draws = []
    for i in range(3):
        new_key, subkey = random.split(key)
        del key  # The old key is consumed by split() -- we must never use it again.
        val = random.normal(subkey)
        del subkey  # The subkey is consumed by normal().
        draws.append(val)  # print(f"draw {i}: {val}")
        key = new_key  # noqa: F841 (new_key is safe to use in the next iteration; ruff misreads the del)
    return draws


@exact
def test_random_numbers_many_subkeys(jax, jnp):
    random = jax.random
    key = random.key(42)
    key, subkey = random.split(key)
    key, *forty_two_subkeys = random.split(key, num=43)
    return random.key_data(key), [random.key_data(k) for k in forty_two_subkeys]


@exact
def test_random_numbers_sequential_equivalence(jax, jnp):
    random = jax.random
    key = random.key(42)
    subkeys = random.split(key, 3)
    sequence = np.stack([random.normal(subkey) for subkey in subkeys])
    individually = sequence  # print("individually:", sequence)
    key = random.key(42)
    all_at_once = random.normal(key, shape=(3,))  # print("all at once: ", ...)
    return individually, all_at_once


@exact
def test_random_numbers_vmap_over_keys(jax, jnp):
    random = jax.random
    key = random.key(42)
    subkeys = random.split(key, 3)
    return jax.vmap(random.normal)(subkeys)


# ------------------------------------------------------------------------------------- The Sharp Bits: random
@exact
def test_sharp_bits_random_numbers(jax, jnp):
    random = jax.random
    key = random.key(0)
    out = [random.key_data(key)]
    out.append(random.normal(key, shape=(1,)))
    out.append(random.normal(key, shape=(1,)))  # the same
    key, subkey = random.split(key)
    normal_pseudorandom = random.normal(subkey, shape=(1,))
    out += [random.key_data(key), random.key_data(subkey), normal_pseudorandom]
    key, subkey = random.split(key)
    out += [random.key_data(key), random.key_data(subkey), random.normal(subkey, shape=(1,))]
    key, *subkeys = random.split(key, 4)
    out += [random.key_data(key)] + [random.key_data(k) for k in subkeys]
    return out


# --------------------------------------------------------------------- Thinking in JAX, Key concepts, Quickstart
@exact
def test_thinking_in_jax_random_keys_in_a_loop(jax, jnp):
    random = jax.random
    key = random.key(1701)
    draws = []
    for i in range(3):
        key, subkey = random.split(key)
        val = random.normal(subkey)
        draws.append(val)  # print(f"draw {i}: {val}")
    return draws


@exact
def test_key_concepts_and_quickstart_draws(jax, jnp):
    random = jax.random
    key = random.key(1701)
    x = random.normal(key, (1_000,))
    key = random.key(0)
    uniform = random.uniform(key, (3, 3))
    legacy = random.PRNGKey(0)
    return x, uniform, legacy, random.uniform(legacy, (2,))


@exact
def test_quickstart_selu_on_random_data(jax, jnp):
    def selu(x, alpha=1.67, lmbda=1.05):
        return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

    key = jax.random.key(1701)
    x = jax.random.normal(key, (1_000_000,))
    return jax.jit(selu)(x)


@exact
def test_quickstart_batched_matvec_random_inputs(jax, jnp):
    key = jax.random.key(1701)
    key1, key2 = jax.random.split(key)
    mat = jax.random.normal(key1, (150, 100))
    batched_x = jax.random.normal(key2, (10, 100))
    return mat, batched_x


@exact
def test_dropout_like_masks_under_jit_and_vmap(jax, jnp):
    random = jax.random

    @jax.jit
    def dropout(key, x, rate=0.5):
        keep = random.bernoulli(key, 1 - rate, x.shape)
        return jnp.where(keep, x / (1 - rate), 0)
    keys = random.split(random.key(7), 4)
    xs = jnp.arange(32.0).reshape(4, 8)
    return dropout(keys[0], xs[0]), jax.vmap(dropout)(keys, xs)


# ---------------------------------------------------------------------------------- jax.random's docstrings
@pytest.mark.parametrize("name", ["module", "clone", "wrap_key_data"])
def test_docstring_examples(name):
    doc = jax_oracle.random.__doc__ if name == "module" else getattr(jax_oracle.random, name).__doc__
    examples = doctest.DocTestParser().get_examples(doc)
    ours_ns = {"jax": ember, "random": ember.random, "jnp": enp, "np": np}
    theirs_ns = {"jax": jax_oracle, "random": jax_oracle.random, "jnp": jax_oracle.numpy, "np": np}
    compared = 0
    for example in examples:
        if "SKIP" in str(example.options) or "compiled_update" in example.source:
            continue
        try:
            theirs = _run(example.source, theirs_ns)
        except Exception:  # noqa: BLE001 (the docstring's own context is missing)
            continue
        ours = _run(example.source, ours_ns)  # runs (its asserts hold) with ember too
        compared += 1
        if theirs is None:
            continue
        if isinstance(ours, ember.random.KeyArray):
            ours, theirs = ember.random.key_data(ours), jax_oracle.random.key_data(theirs)
        ours_leaves, theirs_leaves = ember.tree.leaves(ours), jax_oracle.tree.leaves(theirs)
        assert len(ours_leaves) == len(theirs_leaves), example.source
        for a, b in zip(ours_leaves, theirs_leaves):
            assert np.dtype(a.dtype) == np.dtype(b.dtype), example.source
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=example.source)
    assert compared, f"{name}: nothing compared"
