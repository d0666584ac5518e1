"""lax.ragged_dot and lax.ragged_dot_general against JAX 0.10.2 and a numpy oracle (tests/lax_oracles.py): the
three modes with batch, outer and inner free, and several contracting dimensions, per-prefix group sizes, group
sizes summing to less (or more) than the ragged dimension, empty and negative (overlapping) groups; float32,
bfloat16 and integer dtypes, preferred_element_type; eagerly and under jit; derivatives with respect to lhs and rhs
against jax.grad (mode 1; JAX transposes no other mode, ember's against JAX's JVP and finite differences); vmap of
every combination of batched arguments; the errors; and the tiled lowering's size (no [g, m, k] masked operand)."""
import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from lax_oracles import ragged_dot_np
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

# (lhs shape, rhs shape, group_sizes shape, (dot dimension numbers, lhs ragged dimensions, rhs group dimensions))
MODE_1 = [
    ((10, 3), (3, 3, 2), (3,), ((((1,), (1,)), ((), ())), (0,), (0,))),                   # ragged_dot's
    ((2, 10, 3), (3, 2, 3, 4), (2, 3), ((((2,), (2,)), ((0,), (1,))), (1,), (0,))),       # a batch dimension
    # an outer free dimension (its own group sizes), an inner one, two contracting dims, the group dim inside rhs
    ((4, 7, 2, 3, 5), (6, 5, 3, 3), (4, 3), ((((3, 4), (3, 1)), ((), ())), (1,), (2,))),
    ((2, 4, 7, 3), (3, 2, 3, 2), (3,), ((((3,), (2,)), ((0,), (1,))), (2,), (0,))),       # [g] for every prefix
]
MODE_2 = [
    ((3, 9), (9, 5), (3,), ((((1,), (0,)), ((), ())), (1,), ())),
    ((3, 4, 9), (4, 9, 5), (4, 3), ((((1, 2), (0, 1)), ((), ())), (2,), ())),            # an outer contracting dim
    ((2, 3, 9), (2, 9, 5), (2, 3), ((((2,), (1,)), ((0,), (0,))), (2,), ())),             # a batch dimension
    ((3, 6, 2), (6, 2, 4), (3,), ((((1, 2), (0, 1)), ((), ())), (1,), ())),               # an inner contracting dim
]
MODE_3 = [((4, 3, 5), (4, 5, 2), (3,), ((((2,), (1,)), ((0,), (0,))), (0,), ()))]
CASES = MODE_1 + MODE_2 + MODE_3
QUICK = [MODE_1[2], MODE_2[1], MODE_3[0]]  # (one of each mode in the default run, the others in the slow sweep)


def _tiers(cases, quick=QUICK):
    return [c if c in quick else pytest.param(c, marks=pytest.mark.slow) for c in cases]


def _dims(lib, d):
    return lib.RaggedDotDimensionNumbers(*d)


def _sizes(rng, shape, low=0, high=5):
    return rng.integers(low, high, size=shape).astype(np.int32)


_general = ember.jit(lambda x, y, s, d: lax.ragged_dot_general(x, y, s, _dims(lax, d)), static_argnums=3)


@pytest.mark.parametrize("case", _tiers(CASES), ids=lambda c: f"{c[0]}x{c[1]}")
def test_every_mode_matches_jax_and_numpy(case):
    """Random group sizes (some groups empty, sums below and above the ragged size), and negative ones (groups that
    overlap: JAX's masks count a row twice, and so does ember's dense branch)."""
    lhs_shape, rhs_shape, gs_shape, d = case
    rng = np.random.default_rng(0)
    x = rng.normal(size=lhs_shape).astype(np.float32)
    y = rng.normal(size=rhs_shape).astype(np.float32)
    for low in (0, 0, -2):
        gs = _sizes(rng, gs_shape, low)
        want = jax_result(lambda: jax.lax.ragged_dot_general(x, y, gs, _dims(jax.lax, d)))
        np.testing.assert_allclose(ragged_dot_np(x, y, gs, d), want, rtol=1e-5, atol=1e-5)
        got = _general(x, y, gs, d)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_ragged_dot_group_sizes_edges_eagerly_and_under_jit():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10, 3)).astype(np.float32)
    y = rng.normal(size=(3, 3, 2)).astype(np.float32)
    jitted = ember.jit(lax.ragged_dot)
    for gs in ([2, 0, 3], [10, 0, 0], [0, 0, 0], [3, 4, 3], [9, 9, 9], [0, 10, 0], [3, -1, 3], [-2, 5, 9]):
        gs = np.array(gs, np.int32)
        want = jax_result(lambda: jax.lax.ragged_dot(x, y, gs))
        np.testing.assert_allclose(np.asarray(lax.ragged_dot(x, y, gs)), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(jitted(x, y, gs)), want, rtol=1e-6, atol=1e-6)
    # group sizes of other integer dtypes, and empty operands
    for dtype in ("int8", "uint8", "int16", "uint32"):
        gs = np.array([4, 0, 5], dtype)
        want = jax_result(lambda: jax.lax.ragged_dot(x, y, gs))
        np.testing.assert_allclose(np.asarray(lax.ragged_dot(x, y, gs)), want, rtol=1e-6, atol=1e-6)
    for xs, ys in [((0, 3), (3, 3, 2)), ((10, 0), (3, 0, 2)), ((10, 3), (3, 3, 0)), ((10, 3), (0, 3, 2))]:
        xe, ye = np.ones(xs, np.float32), np.ones(ys, np.float32)
        gs = np.full(ys[0], 2, np.int32)
        want = jax_result(lambda: jax.lax.ragged_dot(xe, ye, gs))
        got = jitted(xe, ye, gs)
        assert got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)


def test_non_finite_values_as_jax():
    """JAX's CPU form multiplies every group's weights by the rows masked to 0 for them, so a weight that is inf or
    NaN makes NaN in every row (mode 1); an inf in lhs stays in its row, and mode 2 masks both operands: ember gives
    the same values in each case."""
    x, y = np.ones((6, 2), np.float32), np.ones((3, 2, 2), np.float32)
    y[2, 0, 0] = np.inf
    x_inf = x.copy()
    x_inf[1, 1] = np.inf
    dims = ((((1,), (0,)), ((), ())), (1,), ())
    a, b = np.ones((2, 6), np.float32), np.ones((6, 2), np.float32)
    b[5, 0] = np.nan
    for gs in ([2, 2, 2], [2, 2, 1], [3, -1, 4]):
        gs = np.array(gs, np.int32)
        for lhs, rhs in ((x, y), (x_inf, np.ones_like(y))):
            want = jax_result(lambda: jax.lax.ragged_dot(lhs, rhs, gs))
            np.testing.assert_array_equal(np.asarray(ember.jit(lax.ragged_dot)(lhs, rhs, gs)), want)
        want = jax_result(lambda: jax.lax.ragged_dot_general(a, b, gs, _dims(jax.lax, dims)))
        np.testing.assert_array_equal(np.asarray(_general(a, b, gs, dims)), want)


@pytest.mark.parametrize("dtype,preferred", [("bfloat16", None), ("int32", None), ("int8", None), ("int8", "int32"),
                                             ("bfloat16", "float32"), ("float32", "bfloat16")])
def test_dtypes_and_preferred_element_type(dtype, preferred):
    rng = np.random.default_rng(2)
    x = (rng.normal(size=(12, 5)) * 3).astype(dtype)
    y = (rng.normal(size=(3, 5, 4)) * 3).astype(dtype)
    gs = np.array([5, 0, 6], np.int32)
    want = jax_result(lambda: jax.lax.ragged_dot(x, y, gs, preferred_element_type=preferred))
    got = ember.jit(lambda a, b, s: lax.ragged_dot(a, b, s, preferred_element_type=preferred))(x, y, gs)
    assert got.dtype == want.dtype
    tol = 1e-2 if ml_dtypes.bfloat16 in (np.dtype(dtype), np.dtype(preferred or dtype)) else 1e-6
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64), rtol=tol,
                               atol=tol)


def test_precision_is_accepted_and_kept():
    x, y, gs = np.ones((4, 2), np.float32), np.ones((2, 2, 3), np.float32), np.array([1, 3], np.int32)
    ir = ember.make_ir(lambda a, b: lax.ragged_dot(a, b, gs, precision=lax.Precision.HIGHEST))(x, y)
    assert "HIGHEST" in str(ir)
    np.testing.assert_array_equal(np.asarray(lax.ragged_dot(x, y, gs, precision="highest")), np.full((4, 3), 2.0))


# ---------------------------------------------------------------------------------------------------------------
# derivatives
@pytest.mark.parametrize("case", _tiers(MODE_1[:3]), ids=lambda c: f"{c[0]}x{c[1]}")
def test_mode_1_gradients_match_jax(case):
    lhs_shape, rhs_shape, gs_shape, d = case
    rng = np.random.default_rng(3)
    x = rng.normal(size=lhs_shape).astype(np.float32)
    y = rng.normal(size=rhs_shape).astype(np.float32)
    gs = _sizes(rng, gs_shape, 1, 5)
    w = rng.normal(size=np.shape(jax_result(lambda: jax.lax.ragged_dot_general(x, y, gs, _dims(jax.lax, d)))))

    def loss(lib, np_):
        return lambda a, b: np_.sum(lib.lax.ragged_dot_general(a, b, gs, _dims(lib.lax, d)) * w)
    got = ember.jit(ember.grad(loss(ember, enp), (0, 1)))(x, y)
    want = jax_result(lambda: jax.grad(loss(jax, jnp), (0, 1))(x, y))
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("case", _tiers([MODE_2[1], MODE_2[3], MODE_3[0]], [MODE_2[1]]), ids=lambda c: f"{c[0]}x{c[1]}")
def test_modes_2_and_3_gradients_which_jax_cannot_transpose(case):
    """JAX's transpose rule has mode 1 only; ember's gradients equal JAX's forward derivatives (<grad, t> =
    jvp(t)) and central finite differences, in float64."""
    lhs_shape, rhs_shape, gs_shape, d = case
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=lhs_shape), rng.normal(size=rhs_shape)
    gs = _sizes(rng, gs_shape, 0, 5)
    with jax.enable_x64(True):
        def f(lib):
            return lambda a, b: lib.lax.ragged_dot_general(a, b, gs, _dims(lib.lax, d))
        with pytest.raises(NotImplementedError, match="Unimplemented grad_._dims for ragged dot general"):
            jax.grad(lambda a: jnp.sum(f(jax)(a, y)))(x)
        out = np.asarray(jax_result(lambda: f(jax)(x, y)))
        w = rng.normal(size=out.shape)
        gx, gy = ember.grad(lambda a, b: enp.sum(f(ember)(a, b) * w), (0, 1))(x, y)
        tx, ty = rng.normal(size=x.shape), rng.normal(size=y.shape)
        jvp = jax_result(lambda: jax.jvp(f(jax), (x, y), (tx, ty))[1])
        np.testing.assert_allclose(np.sum(gx * tx) + np.sum(gy * ty), np.sum(np.asarray(jvp) * w), rtol=1e-10)
        eps = 1e-6
        numeric = (np.sum(ragged_dot_np(x + eps * tx, y + eps * ty, gs, d) * w)
                   - np.sum(ragged_dot_np(x - eps * tx, y - eps * ty, gs, d) * w)) / (2 * eps)
        np.testing.assert_allclose(np.sum(gx * tx) + np.sum(gy * ty), numeric, rtol=1e-6)


@pytest.mark.usefixtures("ember_x64")
def test_second_derivatives_as_jax():
    """ember's Hessian of a mode-1 loss (the transpose's mode-2 ragged dot differentiated forward) applied to a
    direction equals JAX's Hessian-vector product (jvp of grad); JAX's own hessian vmaps the tangents alone, which
    its batching rule refuses."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(6, 2)), rng.normal(size=(2, 2, 3))
    tx, ty = rng.normal(size=x.shape), rng.normal(size=y.shape)
    gs = np.array([2, 3], np.int32)
    with jax.enable_x64(True):
        def loss(lib, np_):
            return lambda a, b: np_.sum(np_.tanh(lib.lax.ragged_dot(a, b, gs)))
        (hxx, hxy), (hyx, hyy) = ember.hessian(loss(ember, enp), (0, 1))(x, y)
        want = jax_result(lambda: jax.jvp(jax.grad(loss(jax, jnp), (0, 1)), (x, y), (tx, ty))[1])
        got_x = np.tensordot(hxx, tx, tx.ndim) + np.tensordot(hxy, ty, ty.ndim)
        got_y = np.tensordot(hyx, tx, tx.ndim) + np.tensordot(hyy, ty, ty.ndim)
        np.testing.assert_allclose(got_x, want[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got_y, want[1], rtol=1e-9, atol=1e-12)
        with pytest.raises(NotImplementedError, match="ragged_dot vmap over any dim but 0"):
            jax.hessian(loss(jax, jnp), (0, 1))(x, y)


# ---------------------------------------------------------------------------------------------------------------
# vmap
def _check_vmap(case, combinations):
    """vmap of the ragged dot with the arguments batched as combinations say ((lhs, rhs, sizes) flags, and whether
    at the last axis), against the oracle member by member."""
    lhs_shape, rhs_shape, gs_shape, d = case
    rng = np.random.default_rng(6)
    n = 3
    xs = rng.normal(size=(n,) + lhs_shape).astype(np.float32)
    ys = rng.normal(size=(n,) + rhs_shape).astype(np.float32)
    gss = _sizes(rng, (n,) + gs_shape, 0, 5)
    fn = lambda a, b, s: lax.ragged_dot_general(a, b, s, _dims(lax, d))  # noqa: E731
    for batched, last in combinations:
        axes = [(a.ndim - 1 if last else 0) if b else None for a, b in zip((xs, ys, gss), batched)]
        args = [np.moveaxis(a, 0, ax) if ax is not None else a[0] for a, ax in zip((xs, ys, gss), axes)]
        got = np.asarray(ember.vmap(fn, in_axes=axes)(*args))
        for i in range(n):
            member = [a[i] if b else a[0] for a, b in zip((xs, ys, gss), batched)]
            np.testing.assert_allclose(got[i], ragged_dot_np(*member, d), rtol=1e-5, atol=1e-5,
                                       err_msg=f"batched {batched}, last {last}, member {i}")
    return xs, ys, gss, fn


def test_vmap_of_each_argument_and_of_all_as_jax():
    """lhs alone (one more free dimension of it), rhs alone (of rhs), the group sizes alone and all three (one more
    batch dimension); JAX's vmap takes the last only (all batched at 0), and gives the same."""
    case = MODE_1[0]
    combinations = [((True, False, False), False), ((False, True, False), False), ((False, False, True), False),
                    ((True, True, True), False), ((True, True, True), True)]
    xs, ys, gss, fn = _check_vmap(case, combinations)
    want = jax_result(lambda: jax.vmap(jax.lax.ragged_dot)(xs, ys, gss))
    np.testing.assert_allclose(np.asarray(ember.jit(ember.vmap(fn))(xs, ys, gss)), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(NotImplementedError, match="ragged_dot vmap over any dim but 0"):
        jax.vmap(jax.lax.ragged_dot, in_axes=(0, None, None))(xs, ys[0], gss[0])


@pytest.mark.slow
@pytest.mark.parametrize("case", [MODE_1[2], MODE_1[3], MODE_2[1], MODE_2[2], MODE_3[0]],
                         ids=lambda c: f"{c[0]}x{c[1]}")
def test_vmap_every_combination_of_batched_arguments(case):
    """Every mode and layout: each combination of batched arguments, at the front and at the back."""
    _check_vmap(case, [(b, last) for b in itertools.product([False, True], repeat=3) if any(b)
                       for last in (False, True)])


# ---------------------------------------------------------------------------------------------------------------
# errors (JAX's words) and the lowering's size
def test_errors_as_jax():
    x, y, gs = np.ones((6, 3), np.float32), np.ones((2, 3, 4), np.float32), np.array([3, 3], np.int32)
    with pytest.raises(TypeError, match="ragged_dot_general requires that group_sizes.dtype is subtype of np.integer"):
        lax.ragged_dot(x, y, gs.astype(np.float32))
    with pytest.raises(TypeError, match="expected rhs group dimension size to be 3, got 2"):
        lax.ragged_dot(x, y, np.array([1, 2, 3], np.int32))
    with pytest.raises(TypeError, match=r"expected group_sizes to have shape \(2,\), got \(1, 2\)"):
        lax.ragged_dot(x, y, gs[None])
    with pytest.raises(TypeError, match="expected rank of group_sizes to be >=1"):
        lax.ragged_dot(x, y, np.int32(3))
    with pytest.raises(TypeError, match="dot_general"):
        lax.ragged_dot(x[:, :2], y, gs)
    with pytest.raises(TypeError, match="ragged_dot_general: operands must have the same dtype"):
        lax.ragged_dot(x, y.astype(np.float16), gs)
    with pytest.raises(TypeError, match="ragged_dot_general: group_offset is not supported"):
        lax.ragged_dot(x, y, gs, group_offset=np.array([1], np.int32))
    with pytest.raises(TypeError):  # (JAX's: its param cannot hold an array)
        jax.lax.ragged_dot(x, y, gs, group_offset=jnp.array([1]))
    bad = [(lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0, 1), (0,)),
            "ragged_dot_general expects exactly one lhs ragged dimension"),
           (lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (2,), (0,)),
            "ragged_dot_general requires lhs ragged dimension numbers to be nonnegative and less than the number"),
           (lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), ()),
            "requires exactly one rhs group dimension when lhs ragged dimension is noncontracting"),
           (lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (1,)),
            "requires rhs group dimension numbers to be distinct from contracting and batch dimensions"),
           (lax.RaggedDotDimensionNumbers((((1,), (0,)), ((), ())), (1,), (0,)),
            "requires zero group dimensions in the rhs when lhs ragged dimension is contracting or batch")]
    for dims, message in bad:
        with pytest.raises(TypeError, match=message):
            lax.ragged_dot_general(x, y if dims.lhs_ragged_dimensions != (1,) else y[0], gs, dims)
        with pytest.raises(TypeError, match=message):
            jax.lax.ragged_dot_general(x, y if dims.lhs_ragged_dimensions != (1,) else y[0], gs,
                                       jax.lax.RaggedDotDimensionNumbers(*dims.__dict__.values()))
    with pytest.raises(TypeError, match="ragged_dot_dimension_numbers must be a lax.RaggedDotDimensionNumbers"):
        lax.ragged_dot_general(x, y, gs, (((1,), (1,)), ((), ())))


def test_jaxs_dimension_numbers_are_taken():
    x, y, gs = np.ones((6, 3), np.float32), np.ones((2, 3, 4), np.float32), np.array([3, 2], np.int32)
    dims = jax.lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    np.testing.assert_array_equal(np.asarray(lax.ragged_dot_general(x, y, gs, dims)),
                                  np.asarray(jax.lax.ragged_dot_general(x, y, gs, dims)))


def test_lowering_is_tiled_not_a_dense_mask():
    """JAX's CPU form masks lhs once per group ([g, m, k]); ember's program holds that tensor only in the branch
    taken for overlapping groups (the case's second region), and computes with tiles of lhs rows ([(m + g 127) / 128,
    128, k]) and their groups' rhs ([.., k, n]): one dot's work plus under g tiles."""
    m, k, n, g = 4096, 64, 32, 8
    text = ember.jit(lax.ragged_dot).lower(np.ones((m, k), np.float32), np.ones((g, k, n), np.float32),
                                           np.full(g, m // g, np.int32)).as_text()
    case = text.index('"stablehlo.case"')
    second_region = text.index("}, {", case)
    dense = [i for i in range(len(text)) if text.startswith(f"{g}x{m}x{k}xf32", i)]
    assert dense and all(i > second_region for i in dense)
    tiles = (m + g * 127) // 128
    assert f"1x{tiles}x128x{k}xf32" in text[case:second_region] and f"1x{tiles}x{k}x{n}xf32" in text[case:second_region]
