"""Collectives over named axes under vmap(axis_name=...) against jax.vmap with the same axis name (values, and
derivatives both ways round: grad of the vmapped function, vmap of the gradient, which runs the collectives' own
JVP and VJP rules), the named-axis environment (unbound names raise NameError as in JAX), and the StableHLO each
collective lowers to inside a mesh (an AxisContext on the emitter, as a shard_map body has)."""
import numpy as np
import pytest

import ember
import ember.lax as lax
from ember._core import ShapedArray, stage_flat
from ember._core.axes import axis_frame, axis_size, bound_axes
from ember._hlo import LoweringError
from ember._hlo.emitter import Emitter, module_text
from ember._hlo.lower import lower_into
from ember._hlo.spmd import AxisContext
from recorded import jax_result

X = np.arange(12, dtype=np.float32).reshape(4, 3) * 0.5 - 2.0
Y = np.random.default_rng(0).standard_normal((4, 4, 2)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
SHIFT = [(0, 1), (1, 2), (2, 3), (3, 0)]


def _forward_pairs(L):
    """(name, function of one member, in_axes, out_axes, argument) with L the lax module (ember's or JAX's)."""
    return [
        ("psum", lambda v: L.psum(v, "i"), 0, 0, X),
        ("pmax", lambda v: L.pmax(v, "i"), 0, 0, X),
        ("pmin", lambda v: L.pmin(v, "i"), 0, 0, X),
        ("pmean", lambda v: v - L.pmean(v, "i"), 0, 0, X),
        ("psum_tree", lambda v: L.psum({"a": v, "b": (v * 2, v[0])}, ("i",)), 0, 0, X),
        ("psum_const", lambda v: v * L.psum(1, "i"), 0, 0, X),
        ("positional", lambda v: L.psum(v, ("i", 0)) + L.pmax(v, (0, "i")), 0, 0, X),
        ("bools", lambda v: (L.psum(v > 0, "i"), L.pmax(v > 0, "i"), L.pmin(v > 0, "i")), 0, 0, X),
        ("all_gather", lambda v: L.all_gather(v, "i"), 0, 0, X),
        ("all_gather_tiled", lambda v: L.all_gather(v, "i", axis=1, tiled=True), 0, 0, Y),
        ("psum_scatter", lambda v: L.psum_scatter(v, "i"), 0, 0, Y),
        ("psum_scatter_tiled", lambda v: L.psum_scatter(v, "i", scatter_dimension=0, tiled=True), 0, 0, Y),
        ("all_to_all", lambda v: L.all_to_all(v, "i", 0, 1), 0, 0, Y),
        ("all_to_all_tiled", lambda v: L.all_to_all(v, "i", 0, 1, tiled=True), 0, 0, Y),
        ("all_to_all_same", lambda v: L.all_to_all(v, "i", 0, 0, tiled=True), 0, 0, Y),
        ("pswapaxes", lambda v: L.pswapaxes(v, "i", 0), 0, 0, Y),
        ("ppermute", lambda v: L.ppermute(v, "i", SHIFT), 0, 0, X),
        ("pshuffle", lambda v: L.pshuffle(v, "i", [2, 0, 3, 1]), 0, 0, X),
        ("axis_index", lambda v: v * L.axis_index("i"), 0, 0, X),
        ("pbroadcast", lambda v: L.pbroadcast(v, "i", 2), 0, 0, X),
        ("in_out_axes", lambda v: L.psum(v, "i") * v, 1, 1, X),
        ("nested_outer", lambda v: L.psum(v, "i"), 1, 0, X),  # inside an inner vmap over j (see below)
    ]


def _ember_vmapped(name, fn, in_axes, out_axes):
    f = ember.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_name="i")
    if name == "nested_outer":
        f = ember.vmap(ember.vmap(fn, axis_name="j"), in_axes=1, axis_name="i")
    return f


def _jax_vmapped(name, fn, in_axes, out_axes):
    import jax
    f = jax.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_name="i")
    if name == "nested_outer":
        f = jax.vmap(jax.vmap(fn, axis_name="j"), in_axes=1, axis_name="i")
    return f


def _close(what, got, want, rtol=1e-5):
    """got equals want leaf by leaf (shape, dtype, values); a failure names what was compared."""
    import jax
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    try:
        assert len(got_leaves) == len(want_leaves)
        for g, w in zip(got_leaves, want_leaves):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None


def test_collectives_under_vmap_match_jax():
    """Every collective's batched meaning, with the name bound by vmap, equals jax.vmap's."""
    import jax.lax as jlax
    for (name, fn, ia, oa, arg), (_, jfn, *_) in zip(_forward_pairs(lax), _forward_pairs(jlax)):
        got = _ember_vmapped(name, fn, ia, oa)(arg)
        want = jax_result(lambda: _jax_vmapped(name, jfn, ia, oa)(arg))
        _close(name, got, want)


def _sweep_pairs(L):
    """Each collective at another batch position, output position and dtype (the slow sweep)."""
    return [
        ("psum", lambda v: L.psum(v, "i")),
        ("pmax", lambda v: L.pmax(v, "i")),
        ("pmin", lambda v: L.pmin(v, ("i",))),
        ("all_gather", lambda v: L.all_gather(v, "i", axis=-1)),
        ("all_gather_tiled", lambda v: L.all_gather(v, "i", axis=0, tiled=True)),
        ("psum_scatter", lambda v: L.psum_scatter(v, "i", scatter_dimension=1, tiled=True)),
        ("all_to_all", lambda v: L.all_to_all(v, "i", 0, 1)),
        ("all_to_all_tiled", lambda v: L.all_to_all(v, "i", 1, 0, tiled=True)),
        ("ppermute", lambda v: L.ppermute(v, "i", SHIFT[::-1])),
        ("axis_index", lambda v: v + L.axis_index("i").astype(v.dtype)),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("in_axes,out_axes", [(1, 0), (2, -1), (0, 1)])
def test_collectives_sweep(dtype, in_axes, out_axes):
    import jax
    import jax.lax as jlax
    z = np.moveaxis(np.arange(4 * 4 * 8).reshape(4, 4, 8) % 7 - 3, 0, in_axes).astype(dtype)
    for (name, fn), (_, jfn) in zip(_sweep_pairs(lax), _sweep_pairs(jlax)):
        got = ember.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_name="i")(z)
        want = jax_result(lambda: jax.vmap(jfn, in_axes=in_axes, out_axes=out_axes, axis_name="i")(z))
        _close(name, got, want)


def test_partial_ppermute_sends_zeros():
    """A member no pair sends to receives zeros (shard_map's meaning; jax.vmap refuses partial permutations)."""
    got = np.asarray(ember.vmap(lambda v: lax.ppermute(v, "i", [(0, 2), (3, 1)]), axis_name="i")(X))
    np.testing.assert_array_equal(got, np.stack([np.zeros(3), X[3], X[0], np.zeros(3)]).astype(np.float32))
    got = np.asarray(ember.vmap(lambda v: lax.ppermute(v, "i", []), axis_name="i")(X))
    np.testing.assert_array_equal(got, np.zeros_like(X))


def _nested_pairs(L):
    """Two names: an inner vmap over j inside an outer one over i (collectives over either, both, and an index
    over both)."""
    return [
        ("sum_i", lambda v: L.psum(v, "i")),
        ("sum_j", lambda v: L.psum(v, "j")),
        ("sum_ij", lambda v: L.psum(v, ("i", "j"))),
        ("max_ji", lambda v: L.pmax(v, ("j", "i"))),
        ("index_ij", lambda v: v + L.axis_index(("i", "j"))),
        ("gather_i", lambda v: L.all_gather(v, "i")),
        ("permute_i", lambda v: L.ppermute(v, "i", SHIFT)),
        ("scatter_i", lambda v: L.psum_scatter(L.broadcast(v, (4,)), "i")),
        ("to_all_i", lambda v: L.all_to_all(L.broadcast(v, (4,)), "i", 0, 0)),
    ]


def test_nested_vmaps_with_two_names_match_jax():
    import jax
    import jax.lax as jlax
    for (name, fn), (_, jfn) in zip(_nested_pairs(lax), _nested_pairs(jlax)):
        got = ember.vmap(ember.vmap(fn, axis_name="j"), axis_name="i")(X)
        want = jax_result(lambda: jax.vmap(jax.vmap(jfn, axis_name="j"), axis_name="i")(X))
        _close(name, got, want)


def _grad_pairs(L):
    """Scalar losses of one member (v, w): the collectives' derivatives, with a weight w to make them visible."""
    return [
        ("psum", lambda v, w: (L.psum(v * v, "i") * w).sum()),
        ("pmax", lambda v, w: (L.pmax(v, "i") * w).sum()),
        ("pmin", lambda v, w: (L.pmin(v * w, "i") * w).sum()),
        ("pmean", lambda v, w: (L.pmean(v, "i") * w).sum()),
        ("all_gather", lambda v, w: (L.all_gather(v, "i") * w).sum()),
        ("psum_scatter", lambda v, w: (L.psum_scatter(L.broadcast(v * w, (4,)), "i", scatter_dimension=0) * v
                                       ).sum()),
        ("all_to_all", lambda v, w: (L.all_to_all(L.broadcast(v, (4,)) * w, "i", 0, 1, tiled=True) ** 2).sum()),
        ("ppermute", lambda v, w: (L.ppermute(v, "i", SHIFT) * w).sum()),
    ]


def _jax_members(name, jfn):
    """The members' losses as one JAX function of all members: jax.vmap of the loss, or, for pmax and pmin (JAX
    has no derivative rule for them, even under vmap), the same written with jnp.max/min over the members, whose
    derivative shares the tangent among ties (reduce_max's rule), as ember's pmax/pmin rules do."""
    import jax
    import jax.numpy as jnp
    if name == "pmax":
        return lambda x: (jnp.max(x, 0)[None] * W).sum(1)
    if name == "pmin":
        return lambda x: (jnp.min(x * W, 0)[None] * W).sum(1)
    return lambda x: jax.vmap(jfn, axis_name="i")(x, W)


def test_derivatives_of_collectives_match_jax():
    """grad of the vmapped function (the batched IR differentiated), vmap of the gradient (the collectives' own
    VJP rules, then batched) and vmap of jvp (their JVP rules), against JAX's. vmap of grad equals the gradient of
    the sum of the members' losses (psum's transpose is psum), which is the reference where JAX has no rule."""
    import jax
    import jax.lax as jlax
    for (name, fn), (_, jfn) in zip(_grad_pairs(lax), _grad_pairs(jlax)):
        members = _jax_members(name, jfn)
        checks = [
            ("grad(vmap)", ember.grad(lambda x: ember.vmap(fn, axis_name="i")(x, W).sum())(X),
             lambda: jax.grad(lambda x: members(x).sum())(X)),
            ("vmap(grad)", ember.vmap(ember.grad(fn), axis_name="i")(X, W),
             (lambda: jax.grad(lambda x: members(x).sum())(X)) if name in ("pmax", "pmin") else
             (lambda: jax.vmap(jax.grad(jfn), axis_name="i")(X, W))),
            ("vmap(jvp)", ember.vmap(lambda v, w: ember.jvp(lambda u: fn(u, w), (v,), (w,))[1], axis_name="i")(X, W),
             lambda: jax.jvp(members, (X,), (W,))[1]),
        ]
        for how, got, want in checks:
            _close(f"{name} {how}", got, jax_result(want), rtol=1e-4)


def test_pmax_derivative_splits_ties_as_reduce_max():
    """pmax's and pmin's own rules (vmap of grad) with ties between members: each tied member gets an equal share,
    as the derivative of jnp.max over the members (reduce_max's) gives."""
    import jax
    import jax.numpy as jnp
    x = np.array([[1.0, 3.0], [3.0, 2.0], [0.0, 3.0], [3.0, -1.0]], np.float32)
    c = np.arange(1, 3, dtype=np.float32)
    for ours, theirs in ((lax.pmax, jnp.max), (lax.pmin, jnp.min)):
        got = ember.vmap(ember.grad(lambda v: (ours(v, "i") * c).sum()), axis_name="i")(x)
        want = jax_result(lambda: jax.grad(lambda y: 4 * (theirs(y, 0) * c).sum())(x))
        _close(ours.__name__, got, want)


def test_collectives_under_jit_and_control_flow():
    import jax
    import jax.lax as jlax

    def body(L):
        def step(c, v):
            return c + L.psum(v, "i"), L.axis_index("i")
        return lambda v: (L.scan(step, 0.0, v), L.cond(v[0] > 0, lambda u: L.pmax(u, "i"), lambda u: u, v))
    got = [ember.jit(ember.vmap(body(lax), axis_name="i"))(X),
           ember.vmap(ember.jit(body(lax)), axis_name="i")(X)]
    want = jax_result(lambda: jax.jit(jax.vmap(body(jlax), axis_name="i"))(X))
    for how, g in zip(("jit(vmap)", "vmap(jit)"), got):
        _close(how, g, want)


def test_unbound_axis_names_and_refused_options():
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(X, "i")
    with pytest.raises(NameError, match="unbound axis name: k"):
        ember.vmap(lambda v: lax.all_gather(v, "k"), axis_name="i")(X)
    with pytest.raises(NameError, match="unbound axis name: i"):
        ember.vmap(lambda v: lax.axis_index("i"))(X)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.axis_size("i")
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        ember.vmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), axis_name="i")(X)
    # (spmd_axis_name is supported now: tests/test_sharding.py, tests/test_shard_map_programs.py)
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda v: v * 2, axis_name="i", spmd_axis_name="x")(X)),
                                  np.asarray(X) * 2)
    with pytest.raises(ValueError, match="psum_scatter: dimension 0 of the operand f32\\[3\\]"):
        ember.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(X)
    with pytest.raises(ValueError, match="ppermute sources and destinations must be unique"):
        ember.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]), axis_name="i")(X)
    with pytest.raises(ValueError, match="all_to_all requires the size"):
        ember.vmap(lambda v: lax.all_to_all(v, "i", 0, 0), axis_name="i")(X)
    # the environment: frames of several axes, the innermost binding wins, and it is left as found
    with axis_frame([("x", 2), ("y", 3)]):
        with axis_frame({"x": 5}):
            assert axis_size("x") == 5 and axis_size("y") == 3 and lax.axis_size(("x", "y")) == 15
        assert bound_axes() == {"x": 2, "y": 3}
    assert bound_axes() == {}
    seen = []
    ember.vmap(lambda v: seen.append(lax.axis_size("i")) or v, axis_name="i")(X)
    assert seen == [4]


def _lowered(fn, aval, mesh):
    """The module text of fn staged with the mesh's axes bound and lowered inside it."""
    with axis_frame(list(mesh.axis_sizes.items())):
        ir = stage_flat(lambda a: [fn(a)], [aval])
    emitter = Emitter()
    emitter.axis_context = mesh
    args = [emitter.declare("%arg0", aval)]
    return module_text([aval], ir.out_avals, emitter, args, lower_into(emitter, ir, args))


def test_lowering_inside_a_mesh():
    """Each collective's StableHLO inside a 2x2 mesh: the op, its partition groups (the other axis fixed) and its
    channel, as JAX emits them; MLIR parses and verifies each module."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir as mlir_ir

    mesh = AxisContext(("x", "y"), np.arange(4).reshape(2, 2))
    aval = ShapedArray((2, 4), np.dtype(np.float32))
    channel = "channel_handle = #stablehlo.channel_handle<handle = "
    expected = [
        (lambda v: lax.psum(v, "y"), ['"stablehlo.all_reduce"', '"stablehlo.add"', "[[0, 1], [2, 3]]",
                                      "use_global_device_ids", channel]),
        (lambda v: lax.pmax(v, "x"), ['"stablehlo.all_reduce"', '"stablehlo.maximum"', "[[0, 2], [1, 3]]"]),
        (lambda v: lax.pmin(v, ("x", "y")), ['"stablehlo.minimum"', "dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>"]),
        (lambda v: lax.all_gather(v, "y", axis=1, tiled=True),
         ['"stablehlo.all_gather"', "all_gather_dim = 1", "[[0, 1], [2, 3]]", "-> tensor<2x8xf32>"]),
        (lambda v: lax.psum_scatter(v, "x", scatter_dimension=1, tiled=True),
         ['"stablehlo.reduce_scatter"', "scatter_dimension = 1", "[[0, 2], [1, 3]]", "-> tensor<2x2xf32>"]),
        (lambda v: lax.all_to_all(v, "y", 0, 1, tiled=True),
         ['"stablehlo.all_to_all"', "split_dimension = 0", "concat_dimension = 1", "split_count = 2",
          "-> tensor<1x8xf32>"]),
        (lambda v: lax.ppermute(v, "y", [(0, 1), (1, 0)]),
         ['"stablehlo.collective_permute"', "source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2]]>", channel]),
        (lambda v: v + lax.convert_element_type(lax.axis_index("x"), np.float32),
         ['"stablehlo.partition_id"', "dense<[0, 0, 1, 1]> : tensor<4xi32>", '"stablehlo.dynamic_slice"']),
    ]
    for fn, parts in expected:
        text = _lowered(fn, aval, mesh)
        for part in parts:
            assert part in text, f"{part!r} not in\n{text}"
        with mlir.make_ir_context():
            mlir_ir.Module.parse(text)
    # a mesh whose devices are not in row-major order: groups and the index table follow it
    shuffled = AxisContext(("x",), np.array([2, 0, 3, 1]))
    text = _lowered(lambda v: lax.ppermute(v, "x", [(0, 1)]), aval, shuffled)
    assert "source_target_pairs = dense<[[2, 0]]>" in text
    text = _lowered(lambda v: v + lax.convert_element_type(lax.axis_index("x"), np.float32), aval, shuffled)
    assert "dense<[1, 3, 0, 2]> : tensor<4xi32>" in text
    # outside a mesh: a clear error naming the axis
    with axis_frame([("x", 2)]):
        ir = stage_flat(lambda a: [lax.psum(a, "x")], [aval])
    with pytest.raises(LoweringError, match="psum: unbound axis name 'x'"):
        ember.compile(ir)
