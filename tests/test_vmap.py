"""ember.vmap: axes specs as in JAX, nesting, closures, batching rules that keep unbatched values unbatched,
the IR form, and clear errors."""
import functools

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import ShapedArray

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 3)).astype(np.float32)
B = rng.normal(size=(4, 3)).astype(np.float32)
M = rng.normal(size=(3, 5)).astype(np.float32)


def loop(f, *args, in_axes, out_axis=0):
    """The oracle: f applied member by member, stacked along out_axis."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [np.asarray(f(*[np.take(a, i, axis=ax) if ax is not None else a for a, ax in zip(args, in_axes)]))
            for i in range(size)]
    return np.stack(outs, axis=out_axis)


@pytest.mark.parametrize("in_axes,x,y", [
    ((0, 0), A, B), ((0, None), A, B[0]), ((None, 1), A[0], np.ascontiguousarray(B.T)),
    ((1, -1), np.ascontiguousarray(A.T), np.ascontiguousarray(B.T)), ((-2, 0), A, B)])
def test_in_axes_match_a_loop(in_axes, x, y):
    def f(u, v):
        return enp.sin(u) * v + 1.0
    got = ember.vmap(f, in_axes=in_axes)(x, y)
    np.testing.assert_allclose(np.asarray(got), loop(f, x, y, in_axes=in_axes), rtol=1e-6)


@pytest.mark.parametrize("out_axes", [0, 1, -1])
def test_out_axes(out_axes):
    got = ember.vmap(lambda x: x @ M, out_axes=out_axes)(A)
    np.testing.assert_allclose(np.asarray(got), loop(lambda x: x @ M, A, in_axes=[0], out_axis=out_axes),
                               rtol=1e-5)


def test_pytree_prefixes_for_in_and_out_axes():
    params = {"w": M, "b": np.ones(5, np.float32)}

    def f(p, x):
        y = x @ p["w"] + p["b"]
        return {"y": y, "norm": enp.sum(y * y)}
    out = ember.vmap(f, in_axes=({"w": None, "b": None}, 0), out_axes={"y": 1, "norm": 0})(params, A)
    expected_y = np.stack([A[i] @ M + 1 for i in range(4)], axis=1)
    np.testing.assert_allclose(np.asarray(out["y"]), expected_y, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out["norm"]), (expected_y ** 2).sum(0), rtol=1e-5)


def test_keyword_arguments_are_mapped_along_axis_0():
    got = ember.vmap(lambda x, scale: x * scale)(A, scale=B)
    np.testing.assert_allclose(np.asarray(got), A * B)


def test_unmapped_output_is_broadcast_and_axis_size():
    got = ember.vmap(lambda x: 2.0, axis_size=3, in_axes=None)(1.0)
    np.testing.assert_array_equal(np.asarray(got), [2.0, 2.0, 2.0])
    got = ember.vmap(lambda x, y: y, in_axes=(0, None))(A, M[0])
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(M[0], (4, 5)))


def test_nested_vmap_is_an_outer_product():
    got = ember.vmap(ember.vmap(lambda a, b: a * b, in_axes=(None, 0)), in_axes=(0, None))(A[:, 0], B[0])
    np.testing.assert_allclose(np.asarray(got), np.outer(A[:, 0], B[0]), rtol=1e-6)


def test_closures_over_arrays_and_outer_tracers():
    w = ember.asarray(M)

    def outer(x):
        return ember.vmap(lambda v: enp.dot(v, w) + x[0])(enp.stack([x, x * 2.0]))
    got = ember.vmap(outer)(A)
    expected = np.stack([np.stack([a @ M + a[0], (2 * a) @ M + a[0]]) for a in A])
    # (float32 dot products summed in another order than numpy's: an absolute tolerance for entries near zero)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_unbatched_values_stay_unbatched():
    def f(x, w):
        return enp.tanh(w * 2.0) + x  # w * 2.0 and tanh do not depend on the batched x
    ir = ember.make_ir(ember.vmap(f, in_axes=(0, None)))(A, B[0])
    tanh = next(e for e in ir.eqns if e.prim.name == "tanh")
    assert tanh.outputs[0].aval.shape == (3,)


def test_dot_general_uses_batch_dimensions():
    ir = ember.make_ir(ember.vmap(lambda x, y: x @ y))(rng.normal(size=(6, 4, 3)).astype(np.float32),
                                                       rng.normal(size=(6, 3, 2)).astype(np.float32))
    dots = [e for e in ir.eqns if e.prim.name == "dot_general"]
    assert len(dots) == 1 and dots[0].params["dimension_numbers"][1] == ((0,), (0,))
    ir = ember.make_ir(ember.vmap(lambda x: x @ M))(A)  # one operand batched: no broadcast of M
    assert [e.prim.name for e in ir.eqns] == ["dot_general"]


def test_vmap_of_an_ir_returns_an_ir():
    ir = ember.stage_out(lambda x, y: enp.sin(x) * y, ShapedArray((3,), "f32"), ShapedArray((), "f32"))
    bir = ember.vmap(ir, in_axes=(0, None), axis_size=4)
    assert isinstance(bir, ember.IR) and bir.in_avals[0].shape == (4, 3) and bir.out_avals[0].shape == (4, 3)
    ember.check_ir(bir)
    np.testing.assert_allclose(np.asarray(ember.compile(bir)(A, np.float32(2.0))), np.sin(A) * 2, rtol=1e-6)
    # unbatched outputs are broadcast along axis 0; IRs compose with grad
    const = ember.vmap(ember.stage_out(lambda x: 1.0 + 0 * x[0], ShapedArray((3,), "f32")), None, axis_size=2)
    assert const.out_avals[0].shape == (2,)
    gir = ember.grad(ember.stage_out(lambda x: enp.sum(enp.sin(x)), ShapedArray((3,), "f32")))
    np.testing.assert_allclose(np.asarray(ember.compile(ember.vmap(gir, 0, axis_size=4))(A)), np.cos(A), rtol=1e-6)


def test_jit_of_vmap_compiles_once_per_signature():
    f = ember.jit(ember.vmap(lambda x: x * 2.0))
    f(A)
    f(B)
    assert f.lower(A).as_text().count("func.func") == 1


# ---------------------------------------------------------------------------------------------------------------
# Errors
def test_in_axes_structure_mismatch():
    with pytest.raises(ValueError, match=r"in_axes has 1 entries but the function was called with 2"):
        ember.vmap(lambda x, y: x, in_axes=(0,))(A, B)
    with pytest.raises(ValueError, match=r"in_axes specification must be a tree prefix"):
        ember.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": A})
    with pytest.raises(TypeError, match=r"must contain only ints and None, got 'a'"):
        ember.vmap(lambda x: x, in_axes=("a",))(A)
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda x, y: x + y, in_axes=[0, None])(A, B[0])), A + B[0])


def test_axis_out_of_range():
    with pytest.raises(ValueError,
                       match=r"argument x of type f32\[4,3\]: axis 2 is out of bounds for an array of rank 2"):
        ember.vmap(lambda x: x, in_axes=2)(A)


def test_inconsistent_sizes_name_the_arguments():
    with pytest.raises(ValueError, match=r"(?s)inconsistent sizes.*argument x of type f32\[4,3\] has size 4.*"
                                         r"argument y of type f32\[3,5\] has size 3"):
        ember.vmap(lambda x, y: x)(A, M)


def test_out_axes_none_for_a_batched_output():
    with pytest.raises(ValueError, match=r"output 0 is batched, so its out_axes cannot be None"):
        ember.vmap(lambda x: x * 2.0, out_axes=None)(A)


def test_nothing_mapped_needs_axis_size():
    with pytest.raises(ValueError, match=r"no argument is mapped"):
        ember.vmap(lambda x: x, in_axes=None)(A)


def test_value_dependent_python_control_flow_is_an_error_under_vmap():
    def f(x):
        return x if x[0] > 0 else -x
    with pytest.raises(ember.ConcretizationTypeError, match=r"bool\(\) of a traced value bool\[\] in "
                                                            r"vmap\(f\) \(it depends on the value of argument x\)"):
        ember.vmap(f)(A)


def test_unmapped_python_values_reach_the_function_as_they_are():
    """As JAX's: an argument leaf with in_axes None that is not an array (a Python int, a function, a
    functools.partial) is passed as it is, so shapes may depend on it; a different value is another program."""
    def f(key, n, op):
        return op(ember.random.uniform(key, (n,))) + enp.arange(n).sum()

    keys = ember.random.split(ember.random.key(0), 3)
    g = ember.vmap(f, in_axes=(0, None, None))
    for n, op in ((4, enp.sum), (5, functools.partial(enp.max, axis=0))):
        want = np.array([float(op(ember.random.uniform(k, (n,)))) + n * (n - 1) / 2 for k in keys])
        np.testing.assert_allclose(np.asarray(g(keys, n, op)), want, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(ember.jit(g, static_argnums=(1, 2))(keys, n, op)), want, rtol=1e-6)
    # an unmapped array stays an array (traced), and a mapped Python number is an error naming it
    np.testing.assert_allclose(np.asarray(ember.vmap(lambda x, y: x * y, in_axes=(0, None))(enp.ones(2), 3.0)), [3, 3])
    with pytest.raises(ValueError, match="vmap"):
        ember.vmap(lambda x, n: x * n, in_axes=(0, 0))(enp.ones(2), 3)


def test_transformed_callables_keep_their_attributes():
    """As JAX's wraps: vmap, grad, jacfwd, jacrev of a callable object carry its attributes (equinox reads a
    module's fields through vmap(module))."""
    class Scale:
        def __init__(self):
            self.k, self.__name__ = 3.0, 7  # (a __name__ that is not a string is left out, not an error)

        def __call__(self, x):
            return x * self.k
    m = Scale()
    for transform in (ember.vmap, ember.grad, ember.jacfwd, ember.jacrev):
        assert transform(m).k == 3.0
    assert float(ember.grad(m)(1.0)) == 3.0 and np.asarray(ember.vmap(m)(np.ones(2, np.float32))).tolist() == [3, 3]
