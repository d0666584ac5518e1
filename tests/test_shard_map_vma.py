"""shard_map bodies typed by their varying manual axes (check_vma=True, JAX's default; ember/_core/vma.py), against
JAX 0.10.2 on a mesh of the same shape (ember's two CPU devices, the first two of JAX's): the gradient of a
replicated parameter inside a body sums the devices' contributions (the issue: one device's gradient was returned),
the types every collective gives (typeof(x).vma, printed f32[2]{V:x}), implicit casts and their transposes, grad /
jvp / vmap inside and outside bodies, loops and branches in bodies, JAX's errors (out_specs that claim
replication, loop carries and branches of different types, custom_vjp cotangents), check_vma=False's values, and
the type checker. Where JAX types a result wrongly (a cond or while_loop whose predicate varies: JAX types its
result by the branches alone), ember's typed result is checked against the same function computed block by block.
Programs over a 2x2 mesh (several typed axes) and axis_index_groups run in a process of four devices,
test_four_devices."""
import textwrap
import types

import numpy as np
import pytest

import ember
from recorded import jax_result
from reliability.subproc import check_python

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

if len(ember.devices()) < 2:  # (tests/conftest.py asks for two)
    pytest.skip("needs two CPU devices", allow_module_level=True)

X = np.linspace(-1, 1, 32).astype(np.float32).reshape(8, 4)
W = np.linspace(-0.5, 1, 12).astype(np.float32).reshape(4, 3)


def _lib(which: str) -> types.SimpleNamespace:
    """ember's or JAX's modules, and a one-axis mesh "x" of two devices."""
    if which == "jax":
        import jax
        import jax.numpy as jnp
        return types.SimpleNamespace(lib=jax, jnp=jnp, lax=jax.lax, P=jax.P,
                                     mesh=jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",)))
    import ember.numpy as ejnp
    return types.SimpleNamespace(lib=ember, jnp=ejnp, lax=ember.lax, P=ember.P,
                                 mesh=ember.sharding.Mesh(np.array(ember.devices()[:2]), ("x",)))


def _same(program, rtol=2e-5, atol=1e-6):
    """program(which) on ember equals it on JAX (values, pytrees of them)."""
    import jax
    want = jax_result(lambda: program("jax"))
    got = program("ember")
    jax.tree_util.tree_map(lambda w, g: np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol), want, got)
    return got


def test_gradient_of_a_replicated_parameter_inside_a_body():
    """The issue's program: the data-parallel gradient of JAX's shard_map documentation. The parameter is the same
    on every device; it meets a varying batch (an implicit pcast), whose transpose sums the devices' gradients."""
    x = np.arange(8.0, dtype=np.float32).reshape(8, 1)

    def program(which, reduce="pmean", check_vma=True):
        L = _lib(which)

        def local(p, x):
            return L.lib.grad(lambda p: getattr(L.lax, reduce)(((x * p) ** 2).sum(), "x"))(p)
        f = L.lib.jit(L.lib.shard_map(local, mesh=L.mesh, in_specs=(L.P(), L.P("x")), out_specs=L.P(),
                                      check_vma=check_vma))
        return f(1.0, x)
    assert float(_same(program)) == 2 * (x ** 2).sum() / 2  # the full batch's gradient, averaged over the devices
    assert float(_same(lambda w: program(w, "psum"))) == 2 * (x ** 2).sum()
    # without the types JAX's values are those of check_vma=False: the first device's gradient
    assert float(_same(lambda w: program(w, check_vma=False))) == 2 * (x[:4] ** 2).sum()
    # the gradient of the local loss, no collective: still the sum of the devices' (JAX's typing)
    got = _same(lambda w: _lib(w).lib.shard_map(
        lambda p, x: _lib(w).lib.grad(lambda p: ((x * p) ** 2).sum())(p), mesh=_lib(w).mesh,
        in_specs=(_lib(w).P(), _lib(w).P("x")), out_specs=_lib(w).P())(1.0, x))
    assert float(got) == 2 * (x ** 2).sum()


def test_types_in_a_body_and_the_staged_program():
    L = _lib("ember")
    seen = {}

    def body(p, u):
        seen["p"], seen["u"], seen["pu"] = L.lib.typeof(p), L.lib.typeof(u), L.lib.typeof(u * p)
        total = L.lax.psum(u, "x")
        seen["psum"], seen["index"] = L.lib.typeof(total), L.lib.typeof(L.lax.axis_index("x"))
        seen["gather"] = L.lib.typeof(L.lax.all_gather(u, "x"))
        seen["gather_inv"] = L.lib.typeof(L.lax.all_gather(u, "x", to="invarying"))
        seen["pcast"] = L.lib.typeof(L.lax.pcast(p, "x", to="varying"))
        seen["pbroadcast"] = L.lib.typeof(L.lax.pbroadcast(u, "x", 1))
        seen["zeros"] = L.lib.typeof(L.jnp.zeros(3))
        return total
    L.lib.shard_map(body, mesh=L.mesh, in_specs=(L.P(), L.P("x")), out_specs=L.P())(W[:, 0], X)
    assert {k: str(v) for k, v in seen.items()} == {
        "p": "float32[4]", "u": "float32[4,4]{V:x}", "pu": "float32[4,4]{V:x}", "psum": "float32[4,4]",
        "index": "int32[]{V:x}", "gather": "float32[2,4,4]{V:x}", "gather_inv": "float32[2,4,4]",
        "pcast": "float32[4]{V:x}", "pbroadcast": "float32[4,4]{V:x}", "zeros": "float32[3]"}
    assert seen["u"].vma == {"x"} and seen["u"].mat.varying == {"x"} and not seen["p"].vma
    # as JAX's: the same types, printed alike

    def jax_types():
        J = _lib("jax")
        out = []

        def body(p, u):
            for v in (p, u, u * p, J.lax.psum(u, "x"), J.lax.axis_index("x"), J.lax.all_gather(u, "x"),
                      J.lax.all_gather(u, "x", to="invarying"), J.lax.pcast(p, "x", to="varying"), J.jnp.zeros(3)):
                out.append(str(J.lib.typeof(v)))
            return J.lax.psum(u, "x")
        J.lib.shard_map(body, mesh=J.mesh, in_specs=(J.P(), J.P("x")), out_specs=J.P())(W[:, 0], X)
        return out
    assert jax_result(jax_types) == [str(seen[k]) for k in ("p", "u", "pu", "psum", "index", "gather", "gather_inv",
                                                           "pcast", "zeros")]
    # the staged program prints the types and the casts; the type checker checks them
    ir = ember.make_ir(L.lib.shard_map(lambda p, u: L.lax.psum(u * p, "x"), mesh=L.mesh, in_specs=(L.P(), L.P("x")),
                                       out_specs=L.P()))(W[0], X[:, :3])
    text = str(ir)
    assert "b:f32[4,3]{V:x}" in text and "pvary[axes=('x',)]" in text and "psum[axes=('x',)]" in text
    ember.check_ir(ir)
    grad_text = str(ember.make_ir(ember.grad(lambda p: ember.shard_map(
        lambda p, u: L.lax.psum((u * p).sum(), "x"), mesh=L.mesh, in_specs=(L.P(), L.P("x")), out_specs=L.P())(
        p, X[:, :3])))(W[0]))
    assert grad_text.count("psum[axes=('x',)]") == 1 and "pvary" in grad_text  # (the cast's transpose; the
    # forward psum's is a pcast, and the forward itself is not needed)


def test_the_type_checker_refuses_operands_varying_alike_only_by_accident():
    from ember._core import IR, Eqn, Var
    from ember._core import dtypes as dt
    from ember._prims.elementwise import mul_p
    a, b = Var(ember.ShapedArray((3,), dt.float32, vma=frozenset({"x"}))), Var(ember.ShapedArray((3,), dt.float32))
    out = Var(ember.ShapedArray((3,), dt.float32, vma=frozenset({"x"})))
    with pytest.raises(ember.IRTypeError, match="requires varying manual axes to match"):
        ember.check_ir(IR([], [], [a, b], [Eqn(mul_p, [a, b], [out], {})], [out]))


def test_collectives_under_grad_jvp_and_vmap():
    """Every collective in one typed body; its gradient (psum transposing to pcast, pcast to psum), JVP and vmap,
    inside and outside the body, as JAX's."""
    def program(which, what):
        L = _lib(which)
        lax, jnp, P = L.lax, L.jnp, L.P

        def body(u, p):
            total = lax.psum(u * p, "x")
            gathered = lax.all_gather(u, "x", tiled=True)
            scattered = lax.psum_scatter(gathered * 2, "x", scatter_dimension=0, tiled=True)
            swapped = lax.ppermute(u, "x", [(0, 1), (1, 0)])
            moved = lax.all_to_all(u, "x", 1, 0, tiled=True)
            mean = lax.pmean(jnp.sin(u), "x")
            return total * lax.axis_index("x") + mean + scattered + swapped * p + moved.reshape(u.shape)

        f = L.lib.shard_map(body, mesh=L.mesh, in_specs=(P("x"), P()), out_specs=P("x"))
        p = np.linspace(1, 2, 4).astype(np.float32)
        if what == "value":
            return L.lib.jit(f)(X, p)
        if what == "grad":
            return L.lib.grad(lambda u, p: (f(u, p) ** 2).sum(), argnums=(0, 1))(X, p)
        if what == "jvp":
            return L.lib.jvp(f, (X, p), (np.cos(X), np.ones_like(p)))
        if what == "vmap":
            return L.lib.vmap(f, (None, 0))(X, np.stack([p, 2 * p]))
        inside = L.lib.shard_map(lambda u, p: L.lib.grad(lambda p: lax.psum((body(u, p) ** 2).sum(), "x"))(p),
                                 mesh=L.mesh, in_specs=(P("x"), P()), out_specs=P())
        if what == "grad inside":
            return inside(X, p)
        return L.lib.shard_map(lambda u, p: L.lib.vmap(lambda q: lax.psum(body(u, q).sum(), "x"))(
            jnp.stack([p, p * 2])), mesh=L.mesh, in_specs=(P("x"), P()), out_specs=P())(X, p)
    for what in ("value", "grad", "jvp", "vmap", "grad inside", "vmap inside"):
        _same(lambda which: program(which, what), rtol=1e-4, atol=1e-5)


def test_pmax_and_the_invariant_gather_differentiate():
    """pmax makes a value invariant (JAX has no derivative rule for it: the oracle is the same function without
    shard_map); all_gather(to='invarying') transposes to each device's slice of the cotangent."""
    L = _lib("ember")
    f = L.lib.shard_map(lambda u: L.lax.pmax(u, "x") * L.lax.all_gather(u, "x", tiled=True, to="invarying")[:4],
                        mesh=L.mesh, in_specs=L.P("x"), out_specs=L.P())

    def reference(u):
        import jax.numpy as jnp
        return jnp.maximum(u[:4], u[4:]) * u[:4]
    import jax
    want = jax_result(lambda: jax.grad(lambda u: (reference(u) ** 2).sum())(X))
    np.testing.assert_allclose(np.asarray(ember.grad(lambda u: (f(u) ** 2).sum())(X)), want, rtol=1e-5)


def test_loops_and_branches_in_a_body():
    def program(which, what):
        L = _lib(which)
        lax, jnp, P = L.lax, L.jnp, L.P

        def body(w, u, with_while=True):
            def step(c, r):
                a, b = c
                return (a * jnp.cos(r @ w), b * 1.5 + jnp.sin(w).sum()), (a * b).sum()
            (a, b), ys = lax.scan(step, (lax.pcast(jnp.ones(3), "x", to="varying"), jnp.ones(())), u)
            branch = lax.cond(w[0, 0] > 0, lambda v: jnp.sin(v @ w), lambda v: (v @ w) ** 2, u)
            total = a.sum() + ys.sum() + branch.sum()
            if with_while:  # (a while_loop: JAX has no reverse mode through it)
                total = total + lax.fori_loop(0, jnp.asarray(2), lambda i, c: c * jnp.tanh(u[i] @ w),
                                              lax.pcast(jnp.ones(3), "x", to="varying")).sum()
            return lax.psum(total, "x") + b

        def f(w, with_while=True):
            return L.lib.shard_map(lambda w, u: body(w, u, with_while), mesh=L.mesh, in_specs=(P(), P("x")),
                                   out_specs=P())(w, X)
        if what == "grad":
            return L.lib.jit(L.lib.grad(lambda w: f(w, False)))(W)
        if what == "jvp":
            return L.lib.jvp(f, (W,), (np.cos(W),))
        if what == "vmap":
            return L.lib.vmap(f)(np.stack([W, -W]))
        return L.lib.shard_map(lambda w, u: L.lib.grad(lambda w: body(w, u, False))(w), mesh=L.mesh,
                               in_specs=(P(), P("x")), out_specs=P())(-W, X)
    for what in ("grad", "jvp", "vmap", "grad inside"):
        _same(lambda which: program(which, what), rtol=1e-4, atol=1e-5)
    # reverse mode through the while_loop in a body too (beyond JAX): against finite differences
    L = _lib("ember")

    def looped(w):
        return L.lib.shard_map(lambda w, u: L.lax.psum(L.lax.fori_loop(
            0, L.jnp.asarray(2), lambda i, c: c * L.jnp.tanh(u[i] @ w), L.lax.pcast(L.jnp.ones(3), "x",
                                                                                   to="varying")).sum(), "x"),
            mesh=L.mesh, in_specs=(L.P(), L.P("x")), out_specs=L.P())(w, X)
    e = np.zeros_like(W)
    e[1, 2] = 1e-2
    numeric = (float(looped(W + e)) - float(looped(W - e))) / 2e-2
    np.testing.assert_allclose(float(np.asarray(ember.grad(looped)(W))[1, 2]), numeric, rtol=1e-2)


def test_jax_errors():
    def error(which, what):
        L = _lib(which)
        lax, jnp, P = L.lax, L.jnp, L.P
        try:
            if what == "out_specs":
                L.lib.shard_map(lambda u: u * 2, mesh=L.mesh, in_specs=P("x"), out_specs=P())(X)
            elif what == "scan":  # the tutorial's carry swap: a varying and an invariant carry change places
                L.lib.shard_map(lambda u, v: lax.scan(lambda c, _: ((c[1], c[0]), ()), (u, v), (), length=2)[0],
                                mesh=L.mesh, in_specs=(P("x"), P()), out_specs=P("x"))(X, X[:4])
            elif what == "while":
                L.lib.shard_map(lambda u: lax.while_loop(lambda c: c[0, 0] < 3, lambda c: c + u, jnp.zeros((4, 4))),
                                mesh=L.mesh, in_specs=P("x"), out_specs=P("x"))(X)
            elif what == "cond":
                L.lib.shard_map(lambda p, u: lax.cond(p[0] > 0, lambda: u[0], lambda: jnp.zeros(4)), mesh=L.mesh,
                                in_specs=(P(), P("x")), out_specs=P("x"))(W[0], X)
            elif what == "pcast":
                L.lib.shard_map(lambda u: lax.pcast(u, "x", to="varying"), mesh=L.mesh, in_specs=P("x"),
                                out_specs=P("x"))(X)
        except (TypeError, ValueError) as err:
            return type(err).__name__ + ": " + str(err).replace("float32", "f32").replace("jax.lax", "ember.lax")
        return "no error"
    for what, key in [
            ("out_specs", "out_specs is P() which implies that the corresponding output value is replicated across "
                          "mesh axis 'x', but could not infer replication over any axes"),
            ("scan", "scan body function carry input and carry output must have equal types, but they differ"),
            ("while", "while_loop body function carry input and carry output must have equal types"),
            ("cond", "cond branches must have equal output types but they differ"),
            ("pcast", "Unsupported pcast from=varying, to='varying'")]:
        want, got = jax_result(lambda: error("jax", what)), error("ember", what)
        assert want.split(":")[0] == got.split(":")[0] and key in want and key in got, (what, want, got)
    assert "applying `ember.lax.pcast(..., ('x',), to='varying')`, to the initial carry value" in error("ember", "scan")
    assert "manual axis types do not match" in error("ember", "cond")


def test_custom_vjp_cotangents_keep_their_types():
    """A custom_vjp's bwd must give a replicated input a replicated cotangent (JAX's ValueError otherwise); one
    that psums its contribution gives JAX's gradient."""
    def program(which, reduce):
        L = _lib(which)

        @L.lib.custom_vjp
        def scale(p, u):
            return p * u

        def bwd(res, g):
            ct = (g * res[1]).sum(0)
            return (L.lax.psum(ct, "x") if reduce else ct), g * res[0]
        scale.defvjp(lambda p, u: (p * u, (p, u)), bwd)
        f = L.lib.shard_map(lambda p, u: L.lax.psum(scale(p, u).sum(), "x"), mesh=L.mesh,
                            in_specs=(L.P(), L.P("x")), out_specs=L.P())
        try:
            return L.lib.grad(f)(W[:, 0], X)
        except ValueError as err:
            return str(err)
    _same(lambda which: program(which, True))
    want, got = jax_result(lambda: program("jax", False)), program("ember", False)
    assert "Custom VJP bwd rule must produce an output with the same type" in want
    assert "Custom VJP bwd rule must produce an output with the same type" in got and "{V:x}" in got


def test_a_varying_predicate_makes_every_result_vary():
    """Devices along an axis the predicate varies over may take different branches (or stop a loop at different
    steps), so ember types the results as varying too (JAX types them by the branches alone: out_specs=P() then
    returns one device's value without an error). Checked against the function computed block by block."""
    L = _lib("ember")
    lax, jnp, P = L.lax, L.jnp, L.P

    def body(p, u):  # p replicated: both branches alone are the same on every device
        picked = lax.cond(u[0, 0] > 0, lambda: jnp.sin(p), lambda: jnp.cos(p) * 2)
        looped = lax.while_loop(lambda c: c[0] < u[0, 0] + 1.5, lambda c: c + p * 0.5, jnp.zeros(3))
        return picked * looped
    f = L.lib.shard_map(body, mesh=L.mesh, in_specs=(P(), P("x")), out_specs=P("x"))
    p = np.float32([0.7, 1.1, 0.9])

    def reference(p):
        import jax.numpy as jnp
        out = []
        for u in (X[:4], X[4:]):
            picked = jnp.sin(p) if u[0, 0] > 0 else jnp.cos(p) * 2
            c = jnp.zeros(3)
            while c[0] < u[0, 0] + 1.5:
                c = c + p * 0.5
            out.append(picked * c)
        return jnp.concatenate(out)
    import jax
    np.testing.assert_allclose(np.asarray(f(p, X)), np.asarray(reference(p)), rtol=1e-6)
    want = jax_result(lambda: jax.grad(lambda p: (reference(p) * np.arange(6)).sum())(p))
    np.testing.assert_allclose(np.asarray(ember.grad(lambda p: (f(p, X) * np.arange(6)).sum())(p)), want, rtol=1e-5)
    with pytest.raises(ValueError, match="could not infer replication"):
        ember.shard_map(body, mesh=L.mesh, in_specs=(P(), P("x")), out_specs=P())(p, X)


@pytest.mark.slow  # (6 s; two devices by default)
def test_four_devices():
    """In a process of its own with four devices, against JAX: a 2x2 mesh (values varying over one axis, both, or
    none; psum over one axis; gradients of parameters split over one axis and replicated over the other; the
    out_specs error), and collectives within groups of an axis's members (axis_index_groups: values and gradients
    of psum, pmean, all_gather, psum_scatter and all_to_all over interleaved groups, against JAX's
    check_vma=False, since JAX refuses groups in psum with check_vma=True; ember types a grouped sum as still
    varying, so its gradient is the same either way; pmax's value)."""
    code = textwrap.dedent("""
        import numpy as np, jax, ember
        X = np.linspace(-1, 1, 32).astype(np.float32).reshape(8, 4)
        def two_axes(L, P, mesh):
            types = []
            def body(p, q, u):
                y = L.lax.psum(u * q, "b")
                types.extend(str(L.typeof(v)).replace("float32", "f32") for v in (p, q, u, y, u * p,
                             L.lax.psum(u, ("a", "b"))))
                return L.lax.psum((y * p).sum(1, keepdims=True), "a")
            f = L.shard_map(body, mesh=mesh, in_specs=(P(), P("a"), P("a", "b")), out_specs=P())
            q = np.linspace(1, 2, 8).astype(np.float32)[:, None]
            grads = L.grad(lambda p, q: f(p, q, X).sum(), argnums=(0, 1))(np.float32(1.5), q)
            wrong = None
            try:
                L.shard_map(lambda u: L.lax.psum(u, "b"), mesh=mesh, in_specs=P("a", "b"), out_specs=P("b"))(X)
            except ValueError as err:
                wrong = str(err).split("\\n\\n")[2]
            return types, [np.asarray(g) for g in grads], wrong
        e = two_axes(ember, ember.P, ember.sharding.Mesh(np.array(ember.devices()).reshape(2, 2), ("a", "b")))
        j = two_axes(jax, jax.P, jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b")))
        assert e[0] == j[0], (e[0], j[0])
        for a, b in zip(e[1], j[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5)
        assert e[2] == j[2], (e[2], j[2])

        def grouped(L, P, mesh, check_vma, groups):
            lax = L.lax
            def body(u):
                s = lax.psum(u, "i", axis_index_groups=groups)
                m = lax.pmean(u * 2, "i", axis_index_groups=groups)
                g = lax.all_gather(u, "i", axis_index_groups=groups, tiled=True)
                r = lax.psum_scatter(g, "i", axis_index_groups=groups, tiled=True)
                a = lax.all_to_all(u, "i", 0, 0, axis_index_groups=groups, tiled=True)
                return s * m + r + a * u
            f = L.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"), check_vma=check_vma)
            top = L.shard_map(lambda u: lax.pmax(u, "i", axis_index_groups=groups), mesh=mesh, in_specs=P("i"),
                              out_specs=P("i"), check_vma=check_vma)
            return (np.asarray(L.jit(f)(X)), np.asarray(L.grad(lambda u: (f(u) ** 2).sum())(X)),
                    np.asarray(top(X)))
        emesh = ember.sharding.Mesh(np.array(ember.devices()), ("i",))
        jmesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
        groups = [[0, 2], [1, 3]]
        want = grouped(jax, jax.P, jmesh, False, groups)
        for check_vma in (True, False):
            for a, b in zip(grouped(ember, ember.P, emesh, check_vma, groups), want):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        try:
            ember.shard_map(lambda u: ember.lax.psum(u, "i", axis_index_groups=[[0, 1], [1, 2, 3]]), mesh=emesh,
                            in_specs=ember.P("i"), out_specs=ember.P("i"))(X)
        except ValueError as err:
            assert "cover all indices exactly once" in str(err), err
        else:
            raise AssertionError("overlapping groups accepted")
        print("ok", e[0])
    """)
    out = check_python(code, env={"EMBER_NUM_CPU_DEVICES": "4", "JAX_NUM_CPU_DEVICES": "4"})
    assert out.strip().splitlines()[-1].startswith("ok")
