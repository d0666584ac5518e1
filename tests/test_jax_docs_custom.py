"""JAX's own documentation examples on custom derivative rules and gradient checkpointing, run with ember in place
of jax and compared with real JAX.

Each test is one documentation example written as a function of `(jax, jnp)`, made a test by test_jax_docs.py's
`doc_example` (run once with `ember` / `ember.numpy`, once with `jax` / `jax.numpy` with x64 off, and compare the
returned trees leaf by leaf; or, with `raises=`, check that both raise).

Sources (github.com/jax-ml/jax): docs/notebooks/Custom_derivative_rules_for_Python_code.md ("Custom derivative rules
for JAX-transformable Python functions"; docs/new_docs/301/custom-jvp-vjp.md repeats its cells but for the boundary
convention and fixed_point examples), docs/gradient-checkpointing.md ("Gradient checkpointing with jax.checkpoint"),
and the docstrings of jax.custom_jvp, custom_jvp.defjvp, defjvps, jax.custom_vjp, custom_vjp.defvjp
(jax/_src/custom_derivatives.py), jax.checkpoint (jax/_src/ad_checkpoint.py) and jax.lax.associative_scan
(jax/_src/lax/control_flow/loops.py).

Adaptations are minimal and commented where made: `from jax import custom_jvp, grad, ...` becomes attribute access;
`print(...)` and bare expression cells return their values instead, and printed side effects ("called f!") are
recorded in a list; plots return the plotted arrays; `print_saved_residuals(f, *args)` becomes the gradients of
the function, which checkpointing must leave unchanged (its listings print source columns JAX has and ember does
not: tests/test_checkpointing.py compares them without the source); jax.random becomes numpy's generator. Where
ember behaves differently from JAX, the example is marked
xfail(strict=True), with a minimal reproduction beside it.
"""
# The docs' code is kept as written (f(g((x))), an unused z = h(y)):
# ruff: noqa: F841, UP034
import collections
import functools
import importlib

import numpy as np
import pytest
from test_jax_docs import doc_example  # tests/ is on sys.path (conftest.py)
from test_jax_docs_control import _fixed_point_loop, _newton_sqrt, _scan_over_layers

def _sin_times_y(jax, jnp):
    # TL;DR: Custom JVPs with jax.custom_jvp (also the jax.custom_jvp and custom_jvp.defjvp docstrings)
    @jax.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot
        return primal_out, tangent_out
    return f


def _sin_times_y_vjp(jax, jnp):
    # TL;DR: Custom VJPs with jax.custom_vjp (also "multiple arguments", and the jax.custom_vjp and
    # custom_vjp.defvjp docstrings)
    @jax.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        # Returns primal output and residuals to be used in backward pass by f_bwd.
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res  # Gets residuals computed in f_fwd
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    return f


def _jvp_and_grad(jax, f):
    """The TL;DR cells' prints: f(2., 3.), jvp(f, (2., 3.), (1., 0.)) and grad(f)(2., 3.)."""
    y, y_dot = jax.jvp(f, (2., 3.), (1., 0.))
    return f(2., 3.), y, y_dot, jax.grad(f)(2., 3.)


# ------------------------------------------------------------------- Custom derivative rules for Python code
# docs/notebooks/Custom_derivative_rules_for_Python_code.md

# TL;DR: Custom JVPs with jax.custom_jvp
@doc_example()
def test_custom_tldr_custom_jvp(jax, jnp):
    return _jvp_and_grad(jax, _sin_times_y(jax, jnp))


def _sin_times_y_defjvps(jax, jnp):
    # TL;DR › "Equivalent alternative using the defjvps convenience wrapper" (also the custom_jvp.defjvps docstring)
    @jax.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)
    return f


# TL;DR › "Equivalent alternative using the defjvps convenience wrapper"
@doc_example()
def test_custom_tldr_defjvps(jax, jnp):
    return _jvp_and_grad(jax, _sin_times_y_defjvps(jax, jnp))


# TL;DR: Custom VJPs with jax.custom_vjp
@doc_example()
def test_custom_tldr_custom_vjp(jax, jnp):
    return jax.grad(_sin_times_y_vjp(jax, jnp))(2., 3.)


def _log1pexp_naive(jnp):
    # Example: Numerical stability › log1pexp written with jax.numpy
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))
    return log1pexp


def _jit_grad_vmap(jax, jnp, log1pexp):
    """The cell `jit(log1pexp)(3.), jit(grad(log1pexp))(3.), vmap(jit(grad(log1pexp)))(jnp.arange(3.))`."""
    jit, grad, vmap = jax.jit, jax.grad, jax.vmap
    return jit(log1pexp)(3.), jit(grad(log1pexp))(3.), vmap(jit(grad(log1pexp)))(jnp.arange(3.))


# Example: Numerical stability › log1pexp is JAX-transformable, "but there's a numerical stability problem
# lurking here": grad(log1pexp)(100.) is nan
@doc_example()
def test_custom_log1pexp_naive(jax, jnp):
    log1pexp = _log1pexp_naive(jnp)
    return log1pexp(3.), _jit_grad_vmap(jax, jnp, log1pexp), jax.grad(log1pexp)(100.)


# Example: Numerical stability › "Here's a solution using jax.custom_jvp": grad(log1pexp)(100.) is 1.
@doc_example()
def test_custom_log1pexp_custom_jvp(jax, jnp):
    @jax.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
        return ans, ans_dot

    return jax.grad(log1pexp)(100.), _jit_grad_vmap(jax, jnp, log1pexp)


# Example: Numerical stability › the defjvps version of log1pexp
@doc_example()
def test_custom_log1pexp_defjvps(jax, jnp):
    @jax.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    log1pexp.defjvps(lambda t, ans, x: (1 - 1/(1 + jnp.exp(x))) * t)
    return jax.grad(log1pexp)(100.), _jit_grad_vmap(jax, jnp, log1pexp)


# Example: Enforcing a differentiation convention › f(x) = x / (1 + sqrt(x)): grad(f)(0.) is nan, and 1. with a
# custom JVP rule written with the derivative on R+
@doc_example()
def test_custom_differentiation_convention(jax, jnp):
    def f(x):
        return x / (1 + jnp.sqrt(x))

    naive = jax.grad(f)(0.)

    @jax.custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        ans_dot = ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1)**2)) * x_dot
        return ans, ans_dot

    return naive, jax.grad(f)(0.)


# Example: Enforcing a differentiation convention › "Here's the convenience wrapper version"
@doc_example()
def test_custom_differentiation_convention_defjvps(jax, jnp):
    @jax.custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    f.defjvps(lambda t, ans, x: ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1)**2)) * t)
    return jax.grad(f)(0.)


# Example: Gradient clipping › clip_gradient with a custom_vjp, under vmap(grad(...)) (adapted: the plotted arrays
# are returned)
@doc_example()
def test_custom_clip_gradient(jax, jnp):
    grad, vmap = jax.grad, jax.vmap

    @jax.custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))  # use None to indicate zero cotangents for lo and hi

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    t = jnp.linspace(0, 10, 1000)

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return jnp.sin(x)

    return (jnp.sin(t), vmap(grad(jnp.sin))(t)), (clip_sin(t), vmap(grad(clip_sin))(t))


def _fixed_point_custom_vjp(jax, jnp):
    # Example: Implicit function differentiation of iterative implementations › fixed_point (the while_loop of
    # test_jax_docs_control) with a custom_vjp from the implicit function theorem
    partial, custom_vjp, vjp = functools.partial, jax.custom_vjp, jax.vjp
    fixed_point = partial(custom_vjp, nondiff_argnums=(0,))(_fixed_point_loop(jnp, jax.lax.while_loop))

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f),
                                   (a, x_star, x_star_bar),
                                   x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)
    return _newton_sqrt(fixed_point)


# Example: Implicit function differentiation › newton_sqrt(2.), grad(newton_sqrt)(2.), checked against grad of
# jnp.sqrt ("a totally different implementation") (added: jit(vmap(grad(newton_sqrt))), as the docs jit and vmap
# the while_loop version)
@doc_example()
def test_custom_fixed_point_custom_vjp(jax, jnp):
    newton_sqrt = _fixed_point_custom_vjp(jax, jnp)
    grad = jax.grad
    return (newton_sqrt(2.), grad(newton_sqrt)(2.), grad(jnp.sqrt)(2.),
            jax.jit(jax.vmap(grad(newton_sqrt)))(jnp.array([1., 2., 3., 4.])))


# Example: Implicit function differentiation › grad(grad(newton_sqrt))(2.), checked against grad(grad(jnp.sqrt))
@doc_example()
def test_custom_fixed_point_custom_vjp_second_derivative(jax, jnp):
    newton_sqrt = _fixed_point_custom_vjp(jax, jnp)
    grad = jax.grad
    return grad(grad(newton_sqrt))(2.), grad(grad(jnp.sqrt))(2.)


# Basic usage › custom_jvp: f :: a -> b with f.defjvp(f_jvp) called (not as a decorator); jvp, grad, grad(grad)
@doc_example()
def test_custom_jvp_basic_usage(jax, jnp):
    # f :: a -> b
    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)

    # f_jvp :: (a, T a) -> (b, T b)
    def f_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return f(x), jnp.cos(x) * t

    f.defjvp(f_jvp)

    y, y_dot = jax.jvp(f, (3.,), (1.,))
    return f(3.), y, y_dot, jax.grad(f)(3.), jax.grad(jax.grad(f))(3.)


# Basic usage › custom_jvp: "Multiple arguments work like this"
@doc_example()
def test_custom_jvp_multiple_arguments(jax, jnp):
    @jax.custom_jvp
    def f(x, y):
        return x ** 2 * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = 2 * x * y * x_dot + x ** 2 * y_dot
        return primal_out, tangent_out

    return jax.grad(f)(2., 3.)


# Basic usage › defjvps: one sine, multiple arguments, and None for a zero JVP
@doc_example()
def test_custom_jvp_defjvps(jax, jnp):
    grad, custom_jvp = jax.grad, jax.custom_jvp

    @custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvps(lambda t, ans, x: jnp.cos(x) * t)
    sine = grad(f)(3.)

    @custom_jvp
    def f(x, y):
        return x ** 2 * y

    f.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot,
              lambda y_dot, primal_out, x, y: x ** 2 * y_dot)
    both = grad(f)(2., 3.), grad(f, 0)(2., 3.), grad(f, 1)(2., 3.)

    @custom_jvp
    def f(x, y):
        return x ** 2 * y

    f.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot,
              None)
    return sine, both, (grad(f)(2., 3.), grad(f, 0)(2., 3.), grad(f, 1)(2., 3.))


def _which_printed(jax, jnp, make, runs):
    """For each of `runs` (a function of f): its result, and which functions printed while it ran (not how often:
    staging may call f more than once) on a fresh f = make(jax, jnp, printed)."""
    results = []
    for run in runs:
        printed = []
        f = make(jax, jnp, printed)
        results.append((run(f), sorted(set(printed))))
    return results


def _printing_custom_jvp(jax, jnp, printed):
    # Basic usage › custom_jvp: f and f_jvp with "a harmless side-effect" (adapted: print records in `printed`)
    @jax.custom_jvp
    def f(x):
        printed.append('called f!')  # a harmless side-effect
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        printed.append('called f_jvp!')  # a harmless side-effect
        x, = primals
        t, = tangents
        return f(x), jnp.cos(x) * t
    return f


# Basic usage › custom_jvp: "When you're not performing differentiation, the function f is called just as if it
# weren't decorated": f(3.), vmap(f)(jnp.arange(3.)), jit(f)(3.), with which of f and f_jvp printed
@doc_example()
def test_custom_jvp_called_without_differentiation(jax, jnp):
    return _which_printed(jax, jnp, _printing_custom_jvp,
                          (lambda f: f(3.), lambda f: jax.vmap(f)(jnp.arange(3.)), lambda f: jax.jit(f)(3.)))


# Basic usage › custom_jvp: "The custom JVP rule is invoked during differentiation, whether forward or reverse",
# and grad(grad(f))(3.) (the rule calls f, so it applies at every order), with which of f and f_jvp printed
@doc_example()
def test_custom_jvp_invoked_during_differentiation(jax, jnp):
    return _which_printed(jax, jnp, _printing_custom_jvp, (
        lambda f: jax.jvp(f, (3.,), (1.,))[1], lambda f: jax.grad(f)(3.), lambda f: jax.grad(jax.grad(f))(3.)))


# Basic usage › custom_jvp: "You can use Python control flow with jax.custom_jvp"
@doc_example()
def test_custom_jvp_python_control_flow(jax, jnp):
    @jax.custom_jvp
    def f(x):
        if x > 0:
            return jnp.sin(x)
        else:
            return jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        if x > 0:
            return ans, 2 * x_dot
        else:
            return ans, 3 * x_dot

    return jax.grad(f)(1.), jax.grad(f)(-1.)


# Basic usage › custom_vjp: f :: a -> b, f_fwd :: a -> (b, c), f_bwd :: (c, CT b) -> CT a
@doc_example()
def test_custom_vjp_basic_usage(jax, jnp):
    # f :: a -> b
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    # f_fwd :: a -> (b, c)
    def f_fwd(x):
        return f(x), jnp.cos(x)

    # f_bwd :: (c, CT b) -> CT a
    def f_bwd(cos_x, y_bar):
        return (cos_x * y_bar,)

    f.defvjp(f_fwd, f_bwd)
    return f(3.), jax.grad(f)(3.)


# Basic usage › custom_vjp: "So multiple arguments work like this" (added: under jit and vmap too, and vmap of f
# itself, which uses f and not the rules)
@doc_example()
def test_custom_vjp_multiple_arguments(jax, jnp):
    f = _sin_times_y_vjp(jax, jnp)
    grad_f = jax.grad(f, (0, 1))
    xs, ys = jnp.array([1., 2., 3.]), jnp.array([3., 2., 1.])
    return jax.grad(f)(2., 3.), jax.jit(grad_f)(2., 3.), jax.vmap(grad_f)(xs, ys), jax.vmap(f)(xs, ys)


def _printing_custom_vjp(jax, jnp, printed):
    # Basic usage › custom_vjp: f, f_fwd and f_bwd print when called (adapted: recorded in `printed`)
    @jax.custom_vjp
    def f(x):
        printed.append("called f!")
        return jnp.sin(x)

    def f_fwd(x):
        printed.append("called f_fwd!")
        return f(x), jnp.cos(x)

    def f_bwd(cos_x, y_bar):
        printed.append("called f_bwd!")
        return (cos_x * y_bar,)

    f.defvjp(f_fwd, f_bwd)
    return f


# Basic usage › custom_vjp: "the custom VJP rule comprised by f_fwd and f_bwd is not invoked if differentiation is
# not applied": f(3.) (f only) and grad(f)(3.) (f_fwd, f and f_bwd), with which of them printed
@doc_example()
def test_custom_vjp_rules_invoked_only_when_differentiating(jax, jnp):
    return _which_printed(jax, jnp, _printing_custom_vjp, (lambda f: f(3.), lambda f: jax.grad(f)(3.)))


# Basic usage › custom_vjp: `y, f_vjp = vjp(f, 3.)` prints "called f_fwd!" and "called f!", then `f_vjp(1.)` prints
# "called f_bwd!" (adapted: the prints of each step recorded separately)
# Minimal reproduction: with f_bwd appending to a list, after `y, f_vjp = ember.vjp(f, 3.)` the list holds f_bwd's
# entry already (JAX's: only f_fwd's and f's), and calling f_vjp(1.) adds nothing (JAX's: f_bwd's).
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "ember.vjp calls the custom_vjp's bwd rule (staging the backward pass) when vjp is called, and not when the "
    "returned f_vjp is; JAX calls bwd only from f_vjp(ct)"))
@doc_example()
def test_custom_vjp_bwd_called_by_the_vjp_function(jax, jnp):
    printed = []
    f = _printing_custom_vjp(jax, jnp, printed)
    y, f_vjp = jax.vjp(f, 3.)
    printed_by_vjp, printed[:] = sorted(set(printed)), []
    return y, printed_by_vjp, f_vjp(1.), sorted(set(printed))


# Basic usage › custom_vjp: "Forward-mode autodiff cannot be used on the jax.custom_vjp function and will raise an
# error", which the docs catch as a TypeError
@doc_example(raises=TypeError)
def test_custom_vjp_no_forward_mode(jax, jnp):
    jax.jvp(_sin_times_y_vjp(jax, jnp), (3., 2.), (1., 0.))


def _debug_identity(jax, jnp, debug_bwd):
    # Basic usage › custom_vjp with pdb: debug(x) is the identity, its bwd rule debug_bwd stops in pdb; foo calls
    # it in the middle
    @jax.custom_vjp
    def debug(x):
        return x  # acts like identity

    def debug_fwd(x):
        return x, x

    debug.defvjp(debug_fwd, debug_bwd)

    def foo(x):
        y = x ** 2
        y = debug(y)  # insert pdb in corresponding backward pass step
        return jnp.sin(y)
    return foo


# Basic usage › custom_vjp with pdb in the backward pass, as the docs write it (a `python` block, not run there):
# debug_bwd returns g, not the tuple (g,) of one cotangent per argument, which JAX refuses with a TypeError, as ember
# does (adapted: a `seen` list in place of pdb.set_trace())
@doc_example(raises=TypeError)
def test_custom_vjp_debug_backward_pass_as_written(jax, jnp):
    seen = []

    def debug_bwd(x, g):
        seen.append((x, g))  # in place of pdb.set_trace()
        return g

    jax.grad(_debug_identity(jax, jnp, debug_bwd))(3.)


# Basic usage › custom_vjp with pdb in the backward pass, with debug_bwd returning (g,): the backward pass sees
# x = 9. and g = -0.91113025, what the docs' `p x` and `p g` print (adapted: recorded in place of pdb.set_trace())
@doc_example()
def test_custom_vjp_debug_backward_pass(jax, jnp):
    seen = []

    def debug_bwd(x, g):
        seen.append((np.asarray(x), np.asarray(g)))  # in place of pdb.set_trace()
        return (g,)

    return jax.grad(_debug_identity(jax, jnp, debug_bwd))(3.), seen


Point = collections.namedtuple("Point", ["x", "y"])


def _point_dict(jnp):
    # More features › Working with containers: the function of a Point returning a dict with a tuple in it
    def f(pt):
        x, y = pt.x, pt.y
        return {'a': x ** 2,
                'b': (jnp.sin(x), jnp.cos(y))}
    return f


def _point_results(jax, f):
    """The containers cells: fun, a scalar of f's dict, and the prints f(pt) and grad(fun)(pt) at Point(1., 2.)."""
    def fun(pt):
        dct = f(pt)
        return dct['a'] + dct['b'][0]

    pt = Point(1., 2.)
    return f(pt), jax.grad(fun)(pt)


# More features › Working with list / tuple / dict containers: custom_jvp of a namedtuple returning a dict
@doc_example()
def test_custom_jvp_pytrees(jax, jnp):
    f = jax.custom_jvp(_point_dict(jnp))

    @f.defjvp
    def f_jvp(primals, tangents):
        pt, = primals
        pt_dot, = tangents
        ans = f(pt)
        ans_dot = {'a': 2 * pt.x * pt_dot.x,
                   'b': (jnp.cos(pt.x) * pt_dot.x, -jnp.sin(pt.y) * pt_dot.y)}
        return ans, ans_dot

    return _point_results(jax, f)


# More features › Working with containers: "an analogous contrived example with jax.custom_vjp"
@doc_example()
def test_custom_vjp_pytrees(jax, jnp):
    f = jax.custom_vjp(_point_dict(jnp))

    def f_fwd(pt):
        return f(pt), pt

    def f_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g['a'], g['b']
        x_bar = 2 * pt.x * a_bar + jnp.cos(pt.x) * b0_bar
        y_bar = -jnp.sin(pt.y) * b1_bar
        return (Point(x_bar, y_bar),)

    f.defvjp(f_fwd, f_bwd)
    return _point_results(jax, f)


def _app_custom_jvp(jax):
    # More features › Handling non-differentiable arguments › custom_jvp with nondiff_argnums: app(f, x), and
    # app2(f, x, g) whose rule takes the non-differentiable f and g first, "no matter where in the argument list"
    partial, custom_jvp = functools.partial, jax.custom_jvp

    @partial(custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(x), 2. * x_dot

    @partial(custom_jvp, nondiff_argnums=(0, 2))
    def app2(f, x, g):
        return f(g((x)))

    @app2.defjvp
    def app2_jvp(f, g, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(g(x)), 3. * x_dot
    return app, app2


def _app_custom_vjp(jax):
    # More features › Handling non-differentiable arguments › custom_vjp with nondiff_argnums: the bwd rule takes
    # the non-differentiable arguments first, fwd keeps the primal signature
    partial, custom_vjp = functools.partial, jax.custom_vjp

    @partial(custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    def app_fwd(f, x):
        return f(x), x

    def app_bwd(f, x, g):
        return (5 * g,)

    app.defvjp(app_fwd, app_bwd)
    return app




# Handling non-differentiable arguments › custom_jvp with nondiff_argnums: app and app2, and their grad with
# respect to argument 1, as the docs write them
@doc_example()
def test_custom_jvp_nondiff_argnums(jax, jnp):
    app, app2 = _app_custom_jvp(jax)
    grad = jax.grad
    return ((app(lambda x: x ** 3, 3.), grad(app, 1)(lambda x: x ** 3, 3.)),
            (app2(lambda x: x ** 3, 3., lambda y: 5 * y), grad(app2, 1)(lambda x: x ** 3, 3., lambda y: 5 * y)))


# Handling non-differentiable arguments › custom_jvp with nondiff_argnums (adapted: grad of a function closing over
# the function-valued arguments, as ember's grad takes only arrays; also under jit and vmap)
@doc_example()
def test_custom_jvp_nondiff_argnums_closed_over(jax, jnp):
    app, app2 = _app_custom_jvp(jax)
    grad, cube, times5 = jax.grad, (lambda x: x ** 3), (lambda y: 5 * y)
    app_x, app2_x = (lambda x: app(cube, x)), (lambda x: app2(cube, x, times5))
    return ((app(cube, 3.), grad(app_x)(3.), jax.jit(grad(app_x))(3.)),
            (app2(cube, 3., times5), grad(app2_x)(3.), jax.vmap(grad(app2_x))(jnp.array([1., 2.]))))


# Handling non-differentiable arguments › custom_vjp with nondiff_argnums: app, and its grad with respect to
# argument 1, as the docs write them
@doc_example()
def test_custom_vjp_nondiff_argnums(jax, jnp):
    app = _app_custom_vjp(jax)
    return app(lambda x: x ** 2, 4.), jax.grad(app, 1)(lambda x: x ** 2, 4.)


# Handling non-differentiable arguments › custom_vjp with nondiff_argnums (adapted: grad of a function closing over
# the function-valued argument, as ember's grad takes only arrays; also under vmap)
@doc_example()
def test_custom_vjp_nondiff_argnums_closed_over(jax, jnp):
    app = _app_custom_vjp(jax)
    app_x = lambda x: app(lambda x: x ** 2, x)
    return app(lambda x: x ** 2, 4.), jax.grad(app_x)(4.), jax.vmap(jax.grad(app_x))(jnp.array([1., 4.]))


# ------------------------------------------------------------------------- API docstrings: custom_jvp, custom_vjp
# jax/_src/custom_derivatives.py (adapted: `with jnp.printoptions(precision=2): print(...)` returns the value)

def _value_and_grad_at_1_2(jax, jnp, f):
    """The docstrings' `x = jnp.float32(1.0)`, `y = jnp.float32(2.0)`, `print(jax.value_and_grad(f)(x, y))`."""
    x = jnp.float32(1.0)
    y = jnp.float32(2.0)
    return jax.value_and_grad(f)(x, y)


# jax.custom_jvp.defjvp › value_and_grad(f)(x, y) at float32 1. and 2.: (1.68, 1.08)
@doc_example()
def test_api_custom_jvp_defjvp(jax, jnp):
    return _value_and_grad_at_1_2(jax, jnp, _sin_times_y(jax, jnp))


# jax.custom_jvp.defjvps › the same value_and_grad with one JVP per argument
@doc_example()
def test_api_custom_jvp_defjvps(jax, jnp):
    return _value_and_grad_at_1_2(jax, jnp, _sin_times_y_defjvps(jax, jnp))


# jax.custom_vjp.defvjp › value_and_grad(f)(x, y) at float32 1. and 2.: (1.68, 1.08)
@doc_example()
def test_api_custom_vjp_defvjp(jax, jnp):
    return _value_and_grad_at_1_2(jax, jnp, _sin_times_y_vjp(jax, jnp))


# ------------------------------------------------------------------------------------- Gradient checkpointing
# docs/gradient-checkpointing.md

def _three_layers(jax, jnp):
    # Gradient checkpointing › the first cell: g(W, x) = sin(W @ x), f composes three of them
    def g(W, x):
        y = jnp.dot(W, x)
        return jnp.sin(y)

    def f(W1, W2, W3, x):
        x = g(W1, x)
        x = g(W2, x)
        x = g(W3, x)
        return x

    W1 = jnp.ones((5, 4))
    W2 = jnp.ones((6, 5))
    W3 = jnp.ones((7, 6))
    x = jnp.ones(4)
    return g, f, (W1, W2, W3, x)


def _ad_checkpoint(jax):
    """`from jax.ad_checkpoint import ...`, for either side."""
    return importlib.import_module(jax.__name__ + ".ad_checkpoint")


def _grads(jax, f, args):
    """In place of print_saved_residuals(f, *args): the value and the gradients (every argument) of sum(f)."""
    return jax.value_and_grad(lambda *a: f(*a).sum(), tuple(range(len(args))))(*args)


# Gradient checkpointing › f, and f2 with jax.checkpoint(g) at each application site (adapted: gradients in place
# of print_saved_residuals; checkpointing leaves them unchanged)
@doc_example()
def test_checkpoint_application_sites(jax, jnp):
    g, f, args = _three_layers(jax, jnp)

    def f2(W1, W2, W3, x):
        x = jax.checkpoint(g)(W1, x)
        x = jax.checkpoint(g)(W2, x)
        x = jax.checkpoint(g)(W3, x)
        return x

    return _grads(jax, f, args), _grads(jax, f2, args), _grads(jax, jax.jit(f2), args)


# Gradient checkpointing › the rematerialization policies: f3 (dots_with_no_batch_dims_saveable) and f4
# (checkpoint_name with save_only_these_names) (adapted: gradients in place of print_saved_residuals)
@doc_example()
def test_checkpoint_policies_dots_and_names(jax, jnp):
    g, f, args = _three_layers(jax, jnp)
    checkpoint_name = _ad_checkpoint(jax).checkpoint_name

    f3 = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

    def f4(W1, W2, W3, x):
        x = checkpoint_name(g(W1, x), name='a')
        x = checkpoint_name(g(W2, x), name='b')
        x = checkpoint_name(g(W3, x), name='c')
        return x

    f4 = jax.checkpoint(f4, policy=jax.checkpoint_policies.save_only_these_names('a'))
    return _grads(jax, f3, args), _grads(jax, f4, args)


# Gradient checkpointing › jax.checkpoint fundamentals: sin_vjp (cos(x) computed on the forward pass) and sin_vjp2
# (on the backward pass) against jax.vjp(jnp.sin, x)
@doc_example()
def test_checkpoint_sin_vjp(jax, jnp):
    def sin_vjp(x):
        y = jnp.sin(x)
        cos_x = jnp.cos(x)
        return y, lambda y_bar: cos_x * y_bar

    def sin_vjp2(x):
        y = jnp.sin(x)
        return y, lambda y_bar: jnp.cos(x) * y_bar

    x, y_bar = jnp.array([0.5, 1., 2.]), jnp.array([1., -2., 3.])
    y, sin_bwd = jax.vjp(jnp.sin, x)
    return [(y, f_bwd(y_bar)) for y, f_bwd in (sin_vjp(x), sin_vjp2(x), (y, lambda y_bar: sin_bwd(y_bar)[0]))]


# Gradient checkpointing › jax.checkpoint fundamentals: the VJP of a composition h(g(x)) written by hand, without
# (f_vjp) and with (f_vjp_checkpoint) the recomputation of g's residuals; f_checkpoint's grad, and its hand-written
# equivalent f_checkpoint_grad; f_grad_bad and f_grad_bad2, the checkpointing of all of f and of h that saves
# nothing. Adapted: the docs leave g and h open: here g = sin, h = cos at x = 2. (h's output is a scalar, which
# h_vjp(1.0) assumes); in f_checkpoint_grad, `jax.vjp(h)(y)` (a typo) is `jax.vjp(h, y)`.
@doc_example()
def test_checkpoint_composition_vjps(jax, jnp):
    g, h = jnp.sin, jnp.cos

    def f(x):
        y = g(x)
        z = h(y)
        return z

    def f_vjp(x):
        y, g_vjp = jax.vjp(g, x)
        z, h_vjp = jax.vjp(h, y)
        def f_bwd(z_bar):
            y_bar, = h_vjp(z_bar)
            x_bar, = g_vjp(y_bar)
            return x_bar
        return z, f_bwd

    def f_vjp_checkpoint(x):
        y = g(x)
        z, h_vjp = jax.vjp(h, y)
        def f_bwd2(z_bar):
            y_bar, = h_vjp(z_bar)
            _, g_vjp = jax.vjp(g, x)
            x_bar, = g_vjp(y_bar)
            return x_bar
        return z, f_bwd2

    def f_checkpoint(x):
        y = jax.checkpoint(g)(x)
        z = h(y)
        return z

    def f_checkpoint_grad(x):
        y = g(x)                     # step 1
        _, h_vjp = jax.vjp(h, y)     # step 2
        y_bar, = h_vjp(1.0)          # step 3
        _, g_vjp = jax.vjp(g, x)     # step 4
        x_bar, = g_vjp(y_bar)        # step 5
        return x_bar

    def f_grad_bad(x):
        _ = f(x)                  # step 1
        _, f_vjp = jax.vjp(f, x)  # step 2
        x_bar, = f_vjp(1.0)       # step 3
        return x_bar

    def f_grad_bad2(x):
        y, g_vjp = jax.vjp(g, x)  # step 1
        z = h(y)                  # step 2
        _, h_vjp = jax.vjp(h, y)  # step 3
        y_bar, = h_vjp(1.0)       # step 3
        x_bar, = g_vjp(y_bar)     # step 5
        return x_bar

    x = 2.
    return ([(z, bwd(1.0)) for z, bwd in (f_vjp(x), f_vjp_checkpoint(x))],
            (jax.grad(f)(x), jax.grad(f_checkpoint)(x), f_checkpoint_grad(x)),
            (jax.grad(jax.checkpoint(f))(x), f_grad_bad(x)),
            (jax.grad(lambda x: jax.checkpoint(h)(g(x)))(x), f_grad_bad2(x)))


def _loss_predict_layer(jnp, checkpoint_name=None):
    # Gradient checkpointing › Custom policies for what's saveable: loss / predict / layer on three 4x4 layers;
    # with checkpoint_name, predict names each layer's output layer{i}_output (the docs' second predict)
    def loss(params, x, y):
        return jnp.sum((predict(params, x) - y)**2)

    def predict(params, x):
        *Ws, Wlast = params
        for i, W in enumerate(Ws):
            x = layer(W, x)
            if checkpoint_name is not None:
                x = checkpoint_name(x, name=f'layer{i}_output')
        x = jnp.dot(Wlast, x)
        return x

    def layer(W, x):
        return jnp.sin(jnp.dot(W, x))

    W1 = W2 = W3 = jnp.ones((4, 4))
    params = [W1, W2, W3]
    x = jnp.ones(4)
    y = jnp.ones(4)
    return loss, (params, x, y)


# Gradient checkpointing › Custom policies for what's saveable: loss / predict / layer (adapted: its value and
# gradient, and those of jax.checkpoint(loss) with the default policy and with everything_saveable, in place of
# print_saved_residuals; the docs' own policies are in the next test)
@doc_example()
def test_checkpoint_loss_predict_layer(jax, jnp):
    loss, args = _loss_predict_layer(jnp)
    everything = jax.checkpoint_policies.everything_saveable
    return [jax.value_and_grad(fun)(*args)
            for fun in (loss, jax.checkpoint(loss), jax.checkpoint(loss, policy=everything))]


# Gradient checkpointing › Custom policies: loss_checkpoint with dots_with_no_batch_dims_saveable, and
# loss_checkpoint2 on the layer{i}_output names with save_any_names_but_these (adapted: gradients in place of
# print_saved_residuals)
@doc_example()
def test_checkpoint_loss_predict_layer_policies(jax, jnp):
    loss, args = _loss_predict_layer(jnp)
    loss_checkpoint = jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    loss, args = _loss_predict_layer(jnp, _ad_checkpoint(jax).checkpoint_name)
    loss_checkpoint2 = jax.checkpoint(loss, policy=jax.checkpoint_policies.save_any_names_but_these('layer1_output'))
    return jax.grad(loss_checkpoint)(*args), jax.grad(loss_checkpoint2)(*args)


def _chain_compose(funs):
    # Gradient checkpointing › Advanced: Recursive jax.checkpoint › chain_compose
    def f(x):
        for fun in funs:
            x = fun(x)
        return x
    return f


def _recursive_checkpoint(jax):
    # Gradient checkpointing › Advanced: Recursive jax.checkpoint (also the jax.checkpoint docstring)
    def recursive_checkpoint(funs):
        if len(funs) == 1:
            return funs[0]
        elif len(funs) == 2:
            f1, f2 = funs
            return lambda x: f1(f2(x))
        else:
            f1 = recursive_checkpoint(funs[:len(funs)//2])
            f2 = recursive_checkpoint(funs[len(funs)//2:])
            return lambda x: f1(jax.checkpoint(f2)(x))
    return recursive_checkpoint


# Gradient checkpointing › Advanced: Recursive jax.checkpoint: chains of 8 and 16 sines, composed plainly and
# recursively checkpointed, at 3. (adapted: value and gradient in place of print_saved_residuals / print_fwd_bwd)
@doc_example()
def test_checkpoint_recursive(jax, jnp):
    recursive_checkpoint = _recursive_checkpoint(jax)
    return [(jax.value_and_grad(_chain_compose([jnp.sin] * n))(3.),
             jax.value_and_grad(recursive_checkpoint([jnp.sin] * n))(3.)) for n in (8, 16)]


# Gradient checkpointing › Practical notes: the scan-over-layers net (test_jax_docs_control) with jax.checkpoint on
# the scanned layer, with the default policy (nothing_saveable) and everything_saveable, also under jit (the docs'
# own policy, dots_with_no_batch_dims_saveable: the next test)
@doc_example()
def test_checkpoint_scan_over_layers(jax, jnp):
    policies = jax.checkpoint_policies
    checkpointed = [functools.partial(jax.checkpoint, policy=policy)
                    for policy in (None, policies.nothing_saveable, policies.everything_saveable)]
    return ([_scan_over_layers(jax, jnp, layer_wrapper) for layer_wrapper in checkpointed],
            _scan_over_layers(jax, jnp, jax.checkpoint, jit=True))


# Gradient checkpointing › Practical notes: the layer exactly as the docs checkpoint it
@doc_example()
def test_checkpoint_scan_over_layers_dots_saveable(jax, jnp):
    return _scan_over_layers(jax, jnp, functools.partial(
        jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable))


# ------------------------------------------------------------------------------ API docstrings: jax.checkpoint
# jax/_src/ad_checkpoint.py

# jax.checkpoint › "Here is a simple example": value_and_grad(g)(2.0) of a checkpointed sin(sin(x)), which "the
# same value is produced whether or not the jax.checkpoint decorator is present" (added: the undecorated g)
@doc_example()
def test_api_checkpoint_simple_example(jax, jnp):
    def g(x):
        y = jnp.sin(x)
        z = jnp.sin(y)
        return z

    return jax.value_and_grad(jax.checkpoint(g))(2.0), jax.value_and_grad(g)(2.0)


# jax.checkpoint › recursive_checkpoint (the docstring defines it only; applied here to four functions, under
# jit(grad))
@doc_example()
def test_api_checkpoint_recursive(jax, jnp):
    f = _recursive_checkpoint(jax)([jnp.sin, jnp.cos, jnp.tanh, jnp.exp])
    return jax.jit(jax.grad(f))(0.5), jax.grad(_chain_compose([jnp.sin, jnp.cos, jnp.tanh, jnp.exp]))(0.5)


# jax.checkpoint › static_argnums: "consider a boolean flag argument" foo(x, is_training) with Python control flow
# on it (adapted: the docstring's branches are `...`; here sin(x) when training, else x)
@doc_example()
def test_api_checkpoint_static_argnums(jax, jnp):
    partial = functools.partial

    @partial(jax.checkpoint, static_argnums=(1,))
    def foo(x, is_training):
        if is_training:
            return jnp.sin(x)
        else:
            return x

    return [(jax.jit(foo, static_argnums=1)(2., flag), jax.grad(foo)(2., flag)) for flag in (True, False)]


# ------------------------------------------------------------------------- API docstrings: lax.associative_scan
# jax/_src/lax/control_flow/loops.py

# jax.lax.associative_scan › Example 1: partial sums, Example 2: partial products of an array of matrices (adapted:
# numpy's uniform generator in place of jax.random.uniform; added: the products' values, checked against a Python
# loop of matmuls), Example 3: reversed partial sums
@doc_example()
def test_api_associative_scan(jax, jnp):
    lax = jax.lax
    mats = jnp.asarray(np.random.default_rng(0).uniform(size=(4, 2, 2)).astype(np.float32))
    partial_prods = lax.associative_scan(jnp.matmul, mats)
    loop = [mats[0]]
    for i in range(1, 4):
        loop.append(jnp.matmul(loop[-1], mats[i]))
    return (lax.associative_scan(jnp.add, jnp.arange(0, 4)),
            (partial_prods.shape, partial_prods, jnp.stack(loop)),
            lax.associative_scan(jnp.add, jnp.arange(0, 4), reverse=True))


def test_keyword_arguments_resolve_to_positions_as_jax():
    """custom_jvp and custom_vjp functions take keyword arguments (bound to the function's signature, defaults
    filled in, before the rules see positional arguments), as JAX's; keyword-only parameters are a TypeError."""
    import jax

    import ember
    for lib in (ember, jax):
        @lib.custom_vjp
        def f(x, y=2.0):
            return x * y
        f.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1], g * r[0]))

        @lib.custom_jvp
        def g(x, scale=2.0):
            return x * scale
        g.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1] + t[1] * p[0]))

        @functools.partial(lib.custom_vjp, nondiff_argnums=(1,))
        def h(x, n=3):
            return x ** n
        h.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1),))
        assert float(f(3.0, y=4.0)) == 12.0 and float(g(3.0, scale=4.0)) == 12.0 and float(f(3.0)) == 6.0
        assert float(lib.grad(lambda x: f(x, y=5.0))(1.0)) == 5.0
        assert float(lib.jit(lib.grad(lambda x: g(x, scale=5.0)))(1.0)) == 5.0
        assert float(lib.grad(lambda x: h(x, n=4))(2.0)) == 32.0

        @lib.custom_jvp
        def k(x, *, y=2.0):
            return x * y
        k.defjvp(lambda p, t: (p[0] * 2, t[0] * 2))
        with pytest.raises(TypeError, match="could not be resolved to position"):
            k(1.0, y=3.0)
