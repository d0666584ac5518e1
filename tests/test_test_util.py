"""ember.test_util.check_grads against jax.test_util.check_grads: the same functions, arguments and options pass
or fail the same way (the same check named in the same words), in every mode and order."""
import functools

import numpy as np
import pytest

import ember
from ember.test_util import check_grads
from recorded import jax_result

jax = pytest.importorskip("jax")
jax_test_util = pytest.importorskip("jax.test_util")  # (not imported by `import jax`)
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def smooth(lib):
    return lambda x, y: lib.numpy.sin(x) * lib.numpy.tanh(y).sum() + lib.numpy.exp(x * y / 4).mean()


def pytree_function(lib):
    return lambda p: lib.numpy.sum(p["w"] ** 3) * p["b"] + lib.numpy.cos(p["w"]).prod()


def wrong_derivative(lib):
    """sin, but its jvp says 2 cos: forward and reverse mode both wrong."""
    f = lib.custom_jvp(lambda x: lib.numpy.sin(x))
    f.defjvp(lambda primals, tangents: (f(primals[0]), 2 * lib.numpy.cos(primals[0]) * tangents[0]))
    return f


def wrong_second_derivative(lib):
    """x ** 3 with a correct first derivative whose own derivative is wrong (it stops the gradient)."""
    f = lib.custom_jvp(lambda x: x ** 3)
    f.defjvp(lambda primals, tangents: (f(primals[0]),
                                        3 * lib.lax.stop_gradient(primals[0] ** 2) * tangents[0]))
    return f


X = np.float32(0.7)
Y = np.array([0.5, -1.0, 2.0], np.float32)
P = {"w": np.array([0.3, -0.2], np.float32), "b": np.float32(1.5)}

CASES = {
    "smooth_order_2": (smooth, (X, Y), dict(order=2)),
    "smooth_all_modes": (smooth, (X, Y), dict(order=2, modes=("fwd", "rev", "lin"))),
    "smooth_python_scalar": (smooth, (0.7, Y), dict(order=1)),
    "pytree_order_3_rev": (pytree_function, (P,), dict(order=3, modes=("rev",))),
    "wrong_fwd": (wrong_derivative, (X,), dict(order=1, modes=("fwd",))),
    "wrong_rev": (wrong_derivative, (X,), dict(order=1, modes=("rev",))),
    "wrong_loosened": (wrong_derivative, (X,), dict(order=1, atol=2.0, rtol=2.0)),
    "wrong_loosened_by_dtype": (wrong_derivative, (X,), dict(order=1, atol={np.float32: 2.0}, rtol={np.float32: 2})),
    "wrong_second_fwd": (wrong_second_derivative, (X,), dict(order=2, modes=("fwd",))),
    "wrong_second_rev": (wrong_second_derivative, (X,), dict(order=2, modes=("rev",))),
    "wrong_second_order_1": (wrong_second_derivative, (X,), dict(order=1)),
    "coarse_eps": (lambda lib: lambda x: x ** 4, (np.float32(1.0),), dict(order=1, eps=0.3)),
}


def _outcome(check, lib, name):
    make, args, options = CASES[name]
    try:
        check(make(lib), args, **options)
    except AssertionError as error:  # the tolerances and the check's name; the numbers differ a little
        return [line for line in str(error).splitlines() if line.strip()][:2]
    return "passed"


# (13 s and 3 s: every mode to second order, third order; smooth_order_2 and the others cover each mode)
SLOW = {"smooth_all_modes", "pytree_order_3_rev"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(CASES)])
def test_check_grads_as_jax(name):
    ours = _outcome(check_grads, ember, name)
    theirs = jax_result(lambda: _outcome(jax_test_util.check_grads, jax, name))
    assert ours == theirs


def test_check_jvp_and_vjp_take_the_transformations():
    from ember.test_util import check_jvp, check_vjp
    f = smooth(ember)
    check_jvp(f, functools.partial(ember.jvp, f), (X, Y))
    check_vjp(f, functools.partial(ember.vjp, f), (X, Y))
    with pytest.raises(AssertionError, match="mine tangent"):
        check_jvp(f, lambda primals, tangents: (f(*primals), 0.0 * f(*primals)), (X, Y), err_msg="mine")
