"""ember.scipy.spatial.transform: jax.scipy.spatial.transform's Rotation (3-D rotations stored as unit quaternions
(x, y, z, w), scalar last) and Slerp (spherical linear interpolation between key rotations).

Both are NamedTuples, so pytrees: they pass through jit, vmap, grad and lax control flow as JAX's do. A Rotation
holds one rotation (quat of shape (4,), `single`) or a stack (quat of shape (..., 4)); every method works on the
leading axes alike. (Each conversion is one jitted program, so eager calls compile once per shape.) Values follow
scipy.spatial.transform (the formulas are the standard ones: Shepperd's method
from matrices, Bernardes and Viollet's from quaternions to Euler angles, series near the zero rotation).
"""
from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember import numpy as enp
from ember import random as erandom
from ember._api.jit import jit
from ember.scipy._util import check_arraylike

_AXIS = {"x": 0, "y": 1, "z": 2}


def _norm(v: Any) -> Any:
    """The Euclidean norm over the last axis."""
    return enp.sqrt(enp.sum(v * v, axis=-1))


@jit
def _normalize(quat: Any) -> Any:
    return quat / _norm(quat)[..., None]


@jit
def _compose(p: Any, q: Any) -> Any:
    """The Hamilton product p q of quaternions (x, y, z, w) (the rotation q, then p), broadcast over leading axes."""
    pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + enp.cross(pv, qv)
    scalar = pw * qw - enp.sum(pv * qv, axis=-1, keepdims=True)
    return enp.concatenate([vector, scalar], axis=-1)


@jit
def _as_matrix(quat: Any) -> Any:
    x, y, z, w = (quat[..., i] for i in range(4))
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [[xx - yy - zz + ww, 2 * (xy - zw), 2 * (xz + yw)],
            [2 * (xy + zw), -xx + yy - zz + ww, 2 * (yz - xw)],
            [2 * (xz - yw), 2 * (yz + xw), -xx - yy + zz + ww]]
    return enp.stack([enp.stack(row, axis=-1) for row in rows], axis=-2)


@jit
def _from_matrix(m: Any) -> Any:
    """Shepperd's method: of the four ways to read the quaternion off the matrix, the one whose pivot (a diagonal
    entry or the trace) is largest, then normalized."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    trace = m00 + m11 + m22
    s01, s02, s12 = m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1]
    d21, d02, d10 = m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]
    candidates = enp.stack([
        enp.stack([1 - trace + 2 * m00, s01, s02, d21], axis=-1),
        enp.stack([s01, 1 - trace + 2 * m11, s12, d02], axis=-1),
        enp.stack([s02, s12, 1 - trace + 2 * m22, d10], axis=-1),
        enp.stack([d21, d02, d10, 1 + trace], axis=-1)], axis=-2)
    pivot = enp.argmax(enp.stack([m00, m11, m22, trace], axis=-1), axis=-1)
    quat = enp.take_along_axis(candidates, pivot[..., None, None], axis=-2)[..., 0, :]
    return _normalize(quat)


@jit
def _from_rotvec(rotvec: Any) -> Any:
    # below an angle of 1e-3, series in the squared angle: no square root, so a finite gradient at the zero rotation
    # (JAX's is NaN there); the other branch sees a harmless angle (no NaN in the unselected branch's gradient)
    a2 = enp.sum(rotvec * rotvec, axis=-1)
    small = a2 <= 1e-6
    angle = enp.sqrt(enp.where(small, enp.ones_like(a2), a2))
    scale = enp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, enp.sin(angle / 2) / angle)
    w = enp.where(small, 1 - a2 / 8 + a2 * a2 / 384, enp.cos(angle / 2))
    return enp.concatenate([scale[..., None] * rotvec, w[..., None]], axis=-1)


@jit
def _as_rotvec(quat: Any) -> Any:
    quat = enp.where(quat[..., 3:] < 0, -quat, quat)   # w >= 0: the angle in [0, pi]
    angle = 2 * enp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    small = angle <= 1e-3
    safe = enp.where(small, enp.ones_like(angle), angle)
    a2 = angle * angle
    scale = enp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / enp.sin(safe / 2))
    return scale[..., None] * quat[..., :3]


@jit
def _as_mrp(quat: Any) -> Any:
    w = quat[..., 3:]
    sign = enp.where(w < 0, -1.0, 1.0).astype(quat.dtype)
    return sign * quat[..., :3] / (1 + sign * w)


@jit
def _from_mrp(mrp: Any) -> Any:
    s = enp.sum(mrp * mrp, axis=-1, keepdims=True)
    return enp.concatenate([2 * mrp, 1 - s], axis=-1) / (1 + s)


@jit
def _magnitude(quat: Any) -> Any:
    return 2 * enp.arctan2(_norm(quat[..., :3]), enp.abs(quat[..., 3]))


@jit
def _apply(quat: Any, vectors: Any, inverse: Any) -> Any:
    matrix = _as_matrix(quat)
    matrix = enp.where(inverse, enp.swapaxes(matrix, -1, -2), matrix)
    return enp.matmul(matrix, vectors[..., None])[..., 0]


def _check_seq(seq: Any, what: str, lengths: Sequence[int]) -> bool:
    """Checks an axis sequence ('xyz': extrinsic, 'XYZ': intrinsic); returns whether it is extrinsic."""
    if not isinstance(seq, str) or len(seq) not in lengths:
        if lengths == (3,):
            raise ValueError(f"Expected 3 axes, got {seq}.")
        raise ValueError(f"Expected axis specification to be a non-empty string of upto 3 characters, got {seq}")
    extrinsic = re.fullmatch(r"[xyz]+", seq) is not None
    if not (extrinsic or re.fullmatch(r"[XYZ]+", seq)):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return extrinsic


def _elementary(axis: int, angle: Any) -> Any:
    """The quaternions of rotations by angle about the basis axis."""
    half = angle / 2
    parts = [enp.zeros_like(angle)] * 3 + [enp.cos(half)]
    parts[axis] = enp.sin(half)
    return enp.stack(parts, axis=-1)


@functools.partial(jit, static_argnums=(1, 2, 3))
def _from_euler(angles: Any, seq: str, extrinsic: bool, degrees: bool) -> Any:
    """The quaternions of the rotations about the axes of seq by angles (..., len(seq)): the elementary rotations
    composed in order, each after the previous (extrinsic) or before it (intrinsic)."""
    if degrees:
        angles = enp.deg2rad(angles)
    axes = [_AXIS[c] for c in seq.lower()]
    quat = _elementary(axes[0], angles[..., 0])
    for n, axis in enumerate(axes[1:], 1):
        step = _elementary(axis, angles[..., n])
        quat = _compose(step, quat) if extrinsic else _compose(quat, step)
    return quat


@functools.partial(jit, static_argnums=(1, 2))
def _as_euler(quat: Any, seq: str, extrinsic: bool) -> Any:
    """Bernardes and Viollet's method (2022, as scipy's): the angles of the extrinsic sequence i, j, k (an
    intrinsic one read backwards, its first and third angles swapped)."""
    axes = [_AXIS[c] for c in seq.lower()]
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2   # +1 for a cyclic i, j, k, -1 otherwise
    w, qi, qj, qk = quat[..., 3], quat[..., i], quat[..., j], quat[..., k]
    if symmetric:
        a, b, c, d = w, qi, qj, qk * sign
    else:
        a, b, c, d = w - qj, qi + qk * sign, qj + w, qk * sign - qi
    middle = 2 * enp.arctan2(enp.hypot(c, d), enp.hypot(a, b))
    half_sum, half_diff = enp.arctan2(b, a), enp.arctan2(d, c)
    eps = 1e-7
    at_zero, at_pi = enp.abs(middle) <= eps, enp.abs(middle - np.pi) <= eps
    degenerate = at_zero | at_pi
    # the gimbal-lock cases: the third angle is 0 and the first carries the whole rotation
    lock = enp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    first, third = half_sum - half_diff, half_sum + half_diff
    if not extrinsic:
        first, third = third, first
    zero = enp.zeros_like(middle)
    angle0 = enp.where(degenerate, lock, first)
    angle2 = enp.where(degenerate, zero, third)
    if not symmetric:   # the third angle (the first of an intrinsic sequence) takes the permutation's sign
        if extrinsic:
            angle2 = angle2 * sign
        else:
            angle0 = angle0 * sign
        middle = middle - np.pi / 2
    angles = enp.stack([angle0, middle, angle2], axis=-1)
    return (angles + np.pi) % (2 * np.pi) - np.pi


@jit
def _canonical(quat: Any) -> Any:
    """q or -q: the one whose first nonzero entry of (w, x, y, z) is positive."""
    neg, zero = quat < 0, quat == 0
    flip = (neg[..., 3] | (zero[..., 3] & neg[..., 0]) | (zero[..., 3] & zero[..., 0] & neg[..., 1])
            | (zero[..., 3] & zero[..., 0] & zero[..., 1] & neg[..., 2]))
    return enp.where(flip[..., None], -quat, quat)


def _last_axis(name: str, value: Any, size: int, what: str) -> Any:
    check_arraylike(f"Rotation.{name}", value)
    array = enp.asarray(value)
    if array.ndim < 1 or array.shape[-1] != size:
        raise ValueError(f"Rotation.{name}: expected {what} of shape (..., {size}), got shape {array.shape}")
    if not enp.issubdtype(array.dtype, enp.inexact):
        array = array.astype(float)
    return array


class Rotation(NamedTuple):
    """Rotations in 3 dimensions (jax.scipy.spatial.transform.Rotation, scipy.spatial.transform.Rotation).

    Stored as unit quaternions `quat` (x, y, z, w): shape (4,) for a single rotation, (..., 4) for several. Make
    one with the from_* class methods (from_quat, from_matrix, from_rotvec, from_mrp, from_euler), identity or
    random; read it back with as_quat, as_matrix, as_rotvec, as_mrp, as_euler; compose with `*` (r * s applies s
    first), invert with inv, rotate vectors with apply, index a stack with [] and len, average with mean. A
    NamedTuple, so a pytree: it can be an argument or a result of jit, vmap and grad.

    Examples:
        >>> r = Rotation.from_euler('z', 90, degrees=True)
        >>> r.apply(enp.array([1.0, 0.0, 0.0]))      # about [0, 1, 0]
    """
    quat: Any

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """One stack of the given rotations (single ones count as stacks of one)."""
        return cls(enp.concatenate([enp.atleast_2d(r.quat) for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles: Any, degrees: bool = False) -> Rotation:
        """The rotations given by Euler angles about the axes of seq: up to 3 of 'xyz' (extrinsic: about the fixed
        axes) or of 'XYZ' (intrinsic: about the rotating ones), consecutive axes different; angles of shape
        (..., len(seq)) (a scalar for one axis), in radians or, with degrees=True, in degrees."""
        extrinsic = _check_seq(seq, "from_euler", (1, 2, 3))
        check_arraylike("Rotation.from_euler", angles)
        angles = enp.atleast_1d(enp.asarray(angles))
        if angles.shape[-1] != len(seq):
            raise ValueError(f"Rotation.from_euler: angles of shape {angles.shape} for the {len(seq)} axes "
                             f"{seq!r}: the last axis must have {len(seq)} entries")
        if not enp.issubdtype(angles.dtype, enp.inexact):
            angles = angles.astype(float)
        return cls(_from_euler(angles, seq, extrinsic, degrees))

    @classmethod
    def from_matrix(cls, matrix: Any) -> Rotation:
        """The rotations of 3 x 3 rotation matrices (shape (..., 3, 3))."""
        check_arraylike("Rotation.from_matrix", matrix)
        matrix = enp.asarray(matrix)
        if matrix.ndim < 2 or matrix.shape[-2:] != (3, 3):
            raise ValueError(f"Rotation.from_matrix: expected matrices of shape (..., 3, 3), got shape "
                             f"{matrix.shape}")
        if not enp.issubdtype(matrix.dtype, enp.inexact):
            matrix = matrix.astype(float)
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp: Any) -> Rotation:
        """The rotations of Modified Rodrigues Parameters (shape (..., 3)): the axis times tan(angle / 4)."""
        return cls(_from_mrp(_last_axis("from_mrp", mrp, 3, "MRPs")))

    @classmethod
    def from_quat(cls, quat: Any) -> Rotation:
        """The rotations of quaternions (x, y, z, w) (shape (..., 4)), normalized."""
        return cls(_normalize(_last_axis("from_quat", quat, 4, "quaternions")))

    @classmethod
    def from_rotvec(cls, rotvec: Any, degrees: bool = False) -> Rotation:
        """The rotations of rotation vectors (shape (..., 3)): the axis times the angle (radians, or degrees with
        degrees=True)."""
        rotvec = _last_axis("from_rotvec", rotvec, 3, "rotation vectors")
        return cls(_from_rotvec(enp.deg2rad(rotvec) if degrees else rotvec))

    @classmethod
    def identity(cls, num: int | None = None, dtype: Any = float) -> Rotation:
        """The identity rotation (num=None), or a stack of num of them (scipy's num; JAX's asserts it is None)."""
        quat = enp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        if num is None:
            return cls(quat)
        return cls(enp.tile(quat, (int(num), 1)))

    @classmethod
    def random(cls, random_key: Any, num: int | None = None) -> Rotation:
        """Rotations drawn uniformly (by Haar measure) with an ember.random key: normalized Gaussian quaternions.
        (JAX's raises NotImplementedError; its values could not be matched.)"""
        shape = (4,) if num is None else (int(num), 4)
        return cls(_normalize(erandom.normal(random_key, shape)))

    def __getitem__(self, indexer: Any) -> Rotation:
        """The rotation(s) at indexer of a stack."""
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        """The number of rotations in a stack (the length of the first axis)."""
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:  # type: ignore[override]
        """The composition: other first, then self (broadcast over stacks)."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors: Any, inverse: bool = False) -> Any:
        """The vectors (shape (..., 3)) rotated by this rotation (by its inverse with inverse=True)."""
        check_arraylike("Rotation.apply", vectors)
        vectors = enp.asarray(vectors)
        if vectors.ndim < 1 or vectors.shape[-1] != 3:
            raise ValueError(f"Rotation.apply: expected vectors of shape (..., 3), got shape {vectors.shape}")
        return _apply(self.quat, vectors, inverse)

    def as_euler(self, seq: str, degrees: bool = False) -> Any:
        """The Euler angles (shape (..., 3)) about the 3 axes of seq ('xyz' extrinsic, 'XYZ' intrinsic) in
        [-pi, pi) (the middle one in [0, pi] for symmetric sequences, [-pi/2, pi/2] otherwise); in degrees with
        degrees=True. At gimbal lock the third angle is 0."""
        extrinsic = _check_seq(seq, "as_euler", (3,))
        angles = _as_euler(self.quat, seq, extrinsic)
        return enp.rad2deg(angles) if degrees else angles

    def as_matrix(self) -> Any:
        """The rotation matrices (shape (..., 3, 3))."""
        return _as_matrix(self.quat)

    def as_mrp(self) -> Any:
        """The Modified Rodrigues Parameters (shape (..., 3)), of the rotation by at most pi."""
        return _as_mrp(self.quat)

    def as_rotvec(self, degrees: bool = False) -> Any:
        """The rotation vectors (shape (..., 3)), angles in [0, pi] (in degrees with degrees=True)."""
        rotvec = _as_rotvec(self.quat)
        return enp.rad2deg(rotvec) if degrees else rotvec

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Any:
        """The quaternions (x, y, z, w) (shape (..., 4)); canonical=True picks the sign with w > 0 (or the first
        nonzero of x, y, z positive), scalar_first=True orders them (w, x, y, z)."""
        quat = _canonical(self.quat) if canonical else self.quat
        return enp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self) -> Rotation:
        """The inverse rotations."""
        return Rotation(self.quat * enp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Any:
        """The rotation angles, in [0, pi]."""
        return _magnitude(self.quat)

    def mean(self, weights: Any = None) -> Rotation:
        """The (weighted) mean rotation: the quaternion maximizing the weighted sum of squared dot products with
        the rotations' (the top eigenvector of sum_i w_i q_i q_i^T; its sign is arbitrary). A single rotation is
        its own mean."""
        quat = enp.atleast_2d(self.quat)
        if quat.ndim != 2:
            raise ValueError(f"Rotation.mean: expected a 1-D stack of rotations, got quaternions of shape "
                             f"{self.quat.shape}")
        n = quat.shape[0]
        w = enp.ones(n, dtype=quat.dtype) if weights is None else enp.asarray(weights, dtype=quat.dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != n:
            raise ValueError(f"Expected `weights` to have number of values equal to number of rotations, got "
                             f"{w.shape[0]} values and {n} rotations.")
        k = enp.matmul(quat.T * w[None, :], quat)
        _, vectors = enp.linalg.eigh(k)
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        """Whether this is one rotation (quat of shape (4,)) rather than a stack."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation of rotations (jax.scipy.spatial.transform.Slerp): between consecutive key
    rotations, the rotation turns at constant angular velocity about a fixed axis.

    Make one with Slerp.init(times, rotations) (increasing times, one per key rotation, at least two); calling it
    with times (a scalar or 1-D) returns the interpolated Rotation. Times outside the key times extrapolate the
    first or last segment (scipy raises; JAX, under jit, cannot). A NamedTuple, so a pytree.
    """
    times: Any
    timedelta: Any
    rotations: Rotation
    rotvecs: Any

    @classmethod
    def init(cls, times: Any, rotations: Rotation) -> Slerp:
        """The interpolator through the key rotations (a stack of at least 2) at the key times (1-D, increasing)."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = enp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got {times.ndim} "
                             "dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of timestamps given, got "
                             f"{len(rotations)} rotations and {times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(times=times, timedelta=enp.diff(times), rotations=starts, rotvecs=steps.as_rotvec())

    def __call__(self, times: Any) -> Rotation:
        """The interpolated rotation(s) at times (a scalar: a single Rotation; 1-D: a stack)."""
        t = enp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = t.ndim == 0
        t = enp.atleast_1d(t)
        segment = enp.maximum(enp.searchsorted(self.times, t) - 1, 0)
        fraction = (t - self.times[segment]) / self.timedelta[segment]
        result = self.rotations[segment] * Rotation.from_rotvec(self.rotvecs[segment] * fraction[:, None])
        return result[0] if single else result


__all__ = ["Rotation", "Slerp"]
