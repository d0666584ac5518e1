"""Where ember used to differ from JAX without saying so (issue #49), each checked against JAX 0.10.2 doing the same
call: nan_to_num's order of replacement, vmap's unmapped Python values, jit's device= / backend= / keep_unused /
compiler_options and None for its argnums, typed PRNG keys as leaves of the public tree functions, checkify's
check_error, ErrorCategory and division-by-zero checks of every dtype, and the chex testing library (its asserts,
variants, fakes and restrict_backends) run through the drop-in."""
import functools
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.experimental import checkify

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # (dtypes compared too)

SPECIAL = [np.nan, np.inf, -np.inf, 1.5, -0.0]
REPLACEMENTS = [{}, {"nan": -np.inf}, {"nan": np.inf}, {"nan": np.inf, "posinf": np.inf},
                {"nan": -np.inf, "neginf": -np.inf}, {"nan": 5.0, "posinf": 1.0, "neginf": 2.0},
                {"posinf": -np.inf, "neginf": np.inf}, {"nan": np.nan}, {"nan": -np.inf, "posinf": 7.0}]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "complex64", "int32", "bool"])
@pytest.mark.parametrize("kwargs", REPLACEMENTS, ids=lambda k: ",".join(f"{a}={v}" for a, v in k.items()) or "none")
def test_nan_to_num_replaces_nan_first_as_jax(dtype, kwargs):
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    if dtype == "complex64":
        x = np.array([complex(a, b) for a in SPECIAL for b in SPECIAL], np.complex64)
    elif dtype in ("int32", "bool"):
        x = np.array([0, 1, 3], np_dtype)
    else:
        x = np.array(SPECIAL, np_dtype)
    got, expected = enp.nan_to_num(x, **kwargs), jnp.nan_to_num(x, **kwargs)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    if dtype in ("float32", "complex64"):  # (and under jit)
        jitted = ember.jit(lambda v: enp.nan_to_num(v, **kwargs))(x)
        np.testing.assert_array_equal(np.asarray(jitted), np.asarray(expected))


def test_nan_to_num_of_minus_infinity_is_finite():
    out = enp.nan_to_num(enp.array([np.nan, np.inf, -np.inf]), nan=-np.inf)
    assert bool(enp.all(enp.isfinite(out)))  # (numpy's order would leave -inf)


def test_vmap_passes_unmapped_python_values_as_they_are():
    xs = np.arange(3.0, dtype=np.float32)
    for lib, np_ in ((ember, enp), (jax, jnp)):
        shaped = lib.vmap(lambda n, x: x + np_.arange(n), in_axes=(None, 0))(3, xs)
        drawn = lib.vmap(lambda k, n, x: x + lib.random.uniform(k, (n,)), in_axes=(None, None, 0))(
            lib.random.key(0), 4, xs)
        named = lib.vmap(lambda s, x: x * len(s), in_axes=(None, 0))("abc", xs)
        scaled = lib.vmap(lambda g, x: g(x), in_axes=(None, 0))(functools.partial(lambda a, b: a * b, 2.0), xs)
        assert shaped.shape == (3, 3) and drawn.shape == (3, 4)
        np.testing.assert_array_equal(np.asarray(named), xs * 3)
        np.testing.assert_array_equal(np.asarray(scaled), xs * 2)


def test_vmap_refuses_a_mapped_functools_partial_as_jax():
    f = functools.partial(lambda a, b: a * b, 2.0)
    with pytest.raises(TypeError):
        jax.vmap(lambda g, x: g(x))(f, jnp.arange(3.0))
    with pytest.raises(TypeError, match="partial"):
        ember.vmap(lambda g, x: g(x))(f, enp.arange(3.0))


def test_jit_device_and_backend_place_the_program_as_jax():
    d0, d1 = ember.devices()[:2]
    x = ember.device_put(enp.ones(2), d1)
    with pytest.warns(DeprecationWarning, match="backend and device argument on jit is deprecated"):
        on_d0 = ember.jit(lambda v: v + 1, device=d0)
    out = on_d0(x)  # (an argument committed elsewhere is moved, as JAX moves it)
    assert out.devices() == {d0} and out.committed
    np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0])
    with pytest.warns(DeprecationWarning):
        made = ember.jit(lambda: enp.ones(2), device=d1)()
        on_cpu = ember.jit(lambda v: v * 2, backend="cpu")(x)
    assert made.devices() == {d1} and on_cpu.devices() == {ember.devices("cpu")[0]}
    # under grad and vmap the placement composes
    with pytest.warns(DeprecationWarning):
        square = ember.jit(lambda v: v ** 2, device=d1)
    assert float(ember.grad(square)(3.0)) == 6.0
    np.testing.assert_array_equal(np.asarray(ember.vmap(square)(enp.arange(3.0))), [0.0, 1.0, 4.0])


def test_jit_device_and_backend_errors_as_jax():
    d0 = ember.devices()[0]
    jd0 = jax.devices()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for lib, dev in ((ember, d0), (jax, jd0)):
            with pytest.raises(ValueError, match="can't specify both a device and a backend for jit"):
                lib.jit(lambda v: v, device=dev, backend="cpu")
            with pytest.raises(ValueError, match="out_shardings should not be specified"):
                lib.jit(lambda v: v, device=dev, out_shardings=lib.sharding.SingleDeviceSharding(dev))
            with pytest.raises(RuntimeError, match="Unknown backend"):
                lib.jit(lambda v: v, backend="nonesuch")(1.0)
        with pytest.raises(TypeError, match="device must be a Device"):
            ember.jit(lambda v: v, device="cpu")


def test_jit_keep_unused_compiler_options_and_none_argnums():
    f = ember.jit(lambda x, unused: x * 2, keep_unused=True, static_argnums=None, static_argnames=None,
                  donate_argnums=None, donate_argnames=None)
    assert float(f(3.0, 1.0)) == float(jax.jit(lambda x, unused: x * 2, keep_unused=True)(3.0, 1.0)) == 6.0
    g = ember.jit(lambda x: enp.exp(x), compiler_options={"xla_cpu_enable_fast_math": False})
    np.testing.assert_allclose(np.asarray(g(enp.arange(3.0))), np.exp(np.arange(3.0)), rtol=1e-6)
    with pytest.raises(Exception, match="No such compile option: 'xla_no_such_option'"):
        ember.jit(lambda x: x + 1, compiler_options={"xla_no_such_option": True})(1.0)
    with pytest.raises(TypeError, match="compiler_options must be a dict"):
        ember.jit(lambda x: x, compiler_options=[("a", 1)])


def test_jitted_function_reads_as_jax_s():
    def foo(x, y=2):
        return x
    jitted = ember.jit(foo)
    assert repr(jitted).startswith("<PjitFunction of <function") and type(jitted).__name__ == "PjitFunction"
    import inspect
    assert str(inspect.signature(jitted, follow_wrapped=False)) == str(
        inspect.signature(jax.jit(foo), follow_wrapped=False)) == "(x, y=2)"


def test_typed_keys_are_leaves_of_the_public_tree_functions():
    tree = {"a": np.ones(2, np.float32), "key": ember.random.split(ember.random.key(1))}
    jtree = {"a": np.ones(2, np.float32), "key": jax.random.split(jax.random.key(1))}
    assert ember.tree_util.tree_structure(tree).num_leaves == jax.tree_util.tree_structure(jtree).num_leaves == 2
    leaves = ember.tree.leaves(tree)
    assert isinstance(leaves[1], ember.random.KeyArray)
    paths = [ember.tree_util.keystr(p) for p, _ in ember.tree_util.tree_flatten_with_path(tree)[0]]
    assert paths == [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(jtree)[0]]
    assert ember.tree.map(lambda x: x.shape, tree) == {"a": (2,), "key": (2,)}
    # ember's transformations still see the bits underneath: a key inside jit, vmap and grad
    split = ember.jit(lambda t: ember.tree.map(lambda x: x, t))(tree)
    assert isinstance(split["key"], ember.random.KeyArray)
    np.testing.assert_array_equal(np.asarray(ember.random.key_data(split["key"])),
                                  np.asarray(ember.random.key_data(tree["key"])))
    assert ember.vmap(lambda k: ember.random.normal(k, ()))(tree["key"]).shape == (2,)
    assert bool(enp.array_equal(tree["key"], tree["key"])) and not bool(
        enp.array_equal(tree["key"], ember.random.split(ember.random.key(2))))
    assert enp.shape(tree["key"]) == (2,)


def test_check_error_is_checkify_s_inverse():
    def f(x):
        checkify.check(x > 0, "x must be positive, got {}", x)
        return x * 2

    def g(x):
        err, y = checkify.checkify(f)(x)
        checkify.check_error(err)
        return y

    def jf(x):
        jax.experimental.checkify.check(x > 0, "x must be positive, got {}", x)
        return x * 2

    def jg(x):
        err, y = jax.experimental.checkify.checkify(jf)(x)
        jax.experimental.checkify.check_error(err)
        return y
    import jax.experimental.checkify  # noqa: F401 - (the oracle's module)
    for x in (-3.0, 3.0):
        got = ember.jit(checkify.checkify(g))(x)[0].get()
        expected = jax.jit(jax.experimental.checkify.checkify(jg))(x)[0].get()
        assert (got is None) == (expected is None)
        if got is not None:
            assert got.startswith("x must be positive, got -3.0") and expected.startswith(
                "x must be positive, got -3.0")
    with pytest.raises(checkify.JaxRuntimeError, match="x must be positive"):
        checkify.check_error(checkify.checkify(f)(-1.0)[0])
    checkify.check_error(checkify.checkify(f)(1.0)[0])  # (no failure: nothing raised)
    # ErrorCategory: the type of the error sets' members (chex annotates FrozenSet[checkify.ErrorCategory])
    assert all(issubclass(c, checkify.ErrorCategory.__args__[0]) for c in checkify.all_checks)


def test_check_payloads_format_as_arrays_and_vmap_reports_the_last_member():
    def make(lib, np_, ck):
        def f(x):
            ck.check(x < 0.5, "got {} {t}", x, t={"a": x})
            return x
        return f
    got = checkify.checkify(ember.vmap(make(ember, enp, checkify)))(enp.array([0.0, 3.0, 1.0, 0.0]))[0].get()
    import jax.experimental.checkify as jck
    expected = jck.checkify(jax.vmap(make(jax, jnp, jck)))(jnp.array([0.0, 3.0, 1.0, 0.0]))[0].get()
    assert got.split(" (`check`")[0] == expected.split(" (`check`")[0] == "got 1.0 {'a': Array(1., dtype=float32)}"


def test_checkify_of_pmap_and_shard_map_reports_a_failing_device():
    def f(x):
        checkify.check(enp.all(x < 1), "member {} too big", x)
        return ember.lax.pmean(x, "i")
    x = enp.arange(2.0)
    err, out = checkify.checkify(ember.pmap(f, axis_name="i"))(x)
    assert err.get() == "member 1.0 too big (`check` failed)"
    np.testing.assert_array_equal(np.asarray(out), [0.5, 0.5])
    err, _ = ember.jit(checkify.checkify(ember.pmap(f, axis_name="i")))(x * 0)
    assert err.get() is None
    err, _ = checkify.checkify(ember.pmap(enp.log), errors=checkify.nan_checks)(enp.array([1.0, -1.0]))
    assert err.get() == "nan generated by primitive: log."


CHEX_PROGRAM = textwrap.dedent("""
    import chex, jax, jax.numpy as jnp
    from absl.testing import absltest

    class Test(chex.TestCase):
        @chex.variants(with_jit=True, without_jit=True, with_device=True, without_device=True)
        def test_variants(self):
            f = self.variant(lambda x, y=1.0: x * 2 + y)
            chex.assert_trees_all_close(f(jnp.ones(3)), jnp.full(3, 3.0))

        def test_asserts(self):
            chex.assert_shape(jnp.ones((2, 3)), (2, 3))
            chex.assert_type(jnp.ones(3), jnp.float32)
            chex.assert_tree_all_finite({"a": jnp.ones(2)})
            keys = {"key": jax.random.split(jax.random.key(1))}
            chex.assert_trees_all_equal(keys, keys)
            with self.assertRaisesRegex(AssertionError, "differ in leaves 'key'"):
                chex.assert_trees_all_equal(keys, {"key": jax.random.split(jax.random.key(2))})
            with self.assertRaises(AssertionError):
                chex.assert_tree_all_finite({"a": jnp.array([1.0, jnp.nan])})

        def test_chexify(self):
            @jax.jit
            def f(x):
                chex.assert_tree_all_finite(x)
                return x / 0
            checked = chex.chexify(f, async_check=False, errors=chex.ChexifyChecks.div)
            with self.assertRaisesRegex(Exception, "division by zero"):
                checked(jnp.ones(2))

        def test_restrict_backends_and_fakes(self):
            with chex.restrict_backends(forbidden=["cpu"]):
                with self.assertRaisesRegex(RuntimeError, "forbidden by restrict_backends"):
                    jax.jit(lambda x: x * 3 + 1)(jnp.ones(7))
            with chex.fake_pmap_and_jit():
                out = jax.pmap(jax.jit(lambda x, y: x * 2 + y))(x=jnp.ones((1, 2)), y=jnp.ones((1, 2)))
                chex.assert_trees_all_close(out, jnp.full((1, 2), 3.0))
            self.assertTrue(chex._src.asserts_internal.is_traceable(jax.jit(lambda x: x)))

    if __name__ == "__main__":
        absltest.main()
""")


def test_chex_asserts_variants_and_fakes_through_the_drop_in(tmp_path):
    pytest.importorskip("chex")
    program = tmp_path / "chex_program.py"
    program.write_text(CHEX_PROGRAM)
    done = subprocess.run([sys.executable, "-m", "ember.as_jax", str(program)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Ran 7 tests" in done.stderr and "OK" in done.stderr, done.stderr[-2000:]


def test_structural_numpy_functions_take_typed_keys_as_jax():
    keys, jkeys = ember.random.split(ember.random.key(1), 3), jax.random.split(jax.random.key(1), 3)
    cond = np.array([True, False, True])
    cases = [
        (lambda np_, k: np_.stack([k[0], k[1]])), (lambda np_, k: np_.stack([k, k], axis=-1)),
        (lambda np_, k: np_.concatenate([k, k])), (lambda np_, k: np_.concatenate([k[None], k[None]], axis=None)),
        (lambda np_, k: np_.expand_dims(k, -1)), (lambda np_, k: np_.squeeze(k[None])),
        (lambda np_, k: np_.broadcast_to(k[0], (2, 3))), (lambda np_, k: np_.where(cond, k, k[::-1])),
        (lambda np_, k: np_.where(True, k[0], k[1])), (lambda np_, k: np_.astype(k, k.dtype)),
    ]
    for case in cases:
        for fn in (case, lambda np_, k, case=case: (ember.jit if np_ is enp else jax.jit)(
                lambda k: case(np_, k))(k)):
            got, expected = fn(enp, keys), fn(jnp, jkeys)
            assert isinstance(got, ember.random.KeyArray) and got.shape == expected.shape
            np.testing.assert_array_equal(np.asarray(ember.random.key_data(got)),
                                          np.asarray(jax.random.key_data(expected)))
    with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry> to float32"):
        enp.astype(keys, np.float32)
    with pytest.raises(TypeError, match="cannot combine typed key arrays with other arrays"):
        enp.stack([keys, enp.ones(3)])
