"""Oracle tests for the shifts, bit counts, nextafter and tan (elementwise.py), the special functions (special.py)
and the bit-level primitives (bits.py): every primitive there has a Case below. (XLA's generators, rng_bit_generator
and rng_uniform, are swept against JAX in tests/test_lax_rng.py.) The counter-based hashes are also checked against
Random123's known-answer vectors (its tests/kat_vectors)."""
import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sps
from jax._src.random.philox2x32 import philox2x32_p
from jax._src.random.philox4x32 import philox4x32_p
from jax._src.random.threefry2x32 import threefry2x32_p
from jax._src.random.threefry4x32 import threefry4x32_p

import ember.numpy as enp
from ember import lax
from ember._prims import bits, philox2x32, philox4x32, threefry2x32, threefry4x32
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


def _words(*operands):
    """The operands broadcast to one shape, as Python-int-safe uint64 arrays (every product of two words fits)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in operands))
    return [np.broadcast_to(a, shape).astype(np.uint64) for a in operands]


_MASK = np.uint64(0xFFFFFFFF)


def _threefry4x32_np(k0, k1, k2, k3, x0, x1, x2, x3):
    """Threefry-4x32 (20 rounds) from the Threefish-256 description in the Random123 paper, written as its own
    schedule: a table of (the pairs mixed, the rotations) for the 8 rounds that repeat, and a subkey injected before
    round 0 and after every fourth round (subkey s: key words s..s+3 of the extended key, s added to the last)."""
    k = _words(k0, k1, k2, k3)
    x = _words(x0, x1, x2, x3)
    extended = k + [k[0] ^ k[1] ^ k[2] ^ k[3] ^ np.uint64(0x1BD11BDA)]
    schedule = [((0, 1, 10), (2, 3, 26)), ((0, 3, 11), (2, 1, 21)), ((0, 1, 13), (2, 3, 27)), ((0, 3, 23), (2, 1, 5)),
                ((0, 1, 6), (2, 3, 20)), ((0, 3, 17), (2, 1, 11)), ((0, 1, 25), (2, 3, 10)), ((0, 3, 18), (2, 1, 20))]

    def inject(s):
        for j in range(4):
            x[j] = (x[j] + extended[(s + j) % 5] + (np.uint64(s) if j == 3 else np.uint64(0))) & _MASK

    inject(0)
    for rnd in range(20):
        for a, b, r in schedule[rnd % 8]:
            x[a] = (x[a] + x[b]) & _MASK
            x[b] = (((x[b] << np.uint64(r)) | (x[b] >> np.uint64(32 - r))) & _MASK) ^ x[a]
        if rnd % 4 == 3:
            inject(rnd // 4 + 1)
    return np.stack([w.astype(np.uint32) for w in x])


def _philox_np(keys, counters, multipliers, rounds=10):
    """Philox-Nx32 from the Random123 paper: each round forms the full 64-bit products of the even counter words
    and the multipliers, then the new counter is, for each product (hi, lo) of word 2j, hi ^ key_j ^ the next odd
    word, then lo, with the products taken in reverse order for N = 4 (Random123's permutation); the key words
    grow by the Weyl constants after each round but the last."""
    weyl = [np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)]
    keys, counters = list(keys), list(counters)
    for rnd in range(rounds):
        products = [counters[2 * j] * np.uint64(m) for j, m in enumerate(multipliers)]
        his, los = [p >> np.uint64(32) for p in products], [p & _MASK for p in products]
        order = range(len(multipliers) - 1, -1, -1)
        new = []
        for slot, j in enumerate(order):
            new += [his[j] ^ keys[slot] ^ counters[2 * slot + 1], los[j]]
        counters = new
        if rnd < rounds - 1:
            keys = [(k + w) & _MASK for k, w in zip(keys, weyl)]
    return np.stack([c.astype(np.uint32) for c in counters])


def _philox2x32_np(k, x0, x1):
    k, x0, x1 = _words(k, x0, x1)
    return _philox_np([k], [x0, x1], [0xD256D193])


def _philox4x32_np(k0, k1, x0, x1, x2, x3):
    k0, k1, x0, x1, x2, x3 = _words(k0, k1, x0, x1, x2, x3)
    return _philox_np([k0, k1], [x0, x1, x2, x3], [0xD2511F53, 0xCD9E8D57])


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
    Case("threefry4x32", lambda *a: enp.stack(threefry4x32(*a)), _threefry4x32_np,
         [((5,),) * 8, ((),) * 4 + ((2, 3),) * 4, ((2, 3),) * 4 + ((),) * 4], ["uint32"],
         jax=lambda *a: jnp.stack(threefry4x32_p.bind(*a)), grad=False),
    Case("philox2x32", lambda *a: enp.stack(philox2x32(*a)), _philox2x32_np,
         [((5,), (5,), (5,)), ((), (2, 3), (2, 3)), ((2, 3), (), ())], ["uint32"],
         jax=lambda *a: jnp.stack(philox2x32_p.bind(*a)), grad=False),
    Case("philox4x32", lambda *a: enp.stack(philox4x32(*a)), _philox4x32_np,
         [((5,),) * 6, ((), ()) + ((2, 3),) * 4, ((2, 3),) * 2 + ((),) * 4], ["uint32"],
         jax=lambda *a: jnp.stack(philox4x32_p.bind(*a)), grad=False),
    Case("rng_bit_generator", _bits_xor(lax), _bits_xor(jax.lax, jax_side=True), [((5,),), ((2, 3),), ((0, 4),)],
         ["uint32", "uint8", "uint16"], grad=False),
    Case("rng_uniform", _uniform_draw, lambda a, w: np.ones(64, a.dtype), [((), ())],
         ["float32", "int32", "float64", "uint32", "bfloat16"], forward=False, reverse=False),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


# Random123's tests/kat_vectors for the hashes of 32-bit words at JAX's round counts: counter words, key words,
# expected output words (the file's layout).
_KAT = {
    "threefry2x32": [("00000000 00000000", "00000000 00000000", "6b200159 99ba4efe"),
                     ("ffffffff ffffffff", "ffffffff ffffffff", "1cb996fc bb002be7"),
                     ("243f6a88 85a308d3", "13198a2e 03707344", "c4923a9c 483df7a0")],
    "threefry4x32": [("00000000 00000000 00000000 00000000", "00000000 00000000 00000000 00000000",
                      "9c6ca96a e17eae66 fc10ecd4 5256a7d8"),
                     ("ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff ffffffff ffffffff",
                      "2a881696 57012287 f6c7446e a16a6732"),
                     ("243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0 082efa98 ec4e6c89",
                      "59cd1dbb b8879579 86b5d00c ac8b6d84")],
    "philox2x32": [("00000000 00000000", "00000000", "ff1dae59 6cd10df2"),
                   ("ffffffff ffffffff", "ffffffff", "2c3f628b ab4fd7ad"),
                   ("243f6a88 85a308d3", "13198a2e", "dd7ce038 f62a4c12")],
    "philox4x32": [("00000000 00000000 00000000 00000000", "00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
                   ("ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
                   ("243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1")],
}


@pytest.mark.parametrize("name", sorted(_KAT))
def test_hashes_known_answers(name):
    """Each hash, and its numpy oracle, give Random123's known answers (the primitives take the key words first)."""
    ours = {"threefry2x32": threefry2x32, "threefry4x32": threefry4x32, "philox2x32": philox2x32,
            "philox4x32": philox4x32}[name]
    oracle = {"threefry2x32": _threefry_np, "threefry4x32": _threefry4x32_np, "philox2x32": _philox2x32_np,
              "philox4x32": _philox4x32_np}[name]
    for counter, key, expected in _KAT[name]:
        words = [np.array(int(w, 16), np.uint32) for w in key.split() + counter.split()]
        want = [int(w, 16) for w in expected.split()]
        assert [int(w) for w in ours(*words)] == want, (name, counter, key)
        assert [int(w) for w in oracle(*words)] == want, (name, counter, key)


def test_bitcast_errors():
    with pytest.raises(TypeError, match=r"bitcast_convert_type: to a 32-bit dtype from u8\[3\] needs a last "
                                        r"dimension of size 4"):
        lax.bitcast_convert_type(enp.zeros(3, "uint8"), "float32")
    with pytest.raises(TypeError, match="bitcast_convert_type: booleans"):
        lax.bitcast_convert_type(enp.zeros(3, bool), "uint8")


def test_shift_and_hash_operand_errors():
    with pytest.raises(TypeError, match=r"shift_left: operands must be signed integer or unsigned integer, "
                                        r"got f32\[3\]"):
        lax.shift_left(enp.zeros(3), enp.zeros(3))
    with pytest.raises(TypeError, match=r"threefry2x32: operands must be uint32"):
        threefry2x32(*[enp.zeros(2, "int32")] * 4)
    with pytest.raises(TypeError, match=r"philox4x32: operands must be uint32, got u32\[2\], u32\[2\], f32\[2\]"):
        philox4x32(*[enp.zeros(2, "uint32")] * 2, *[enp.zeros(2, "float32")] * 4)
    with pytest.raises(TypeError, match=r"philox2x32: takes 3 operands \(k, x0, x1\), got 2"):
        bits.philox2x32_p.bind(*[enp.zeros(2, "uint32")] * 2)
    with pytest.raises(TypeError, match=r"threefry4x32: operands must have equal shapes \(or be scalars\), got "
                                        r"u32\[2\], .*u32\[3\]"):
        threefry4x32(*[enp.zeros(2, "uint32")] * 4, *[enp.zeros(3, "uint32")] * 4)
