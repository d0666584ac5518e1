"""Oracle tests for ember/_prims/conv.py: conv_general_dilated in every configuration family (strides, padding,
lhs/rhs dilation, feature and batch groups, layouts, 1-3 spatial dimensions) against JAX's values, gradients
(both operands), Hessians and batching; and conv_transpose."""
import jax
import jax.lax as jlax
import numpy as np
import pytest

import ember
from ember import lax
from oracle import Case, oracle_tests

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

F = ["float32", "float64"]


def _conv(strides, padding, ld=None, rd=None, dn=None, g=1, b=1):
    e = lambda x, w: lax.conv_general_dilated(x, w, strides, padding, ld, rd, dn, g, b)
    j = lambda x, w: jlax.conv_general_dilated(x, w, strides, padding, ld, rd, dn, g, b)
    return e, j


CONFIGS = [
    # name, (lhs shape, rhs shape), params
    ("conv_general_dilated", ((2, 2, 5, 4), (3, 2, 3, 2)), dict(strides=(1, 1), padding="VALID")),
    ("conv_strided_same", ((1, 2, 5, 4), (2, 2, 3, 3)), dict(strides=(2, 3), padding="SAME")),
    ("conv_padded_dilated", ((1, 1, 5, 4), (2, 1, 2, 3)),
     dict(strides=(2, 1), padding=((1, 2), (0, 1)), ld=(2, 1), rd=(1, 2))),
    ("conv_feature_groups", ((1, 4, 4, 3), (4, 2, 2, 2)), dict(strides=(1, 2), padding="SAME", g=2)),
    ("conv_batch_groups", ((4, 1, 4, 3), (4, 1, 2, 2)), dict(strides=(1, 1), padding=((1, 0), (0, 1)), b=2)),
    ("conv_nhwc", ((1, 4, 3, 2), (2, 2, 2, 2)), dict(strides=(1, 1), padding="SAME",
                                                      dn=("NHWC", "HWIO", "NHWC"))),
    ("conv_1d", ((2, 7, 2), (3, 2, 3)), dict(strides=(2,), padding="SAME_LOWER", dn=("NWC", "WIO", "NWC"))),
    ("conv_3d", ((1, 1, 3, 3, 2), (2, 1, 2, 2, 2)), dict(strides=(1, 2, 1), padding="SAME")),
]

CASES = []
for _k, (_name, _shapes, _p) in enumerate(CONFIGS):
    _e, _j = _conv(**_p)
    CASES.append(Case("conv_general_dilated", _e, lambda x, w, _j=_j: np.asarray(_j(x, w)).astype(x.dtype),
                      [_shapes] if _k else [_shapes, ((1, 1, 4, 4), (1, 1, 2, 2))], F, jax=_j,
                      name=_name if _k else "", rtol=1e-4 if _k else None))


def _local(strides, padding, filter_shape, ld=None, rd=None, dn=None):
    def e(x, w):
        return lax.conv_general_dilated_local(x, w, strides, padding, filter_shape, ld, rd, dn)

    def j(x, w):
        return jlax.conv_general_dilated_local(x, w, strides, padding, filter_shape, ld, rd, dn)
    return e, j


# conv_general_dilated_local (unshared kernels: the patches convolution and a dot_general batched over the output
# positions): rhs (out features, in features x window, output positions...) in rhs_spec's layout
LOCAL_CONFIGS = [
    ("conv_general_dilated_local", ((2, 2, 5, 4), (3, 12, 3, 3)), dict(strides=(1, 1), padding="VALID",
                                                                        filter_shape=(3, 2))),
    ("conv_local_strided_dilated_nhwc", ((1, 6, 5, 2), (3, 8, 12, 2)),
     dict(strides=(2, 1), padding=((1, 0), (0, 1)), filter_shape=(2, 3), ld=(1, 2), rd=(2, 1),
          dn=("NHWC", "HWIO", "NHWC"))),
    ("conv_local_1d_same", ((2, 2, 7), (3, 6, 3)), dict(strides=(3,), padding="SAME", filter_shape=(3,))),
]
LOCAL_CASES = []  # (the first in the default run, with no Hessians: those of its two primitives are checked above)
for _k, (_name, _shapes, _p) in enumerate(LOCAL_CONFIGS):
    _e, _j = _local(**_p)
    (LOCAL_CASES if _k else CASES).append(Case(
        "conv_general_dilated", _e, lambda x, w, _j=_j: np.asarray(_j(x, w)).astype(x.dtype), [_shapes], F, jax=_j,
        name=_name, rtol=1e-4 if _k else None, jacobians=bool(_k)))

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
(test_local_forward, test_local_grad, test_local_jvp, test_local_vmap,
 test_local_jacobians) = (pytest.mark.slow(test) for test in oracle_tests(LOCAL_CASES))


@pytest.mark.parametrize("transpose_kernel,padding", [  # (each padding with one kernel layout by default, in turn)
    pytest.param(t, p, id=f"{t}-{p if isinstance(p, str) else f'padding{i}'}",
                 marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
    for j, t in enumerate([False, True]) for i, p in enumerate(["SAME", "VALID", ((1, 2), (0, 1))])])
def test_conv_transpose(padding, transpose_kernel):
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 5, 4, 3)), rng.normal(size=(3, 2, 4, 3) if transpose_kernel else (3, 2, 3, 4))
    e = lambda x, w: lax.conv_transpose(x, w, (2, 3), padding, rhs_dilation=(1, 2),
                                        transpose_kernel=transpose_kernel)
    j = lambda x, w: jlax.conv_transpose(x, w, (2, 3), padding, rhs_dilation=(1, 2),
                                         transpose_kernel=transpose_kernel)
    np.testing.assert_allclose(np.asarray(e(x, w)), np.asarray(j(x, w)), rtol=1e-10)
    got = ember.grad(lambda x, w: ember.numpy.sum(e(x, w) ** 2), argnums=(0, 1))(x, w)
    want = jax.grad(lambda x, w: (j(x, w) ** 2).sum(), argnums=(0, 1))(x, w)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10)


def test_conv_and_dimension_numbers():
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(1, 2, 5, 5)), rng.normal(size=(3, 2, 2, 2))
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (1, 1), "SAME")), np.asarray(jlax.conv(x, w, (1, 1), "SAME")))
    np.testing.assert_allclose(np.asarray(lax.conv_with_general_padding(x, w, (2, 1), ((1, 1), (0, 0)), (1, 2), None)),
                               np.asarray(jlax.conv_with_general_padding(x, w, (2, 1), ((1, 1), (0, 0)), (1, 2),
                                                                         None)))
    dn = lax.conv_dimension_numbers((1, 5, 5, 2), (2, 2, 2, 3), ("NHWC", "HWIO", "NCHW"))
    jdn = jlax.conv_dimension_numbers((1, 5, 5, 2), (2, 2, 2, 3), ("NHWC", "HWIO", "NCHW"))
    assert tuple(map(tuple, dn)) == tuple(map(tuple, jdn))


@pytest.mark.parametrize("call,message", [
    (lambda: lax.conv(np.ones((1, 3, 4, 4)), np.ones((2, 2, 2, 2)), (1, 1), "VALID"),
     r"conv_general_dilated: lhs f64\[1,3,4,4\] has 3 input features, but rhs f64\[2,2,2,2\] has 2 per group"),
    (lambda: lax.conv(np.ones((1, 3, 4)), np.ones((2, 3, 2, 2)), (1, 1), "VALID"), r"need the same rank"),
    (lambda: lax.conv(np.ones((1, 2, 4, 4)), np.ones((2, 2, 2, 2)), (1,), "VALID"),
     r"window_strides \(1,\) needs 2 positive entries"),
    (lambda: lax.conv(np.ones((1, 2, 4, 4)), np.ones((2, 2, 2, 2)), (1, 1), "FULL"), r"padding must be 'SAME'"),
    (lambda: lax.conv_general_dilated(np.ones((1, 4, 4, 4)), np.ones((3, 2, 2, 2)), (1, 1), "VALID",
                                      feature_group_count=2), r"must divide by feature_group_count 2"),
])
def test_errors(call, message):
    with ember.config.override(enable_x64=True):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
