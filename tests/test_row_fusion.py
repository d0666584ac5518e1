"""Row regions (ember/_hlo/row_fusion.py) and the fused row kernel (ember/_runtime/_rows.c): which programs hand a
region to the kernel, that it computes what XLA's own ops compute (float64 numpy and JAX as oracles, the same
program with the CPU forms off as a third), under jit, grad, vmap and control flow, with NaN, infinities and
odd row lengths, and that a malformed call is an error, not a crash."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._hlo import row_fusion, targets
from recorded import jax_result

# (the kernel on every shape the AVX-512F form takes, whichever form runs: the AVX2 form's own thresholds are
# tested in tests/test_row_kernel_isa.py)
pytestmark = [pytest.mark.skipif(not targets.available(row_fusion.TARGET),
                                 reason="the row kernel is not available here (no C extension, or neither AVX-512F "
                                        "nor AVX2 with FMA)"),
              pytest.mark.usefixtures("every_kernel_shape")]


def _calls(f, *args):
    """How many row regions the jitted f's module hands to the kernel."""
    return ember.jit(f).lower(*args).as_text().count('call_target_name = "ember_rows"')


def _plain(f, *args):
    """f's value under jit with the CPU forms off: XLA's own ops for the same program."""
    ember.config.update("cpu_backend_forms", False)
    try:
        return jax.tree_util.tree_map(np.asarray, ember.jit(f)(*args))
    finally:
        ember.config.update("cpu_backend_forms", True)


def _softmax(np_):
    def f(x):
        z = np_.exp(x - np_.max(x, axis=-1, keepdims=True))
        return z / np_.sum(z, axis=-1, keepdims=True)
    return f


def _layer_norm(np_):
    def f(x, gamma, beta):
        mean = np_.mean(x, axis=-1, keepdims=True)
        var = np_.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / np_.sqrt(var + 1e-5) * gamma + beta
    return f


def _softmax64(x):
    x = x.astype(np.float64)
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def test_opcodes_agree_with_the_kernel():
    from ember._runtime import _rows
    assert _rows.opcodes() == row_fusion.OPCODES


@pytest.mark.parametrize("shape", [(1024, 1000), (64, 8, 100), (2048, 16), (4, 40000), (33, 1031)])
def test_softmax_matches_float64_and_jax(shape):
    x = np.random.default_rng(0).normal(scale=3, size=shape).astype(np.float32)
    assert _calls(_softmax(enp), x) == 1
    got = np.asarray(ember.jit(_softmax(enp))(x))
    np.testing.assert_allclose(got, _softmax64(x), rtol=3e-6, atol=1e-9)
    theirs = jax_result(lambda: np.asarray(jax.jit(_softmax(jnp))(x)).reshape(-1)[::97])
    np.testing.assert_allclose(got.reshape(-1)[::97], theirs, rtol=3e-6, atol=1e-9)


def test_layer_norm_with_a_shared_scale_and_bias():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(512, 768)).astype(np.float32) * 4 + 2
    gamma, beta = rng.normal(size=768).astype(np.float32), rng.normal(size=768).astype(np.float32)
    text = ember.jit(_layer_norm(enp)).lower(x, gamma, beta).as_text()
    assert text.count('"ember_rows"') == 1 and "stablehlo.reduce" not in text  # one call does all of it
    got = np.asarray(ember.jit(_layer_norm(enp))(x, gamma, beta))
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    theirs = jax_result(lambda: np.asarray(jax.jit(_layer_norm(jnp))(x, gamma, beta))[::7, ::11])
    np.testing.assert_allclose(got[::7, ::11], theirs, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["logsumexp", "log_softmax", "standardize", "var", "std", "minmax", "l2"])
def test_row_functions_match_float64(name):
    x = np.random.default_rng(2).normal(scale=2, size=(256, 384)).astype(np.float32)
    x64 = x.astype(np.float64)
    f, want = {
        "logsumexp": (lambda a: ember.nn.logsumexp(a, axis=-1),
                      np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)),
        "log_softmax": (lambda a: ember.nn.log_softmax(a, axis=-1), np.log(_softmax64(x))),
        "standardize": (lambda a: ember.nn.standardize(a, axis=-1),
                        (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)),
        "var": (lambda a: enp.var(a, axis=1), x64.var(1)),
        "std": (lambda a: enp.std(a, axis=-1, keepdims=True), x64.std(-1, keepdims=True)),
        "minmax": (lambda a: (a - enp.min(a, -1, keepdims=True)) / (enp.max(a, -1, keepdims=True)
                                                                     - enp.min(a, -1, keepdims=True)),
                   (x64 - x64.min(-1, keepdims=True)) / np.ptp(x64, -1, keepdims=True)),
        "l2": (lambda a: a / enp.sqrt(enp.sum(a * a, -1, keepdims=True)),
               x64 / np.sqrt((x64 * x64).sum(-1, keepdims=True))),
    }[name]
    assert _calls(f, x) == 1
    got = np.asarray(ember.jit(f)(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(got, _plain(f, x), rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_what_stays_with_xla():
    x = np.ones((1024, 1024), np.float32)
    assert _calls(lambda a: enp.sum(a * a, axis=1), x) == 1  # a product summed: the kernel's row sums (lower_sum)
    assert _calls(_softmax(enp), np.ones((64, 64), np.float32)) == 0  # small: XLA's loops are as fast
    assert _calls(_softmax(enp), np.ones((4096, 8), np.float32)) == 0  # rows shorter than MIN_ROW
    assert _calls(lambda a: _softmax(enp)(a.T).T, x) == 1  # (the transposes stay XLA's)
    # leading axes with rows written: no region (MIN_COLUMN_OPS); the sum alone is the kernel's column sum
    assert _calls(lambda a: a / enp.sum(a, axis=0), x) == 1
    with ember.config.override(enable_x64=True):
        assert _calls(_softmax(enp), np.ones((512, 512), np.float64)) == 0  # float32 only
    ember.config.update("cpu_backend_forms", False)
    try:
        assert _calls(_softmax(enp), x) == 0
    finally:
        ember.config.update("cpu_backend_forms", True)
    ir = ember.jit(_softmax(enp)).trace(x).jaxpr
    assert "ember_rows" not in ember.lower(ir, platform=None)  # a portable module


def test_sharded_program_keeps_xla_ops():
    if len(ember.devices()) < 2:
        pytest.skip("needs 2 CPU devices")
    mesh = ember.make_mesh((2,), ("x",))
    x = ember.device_put(np.random.default_rng(3).normal(size=(1024, 256)).astype(np.float32),
                         ember.NamedSharding(mesh, ember.P("x")))
    assert "ember_rows" not in ember.jit(_softmax(enp)).lower(x).as_text()
    np.testing.assert_allclose(np.asarray(ember.jit(_softmax(enp))(x)), _softmax64(np.asarray(x)), rtol=3e-6,
                               atol=1e-9)


def test_nan_and_infinities_as_xla():
    x = np.random.default_rng(4).normal(size=(256, 256)).astype(np.float32)
    x[3, 7] = np.nan               # NaN in a row: its max, and so its softmax, is NaN
    x[5, :] = -np.inf              # a row of -inf: -inf - -inf is NaN
    x[9, 17] = np.inf              # +inf: inf - inf is NaN, the rest exp(-inf) = 0
    x[11, ::2] = -np.inf           # masked entries: exactly 0
    x[13, 3] = 200.0               # exp overflows in float32 without the max subtracted
    got = np.asarray(ember.jit(_softmax(enp))(x))
    np.testing.assert_allclose(got, _plain(_softmax(enp), x), rtol=3e-6, atol=1e-30, equal_nan=True)
    assert np.isnan(got[3]).all() and np.isnan(got[5]).all() and np.isnan(got[9, 17])
    assert (got[11, ::2] == 0).all() and got[13, 3] == 1.0
    # min, max and exp at the edges of float32: overflow to inf, underflow to 0, NaN kept
    e = np.linspace(-110, 95, 256 * 128, dtype=np.float32).reshape(256, 128)
    e[0, 0] = np.nan
    f = lambda a: (enp.exp(a) - enp.min(a, -1, keepdims=True)) * enp.max(a, -1, keepdims=True)  # noqa: E731
    assert _calls(f, e) == 1
    got, plain = np.asarray(ember.jit(f)(e)), _plain(f, e)
    np.testing.assert_allclose(got, plain, rtol=2e-6, atol=0, equal_nan=True)
    assert np.isinf(got).any() and np.isnan(got[0]).all()


def test_inputs_of_every_kind_and_several_outputs():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(64, 16, 96)).astype(np.float32)   # rows of 96 under two leading dims
    shift = rng.normal(size=(64, 16, 1)).astype(np.float32)  # a scalar per row
    scale = rng.normal(size=(96,)).astype(np.float32)        # a row shared by all rows
    t = np.float32(0.7)                                      # a scalar

    def f(a, s, w, temp):
        z = (a - s) * w / temp
        m = enp.max(z, axis=-1, keepdims=True)
        e = enp.exp(z - m)
        total = enp.sum(e, axis=-1)
        return e / total[..., None], m, total, enp.broadcast_to(m, z.shape)  # rows, scalars, a broadcast output
    assert _calls(f, x, shift, scale, t) == 1
    got = ember.jit(f)(x, shift, scale, t)
    z = (x.astype(np.float64) - shift) * scale / np.float64(t)
    m = z.max(-1, keepdims=True)
    e = np.exp(z - m)
    want = (e / e.sum(-1, keepdims=True), m, e.sum(-1), np.broadcast_to(m, z.shape))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6 * np.abs(w).max())


@pytest.mark.parametrize("name", ["sum_exp", "mean_square", "max", "min", "two_axes", "used_after"])
def test_column_reductions(name):
    # reductions over the leading axes (the rows combined into one output row), with their elementwise producer
    rng = np.random.default_rng(9)
    x = rng.normal(size=(1024, 300)).astype(np.float32)
    x3 = rng.normal(size=(16, 64, 100)).astype(np.float32)
    x64 = x.astype(np.float64)
    f, arg, want = {
        "sum_exp": (lambda a: enp.sum(enp.exp(a), axis=0), x, np.exp(x64).sum(0)),
        "mean_square": (lambda a: enp.mean(a * a, axis=0), x, (x64 * x64).mean(0)),
        "max": (lambda a: enp.max(a * 2.0 - 1.0, axis=0), x, (x64 * 2 - 1).max(0)),
        "min": (lambda a: enp.min(a, axis=0), x, x64.min(0)),
        "two_axes": (lambda a: enp.sum(enp.abs(a), axis=(0, 1)), x3, np.abs(x3.astype(np.float64)).sum((0, 1))),
        "used_after": (lambda a: a / enp.sum(enp.exp(a), axis=0), x, x64 / np.exp(x64).sum(0)),
    }[name]
    assert _calls(f, arg) == 1
    got = np.asarray(ember.jit(f)(arg))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7 * np.abs(want).max())


def test_column_max_keeps_nan_and_rows_written_stay_with_xla():
    x = np.random.default_rng(10).normal(size=(512, 256)).astype(np.float32)
    x[17, 3] = np.nan
    got = np.asarray(ember.jit(lambda a: enp.max(a, axis=0))(x))
    np.testing.assert_array_equal(got, x.max(0))
    assert np.isnan(got[3]) and not np.isnan(got[4])
    # a column sum next to rows the program also writes (a bias gradient beside the weight gradient's operand)
    # is XLA's: the kernel ran it slower
    f = lambda a: (a * 2.0 + 1.0, enp.sum(enp.exp(a * 2.0 + 1.0), axis=0))  # noqa: E731
    assert _calls(f, x) == 0
    rows, sums = ember.jit(f)(x)
    np.testing.assert_allclose(np.asarray(sums), np.exp(x.astype(np.float64) * 2 + 1).sum(0), rtol=2e-6)


def test_an_outside_use_closes_the_region():
    x = np.random.default_rng(6).normal(size=(256, 256)).astype(np.float32)

    def f(a):
        m = enp.max(a, axis=-1, keepdims=True)
        k = enp.argsort(m[:, 0])                  # not the kernel's: it uses m, so the region closes before it
        z = enp.exp(a - m)
        return z / enp.sum(z, -1, keepdims=True), k
    got, k = ember.jit(f)(x)
    np.testing.assert_allclose(np.asarray(got), _softmax64(x), rtol=3e-6, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(k), np.argsort(x.max(-1), kind="stable"))


def test_gradients_vmap_and_control_flow_match_jax():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(128, 512)).astype(np.float32)
    gamma = rng.normal(size=512).astype(np.float32)
    beta = np.zeros(512, np.float32)
    labels = rng.integers(0, 512, size=128)

    def loss(np_, nn):
        def f(a, g, b):
            h = _layer_norm(np_)(a, g, b)
            logp = nn.log_softmax(h * 3, axis=-1)
            return -np_.mean(np_.take_along_axis(logp, labels[:, None], axis=-1))
        return f
    value, grads = ember.jit(ember.value_and_grad(loss(enp, ember.nn), argnums=(0, 1)))(x, gamma, beta)
    assert _calls(ember.grad(loss(enp, ember.nn), argnums=(0, 1)), x, gamma, beta) >= 2
    def jax_side():
        out = jax.jit(jax.value_and_grad(loss(jnp, jax.nn), argnums=(0, 1)))(x, gamma, beta)
        return jax.tree_util.tree_map(lambda v: np.asarray(v)[..., ::5] if np.ndim(v) else np.asarray(v), out)
    jvalue, jgrads = jax_result(jax_side)
    np.testing.assert_allclose(float(value), float(jvalue), rtol=1e-5)
    for g, j in zip(grads, jgrads):
        np.testing.assert_allclose(np.asarray(g)[..., ::5], j, rtol=2e-4, atol=2e-6 * np.abs(j).max())
    # vmap over a leading batch: the batched program's rows
    xs = rng.normal(size=(8, 64, 300)).astype(np.float32)
    got = ember.jit(ember.vmap(_softmax(enp)))(xs)
    np.testing.assert_allclose(np.asarray(got), _softmax64(xs), rtol=3e-6, atol=1e-9)
    # a scan body and a cond branch: each body gets its own regions

    def step(carry, row_block):
        return carry + 1, _softmax(enp)(row_block * carry)
    blocks = rng.normal(size=(3, 128, 300)).astype(np.float32)  # (each step's rows: 38400 elements)
    _, ys = ember.jit(lambda a: ember.lax.scan(step, np.float32(1), a))(blocks)
    want = np.stack([_softmax64(blocks[i] * (i + 1)) for i in range(3)])
    np.testing.assert_allclose(np.asarray(ys), want, rtol=3e-6, atol=1e-9)
    branch = ember.jit(lambda p, a: ember.lax.cond(p, _softmax(enp), lambda v: v, a))
    np.testing.assert_allclose(np.asarray(branch(True, x)), _softmax64(x), rtol=3e-6, atol=1e-9)
    assert "ember_rows" in ember.jit(lambda a: ember.lax.scan(step, np.float32(1), a)).lower(blocks).as_text()


def _module(program):
    """The module of a softmax of f32[1024, 64], its row program replaced by the given one."""
    text = ember.jit(_softmax(enp)).lower(np.ones((1024, 64), np.float32)).as_text()
    words = ", ".join(str(int(w)) for w in program)
    text, count = re.subn(r"dense<\[[-0-9, ]*\]> : tensor<(\d+)xi32>", f"dense<[{words}]> : tensor<{len(program)}xi32>",
                          text)
    assert count == 1
    return re.sub(r"tensor<\d+xi32>", f"tensor<{len(program)}xi32>", text)


NONE = 15 << 28
OP = row_fusion.OPCODES


@pytest.mark.parametrize("program", [
    [1, 0, 0, 0, 99, 2 << 28, 1 << 28, 0, 0, NONE],                       # an opcode the kernel does not have
    [1, 0, 0, 0, OP["add"], 2 << 28, 1 << 28, (1 << 28) | 5, 0, NONE],   # an input that is not there
    [1, 0, 0, 0, OP["sum"], 2 << 28, 1 << 28, 0, 0, NONE],               # a sum into a row
    [2, 0, 0, 0, OP["add"], 2 << 28, 1 << 28, 1 << 28, 0, NONE],         # shorter than its header says
    [1, 0, 0, 0, OP["add"], 7 << 28, 1 << 28, 1 << 28, 0, NONE],         # a write to a literal
    [1, 0, 0, 0, OP["add"], NONE, 1 << 28, 1 << 28, 0, NONE],            # a result neither stored nor summed
    [1, 0, 0, 0, OP["select"], 2 << 28, 1 << 28, 1 << 28, (3 << 28) | 9, NONE],  # a shared row that is not there
    [1, 0, 0, 0, OP["column_sum"], 2 << 28, 1 << 28, 0, 0, NONE],          # a column sum into a matrix output
    [2, 0, 0, 0, OP["column_sum"], 9 << 28, 1 << 28, 0, 0, NONE,
     OP["add"], 2 << 28, 9 << 28, 1 << 28, 0, NONE],                        # a column result read (and too short)
    [1, 0, 0, 0, OP["add"], 9 << 28, 1 << 28, 1 << 28, 0, NONE],            # a row op into a column output
], ids=["opcode", "input", "sum-to-row", "length", "literal", "nowhere", "shared", "column-to-matrix",
        "column-read", "row-to-column"])
def test_a_malformed_program_is_an_error_not_a_crash(program):
    from ember._runtime import get_client
    client = get_client()
    program = np.asarray(program, np.uint32).view(np.int32)
    exe = client.compile(_module(program))
    arg = client.buffer_from_numpy(np.ones((1024, 64), np.float32))
    with pytest.raises(Exception, match="ember_rows"):
        exe.execute([arg], [((1024, 64), np.dtype(np.float32))])[0].block_until_ready()


# ---------------------------------------------------------------------------------------------------------------
# Batched matrix products (custom_call @ember_rows_bmm, chosen in ember/_hlo/backend_forms.py: _batched_dot)
@pytest.mark.parametrize("spec, shapes", [
    ("bqd,bkd->bqk", [(16, 128, 64), (16, 128, 64)]),           # a transposed right operand (attention's scores)
    ("bqk,bkd->bqd", [(16, 128, 128), (16, 128, 64)]),          # plain
    ("bdq,bdk->bqk", [(8, 64, 100), (8, 64, 70)]),              # a transposed left operand, odd sides
    ("bdq,bkd->bqk", [(8, 33, 97), (8, 45, 33)]),               # both transposed, sides not multiples of 6 or 32
    ("bhqd,bhkd->bhqk", [(4, 4, 64, 48), (4, 4, 80, 48)]),      # two batch dims
    ("bqd,bdk->bqk", [(3, 250, 300), (3, 300, 17)]),            # a long contraction, a narrow result
])
def test_batched_products_match_numpy(spec, shapes):
    rng = np.random.default_rng(11)
    a, b = (rng.normal(size=s).astype(np.float32) for s in shapes)
    f = lambda x, y: enp.einsum(spec, x, y)  # noqa: E731
    assert ember.jit(f).lower(a, b).as_text().count('"ember_rows_bmm"') == 1
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(ember.jit(f)(a, b)), want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


def test_batched_products_grad_and_vmap_match_jax():
    rng = np.random.default_rng(12)
    q, k, v = (rng.normal(size=(4, 4, 64, 32)).astype(np.float32) for _ in range(3))

    def attend(np_, nn):
        def f(q, k, v):
            p = nn.softmax(np_.einsum("bhqd,bhkd->bhqk", q, k) / 8.0, axis=-1)
            return np_.sum(np_.einsum("bhqk,bhkd->bhqd", p, v) ** 2)
        return f
    grads = ember.jit(ember.grad(attend(enp, ember.nn), argnums=(0, 1, 2)))(q, k, v)
    assert ember.jit(ember.grad(attend(enp, ember.nn), argnums=(0, 1, 2))).lower(q, k, v).as_text().count(
        '"ember_rows_bmm"') >= 4
    jgrads = jax_result(lambda: [np.asarray(g)[:, :, ::3] for g in jax.jit(jax.grad(attend(jnp, jax.nn),
                                                                                      argnums=(0, 1, 2)))(q, k, v)])
    for g, j in zip(grads, jgrads):
        np.testing.assert_allclose(np.asarray(g)[:, :, ::3], j, rtol=2e-4, atol=2e-5 * np.abs(j).max())
    # vmap of a matrix product: a batched product
    xs, w = rng.normal(size=(32, 64, 48)).astype(np.float32), rng.normal(size=(32, 48, 40)).astype(np.float32)
    got = ember.jit(ember.vmap(lambda x, y: x @ y))(xs, w)
    np.testing.assert_allclose(np.asarray(got), np.einsum("bij,bjk->bik", xs.astype(np.float64), w), rtol=2e-5,
                               atol=1e-4)


def test_small_batched_products_stay_with_xla():
    a = np.ones((4, 16, 4), np.float32)   # a side under BMM_MIN_SIDE
    assert "ember_rows_bmm" not in ember.jit(lambda x: enp.einsum("bij,bkj->bik", x, x)).lower(a).as_text()
    a = np.ones((2, 32, 32), np.float32)  # under BMM_MIN_WORK multiply-adds
    assert "ember_rows_bmm" not in ember.jit(lambda x: x @ x).lower(a).as_text()
    a = np.ones((8, 64, 64), np.float64)  # float64: XLA's
    with ember.config.override(enable_x64=True):
        assert "ember_rows_bmm" not in ember.jit(lambda x: x @ x).lower(a).as_text()


def test_a_malformed_product_is_an_error_not_a_crash():
    from ember._runtime import get_client
    client = get_client()
    a = np.ones((8, 64, 64), np.float32)
    text = ember.jit(lambda x: x @ x).lower(a).as_text().replace("m = 64 : i64", "m = 65 : i64")
    exe = client.compile(text)
    arg = client.buffer_from_numpy(a)
    with pytest.raises(Exception, match="ember_rows_bmm"):
        exe.execute([arg], [((8, 64, 64), np.dtype(np.float32))])[0].block_until_ready()


def test_donated_input_and_concurrent_callers():
    # XLA may put a program's output in a donated input's buffer; the kernel reads its input while writing its
    # output, so they must not share one (they do not: the custom call declares no aliasing)
    x = np.random.default_rng(13).normal(size=(512, 300)).astype(np.float32)
    f = ember.jit(_softmax(enp), donate_argnums=0)
    np.testing.assert_allclose(np.asarray(f(ember.asarray(x))), _softmax64(x), rtol=3e-6, atol=1e-9)
    # several Python threads in the kernel at once: one uses the thread pool, the others run their rows themselves
    import threading
    g = ember.jit(lambda a: (_softmax(enp)(a), enp.einsum("bij,bkj->bik", a[:256].reshape(16, 16, 600),
                                                          a[:256].reshape(16, 16, 600))))
    big = np.random.default_rng(14).normal(size=(2048, 600)).astype(np.float32)
    want = g(big)
    text = g.lower(big).as_text()
    assert '"ember_rows"' in text and '"ember_rows_bmm"' in text
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append([np.asarray(v) for v in g(big)])
        except Exception as err:  # (reported below)
            errors.append(err)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 20
    for r in results:
        for got, w in zip(r, want):
            np.testing.assert_array_equal(got, np.asarray(w))  # (the same program: the same bits every time)


def test_the_kernels_thread_pool_uses_the_cpus_the_process_may_use():
    """The row kernel splits a job among as many threads as the process may use CPUs (its affinity), not as many as
    the machine has online (up to 15 workers contending for 2 CPUs in a container)."""
    import os
    rows = pytest.importorskip("ember._runtime._rows")
    allowed = os.sched_getaffinity(0)
    assert rows.threads() == min(16, len(allowed))
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert rows.threads() == 1
    finally:
        os.sched_setaffinity(0, allowed)


def test_regions_are_a_pass_over_the_ir():
    """row_regions is an IR -> IR pass run on each body before it is lowered: the equations a region takes become
    one row_region equation (printable, reading the values the region reads from outside), the others stay."""
    from ember._hlo import row_fusion
    ir = ember.stage_out(_softmax(enp), ember.ShapedArray((1024, 1000), "f32"))
    passed = row_fusion.row_regions(ir)
    regions = [e for e in passed.eqns if e.prim is row_fusion.row_region_p]
    assert len(regions) == 1 and len(passed.eqns) < len(ir.eqns)
    assert regions[0].inputs == [ir.in_vars[0]] and list(regions[0].outputs) == list(passed.outs)
    assert "row_region" in str(passed) and "row region over (1024,)x(1000,)" in str(passed)
    assert row_fusion.row_regions(ember.stage_out(lambda a: a + 1, ember.ShapedArray((4,), "f32"))).eqns[0].prim.name \
        == "add"  # (nothing to take: the same equations)


# ---------------------------------------------------------------------------------------------------------------
# Transposes that materialize (custom_call @ember_rows_transpose, chosen by row_fusion.kernel_transposes)
@pytest.mark.parametrize("shape, perm, kernel", [
    ((1024, 1024), (1, 0), True), ((1000, 1030), (1, 0), True), ((4, 257, 300), (0, 2, 1), True),
    ((128, 40, 60), (1, 2, 0), True), ((5, 300, 301), (2, 0, 1), True), ((17, 1000, 33), (2, 1, 0), False),
    ((4096, 8), (1, 0), False), ((256, 256), (1, 0), False)])
def test_transposes_the_kernel_runs(shape, perm, kernel):
    from ember._hlo.row_fusion import TRANSPOSE_TARGET, transpose_split
    rng = np.random.default_rng(9)
    x = rng.normal(size=shape).astype(np.float32)
    k = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    f = ember.jit(lambda a, b: (enp.transpose(a, perm), enp.transpose(b, perm) + 1))
    text = f.lower(x, k).as_text()
    available = targets.available(TRANSPOSE_TARGET)
    assert (text.count(TRANSPOSE_TARGET) == 2) == (kernel and available)
    got_x, got_k = f(x, k)
    np.testing.assert_array_equal(np.asarray(got_x), np.transpose(x, perm))
    np.testing.assert_array_equal(np.asarray(got_k), np.transpose(k, perm) + 1)
    if kernel:
        assert transpose_split(shape, perm) is not None


def test_transposes_a_product_reads_stay_xlas():
    """XLA folds a transpose into the dot that reads it (no copy): those are not the kernel's; a transpose of a
    float64 or complex array neither (4-byte elements only). grad and vmap see the transpose primitive as ever."""
    x = np.random.default_rng(10).normal(size=(512, 512)).astype(np.float32)
    assert "ember_rows_transpose" not in ember.jit(lambda a: a.T @ a).lower(x).as_text()
    with ember.config.override(enable_x64=True):
        assert "ember_rows_transpose" not in ember.jit(lambda a: a.T).lower(x.astype(np.float64)).as_text()
    g = ember.jit(ember.grad(lambda a: (enp.sin(a.T) * enp.arange(512.0)).sum()))(x)
    np.testing.assert_allclose(np.asarray(g), (np.cos(x.T) * np.arange(512.0)).T, rtol=2e-6, atol=1e-6)
    v = ember.jit(ember.vmap(lambda a: a.T + 0))(x.reshape(2, 256, 512))
    np.testing.assert_array_equal(np.asarray(v), x.reshape(2, 256, 512).transpose(0, 2, 1))
