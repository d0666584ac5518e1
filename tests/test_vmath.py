"""ember's float32 transcendentals kernel (custom_call @ember_elementwise, ember/_runtime/vmath.h and _vmath.c): each
function at both widths (8 lanes; 16 lanes: the AVX-512 build where the CPU has it, else the 16-lane source built
for AVX2) against float64 references over dense sweeps (random bit patterns over the whole float range, so huge sin
arguments too, and uniform draws where each function lives) and special values, its error bounded by the error of
the plugin's XLA on the same inputs (computed here with the kernel off) and by 0.5 ulp plus a little where the
kernel rounds a double result once (BOUND: log1p and erf_inv, in float, 0.85 and 2.0); denormals as XLA
treats them; the lowering picks the kernel for the functions of backend_forms.KERNEL_OPS only (sin, cos, tan, log1p,
erf_inv), unless the equation asks for AccuracyMode.DEFAULT (XLA's op: ember.random's samplers, which then draw
jax.random's values bit for bit), and its results match JAX's, eagerly, under jit, vmap and grad; exported programs
carry the call and round-trip; crafted calls are refused by the artifact check and by the handler itself. Where the
kernel is not built or the CPU lacks AVX2 and FMA, the lowering tests check that XLA's ops are written instead."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.numpy as enp
import ember.scipy.special as esp
from ember import lax
from ember._hlo import backend_forms, module_check, targets
from ember._runtime import vmath

KERNEL = targets.available(backend_forms.ELEMENTWISE_TARGET)
WIDTHS = vmath.widths()
needs_widths = pytest.mark.skipif(not WIDTHS, reason="the kernel is not built or the CPU lacks AVX2 and FMA")
needs_kernel = pytest.mark.skipif(not KERNEL, reason="the kernel is not available")

# name -> (ember function, JAX function, float64 reference, where it lives: ranges drawn uniformly)
FUNCTIONS = {
    "sin": (enp.sin, jnp.sin, np.sin, [(-100, 100), (-1e4, 1e4), (-2.0**24, 2.0**24)]),
    "cos": (enp.cos, jnp.cos, np.cos, [(-100, 100), (-1e6, 1e6)]),
    "tan": (enp.tan, jnp.tan, np.tan, [(-1.6, 1.6), (-1e5, 1e5)]),
    "tanh": (enp.tanh, jnp.tanh, np.tanh, [(-10, 10), (-1e-3, 1e-3)]),
    "log1p": (enp.log1p, jnp.log1p, np.log1p, [(-1, 100), (-1e-3, 1e-3)]),
    "erf_inv": (esp.erfinv, jax.scipy.special.erfinv, sp.erfinv, [(-1, 1), (0.999, 1)]),
    "exp": (enp.exp, jnp.exp, np.exp, [(-104, 89)]),
    "log": (enp.log, jnp.log, np.log, [(0, 1e3), (0.5, 2)]),
    "expm1": (enp.expm1, jnp.expm1, np.expm1, [(-10, 10), (-0.5, 0.5)]),
    "erf": (esp.erf, jax.scipy.special.erf, sp.erf, [(-5, 5), (-1e-3, 1e-3)]),
    "logistic": (ember.nn.sigmoid, jax.nn.sigmoid, sp.expit, [(-110, 110), (-20, 20)]),
}
TINY = np.finfo(np.float32).tiny
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 1.1e-38, -1.1e-38,
                     TINY, -TINY, 2e-38, 1e-30, -1e-20, 1e-8, 1.0, -1.0, 0.5, 2.0, 0.99999994, -0.99999994,
                     1.0000001, 3.4028235e38, -3.4028235e38, 16777215.0, 16777216.0, -16777218.0, 1e20, 1e38,
                     1.5707964, 3.1415927, 4.712389, 6.2831855, 1e4 * np.pi, 88.72, 88.73, -87.3, -103.9, -104.0,
                     9.01, -9.02, 3.92, -3.93, 0.35, -0.35, 1e-3, 0.41421357, -0.29289323], np.float32)


def sweep(name: str, n: int, seed: int = 0) -> np.ndarray:
    """n random bit patterns (every exponent: huge and subnormal arguments, NaNs), n draws from each of the
    function's ranges, and the special values."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    parts += [rng.uniform(lo, hi, n).astype(np.float32) for lo, hi in FUNCTIONS[name][3]]
    return np.concatenate(parts + [SPECIALS])


def reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return FUNCTIONS[name][2](x.astype(np.float64))


def ulp_error(name: str, x: np.ndarray, got: np.ndarray) -> float:
    """The largest error of got in float32 ulps of the float64 reference, over the normal inputs whose result is a
    finite normal float (subnormal inputs and results: XLA's rules, tested separately); where the reference
    overflows float32, got must be that infinity, and NaN where (and only where) the reference is."""
    ref = reference(name, x)
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32)
    normal_in = np.abs(x) >= TINY
    nan = np.isnan(ref) & normal_in
    assert np.isnan(got[nan]).all() and not np.isnan(got[normal_in & ~np.isnan(ref)]).any(), name
    limits = normal_in & np.isinf(ref32) & ~np.isnan(ref)
    np.testing.assert_array_equal(got[limits], ref32[limits], err_msg=name)
    ok = normal_in & np.isfinite(ref32) & (np.abs(ref) >= TINY)
    spacing = np.spacing(np.abs(ref32[ok])).astype(np.float64)
    return float(np.max(np.abs(got[ok].astype(np.float64) - ref[ok]) / spacing))


_xla_cache: dict = {}


def xla(name: str, x: np.ndarray) -> np.ndarray:
    """name(x) by the plugin's XLA (ember's CPU forms off: its own op; jitted once per function and length)."""
    key = (name, x.shape)
    if key not in _xla_cache:
        with ember.config.override(cpu_backend_forms=False):
            lowered = ember.jit(FUNCTIONS[name][0]).lower(x)
            assert "ember_elementwise" not in lowered.as_text()
            _xla_cache[key] = lowered.compile()
    return np.asarray(_xla_cache[key](x))


def same_bits(a: np.ndarray, b: np.ndarray, what: str = "") -> None:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a) & np.isnan(b)  # (any NaN for NaN: payloads are not specified)
    np.testing.assert_array_equal(np.where(nan, 0, a.view(np.uint32)), np.where(nan, 0, b.view(np.uint32)),
                                  err_msg=what)


# ---------------------------------------------------------------------------------------------------------------
def test_the_codes_agree():
    """The lowering's function codes are the kernel's, and the artifact check takes exactly those."""
    assert module_check.ELEMENTWISE_OP_CODES == len(backend_forms.ELEMENTWISE_OPS)
    assert sorted(backend_forms.ELEMENTWISE_OPS.values()) == list(range(len(backend_forms.ELEMENTWISE_OPS)))
    assert backend_forms.KERNEL_OPS <= set(backend_forms.ELEMENTWISE_OPS) == set(FUNCTIONS)
    if WIDTHS:
        import ember._runtime._vmath as ext
        assert ext.op_names() == backend_forms.ELEMENTWISE_OPS
        assert WIDTHS == (8, 16)


# The kernel's error bound in ulps: 0.5 plus a little (one rounding of a double result whose polynomial errs by
# < 1e-10), but log1p and erf_inv, in float (0.80 and 1.85 measured over 14M inputs; XLA's erf_inv 65).
BOUND = {"log1p": 0.85, "erf_inv": 2.0}


@needs_widths
@pytest.mark.parametrize("width", [8, 16])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_at_least_as_accurate_as_xla(name, width):
    """Every function, both widths: within its bound of the float64 value, and no worse than XLA's own error on
    the same inputs (XLA's: 0.56 ulp for sin and cos, 0.86 tan, 2.4 log1p, 65 erf_inv, 1-6 the others)."""
    x = sweep(name, 1 << 16, seed=width)
    got = vmath.run(name, x, width)
    err = ulp_error(name, x, got)
    xla_err = ulp_error(name, x, xla(name, x))
    assert err <= BOUND.get(name, 0.501), (name, width, err)
    assert err <= xla_err, (name, width, err, xla_err)


@needs_widths
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_denormals_and_specials_as_xla(name):
    """Subnormal and zero inputs give XLA's results bit for bit (passed through by sin, tan, tanh, expm1; zeros of
    their sign from log1p, erf, erf_inv; the function of zero from the others); the other special values give the
    float64 reference rounded (XLA's too, but for erf(+-inf) = +-0.99999982); results below FLT_MIN are zeros."""
    x = SPECIALS
    got = {w: vmath.run(name, x, w) for w in WIDTHS}
    same_bits(got[8], got[16], f"{name}: the widths differ")
    small = np.abs(x) < TINY
    same_bits(got[8][small], xla(name, x)[small], f"{name} of subnormals and zeros")
    with np.errstate(all="ignore"):
        want = reference(name, x).astype(np.float32)
    want = np.where(np.abs(want) < TINY, np.copysign(np.float32(0), want), want)
    exact = ~small & (np.isinf(x) | np.isnan(x) | np.isinf(want) | (want == 0) | (np.abs(want) == 1))
    same_bits(got[8][exact], want[exact], f"{name} of special values")
    ulp_error(name, x, got[8])  # (NaN where the reference is, overflow to infinity)


@needs_widths
def test_the_widths_and_threads_agree_bit_for_bit():
    """The 8- and 16-lane builds give the same bits (one source), on lengths around the vectors (the padded tail)
    and split among threads (shares of at least 2^15 elements, bounds multiples of 16)."""
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 8, 9, 15, 16, 17, 33, (1 << 15) + 3, (1 << 17) + 5):
        x = rng.uniform(-3, 3, n).astype(np.float32)
        for name in FUNCTIONS:
            one = vmath.run(name, x, 8)
            same_bits(one, vmath.run(name, x, 16), name)
            same_bits(one, vmath.run(name, x, 8, threaded=True), name)


@needs_widths
def test_huge_sin_cos_tan_arguments_go_to_libm():
    """|x| >= 2^24 is beyond the Cody-Waite reduction: those lanes take libm's double function, mixed in one
    vector with lanes that do not."""
    x = np.array([3e38, 1e9, 0.5, 16777216.0, 2.0**100, -1e30, 7.0, 16777215.0] * 3, np.float32)
    for name in ("sin", "cos", "tan"):
        want = FUNCTIONS[name][2](x.astype(np.float64)).astype(np.float32)
        for w in WIDTHS:
            np.testing.assert_allclose(vmath.run(name, x, w), want, rtol=1.2e-7, atol=0, err_msg=name)


@pytest.mark.slow
@needs_widths
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_at_least_as_accurate_as_xla_exhaustive(name):
    """The accuracy test over 2^22 random bit patterns and 2^22 draws per range, both widths."""
    x = sweep(name, 1 << 22, seed=11)
    xla_err = ulp_error(name, x, xla(name, x))
    for w in WIDTHS:
        err = ulp_error(name, x, vmath.run(name, x, w, threaded=True))
        assert err <= BOUND.get(name, 0.501) and err <= xla_err, (name, w, err, xla_err)


# ---------------------------------------------------------------------------------------------------------------
# The lowering
N = backend_forms.MIN_ELEMENTS


def _x(name, shape, seed=0):
    lo, hi = {"erf_inv": (-0.999, 0.999), "log1p": (-0.9, 50), "log": (1e-3, 1e3)}.get(name, (-20, 20))
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def _calls(text):
    return text.count('"ember_elementwise"')


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_the_lowering_picks_the_kernel_where_it_is_faster(name):
    """f32 arrays of at least MIN_ELEMENTS elements of KERNEL_OPS' functions are kernel calls (their op code
    given), under jit; smaller arrays, float64, the option off and the other functions keep XLA's ops. The results
    match JAX's (within JAX's own error and the kernel's)."""
    f, jf = FUNCTIONS[name][:2]
    x = _x(name, (4, N // 4))
    text = ember.jit(f).lower(x).as_text()
    picked = KERNEL and name in backend_forms.KERNEL_OPS
    assert _calls(text) == int(picked), name
    if picked:
        assert f"op = {backend_forms.ELEMENTWISE_OPS[name]} : i64" in text
    assert _calls(ember.jit(f).lower(x[:, :-1]).as_text()) == 0  # (N - 4 elements)
    with ember.enable_x64(True):
        assert _calls(ember.jit(f).lower(x.astype(np.float64)).as_text()) == 0
    with ember.config.override(cpu_backend_forms=False):
        assert _calls(ember.jit(f).lower(x).as_text()) == 0
    got, want = np.asarray(ember.jit(f)(x)), np.asarray(jf(x))
    ref = reference(name, x)
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    jax_err = np.max(np.abs(want - ref) / spacing)
    assert np.max(np.abs(got - want) / spacing) <= jax_err + 0.51, name
    if picked:
        same_bits(got, vmath.run(name, x, 8))


@needs_kernel
def test_accuracy_default_keeps_xlas_op_and_the_samplers_jaxs_values():
    """accuracy=AccuracyMode.DEFAULT (a param of the equation, printed as JAX prints it) keeps XLA's op, whose bits
    are JAX's; any other accuracy lets the kernel run. ember.random's samplers that go through tan, log1p or erf_inv
    ask for DEFAULT, so their draws of 2^16 values (past MIN_ELEMENTS) are jax.random's bit for bit."""
    x = _x("log1p", (4, N // 4))
    for accuracy, kernel in ((None, True), (lax.AccuracyMode.HIGHEST, True), (lax.Tolerance(ulps=1), True),
                             (lax.AccuracyMode.DEFAULT, False)):
        f = ember.jit(lambda v: lax.log1p(v, accuracy=accuracy))
        assert _calls(f.lower(x).as_text()) == int(kernel), accuracy
        want = jax.jit(lambda v: jax.lax.log1p(v, accuracy=None if accuracy is None else getattr(
            jax.lax.AccuracyMode, accuracy.name) if isinstance(accuracy, lax.AccuracyMode) else jax.lax.Tolerance(
            ulps=1)))(x)
        if not kernel:
            same_bits(np.asarray(f(x)), np.asarray(want))
    one = np.float32(1.0)
    assert str(ember.make_jaxpr(lambda v: lax.tan(v, accuracy=lax.AccuracyMode.DEFAULT))(one)) == str(
        jax.make_jaxpr(lambda v: jax.lax.tan(v, accuracy=jax.lax.AccuracyMode.DEFAULT))(one))
    key, jkey = ember.random.key(3), jax.random.key(3)
    for sampler in ("normal", "truncated_normal", "exponential", "laplace", "logistic", "gumbel", "cauchy"):
        args = (-1.0, 2.0) if sampler == "truncated_normal" else ()
        got = np.asarray(getattr(ember.random, sampler)(key, *args, (1 << 16,), np.float32))
        want = np.asarray(getattr(jax.random, sampler)(jkey, *args, (1 << 16,), np.float32))
        same_bits(got, want)
    text = ember.jit(lambda k: ember.random.normal(k, (1 << 16,))).lower(key).as_text()
    assert _calls(text) == 0 and "erf_inv" not in str(ember.make_jaxpr(lambda v: enp.log1p(v))(1.0))


@needs_kernel
def test_eager_vmap_and_grad_use_the_kernel():
    """Eagerly and under vmap the kernel's bits; grad of sin gets cos from the kernel (the derivative's own
    primitive); grad of cos (sin from the kernel), tan, log1p and erf_inv match JAX's."""
    x = _x("sin", (8, N // 4), seed=1)
    same_bits(enp.sin(x), vmath.run("sin", x, 8), "eager")
    vmapped = ember.jit(ember.vmap(enp.cos))
    assert _calls(vmapped.lower(x).as_text()) == 1
    same_bits(vmapped(x), vmath.run("cos", x, 8), "vmap")
    grad_sin = ember.jit(ember.grad(lambda v: enp.sum(enp.sin(v))))
    text = grad_sin.lower(x).as_text()
    assert f"op = {backend_forms.ELEMENTWISE_OPS['cos']} : i64" in text
    same_bits(grad_sin(x), vmath.run("cos", x, 8), "grad of sin")
    for name in ("cos", "tan", "log1p", "erf_inv"):
        f, jf = FUNCTIONS[name][:2]
        xs = _x(name, (N,), seed=2)
        got = np.asarray(ember.jit(ember.grad(lambda v: enp.sum(f(v))))(xs))
        want = np.asarray(jax.jit(jax.grad(lambda v: jnp.sum(jf(v))))(xs))
        np.testing.assert_allclose(got, want, rtol=2e-5 if name == "erf_inv" else 2e-6, err_msg=name)


@needs_kernel
def test_an_exported_program_carries_the_call_and_round_trips():
    x = _x("sin", (N,), seed=4)
    f = lambda v: enp.sin(enp.cos(v))  # noqa: E731
    exp = ember.export.export(ember.jit(f))(x)
    assert _calls(exp.mlir_module()) == 2
    restored = ember.export.deserialize(exp.serialize())
    same_bits(restored.call(x), ember.jit(f)(x))


@needs_kernel
@pytest.mark.parametrize("change, pattern", [
    (("op = 0 : i64", "op = 11 : i64"), "ember_elementwise: op = 11 is not a function of the kernel"),
    (("op = 0 : i64", "op = -1 : i64"), "ember_elementwise: op = -1 is not a function of the kernel"),
    (("-> tensor<32768xf32>", "-> tensor<65536xf32>"), "ember_elementwise: needs one float32 operand and a result"),
])
def test_a_crafted_artifact_is_refused(change, pattern):
    """ember.export.deserialize refuses a call whose op the kernel lacks or whose result is not its operand's type
    (module_check), before anything compiles."""
    exp = ember.export.export(ember.jit(enp.sin))(np.zeros(N, np.float32))
    text = exp.mlir_module()
    assert change[0] in text
    with pytest.raises(module_check.ModuleError, match=pattern):
        module_check.check_module(text.replace(*change))
    blob = exp.serialize()
    tampered = blob.replace(change[0].encode(), change[1].encode())
    assert tampered != blob
    with pytest.raises(ValueError, match=pattern):
        ember.export.deserialize(tampered)


@needs_kernel
def test_the_handler_refuses_calls_that_do_not_fit():
    """Defence in depth behind the artifact check: a module whose result is not its operand's shape, whose op is
    unknown, or whose arrays are float64 reaches the handler, which refuses it (an FFI error naming it) rather than
    writing past a buffer."""
    from ember._runtime import get_client
    client = get_client()
    text = ember.jit(enp.sin).lower(np.ones(N, np.float32)).as_text()
    arg = client.buffer_from_numpy(np.ones(N, np.float32))
    bigger = text.replace(f"tensor<{N}xf32>", f"tensor<{4 * N}xf32>")
    bigger = bigger.replace(f"%arg0: tensor<{4 * N}xf32>", f"%arg0: tensor<{N}xf32>")
    bigger = bigger.replace(f"(tensor<{4 * N}xf32>) -> tensor<{4 * N}xf32>",
                            f"(tensor<{N}xf32>) -> tensor<{4 * N}xf32>")
    assert bigger.count(f"tensor<{N}xf32>") == 2
    with pytest.raises(Exception, match="ember_elementwise: the operand and result must be float32 arrays of one"):
        client.compile(bigger).execute([arg], [((4 * N,), np.dtype(np.float32))])[0].block_until_ready()
    unknown = text.replace("op = 0 : i64", "op = 42 : i64")
    with pytest.raises(Exception, match="ember_elementwise: the attribute op is not a known function"):
        client.compile(unknown).execute([arg], [((N,), np.dtype(np.float32))])[0].block_until_ready()
    wide = text.replace("xf32>", "xf64>")
    assert _calls(wide) == 1
    with pytest.raises(Exception, match="ember_elementwise: the operand and result must be float32 arrays of one"):
        client.compile(wide).execute([client.buffer_from_numpy(np.ones(N, np.float64))],
                                     [((N,), np.dtype(np.float64))])[0].block_until_ready()


def test_without_the_kernel_the_ops_are_xlas():
    """Where the kernel's provider offers nothing (the extension not built, a CPU without AVX2 and FMA), the same
    programs lower to XLA's ops and give XLA's values."""
    x = _x("sin", (N,), seed=5)
    targets.set_provider(backend_forms.ELEMENTWISE_TARGET, lambda: frozenset())
    ember.clear_caches()  # (compiled programs are cached by their text and options, not by the providers)
    try:
        for name in backend_forms.KERNEL_OPS:
            f = FUNCTIONS[name][0]
            xs = _x(name, (N,), seed=5)
            assert _calls(ember.jit(f).lower(xs).as_text()) == 0, name
            same_bits(ember.jit(f)(xs), xla(name, xs), name)
        assert _calls(ember.jit(ember.grad(lambda v: enp.sum(enp.sin(v)))).lower(x).as_text()) == 0
    finally:
        targets.set_provider(backend_forms.ELEMENTWISE_TARGET, vmath.provide, vmath.reason)
        ember.clear_caches()
    assert targets.available(backend_forms.ELEMENTWISE_TARGET) == KERNEL

