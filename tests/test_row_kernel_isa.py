"""The CPU kernels' instruction sets (ember/_runtime/_rows.c): the kernels run where the CPU has AVX-512F (its
16-lane forms) or AVX2 with FMA (the 8-lane forms), and on either agree with XLA's own ops (the same program with the
CPU forms off) and float64 numpy: every row op at row lengths that leave every tail of 8 and 16 lanes, NaN and
infinities in the tails, exp at the edges of float32, batched products with partial blocks, transposes with partial
register blocks."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._hlo import backend_forms, row_fusion, targets

TARGETS = (row_fusion.TARGET, backend_forms.BMM_TARGET, row_fusion.TRANSPOSE_TARGET)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def _expected_isa():
    flags = _cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo flags to read")
    if "avx512f" in flags:
        return "avx512f"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    pytest.skip("the CPU has neither AVX-512F nor AVX2 with FMA: no kernels")


def test_the_kernels_run_where_the_cpu_has_avx512f_or_avx2_and_fma():
    want = _expected_isa()
    rows = pytest.importorskip("ember._runtime._rows")
    assert rows.isa() == want
    assert set(rows.handlers()) == set(TARGETS)
    assert all(targets.available(t) for t in TARGETS)


needs_kernels = pytest.mark.skipif(not all(targets.available(t) for t in TARGETS),
                                   reason="the CPU kernels are not available here")
needs_avx2 = pytest.mark.skipif(targets.variant(row_fusion.TARGET) != "avx2",
                                reason="the AVX2 form of the kernels does not run here")


@needs_avx2
def test_the_avx2_thresholds():
    """Where the AVX2 form runs, rows of up to 256, batched products of 2^16 multiply-adds or more each and
    transposes of sides not multiples of 8 stay XLA's (measured slower there: row_fusion.MIN_ROW_AVX2,
    backend_forms.BMM_AVX2_MAX_PRODUCT, row_fusion.AVX2_TRANSPOSE_MULTIPLE); column regions keep MIN_ROW."""
    def calls(f, *shapes):
        return ember.jit(f).lower(*[np.ones(s, np.float32) for s in shapes]).as_text().count("ember_rows")

    softmax = lambda a: enp.exp(a) / enp.sum(enp.exp(a), axis=-1, keepdims=True)  # noqa: E731
    assert calls(softmax, (4096, 64)) == 0 and calls(softmax, (512, 256)) == 0 and calls(softmax, (256, 257)) == 1
    assert calls(lambda a: enp.sum(a * a, axis=-1), (2048, 128)) == 0
    assert calls(lambda a: enp.sum(enp.exp(a), axis=0), (4096, 64)) == 1  # (a column region)
    assert calls(lambda a: enp.transpose(a, (0, 2, 1)), (4, 256, 300)) == 0
    assert calls(lambda a: enp.transpose(a, (0, 2, 1)), (4, 264, 304)) == 1
    bmm = lambda a, b: enp.einsum("bmk,bkn->bmn", a, b)  # noqa: E731
    assert calls(bmm, (64, 128, 128), (64, 128, 64)) == 0 and calls(bmm, (256, 8, 32), (256, 32, 16)) == 1


def _plain(f, *args):
    """f's value under jit with the CPU forms off: XLA's own ops for the same program."""
    ember.config.update("cpu_backend_forms", False)
    try:
        return [np.asarray(v) for v in ember.jit(f)(*args)]
    finally:
        ember.config.update("cpu_backend_forms", True)


def _ops(a, w):
    """Every elementwise op of the row programs, the three row reductions, a select, a fused sum."""
    t = enp.sign(a) * enp.abs(a) + enp.sqrt(enp.abs(a)) * w - enp.maximum(a, w) / 3.0 + enp.minimum(a, 0.5)
    t = enp.where(a > 0.25, t, -a) + enp.isfinite(a).astype(enp.float32)
    return (t, enp.sum(enp.exp(a) * w, axis=-1), enp.max(a, axis=-1), enp.min(a, axis=-1),
            enp.sum(a * a, axis=-1), enp.sum(enp.exp(-enp.abs(a)), axis=0))


@needs_kernels
@pytest.mark.usefixtures("every_kernel_shape")
@pytest.mark.parametrize("n", [16, 17, 23, 31, 33, 40, 63, 64, 65, 71, 100, 127, 1000, 1023, 1025, 4100])
def test_every_row_op_at_every_tail(n):
    m = (1 << 15) // n + 3
    rng = np.random.default_rng(n)
    a = rng.normal(size=(m, n)).astype(np.float32)
    w = rng.normal(size=(n,)).astype(np.float32)
    a[1, -1] = np.nan      # NaN in a row's tail (max, min, sums NaN)
    a[2, 0] = np.nan       # and in its first vector
    a[3, -1] = np.inf      # +inf in the tail
    a[4, n // 2] = -np.inf
    a[5, -(n % 8 or 8):] = np.nan  # the whole last (partial) vector
    assert ember.jit(_ops).lower(a, w).as_text().count('"ember_rows"') >= 1
    got = [np.asarray(v) for v in ember.jit(_ops)(a, w)]
    plain = _plain(_ops, a, w)
    for g, p in zip(got, plain):
        assert g.shape == p.shape
        np.testing.assert_allclose(g, p, rtol=3e-6, atol=1e-5 * np.nanmax(np.abs(p[np.isfinite(p)])),
                                   equal_nan=True)
    # float64: the sums to their rounding (n terms), NaN where the row has one, max/min exactly
    a64 = a.astype(np.float64)
    bad = ~np.isfinite(a).all(-1)
    np.testing.assert_array_equal(np.isnan(got[2]), np.isnan(a).any(-1))
    np.testing.assert_array_equal(got[2], a.max(-1))
    np.testing.assert_array_equal(got[3], a.min(-1))
    ok = ~bad
    want = (np.exp(a64) * w).sum(-1)
    bound = 4 * np.finfo(np.float32).eps * (np.exp(a64) * np.abs(w)).sum(-1) * max(1, np.log2(n))
    assert (np.abs(got[1][ok] - want[ok]) <= bound[ok]).all()
    want = (a64 * a64).sum(-1)
    assert (np.abs(got[4][ok] - want[ok]) <= 4e-7 * max(1, np.log2(n)) * want[ok]).all()
    assert np.isnan(got[4][[1, 2, 5]]).all() and got[4][3] == np.inf and got[4][4] == np.inf
    np.testing.assert_allclose(got[5], np.exp(-np.abs(a64)).sum(0), rtol=2e-5)  # (NaN where a column has one)


@needs_kernels
def test_exp_to_2_ulp_and_at_the_edges_of_float32():
    x = np.linspace(-87.0, 88.7, 512 * 1024, dtype=np.float32).reshape(512, 1024)
    to_inf = [88.7229, 88.8, 89.0, 100.0, np.inf, 1e30]
    to_zero = [-104.0, -110.0, -np.inf, -1e30]
    to_one = [0.0, -0.0, 1e-30]
    others = [-87.3, -87.4, -88.0, -100.0, -103.9]  # (subnormal results: flushed or not as XLA's)
    edges = np.array(to_inf + to_zero + to_one + [np.nan] + others, np.float32)
    x[7, :edges.size] = edges
    x[9, -edges.size:] = edges  # (in the row's last vectors, the tail among them)

    def f(a):
        return enp.exp(a), enp.max(a, axis=-1)
    assert ember.jit(f).lower(x).as_text().count('"ember_rows"') == 1
    got = np.asarray(ember.jit(f)(x)[0])
    plain = _plain(f, x)[0]
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    normal = (want >= np.finfo(np.float32).tiny) & (want <= np.finfo(np.float32).max)
    ulp = np.spacing(want[normal].astype(np.float32)).astype(np.float64)
    assert (np.abs(got[normal] - want[normal]) <= 2 * ulp).all()
    i, z, o = len(to_inf), len(to_inf) + len(to_zero), len(to_inf) + len(to_zero) + len(to_one)
    for e, p in ((got[7, :edges.size], plain[7, :edges.size]), (got[9, -edges.size:], plain[9, -edges.size:])):
        assert (e[:i] == np.inf).all()   # overflow to inf, as XLA's
        assert (e[i:z] == 0).all()       # underflow to 0
        assert (e[z:o] == 1).all() and np.isnan(e[o])
        np.testing.assert_allclose(e, p, rtol=2e-6, atol=0, equal_nan=True)


@needs_kernels
@pytest.mark.usefixtures("every_kernel_shape")
@pytest.mark.parametrize("batch, m, k, n", [(64, 13, 40, 37), (8, 67, 64, 70), (4, 8, 200, 200), (16, 31, 31, 95),
                                            (32, 64, 64, 64)])
@pytest.mark.parametrize("spec", ["bmk,bkn->bmn", "bkm,bkn->bmn", "bmk,bnk->bmn", "bkm,bnk->bmn"])
def test_batched_products_with_partial_blocks(batch, m, k, n, spec):
    rng = np.random.default_rng(m * n)
    shape = {"b": batch, "m": m, "k": k, "n": n}
    a, b = (rng.normal(size=[shape[c] for c in s]).astype(np.float32) for s in spec.split("->")[0].split(","))
    f = lambda x, y: (enp.einsum(spec, x, y),)  # noqa: E731
    assert backend_forms.BMM_TARGET in ember.jit(f).lower(a, b).as_text()
    got = np.asarray(ember.jit(f)(a, b)[0])
    exact = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    scale = np.einsum(spec, np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert (np.abs(got - exact) <= 2 * k * np.finfo(np.float32).eps * scale).all()
    np.testing.assert_allclose(got, _plain(f, a, b)[0], rtol=1e-4, atol=1e-5 * scale.max())


@needs_kernels
@pytest.mark.usefixtures("every_kernel_shape")
@pytest.mark.parametrize("shape, perm", [((1003, 1001), (1, 0)), ((3, 517, 263), (0, 2, 1)),
                                         ((64, 9, 1031), (2, 0, 1))])
def test_transposes_with_partial_register_blocks(shape, perm):
    x = np.random.default_rng(7).normal(size=shape).astype(np.float32)
    f = ember.jit(lambda a: enp.transpose(a, perm))
    assert row_fusion.TRANSPOSE_TARGET in f.lower(x).as_text()
    np.testing.assert_array_equal(np.asarray(f(x)), np.transpose(x, perm))
