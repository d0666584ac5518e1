"""JAX's top-level tracing helpers, each against jax: named_scope / named_call (names in the IR, the StableHLO
locations, XLA's metadata and the profiler's trace, kept by the transformations), custom_gradient and
closure_convert (closures with custom derivatives, on custom_vjp), fwd_and_bwd, ensure_compile_time_eval, and
checking_leaks / check_tracer_leaks."""
import functools
import gzip
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._runtime.xla_proto import fields


def scoped(lib, np_, x):
    with lib.named_scope("outer"):
        y = np_.sin(x)
        with lib.named_scope("inner"):
            z = y * 2.0
    return lib.named_call(lambda a: a + 1.0, name="plus")(z)


def locations(text):
    return set(re.findall(r'loc\("([^"]*)"\(', text))


def strings(proto):
    """The printable strings of length-delimited fields anywhere in a serialized protobuf message."""
    for value in (v for values in fields(proto).values() for v in values):
        if isinstance(value, bytes):  # (length-delimited)
            try:
                yield value.decode("ascii")
            except UnicodeDecodeError:
                pass
            try:
                yield from strings(value)
            except (ValueError, IndexError):  # (not a message)
                pass


def test_named_scopes_in_the_ir_the_stablehlo_and_the_profile_as_jax(tmp_path):
    f = functools.partial(scoped, ember, enp)
    printed = ember.make_ir(f)(1.0).pretty_print(name_stack=True)
    assert [line.rsplit("# ", 1)[-1] for line in printed.splitlines()[1:-1]] == ["outer", "outer/inner", "plus"]
    names = locations(ember.jit(f).lower(1.0).as_text())
    assert names == {"outer/sin", "outer/inner/mul", "plus/add"}
    jax_text = jax.jit(functools.partial(scoped, jax, jnp)).lower(1.0).as_text(debug_info=True)
    assert {"jit(scoped)/" + n for n in names} <= locations(jax_text)  # (jax prefixes the jit's name)
    np.testing.assert_allclose(ember.jit(f)(0.5), jax.jit(functools.partial(scoped, jax, jnp))(0.5), rtol=1e-6)
    _, optimized = ember.jit(f).lower(1.0).compile().executable.optimized_program()
    assert names <= set(strings(optimized))  # XLA kept them (the instructions' metadata op_name)
    assert "loc(" not in ember.jit(lambda x: enp.sin(x) * 2.0).lower(1.0).as_text()  # (no scope: text unchanged)

    # kept by grad and vmap; an enclosing scope contains an inner jit's (cached or not) and grad's scopes
    assert {"outer/cos", "outer/inner/mul"} <= locations(ember.jit(ember.grad(f)).lower(1.0).as_text())
    assert "outer/inner" in ember.make_ir(ember.vmap(f))(enp.ones(3)).pretty_print(name_stack=True)

    def top(x):
        with ember.named_scope("top"):
            return ember.jit(f)(x) + ember.grad(f)(x)
    names = locations(ember.jit(top).lower(1.0).as_text())
    assert {"top/outer/sin", "top/outer/inner/mul", "top/plus/add", "top/outer/cos", "top/add"} <= names
    # inside a branch's region, the scope of the cond and of the branch's own equations
    cond = ember.jit(lambda x: ember.named_call(lambda v: ember.lax.cond(v > 0, lambda a: scoped(ember, enp, a),
                                                                         lambda a: a, v), name="branchy")(x))
    assert {"branchy/cond", "branchy/outer/sin"} <= locations(cond.lower(1.0).as_text())
    assert float(cond(1.0)) == pytest.approx(float(scoped(jax, jnp, 1.0)))

    with ember.profiler.trace(tmp_path):
        f(enp.float32(1.0))
    path = next(tmp_path.rglob("*.trace.json.gz"))
    with gzip.open(path, "rt") as file:
        events = json.load(file)["traceEvents"]
    assert {"outer", "inner", "plus"} <= {e["name"] for e in events if e.get("cat") == "named_scope"}
    with pytest.raises(TypeError, match="named_scope"):
        with ember.named_scope(3):
            pass
    assert ember.named_call(np.sin).__name__ == "sin"


def make_custom_gradient(lib, np_):
    @lib.custom_gradient
    def f(x, y):
        z = np_.sin(x) * y
        return z, lambda g: (g * 3.0 * z, g * np_.cos(x))
    return f


def make_closure_loss(lib, np_):
    @functools.partial(lib.custom_vjp, nondiff_argnums=(0,))
    def apply(f, x, *consts):
        return f(x, *consts)

    def fwd(f, x, *consts):
        return f(x, *consts), (x, consts)

    def bwd(f, res, g):
        x, consts = res
        _, pullback = lib.vjp(f, x, *consts)
        return tuple(2.0 * c for c in pullback(g))  # (doubled: the rule ran)
    apply.defvjp(fwd, bwd)

    def loss(x, w):
        conv, consts = lib.closure_convert(lambda y: np_.sin(y * w) * w, x)
        assert len(consts) == (0 if isinstance(w, float) else 1)  # w, when traced (by grad), is hoisted out
        return apply(conv, x, *consts)
    return loss


def test_custom_gradient_and_closure_convert_as_jax():
    for make in (make_custom_gradient, make_closure_loss):
        ours, theirs = make(ember, enp), make(jax, jnp)
        for transform in (lambda lib, f: f, lambda lib, f: lib.grad(f, argnums=(0, 1)),
                          lambda lib, f: lib.jit(lib.grad(f, argnums=(0, 1)))):
            np.testing.assert_allclose(transform(ember, ours)(0.5, 3.0), transform(jax, theirs)(0.5, 3.0),
                                       rtol=1e-6)
    xs, ys = np.linspace(-1, 1, 3, dtype=np.float32), np.ones(3, np.float32)
    f, g = make_custom_gradient(ember, enp), make_custom_gradient(jax, jnp)
    np.testing.assert_allclose(ember.vmap(ember.grad(f))(xs, ys), jax.vmap(jax.grad(g))(xs, ys), rtol=1e-6)
    with pytest.raises(TypeError, match="pair"):
        ember.grad(ember.custom_gradient(lambda x: x))(1.0)
    assert ember.custom_derivatives.custom_gradient is ember.custom_gradient  # (jax.custom_derivatives' names)
    converted, consts = ember.closure_convert(lambda a, b: a * b, 1.0, 2.0)
    assert consts == [] and converted(3.0, 4.0) == 12.0
    with pytest.raises(TypeError, match="structure"):
        converted((3.0, 4.0))


def test_fwd_and_bwd_as_jax():
    x, w, g = np.arange(4.0, dtype=np.float32).reshape(2, 2), np.full((2, 2), 2.0, np.float32), np.ones((2, 2),
                                                                                                       np.float32)
    results = []
    for lib, np_ in ((ember, enp), (jax, jnp)):
        fwd, bwd = lib.fwd_and_bwd(lambda a, b: (np_.sin(a @ b), a.sum()), argnums=(0, 1), has_aux=True)
        y, residuals, aux = fwd(x, w)
        results.append(jax.tree_util.tree_leaves((y, aux, bwd(residuals, g))))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    fwd, bwd = ember.fwd_and_bwd(lambda a, b: enp.sin(a @ b), argnums=1)
    cotangents = [bwd(fwd(x + step, w)[1], g) for step in range(3)]  # (each compiled once)
    np.testing.assert_allclose(cotangents[0], results[1][3], rtol=1e-6)  # an int argnums: its one cotangent
    assert fwd.cache_info().misses == bwd.cache_info().misses == 1


def test_ensure_compile_time_eval_and_leak_checks():
    def f(np_, lib, x):
        with lib.ensure_compile_time_eval():
            n = int(np_.arange(4.0).sum())  # known under jit: Python may use it
            y = np_.sin(x)  # traced: still staged
        return y * n
    np.testing.assert_allclose(ember.jit(functools.partial(f, enp, ember))(0.3),
                               jax.jit(functools.partial(f, jnp, jax))(0.3), rtol=1e-6)
    with pytest.raises(ember.ConcretizationTypeError):
        ember.jit(lambda x: int(enp.arange(4.0).sum()) * x)(1.0)

    leaked = []

    def leaky(x):
        y = enp.sin(x)
        leaked.append(y)
        return y * 2

    with ember.checking_leaks():
        assert ember.check_tracer_leaks.value
        with pytest.raises(ember.UnexpectedTracerError, match=r"test_scopes.py:\d+ \(leaky\)"):
            ember.jit(leaky)(1.0)
        # no false alarm from ember's own stagings
        ember.jit(lambda x: ember.lax.scan(lambda c, v: (c + v, c * v), x, enp.ones(2)))(1.0)
        ember.jit(ember.grad(lambda x: ember.lax.cond(x > 0, enp.sin, enp.cos, x) * x))(1.0)
        ember.vmap(ember.grad(lambda x: enp.sin(x) * x))(enp.ones(2))

        @ember.custom_vjp
        def clipped(x):
            return x
        clipped.defvjp(lambda x: (x, None), lambda _, g: (enp.clip(g, -1.0, 1.0),))
        assert float(ember.jit(ember.grad(lambda x: clipped(x) * 3.0))(1.0)) == 1.0
    assert not ember.check_tracer_leaks.value
    leaked.clear()
    ember.jit(leaky)(2.0)
    with pytest.raises(ember.UnexpectedTracerError, match=r"made by the sin at .*test_scopes.py:\d+ \(leaky\)"):
        enp.cos(leaked[0])
