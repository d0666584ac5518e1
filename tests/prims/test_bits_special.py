"""Oracle tests for the shifts, bit counts, nextafter and tan (elementwise.py), the special functions (special.py)
and the bit-level primitives (bits.py): every primitive there has a Case below. (XLA's generators, rng_bit_generator
and rng_uniform, are swept against JAX in tests/test_lax_rng.py.)"""
import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import scipy.special as sps
from jax._src.random.threefry2x32 import threefry2x32_p

import ember.numpy as enp
from ember import lax
from ember._prims import threefry2x32
from oracle import Case, oracle_tests
from recorded import jax_result

F = ["float32", "float64"]
INTS = ["int32", "uint8", "uint32"]
S1 = [((5,),), ((2, 3),), ((),)]
S2 = [((5,), (5,)), ((2, 3), (2, 3)), ((2, 3), ())]


def _shift_np(fn):
    def run(x, y):
        bits = x.dtype.itemsize * 8
        wide = np.int64 if x.dtype.kind == "i" else np.uint64
        out = fn(x.astype(wide), y.astype(wide))
        return np.where(y >= bits, 0, out).astype(x.dtype)
    return run


def _logical_right(x, y):
    bits = x.dtype.itemsize * 8
    unsigned = x.view(np.dtype(f"uint{bits}")).astype(np.uint64)
    return np.where(y >= bits, 0, unsigned >> y.astype(np.uint64)).astype(np.dtype(f"uint{bits}")).view(x.dtype)


def _clz(x):
    bits = x.dtype.itemsize * 8
    unsigned = x.view(np.dtype(f"uint{bits}")).astype(np.uint64)
    return np.array([bits - int(v).bit_length() for v in unsigned.ravel()]).reshape(x.shape).astype(x.dtype)


def _popcount(x):
    bits = x.dtype.itemsize * 8
    unsigned = x.view(np.dtype(f"uint{bits}")).astype(np.uint64)
    return np.array([bin(int(v)).count("1") for v in unsigned.ravel()]).reshape(x.shape).astype(x.dtype)


def _threefry_np(k1, k2, x1, x2):
    """Threefry-2x32 (20 rounds) in plain numpy uint32 arithmetic: the textbook algorithm, an independent oracle."""
    k1, k2, x1, x2 = (np.broadcast_to(a, np.broadcast_shapes(*(np.shape(b) for b in (k1, k2, x1, x2))))
                      .astype(np.uint64) for a in (k1, k2, x1, x2))
    mask = np.uint64(0xFFFFFFFF)

    def rotl(v, r):
        return ((v << np.uint64(r)) | (v >> np.uint64(32 - r))) & mask

    ks = [k1, k2, k1 ^ k2 ^ np.uint64(0x1BD11BDA)]
    v = [(x1 + ks[0]) & mask, (x2 + ks[1]) & mask]
    rotations = [(13, 15, 26, 6), (17, 29, 16, 24)]
    for i in range(5):
        for r in rotations[i % 2]:
            v[0] = (v[0] + v[1]) & mask
            v[1] = v[0] ^ rotl(v[1], r)
        v[0] = (v[0] + ks[(i + 1) % 3]) & mask
        v[1] = (v[1] + ks[(i + 2) % 3] + np.uint64(i + 1)) & mask
    return np.stack([v[0].astype(np.uint32), v[1].astype(np.uint32)])


def _polygamma1(lib):
    return lambda x: lib.polygamma(lib.full_like(x, 1.0), x)


_RBG_KEY = np.array([7, 0, 2 ** 31 + 5, 42], np.uint32)


def _bits_xor(lib, jax_side=False):
    """rng_bit_generator's next key and its bits xor x, from a fixed key (JAX's bits are the oracle; the key is
    not an argument: under vmap JAX's rule draws every member's bits from the first member's key, which is no
    per-member function, so the batched key is tested against jax.vmap in tests/test_lax_rng.py)."""
    def run(x):
        if jax_side:
            key, bits = jax_result(lambda: lib.rng_bit_generator(_RBG_KEY, x.shape, dtype=x.dtype))
            return key, bits ^ x
        key, bits = lib.rng_bit_generator(_RBG_KEY, x.shape, dtype=x.dtype)
        return key, lib.bitwise_xor(bits, x)
    return run


def _uniform_draw(a, w):
    """A draw of rng_uniform in [a, b), b = a + |w| + 1: whether each number is inside (all ones, in a's dtype), plus
    the numbers times 0 (which carry the draw's derivative: differentiating it is JAX's error)."""
    b = lax.add(lax.add(a, lax.abs(w)), lax.full_like(a, 1))
    r = lax.rng_uniform(a, b, (64,))
    inside = lax.convert_element_type(lax.bitwise_and(lax.ge(r, a), lax.lt(r, b)), r.dtype)
    return lax.add(inside, lax.mul(r, lax.full_like(r, 0)))


CASES = [
    Case("shift_left", lax.shift_left, _shift_np(np.left_shift), S2, INTS, jax=jlax.shift_left, domain="int_small",
         grad=False),
    Case("shift_right_logical", lax.shift_right_logical, _logical_right, S2, INTS, jax=jlax.shift_right_logical,
         domain="int_small", grad=False),
    Case("shift_right_arithmetic", lax.shift_right_arithmetic, lambda x, y: (x >> y).astype(x.dtype), S2, INTS,
         jax=jlax.shift_right_arithmetic, domain="int_small", grad=False),
    Case("clz", lax.clz, _clz, S1, INTS, jax=jlax.clz, grad=False),
    Case("population_count", lax.population_count, _popcount, S1, INTS, jax=jlax.population_count, grad=False),
    Case("nextafter", lax.nextafter, lambda x, y: np.nextafter(x, y), S2, F, jax=jlax.nextafter, grad=False),
    Case("tan", lax.tan, np.tan, S1, F, jax=jlax.tan, domain="unit"),
    Case("erf", lax.erf, lambda x: sps.erf(x).astype(x.dtype), S1, F, jax=jlax.erf),
    Case("erfc", lax.erfc, lambda x: sps.erfc(x).astype(x.dtype), S1, F, jax=jlax.erfc),
    Case("erf_inv", lax.erf_inv, lambda x: sps.erfinv(x).astype(x.dtype), S1, F, jax=jlax.erf_inv, domain="unit"),
    Case("lgamma", lax.lgamma, lambda x: sps.gammaln(x).astype(x.dtype), S1, F, jax=jlax.lgamma,
         domain="positive"),
    Case("digamma", lax.digamma, lambda x: sps.digamma(x).astype(x.dtype), S1, F, jax=jlax.digamma,
         domain="positive"),
    Case("polygamma", _polygamma1(lax), lambda x: sps.polygamma(1, x).astype(x.dtype), S1, F,
         jax=_polygamma1(jlax), domain="positive"),
    Case("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, "uint32"),
         lambda x: x.view(np.uint32), S1, ["float32"], jax=lambda x: jlax.bitcast_convert_type(x, jnp.uint32),
         grad=False),
    Case("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, "uint8"),
         lambda x: np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.shape + (4,)), S1, ["float32", "int32"],
         jax=lambda x: jlax.bitcast_convert_type(x, jnp.uint8), grad=False, name="bitcast_narrower"),
    Case("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, "float32"),
         lambda x: x.view(np.float32).reshape(x.shape[:-1]), [((3, 4),), ((4,),)], ["uint8"],
         jax=lambda x: jlax.bitcast_convert_type(x, jnp.float32), grad=False, name="bitcast_wider"),
    Case("threefry2x32", lambda *a: enp.stack(threefry2x32(*a)), _threefry_np,
         [((5,), (5,), (5,), (5,)), ((), (), (2, 3), (2, 3)), ((2, 3), (2, 3), (), ())], ["uint32"],
         jax=lambda *a: jnp.stack(threefry2x32_p.bind(*a)), grad=False),
    Case("rng_bit_generator", _bits_xor(lax), _bits_xor(jax.lax, jax_side=True), [((5,),), ((2, 3),), ((0, 4),)],
         ["uint32", "uint8", "uint16"], grad=False),
    Case("rng_uniform", _uniform_draw, lambda a, w: np.ones(64, a.dtype), [((), ())],
         ["float32", "int32", "float64", "uint32", "bfloat16"], forward=False, reverse=False),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


def test_threefry_known_answer():
    """The Random123 known-answer vector for Threefry-2x32-20 with all-ones key and counter."""
    ones = np.array(0xFFFFFFFF, np.uint32)
    y1, y2 = threefry2x32(ones, ones, ones, ones)
    assert (int(y1), int(y2)) == (0x1CB996FC, 0xBB002BE7)


def test_bitcast_errors():
    import pytest

    with pytest.raises(TypeError, match=r"bitcast_convert_type: to a 32-bit dtype from u8\[3\] needs a last "
                                        r"dimension of size 4"):
        lax.bitcast_convert_type(enp.zeros(3, "uint8"), "float32")
    with pytest.raises(TypeError, match="bitcast_convert_type: booleans"):
        lax.bitcast_convert_type(enp.zeros(3, bool), "uint8")


def test_shift_and_threefry_dtype_errors():
    import pytest

    with pytest.raises(TypeError, match=r"shift_left: operands must be signed integer or unsigned integer, "
                                        r"got f32\[3\]"):
        lax.shift_left(enp.zeros(3), enp.zeros(3))
    with pytest.raises(TypeError, match=r"threefry2x32: operands must be uint32"):
        threefry2x32(*[enp.zeros(2, "int32")] * 4)
