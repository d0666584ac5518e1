"""JAX's own documentation examples on control flow, run with ember in place of jax and compared with real JAX.

Each test is one documentation example written as a function of `(jax, jnp)`, made a test by test_jax_docs.py's
`doc_example` (run once with `ember` / `ember.numpy`, once with `jax` / `jax.numpy` with x64 off, and compare the
returned trees leaf by leaf; or, with `raises=`, check that both raise). Where JAX refuses reverse mode through a
while_loop (or a fori_loop with traced bounds) and ember computes it, `reverse_mode_beyond_jax` checks JAX's error
and ember's value against JAX's gradient of the loop unrolled.

Sources (github.com/jax-ml/jax): docs/control-flow.md and its new edition docs/new_docs/201/control-flow.md
("Control flow and logical operators with JIT", which adds the scan cumulative sum), docs/jit-compilation.md and
docs/new_docs/201/jit.md ("Just-in-time compilation"), docs/jaxpr.md ("The jaxpr language": higher-order
primitives), docs/notebooks/Common_Gotchas_in_JAX.md ("The Sharp Bits": pure functions), the Custom derivative rules
notebook (fixed_point), docs/gradient-checkpointing.md (scan over layers), and the docstrings of jax.lax.cond, switch
(jax/_src/lax/control_flow/conditionals.py), while_loop, fori_loop, scan and map (loops.py), whose "semantics of the
following Python" implementations are run next to the primitive they describe. The examples with custom_jvp /
custom_vjp, checkpoint and associative_scan (fixed_point with its custom_vjp, the scan over checkpointed layers) are
in test_jax_docs_custom.py, which shares this module's fixed_point and scan-over-layers helpers.

Adaptations are minimal and commented where made: `from jax import grad, jit, lax` becomes attribute access;
`print(...)` and bare expression cells return their values instead; `make_jaxpr(f)(...)` / `jit(f).trace(...)`
become `jit(f)(...)` (the values are compared, not the IR); %timeit is left out. Examples that need what ember lacks
(jax.debug) are skipped, naming the feature.
"""
import jax as jax_oracle
import numpy as np
import pytest
from test_jax_docs import doc_example  # tests/ is on sys.path (conftest.py)

import ember


def reverse_mode_beyond_jax(unrolled):
    """A test of `example(jax, jnp)`, a gradient through a while_loop: JAX (x64 off) refuses it with ValueError
    ("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop
    values"); ember computes it (docs/while_grad.md), equal to `unrolled(jax, jnp)`: JAX's gradient of the same loop
    unrolled in Python (its trip count counted first)."""
    def wrap(example):
        def test():
            with jax_oracle.enable_x64(False), pytest.raises(ValueError, match="Reverse-mode differentiation"):
                example(jax_oracle, jax_oracle.numpy)
            with jax_oracle.enable_x64(False):
                expected = unrolled(jax_oracle, jax_oracle.numpy)
            np.testing.assert_allclose(np.asarray(example(ember, ember.numpy)), np.asarray(expected), rtol=1e-6)
        test.__name__, test.__qualname__, test.__doc__ = example.__name__, example.__qualname__, example.__doc__
        test.example = example
        return test
    return wrap




# ------------------------------------------------------------------ Control flow and logical operators with JIT
# docs/control-flow.md (docs/new_docs/201/control-flow.md: the same cells, plus scan)

def _branchy():
    # Control flow › the example function: a Python `if` on the value of x
    def f(x):
        if x < 3:
            return 3. * x ** 2
        else:
            return -4 * x
    return f


# Control flow › "For example, this works": a Python for loop over range(3) under @jit
@doc_example()
def test_control_flow_jit_python_for_loop(jax, jnp):
    @jax.jit
    def f(x):
        for i in range(3):
            x = 2 * x
        return x

    return f(3)


# Control flow › "So does this": a Python loop over range(x.shape[0]) (the shape is static) under @jit
@doc_example()
def test_control_flow_jit_loop_over_shape(jax, jnp):
    @jax.jit
    def g(x):
        y = 0.
        for i in range(x.shape[0]):
            y = y + x[i]
        return y

    return g(jnp.array([1., 2., 3.]))


# Control flow › "But this doesn't, at least by default": `if x < 3` under @jit (raises-exception)
@doc_example(raises=TypeError)
def test_control_flow_jit_value_branch_raises(jax, jnp):
    f = jax.jit(_branchy())
    # This will fail!
    f(2)


# Control flow › "Neither does this": `(x > 0) and (x < 3)` under @jit (raises-exception)
@doc_example(raises=TypeError)
def test_control_flow_jit_python_and_raises(jax, jnp):
    @jax.jit
    def g(x):
        return (x > 0) and (x < 3)

    # This will fail!
    g(2)


# Control flow › static_argnames='x' lets the Python `if` see a concrete value
@doc_example()
def test_control_flow_static_argnames_branch(jax, jnp):
    f = jax.jit(_branchy(), static_argnames='x')
    return f(2.)


# Control flow › "another example, this time involving a loop": static_argnames='n', the loop is unrolled
@doc_example()
def test_control_flow_static_argnames_loop(jax, jnp):
    def f(x, n):
        y = 0.
        for i in range(n):
            y = y + x[i]
        return y

    f = jax.jit(f, static_argnames='n')
    return f(jnp.array([2., 3., 4.]), 2)


def _example_fun(jnp):
    # Control flow › functions with argument-value dependent shapes
    def example_fun(length, val):
        return jnp.ones((length,)) * val
    return example_fun


# Control flow › argument-value dependent shapes: "un-jit'd works fine"
@doc_example()
def test_control_flow_value_dependent_shape(jax, jnp):
    return _example_fun(jnp)(5, 4)


# Control flow › argument-value dependent shapes: "bad_example_jit(10, 4)  # this will fail" (raises-exception)
@doc_example(raises=TypeError)
def test_control_flow_value_dependent_shape_jit_raises(jax, jnp):
    bad_example_jit = jax.jit(_example_fun(jnp))
    # this will fail:
    bad_example_jit(10, 4)


# Control flow › argument-value dependent shapes: static_argnames='length' recompiles per length
@doc_example()
def test_control_flow_value_dependent_shape_static_argnames(jax, jnp):
    # static_argnames tells JAX to recompile on changes at these argument positions:
    good_example_jit = jax.jit(_example_fun(jnp), static_argnames='length')
    # first compile, then recompiles
    return good_example_jit(10, 4), good_example_jit(5, 4)


# Control flow › "A common gotcha is trying to print arrays inside jit'd functions": the prints see tracers, at
# trace time only. Adapted: `print` records each printed value's shape and dtype (tracers print differently).
@doc_example()
def test_control_flow_print_under_jit(jax, jnp):
    printed = []

    def print(v):
        printed.append((v.shape, np.dtype(v.dtype).name))

    @jax.jit
    def f(x):
        print(x)
        y = 2 * x
        print(y)
        return y
    return f(2), printed


# Control flow › Structured control flow primitives › cond
@doc_example()
def test_control_flow_cond(jax, jnp):
    lax = jax.lax
    operand = jnp.array([0.])
    return (lax.cond(True, lambda x: x+1, lambda x: x-1, operand),   # --> array([1.], dtype=float32)
            lax.cond(False, lambda x: x+1, lambda x: x-1, operand))  # --> array([-1.], dtype=float32)


# Control flow › Structured control flow primitives › while_loop
@doc_example()
def test_control_flow_while_loop(jax, jnp):
    init_val = 0
    cond_fun = lambda x: x < 10
    body_fun = lambda x: x+1
    return jax.lax.while_loop(cond_fun, body_fun, init_val)  # --> array(10, dtype=int32)


# Control flow › Structured control flow primitives › fori_loop
@doc_example()
def test_control_flow_fori_loop(jax, jnp):
    init_val = 0
    start = 0
    stop = 10
    body_fun = lambda i,x: x+i
    return jax.lax.fori_loop(start, stop, body_fun, init_val)  # --> array(45, dtype=int32)


def _cumsum_step(carry, x):
    # Control flow (new_docs/201) › scan: a cumulative sum
    new_carry = carry + x
    return new_carry, new_carry   # (next state, this step's output)


# Control flow (new_docs/201) › Structured control flow primitives › scan: cumulative sums
@doc_example()
def test_control_flow_scan_cumsum(jax, jnp):
    final, cumulative = jax.lax.scan(_cumsum_step, 0.0, jnp.arange(1., 5.))
    return final, cumulative


# Control flow › Summary table: lax.cond works under jit and grad. The page's `if x < 3` function written with
# lax.cond (as the page suggests), evaluated and differentiated on both branches, inside jit.
@doc_example()
def test_control_flow_summary_cond_jit_and_grad(jax, jnp):
    def f(x):
        return jax.lax.cond(x < 3, lambda x: 3. * x ** 2, lambda x: -4 * x, x)
    return jax.jit(f)(2.), jax.jit(f)(4.), jax.jit(jax.grad(f))(2.), jax.jit(jax.grad(f))(4.)


# Control flow › Summary table: lax.while_loop is forward-mode differentiable (the page's loop, on a float carry)
@doc_example()
def test_control_flow_summary_while_loop_forward_mode(jax, jnp):
    cond_fun = lambda x: x < 10
    body_fun = lambda x: x+1
    loop = lambda x: jax.lax.while_loop(cond_fun, body_fun, x)
    return jax.jvp(loop, (0.5,), (1.,)), jax.jacfwd(loop)(0.5)


# Control flow › Summary table: lax.while_loop is not reverse-mode differentiable (in JAX; ember differentiates it)
@reverse_mode_beyond_jax(lambda jax, jnp: jax.grad(lambda x: jax.lax.fori_loop(0, 10, lambda i, x: x + 1, x))(0.5))
def test_control_flow_summary_while_loop_reverse_mode(jax, jnp):
    cond_fun = lambda x: x < 10
    body_fun = lambda x: x+1
    return jax.grad(lambda x: jax.lax.while_loop(cond_fun, body_fun, x))(0.5)


# Control flow › Summary table / fori_loop: "fwd and rev-mode differentiable if endpoints are static"
@doc_example()
def test_control_flow_summary_fori_loop_static_bounds_grad(jax, jnp):
    body_fun = lambda i, x: x + i * jnp.sin(x)  # the page's x + i, made to depend on x nonlinearly
    loop = lambda x: jax.lax.fori_loop(0, 10, body_fun, x)
    return loop(0.5), jax.grad(loop)(0.5), jax.jacrev(loop)(0.5), jax.jit(jax.grad(loop))(0.5)


# Control flow › Summary table / fori_loop: only fwd-mode differentiable in general (bounds traced under jit)
@doc_example()
def test_control_flow_summary_fori_loop_traced_bounds_forward_mode(jax, jnp):
    body_fun = lambda i, x: x + i * jnp.sin(x)
    loop = lambda x, stop: jax.lax.fori_loop(0, stop, body_fun, x)
    return jax.jit(lambda x, stop: jax.jvp(lambda x: loop(x, stop), (x,), (1.,)))(0.5, 10)


# Control flow › Summary table / fori_loop: with traced bounds, reverse mode is refused (in JAX; ember computes it,
# as with static bounds)
@reverse_mode_beyond_jax(lambda jax, jnp: jax.grad(lambda x: jax.lax.fori_loop(0, 10, lambda i, x: x + i * jnp.sin(x),
                                                                                 x))(0.5))
def test_control_flow_summary_fori_loop_traced_bounds_reverse_mode(jax, jnp):
    body_fun = lambda i, x: x + i * jnp.sin(x)
    loop = lambda x, stop: jax.lax.fori_loop(0, stop, body_fun, x)
    return jax.jit(jax.grad(loop))(0.5, 10)


# Control flow › Summary table: lax.scan is differentiable (the cumulative sum's gradient)
@doc_example()
def test_control_flow_summary_scan_grad(jax, jnp):
    total_of_cumsums = lambda xs: jax.lax.scan(_cumsum_step, 0.0, xs)[1].sum()
    cumsum = lambda xs: jax.lax.scan(_cumsum_step, 0.0, xs)[1]
    xs = jnp.arange(1., 5.)
    return jax.grad(total_of_cumsums)(xs), jax.jacrev(cumsum)(xs), jax.jacfwd(cumsum)(xs)


def _check_positive_even(jax, jnp):
    # Control flow › Logical operators: the pure Python and the JAX versions
    def python_check_positive_even(x):
        is_even = x % 2 == 0
        # `and` short-circults, so when `is_even` is `False`, `x > 0` is not evaluated.
        return is_even and (x > 0)

    @jax.jit
    def jax_check_positive_even(x):
        is_even = x % 2 == 0
        # `logical_and` does not short circuit, so `x > 0` is always evaluated.
        return jnp.logical_and(is_even, x > 0)
    return python_check_positive_even, jax_check_positive_even


# Control flow › Logical operators: both versions agree on a scalar
@doc_example()
def test_control_flow_logical_operators_scalar(jax, jnp):
    python_check_positive_even, jax_check_positive_even = _check_positive_even(jax, jnp)
    return python_check_positive_even(24), jax_check_positive_even(24)


# Control flow › Logical operators: logical_and on an array is elementwise
@doc_example()
def test_control_flow_logical_operators_array(jax, jnp):
    _, jax_check_positive_even = _check_positive_even(jax, jnp)
    x = jnp.array([-1, 2, 5])
    return jax_check_positive_even(x)


# Control flow › Logical operators: Python `and` on an array of several elements errors, even without jit
@doc_example(raises=ValueError)
def test_control_flow_logical_operators_python_and_on_array_raises(jax, jnp):
    python_check_positive_even, _ = _check_positive_even(jax, jnp)
    x = jnp.array([-1, 2, 5])
    python_check_positive_even(x)


# Control flow › Python control flow + autodiff: grad of the Python `if` works outside jit
@doc_example()
def test_control_flow_python_control_flow_grad(jax, jnp):
    f = _branchy()
    return jax.grad(f)(2.), jax.grad(f)(4.)  # ok!


# Control flow › cond / scan under vmap (the cond docstring: "when transformed with vmap to operate over a batch of
# predicates, cond is converted to select"): per-example values and gradients of the lax.cond version of the page's
# function, and a batch of cumulative sums.
@doc_example()
def test_control_flow_vmap_of_cond_and_scan(jax, jnp):
    def f(x):
        return jax.lax.cond(x < 3, lambda x: 3. * x ** 2, lambda x: -4 * x, x)
    xs = jnp.array([1., 2., 3., 4.])
    batched_cumsum = jax.vmap(lambda xs: jax.lax.scan(_cumsum_step, 0.0, xs))
    return jax.vmap(f)(xs), jax.vmap(jax.grad(f))(xs), batched_cumsum(jnp.arange(1., 9.).reshape(2, 4))


# ----------------------------------------------------------------------------------- Just-in-time compilation
# docs/jit-compilation.md, docs/new_docs/201/jit.md

# JIT › What the compiled function captures: a Python branch on the rank, resolved while tracing
# (adapted: `make_jaxpr(f)(x)` / `jit(f).trace(x).jaxpr` become `jit(f)(x)`, and a rank-2 input takes the other branch)
@doc_example()
def test_jit_python_branch_on_rank(jax, jnp):
    def log2_if_rank_2(x):
        if x.ndim == 2:
            ln_x = jnp.log(x)
            ln_2 = jnp.log(2.0)
            return ln_x / ln_2
        else:
            return x

    return (jax.jit(log2_if_rank_2)(jax.numpy.array([1, 2, 3])),
            jax.jit(log2_if_rank_2)(jnp.array([[1., 2.], [4., 8.]])))


def _jit_f_and_g():
    # JIT › Why can't we just JIT everything?: the functions f and g
    def f(x):
        if x > 0:
            return x
        else:
            return 2 * x

    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i
    return f, g


# JIT › Why can't we just JIT everything?: condition on value of x (raises-exception)
@doc_example(raises=TypeError)
def test_jit_condition_on_value_raises(jax, jnp):
    f, _ = _jit_f_and_g()
    jax.jit(f)(10)  # Raises an error


# JIT › Why can't we just JIT everything?: while loop conditioned on x and n (raises-exception)
@doc_example(raises=TypeError)
def test_jit_while_on_value_raises(jax, jnp):
    _, g = _jit_f_and_g()
    jax.jit(g)(10, 20)  # Raises an error


# JIT › Why can't we just JIT everything?: while loop conditioned on x and n with a jitted body
@doc_example()
def test_jit_inner_jitted_loop_body(jax, jnp):
    @jax.jit
    def loop_body(prev_i):
        return prev_i + 1

    def g_inner_jitted(x, n):
        i = 0
        while i < n:
            i = loop_body(i)
        return x + i

    return g_inner_jitted(10, 20)


# JIT › Marking arguments as static: static_argnums=0
@doc_example()
def test_jit_static_argnums(jax, jnp):
    f, _ = _jit_f_and_g()
    f_jit_correct = jax.jit(f, static_argnums=0)
    return f_jit_correct(10)


# JIT › Marking arguments as static: static_argnames=['n']
@doc_example()
def test_jit_static_argnames(jax, jnp):
    _, g = _jit_f_and_g()
    g_jit_correct = jax.jit(g, static_argnames=['n'])
    return g_jit_correct(10, 20)


# JIT › Marking arguments as static: the decorator factory @jax.jit(static_argnames=['n'])
@doc_example()
def test_jit_static_argnames_decorator_factory(jax, jnp):
    @jax.jit(static_argnames=['n'])
    def g_jit_decorated(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    return g_jit_decorated(10, 20)


# (slow: 40 compilations a side, about 2.5 s; the point of the docs' example)
# JIT › JIT and caching: jit called in a loop on partials, lambdas, and one function (each compiles per call but
# the first two; the values agree; %timeit left out)
@pytest.mark.slow
@doc_example()
def test_jit_caching_in_a_loop(jax, jnp):
    from functools import partial

    def unjitted_loop_body(prev_i):
        return prev_i + 1

    def g_inner_jitted_partial(x, n):
        i = 0
        while i < n:
            # Don't do this! each time the partial returns
            # a function with different hash
            i = jax.jit(partial(unjitted_loop_body))(i)
        return x + i

    def g_inner_jitted_lambda(x, n):
        i = 0
        while i < n:
            # Don't do this!, lambda will also return
            # a function with a different hash
            i = jax.jit(lambda x: unjitted_loop_body(x))(i)
        return x + i

    def g_inner_jitted_normal(x, n):
        i = 0
        while i < n:
            # this is OK, since JAX can find the
            # cached, compiled function
            i = jax.jit(unjitted_loop_body)(i)
        return x + i

    return g_inner_jitted_partial(10, 20), g_inner_jitted_lambda(10, 20), g_inner_jitted_normal(10, 20)


# ------------------------------------------------------------------------------------------ The jaxpr language
# docs/jaxpr.md (adapted: `print(make_jaxpr(f)(*args))` becomes `jax.jit(f)(*args)`: the values are compared)

# jaxpr › Python-level control flow is inlined: `if second.shape[0] > 4` in an inner function
@doc_example()
def test_jaxpr_python_conditional_inlined(jax, jnp):
    def func2(inner, first, second):
        temp = first + inner(second) * 3.
        return jnp.sum(temp)

    def inner(second):
        if second.shape[0] > 4:
            return jnp.sin(second)
        else:
            assert False

    def func3(first, second):
        return func2(inner, first, second)

    return jax.jit(func3)(jnp.zeros(8), jnp.ones(8))


def _one_of_three(lax):
    # jaxpr › cond primitive: lax.switch over three branches
    def one_of_three(index, arg):
        return lax.switch(index, [lambda x: x + 1.,
                                  lambda x: x - 2.,
                                  lambda x: x + 3.],
                          arg)
    return one_of_three


# jaxpr › cond primitive: lax.switch (make_jaxpr(one_of_three)(1, 5.)), under jit on each index
@doc_example()
def test_jaxpr_switch(jax, jnp):
    one_of_three = jax.jit(_one_of_three(jax.lax))
    return one_of_three(1, 5.), one_of_three(0, 5.), one_of_three(2, 5.)


def _func7(lax):
    # jaxpr › cond primitive: lax.cond on `arg >= 0.`
    def func7(arg):
        return lax.cond(arg >= 0.,
                        lambda xtrue: xtrue + 3.,
                        lambda xfalse: xfalse - 3.,
                        arg)
    return func7


# jaxpr › cond primitive: lax.cond (make_jaxpr(func7)(5.)), on both branches, and vmapped over a batch of
# predicates (the cond docstring: converted to select)
@doc_example()
def test_jaxpr_cond(jax, jnp):
    func7 = _func7(jax.lax)
    return jax.jit(func7)(5.), jax.jit(func7)(-5.), jax.vmap(func7)(jnp.array([-1., 2.]))


# jaxpr › cond primitive: a pair operand, and a constant jnp.array([1]) in the false branch
@doc_example()
def test_jaxpr_cond_pair_operand_and_constant(jax, jnp):
    def func8(arg1, arg2):  # Where `arg2` is a pair.
        return jax.lax.cond(arg1 >= 0.,
                            lambda xtrue: xtrue[0],
                            lambda xfalse: jnp.array([1]) + xfalse[1],
                            arg2)

    return jax.jit(func8)(5., (jnp.zeros(1), 2.)), jax.jit(func8)(-5., (jnp.zeros(1), 2.))


# jaxpr › while primitive: a fori_loop with a traced trip count n and closed-over constants
# (np.ones(16) is float64: float32 on both sides, JAX's default)
@doc_example()
def test_jaxpr_fori_loop(jax, jnp):
    def func10(arg, n):
        ones = jnp.ones(arg.shape)  # A constant.
        return jax.lax.fori_loop(0, n,
                                 lambda i, carry: carry + ones * 3. + arg,
                                 arg + ones)

    return jax.jit(func10)(np.ones(16), 5)


def _func11(jax, jnp):
    # jaxpr › scan primitive (also Sharp bits › Pure functions): a running dot product of two arrays
    def func11(arr, extra):
        ones = jnp.ones(arr.shape)  #  A constant
        def body(carry, aelems):
            # carry: running dot-product of the two arrays
            # aelems: a pair with corresponding elements from the two arrays
            ae1, ae2 = aelems
            return (carry + ae1 * ae2 + extra, carry)
        return jax.lax.scan(body, 0., (arr, ones))
    return func11


# jaxpr › scan primitive: make_jaxpr(func11)(np.ones(16), 5.) (float64 numpy input: float32 on both sides)
@doc_example()
def test_jaxpr_scan(jax, jnp):
    return jax.jit(_func11(jax, jnp))(np.ones(16), 5.)


# --------------------------------------------------------------------------------------------- The Sharp Bits
# docs/notebooks/Common_Gotchas_in_JAX.md › Pure functions

# Sharp bits › a pure function may use stateful objects internally (a Python loop over a dict, under jit)
@doc_example()
def test_sharp_bits_pure_uses_internal_state(jax, jnp):
    def pure_uses_internal_state(x):
        state = dict(even=0, odd=0)  # noqa: C408
        for i in range(10):
            state['even' if i % 2 == 0 else 'odd'] += x
        return state['even'] + state['odd']

    return jax.jit(pure_uses_internal_state)(5.)


# Sharp bits › iterators in control-flow primitives: "lax.fori_loop(0, 10, lambda i,x: x+array[i], 0) # expected
# result 45" (indexes with the traced loop index)
@doc_example()
def test_sharp_bits_fori_loop_indexing_with_the_loop_index(jax, jnp):
    array = jnp.arange(10)
    return jax.lax.fori_loop(0, 10, lambda i,x: x+array[i], 0) # expected result 45


# Sharp bits › iterators in control-flow primitives: fori_loop over next(iterator) gives the "unexpected result 0"
# (the body is traced once); scan over (jnp.arange(16), ones) (adapted: make_jaxpr(func11) becomes func11); cond
# on an array operand
@doc_example()
def test_sharp_bits_iterators_in_control_flow(jax, jnp):
    lax = jax.lax
    # lax.fori_loop
    iterator = iter(range(10))
    unexpected = lax.fori_loop(0, 10, lambda i,x: x+next(iterator), 0) # unexpected result 0
    # lax.scan
    scanned = _func11(jax, jnp)(jnp.arange(16), 5.)
    # lax.cond
    array_operand = jnp.array([0.])
    return unexpected, scanned, lax.cond(True, lambda x: x+1, lambda x: x-1, array_operand)


# Sharp bits › "lax.cond(True, lambda x: next(x)+1, lambda x: next(x)-1, iter_operand) # throws error"
@doc_example(raises=TypeError)
def test_sharp_bits_cond_on_iterator_raises(jax, jnp):
    iter_operand = iter(range(10))
    jax.lax.cond(True, lambda x: next(x)+1, lambda x: next(x)-1, iter_operand)


# ---------------------------------------------------------------------------------------- Other tutorial pages

def _fixed_point_loop(jnp, while_loop):
    # Custom derivative rules › fixed_point: iterate x = f(a, x) in a while_loop until it settles
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star
    return fixed_point


def _newton_sqrt(fixed_point):
    # Custom derivative rules › newton_sqrt: Newton's method for square roots, run to convergence by fixed_point
    def newton_sqrt(a):
        update = lambda a, x: 0.5 * (x + a / x)
        return fixed_point(update, a, a)
    return newton_sqrt


def _fixed_point(jnp, while_loop):
    return _newton_sqrt(_fixed_point_loop(jnp, while_loop))


# Custom derivative rules for Python code › custom_vjp: newton_sqrt through a while_loop, also under jit(vmap(...))
# (added: its forward-mode derivative, which the while_loop allows)
@doc_example()
def test_custom_derivatives_fixed_point_while_loop(jax, jnp):
    newton_sqrt = _fixed_point(jnp, jax.lax.while_loop)
    return (newton_sqrt(2.), jax.jit(jax.vmap(newton_sqrt))(jnp.array([1., 2., 3., 4.])),
            jax.jacfwd(newton_sqrt)(2.))


def _unrolled(steps):
    """A while_loop stand-in that runs the body `steps` times, unrolled in Python (JAX differentiates that)."""
    def while_loop(cond_fun, body_fun, init):
        for _ in range(steps):
            init = body_fun(init)
        return init
    return while_loop


def _newton_fixed_point_steps(a):
    """The trip count of newton_sqrt(a)'s fixed_point loop in float32, counted in numpy."""
    a = np.float32(a)
    f = lambda x: np.float32(0.5) * (x + a / x)  # noqa: E731
    x_prev, x, steps = a, f(a), 0
    while abs(x_prev - x) > 1e-6:
        x_prev, x, steps = x, f(x), steps + 1
    return steps


# Custom derivative rules › "We can't apply reverse-mode automatic differentiation because of the while_loop" (in
# JAX; ember differentiates the loop as unrolled: the derivative of Newton's iterations, 1 / (2 sqrt(2)) here)
@reverse_mode_beyond_jax(lambda jax, jnp: jax.grad(_fixed_point(jnp, _unrolled(_newton_fixed_point_steps(2.))))(2.))
def test_custom_derivatives_fixed_point_reverse_mode(jax, jnp):
    return jax.grad(_fixed_point(jnp, jax.lax.while_loop))(2.)


def _scan_over_layers(jax, jnp, layer_wrapper=None, jit=False):
    # Gradient checkpointing › scan over layers: a Python loop over (W, b) pairs, and the same net as a lax.scan
    # over the stacked weights, its layer wrapped in layer_wrapper (jax.checkpoint) if given (adapted: both
    # evaluated, and the scan version differentiated (under jit if asked), at x = [1., 2.])
    def net_loop(params, x):
        for W, b in params:
            x = jnp.maximum(jnp.dot(x, W) + b, 0.)
        return x

    params = [(jnp.array([[0.5, 0.5], [1., 1.]]), jnp.array([0.5, 0.5])),
              (jnp.array([[0.5, 0.5], [1., 1.]]), jnp.array([0.5, 0.5]))]

    all_weights = jnp.stack([W for W, _ in params])
    all_biases = jnp.stack([b for _, b in params])

    def layer(x, W_b_pair):
        W, b = W_b_pair
        out = jnp.maximum(jnp.dot(x, W) + b, 0.)
        return out, None

    layer = layer if layer_wrapper is None else layer_wrapper(layer)

    def net(all_weights, all_biases, x):
        x, _ = jax.lax.scan(layer, x, (all_weights, all_biases))
        return x

    x = jnp.array([1., 2.])
    loss = lambda w, b: net(w, b, x).sum()
    grad = jax.grad(loss, (0, 1))
    grad = jax.jit(grad) if jit else grad
    return net_loop(params, x), net(all_weights, all_biases, x), grad(all_weights, all_biases)


# Gradient checkpointing › scan over layers (with jax.checkpoint on the layer: test_jax_docs_custom.py)
@doc_example()
def test_gradient_checkpointing_scan_over_layers(jax, jnp):
    return _scan_over_layers(jax, jnp)


# Debugging (new_docs/201/debugging.md) › jax.debug.print inside jax.lax.map versus jax.vmap: lax.map prints each
# element in order, vmap prints the batch once (and the results agree)
@doc_example()
def test_debugging_print_in_lax_map(jax, jnp):
    import contextlib
    import io

    def f(x):
        jax.debug.print("x: {}", x)
        return x * 2
    xs = jnp.arange(3.0)
    printed = []
    for run in (lambda: jax.lax.map(f, xs), lambda: jax.vmap(f)(xs), lambda: jax.jit(lambda v: jax.lax.map(f, v))(xs)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = run()
            jax.effects_barrier()
        printed.append((out.getvalue().splitlines(), result))
    return printed


# Thinking in JAX › Pseudorandom numbers: in tests/test_jax_docs_random.py (compared bit for bit).


# ------------------------------------------------------------------------------------------- API docstrings
# jax/_src/lax/control_flow/conditionals.py and loops.py: each docstring's "semantics of this Python
# implementation" run next to the primitive, and the docstrings' stated facts.

# jax.lax.cond › "equivalent semantics to this Python implementation", operands "any pytree
# (nested Python tuple/list/dict)"
@doc_example()
def test_api_cond_semantics(jax, jnp):
    def cond(pred, true_fun, false_fun, *operands):
        if pred:
            return true_fun(*operands)
        else:
            return false_fun(*operands)

    true_fun = lambda p, s: {'w': p['w'] * s, 'b': p['b'] + s}
    false_fun = lambda p, s: {'w': p['w'] - s, 'b': p['b'] * 0.}
    operands = ({'w': jnp.arange(3.), 'b': jnp.ones(2)}, 2.)
    return [(jax.lax.cond(pred, true_fun, false_fun, *operands), cond(pred, true_fun, false_fun, *operands))
            for pred in (True, False)]


# jax.lax.switch › "If index is out of bounds, it is clamped to within bounds" (the Python semantics'
# clamp(0, index, len(branches) - 1)), eagerly and under jit
@doc_example()
def test_api_switch_clamps_index(jax, jnp):
    one_of_three = _one_of_three(jax.lax)
    return ([one_of_three(i, 5.) for i in (-1, 3, 7)],
            [jax.jit(one_of_three)(i, 5.) for i in (-1, 3, 7)],
            jax.vmap(one_of_three, in_axes=(0, None))(jnp.array([-2, 0, 1, 2, 9]), 5.))


# jax.lax.while_loop › the Python semantics, with a pytree (tuple) carry
@doc_example()
def test_api_while_loop_semantics(jax, jnp):
    def while_loop(cond_fun, body_fun, init_val):
        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    cond_fun = lambda c: c[0] < 5
    body_fun = lambda c: (c[0] + 1, c[1] * 2.)
    init_val = (0, jnp.ones(2))
    return jax.lax.while_loop(cond_fun, body_fun, init_val), while_loop(cond_fun, body_fun, init_val)


# jax.lax.fori_loop › the Python semantics; "setting upper <= lower will produce no iterations"
@doc_example()
def test_api_fori_loop_semantics(jax, jnp):
    def fori_loop(lower, upper, body_fun, init_val):
        val = init_val
        for i in range(lower, upper):
            val = body_fun(i, val)
        return val

    body_fun = lambda i, x: x * 2. + i
    return [(jax.lax.fori_loop(lower, upper, body_fun, 1.), fori_loop(lower, upper, body_fun, 1.))
            for lower, upper in ((0, 5), (3, 7), (4, 4), (6, 2))]


# jax.lax.fori_loop › "If the trip count is static (meaning known at tracing time, perhaps because lower and upper
# are Python integer literals) then ... reverse-mode autodiff is supported": an int argument not differentiated
@doc_example()
def test_api_fori_loop_static_trip_count_from_an_argument(jax, jnp):
    def f(x, n):
        return jax.lax.fori_loop(0, n, lambda i, c: c * x + i, 1.)
    return jax.grad(f)(1.5, 3)


# jax.lax.scan › the Python semantics (with `length` when xs is None), `reverse` "equivalent to reversing the
# leading axes of the arrays in both xs and ys", and `unroll`
@doc_example()
def test_api_scan_semantics(jax, jnp):
    def scan(f, init, xs, length=None):
        if xs is None:
            xs = [None] * length
        carry = init
        ys = []
        for x in xs:
            carry, y = f(carry, x)
            ys.append(y)
        return carry, np.stack(ys)

    f = lambda c, x: (c * 0.5 + x, c - x)
    xs = jnp.arange(5.)
    counter = lambda c, _: (c + 1, c * c)
    carry_r, ys_r = jax.lax.scan(f, 1., xs, reverse=True)
    carry_p, ys_p = scan(f, 1., list(xs)[::-1])  # (ember has no negative slice steps)
    return ((jax.lax.scan(f, 1., xs), scan(f, 1., xs)),
            (jax.lax.scan(counter, 0, None, length=4), scan(counter, 0, None, length=4)),
            ((carry_r, ys_r), (carry_p, ys_p[::-1])),
            jax.lax.scan(f, 1., xs, unroll=2), jax.lax.scan(f, 1., xs, unroll=True))


# jax.lax.map › the Python semantics np.stack([f(x) for x in xs]), on a pytree of xs
@doc_example()
def test_api_map_semantics(jax, jnp):
    f = lambda p: p['a'].sum() * p['b']
    xs = {'a': jnp.arange(6.).reshape(3, 2), 'b': jnp.array([1., -1., 2.])}
    return jax.lax.map(f, xs), np.stack([f({'a': a, 'b': b}) for a, b in zip(xs['a'], xs['b'])])


# jax.lax.map › batch_size: ">>> y = lax.map(f, x, batch_size=3)" prints "inner shape: (3, 4)" twice (the batched
# computation and the remainder) and y.shape is (10, 3, 4) (adapted: the prints are recorded)
@doc_example()
def test_api_map_batch_size(jax, jnp):
    printed = []
    x = jnp.ones((10, 3, 4))
    def f(x):
        printed.append(('inner shape:', x.shape))
        return x + 1
    y = jax.lax.map(f, x, batch_size=3)
    return printed, y.shape
