"""Tokens (lax.create_token, lax.after_all; JAX's Tok) side by side with JAX 0.10.2: the values eagerly and under
jit (programs take and return XLA's tokens), their types, their errors, and their rules under every transformation.
create_token_p and after_all_p are tested here rather than by a Case (a Case compares arrays; a token has no value
to compare): tests/test_meta.py's TESTED_IN_OWN_MODULE names the tests below."""
import jax
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._core import dtypes as dt
from ember._prims.effects import after_all_p, create_token_p
from recorded import jax_result


def test_tokens_eagerly_and_under_jit_as_jax():
    """create_token and after_all return tokens eagerly and from jit (taking tokens too), as JAX's; the type of a
    token is AbstractToken (Tok), eval_shape gives it, and a token is a pytree leaf that device_put keeps."""
    t = lax.create_token()
    jt = jax.lax.create_token()
    assert type(t).__name__ == type(jt).__name__ == "Token"
    assert repr(ember.typeof(t)) == repr(jax.typeof(jt)) == "AbstractToken()"
    assert type(lax.after_all(t, t)).__name__ == "Token" and type(lax.after_all()).__name__ == "Token"
    assert t.block_until_ready() is t
    assert ember.tree_util.tree_leaves(t) == [t] and ember.device_put(t) is t
    assert ember.eval_shape(lambda: lax.create_token()) == dt.abstract_token
    assert not isinstance(t, ember.Array)
    token, y = ember.jit(lambda t, x: (lax.after_all(t, lax.create_token(x)), x + 1))(t, 1.0)
    jtoken, jy = jax.jit(lambda t, x: (jax.lax.after_all(t, jax.lax.create_token(x)), x + 1))(jt, 1.0)  # (a token:
    assert type(token).__name__ == type(jtoken).__name__ and float(y) == float(jy) == 2.0          # not recorded)
    again, _ = ember.jit(lambda t, x: (lax.after_all(t), x))(token, 2.0)  # (a program's token fed to another)
    assert type(again).__name__ == "Token"
    x = enp.ones(2)
    with ember.transfer_guard("disallow"):  # (a token moves no host data)
        assert type(ember.jit(lambda t, x: (lax.after_all(t), x * 2))(t, x)[0]).__name__ == "Token"


def test_token_programs_lower_to_stablehlo_tokens():
    """As JAX's: a token argument or result is a !stablehlo.token of @main; the ops are create_token and
    after_all; the IR prints the type as Tok."""
    t = lax.create_token()
    text = ember.jit(lambda t, x: (lax.after_all(t, lax.create_token()), x)).lower(t, 1.0).as_text()
    jtext = jax.jit(lambda t, x: (jax.lax.after_all(t, jax.lax.create_token()), x)).lower(
        jax.lax.create_token(), 1.0).as_text()
    for needle in ("%arg0: !stablehlo.token", "-> (!stablehlo.token", "stablehlo.create_token",
                   "stablehlo.after_all"):
        assert needle in text and needle.replace('"', "") in jtext, needle
    ir = ember.make_jaxpr(lambda: lax.after_all(lax.create_token(), lax.create_token()))()
    assert str(ir).count(":Tok = ") == 3 and "after_all" in str(ir)
    assert str(jax.make_jaxpr(lambda: jax.lax.after_all(jax.lax.create_token(), jax.lax.create_token()))()).count(
        ":Tok = ") == 3


@pytest.mark.parametrize("lib", [lax, jax.lax], ids=["ember", "jax"])
def test_token_errors_as_jax(lib):
    """after_all of anything but tokens is JAX's TypeError, eagerly and under jit; arithmetic on a token is a
    TypeError (under jit JAX's is an AttributeError; ember also refuses every array primitive on one, naming it
    Tok)."""
    jit = ember.jit if lib is lax else jax.jit
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        lib.after_all(1.0)
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        jit(lambda x: lib.after_all(lib.create_token(), x))(1.0)
    with pytest.raises(TypeError):
        lib.create_token() + 1
    with pytest.raises(TypeError if lib is lax else AttributeError):  # (JAX's tracer of a Tok has no _add)
        jit(lambda t: t + 1)(lib.create_token())
    if lib is lax:
        with pytest.raises(TypeError, match=r"add: operands must be .* got Tok"):
            ember.jit(lambda t: lax.add(t, t))(lax.create_token())
        with pytest.raises(TypeError, match=r"a token \(Tok\) is not an array"):
            ember.jit(lambda t: lax.reshape(t, (1,)))(lax.create_token())
        with pytest.raises(TypeError, match="a token"):
            enp.asarray(lax.create_token())


def _barrier(lib):
    """x * 2 passed through an optimization barrier with a token (keeping the token's equations alive)."""
    return lambda x: lib.optimization_barrier((lib.after_all(lib.create_token(), lib.create_token()), x * 2))[1]


def test_rules_of_the_token_primitives():
    """create_token_p and after_all_p under every transformation: abstract eval (a Tok; after_all refuses
    arrays), lowering (run eagerly and under jit), no derivative (their marks: a function making tokens is
    differentiated in its other outputs, as JAX's grad), batching (tokens stay unbatched; a batched token is a
    TypeError)."""
    assert create_token_p.rules["abstract_eval"]() == dt.abstract_token
    assert after_all_p.rules["abstract_eval"](dt.abstract_token, dt.abstract_token) == dt.abstract_token
    for prim in (create_token_p, after_all_p):
        assert prim.marks["jvp"] == prim.marks["vjp"] == ember._core.NOT_DIFFERENTIABLE
    x = np.arange(3.0)
    np.testing.assert_array_equal(np.asarray(ember.jit(_barrier(lax))(x)), x * 2)
    f = lambda x: (lax.after_all(lax.create_token()), x * x)[1]  # noqa: E731
    jf = lambda x: (jax.lax.after_all(jax.lax.create_token()), x * x)[1]  # noqa: E731
    assert float(ember.grad(f)(3.0)) == float(jax_result(lambda: jax.grad(jf)(3.0))) == 6.0
    assert float(ember.jit(ember.grad(f))(3.0)) == 6.0
    np.testing.assert_array_equal(np.asarray(ember.grad(lambda x: enp.sum(_barrier(lax)(x)))(x)), [2.0] * 3)
    np.testing.assert_array_equal(np.asarray(ember.jvp(_barrier(lax), (x,), (x,))[1]), x * 2)
    np.testing.assert_array_equal(np.asarray(ember.vmap(_barrier(lax))(np.ones((2, 3)))), np.full((2, 3), 2.0))
    # a token output's tangent is a zero without derivative (float0, as an integer's; JAX 0.10.2: a KeyError)
    token_tangent, tangent = ember.jvp(lambda x: (lax.create_token(), x), (1.0,), (1.0,))[1]
    assert np.asarray(token_tangent).dtype == dt.float0 and float(tangent) == 1.0
    batched, dims = after_all_p.rules["batching"]([lax.create_token()], [None])
    assert dims == [None] and type(batched[0]).__name__ == "Token"
    with pytest.raises(TypeError, match="tokens cannot be batched"):
        after_all_p.rules["batching"]([lax.create_token()], [0])
    batched, dims = create_token_p.rules["batching"]([], [])
    assert dims == [None] and type(batched[0]).__name__ == "Token"


def test_tokens_through_control_flow():
    """Unlike JAX 0.10.2 (whose cond and scan fail on a Tok: AttributeError), ember carries tokens through cond's
    results and scan's carry."""
    token = ember.jit(lambda p: lax.cond(p, lambda: lax.create_token(), lambda: lax.after_all()))(True)
    assert type(token).__name__ == "Token"
    token, ys = ember.jit(lambda xs: lax.scan(lambda c, x: (lax.after_all(c), x * 2), lax.create_token(), xs))(
        np.arange(3.0))
    assert type(token).__name__ == "Token"
    np.testing.assert_array_equal(np.asarray(ys), [0.0, 2.0, 4.0])
