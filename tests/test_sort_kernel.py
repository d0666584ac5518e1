"""ember's sort kernel (custom_call @ember_sort, ember/_runtime/_sort.c) against XLA's sort (the same program with
the kernel's provider emptied: the order ember and JAX sort in on the CPU, bit for bit), numpy and JAX: every dtype
the kernel takes, NaN / inf / -0.0 / subnormals, stability, empty and odd shapes, rows short and long (the
vectorized quicksort, its bitonic base case, the radix sort, the rows shared by threads), several keys, another
axis, vmap and gradients. The kernel's calls run once with each of its paths this CPU has (the AVX-512 and AVX2
quicksorts, the portable radix sort: `_sort.set_isa`), all giving the same bits. Where the kernel is not built, the
tests compare XLA's sort with itself and numpy."""
import importlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._hlo import targets
from ember._prims.sorting import SORT_TARGET

KERNEL = targets.available(SORT_TARGET)
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
INTS = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.fixture(autouse=True)
def x64():
    with ember.enable_x64(True):
        yield


def xla_sort(f, *args):
    """f(*args) jitted with XLA's own sort (ember's CPU forms off for the call: a key of the program caches)."""
    with ember.config.override(cpu_backend_forms=False):
        assert "ember_sort" not in ember.jit(f).lower(*args).as_text()
        return ember.jit(f)(*args)


_KERNEL_MODULE = importlib.import_module("ember._runtime._sort") if KERNEL else None
_ISA_ORDER = ["portable", "avx2", "avx512f"]
ISAS = _ISA_ORDER[:_ISA_ORDER.index(_KERNEL_MODULE.isa()) + 1] if KERNEL else [None]


def on_each_isa(call):
    """call() under each of the kernel's paths this CPU runs (one compiled program: the kernel chooses its path when
    it runs); every path's results must be the same bits. Returns the first path's."""
    results = []
    for isa in ISAS:
        if isa is not None:
            _KERNEL_MODULE.set_isa(isa)
        try:
            results.append(jax.tree_util.tree_map(np.asarray, call()))
        finally:
            if isa is not None:
                _KERNEL_MODULE.set_isa(None)
    for isa, other in zip(ISAS[1:], results[1:]):
        for a, b in zip(jax.tree_util.tree_leaves(results[0]), jax.tree_util.tree_leaves(other)):
            try:
                same_bits(a, b)
            except AssertionError as e:
                raise AssertionError(f"the {isa} kernel differs from the {ISAS[0]} one") from e
    return results[0]


def kernel_sort(f, *args, row=None):
    """f(*args) jitted as ember lowers it: with the kernel where it is built and the sorted rows (of length `row`,
    by default the first argument's last dimension) are at least 16 long; run on each of the kernel's paths."""
    row = np.shape(args[0])[-1] if row is None else row
    text = ember.jit(f).lower(*args).as_text()
    assert (f'"{SORT_TARGET}"' in text) == (KERNEL and row >= 16)
    return on_each_isa(lambda: ember.jit(f)(*args))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind in "fc" or a.dtype == ml_dtypes.bfloat16:
        width = min(a.dtype.itemsize, 8)  # (complex: its two parts)
        a, b = a.view(f"u{width}"), b.view(f"u{width}")
    np.testing.assert_array_equal(a, b)


def values(dtype, n, seed=0, *, specials=True, distinct=None):
    """n values of dtype, with the specials of floats (NaNs of both signs and payloads, infinities, zeros of both
    signs, subnormals) and many repeats."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        if distinct:
            out = rng.integers(0, distinct, n).astype(dtype)
        return out
    out = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    if distinct:
        out = rng.integers(-distinct // 2, distinct // 2, n).astype(dtype)
    if specials and n >= 8:
        bits = out.view(f"u{dtype.itemsize}")
        width = 8 * dtype.itemsize
        exp_bits = {2: 5 if dtype == np.float16 else 8, 4: 8, 8: 11}[dtype.itemsize]
        mantissa = width - 1 - exp_bits
        sign = 1 << (width - 1)
        quiet = ((1 << exp_bits) - 1) << mantissa | 1 << (mantissa - 1)
        special = [quiet, quiet | sign, quiet | 1, ((1 << exp_bits) - 1) << mantissa,  # NaNs, +inf
                   (((1 << exp_bits) - 1) << mantissa) | sign, 0, sign, 1, sign | 3, (1 << mantissa) - 1]
        at = rng.choice(n, size=min(n, 4 * len(special)), replace=False)
        bits[at] = np.array(special * 4, dtype=bits.dtype)[:len(at)]
    return out


SHAPES = [(0,), (1,), (17,), (300,), (3, 257), (2, 3, 40), (5000,)]


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
def test_sort_is_xla_sort_bit_for_bit(dtype):
    xs = [values(dtype, int(np.prod(shape)), seed=k).reshape(shape) for k, shape in enumerate(SHAPES)]
    f = lambda *a: [lax.sort(x) for x in a]  # noqa: E731  (one program: rows of 0 to 5000, one to six of them)
    for x, got, want in zip(xs, kernel_sort(f, *xs, row=5000), xla_sort(f, *xs)):
        same_bits(got, want)
        if np.dtype(dtype).kind in "biu":
            same_bits(got, np.sort(x, axis=-1))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint64, np.int8])
def test_argsort_and_key_value_sorts_are_stable(dtype):
    x = values(dtype, 3000, seed=3, distinct=40)  # (many ties)
    order = kernel_sort(lambda a: enp.argsort(a, stable=True), x)
    flushed = x  # (XLA's CPU compares f32 and f64 with subnormals flushed to zero: so does the kernel)
    if np.dtype(dtype) in (np.float32, np.float64):
        flushed = np.where(np.abs(x) < np.finfo(dtype).tiny, 0, x)
    np.testing.assert_array_equal(np.asarray(order), np.argsort(flushed, kind="stable"))
    v = np.arange(3000, dtype=np.int64).astype(np.complex128) * (1 + 2j)
    f = lambda k, v: lax.sort_key_val(k, v)  # noqa: E731
    for got, want in zip(kernel_sort(f, x, v), xla_sort(f, x, v)):
        same_bits(got, want)


def test_several_keys_sort_lexicographically():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 4, 2000).astype(np.int16)
    b = values(np.float32, 2000, seed=6, distinct=8)  # (with NaNs, zeros of both signs and subnormals)
    c = rng.integers(0, 3, 2000).astype(np.uint8)
    payload = rng.standard_normal(2000)
    f = lambda a, b, c, p: lax.sort((a, b, c, p), num_keys=3)  # noqa: E731
    got, want = kernel_sort(f, a, b, c, payload), xla_sort(f, a, b, c, payload)
    for g, w in zip(got, want):
        same_bits(g, w)
    flushed = np.where(np.abs(b) < np.finfo(np.float32).tiny, 0, b)  # (XLA's CPU compares so)
    np.testing.assert_array_equal(np.asarray(kernel_sort(lambda a, b, c: enp.lexsort((c, b, a)), a, b, c)),
                                  np.lexsort((c, flushed, a)))


def test_every_row_length_around_the_base_cases_and_partitions():
    """Rows of every length from 16 to 160 (the bitonic base cases of each kernel: up to 64 keys on AVX2, 256 on
    AVX-512, padded to a power of two of vectors; the partitions' first and last vectors, the tails shorter than a
    vector), 4- and 8-byte keys, sorted and argsorted, in one program, against numpy."""
    rng = np.random.default_rng(21)
    xs = [rng.standard_normal(n).astype(np.float32) for n in range(16, 161)]
    xs += [rng.integers(-5, 5, n).astype(np.float64) for n in range(16, 161)]  # (ties: the keys' equal classes)
    f = lambda *a: [(lax.sort(x), enp.argsort(x)) for x in a]  # noqa: E731
    for x, (s, i) in zip(xs, kernel_sort(f, *xs)):
        np.testing.assert_array_equal(s, np.sort(x), err_msg=f"{x.dtype}[{x.size}]")
        np.testing.assert_array_equal(i, np.argsort(x, kind="stable"), err_msg=f"{x.dtype}[{x.size}]")


@pytest.mark.parametrize("dtype", [np.float32] + [pytest.param(d, marks=pytest.mark.slow(
    reason="float32 runs every kind by default; the 8-byte and integer keys take the same quicksort")) for d in
    (np.float64, np.int32)])
def test_inputs_that_trouble_quicksorts(dtype):
    """Rows of one value, two values, sorted, reversed, a sawtooth, all NaN, zeros of both signs (a row each)."""
    n = 20000
    i = np.arange(n)
    rows = [np.full(n, 3.0), i % 2, i, i[::-1], i % 257]
    if np.dtype(dtype).kind == "f":
        rows += [np.full(n, np.nan), np.where(i % 3 == 0, -0.0, 0.0)]
    x = np.stack(rows).astype(dtype)
    f = lambda a: (lax.sort(a), enp.argsort(a, axis=-1))  # noqa: E731
    for got, want in zip(kernel_sort(f, x), xla_sort(f, x)):
        same_bits(got, want)


_COVERED = pytest.mark.slow(reason="float32 and int16 (the quicksort's, the radix sort's shared rows) run by default")


@pytest.mark.parametrize("dtype", [np.float32, np.int16] + [pytest.param(d, marks=_COVERED)
                                                            for d in (np.float64, np.int64, np.float16)])
def test_long_rows_shared_by_threads(dtype):
    """Rows of at least 2^16: the quicksort's segments or the radix sort's chunked passes on several threads."""
    x = values(dtype, 200_003, seed=9)
    f = lambda a: (lax.sort(a), enp.argsort(a))  # noqa: E731
    for got, want in zip(kernel_sort(f, x), xla_sort(f, x)):
        same_bits(got, want)
    rows = values(dtype, 3 * 70_000, seed=10).reshape(3, 70_000)
    same_bits(kernel_sort(lambda a: lax.sort(a), rows), xla_sort(lambda a: lax.sort(a), rows))


def test_argsort_positions_are_written_not_gathered_and_survive_export():
    """argsort's iota is not passed to the kernel: the call's `positions` result holds where each element came
    from (of the iota's int32 or int64); an exported program with such a call passes the artifact check."""
    x = values(np.float32, 2 * 500, seed=15).reshape(2, 500)
    f = lambda a: (enp.argsort(a, axis=-1), lax.sort((a, ember.lax.broadcasted_iota(np.int64, a.shape, 1)),  # noqa
                                                       num_keys=1)[1])
    text = ember.jit(f).lower(x).as_text()
    if KERNEL:
        assert text.count("positions = 2 : i64") == 2 and text.count("stablehlo.iota") <= 2
    got = kernel_sort(f, x)
    for g, w in zip(got, xla_sort(f, x)):
        same_bits(g, w)
    exported = ember.export.deserialize(ember.export.export(ember.jit(f))(x).serialize())
    for g, w in zip(exported.call(x), got):
        same_bits(g, w)


def test_another_axis_is_moved_last_and_back():
    x = values(np.float32, 6 * 50 * 7, seed=11).reshape(6, 50, 7)
    for axis in (0, 1):  # (rows of 6: XLA's sort; of 50: the kernel)
        f = lambda a: (enp.sort(a, axis=axis), enp.argsort(a, axis=axis))  # noqa: E731
        got = kernel_sort(f, x, row=x.shape[axis])
        for g, w in zip(got, xla_sort(f, x)):
            same_bits(g, w)
        if KERNEL and axis == 1:
            assert "stablehlo.transpose" in ember.jit(f).lower(x).as_text()


def test_the_family_built_on_sort_agrees_with_jax():
    x = np.random.default_rng(12).standard_normal((4, 999)).astype(np.float32)
    x[0, :5] = np.nan
    k = np.random.default_rng(13).integers(0, 50, 999).astype(np.int32)
    pairs = [
        (lambda m, a: m.median(a, axis=1), x), (lambda m, a: m.quantile(a, 0.3, axis=1), x),
        (lambda m, a: m.nanpercentile(a, 90, axis=1), x), (lambda m, a: m.unique(a, size=50, fill_value=-1), k),
        (lambda m, a: m.searchsorted(m.sort(a), a[::3]), k), (lambda m, a: m.partition(a, 17, axis=1)[:, 17], x),
    ]
    for f, a in pairs:
        np.testing.assert_allclose(np.asarray(ember.jit(lambda a: f(enp, a))(a)), np.asarray(f(jnp, a)),
                                   rtol=1e-6, equal_nan=True)
    values_e, index_e = ember.jit(lambda a: lax.top_k(a, 25))(x)
    values_j, index_j = jax.lax.top_k(x, 25)
    np.testing.assert_array_equal(np.asarray(values_e), np.asarray(values_j))
    np.testing.assert_array_equal(np.asarray(index_e), np.asarray(index_j))


def test_vmap_sorts_batched_rows_and_gradients_are_jaxs():
    x = np.random.default_rng(14).standard_normal((5, 300)).astype(np.float32)
    x[:, ::7] = x[:, :1]  # (ties)
    got = ember.jit(ember.vmap(lambda r: enp.sort(r) * enp.argsort(r)))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.vmap(lambda r: jnp.sort(r) * jnp.argsort(r))(x)))

    def loss(np_, a):
        return (np_.sort(a, axis=1) * np_.arange(300.0)).sum() + np_.median(a)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(lambda a: loss(enp, a)))(x)),
                               np.asarray(jax.grad(lambda a: loss(jnp, a))(x)), rtol=1e-6)
    t = np.ones_like(x)
    _, tangent = ember.jvp(lambda a: enp.sort(a, axis=0), (x,), (t * x,))
    _, tangent_j = jax.jvp(lambda a: jnp.sort(a, axis=0), (x,), (t * x,))
    np.testing.assert_array_equal(np.asarray(tangent), np.asarray(tangent_j))


def test_the_kernel_is_a_cpu_single_device_form():
    x = np.ones(64, np.float32)
    assert SORT_TARGET not in ember.jit(enp.sort).lower(x[:15]).as_text()  # (short rows: XLA's inlined sort)
    ember.config.update("cpu_backend_forms", False)
    try:
        assert SORT_TARGET not in ember.jit(enp.sort).lower(x).as_text()
    finally:
        ember.config.update("cpu_backend_forms", True)
    assert SORT_TARGET not in ember.lower(ember.stage_out(lambda a: lax.sort(a), ember.ShapedArray((64,), "f32")),
                                          platform=None)  # (a portable module)


@pytest.mark.skipif(not KERNEL, reason="ember's sort kernel is not built")
def test_the_handler_refuses_buffers_that_do_not_fit():
    """Defence in depth behind the artifact check (tests/reliability/test_export_trust.py): a module whose result
    is not its operand's shape reaches the handler, which refuses it rather than writing past a buffer."""
    from ember._runtime import get_client
    client = get_client()
    text = ember.jit(enp.sort).lower(np.ones(64, np.float32)).as_text()
    text = text.replace("tensor<64xf32>", "tensor<4096xf32>")
    text = text.replace("%arg0: tensor<4096xf32>", "%arg0: tensor<64xf32>")
    text = text.replace("(tensor<4096xf32>) -> tensor<4096xf32>", "(tensor<64xf32>) -> tensor<4096xf32>")
    exe = client.compile(text)
    arg = client.buffer_from_numpy(np.ones(64, np.float32))
    with pytest.raises(Exception, match="ember_sort: the operands and results must share one shape"):
        exe.execute([arg], [((4096,), np.dtype(np.float32))])[0].block_until_ready()


# ---------------------------------------------------------------------------------------------------------------
# top_k (custom_call @ember_sort_top_k: a partial quicksort of the k largest; XLA's sort elsewhere)
TOP_K_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.int32, np.int64, np.uint16,
                np.bool_]


def test_top_k_is_jaxs_bit_for_bit():
    """JAX's order (XLA's TopK): the total order of the bits, -NaN smallest and NaN largest, -0.0 below 0.0,
    subnormals as they are (bf16's flushed); equal entries by lower index. The kernel's, XLA's fallback's and JAX's
    agree, for every dtype, k of 0, 1, 10 and n, rows of 17 to 1000 (one program per library for all of them)."""
    xs = []
    for seed, dtype in enumerate(TOP_K_DTYPES):
        xs += [values(dtype, 17, seed=seed), values(dtype, 2 * 1000, seed=seed, distinct=50).reshape(2, 1000),
               values(dtype, 2 * 3 * 300, seed=seed + 50).reshape(2, 3, 300)]
    ks = [(i, k) for i in range(len(xs)) for k in (0, 1, 10, xs[i].shape[-1])]
    f = lambda *a: [lax.top_k(a[i], k) for i, k in ks]  # noqa: E731
    # jaxlib's bf16 TopK is not the same on every CPU: on AVX-512 machines it flushes subnormals to signed zeros
    # and orders NaN payloads by their bits (as ember's kernel and the plugin's XLA do everywhere); on others it
    # orders subnormals by their bits and takes every NaN of a sign as equal. JAX is asked about bf16 inputs whose
    # subnormals are zeros and whose NaNs are quiet (where both agree), and ember's two lowerings are compared with
    # each other on the raw inputs.
    canonical = [_canonical_bf16(x) for x in xs]
    with jax.enable_x64(True):
        want = [jax.lax.top_k(canonical[i], k) for i, k in ks]
    for got in (ember.jit(f)(*canonical), xla_sort(f, *canonical)):
        for (gv, gi), (wv, wi) in zip(got, want):
            same_bits(gv, wv)
            np.testing.assert_array_equal(np.asarray(gi), np.asarray(wi))
    for (gv, gi), (wv, wi) in zip(on_each_isa(lambda: ember.jit(f)(*xs)), xla_sort(f, *xs)):
        same_bits(gv, wv)
        np.testing.assert_array_equal(np.asarray(gi), np.asarray(wi))


@pytest.mark.skipif(not targets.available("ember_sort_top_k"), reason="the sort kernel is not built")
def test_top_k_paths_on_ordered_and_equal_rows():
    """Each of the kernel's ways to the k largest (the k least kept in order while a row is read, 4-byte entries 16
    at a time, for k <= 16 on AVX2, or k <= 64 without a vectorized quicksort; the partial quicksort, AVX-512's or
    AVX2's, where the CPU has one; else a quickselect and qsort up to a quarter of the row, the radix sort beyond) on
    rows that are ascending, descending, all equal, of few distinct integers and with NaNs, of 4-byte and narrower
    dtypes, at the k where the paths change, against JAX (one program for all of them), on each of the kernel's paths
    this CPU runs."""
    rng = np.random.default_rng(5)
    negative = -np.abs(rng.standard_normal((3, 400))).astype(np.float32)  # (with -0.0, 0.0, -inf and -NaN among them)
    negative[:, ::37], negative[:, 5::41], negative[:, 7::43], negative[:, 9::47] = -0.0, 0.0, -np.inf, -np.nan
    xs = [np.tile(np.arange(400, dtype=np.float32), (3, 1)), np.tile(np.arange(400, dtype=np.float32)[::-1], (3, 1)),
          np.zeros((2, 400), np.float32), rng.integers(0, 5, (3, 400)).astype(np.int32),
          np.where(rng.random((3, 400)) < 0.1, np.nan, rng.standard_normal((3, 400))).astype(np.float32),
          np.where(rng.random((2, 400)) < 0.1, -np.nan, rng.standard_normal((2, 400))).astype(np.float16),
          rng.integers(0, 2 ** 32, (2, 400), dtype=np.uint32), rng.integers(-3, 3, (2, 400)).astype(np.int8),
          rng.integers(-2 ** 31, 2 ** 31, (2, 400)).astype(np.int32), negative]
    ks = [(i, k) for i in range(len(xs)) for k in (1, 10, 16, 17, 64, 65, 100, 101, 400)]
    f = lambda *a: [lax.top_k(a[i], k) for i, k in ks]  # noqa: E731
    got = on_each_isa(lambda: ember.jit(f)(*xs))
    for (gv, gi), (i, k) in zip(got, ks):
        wv, wi = jax.lax.top_k(xs[i], k)
        np.testing.assert_array_equal(np.asarray(gi), np.asarray(wi), err_msg=f"{xs[i].dtype} k={k}")
        same_bits(gv, wv)


def _canonical_bf16(x):
    """x with its bf16 subnormals made zeros of their sign and its NaNs the quiet NaN of their sign (other dtypes
    as they are)."""
    if x.dtype != ml_dtypes.bfloat16:
        return x
    bits = x.view(np.uint16)
    bits = np.where((bits & 0x7F80) == 0, bits & 0x8000, bits)
    bits = np.where((bits & 0x7FFF) > 0x7F80, (bits & 0x8000) | 0x7FC0, bits)
    return bits.astype(np.uint16).view(ml_dtypes.bfloat16)


def test_top_k_transforms_as_jaxs():
    x = np.random.default_rng(23).standard_normal((4, 6, 50)).astype(np.float32)
    w = np.linspace(1.0, 2.0, 5, dtype=np.float32)

    def loss(lib, a):
        return (lib.lax.top_k(a, 5)[0] * w).sum()
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(lambda a: loss(ember, a)))(x)),
                               np.asarray(jax.grad(lambda a: loss(jax, a))(x)), rtol=1e-6)
    got = ember.vmap(lambda a: lax.top_k(a, 3), in_axes=1)(x)
    want = jax.vmap(lambda a: jax.lax.top_k(a, 3), in_axes=1)(x)
    for g, wv in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(wv))
    t = np.cos(x)
    _, tangent = ember.jvp(lambda a: lax.top_k(a, 4)[0], (x,), (t,))
    _, tangent_j = jax.jvp(lambda a: jax.lax.top_k(a, 4)[0], (x,), (t,))
    np.testing.assert_array_equal(np.asarray(tangent), np.asarray(tangent_j))
    with pytest.raises(ValueError, match=r"top_k: k=51 must be between 0 and the last dimension's size 50"):
        lax.top_k(x, 51)
