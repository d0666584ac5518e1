"""ember.experimental.roofline against jax.experimental.roofline (JAX 0.10.2): the same functions through both,
compared field by field, where both stage the same equations; where ember's IR differs (its reverse mode, its
full-shape broadcasts), the counts that do not depend on it (the matmuls' flops and bytes) are compared."""
import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import roofline as jroof

import ember
import ember.numpy as enp
from ember import lax as elax
from ember.experimental import roofline as eroof

FIELDS = [f.name for f in dataclasses.fields(jroof.RooflineResult)]


def both(fn, *shapes, dtype=np.float32, **kw):
    """(ember's result, JAX's) for fn(np, lax) at ShapeDtypeStructs of shapes."""
    e_args = [ember.ShapeDtypeStruct(s, dtype) for s in shapes]
    j_args = [jax.ShapeDtypeStruct(s, dtype) for s in shapes]
    return eroof.roofline(fn(enp, ember.lax), **kw)(*e_args)[1], jroof.roofline(fn(jnp, jax.lax), **kw)(*j_args)[1]


def assert_same(e, j, fields=FIELDS):
    for name in fields:
        assert getattr(e, name) == getattr(j, name), (name, e, j)


def test_public_names_and_signatures():
    public = {n for n in dir(jroof) if not n.startswith("_")}
    assert public <= set(dir(eroof))
    for name in ("roofline", "roofline_and_grad", "register_roofline", "register_standard_roofline"):
        assert list(inspect.signature(getattr(eroof, name)).parameters) == \
            list(inspect.signature(getattr(jroof, name)).parameters)
        for p, q in zip(inspect.signature(getattr(eroof, name)).parameters.values(),
                        inspect.signature(getattr(jroof, name)).parameters.values()):
            assert (p.kind, p.default) == (q.kind, q.default), (name, p, q)
    for cls in ("RooflineResult", "RooflineRuleContext", "RooflineShape"):
        fields = lambda c: [(f.name, f.default) for f in dataclasses.fields(c)]  # noqa: E731
        assert fields(getattr(eroof, cls)) == fields(getattr(jroof, cls))


def test_result_arithmetic():
    a = eroof.RooflineResult(flops=3, ici_bytes={"x": 2}, peak_hbm_bytes=5)
    b = eroof.RooflineResult(flops=4, ici_bytes={"x": 1, "y": 7}, peak_hbm_bytes=9)
    assert a + b == eroof.RooflineResult(flops=7, ici_bytes={"x": 3, "y": 7}, peak_hbm_bytes=9)
    assert 0.5 * b == eroof.RooflineResult(flops=2, ici_bytes={"x": 0, "y": 3}, peak_hbm_bytes=4)
    assert eroof.RooflineShape(shape=(3, 4), dtype=np.dtype(np.float16)).bytes == 24


UNARY = ["exp", "log", "sin", "cos", "tan", "sqrt", "abs", "negative", "floor", "tanh", "arctan", "expm1",
         "log1p", "sinh", "cosh", "arcsin", "cbrt", "square", "sign", "exp2", "arcsinh"]


def test_unary():
    # (JAX counts tanh, exp2 and arcsinh as nothing: so does ember)
    for name in UNARY:
        assert_same(*both(lambda np_, lax: getattr(np_, name), (8, 16)))
    assert both(lambda np_, lax: np_.exp, (8, 16))[0].unfused_flops == 8 * 16


def test_binary():
    for name in ["add", "subtract", "multiply", "divide", "maximum", "minimum", "less", "equal", "power",
                 "arctan2"]:
        assert_same(*both(lambda np_, lax: getattr(np_, name), (8, 16), (8, 16)))
    # (lax.rem: jnp.remainder is a composition that ember and JAX stage differently)
    assert_same(*both(lambda np_, lax: lax.rem, (8, 16), (8, 16)))
    # (a broadcast operand: staged at full shape by both here)
    assert_same(*both(lambda np_, lax: lambda x, y: x * y, (8, 16), (16,)), ["flops", "unfused_flops"])


def test_special_and_select():
    assert_same(*both(lambda np_, lax: lambda x: lax.erf(x) + lax.lgamma(x) * lax.logistic(x), (5, 6)))
    assert_same(*both(lambda np_, lax: lambda x, y: np_.where(x > 0, x, y), (5, 6), (5, 6)))


def test_matmul():
    for (m, k), n, batch in [((8, 16), 4, ()), ((8, 16), 5, (3,)), ((1, 16), 4, ())]:
        e, j = both(lambda np_, lax: np_.matmul, (*batch, m, k), (*batch, k, n))
        assert_same(e, j)
        assert e.flops == 2 * int(np.prod(batch)) * m * n * k
    assert_same(*both(lambda np_, lax: np_.matmul, (16,), (16, 4)))


def test_dot_general_pinned_and_batched():
    dn = (((2,), (1,)), ((0,), (0,)))
    for pins in ({}, {"pin_lhs_in_vmem": True}, {"pin_rhs_in_vmem": True}):
        assert_same(*both(lambda np_, lax: lambda a, b: lax.dot_general(a, b, dn), (2, 3, 4), (2, 4, 5), **pins))
    assert_same(*both(lambda np_, lax: lambda a, b: np_.einsum("bij,bjk->bik", a, b), (4, 3, 4), (4, 4, 6),
                      dtype=np.float16))


def test_conv():
    for kw in [dict(window_strides=(1, 1), padding="SAME"),
               dict(window_strides=(2, 1), padding="VALID", rhs_dilation=(2, 1)),
               dict(window_strides=(1, 2), padding=((1, 2), (0, 1)), lhs_dilation=(2, 1)),
               dict(window_strides=(1, 1), padding="SAME", feature_group_count=3)]:
        rhs = (6, 1 if kw.get("feature_group_count") else 3, 3, 3)
        assert_same(*both(lambda np_, lax: lambda x, k: lax.conv_general_dilated(x, k, **kw), (2, 3, 9, 8), rhs))
    # a 1x1 convolution is a matmul: 2 * (batch * H * W) * C_in * C_out
    e, _ = both(lambda np_, lax: lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "VALID"), (2, 3, 5, 4),
                (6, 3, 1, 1))
    assert e.unfused_flops == 2 * 2 * 5 * 4 * 3 * 6


def test_reductions_broadcasts_reshapes():
    assert_same(*both(lambda np_, lax: lambda x: np_.sum(x, axis=1), (6, 7, 3)))
    assert_same(*both(lambda np_, lax: lambda x: np_.sum(x), (6, 7)))
    # max, prod, reshape, transpose, broadcast: nothing in JAX, nothing here (but the bytes alive). (argmax is not
    # compared: ember stages it as comparisons and a reduce_min, JAX as its argmax primitive, which counts nothing)
    assert_same(*both(lambda np_, lax: lambda x: (np_.max(x, 0), np_.prod(x, 1),
                                                  x.reshape(3, 14).T, np_.broadcast_to(x, (2, 6, 7))), (6, 7)))
    assert_same(*both(lambda np_, lax: lambda x: (lax.cumsum(x, 1), lax.cummax(x, 0),
                                                  lax.cumlogsumexp(x, 1)), (6, 7)))


def test_gather_scatter():
    dn = elax.ScatterDimensionNumbers((), (0,), (0,))
    jdn = jax.lax.ScatterDimensionNumbers((), (0,), (0,))
    for fn in ("scatter_add", "scatter_mul", "scatter_min", "scatter"):
        e = eroof.roofline(lambda s, i, u: getattr(elax, fn)(s, i, u, dn))(np.zeros(10, np.float32),
                                                                           np.zeros((3, 1), np.int32),
                                                                           np.ones(3, np.float32))[1]
        j = jroof.roofline(lambda s, i, u: getattr(jax.lax, fn)(s, i, u, jdn))(np.zeros(10, np.float32),
                                                                               np.zeros((3, 1), np.int32),
                                                                               np.ones(3, np.float32))[1]
        assert_same(e, j)
    e = eroof.roofline(lambda s, i: elax.scatter_apply(s, i, lambda v: enp.sin(v) * 2 + 1, dn, update_shape=(3,)))(
        np.zeros(10, np.float32), np.zeros((3, 1), np.int32))[1]
    j = jroof.roofline(lambda s, i: jax.lax.scatter_apply(s, i, lambda v: jnp.sin(v) * 2 + 1, jdn,
                                                          update_shape=(3,)))(
        np.zeros(10, np.float32), np.zeros((3, 1), np.int32))[1]
    # (JAX's scatter_apply stages its updates as an array of zeros, alive at the peak; ember's carries their shape)
    assert_same(e, j, ["flops", "unfused_flops", "hbm_bytes", "unfused_hbm_bytes"])
    assert e.unfused_flops == 3 * 3
    for mode in ("clip", "promise_in_bounds"):
        gdn = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
        e = eroof.roofline(lambda x, i: elax.gather(x, i, elax.GatherDimensionNumbers(**gdn), (1, 4), mode=mode))(
            np.zeros((10, 4), np.float32), np.zeros((3, 1), np.int32))[1]
        j = jroof.roofline(lambda x, i: jax.lax.gather(x, i, jax.lax.GatherDimensionNumbers(**gdn), (1, 4),
                                                       mode=mode))(np.zeros((10, 4), np.float32),
                                                                   np.zeros((3, 1), np.int32))[1]
        assert_same(e, j)


def test_control_flow_and_calls():
    def f(np_, lax, jit, checkpoint):
        def g(x):
            y = jit(np_.sin)(x)
            y = checkpoint(lambda z: np_.exp(z) * 2)(y)
            y, _ = lax.scan(lambda c, _: (np_.sin(c) + 1, None), y, length=5)  # (the body counts once)
            y = lax.cond(y.sum() > 0, np_.exp, np_.log, y)  # (branches and while bodies count nothing, as JAX)
            y = lax.while_loop(lambda c: c.sum() < 0, np_.exp, y)
            y = lax.fori_loop(0, 3, lambda i, c: np_.cos(c), y)
            return lax.composite(lambda x: np_.exp(x) + 1, name="my.c")(y)
        return g
    e = eroof.roofline(f(enp, ember.lax, ember.jit, ember.checkpoint))(np.ones((4, 5), np.float32))[1]
    j = jroof.roofline(f(jnp, jax.lax, jax.jit, jax.checkpoint))(np.ones((4, 5), np.float32))[1]
    assert_same(e, j)
    assert e.unfused_flops == 20 * 8 + 19 + 1  # (+ the predicate's sum and >)


def test_custom_derivatives():
    def f(np_, custom_vjp, nn):
        @custom_vjp
        def cv(x):
            return np_.sin(x)
        cv.defvjp(lambda x: (np_.sin(x), x), lambda r, g: (g * np_.cos(r),))
        return lambda x: nn.relu(cv(x)) * 3
    e = eroof.roofline(f(enp, ember.custom_vjp, ember.nn))(np.ones(7, np.float32))[1]
    j = jroof.roofline(f(jnp, jax.custom_vjp, jax.nn))(np.ones(7, np.float32))[1]
    assert_same(e, j)


def _mlp(np_, nn, batch=8):
    def f(params, x):
        for w, b in params:
            x = nn.relu(x @ w + np_.broadcast_to(b, (batch, b.shape[0])))
        return np_.sum(nn.sigmoid(x))
    return f


PARAMS = [(np.ones((16, 32), np.float32), np.ones(32, np.float32)),
          (np.ones((32, 4), np.float32), np.ones(4, np.float32))]


def test_mlp_forward_and_grad():
    x = np.ones((8, 16), np.float32)
    assert_same(eroof.roofline(_mlp(enp, ember.nn))(PARAMS, x)[1], jroof.roofline(_mlp(jnp, jax.nn))(PARAMS, x)[1])
    # ember's reverse mode stages other elementwise equations than JAX's; the matmuls are the same
    e = eroof.roofline(ember.grad(_mlp(enp, ember.nn)))(PARAMS, x)[1]
    j = jroof.roofline(jax.grad(_mlp(jnp, jax.nn)))(PARAMS, x)[1]
    assert_same(e, j, ["flops", "hbm_bytes"])
    assert e.flops == 3 * 2 * 8 * (16 * 32 + 32 * 4) - 2 * 8 * 16 * 32  # (no gradient for x)


def test_vjp_bfloat16():
    f = lambda np_: lambda w, x: np_.sum(np_.sin(x @ w))  # noqa: E731
    e = eroof.roofline(f(enp), vjp=True)(ember.ShapeDtypeStruct((16, 8), enp.bfloat16),
                                         ember.ShapeDtypeStruct((4, 16), enp.bfloat16))
    j = jroof.roofline(f(jnp), vjp=True)(jax.ShapeDtypeStruct((16, 8), jnp.bfloat16),
                                         jax.ShapeDtypeStruct((4, 16), jnp.bfloat16))
    assert_same(e[1], j[1], ["flops", "hbm_bytes"])
    assert [(s.shape, s.dtype) for s in e[0]] == [(s.shape, s.dtype) for s in j[0]]


def _collectives(lax):
    def f(a):
        return (lax.psum(a, "x"), lax.all_gather(a, "x", tiled=True), lax.pmax(a, "x"),
                lax.ppermute(a, "x", [(0, 1), (1, 0)]), lax.psum_scatter(a, "x", tiled=True),
                lax.all_to_all(a, "x", 0, 0, tiled=True))
    return f


def test_shard_map_collectives():
    from ember.sharding import Mesh as EMesh, PartitionSpec as EP
    from jax.sharding import Mesh as JMesh, PartitionSpec as JP
    emesh, jmesh = EMesh(np.array(ember.devices()[:2]), ("x",)), JMesh(np.array(jax.devices()[:2]), ("x",))
    especs = (EP(), EP("x"), EP(), EP("x"), EP("x"), EP("x"))
    jspecs = (JP(), JP("x"), JP(), JP("x"), JP("x"), JP("x"))
    eo, e = eroof.roofline(_collectives(ember.lax), emesh, EP("x"), especs)(ember.ShapeDtypeStruct((8, 16),
                                                                                                   np.float32))
    jo, j = jroof.roofline(_collectives(jax.lax), jmesh, JP("x"), jspecs)(jax.ShapeDtypeStruct((8, 16),
                                                                                               np.float32))
    assert_same(e, j)
    assert e.ici_bytes["x"] > 0
    assert [(s.shape, tuple(s.sharding.spec)) for s in eo] == [(s.shape, tuple(s.sharding.spec)) for s in jo]
    # each collective alone
    for k in range(6):
        one = lambda lax: (lambda a: _collectives(lax)(a)[k])  # noqa: E731
        e = eroof.roofline(one(ember.lax), emesh, EP("x"), especs[k])(ember.ShapeDtypeStruct((8, 16), np.float32))
        j = jroof.roofline(one(jax.lax), jmesh, JP("x"), jspecs[k])(jax.ShapeDtypeStruct((8, 16), np.float32))
        assert_same(e[1], j[1])


def test_roofline_and_grad():
    from ember.sharding import Mesh as EMesh, PartitionSpec as EP
    from jax.sharding import Mesh as JMesh, PartitionSpec as JP
    emesh, jmesh = EMesh(np.array(ember.devices()[:2]), ("x",)), JMesh(np.array(jax.devices()[:2]), ("x",))
    f = lambda np_, lax: lambda w, x: lax.psum(np_.sum(x @ w), "x")  # noqa: E731
    args = (np.ones((16, 8), np.float32), np.ones((4, 16), np.float32))
    jargs = [jax.device_put(a) for a in args]  # (JAX's roofline_and_grad reads its arguments' shardings)
    e = eroof.roofline_and_grad(f(enp, ember.lax), emesh, (EP(), EP("x")), EP())(*args)
    j = jroof.roofline_and_grad(f(jnp, jax.lax), jmesh, (JP(), JP("x")), JP())(*jargs)
    assert_same(e[1], j[1])
    assert_same(e[2], j[2], ["flops", "hbm_bytes", "ici_bytes", "ici_latency"])


def test_register_roofline():
    prim = ember.lax.tanh_p
    try:
        @eroof.register_roofline(prim)
        def rule(ctx, x, **params):
            assert ctx.primitive is prim and ctx.avals_in[0].shape == (3, 4)
            return eroof.RooflineResult(unfused_flops=10 * x.size)
        assert eroof.roofline(enp.tanh)(np.ones((3, 4), np.float32))[1].unfused_flops == 120
    finally:
        eroof.register_standard_roofline(prim)
    assert eroof.roofline(enp.tanh)(np.ones((3, 4), np.float32))[1].unfused_flops == 0
    with pytest.raises(TypeError, match="register_roofline"):
        eroof.register_roofline("tanh")
