"""Bad or unusual input, as a new user tries it: each case gets a clear exception of the right type, naming the
function (a table, so that a case that starts returning a value, or raising something else, fails)."""
import numpy as np
import pytest

import ember
import ember.lax as lax
import ember.numpy as enp

CASES = [
    # (name, call, exception, words the message must contain)
    ("jit of a string", lambda: ember.jit(lambda x: x + 1)("a"), TypeError, "jit(<lambda>): argument 0"),
    ("grad of a vector output", lambda: ember.grad(lambda x: x * 2)(enp.ones(3)), TypeError, "scalar output"),
    ("grad of an int input", lambda: ember.grad(lambda x: x * 2)(3), TypeError, "floating-point inputs"),
    ("reshape to a wrong size", lambda: enp.reshape(enp.ones(6), (4, 2)), ValueError, "reshape"),
    ("two unknown dimensions", lambda: enp.reshape(enp.ones(6), (-1, -1)), ValueError, "one unknown"),
    ("negative shape", lambda: enp.zeros((-1, 2)), TypeError, "non-negative"),
    ("huge shape", lambda: enp.zeros((2**70,)), ValueError, "bytes"),
    ("huge eye", lambda: enp.eye(2**33), ValueError, "bytes"),
    ("index out of bounds", lambda: enp.ones(3)[5], IndexError, "out of bounds"),
    ("index out of bounds in jit", lambda: ember.jit(lambda x: x[5])(enp.ones(3)), IndexError, "out of bounds"),
    ("float index", lambda: enp.ones(3)[1.5], TypeError, "invalid index"),
    ("mismatched concatenate", lambda: enp.concatenate([enp.ones((2, 3)), enp.ones((2, 4))]), TypeError,
     "concatenate"),
    ("mismatched matmul", lambda: enp.ones((2, 3)) @ enp.ones((4, 5)), ValueError, "matmul"),
    ("unknown dtype", lambda: enp.ones(3, dtype="floaty"), TypeError, "unknown dtype"),
    ("complex256 dtype", lambda: enp.ones(3, dtype=np.clongdouble), TypeError, "complex256"),
    ("object array", lambda: enp.array(np.array([object()])), TypeError, "object"),
    ("string array", lambda: enp.array(np.array(["a"])), TypeError, "<U1"),
    ("long double", lambda: enp.array(np.ones(2, np.longdouble)), TypeError, "float128"),
    ("huge Python int operand", lambda: enp.ones(3, dtype="int32") + 2**100, OverflowError, "int32"),
    ("huge Python int array", lambda: enp.array(2**100), OverflowError, "too large to convert to int32"),
    ("huge Python int to jit", lambda: ember.jit(lambda x: x)(2**100), OverflowError, "jit(<lambda>): argument 0"),
    ("Python int out of uint8", lambda: enp.ones(3, dtype="uint8") + 300, OverflowError, "uint8"),
    ("vmap of mismatched sizes", lambda: ember.vmap(lambda a, b: a + b)(enp.ones(3), enp.ones(4)), ValueError,
     "inconsistent sizes"),
    ("scan carry changing dtype", lambda: lax.scan(lambda c, x: (c.astype("int32"), x), 0.0, enp.ones(3)),
     TypeError, "carry"),
    ("while_loop with a float condition", lambda: lax.while_loop(lambda c: c, lambda c: c - 1, 3.0), TypeError,
     "boolean"),
    ("cond branches of different shapes", lambda: lax.cond(True, lambda: enp.ones(2), lambda: enp.ones(3)),
     TypeError, "branch"),
    ("fori_loop with float bounds", lambda: lax.fori_loop(0.5, 3, lambda i, c: c + i, 0), TypeError,
     "fori_loop: lower must be an integer"),
    ("sum over a missing axis", lambda: enp.sum(enp.ones(3), axis=3), ValueError, "axis 3"),
    ("einsum of mismatched sizes", lambda: enp.einsum("ij,jk->ik", enp.ones((2, 3)), enp.ones((4, 2))), ValueError,
     "einsum"),
    ("ambiguous truth value", lambda: bool(enp.ones(3)), ValueError, "ambiguous"),
    ("unhashable static argument", lambda: ember.jit(lambda x, n: x, static_argnums=1)(1.0, [1]), TypeError,
     "hashable"),
    ("broadcasting mismatch", lambda: enp.ones(3) + enp.ones(4), TypeError, "broadcasting"),  # (JAX 0.10.2's type)
    ("max of an empty array", lambda: enp.max(enp.ones(0)), ValueError, "zero-size"),
    ("argmax of an empty array", lambda: enp.argmax(enp.ones(0)), ValueError, "empty"),
    ("uneven split", lambda: enp.split(enp.ones(5), 2), ValueError, "equal division"),
    ("branching on a traced value", lambda: ember.jit(lambda x: 1 if x > 0 else 2)(1.0),
     ember.ConcretizationTypeError, "bool()"),
    ("a string as a device", lambda: ember.device_put(enp.ones(2), "cpu:0"), TypeError, "device_put: device"),
    ("item assignment", lambda: enp.ones(3).__setitem__(0, 1), TypeError, "immutable"),
    ("len of a 0-d array", lambda: len(enp.array(1.0)), TypeError, "0-d"),
]


@pytest.mark.parametrize("name,call,exception,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_exception(name, call, exception, words):
    with pytest.raises(exception) as info:
        call()
    assert words in str(info.value), str(info.value)


def test_using_a_deleted_array_names_the_function():
    a = enp.ones(2)
    a.delete()
    with pytest.raises(RuntimeError, match=r"jit\(<lambda>\): argument 0 .* has been deleted"):
        ember.jit(lambda x: x + 1)(a)
    with pytest.raises(RuntimeError, match=r"add: argument 0 .* has been deleted"):
        a + 1
    c = enp.ones(2)
    f = ember.jit(lambda x: x + c)
    f(1.0)
    c.delete()
    with pytest.raises(RuntimeError, match="closed over has been deleted"):
        f(1.0)


def test_weak_carry_promotion_still_works():
    # a Python int carry may become float (as JAX); only a float carry turning integer is refused
    carry, _ = lax.scan(lambda c, x: (c + x, x), 0, enp.ones(3))
    assert carry.dtype == np.float32 and float(carry) == 3.0
    assert float(lax.while_loop(lambda c: c < 3.5, lambda c: c + 1.0, 0)) == 4.0
    assert int(lax.fori_loop(enp.array(0), np.int64(3), lambda i, c: c + i, 0)) == 3
