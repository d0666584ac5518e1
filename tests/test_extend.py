"""JAX's extension API on ember (ember.extend.core, ember.interpreters, docs/extending.md): a primitive defined the
JAX way gets the values, JVPs, VJPs, batching and jit that the same primitive gets under JAX; jaxprs are ember's
IR under JAX's names; custom_jvp/custom_vjp take symbolic zeros as JAX's."""
import numpy as np
import pytest

import ember
import ember.core
import ember.numpy as jnp
from ember.extend import core as ext
from ember.interpreters import ad, batching, mlir
from recorded import jax_result


def define(extend_core, core, ad, batching, mlir, jnp):
    """cube(x; c) = c x**3 (a JVP rule, a batcher over plain dims), and twin(x) = (2x, reversed x) (two outputs,
    linear: deflinear, a fancy batcher): the same definitions for JAX and for ember."""
    cube_p = extend_core.Primitive("cube")

    def cube_impl(x, *, c):
        return x * x * x * c
    cube_p.def_impl(cube_impl)
    cube_p.def_abstract_eval(lambda x, *, c: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(cube_p, mlir.lower_fun(cube_impl, multiple_results=False))

    def cube_jvp(primals, tangents, *, c):
        (x,), (t,) = primals, tangents
        y = cube_p.bind(x, c=c)
        if type(t) is ad.Zero:
            return y, ad.Zero.from_primal_value(y)
        return y, 3 * c * x * x * t
    ad.primitive_jvps[cube_p] = cube_jvp
    batching.primitive_batchers[cube_p] = lambda args, dims, *, c: (cube_p.bind(*args, c=c), dims[0])

    twin_p = extend_core.Primitive("twin")
    twin_p.multiple_results = True

    def twin_impl(x):
        return [2 * x, x[::-1]]
    twin_p.def_impl(twin_impl)
    twin_p.def_abstract_eval(lambda x: [x, x])
    mlir.register_lowering(twin_p, mlir.lower_fun(twin_impl, multiple_results=True))
    ad.deflinear(twin_p, lambda cts: [2 * cts[0] + cts[1][::-1]])

    def twin_batch(axis_data, args, dims):
        if dims[0] is None:
            return twin_p.bind(args[0]), [None, None]
        y = batching.bdim_at_front(args[0], dims[0], axis_data.size)
        return [2 * y, y[:, ::-1]], [0, 0]
    batching.fancy_primitive_batchers[twin_p] = twin_batch

    def f(x):
        a, b = twin_p.bind(cube_p.bind(x, c=0.5))
        return jnp.sum(a * jnp.sin(b))
    return cube_p, twin_p, f


def with_jax():
    import jax
    import jax.extend.core
    from jax.interpreters import ad as jad, batching as jbatching, mlir as jmlir
    return jax, define(jax.extend.core, jax.core, jad, jbatching, jmlir, jax.numpy)


CUBE_P, TWIN_P, F = define(ext, ember.core, ad, batching, mlir, jnp)
X = np.arange(1.0, 4.0, dtype=np.float32) / 3
XS = np.stack([X, 2 * X])

TRANSFORMS = {
    "value": lambda api, f: f(X),
    "jit": lambda api, f: api.jit(f)(X),
    "grad": lambda api, f: api.grad(f)(X),
    "jit_grad": lambda api, f: api.jit(api.grad(f))(X),
    "jvp": lambda api, f: api.jvp(f, (X,), (np.ones(3, np.float32),)),
    "vmap": lambda api, f: api.vmap(f)(XS),
    "vmap_grad": lambda api, f: api.vmap(api.grad(f))(XS),
    "jit_vmap_grad": lambda api, f: api.jit(api.vmap(api.grad(f)))(XS),
    "hessian": lambda api, f: api.hessian(f)(X),
    "jacrev_jacrev": lambda api, f: api.jacrev(api.jacrev(f))(X),
    "scan_grad": lambda api, f: api.grad(lambda x: api.lax.scan(lambda c, r: (c + f(r * c), None), 1.0,
                                                               api.numpy.stack([x, x]))[0])(X),
}


@pytest.mark.parametrize("name", TRANSFORMS)
def test_primitive_defined_the_jax_way_matches_jax(name):
    """Values, jit, grad (the JVP rule linearized and transposed), jvp, vmap, and their compositions equal JAX's
    for the same definitions."""
    transform = TRANSFORMS[name]

    def on_jax():
        jax, (_, _, f) = with_jax()
        return transform(jax, f)
    want = jax_result(on_jax)
    got = transform(ember, F)
    for w, g in zip(np.atleast_1d(np.asarray(want, dtype=object)) if isinstance(want, tuple) else [want],
                    got if isinstance(got, tuple) else [got]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)


def test_linear_transpose_uses_the_transpose_rule():
    """A linear primitive transposed through linear_transpose (and through its own JVP, inside grad) gives JAX's
    cotangents; the transpose rule receives UndefinedPrimal for the linear operand."""
    def on(api, twin_p):
        return api.linear_transpose(lambda v: twin_p.bind(v), X)([np.ones(3, np.float32), np.arange(3.0, dtype=np.float32)])

    def on_jax():
        jax, (_, twin_p, _) = with_jax()
        return on(jax, twin_p)
    np.testing.assert_allclose(np.asarray(on(ember, TWIN_P)[0]), np.asarray(jax_result(on_jax)[0]))

    seen = []
    p = ext.Primitive("scale3")
    p.def_impl(lambda x: 3 * x)
    p.def_abstract_eval(lambda x: x)

    def transpose(ct, x):
        seen.append(type(x))
        return [3 * ct]
    ad.deflinear2(p, transpose)
    assert float(ember.grad(lambda x: p.bind(x) ** 2)(2.0)) == 36.0  # jit: lowered through its impl
    assert seen and all(t is ad.UndefinedPrimal for t in seen)


def test_the_jaxpr_names():
    ir = ember.make_jaxpr(lambda x, y: F(x) * y + CUBE_P.bind(y, c=2.0))(X, np.float32(2.0))
    assert isinstance(ir, ext.ClosedJaxpr) and not isinstance(ir.jaxpr, ext.ClosedJaxpr)
    jaxpr = ir.jaxpr
    assert isinstance(jaxpr, ext.Jaxpr) and [v.aval for v in jaxpr.invars] == ir.in_avals
    prims = [e.primitive for e in jaxpr.eqns]
    assert CUBE_P in prims and TWIN_P in prims
    eqn = next(e for e in jaxpr.eqns if e.primitive is CUBE_P and e.params["c"] == 2.0)
    assert isinstance(eqn, ext.JaxprEqn) and eqn.invars == [jaxpr.invars[1]] and len(eqn.outvars) == 1
    assert all(isinstance(a, (ext.Var, ext.Literal)) for e in jaxpr.eqns for a in e.invars)
    want = np.asarray(F(X)) * 2 + 16
    closed = ext.ClosedJaxpr(jaxpr, ir.consts)
    assert isinstance(closed, ext.ClosedJaxpr)
    np.testing.assert_allclose(np.asarray(ext.jaxpr_as_fun(closed)(X, np.float32(2))[0]), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.core.eval_jaxpr(jaxpr, ir.consts, X, np.float32(2))[0]), want,
                               rtol=1e-6)
    # evaluated inside a transformation, as JAX's eval_jaxpr is
    g = ember.grad(lambda y: ember.core.eval_jaxpr(jaxpr, ir.consts, X, y)[0])(np.float32(2))
    np.testing.assert_allclose(float(g), float(F(X)) + 3 * 2.0 * 4, rtol=1e-6)
    assert "cube" in str(jaxpr) and ext.jaxprs_in_params({"a": (closed, 1)}) and not list(ext.subjaxprs(jaxpr))
    assert ext.mapped_aval(2, 0, ember.core.ShapedArray((2, 3), np.float32)).shape == (3,)
    assert ext.unmapped_aval(2, 1, ember.core.ShapedArray((3,), np.float32)).shape == (3, 2)
    assert ember.core.ShapedArray((2,), np.int32).to_tangent_aval().dtype == ember.dtypes.float0


def test_missing_rules_are_jax_errors():
    p = ext.Primitive("bare")
    with pytest.raises(NotImplementedError, match="Abstract evaluation for 'bare' not implemented"):
        ember.jit(lambda x: p.bind(x))(1.0)
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(NotImplementedError, match="MLIR translation rule for primitive 'bare' not found"):
        ember.jit(lambda x: p.bind(x))(1.0)
    p.def_impl(lambda x: x + 1)
    assert float(p.bind(1.0)) == 2.0 and float(ember.jit(lambda x: p.bind(x))(1.0)) == 2.0
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'bare' not implemented"):
        ember.grad(lambda x: p.bind(x))(1.0)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'bare' not implemented"):
        ember.jvp(lambda x: p.bind(x), (1.0,), (1.0,))
    with pytest.raises(NotImplementedError, match="Batching rule for 'bare' not implemented"):
        ember.vmap(lambda x: p.bind(x))(np.ones(2, np.float32))
    assert float(ember.vmap(lambda x: p.bind(2.0) * x)(np.ones(2, np.float32))[0]) == 3.0  # (unbatched: no rule)

    q = ext.Primitive("hand_written")
    q.def_abstract_eval(lambda x: x)
    mlir.register_lowering(q, lambda ctx, x: [x])  # (a rule of the module's values: here the identity)
    assert float(ember.jit(lambda x: q.bind(x))(1.5)) == 1.5
    r = ext.Primitive("bindings")
    r.def_abstract_eval(lambda x: x)
    mlir.register_lowering(r, lambda ctx, x: [x.owner.operation])  # (JAX's MLIR bindings, which ember has not)
    with pytest.raises(NotImplementedError, match="no MLIR Python bindings beyond mlir.emit_python_callback.*"
                                                  "mlir.lower_fun"):
        ember.jit(lambda x: r.bind(x))(1.0)
    with pytest.raises(TypeError, match="ember's own primitive"):
        mlir.register_lowering(ember.lax.sin_p, mlir.lower_fun(jnp.sin))


def test_platform_lowering_and_names_need_not_be_unique():
    a, b = ext.Primitive("same"), ext.Primitive("same")
    for p, k in ((a, 1.0), (b, 2.0)):
        p.def_abstract_eval(lambda x: x)
        mlir.register_lowering(p, mlir.lower_fun(lambda x, k=k: x + k, multiple_results=False))
    mlir.register_lowering(a, mlir.lower_fun(lambda x: x + 10.0, multiple_results=False), platform="cpu")
    mlir.register_lowering(b, mlir.lower_fun(lambda x: x + 20.0, multiple_results=False), platform="cuda")
    assert float(ember.jit(lambda x: a.bind(x) + b.bind(x))(0.0)) == 12.0  # a: cpu's rule; b: the generic one


def test_effectful_abstract_eval_keeps_the_equation():
    calls = []
    p = ext.Primitive("logged")

    class Logged(ext.Effect):
        pass

    p.def_impl(lambda x: calls.append(1) or x)
    p.def_effectful_abstract_eval(lambda x: (x, {Logged()}))
    mlir.register_lowering(p, mlir.lower_fun(lambda x: x, multiple_results=False))
    ir = ember.make_jaxpr(lambda x: (p.bind(x), x)[1])(1.0)
    assert p.effectful and any(e.primitive is p for e in ir.eqns)


def _symbolic_jvp(api, SymbolicZero):
    seen = []

    @api.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append((type(tx) is SymbolicZero, type(ty) is SymbolicZero))
        t = (0.0 if type(tx) is SymbolicZero else tx * y) + (0.0 if type(ty) is SymbolicZero else x * ty)
        return x * y, t
    f.defjvp(f_jvp, symbolic_zeros=True)
    out = api.jvp(lambda x: f(x, 3.0), (2.0,), (1.0,))
    return seen[-1], out[1]


def _symbolic_vjp(api, SymbolicZero, CustomVJPPrimal):
    seen = []

    @api.custom_vjp
    def f(x, y):
        return x * y, x + y

    def fwd(x, y):
        seen.append((type(x) is CustomVJPPrimal, x.perturbed, y.perturbed))
        return f(x.value, y.value), (x.value, y.value)

    def bwd(res, cts):
        x, y = res
        ca, cb = cts
        seen.append((type(ca) is SymbolicZero, type(cb) is SymbolicZero))
        return (SymbolicZero(api.typeof(x)) if type(ca) is SymbolicZero else ca * y, None)
    f.defvjp(fwd, bwd, symbolic_zeros=True)
    g = api.grad(lambda x: f(x, 3.0)[0])(2.0)
    return seen, g


def test_custom_rules_with_symbolic_zeros_as_jax():
    from ember.custom_derivatives import CustomVJPPrimal, SymbolicZero

    def on_jax():
        import jax
        from jax.custom_derivatives import CustomVJPPrimal as P, SymbolicZero as Z
        return _symbolic_jvp(jax, Z), _symbolic_vjp(jax, Z, P)
    (jvp_seen, jvp_t), (vjp_seen, g) = jax_result(on_jax)
    got_seen, got_t = _symbolic_jvp(ember, SymbolicZero)
    assert got_seen == tuple(jvp_seen) and float(got_t) == float(jvp_t)
    got_seen, got_g = _symbolic_vjp(ember, SymbolicZero, CustomVJPPrimal)
    assert [tuple(s) for s in got_seen] == [tuple(s) for s in vjp_seen] and float(got_g) == float(g)


def test_partial_evaluation_as_flax_uses_it():
    """lu.wrap_init + api_util.flatten_fun + pe.trace_to_jaxpr_nounits (flax's lazy_init): outputs that depend on
    known arguments alone are computed (known), the others typed (unknown), as JAX's."""
    from ember import api_util
    from ember.extend import linear_util as lu
    from ember.interpreters import partial_eval as pe

    def f(w, x, scale=2.0):
        return {"w2": w * scale, "y": x @ w, "n": jnp.sum(w) if float(jnp.sum(w)) > 0 else -jnp.sum(w)}

    w = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    leaves, in_tree = ember.tree_util.tree_flatten(((w, ember.ShapeDtypeStruct((3, 2), np.float32)), {}))
    debug = api_util.debug_info("lazy_init", f, (in_tree,), {})
    f_flat, out_tree = api_util.flatten_fun(lu.wrap_init(f, debug_info=debug), in_tree)
    pvals = [pe.PartialVal.unknown(ember.core.ShapedArray(x.shape, x.dtype))
             if isinstance(x, ember.ShapeDtypeStruct) else pe.PartialVal.known(x) for x in leaves]
    jaxpr, out_pvals, consts = pe.trace_to_jaxpr_nounits(f_flat, pvals)
    out = ember.tree_util.tree_unflatten(out_tree(), [p.get_known() if p.is_known() else p.get_aval()
                                                      for p in out_pvals])
    np.testing.assert_array_equal(np.asarray(out["w2"]), w * 2)
    assert float(out["n"]) == 6.0  # (Python control flow on a known value runs, as under JAX)
    assert out["y"] == ember.core.ShapedArray((3, 2), np.float32)
    assert "dot_general" in str(jaxpr) and debug.traced_for == "lazy_init" and "test_extend.py" in debug.func_src_info


def test_loops_keep_symbolic_zeros_for_unperturbed_carries():
    """As JAX's: in jvp of a while or scan, a carry without a tangent that the body does not make depend on one
    keeps a symbolic zero (a JVP rule inside sees ad.Zero): equinox's nondifferentiable markers rely on it."""
    p = ext.Primitive("must_not_be_perturbed")
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(p, mlir.lower_fun(lambda x: x, multiple_results=False))

    def jvp(primals, tangents):
        if type(tangents[0]) is not ad.Zero:
            raise RuntimeError("perturbed")
        return p.bind(*primals), tangents[0]
    ad.primitive_jvps[p] = jvp

    def body(c):
        i, x, y = c
        return i + 1, x * 2 + p.bind(y), y + 1.0

    def f_while(x, y):
        return ember.lax.while_loop(lambda c: c[0] < 3, body, (0, x, y))[1]

    def f_scan(x, y):
        return ember.lax.scan(lambda c, _: (body(c), None), (0, x, y), None, length=3)[0][1]
    for f in (f_while, f_scan):
        value, tangent = ember.jvp(lambda x: f(x, np.float32(0.5)), (np.float32(1.0),), (np.float32(1.0),))
        assert float(tangent) == 8.0 and float(value) == 8.0 + 0.5 * 4 + 1.5 * 2 + 2.5
        with pytest.raises(RuntimeError, match="perturbed"):  # (y perturbed: the rule sees its tangent)
            ember.jvp(lambda y: f(np.float32(1.0), y), (np.float32(0.5),), (np.float32(1.0),))


def _refusing_primitive():
    """identity(x), whose JVP rule refuses any tangent but a symbolic zero (equinox's nondifferentiable)."""
    p = ext.Primitive("refuses_tangents")
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(p, mlir.lower_fun(lambda x: x, multiple_results=False))
    batching.defvectorized(p)

    def jvp(primals, tangents):
        if type(tangents[0]) is not ad.Zero:
            raise RuntimeError("perturbed")
        return p.bind(*primals), tangents[0]
    ad.primitive_jvps[p] = jvp
    return p


def test_reverse_mode_asks_no_rule_for_what_loops_and_branches_leave_unperturbed():
    """As JAX's symbolic zeros in reverse mode: a result of a cond, while or scan that no differentiated input
    reaches (per carry and per branch result, not per equation) gets no cotangent, so a rule after it, or inside a
    loop's body on such a carry (a cond in a scan), is not asked for a derivative it refuses."""
    p = _refusing_primitive()
    lax = ember.lax

    def step(c):
        i, x, y = c
        return i + 1, x * 2 + p.bind(y), y + 1.0

    def after_cond(x, y):
        _, a, b = lax.cond(x < 5, lambda c: (c[0], c[1] * 2, c[2] + 1), lambda c: c, (0, x, y))
        return a + p.bind(b)

    def after_while(x, y):
        _, a, b = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2, c[2] + 1), (0, x, y))
        return a + p.bind(b)

    def cond_in_scan(x, y):  # (the cond's outputs all depend on its operands as one equation, not per result)
        body = lambda c, _: (lax.cond(c[0] < 5, step, lambda c: c, c), None)  # noqa: E731
        return lax.scan(body, (0, x, y), None, length=3)[0][1]

    def after_jit(x, y):
        _, a, b = ember.jit(lambda c: (c[0], c[1] * 2, c[2] + 1))((0, x, y))
        return a + p.bind(b)

    def cond_in_while(x, y):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: lax.cond(c[1] < 100, step, lambda c: c, c), (0, x, y))[1]
    x, y = np.float32(1.0), np.float32(0.5)
    for f, want in ((after_cond, 2.0), (after_while, 8.0), (after_jit, 2.0), (cond_in_scan, 8.0),
                    (cond_in_while, 8.0)):
        assert float(ember.grad(f)(x, y)) == want, f.__name__
        assert float(ember.jit(ember.grad(f))(x, y)) == want, f.__name__
        np.testing.assert_array_equal(ember.vmap(ember.grad(f), (0, None))(np.stack([x, x]), y), [want, want])
        with pytest.raises(RuntimeError, match="perturbed"):  # (differentiated along y: the rule is asked)
            ember.grad(f, argnums=1)(x, y)


def test_a_custom_jvp_rules_zero_tangents_stay_symbolic():
    """A custom_jvp call's output tangent that its rule gives as a SymbolicZero, or for an integer output (float0
    zeros), is a symbolic zero after it, as JAX's: a rule reading it sees ad.Zero (not an integer array), and in
    reverse mode a custom_vjp before it (and before a jit or a cond) gets a SymbolicZero cotangent for an output
    nothing differentiates."""
    from ember.custom_derivatives import SymbolicZero
    p = _refusing_primitive()

    @ember.custom_jvp
    def split(x):
        return x * 2, (x > 0).astype(np.int32), x

    def _split_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return split(x), (t * 2, np.zeros((), ember.dtypes.float0), SymbolicZero(ember.core.ShapedArray((), x.dtype)))
    split.defjvp(_split_jvp, symbolic_zeros=True)

    def f(x):
        a, n, c = split(x)
        return a * n + p.bind(c) + p.bind(n.astype(np.float32))
    assert float(ember.grad(f)(np.float32(1.5))) == 2.0
    assert float(ember.jvp(f, (np.float32(1.5),), (np.float32(1.0),))[1]) == 2.0
    np.testing.assert_array_equal(ember.vmap(ember.grad(f))(np.float32([1.5, -1.0])), [2.0, 0.0])

    def built(api, zero_type):
        seen = []

        @api.custom_vjp
        def g(x):
            return x

        def fwd(x):
            return api.tree_util.tree_map(lambda v: v.value, x), None

        def bwd(_, ct):
            seen.append(tuple(type(c) is zero_type for c in ct))
            return (tuple(api.numpy.zeros(()) if type(c) is zero_type else c for c in ct),)
        g.defvjp(fwd, bwd, symbolic_zeros=True)

        @api.custom_jvp
        def ident(x):
            return x
        ident.defjvp(lambda primals, tangents: (primals[0], tangents[0]))
        grads = []
        for after in (ident, api.jit(lambda t: t), lambda t: api.lax.cond(t[0] > 0, lambda t: t, lambda t: t, t)):
            grads += [float(v) for v in api.grad(lambda xs: after(g(xs))[0] * 3)((1.0, 2.0, 3.0))]
        return grads, seen

    def on_jax():
        import jax
        from jax.custom_derivatives import SymbolicZero as JZ
        return built(jax, JZ)
    want = jax_result(on_jax)
    got = built(ember, SymbolicZero)
    assert got[0] == list(want[0]) == [3.0, 0.0, 0.0] * 3
    assert [tuple(s) for s in got[1]] == [tuple(s) for s in want[1]] == [(False, True, True)] * 3


def test_a_loop_body_batched_with_a_rule_made_array_lowers():
    """A batching rule may make a concrete array (a custom_vmap rule's np.arange): the batched body of a loop then
    holds it as a constant, written into the program's region (its values bound to the loop's operands in order
    before, so an operand type mismatch XLA refused, or a wrong value where the types agreed)."""
    from ember.custom_batching import custom_vmap

    @custom_vmap
    def shift(x):
        return x + 1.0

    @shift.def_vmap
    def _shift_vmap(axis_size, in_batched, x):
        return x + jnp.asarray(np.arange(1.0, axis_size + 1.0, dtype=np.float32))[:, None], in_batched[0]

    def f(x):
        return ember.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, shift(c[1])), (0, x))[1]
    xs = np.zeros((4, 2), np.float32)
    want = 3 * np.arange(1.0, 5.0, dtype=np.float32)[:, None] + xs
    np.testing.assert_array_equal(ember.vmap(f)(xs), want)
    np.testing.assert_array_equal(ember.jit(ember.vmap(f))(xs), want)
    np.testing.assert_array_equal(ember.jit(ember.vmap(lambda x: ember.lax.scan(
        lambda c, _: (shift(c), None), x, None, length=3)[0]))(xs), want)


def test_reverse_mode_gives_a_custom_jvp_rule_symbolic_zeros_for_what_it_does_not_differentiate():
    """grad with respect to one argument: the custom_jvp rule (symbolic_zeros=True) sees a SymbolicZero for the
    other's tangent, as under JAX (equinox's nondifferentiable markers raise on anything else)."""
    from ember.custom_derivatives import SymbolicZero as EZ

    def build(api, zero_type):
        seen = []

        @api.custom_jvp
        def f(x, y):
            return x * y

        def rule(primals, tangents):
            seen.append(tuple(type(t) is zero_type for t in tangents))
            (x, y), (tx, ty) = primals, tangents
            t = (0.0 if type(tx) is zero_type else tx * y) + (0.0 if type(ty) is zero_type else x * ty)
            return x * y, t
        f.defjvp(rule, symbolic_zeros=True)
        return f, seen

    def on(api, zero_type):
        f, seen = build(api, zero_type)
        g = api.grad(f)(2.0, 3.0)
        return float(g), seen[-1]

    def on_jax():
        import jax
        from jax.custom_derivatives import SymbolicZero as JZ
        return on(jax, JZ)
    want_g, want_seen = jax_result(on_jax)
    got_g, got_seen = on(ember, EZ)
    assert got_g == want_g == 3.0 and tuple(got_seen) == tuple(want_seen) == (False, True)


def define_rule_makers(extend_core, core, ad, batching, mlir, jnp):
    """sine(x) by defjvp and defvectorized, sine2(x) by defjvp2, and mul(x, y) by defbilinear and defbroadcasting:
    the same definitions for JAX and for ember."""
    def unary(name, impl):
        p = extend_core.Primitive(name)
        p.def_impl(impl)
        p.def_abstract_eval(lambda x: core.ShapedArray(x.shape, x.dtype))
        mlir.register_lowering(p, mlir.lower_fun(impl, multiple_results=False))
        batching.defvectorized(p)
        return p
    sine = unary("sine", jnp.sin)
    ad.defjvp(sine, lambda g, x: g * jnp.cos(x))
    sine2 = unary("sine2", jnp.sin)
    ad.defjvp2(sine2, lambda g, ans, x: g * jnp.cos(x) + 0 * ans)

    mul = extend_core.Primitive("mul2")
    mul.def_impl(lambda x, y: x * y)
    mul.def_abstract_eval(lambda x, y: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(mul, mlir.lower_fun(lambda x, y: x * y, multiple_results=False))
    ad.defbilinear(mul, lambda ct, x, y: ct * y, lambda ct, x, y: x * ct)
    batching.defbroadcasting(mul)

    def f(x, y):
        return jnp.sum(mul.bind(sine.bind(x), sine2.bind(y)) ** 2)
    return f


def rule_makers_on(api, f):
    x, y = np.arange(1.0, 4.0, dtype=np.float32) / 4, np.arange(2.0, 5.0, dtype=np.float32) / 5
    xs = np.stack([x, 2 * x])
    return [f(x, y), api.grad(f, argnums=(0, 1))(x, y), api.jvp(f, (x, y), (np.ones(3, np.float32), y)),
            api.vmap(f, in_axes=(0, None))(xs, y), api.vmap(api.grad(f), in_axes=(None, 0))(x, xs),
            api.jit(api.hessian(f))(x, y)]


def test_the_rule_makers_match_jax():
    """ad.defjvp, defjvp2, defbilinear (its transposes), batching.defvectorized and defbroadcasting give what they
    give under JAX: value, grad, jvp, vmap (batched on either operand), vmap of grad and a jitted Hessian."""
    def on_jax():
        import jax
        from jax.interpreters import ad as jad, batching as jbatching, mlir as jmlir
        import jax.extend.core
        return rule_makers_on(jax, define_rule_makers(jax.extend.core, jax.core, jad, jbatching, jmlir, jax.numpy))
    want = jax_result(on_jax)
    got = rule_makers_on(ember, define_rule_makers(ext, ember.core, ad, batching, mlir, jnp))
    want, got = ember.tree_util.tree_leaves(want), ember.tree_util.tree_leaves(got)
    assert len(want) == len(got) == 8
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)


def define_host(extend_core, core, batching, mlir):
    """scaled_sin(x, k) = k sin(x), lowered as a host callback with mlir.emit_python_callback (as equinox's noinline
    lowers its calls), batched by a rule that reads its scalar operand k (a constant in place in ember's IR)."""
    scaled_sin_p = extend_core.Primitive("scaled_sin")

    def host(x, k):
        return [(np.sin(x) * k).astype(x.dtype)]

    def lowering(ctx, x, k):
        results, _, keepalive = mlir.emit_python_callback(ctx, host, None, [x, k], ctx.avals_in, ctx.avals_out,
                                                          has_side_effect=False, sharding=None)
        ctx.module_context.add_keepalive(keepalive)
        return results
    scaled_sin_p.def_impl(lambda x, k: host(np.asarray(x), np.asarray(k))[0])
    scaled_sin_p.def_abstract_eval(lambda x, k: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(scaled_sin_p, lowering)

    def batch(args, dims):
        x, k = args
        assert dims[1] is None and int(np.asarray(k)) == 3, (k, dims)  # (k as a value, not an IR atom)
        return scaled_sin_p.bind(x, k), dims[0]
    batching.primitive_batchers[scaled_sin_p] = batch
    return lambda x: scaled_sin_p.bind(x, np.float32(3))


def test_a_lowering_that_emits_a_python_callback_as_jax():
    """A lowering rule of (ctx, *operands) in JAX's form, emitting a host callback (mlir.emit_python_callback):
    under jit, vmap and jit of vmap, as JAX's; a rule using other MLIR bindings is refused (test above)."""
    f = define_host(ext, ember.core, batching, mlir)
    runs = {"jit": lambda api, g: api.jit(g)(X), "vmap": lambda api, g: api.vmap(api.jit(g))(XS),
            "jit_vmap": lambda api, g: api.jit(api.vmap(g))(XS)}

    def on_jax():
        import jax
        import jax.extend.core
        from jax.interpreters import batching as jbatching, mlir as jmlir
        g = define_host(jax.extend.core, jax.core, jbatching, jmlir)
        return {name: np.asarray(run(jax, g)) for name, run in runs.items()}
    want = jax_result(on_jax)
    for name, run in runs.items():
        np.testing.assert_allclose(np.asarray(run(ember, f)), want[name], rtol=1e-6)
        np.testing.assert_allclose(want[name], 3 * np.sin(X if name == "jit" else XS), rtol=1e-6)


def test_a_custom_jvp_call_under_vmap_keeps_an_unbatched_argument_unbatched():
    """As JAX's: vmap of a custom_jvp function batches only the arguments that are batched, so a predicate made
    the same for every member (equinox's unvmap_any in error_if) still picks one branch of a cond inside, and the
    branch not taken (a callback that raises) does not run; its rule's tangents are batched alike."""
    def boom(x):
        raise RuntimeError("the branch not taken ran")

    @ember.custom_jvp
    def guarded(x, flag):
        return ember.lax.cond(flag, lambda x: ember.pure_callback(boom, ember.ShapeDtypeStruct((), np.float32), x,
                                                                      vmap_method="sequential"),
                              lambda x: x * 3, x)

    @guarded.defjvp
    def _guarded_jvp(primals, tangents):
        (x, flag), (t, _) = primals, tangents
        return guarded(x, flag), t * 10

    xs = np.float32([1.0, 2.0])
    off = np.bool_(False)
    np.testing.assert_array_equal(ember.vmap(guarded, (0, None))(xs, off), [3.0, 6.0])
    np.testing.assert_array_equal(ember.jit(ember.vmap(guarded, (0, None)))(xs, off), [3.0, 6.0])
    np.testing.assert_array_equal(ember.vmap(ember.grad(guarded), (0, None))(xs, off), [10.0, 10.0])
    _, t = ember.jvp(lambda x: ember.vmap(guarded, (0, None))(x, off), (xs,), (np.float32([1.0, 2.0]),))
    np.testing.assert_array_equal(t, [10.0, 20.0])
    with pytest.raises(Exception, match="the branch not taken ran"):  # (taken, it runs)
        ember.vmap(guarded, (0, None))(xs, np.bool_(True))


def test_rules_get_tuples_and_run_in_jaxs_order():
    """A JAX-defined primitive's batching and JVP rules get their operands, dims and tangents as tuples (JAX's
    traces give tuples; equinox passes them on as a vmap's in_axes and out_axes, tree prefixes of tuples), and in
    reverse mode a custom_jvp rule runs where JAX's linearization runs it, before what comes after it."""
    p = ext.Primitive("sees_tuples")
    p.def_impl(lambda x: x * 2)
    p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(p, mlir.lower_fun(lambda x: x * 2, multiple_results=False))
    kinds = set()

    def jvp(primals, tangents):
        kinds.add(("jvp", type(primals), type(tangents)))
        return p.bind(*primals), tangents[0] * 2

    def batch(args, dims):
        kinds.add(("batching", type(args), type(dims)))
        return ember.vmap(lambda a: a * 2, in_axes=dims, out_axes=dims[0])(*args), dims[0]
    ad.primitive_jvps[p] = jvp
    batching.primitive_batchers[p] = batch
    xs = np.float32([1.0, 2.0])
    value, grad = ember.vmap(ember.value_and_grad(lambda x: p.bind(x)))(xs)
    np.testing.assert_array_equal(value, [2.0, 4.0])
    np.testing.assert_array_equal(grad, [2.0, 2.0])
    assert kinds == {("jvp", tuple, tuple), ("batching", tuple, tuple)}

    order = []

    @ember.custom_jvp
    def first(x):
        return x

    @first.defjvp
    def _first_jvp(primals, tangents):
        order.append("first's jvp rule")
        return primals[0], tangents[0]

    @ember.custom_vjp
    def second(x):
        return x

    def _second_fwd(x):
        order.append("second's fwd")
        return x, None
    second.defvjp(_second_fwd, lambda _, ct: (ct,))
    assert float(ember.grad(lambda x: second(first(x)))(np.float32(1.0))) == 1.0
    assert order == ["first's jvp rule", "second's fwd"]


def test_a_custom_jvp_equation_bound_again_as_jax():
    """get_bind_params of a custom_jvp call's equation gives JAX 0.10's `subfuns`: the function and the lifted rule
    as wrapped functions (equinox's finalisation calls them), and binding the equation again with those params gives
    its value, as under JAX."""
    def on(api):
        @api.custom_jvp
        def f(x, y):
            return api.numpy.sin(x) * y

        @f.defjvp
        def _f_jvp(primals, tangents):
            (x, y), (tx, ty) = primals, tangents
            return f(x, y), api.numpy.cos(x) * y * tx + api.numpy.sin(x) * ty

        x, y = np.float32(0.5), np.float32(2.0)
        (eqn,) = [e for e in api.make_jaxpr(f)(x, y).jaxpr.eqns if "custom_jvp" in str(e.primitive)]
        params = eqn.primitive.get_bind_params(eqn.params)
        fun, jvp = params["subfuns"]
        again = eqn.primitive.bind(x, y, **params)
        return ([float(v) for v in fun.call_wrapped(x, y)], [float(v) for v in jvp.call_wrapped(x, y, np.float32(1.0), np.float32(0.0))],
                [float(v) for v in again])

    def on_jax():
        import jax
        return on(jax)
    want = jax_result(on_jax)
    got = on(ember)
    np.testing.assert_allclose(np.concatenate([np.ravel(g) for g in got]),
                               np.concatenate([np.ravel(w) for w in want]), rtol=1e-6)
