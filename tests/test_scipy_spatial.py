"""ember.scipy.spatial.transform's Rotation and Slerp against scipy.spatial.transform (values) and
jax.scipy.spatial.transform (the same formulas: gimbal-lock conventions, the sign of mean's eigenvector), as pytrees
under jit, vmap and grad; the errors JAX raises."""
import itertools

import jax
import jax.scipy.spatial.transform as jst
import numpy as np
import pytest
import scipy.spatial.transform as sst

import ember
import ember.numpy as enp
from ember.scipy.spatial.transform import Rotation, Slerp
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")

R = np.random.default_rng(11)
Q = R.normal(size=(6, 4))
V = R.normal(size=(6, 3))
SEQS = ["".join(p) for p in itertools.permutations("xyz")] + ["xyx", "xzx", "yxy", "yzy", "zxz", "zyz"]
SEQS = SEQS + [s.upper() for s in SEQS]            # (every sequence, in the slow run; four in the default one)


def _close(got, want, tol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def _angles_close(got, want, tol=1e-10):
    d = np.abs(np.asarray(got) - np.asarray(want)) % (2 * np.pi)
    assert np.minimum(d, 2 * np.pi - d).max() <= tol


@pytest.mark.parametrize("seqs", [["xyz", "ZXZ", "yxy", "XZY"], pytest.param(SEQS, marks=pytest.mark.slow)],
                         ids=["some", "all"])
def test_conversions_match_scipy(seqs):
    r, s = Rotation.from_quat(Q), sst.Rotation.from_quat(Q)
    _close(r.as_quat(), s.as_quat())
    _close(r.as_quat(canonical=True, scalar_first=True), s.as_quat(canonical=True, scalar_first=True))
    _close(r.as_matrix(), s.as_matrix())
    _close(r.as_rotvec(), s.as_rotvec())
    _close(r.as_rotvec(degrees=True), s.as_rotvec(degrees=True), 1e-10)
    _close(r.as_mrp(), s.as_mrp())
    _close(r.magnitude(), s.magnitude())
    _close(r.inv().as_matrix(), s.inv().as_matrix())
    _close((r * r[::-1]).as_matrix(), (s * s[::-1]).as_matrix())
    _close(r.apply(V), s.apply(V))
    _close(r.apply(V, inverse=True), s.apply(V, inverse=True))
    _close(r[2].apply(V), s[2].apply(V))                 # one rotation, several vectors
    for seq in seqs:
        _angles_close(r.as_euler(seq), s.as_euler(seq))
        _close(Rotation.from_euler(seq, s.as_euler(seq)).as_matrix(), s.as_matrix())
    _angles_close(r.as_euler("zyx", degrees=True), s.as_euler("zyx", degrees=True), 1e-8)
    _close(Rotation.from_euler("ZY", np.array([30.0, 45.0]), degrees=True).as_matrix(),
           sst.Rotation.from_euler("ZY", [30.0, 45.0], degrees=True).as_matrix())
    _close(Rotation.from_euler("x", 0.5).as_quat(), sst.Rotation.from_euler("x", 0.5).as_quat())
    _close(Rotation.from_matrix(s.as_matrix()).as_matrix(), s.as_matrix())
    _close(Rotation.from_rotvec(s.as_rotvec()).as_matrix(), s.as_matrix())
    _close(Rotation.from_rotvec(s.as_rotvec(degrees=True), degrees=True).as_matrix(), s.as_matrix())
    _close(Rotation.from_mrp(s.as_mrp()).as_matrix(), s.as_matrix())
    small = np.array([[1e-5, -2e-5, 3e-6], [0.0, 0.0, 0.0]])   # (the series near the zero rotation)
    _close(Rotation.from_rotvec(small).as_quat(), sst.Rotation.from_rotvec(small).as_quat(), 1e-15)
    _close(Rotation.from_quat(sst.Rotation.from_rotvec(small).as_quat()).as_rotvec(), small, 1e-15)


def test_matches_jax_including_gimbal_lock():
    """At gimbal lock (middle angle 0 or pi, or +-pi/2) the third angle is 0, as both JAX and scipy."""
    lock = sst.Rotation.from_euler("xyz", [[0.3, 0.0, 0.5], [0.3, np.pi / 2, 0.2], [0.1, -np.pi / 2, 0.4]])
    quats = np.concatenate([Q / np.linalg.norm(Q, axis=1, keepdims=True), lock.as_quat(),
                            sst.Rotation.from_euler("zxz", [[0.2, 0.0, 0.3], [0.2, np.pi, 0.3]]).as_quat()])
    seqs = ["xyz", "XYZ", "zxz", "ZXZ", "yxz", "YZY"]
    got = [Rotation(quats).as_euler(seq) for seq in seqs]
    want = jax_result(lambda: [jst.Rotation(quats).as_euler(seq) for seq in seqs])
    for g, w in zip(got, want):
        _angles_close(g, w)
    _close(Rotation.from_matrix(np.asarray(Rotation(quats).as_matrix())).quat,
           jax_result(lambda: jst.Rotation.from_matrix(jst.Rotation(quats).as_matrix()).quat))


def test_stacks_single_rotations_and_mean():
    r = Rotation.from_quat(Q)
    one = Rotation.from_quat(Q[0])
    assert one.single and not r.single and len(r) == 6 and len(r[1:4]) == 3 and r[0].single
    with pytest.raises(TypeError, match="Single rotation is not subscriptable"):
        one[0]
    with pytest.raises(TypeError, match="Single rotation has no len"):
        len(one)
    both = Rotation.concatenate([r[:2], one, r[4:]])
    assert both.quat.shape == (5, 4)
    _close(both.quat[2], one.quat)
    assert Rotation.identity().quat.shape == (4,) and Rotation.identity(num=3).quat.shape == (3, 4)
    _close(Rotation.identity(num=3).as_matrix(), np.broadcast_to(np.eye(3), (3, 3, 3)))
    w = np.arange(1.0, 7.0)
    for weights in (None, w):
        _close(r.mean(weights).as_matrix(), sst.Rotation.from_quat(Q).mean(weights).as_matrix(), 1e-10)
    _close(r.mean(w).quat, jax_result(lambda: jst.Rotation.from_quat(Q).mean(w).quat), 1e-10)
    _close(one.mean().as_matrix(), one.as_matrix())
    with pytest.raises(ValueError, match="number of values equal to number of rotations"):
        r.mean(np.ones(3))
    with pytest.raises(ValueError, match="1 dimensional"):
        r.mean(np.ones((6, 1)))


def test_slerp_matches_scipy():
    keys = sst.Rotation.from_euler("zxy", [[90, 0, 0], [0, 45, 0], [0, 0, -30], [10, 20, 30]], degrees=True)
    times = np.array([0.0, 1.0, 2.5, 4.0])
    ours = Slerp.init(times, Rotation.from_quat(keys.as_quat()))
    theirs = sst.Slerp(times, keys)
    t = np.array([0.0, 0.3, 1.0, 1.7, 2.5, 3.99, 4.0])
    _close(ours(t).as_matrix(), theirs(t).as_matrix(), 1e-12)
    single = ours(1.25)
    assert single.single
    _close(single.as_matrix(), theirs(1.25).as_matrix(), 1e-12)
    jitted = ember.jit(lambda s, t: s(t).as_quat())(ours, t)              # a pytree argument
    _close(jitted, ours(t).as_quat(), 1e-14)
    with pytest.raises(TypeError, match="must be a `Rotation` instance"):
        Slerp.init(times, keys.as_quat())
    with pytest.raises(ValueError, match="at least 2 rotations"):
        Slerp.init(times[:1], Rotation.from_quat(Q[0]))
    with pytest.raises(ValueError, match="number of rotations to be equal to number of timestamps"):
        Slerp.init(times[:3], Rotation.from_quat(keys.as_quat()))
    with pytest.raises(ValueError, match="1 dimensional"):
        Slerp.init(times[None], Rotation.from_quat(keys.as_quat()))
    with pytest.raises(ValueError, match="at most 1-dimensional"):
        ours(t[None])


def test_pytree_jit_vmap_and_grad():
    r = Rotation.from_quat(Q)
    leaves, treedef = ember.tree.flatten(r)
    assert len(leaves) == 1 and ember.tree.unflatten(treedef, leaves).quat is leaves[0]
    _close(ember.jit(lambda r, v: r.apply(v))(r, V), r.apply(V), 1e-14)
    mapped = ember.vmap(lambda q, v: Rotation.from_quat(q).apply(v))(Q, V)
    _close(mapped, sst.Rotation.from_quat(Q).apply(V))
    mapped = ember.vmap(lambda r: r.as_euler("xyz"))(r)                 # a Rotation batched along its quat
    _angles_close(mapped, sst.Rotation.from_quat(Q).as_euler("xyz"))
    rotvec = np.array([0.3, -0.2, 0.5])

    def loss(rotation, num):
        return lambda v: num.sum(rotation.from_rotvec(v).apply(np.array([1.0, 2.0, 3.0])) * np.array([1.0, -1, 2]))
    got = ember.grad(loss(Rotation, enp))(rotvec)
    _close(got, jax_result(lambda: jax.grad(loss(jst.Rotation, jax.numpy))(rotvec)), 1e-12)
    # at the zero rotation JAX's gradient is NaN (its series' unselected branch); ember's is finite
    g0 = np.asarray(ember.grad(loss(Rotation, enp))(np.zeros(3)))
    assert np.isfinite(g0).all()
    _close(g0, np.cross(np.array([1.0, 2.0, 3.0]), np.array([1.0, -1, 2])), 1e-12)


def test_random_rotations():
    key = ember.random.key(0)
    r = Rotation.random(key, 2000)
    q = np.asarray(r.quat)
    assert q.shape == (2000, 4)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-12)
    _close(Rotation.random(key, 2000).quat, q, 0)                         # a function of the key
    assert np.abs(np.asarray(r.as_matrix()).mean(axis=0)).max() < 0.05   # Haar: E[R] = 0
    assert Rotation.random(key).single


def test_errors():
    with pytest.raises(ValueError, match="upto 3 characters"):
        Rotation.from_euler("xyzx", np.zeros(4))
    with pytest.raises(ValueError, match=r"from \['x', 'y', 'z'\] or \['X', 'Y', 'Z'\]"):
        Rotation.from_euler("xYz", np.zeros(3))
    with pytest.raises(ValueError, match="consecutive axes to be different"):
        Rotation.from_euler("xxy", np.zeros(3))
    with pytest.raises(ValueError, match="last axis must have 1 entries"):
        Rotation.from_euler("z", np.array([90.0, 45.0]))
    with pytest.raises(ValueError, match="Expected 3 axes"):
        Rotation.from_quat(Q).as_euler("xy")
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 4\)"):
        Rotation.from_quat(np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 3, 3\)"):
        Rotation.from_matrix(np.eye(4))
    with pytest.raises(ValueError, match=r"vectors of shape \(\.\.\., 3\)"):
        Rotation.from_quat(Q).apply(np.ones(2))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        Rotation.from_quat([0.0, 0.0, 0.0, 1.0])
