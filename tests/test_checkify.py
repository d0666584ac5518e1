"""ember.experimental.checkify against jax.experimental.checkify: the same error messages for the same programs
(user checks, NaN, division by zero, out-of-bounds indexing), eagerly and under jit, through cond, scan, while
(checks in the body and the predicate), nested jit and checkpoint, under vmap (a batched Error, every failing member
reported) and of vmap, of grad and jvp, and grad of a checkified function's output; the check primitive's rules."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import checkify as jcheckify

import ember
import ember.numpy as enp
from ember.experimental import checkify


def _pair(build, errors, jit):
    ours = checkify.checkify(build(ember, enp, checkify), errors=getattr(checkify, errors))
    theirs = jcheckify.checkify(build(jax, jjnp, jcheckify), errors=getattr(jcheckify, errors))
    return (ember.jit(ours), jax.jit(theirs)) if jit else (ours, theirs)


def same_errors(build, args_list, errors="all_checks", jit=True):
    ours, theirs = _pair(build, errors, jit)
    found = []
    for args in args_list:  # (as arrays of each library: JAX's eager check refuses numpy scalars)
        (err, out), (jerr, jout) = ours(*map(enp.asarray, args)), theirs(*map(jjnp.asarray, args))
        assert err.get() == jerr.get(), (args, err.get(), jerr.get())
        for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(jout)) if jerr.get() is None else ():
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, equal_nan=True)
        found.append(err.get())
    return found


def _example(lib, np_, ck):
    def f(x, i):
        ck.check(x > 0, "x must be positive, got {}", x)
        y = np_.sin(x) / x
        return np_.log(x - 2.0) + np_.arange(5.0)[i] + y
    return f


SETS = ["user_checks", "nan_checks", "index_checks", "float_checks", "automatic_checks", "all_checks"]


@pytest.mark.parametrize("errors, jit", [(s, True) for s in SETS] + [
    pytest.param(s, False, marks=() if s == "all_checks" else pytest.mark.slow) for s in SETS],
    ids=[f"jit-{s}" for s in SETS] + [f"eager-{s}" for s in SETS])
def test_error_sets_match_jax(errors, jit):
    args = [(np.float32(x), np.int32(i)) for x, i in [(-1.0, 0), (1.0, 0), (3.0, 7), (3.0, 1)]]
    found = same_errors(_example, args, errors, jit)
    if errors == "all_checks":
        assert found[3] is None and all(found[:3])


def test_division_by_zero_through_numpy_integer_division():
    def build(lib, np_, ck):
        return lambda x: (np_.int32(7) // x, np_.int32(7) % x, lib.lax.div(np_.int32(7), x + 1))
    same_errors(build, [(np.int32(0),), (np.int32(3),), (np.int32(-1),)], "div_checks")
    err, out = checkify.checkify(lambda x: enp.fmod(enp.int32(7), x), errors=checkify.div_checks)(np.int32(0))
    assert err.get() is None and int(out) == 0  # (JAX's: fmod guards its divisor; rem is not checked)


def test_division_by_zero_of_any_dtype_before_nan():
    def build(lib, np_, ck):
        return lambda x, y: (x / y, lib.lax.rem(x, y + 1), lib.lax.div(x.astype(np_.complex64), y.astype(np_.complex64)))
    same_errors(build, [(np.float32(1.0), np.float32(0.0)), (np.float32(0.0), np.float32(0.0)),
                        (np.float32(1.0), np.float32(2.0)), (np.float32(1.0), np.float32(-1.0))], "div_checks")
    same_errors(build, [(np.float32(0.0), np.float32(0.0))], "all_checks")


def test_control_flow_nested_jit_and_checkpoint():
    def in_cond(lib, np_, ck):
        def f(x):
            def big(x):
                ck.check(x < 5, "too big {}", x)
                return np_.log(x)
            return lib.lax.cond(x > 0, big, lambda x: x * 2, x)
        return f
    assert same_errors(in_cond, [(1.0,), (7.0,), (-1.0,), (0.0,)])[1] == "too big 7.0 (`check` failed)"

    def in_scan(lib, np_, ck):
        def f(xs):
            def step(c, x):
                ck.check(x != 3.0, "saw three at carry {}", c)
                return c + np_.sin(x), c
            return lib.lax.scan(step, 0.0, xs)
        return f
    same_errors(in_scan, [(np.array([1.0, 2.0, 3.0, 4.0], np.float32),), (np.array([1.0, 2.0], np.float32),)])

    def in_while(lib, np_, ck):  # checks in the predicate (before the loop and after each step) and in the body
        def f(x):
            def cond(c):
                ck.check(c[1] < 100.0, "runaway {}", c[1])
                return c[0] < 5
            def body(c):
                ck.check(c[1] > -1.0, "negative {}", c[1])
                return c[0] + 1, c[1] * 3.0
            return lib.lax.while_loop(cond, body, (0, x))
        return f
    same_errors(in_while, [(1.0,), (2.0,), (200.0,), (-3.0,)])

    def nested(lib, np_, ck):
        @lib.jit
        def inner(x):
            ck.check(x > 0, "inner {}", x)
            return np_.log(x)
        return lambda x: lib.checkpoint(lambda y: inner(y) * 2)(x)
    same_errors(nested, [(1.0,), (-1.0,), (0.0,)])


def test_index_checks_of_every_indexing_primitive():
    def build(lib, np_, ck):
        def f(x, i):
            a = lib.lax.dynamic_slice(x, (i,), (2,))
            b = lib.lax.dynamic_update_slice(x, np_.ones(2, x.dtype), (i,))
            c = x.at[i].set(1.0)
            return a.sum() + b.sum() + c.sum() + x[i]
        return f
    found = same_errors(build, [(np.arange(5.0, dtype=np.float32), np.int32(i)) for i in (0, 3, 4, 10, -1)],
                        "index_checks")
    assert found[0] is None and found[2].startswith("out-of-bounds indexing for array of shape (5,): index 4 ")
    x = np.zeros((3, 4), np.float32)
    err, _ = checkify.checkify(lambda x, i: x[1, i], errors=checkify.index_checks)(x, np.int32(6))
    assert err.get() == ("out-of-bounds indexing for array of shape (3, 4): index 6 is out of bounds for axis 1 "
                         "with size 4. ")


def test_vmap_of_checkify_reports_every_failing_member():
    ours = ember.vmap(checkify.checkify(_example(ember, enp, checkify), errors=checkify.all_checks))
    theirs = jax.vmap(jcheckify.checkify(_example(jax, jjnp, jcheckify), errors=jcheckify.all_checks))
    args = (np.array([1.0, -1.0, 3.0, 4.0], np.float32), np.array([0, 0, 9, 1], np.int32))
    err, _ = ours(*args)
    assert err.get() == theirs(*args)[0].get()
    assert err.get().count("at mapped index") == 3
    err, _ = ember.jit(ours)(*args)
    assert err.get() == theirs(*args)[0].get()
    with pytest.raises(checkify.JaxRuntimeError, match="at mapped index 1: x must be positive"):
        err.throw()
    # checkify of vmap: one error for the batch, the first in program order (the check's, at the failing member)
    def h(lib, np_, ck):
        def f(x):
            ck.check(x > 0, "x must be positive, got {}", x)
            return np_.log(x - 2.0)
        return f
    err, _ = checkify.checkify(ember.vmap(h(ember, enp, checkify)), errors=checkify.all_checks)(args[0])
    with jax.enable_x64(False):  # (JAX's checkify of vmap fails under x64, which conftest turns on for JAX)
        jchecked = jcheckify.checkify(jax.vmap(h(jax, jjnp, jcheckify)), errors=jcheckify.all_checks)
        jerr, _ = jchecked(jjnp.asarray(args[0]))
    assert err.get() == jerr.get() == "x must be positive, got -1.0 (`check` failed)"


def test_check_rules_under_every_transformation():
    def f(x):
        checkify.check(enp.all(x > 0), "nonpositive in {}", x)
        return enp.sum(enp.log(x) ** 2)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    checked = checkify.checkify(f, errors=checkify.all_checks)
    expected = 2 * np.log(x) / x
    # vjp: grad of the checkified function's output; the check's own rule pulls nothing back
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: checked(x)[1])(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(lambda x: checked(x)[1]))(x)), expected, rtol=1e-6)
    # checkify of grad (the check bound in reverse mode's forward pass) and of jvp (its jvp rule)
    err, _ = checkify.checkify(ember.grad(f), errors=checkify.all_checks)(np.array([1.0, -2.0], np.float32))
    assert err.get() == "nonpositive in [ 1. -2.] (`check` failed)"
    err, (_, tangent) = checkify.checkify(lambda x: ember.jvp(f, (x,), (x,)))(x)
    assert err.get() is None and np.isfinite(float(tangent))
    err, _ = checkify.checkify(lambda x: ember.jvp(f, (x,), (x,)))(-x)
    assert err.get() == "nonpositive in [-1. -2. -3.] (`check` failed)"
    # batching: a check under vmap, checkified outside
    def g(x):
        checkify.check(x < 2.0, "member {} too big", x)
        return x
    err, _ = checkify.checkify(ember.vmap(g))(np.array([0.0, 1.0, 5.0, 7.0], np.float32))
    assert err.get() == "member 7.0 too big (`check` failed)"  # (the last member that failed, as JAX reports)
    # a complex payload, formatted
    err, _ = checkify.checkify(lambda z: checkify.check(enp.abs(z) < 1, "z = {}", z))(np.complex64(3 + 4j))
    assert err.get() == "z = (3+4j) (`check` failed)"
    # abstract evaluation: pred must be boolean
    with pytest.raises(TypeError, match="pred must be a boolean array"):
        checkify.checkify(lambda x: checkify.check(x, "m"))(1.0)


def test_check_outside_checkify():
    checkify.check(enp.array(True), "fine")
    with pytest.raises(checkify.JaxRuntimeError, match=r"eager bad -1.0 \(`check` failed\)"):
        checkify.check(enp.float32(-1.0) > 0, "eager bad {x}", x=enp.float32(-1.0))
    with pytest.raises(ValueError, match="Cannot abstractly evaluate a checkify.check which was not functionalized"):
        ember.jit(lambda x: checkify.check(x > 0, "bad"))(1.0)
    with pytest.raises(TypeError, match="msg must be a str"):
        checkify.check(True, 3)
    with pytest.raises(TypeError, match="errors must be a set of error categories"):
        checkify.checkify(enp.sin, errors={ValueError})


def test_error_is_a_pytree_and_user_checks_only_by_default():
    def f(x):
        checkify.check(x > 0, "pos {}", x)
        return enp.log(x - 10.0)

    @ember.jit
    def step(x):
        return checkify.checkify(f)(x)
    err, out = step(1.0)
    assert err.get() is None and np.isnan(float(out))  # (NaN checks are off by default: user_checks)
    err, _ = step(-1.0)
    assert repr(err) == "Error('pos -1.0 (`check` failed)')"
    assert isinstance(err.get_exception(), checkify.JaxRuntimeError)
    assert checkify.all_checks == (checkify.user_checks | checkify.nan_checks | checkify.div_checks
                                   | checkify.index_checks)
    leaves = ember.tree_util.tree_leaves(err)
    assert leaves and leaves[0].dtype == np.int32


def test_functions_with_custom_rules_are_checked_and_keep_their_rules():
    def build(lib, np_, ck):
        @lib.custom_jvp
        def safe_log(x):
            ck.check(x > 0, "log of {}", x)
            return np_.log(x)

        @safe_log.defjvp
        def _(primals, tangents):
            return safe_log(primals[0]), tangents[0] / primals[0] * 10.0  # (unlike the body's derivative)

        @lib.custom_vjp
        def clipped(x):
            ck.check(x < 100, "too large {}", x)
            return np_.sqrt(x)
        clipped.defvjp(lambda x: (clipped(x), x), lambda x, g: (g * 3.0,))
        return lambda x: safe_log(x) * 2 + clipped(x)
    assert same_errors(build, [(np.float32(v),) for v in (2.0, -1.0, 400.0)]) == [
        None, "log of -1.0 (`check` failed)", "too large 400.0 (`check` failed)"]
    checked = checkify.checkify(build(ember, enp, checkify), errors=checkify.all_checks)
    # the rules, not the bodies, give the derivative: 2 * 10 / x + 3
    np.testing.assert_allclose(float(ember.grad(lambda x: checked(x)[1])(np.float32(2.0))), 13.0, rtol=1e-6)
    np.testing.assert_allclose(float(ember.jit(ember.grad(lambda x: checked(x)[1]))(np.float32(4.0))), 8.0,
                               rtol=1e-6)
    err, _ = ember.vmap(checked)(np.array([1.0, -1.0], np.float32))
    assert err.get() == "at mapped index 1: log of -1.0 (`check` failed)"
    # a NaN made inside a function with custom rules (logsumexp's), as JAX reports it
    err, _ = checkify.checkify(lambda x: ember.nn.logsumexp(x * enp.array([1.0, np.nan])),
                               errors=checkify.nan_checks)(enp.ones(2))
    jerr, _ = jcheckify.checkify(lambda x: jax.nn.logsumexp(x * jjnp.array([1.0, np.nan])),
                                 errors=jcheckify.nan_checks)(jjnp.ones(2))
    assert err.get() == jerr.get() == "nan generated by primitive: mul."


@pytest.mark.parametrize("checks", [("nan",), ()])
def test_what_a_primitive_declares_is_what_checkify_checks(checks):
    """The automatic checks come from the primitive's own declaration (Primitive(..., checks=...)), not from a table
    of names: a new primitive computing log is NaN-checked when it says "nan", and not when it says nothing."""
    from ember._core import Primitive
    from ember._prims.elementwise import log_p
    planted = Primitive("log_again", register=False, checks=checks)
    planted.def_rule("abstract_eval", lambda x: x)
    planted.def_rule("lowering", log_p.rule("lowering"))
    f = checkify.checkify(lambda x: planted.bind(x), errors=checkify.nan_checks)
    err, out = ember.jit(f)(np.float32(-1.0))
    assert np.isnan(out)
    assert err.get() == ("nan generated by primitive: log_again." if checks else None)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint32])
def test_integer_division_of_constants_never_traps(dtype):
    """Dividing by zero, or INT_MIN by -1, in a program whose operands are constants: the plugin's XLA folds the
    division on the host, where it would trap (SIGFPE, the process killed); div's lowering never divides so, and
    gives XLA's defined values (x / 0 == -1, x % 0 == x, INT_MIN / -1 == INT_MIN), numpy's `//` and `%` (0) above
    it, and checkify still sees the zero divisor."""
    info = np.iinfo(dtype)
    x = np.array([info.min, 5, 7, info.max], dtype)
    y = np.array([-1 if info.min < 0 else 1, 0, 0, 3], dtype)
    div, rem, floor, mod = (np.asarray(v) for v in ember.jit(lambda: (
        ember.lax.div(x, y), ember.lax.rem(x, y), enp.asarray(x) // y, enp.asarray(x) % y))())
    minus_one = -1 if info.min < 0 else info.max
    np.testing.assert_array_equal(div, [info.min, minus_one, minus_one, info.max // 3])
    np.testing.assert_array_equal(rem, [0, 5, 7, info.max % 3])
    np.testing.assert_array_equal(floor, [info.min, 0, 0, info.max // 3])
    np.testing.assert_array_equal(mod, [0, 0, 0, info.max % 3])
    err, _ = ember.jit(checkify.checkify(lambda: enp.asarray(x) // y, errors=checkify.div_checks))()
    assert err.get() is not None and "division by zero" in err.get()
    # scalar constants are literals of the module, which the plugin's XLA folds: `jit(lambda: lax.div(np.int32(5),
    # np.int32(0)))()` killed the process with SIGFPE before (7a6bdef)
    for a, b in [(x[1], y[1]), (x[0], y[0])]:
        quotient, rest, floor = (int(np.asarray(v)) for v in ember.jit(lambda: (
            ember.lax.div(a, b), ember.lax.rem(a, b), enp.floor_divide(a, b)))())
        assert (quotient, rest) == ((minus_one, int(a)) if b == 0 else (int(a) // int(b) if a >= 0 else int(a), 0))
        assert floor == (0 if b == 0 else np.floor_divide(a, b))


def test_debug_check_runs_under_checkify_only_as_jax():
    """debug_check: nothing without checkify (eagerly, under jit, under grad), a user check under it (jit, vmap,
    grad), with JAX's messages."""
    def build(lib, ck):
        def f(x):
            ck.debug_check(x > 0, "x must be positive, got {}", x)
            return x * 2
        return f

    f, jf = build(ember, checkify), build(jax, jcheckify)
    x, jx = enp.float32(-1.0), jjnp.float32(-1.0)
    for ours, theirs in ((f, jf), (ember.jit(f), jax.jit(jf)), (ember.grad(f), jax.grad(jf))):
        np.testing.assert_array_equal(np.asarray(ours(x)), np.asarray(theirs(jx)))
    for wrap, jwrap in ((lambda g: g, lambda g: g), (ember.jit, jax.jit), (ember.grad, jax.grad)):
        err, _ = checkify.checkify(wrap(f))(x)
        jerr, _ = jcheckify.checkify(jwrap(jf))(jx)
        assert err.get() == jerr.get() == "x must be positive, got -1.0 (`check` failed)"
    err, _ = ember.jit(checkify.checkify(ember.vmap(f)))(enp.array([1.0, -3.0, 2.0]))
    jerr, _ = jax.jit(jcheckify.checkify(jax.vmap(jf)))(jjnp.array([1.0, -3.0, 2.0]))
    assert err.get() == jerr.get()
    assert checkify.checkify(f)(enp.float32(2.0))[0].get() is None
    with pytest.raises(TypeError, match="debug_check: pred must be a boolean array"):
        ember.jit(lambda v: checkify.debug_check(v, "no"))(1.0)
