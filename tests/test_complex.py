"""complex64 and complex128 end to end: the dtype table and JAX's promotion lattice, transfers (numpy, device_put,
DLPack), printing, IR and StableHLO literals, ember.numpy's functions against numpy (complex128) and JAX (complex64),
derivatives against jax.grad / jax.jacfwd / jax.jacrev (JAX's convention, docs/complex.md), and the meta check of
which primitives take complex operands: each primitive either accepts them (ACCEPTS_COMPLEX, with complex Cases in
tests/prims/test_complex_prims.py or a complex run of its real Cases here) or refuses them at abstract evaluation
with a TypeError naming the primitive and the dtype."""
import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import dtypes as jax_dtypes

import ember
import ember.numpy as enp
from ember import lax
from ember._core import PRIMITIVES, ShapedArray
from ember._core import dtypes as dt
from ember._core.ir import sub_irs
from oracle import check_forward, check_vmap, load_cases, staged
from recorded import jax_result

CASES = load_cases()
RNG = np.random.default_rng(0)
pytestmark = pytest.mark.usefixtures("ember_x64", "jax_in_embers_mode")  # complex128 inputs; JAX in ember's mode


@pytest.fixture
def default_mode():
    """ember and JAX in their default (32-bit) mode, also when the suite runs with EMBER_ENABLE_X64=1."""
    with ember.config.override(enable_x64=False), jax.enable_x64(False):
        yield


def crandn(*shape, dtype=np.complex128):
    return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)


# ---------------------------------------------------------------------------------------------------------------
# Which primitives take complex operands. Every primitive with a real Case is classified by binding it with its
# floating-point operands made complex: it accepts them (and is listed here) or refuses them clearly.
ACCEPTS_COMPLEX = {
    # arithmetic and the holomorphic functions (complex Cases in tests/prims/test_complex_prims.py)
    "neg", "add", "sub", "mul", "div", "pow", "integer_pow", "exp", "exp2", "log", "log1p", "expm1", "sqrt",
    "rsqrt", "sin", "cos", "tan", "tanh", "logistic", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
    "atanh", "abs", "sign", "max", "min", "eq", "ne", "select", "stop_gradient", "convert_element_type",
    "reduce_sum", "reduce_prod", "cumsum", "cumprod", "cummax", "cummin", "square", "select_n", "dot_general",
    "ragged_dot_general",
    "conv_general_dilated",  # (test_complex_convolution_matches_jax below)
    # made for complex numbers
    "real", "imag", "conj", "fft",
    # structural: values are moved, not computed on (run with complex inputs below)
    "broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concatenate", "split", "rev", "gather",
    "scatter", "scatter_add", "scatter_mul", "dynamic_slice", "dynamic_update_slice", "optimization_barrier",
    "squeeze", "stack", "unstack", "tile", "copy", "device_put", "scatter_sub", "stage", "dce_sink",
    "key_wrap", "key_fresh", "key_consume", "key_unwrap",  # (the key-reuse checker's markers: the identity)
    "xla_metadata_value",  # (set_xla_metadata's value form: the identity)
    "name",  # (checkpoint_name's identity)
    "todense",  # (jax.experimental.sparse's todense of a dense array: the identity)
    "sort",  # (complex values carried along real keys; complex keys are refused: ember.numpy sorts by parts)
    "sharding_constraint",  # (a layout over devices: tests/prims/test_sharding_prims.py has a complex Case)
    "inspect_sharding",  # (reads a value's layout, never its values: any dtype)
    "shard_alike",  # (ties two values' layouts, never their values: tests/test_shard_alike.py ties complex ones)
    "control_dep",  # (orders two computations, never reads their values: a complex Case in tests/prims)
    "custom_partitioning",  # (its function's own computation, any dtype it takes: a complex Case in tests/prims)
}
# host callbacks: the values go to Python as numpy arrays (complex ones checked in tests/test_callbacks.py and
# tests/test_buffer_callback.py)
CALLBACKS = {"pure_callback", "io_callback", "debug_callback", "buffer_callback"}
ACCEPTS_COMPLEX |= CALLBACKS
# a user's FFI handler gets complex buffers as any other (its complex Case in tests/prims/test_control.py)
ACCEPTS_COMPLEX |= {"ffi_call"}
# checkify's check: complex values in its message (tests/test_checkify.py formats one)
CHECKS = {"check"}
ACCEPTS_COMPLEX |= CHECKS
# mutable array references hold any array: tests/test_refs.py (test_complex_references) holds, reads, writes and
# differentiates complex ones
REFS = {"new_ref", "ref_get", "ref_swap", "freeze"}
ACCEPTS_COMPLEX |= REFS
# The factorisations (ember/_prims/linalg.py), which all take complex matrices: their values and derivatives are
# checked by their complex Cases in tests/prims/test_linalg_prims.py and by tests/test_linalg_complex.py.
LINALG_ACCEPTS_COMPLEX = {"cholesky", "triangular_solve", "lu", "geqrf", "qr", "eigh", "svd", "eig", "schur",
                          # LAPACK's building blocks (complex Cases in tests/prims/test_linalg_prims.py)
                          "hessenberg", "householder_product", "ormqr", "tridiagonal", "tridiagonal_solve"}
ACCEPTS_COMPLEX |= LINALG_ACCEPTS_COMPLEX
# jax.experimental.sparse's primitives (tests/prims/test_sparse_prims.py): their data may be complex (run with
# complex values below, as the structural primitives are)
SPARSE = {"bcoo_todense", "bcoo_fromdense", "bcoo_extract", "bcoo_transpose", "bcoo_dot_general",
          "bcoo_spdot_general", "bcoo_dot_general_sampled", "bcoo_sort_indices", "bcoo_sum_duplicates", "coo_todense",
          "coo_fromdense", "coo_matvec", "coo_matmat", "csr_todense", "csr_fromdense", "csr_matvec", "csr_matmat",
          "bcsr_todense", "bcsr_fromdense", "bcsr_extract", "bcsr_dot_general", "spsolve"}
ACCEPTS_COMPLEX |= SPARSE
STRUCTURAL = ["broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concatenate", "split", "rev", "gather",
              "scatter", "scatter_add", "scatter_mul", "dynamic_slice", "dynamic_update_slice",
              "optimization_barrier", "name", "squeeze", "stack", "unstack", "tile", "copy", "device_put",
              "scatter_sub", "stage", "dce_sink", "key_wrap", "key_fresh", "key_consume", "key_unwrap",
              "xla_metadata_value", "todense"]
_COMPLEX_OF = {np.dtype(np.float32): dt.complex64, np.dtype(np.float64): dt.complex128}
# Primitives that carry sub-IRs: complex values flow through them, their bodies' primitives decide (checked below);
# custom_lin's values are its custom_vjp's bwd rule's, which decides alike
CARRY_SUB_IRS = {"cond", "while", "scan", "custom_jvp_call", "custom_vjp_call", "custom_vmap_call", "remat", "reduce",
                 "reduce_window", "shard_map", "pjit", "custom_lin", "linear_solve", "scatter_apply",
                 "select_and_scatter", "composite"}


# tokens hold no values (tests/test_tokens.py: every array operation refuses one); platform_dependent's index takes no
# operands (an int32 constant of the module)
TOKENS = {"create_token", "after_all"}
NO_OPERANDS = {"platform_index"}


def _classify(case):
    """Per equation of case's primitive in its staging at its first dtype: "accepts" or "refuses" (with the
    TypeError's text), binding it with its floating-point operands made complex (or, where it has none, its integer
    and boolean ones); nothing for a primitive that carries sub-IRs."""
    ir = staged(case, case.shapes[0], case.dtypes[0])
    results = []
    for eqn in ir.eqns:
        if eqn.prim.name != case.prim or any(True for _ in sub_irs(eqn.params)):
            continue
        avals = [a.aval for a in eqn.inputs]
        complex_avals = [a.update(dtype=_COMPLEX_OF.get(a.dtype, a.dtype)) for a in avals]
        if complex_avals == avals:  # no float operand: its integer and boolean ones
            complex_avals = [a.update(dtype=dt.complex64) for a in avals]
        if not avals:
            continue
        try:
            eqn.prim.out_avals(complex_avals, eqn.params)
            results.append(("accepts", ""))
        except TypeError as err:
            results.append(("refuses", str(err)))
    return results


def _real_cases():
    return [c for c in CASES if "complex64" not in c.dtypes and not c.grad_dtype.startswith("c")]


@pytest.mark.parametrize("case", _real_cases(), ids=lambda c: c.label())
def test_primitive_accepts_complex_or_refuses_clearly(case):
    for verdict, message in _classify(case):
        if verdict == "accepts":
            assert case.prim in ACCEPTS_COMPLEX, f"{case.prim} accepts complex operands: list it in ACCEPTS_COMPLEX"
        else:  # (a primitive of ACCEPTS_COMPLEX may refuse some: sort's keys, fft's RFFT operand, complex's parts)
            assert case.prim in message and ("c64" in message or "complex" in message), \
                f"{case.prim} refuses complex operands without naming itself and the dtype: {message}"


def test_every_primitive_is_classified():
    """Each registered primitive accepts complex operands (ACCEPTS_COMPLEX), carries sub-IRs, is iota (its dtype
    param: refused below) or dim_as_value (no operands and no dtype: a symbolic dimension's int), or is shown to
    refuse complex operands by one of its Cases above."""
    refusing = {c.prim for c in _real_cases() if any(v == "refuses" for v, _ in _classify(c))}
    unclassified = (set(PRIMITIVES) - ACCEPTS_COMPLEX - CARRY_SUB_IRS - refusing - {"iota", "dim_as_value"}
                    - COLLECTIVES_ACCEPT - COLLECTIVES_REFUSE - TOKENS - NO_OPERANDS)
    assert not unclassified, f"primitives whose handling of complex operands no test shows: {sorted(unclassified)}"
    with pytest.raises(TypeError, match=r"iota: dtype must be .* got c64\[3\]"):
        lax.iota(np.complex64, 3)


# The collectives (bound inside shard_map, where the Cases' classification does not see them): checked below
COLLECTIVES_ACCEPT = {"psum", "all_gather", "all_gather_invariant", "reduce_scatter", "all_to_all", "ppermute",
                      "axis_index", "pvary", "ragged_all_to_all"}
COLLECTIVES_REFUSE = {"pmax", "pmin"}


def test_collectives_carry_complex_values():
    """psum and the data movements of shard_map take complex values; pmax and pmin refuse them clearly."""
    mesh = ember.make_mesh((2,), ("x",))
    P = ember.P
    z = (np.arange(8) + 1j * np.arange(8)[::-1]).astype(np.complex64).reshape(4, 2)

    def sharded(f, out=P()):
        return ember.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=out)(z)
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.psum(v, "x"))), z[:2] + z[2:])
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.all_gather(v, "x", tiled=True), P("x"))),
                               np.concatenate([z, z]))
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.all_gather(v, "x", tiled=True, to="invarying"))), z)
    np.testing.assert_allclose(np.asarray(ember.shard_map(lambda v: lax.pcast(v, "x", to="varying"), mesh=mesh,
                                                          in_specs=P(), out_specs=P("x"))(z)), np.concatenate([z, z]))
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.ppermute(v, "x", [(0, 1), (1, 0)]), P("x"))),
                               np.concatenate([z[2:], z[:2]]))
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.psum_scatter(v, "x", tiled=True), P("x"))),
                               z[:2] + z[2:])
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.all_to_all(v, "x", 0, 0, tiled=True), P("x"))),
                               z[[0, 2, 1, 3]])
    np.testing.assert_allclose(np.asarray(sharded(lambda v: v * lax.axis_index("x"), P("x"))), z * [[0], [0], [1], [1]])
    one, two = np.ones(2, np.int32), np.array([0, 1], np.int32)  # (each member's rows to member 0, then member 1)
    np.testing.assert_allclose(np.asarray(sharded(lambda v: lax.ragged_all_to_all(
        v, lax.full_like(v, 0), two, one, lax.mul(one, lax.broadcast(lax.axis_index("x"), (2,))), one, axis_name="x"),
        P("x"))), z[[0, 2, 1, 3]])
    for name in sorted(COLLECTIVES_REFUSE):
        with pytest.raises(TypeError, match=f"{name}: .*c64"):
            sharded(lambda v: getattr(lax, name)(v, "x"))


def test_primitives_with_sub_irs_carry_complex_values():
    z = np.array([1 + 2j, 3 - 1j], np.complex64)
    np.testing.assert_allclose(np.asarray(lax.cond(True, lambda v: v * 1j, lambda v: v, z)), z * 1j)
    carry, ys = lax.scan(lambda c, x: (c + x, c * x), np.complex64(0), z)
    np.testing.assert_allclose(np.asarray(carry), z.sum())
    np.testing.assert_allclose(np.asarray(ys), [0, z[0] * z[1]])
    np.testing.assert_allclose(np.asarray(lax.fori_loop(0, 3, lambda i, c: c * 1j, z)), z * (1j ** 3))
    np.testing.assert_allclose(np.asarray(lax.reduce(z, np.complex64(0), lax.add, (0,))), z.sum())
    np.testing.assert_allclose(np.asarray(ember.checkpoint(lambda v: enp.sin(v) * v)(z)), np.sin(z) * z, rtol=1e-6)
    f = ember.custom_jvp(lambda v: enp.sin(v))
    f.defjvp(lambda p, t: (enp.sin(p[0]), enp.cos(p[0]) * t[0]))
    loss = lambda m, fn: lambda v: m.abs(fn(v)).sum()  # noqa: E731
    np.testing.assert_allclose(np.asarray(ember.grad(loss(enp, f))(z)),
                               jax_result(lambda: jax.grad(loss(jnp, jnp.sin))(z)), rtol=1e-5)
    scan_loss = lambda v: enp.abs(lax.scan(lambda c, x: (c * x, c), np.complex64(1), v)[0])  # noqa: E731
    jax_scan_loss = lambda v: jnp.abs(jax.lax.scan(lambda c, x: (c * x, c), np.complex64(1), v)[0])  # noqa: E731
    np.testing.assert_allclose(np.asarray(ember.grad(scan_loss)(z)), jax_result(lambda: jax.grad(jax_scan_loss)(z)),
                               rtol=1e-5)


def test_every_accepting_primitive_has_a_complex_test():
    covered = {c.prim for c in CASES if c.grad_dtype.startswith("c") or "complex64" in c.dtypes}
    assert (ACCEPTS_COMPLEX - covered - set(STRUCTURAL) - LINALG_ACCEPTS_COMPLEX - CALLBACKS - CHECKS - REFS
            - SPARSE - {"sort", "fft"} == set())
    assert set(ACCEPTS_COMPLEX) <= set(PRIMITIVES)


def _structural_params():
    """The real Cases of the structural primitives: the first of each primitive and every other further one by
    default (gather, gather_windows, gather_fill, ...), all of them with -m slow."""
    seen = {}
    for case in [c for c in CASES if (c.prim in STRUCTURAL or c.prim in SPARSE) and "float32" in c.dtypes]:
        seen[case.prim] = seen.get(case.prim, -1) + 1
        yield pytest.param(case, id=case.label(), marks=pytest.mark.slow if seen[case.prim] % 2 else ())


@pytest.mark.parametrize("case", _structural_params())
def test_structural_primitives_move_complex_values(case):
    """The real Cases of the structural primitives (and of the sparse ones), run on complex64 values: forward (eager
    and jit) and vmap."""
    complex_case = dataclasses.replace(case, dtypes=["complex64"])
    check_forward(complex_case, case.shapes[0], "complex64")
    check_vmap(complex_case, case.shapes[0], "complex64", "first")


@pytest.mark.parametrize("call,match", [
    (lambda: lax.floor(enp.ones(2, enp.complex64)), r"floor: operand must be floating-point, got c64\[2\]"),
    (lambda: lax.lt(enp.ones(2, enp.complex64), enp.ones(2, enp.complex64)), r"lt: operands .* got c64\[2\]"),
    (lambda: lax.reduce_max(enp.ones(2, enp.complex128), (0,)), r"reduce_max: .* got c128\[2\]"),
    (lambda: lax.erf(enp.ones(2, enp.complex64)), r"erf: .*c64\[2\].*complex"),
    (lambda: lax.atan2(enp.ones(2, enp.complex64), enp.ones(2, enp.complex64)), r"atan2: .*c64"),
    (lambda: lax.complex(enp.ones(2, enp.float16), enp.ones(2, enp.float16)), r"complex: .*float32 or float64"),
    (lambda: lax.bitcast_convert_type(enp.ones(2, enp.complex64), np.uint64), r"bitcast_convert_type: complex"),
    (lambda: enp.floor_divide(enp.ones(2, enp.complex64), 2), r"floor_divide: complex operands"),
    (lambda: enp.remainder(enp.ones(2, enp.complex64), 2), r"remainder: complex operands"),
    (lambda: ember.numpy.fft.rfft(enp.ones(4, enp.complex64)), r"rfft: complex input"),
], ids=["floor", "lt", "reduce_max", "erf", "atan2", "complex-f16", "bitcast", "floor_divide", "remainder", "rfft"])
def test_refusals_name_the_function_and_dtype(call, match):
    with pytest.raises(TypeError, match=match):
        call()


# ---------------------------------------------------------------------------------------------------------------
# Dtypes and promotion
def _check_lattice(names, weak, x64):
    """Every pair of the dtypes, each typed or (where weak names a Python scalar of it) weak, promotes in ember as
    jax._src.dtypes.result_type says, with enable_x64 set as x64 in both."""
    with jax.enable_x64(x64), ember.config.override(enable_x64=x64):
        for a, b in itertools.product(names, repeat=2):
            for wa, wb in itertools.product([False, True], repeat=2):
                if (wa and a not in weak) or (wb and b not in weak):
                    continue
                va = weak[a] if wa else np.zeros((), dt.canonicalize_dtype(a))
                vb = weak[b] if wb else np.zeros((), dt.canonicalize_dtype(b))
                want = jax_dtypes.result_type(va, vb, return_weak_type_flag=True)
                got = dt.promote_types(dt.dtype_and_weak(va), dt.dtype_and_weak(vb))
                assert (got[0], got[1]) == (np.dtype(want[0]), want[1]), (a, wa, b, wb)


def test_promotion_is_jax_lattice():
    """Every pair of ember dtypes, each typed or a weak Python scalar, promotes as JAX's lattice says (JAX in x64
    mode, ember with enable_x64: ember keeps 64-bit typed operands 64-bit in either mode)."""
    _check_lattice(["bool", "int8", "int32", "int64", "uint8", "uint32", "uint64", "float16", "bfloat16", "float32",
                    "float64", "complex64", "complex128"], {"int64": 1, "float64": 1.0, "complex128": 1j}, True)


def test_promotion_of_32_bit_dtypes_is_jax_default_mode():
    _check_lattice(["bool", "int8", "int32", "uint8", "uint32", "float16", "bfloat16", "float32", "complex64"],
                   {"int32": 1, "float32": 1.0, "complex64": 1j}, False)


def test_python_complex_is_weak_and_x64_decides_its_width(default_mode):
    x = enp.ones(2, enp.float32)
    assert (x + 1j).dtype == np.complex64 and (enp.ones(2, enp.float16) * 2j).dtype == np.complex64
    assert enp.asarray(1j).dtype == np.complex64 and enp.asarray(1j).aval.weak_type
    assert (enp.ones(2, enp.complex64) + np.float64(1)).dtype == np.complex64  # (np.float64(1): a float32 value)
    with ember.config.override(enable_x64=True):
        assert enp.asarray(1j).dtype == np.complex128 and enp.zeros(1, complex).dtype == np.complex128
        assert (enp.ones(2, enp.float64) + 1j).dtype == np.complex128
        assert (enp.ones(2, enp.complex64) + np.float64(1)).dtype == np.complex128
    assert enp.zeros(1, complex).dtype == np.complex64


def test_dtype_queries(default_mode):
    assert enp.result_type(enp.float32, enp.complex64) == np.complex64
    assert enp.result_type(1j, enp.int8) == np.complex64
    assert not enp.can_cast(enp.complex64, enp.float32) and enp.can_cast(enp.float32, enp.complex64)
    assert enp.finfo(enp.complex64).eps == np.finfo(np.float32).eps
    assert enp.finfo(enp.complex128).dtype == np.float64
    assert enp.issubdtype(enp.complex64, enp.complexfloating) and enp.isdtype(enp.complex128, "complex floating")
    assert enp.isdtype(enp.complex64, "numeric") and not enp.isdtype(enp.complex64, "real floating")
    z = enp.asarray(np.array([1 + 2j], np.complex64))
    assert enp.iscomplexobj(z) and not enp.iscomplexobj(enp.ones(1)) and enp.iscomplexobj(np.ones(1, complex))
    assert not enp.isrealobj(z) and enp.csingle == np.complex64 and enp.cdouble == np.complex128


# ---------------------------------------------------------------------------------------------------------------
# Transfers, printing, literals
@pytest.mark.parametrize("x64", [False, True])
def test_transfers_round_trip(default_mode, x64):
    with ember.config.override(enable_x64=x64):
        _transfers_round_trip(np.complex128 if x64 else np.complex64)


def _transfers_round_trip(widest):
    for dtype in (np.complex64, widest):
        x = crandn(3, 4, dtype=dtype)
        for a in (enp.asarray(x), ember.device_put(x), enp.array(x), ember.jit(lambda v: v)(x),
                  enp.from_dlpack(x), enp.asarray(np.ascontiguousarray(x.T).T)):
            assert a.dtype == dtype
            np.testing.assert_array_equal(np.asarray(a), x)
        np.testing.assert_array_equal(np.from_dlpack(enp.asarray(x)), x)
        assert enp.asarray(x).tolist() == x.tolist() and complex(enp.asarray(x)[1, 2]) == complex(x[1, 2])
    big = np.array([1 + 2j, -3j], ">c8")  # a non-native byte order is byte-swapped on entry
    np.testing.assert_array_equal(np.asarray(enp.asarray(big)), big.astype("<c8"))
    assert enp.asarray([1, 2.5, 1j]).dtype == widest


def test_printing_and_literals():
    z = enp.asarray(np.array([1 + 2j, -0.5j], np.complex64))
    assert repr(z) == "Array([ 1.+2.j , -0.-0.5j], dtype=complex64)"  # (as JAX prints it)
    assert str(z) == str(np.array([1 + 2j, -0.5j], np.complex64))
    ir = ember.stage_out(lambda v: v * (1 + 2j), ShapedArray((2,), np.complex64))
    assert "(1+2j):c64" in str(ir) and "c64[2]" in str(ir)
    text = ember.jit(lambda v: v * (1 + 2j) + complex(np.inf, np.nan)).lower(z).as_text()
    assert "dense<(1.0,2.0)> : tensor<complex<f32>>" in text
    assert "tensor<2xcomplex<f32>>" in text
    got = np.asarray(ember.jit(lambda v: v * (1 + 2j) + complex(np.inf, -np.nan))(z))
    assert np.isinf(got.real).all() and np.isnan(got.imag).all()


def test_random_normal_complex_equals_jax():
    for dtype in (np.complex64,):
        got = ember.random.normal(ember.random.PRNGKey(3), (5, 2), dtype)
        want = jax_result(lambda: jax.random.normal(jax.random.PRNGKey(3), (5, 2), dtype))
        assert got.dtype == dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_python_scalars_must_match_the_compiled_signature(default_mode):
    f = ember.jit(lambda a, b: a * b).lower(enp.ones(2), 2.0).compile()
    with pytest.raises(TypeError, match=r"expected f32\[\], got (the complex 1j|c64\[\])"):
        f(enp.ones(2), 1j)
    with pytest.raises(TypeError, match=r"add: operands must have the same dtype, got f32\[2\], c64\[\]"):
        lax.add(enp.ones(2), 1j)  # (a strict lax op: no promotion, as jax.lax)
    with pytest.raises(TypeError, match="complex number"):
        lax.full((2,), 1j, np.float32)  # (the imaginary part would be lost)


# ---------------------------------------------------------------------------------------------------------------
# ember.numpy against numpy in complex128 and against JAX in complex64
Z = crandn(3, 4)
W = crandn(4, 2)
Z_SPECIAL = np.array([1 + 1j, 2 + 0j, 1 + 3j, -2 - 1j, 0j, 1 + 1j])
UNARY = ["exp", "log", "log10", "log2", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
         "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "square", "reciprocal", "negative",
         "positive", "absolute", "sign", "conj", "conjugate", "real", "imag", "angle", "isfinite", "isnan",
         "isinf", "iscomplex", "isreal", "exp2"]
BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "power", "equal", "not_equal", "less",
          "less_equal", "greater", "greater_equal", "maximum", "minimum"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_functions(name):
    np_fn = {"exp2": lambda z: 2.0 ** z}.get(name, getattr(np, name))
    with ember.config.override(enable_x64=True):
        got = getattr(enp, name)(Z)
    want = np_fn(Z)
    assert np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    z64 = Z.astype(np.complex64)
    got32, want32 = getattr(enp, name)(z64), jax_result(lambda: getattr(jnp, name)(z64))
    assert np.asarray(got32).dtype == np.asarray(want32).dtype, name
    np.testing.assert_allclose(np.asarray(got32), np.asarray(want32), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", BINARY)
def test_binary_functions(name):
    a, b = Z_SPECIAL, np.roll(Z_SPECIAL, 1) + np.array([0, 0, 0, 0, 0, 1])  # ties in the real part
    got = getattr(enp, name)(a, b)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(a, b)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    a64, b64 = a.astype(np.complex64), b.astype(np.complex64)
    np.testing.assert_allclose(np.asarray(getattr(enp, name)(a64, b64)),
                               np.asarray(jax_result(lambda: getattr(jnp, name)(a64, b64))), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,fn", [
    ("sum", lambda m, z: m.sum(z, 0)), ("prod", lambda m, z: m.prod(z, 1)), ("mean", lambda m, z: m.mean(z)),
    ("var", lambda m, z: m.var(z, 1)), ("std", lambda m, z: m.std(z, ddof=1)),
    ("max", lambda m, z: m.max(z, 1)), ("min", lambda m, z: m.min(z)), ("cumsum", lambda m, z: m.cumsum(z, 1)),
    ("cumprod", lambda m, z: m.cumprod(z, 0)), ("matmul", lambda m, z: z @ W), ("dot", lambda m, z: m.dot(z, W)),
    ("vdot", lambda m, z: m.vdot(z, z[::-1])), ("inner", lambda m, z: m.inner(z, z)),
    ("vecdot", lambda m, z: m.vecdot(z, z[::-1] * 1j)),
    ("outer", lambda m, z: m.outer(z[0], z[1])), ("einsum", lambda m, z: m.einsum("ij,jk->ik", z, W)),
    ("tensordot", lambda m, z: m.tensordot(z, W, 1)),
    ("sort", lambda m, z: m.sort(m.concatenate([z, z.real + 0j]), 0)),
    ("argsort", lambda m, z: m.argsort(m.concatenate([z, z.real + 0j]).ravel())),
    ("sort_complex", lambda m, z: m.sort_complex(m.concatenate([z, z.real + 0j], 1))),
    ("sort_complex_real", lambda m, z: m.sort_complex(z.real)),
    ("where", lambda m, z: m.where(z.real > 0, z, 0)), ("concatenate", lambda m, z: m.concatenate([z, z], 1)),
    ("index", lambda m, z: z[1:, ::2][np.array([0, 1])]), ("transpose", lambda m, z: z.T),
    ("isclose", lambda m, z: m.isclose(z, z + 1e-9j)), ("round", lambda m, z: m.round(z, 1)),
    ("trace", lambda m, z: m.trace(z)), ("diff", lambda m, z: m.diff(z)),
    ("convolve", lambda m, z: m.convolve(z[0], z[1, :3])), ("correlate", lambda m, z: m.correlate(z[0], z[1], "full")),
    ("correlate_long_v", lambda m, z: m.correlate(z[0, :2], z[1], "same")),
    ("unique", lambda m, z: m.unique(m.concatenate([z.ravel(), z[0]]))),
    ("unique_rows", lambda m, z: m.unique(m.concatenate([z, z[:2]]), axis=0)),
    ("searchsorted", lambda m, z: m.searchsorted(m.sort(z[0]), z[1], side="right")),
    ("cov", lambda m, z: m.cov(z)), ("corrcoef", lambda m, z: m.corrcoef(z)), ("diag", lambda m, z: m.diag(z[0])),
    ("nan_to_num", lambda m, z: m.nan_to_num(m.where(z.real > 0, z, complex(np.nan, np.inf)))),
])
def test_reductions_products_and_selection(name, fn):
    with ember.config.override(enable_x64=True):
        got = fn(enp, enp.asarray(Z))
    want = fn(np, Z)
    if name == "searchsorted":  # (int32 indices, as jax.numpy; numpy's are int64)
        want = want.astype(np.int32)
    assert np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_at_updates_and_creation(default_mode):
    z = enp.asarray(Z)
    got = z.at[0, 1].add(1j).at[2].set(3 - 1j).at[1, 1].multiply(2j)
    want = Z.copy()
    want[0, 1] += 1j
    want[2] = 3 - 1j
    want[1, 1] *= 2j
    np.testing.assert_allclose(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(enp.full((2,), 1 + 2j)), np.full((2,), 1 + 2j, np.complex64))
    np.testing.assert_array_equal(np.asarray(enp.eye(2, dtype=enp.complex64)), np.eye(2, dtype=np.complex64))
    np.testing.assert_allclose(np.asarray(enp.linspace(0, 1 + 2j, 5)), np.linspace(0, 1 + 2j, 5), rtol=1e-6)
    assert enp.linspace(0, 1 + 2j, 5).dtype == np.complex64 and enp.zeros(2, enp.complex64).dtype == np.complex64
    with ember.config.override(enable_x64=True):
        assert enp.zeros(2, enp.complex128).dtype == np.complex128


# ---------------------------------------------------------------------------------------------------------------
# Derivatives: JAX's convention
LOSSES = {
    "abs": lambda m: lambda z: m.sum(m.abs(z)),
    "abs_squared": lambda m: lambda z: m.sum(m.real(z * m.conj(z))),
    "real_of_square": lambda m: lambda z: m.sum(m.real(z * z)),
    "imag_of_exp": lambda m: lambda z: m.sum(m.imag(m.exp(z))),
    "angle": lambda m: lambda z: m.sum(m.angle(z)),
    "log_sin": lambda m: lambda z: m.sum(m.abs(m.sin(z) + m.log(z))),
    "sqrt_tanh": lambda m: lambda z: m.sum(m.real(m.sqrt(z)) * m.imag(m.tanh(z))),
    "prod": lambda m: lambda z: m.abs(m.prod(z)),
    "vdot": lambda m: lambda z: m.abs(m.vdot(z, z[::-1] * 2j)),
    "powers": lambda m: lambda z: m.abs(m.sum(z ** 3 + 1 / z + z ** (0.5 + 1j))),
    "inverse_trig": lambda m: lambda z: m.sum(m.abs(m.arcsin(z) + m.arccos(z) + m.arctan(z) + m.arcsinh(z)
                                                    + m.arctanh(z) + m.arccosh(z))),
    "var_std": lambda m: lambda z: m.var(z) + m.std(z),
    "sort": lambda m: lambda z: m.sum(m.real(m.sort(z) * m.arange(3))),
    "max": lambda m: lambda z: m.abs(m.max(z)),
    "cumsum_where": lambda m: lambda z: m.sum(m.abs(m.where(m.real(z) > 0, m.cumsum(z), z * z))),
    "matmul": lambda m: lambda z: m.sum(m.abs(m.outer(z, z) @ z)),
}
Z3 = np.array([0.3 + 0.7j, -1.2 + 0.4j, 0.5 - 0.9j])


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i % 2 == 0 else pytest.mark.slow)
                                  for i, n in enumerate(LOSSES)])  # (the primitives' rules: tests/prims)
def test_grad_of_real_loss_of_complex_input_equals_jax(name):
    mk = LOSSES[name]
    with ember.config.override(enable_x64=True), jax.enable_x64(True):
        got = ember.grad(mk(enp))(Z3)
        jitted = ember.jit(ember.grad(mk(enp)))(Z3)
        want = jax_result(lambda: jax.grad(mk(jnp))(Z3))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(want), rtol=1e-10, atol=1e-12)
    z64 = Z3.astype(np.complex64)  # complex64 against JAX's default mode
    np.testing.assert_allclose(np.asarray(ember.grad(mk(enp))(z64)),
                               np.asarray(jax_result(lambda: jax.grad(mk(jnp))(z64))), rtol=2e-4, atol=2e-5)


def test_holomorphic_derivatives_equal_jax():
    f = lambda m: lambda z: m.sin(z) * z + m.exp(z) / (z + 2)  # noqa: E731
    g = lambda m: lambda z: m.sin(z) * z[::-1]  # noqa: E731
    z0 = np.complex64(0.3 + 0.2j)
    z = Z3.astype(np.complex64)
    np.testing.assert_allclose(np.asarray(ember.grad(f(enp), holomorphic=True)(z0)),
                               jax_result(lambda: jax.grad(f(jnp), holomorphic=True)(z0)), rtol=1e-5)
    value, grad = ember.value_and_grad(f(enp), holomorphic=True)(z0)
    np.testing.assert_allclose(np.asarray(grad), jax_result(lambda: jax.grad(f(jnp), holomorphic=True)(z0)), rtol=1e-5)
    for ours, theirs in ((ember.jacfwd, jax.jacfwd), (ember.jacrev, jax.jacrev)):
        np.testing.assert_allclose(np.asarray(ours(g(enp), holomorphic=True)(z)),
                                   jax_result(lambda: theirs(g(jnp), holomorphic=True)(z)), rtol=1e-5, atol=1e-6)
    # vmap of grad, and grad under jit
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(f(enp), holomorphic=True))(z)),
                               jax_result(lambda: jax.vmap(jax.grad(f(jnp), holomorphic=True))(z)), rtol=1e-5)


def test_jvp_and_vjp_of_complex_functions_equal_jax():
    h = lambda m: lambda z: m.abs(z) * m.exp(z) + m.conj(z) * 1j  # noqa: E731
    t = np.array([1 + 0.5j, -0.2j, 0.3], np.complex64)
    z = Z3.astype(np.complex64)
    _, got = ember.jvp(h(enp), (z,), (t,))
    np.testing.assert_allclose(np.asarray(got), jax_result(lambda: jax.jvp(h(jnp), (z,), (t,))[1]), rtol=1e-5,
                               atol=1e-6)
    _, pullback = ember.vjp(h(enp), z)
    np.testing.assert_allclose(np.asarray(pullback(t)[0]), jax_result(lambda: jax.vjp(h(jnp), z)[1](t)[0]), rtol=1e-5,
                               atol=1e-6)
    # a real input through a complex intermediate: a real cotangent comes back
    r = np.array([0.5, -1.0, 2.0], np.float32)
    k = lambda m: lambda x: m.sum(m.abs(m.exp(1j * x) * (x + 2j)) ** 2)  # noqa: E731
    got = ember.grad(k(enp))(r)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), jax_result(lambda: jax.grad(k(jnp))(r)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call,match", [
    (lambda: ember.grad(lambda z: z * z)(np.complex64(1 + 1j)), r"requires real-valued outputs.*holomorphic=True"),
    (lambda: ember.grad(lambda z: z * z, holomorphic=True)(np.float32(1)), r"holomorphic=True requires inputs "
                                                                             r"with complex dtype"),
    (lambda: ember.grad(lambda z: enp.abs(z), holomorphic=True)(np.complex64(1j)), r"holomorphic=True requires a "
                                                                                   r"complex output"),
    (lambda: ember.jacfwd(enp.sin)(Z3), r"jacfwd.*complex value: pass holomorphic=True"),
    (lambda: ember.jacrev(enp.sin)(Z3), r"jacrev.*complex value: pass holomorphic=True"),
], ids=["complex-output", "real-input", "real-output", "jacfwd", "jacrev"])
def test_derivative_refusals_as_jax(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_cotangent_check_accepts_complex_for_complex_inputs_only():
    from ember._core import Eqn, Literal, Var
    from ember._transforms.ad import RuleError, check_cotangent
    eqn = Eqn(PRIMITIVES["real"], [Var(ShapedArray((2,), np.complex64))], [Var(ShapedArray((2,), np.float32))], {})
    check_cotangent(eqn, "vjp", 0, enp.ones(2, enp.complex64))
    real_eqn = Eqn(PRIMITIVES["exp"], [Var(ShapedArray((2,), np.float32))], [Var(ShapedArray((2,), np.float32))], {})
    with pytest.raises(RuleError, match=r"returned a cotangent c64\[2\] for its input 0 of type f32\[2\]"):
        check_cotangent(real_eqn, "vjp", 0, enp.ones(2, enp.complex64))
    assert Literal  # (imported with the IR types)


def test_complex_convolution_matches_jax():
    """conv_general_dilated of complex operands (equinox's complex Conv layers): value, jit, the gradients of both
    operands (JAX's convention) and vmap, against JAX."""
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(2, 3, 6, 6)) + 1j * rng.normal(size=(2, 3, 6, 6))).astype(np.complex64)
    k = (rng.normal(size=(4, 3, 3, 3)) + 1j * rng.normal(size=(4, 3, 3, 3))).astype(np.complex64)

    def conv(lib):
        return lambda a, b: lib.lax.conv_general_dilated(a, b, (1, 2), "SAME", rhs_dilation=(1, 1))

    def loss(lib):
        return lambda a, b: lib.numpy.abs(conv(lib)(a, b)).sum()
    expected = np.asarray(conv(jax)(x, k))
    for got in (conv(ember)(x, k), ember.jit(conv(ember))(x, k)):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=2e-5)
    for g, e in zip(ember.grad(loss(ember), argnums=(0, 1))(x, k), jax.grad(loss(jax), argnums=(0, 1))(x, k)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-4, atol=2e-4)
    batched = ember.vmap(conv(ember), in_axes=(0, None))(np.stack([x, 2 * x]), k)
    np.testing.assert_allclose(np.asarray(batched[1]), 2 * expected, rtol=2e-5, atol=2e-5)
