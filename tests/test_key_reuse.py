"""The key-reuse checker (debug_key_reuse: ember._transforms.key_reuse) against JAX's: each program runs on JAX and
on ember with the option on, and raises KeyReuseError on ember exactly where it does on JAX, eagerly, under jit,
through cond, while_loop, scan and fori_loop, with slicing and clone; with the option off nothing is checked and
the programs ember stages are those without it."""
import subprocess
import sys

import jax
import numpy as np
import pytest

import ember
from ember._transforms import key_reuse


def _lib(name):
    return jax if name == "jax" else ember


# Programs on a library `m` (jax or ember): each runs to completion or raises KeyReuseError.
def normal_twice(m):
    k = m.random.key(0)
    m.random.normal(k)
    m.random.normal(k)


def raw_key_twice(m):  # (raw uint32 keys are never checked)
    k = m.random.PRNGKey(0)
    m.random.normal(k)
    m.random.normal(k)


def split_then_normal(m):
    k = m.random.key(0)
    m.random.split(k)
    m.random.normal(k)


def fold_in_does_not_consume(m):
    k = m.random.key(0)
    m.random.fold_in(k, 1)
    m.random.fold_in(k, 2)
    m.random.normal(k)


def key_data_does_not_consume(m):
    k = m.random.key(0)
    m.random.key_data(k)
    m.random.normal(k)
    m.random.key_data(k)


def clone_is_fresh(m):
    k = m.random.key(0)
    m.random.normal(m.random.clone(k))
    m.random.normal(k)
    m.random.normal(m.random.clone(k))


def wrap_key_data_twice(m):
    d = m.random.key_data(m.random.key(0))
    m.random.normal(m.random.wrap_key_data(d))
    m.random.normal(m.random.wrap_key_data(d))


def split_keys_each_once(m):
    k1, k2 = m.random.split(m.random.key(0))
    m.random.normal(k1)
    m.random.uniform(k2)


def same_element_twice(m):
    ks = m.random.split(m.random.key(0), 3)
    m.random.normal(ks[0])
    m.random.normal(ks[1])
    m.random.normal(ks[0])


def sliced_key_twice(m):
    a = m.random.split(m.random.key(0))[0]
    m.random.normal(a)
    m.random.normal(a)


def bits_then_uniform(m):
    k = m.random.key(0)
    m.random.bits(k)
    m.random.uniform(k)


def gamma_twice(m):
    k = m.random.key(0)
    m.random.gamma(k, 1.0)
    m.random.gamma(k, 2.0)


def permutation_then_normal(m):
    k = m.random.key(0)
    m.random.permutation(k, 5)
    m.random.normal(k)


def reshape_then_index(m):
    ks = m.random.split(m.random.key(0), 4)
    m.random.normal(ks.reshape(2, 2)[0, 0])
    m.random.normal(ks[1])


def key_created_and_reused_inside(m):
    def f(x):
        k = m.random.key(1)
        return m.random.normal(k) + m.random.normal(k) + x
    m.jit(f)(1.0)


def jit_normal_twice(m):
    m.jit(lambda k: m.random.normal(k) + m.random.normal(k))(m.random.key(0))


def jit_split_each(m):
    def f(k):
        k1, k2 = m.random.split(k)
        return m.random.normal(k1) + m.random.normal(k2)
    m.jit(f)(m.random.key(0))


def jitted_call_consumes(m):
    f = m.jit(lambda k: m.random.normal(k))
    k = m.random.key(0)
    f(k)
    f(k)


def jit_returns_key_unconsumed(m):
    k = m.random.key(0)
    k2 = m.jit(lambda k: k)(k)
    m.random.normal(k2)
    m.random.normal(k)


def jit_split_returned(m, use_k=False):
    k = m.random.key(0)
    ks = m.jit(m.random.split)(k)
    m.random.normal(ks[0])
    m.random.normal(ks[1])
    if use_k:
        m.random.normal(k)


def jit_static_indices(m, same=False):
    m.jit(lambda ks: m.random.normal(ks[0]) + m.random.normal(ks[0 if same else 1]))(
        m.random.split(m.random.key(0), 3))


def jit_dynamic_indices(m):  # (a traced index takes the whole key array: the second one reuses it)
    m.jit(lambda ks, i: m.random.normal(ks[i]) + m.random.normal(ks[i + 1]))(m.random.split(m.random.key(0), 3), 0)


def nested_jit_twice(m):
    inner = m.jit(lambda k: m.random.normal(k))
    m.jit(lambda k: inner(k) + inner(k))(m.random.key(0))


def jit_clone(m):
    m.jit(lambda k: m.random.normal(m.random.clone(k)) + m.random.normal(k))(m.random.key(0))


def cond_program(branch_a, branch_b, use_key_after=False, use_result=True):
    def program(m):
        def f(k, p):
            out = m.lax.cond(p, lambda k: branch_a(m, k), lambda k: branch_b(m, k), k)
            x = m.random.normal(out) if use_result else out
            return x + m.random.normal(k) if use_key_after else x
        m.jit(f)(m.random.key(0), True)
    return program


def loop_program(kind, body):
    def program(m):
        def f(k):
            if kind == "scan":
                return m.lax.scan(lambda c, _: body(m, c, k), k, None, length=3)
            return m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, *body(m, c[1], k)), (0, k, 0.0))
        m.jit(f)(m.random.key(0))
    return program


def _split_carry(m, c, k):
    c, sub = m.random.split(c)
    return c, m.random.normal(sub)


def scan_carry_passed_then_both_used(m):
    def f(k):
        k2 = m.lax.scan(lambda c, _: (c, 1.0), k, None, length=3)[0]
        return m.random.normal(k2) + m.random.normal(k)
    m.jit(f)(m.random.key(0))


def scan_over_keys(m):
    m.jit(lambda ks: m.lax.scan(lambda c, k: (c, m.random.normal(k)), 0.0, ks))(m.random.split(m.random.key(0), 3))


def fori_fold_in(m, carried):
    def f(k):
        if carried:
            return m.lax.fori_loop(0, 3, lambda i, c: (c[0], c[1] + m.random.normal(m.random.fold_in(c[0], i))),
                                   (k, 0.0))
        return m.lax.fori_loop(0, 3, lambda i, x: x + m.random.normal(m.random.fold_in(k, i)), 0.0)
    m.jit(f)(m.random.key(0))


def grad_once(m):
    m.grad(lambda x, k: x * m.random.normal(k))(1.0, m.random.key(0))


def vmap_once(m):
    m.vmap(m.random.normal)(m.random.split(m.random.key(0), 3))


def vmap_reuse_inside(m):
    m.vmap(lambda k: m.random.normal(k) + m.random.normal(k))(m.random.split(m.random.key(0), 3))


PROGRAMS = {
    "normal_twice": normal_twice, "raw_key_twice": raw_key_twice, "split_then_normal": split_then_normal,
    "fold_in_does_not_consume": fold_in_does_not_consume, "key_data_does_not_consume": key_data_does_not_consume,
    "clone_is_fresh": clone_is_fresh, "wrap_key_data_twice": wrap_key_data_twice,
    "split_keys_each_once": split_keys_each_once, "same_element_twice": same_element_twice,
    "sliced_key_twice": sliced_key_twice, "bits_then_uniform": bits_then_uniform, "gamma_twice": gamma_twice,
    "permutation_then_normal": permutation_then_normal, "reshape_then_index": reshape_then_index,
    "key_created_and_reused_inside": key_created_and_reused_inside,
    "jit_normal_twice": jit_normal_twice, "jit_split_each": jit_split_each,
    "jitted_call_consumes": jitted_call_consumes,
    "jit_returns_key_unconsumed": jit_returns_key_unconsumed, "jit_split_returned": jit_split_returned,
    "jit_split_returned_then_key": lambda m: jit_split_returned(m, use_k=True),
    "jit_static_indices": jit_static_indices, "jit_same_static_index": lambda m: jit_static_indices(m, same=True),
    "jit_dynamic_indices": jit_dynamic_indices, "nested_jit_twice": nested_jit_twice, "jit_clone": jit_clone,
    # cond: a key either branch consumes is consumed; passed through untouched it is the same key
    "cond_one_branch_consumes_then_key": cond_program(lambda m, k: m.random.split(k)[0], lambda m, k: k,
                                                      use_key_after=True),
    "cond_passes_key_through": cond_program(lambda m, k: k, lambda m, k: k),
    "cond_passes_key_through_then_both": cond_program(lambda m, k: k, lambda m, k: k, use_key_after=True),
    "cond_splits_in_both": cond_program(lambda m, k: m.random.split(k)[0], lambda m, k: m.random.split(k)[1]),
    "cond_splits_or_passes": cond_program(lambda m, k: m.random.split(k)[0], lambda m, k: k),
    "cond_reuse_in_a_branch": cond_program(lambda m, k: m.random.normal(k) + m.random.normal(k),
                                           lambda m, k: 0.0, use_result=False),
    # loops: a key the body closes over, or carries without replacing, is consumed again by the next iteration
    "scan_consumes_closed_key": loop_program("scan", lambda m, c, k: (c, m.random.normal(k))),
    "scan_splits_carry": loop_program("scan", _split_carry),
    "scan_reuses_carry": loop_program("scan", lambda m, c, k: (c, m.random.normal(c))),
    "scan_passes_carry": loop_program("scan", lambda m, c, k: (c, 1.0)),
    "scan_carry_passed_then_both_used": scan_carry_passed_then_both_used, "scan_over_keys": scan_over_keys,
    "while_splits_carry": loop_program("while", _split_carry),
    "while_consumes_closed_key": loop_program("while", lambda m, c, k: (c, m.random.normal(k))),
    "while_reuses_carry": loop_program("while", lambda m, c, k: (c, m.random.normal(c))),
    "fori_fold_in_carried": lambda m: fori_fold_in(m, True), "fori_fold_in_closed": lambda m: fori_fold_in(m, False),
    "grad_once": grad_once, "vmap_once": vmap_once, "vmap_reuse_inside": vmap_reuse_inside,
}


def _raises(m, program):
    try:
        program(m)
    except m.errors.KeyReuseError:
        return True
    return False


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_raise_where_jax_raises(name):
    program = PROGRAMS[name]
    with jax.debug_key_reuse(True):
        expected = _raises(jax, program)
    with ember.debug_key_reuse(True):
        assert _raises(ember, program) == expected, f"{name}: JAX {'raises' if expected else 'passes'}"


def test_the_programs_cover_both_outcomes():
    """The comparison above means something: JAX raises on some programs and passes others."""
    with jax.debug_key_reuse(True):
        outcomes = {_raises(jax, p) for p in PROGRAMS.values()}
    assert outcomes == {True, False}


@pytest.mark.parametrize("name", ["normal_twice", "jit_normal_twice", "scan_reuses_carry", "same_element_twice"])
def test_nothing_is_checked_with_the_option_off(name):
    assert not ember.config.read("debug_key_reuse")
    PROGRAMS[name](ember)


def _draws(m, k):
    k1, k2 = m.random.split(k)
    return (m.random.normal(k1, (3,), np.float32)
            + m.random.uniform(m.random.fold_in(k2, 3), (3,), np.float32))


def _names(ir):
    """The primitives an IR binds, in its nested jitted calls too."""
    names = set()
    for eqn in ir.eqns:
        names.add(eqn.prim.name)
        if eqn.params.get("body") is not None:
            names |= _names(eqn.params["body"])
    return names


def test_the_option_off_stages_no_marker_and_the_numbers_are_the_same():
    f = lambda k: _draws(ember, k)  # noqa: E731
    markers = {p.name for p in (key_reuse.key_wrap_p, key_reuse.key_consume_p, key_reuse.key_unwrap_p)}
    assert not markers & _names(ember.make_jaxpr(f)(ember.random.key(7)))
    with ember.debug_key_reuse(True):
        assert markers <= _names(ember.make_jaxpr(f)(ember.random.key(7)))
        checked = np.asarray(ember.jit(f)(ember.random.key(7)))
    np.testing.assert_array_equal(checked, np.asarray(ember.jit(f)(ember.random.key(7))))
    np.testing.assert_array_equal(checked, np.asarray(jax.jit(lambda k: _draws(jax, k))(jax.random.key(7))))


def test_the_error_says_where_the_key_was_consumed():
    with ember.debug_key_reuse(True):
        k = ember.random.key(0)
        ember.random.normal(k)
        with pytest.raises(ember.errors.KeyReuseError, match=r"consumed before at .*test_key_reuse.py:\d+"):
            ember.random.uniform(k)
        with pytest.raises(ember.errors.KeyReuseError, match="loop body consumes a PRNG key it closes over"):
            PROGRAMS["scan_consumes_closed_key"](ember)


def test_as_jax_reaches_the_module_and_the_error():
    code = ("import ember.as_jax; ember.as_jax.install(); import jax, jax.experimental.key_reuse as m, ember; "
            "assert m is ember.experimental.key_reuse and jax.errors.KeyReuseError is ember.errors.KeyReuseError; "
            "jax.config.update('jax_debug_key_reuse', True); k = jax.random.key(0); jax.random.normal(k)\n"
            "try:\n    jax.random.normal(k)\nexcept jax.errors.KeyReuseError:\n    print('raised')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "raised", done.stderr
