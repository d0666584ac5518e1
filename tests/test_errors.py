"""Bad input gets a clear Python exception naming the function, argument, shapes and dtypes; nothing aborts."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import ShapedArray, lax


def test_unknown_dtype():
    with pytest.raises(TypeError, match="unknown dtype 'float7'"):
        enp.zeros(3, "float7")
    with pytest.raises(TypeError, match="unknown dtype 'q8'"):
        ShapedArray((1,), "q8")


def test_non_array_arguments():
    with pytest.raises(TypeError, match=r"add: operand 1 of type str is not a valid ember array"):
        lax.add(ember.asarray(np.ones(2, np.float32)), "x")
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 1 contains a value of type object"):
        ember.jit(lambda a, b: a)(np.ones(2), object())
    with pytest.raises(TypeError, match=r"grad\(<lambda>\): argument 0 contains a value of type str"):
        ember.grad(lambda a: a)("nope")
    with pytest.raises(TypeError, match="stage_out"):
        ember.stage_out(lambda a: a, "f32[3]")
    with pytest.raises(TypeError, match="compile: expected an IR"):
        ember.compile(lambda x: x)


def test_wrong_rank_shape_dtype_for_compiled_ir():
    compiled = ember.compile(ember.stage_out(lambda x, y: x @ y, ShapedArray((2, 3), "f32"), ShapedArray((3,), "f32")))
    with pytest.raises(TypeError, match=r"argument 1: expected f32\[3\], got f32\[3,1\]"):
        compiled(np.ones((2, 3), np.float32), np.ones((3, 1), np.float32))
    with pytest.raises(TypeError, match=r"argument 0: expected f32\[2,3\], got i32\[2,3\]"):
        compiled(np.ones((2, 3), np.int32), np.ones(3, np.float32))
    assert compiled(np.ones((2, 3)), np.ones(3)).dtype == np.float32  # (float64 is float32 without 64-bit mode)
    with ember.config.override(enable_x64=True), \
            pytest.raises(TypeError, match=r"argument 0: expected f32\[2,3\], got f64\[2,3\]"):
        compiled(np.ones((2, 3)), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"argument 1: expected f32\[3\], got the scalar 1.0"):
        compiled(np.ones((2, 3), np.float32), 1.0)
    int_fn = ember.compile(ember.stage_out(lambda n: n * 2, ShapedArray((), "i32")))
    with pytest.raises(TypeError, match=r"argument 0: expected i32\[\], got the float 2.5"):
        int_fn(2.5)
    assert int(int_fn(3)) == 6
    with pytest.raises(TypeError, match=r"argument 0: expected an array f32\[2,3\], got a value of type dict"):
        compiled({}, np.ones(3, np.float32))


def test_shape_errors_while_tracing_name_the_op():
    with pytest.raises(ValueError, match=r"matmul: contracted dimensions differ: shapes \(2, 3\) and \(2,\)"):
        ember.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones(2))
    with pytest.raises(TypeError, match=r"dot_general: operands must have the same dtype, got f32\[2,3\], i32\[3\]"):
        lax.dot(np.ones((2, 3), np.float32), np.ones(3, np.int32))


def test_deleted_array():
    a = ember.asarray(np.ones(2, np.float32))
    a.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(a)
    with pytest.raises(RuntimeError, match="deleted"):
        ember.jit(lambda x: x + 1)(a)
    assert "deleted" in repr(a)


def test_static_args_must_be_hashable_and_in_range():
    with pytest.raises(TypeError, match="static argument 0 must be hashable"):
        ember.jit(lambda x: x, static_argnums=0)(np.ones(2))
    with pytest.raises(ValueError, match=r"argnums \(0, 3\) out of range"):
        ember.grad(lambda x, y: x, argnums=(0, 3))(1.0, 2.0)


def test_has_aux_requires_pair():
    with pytest.raises(TypeError, match="has_aux=True the function must return a pair"):
        ember.grad(lambda x: x * x, has_aux=True)(1.0)


def test_int_overflow_of_python_scalar():
    with pytest.raises(OverflowError, match="too large to convert to int32"):
        ember.jit(lambda x: x + 2 ** 40)(np.ones(2, np.int32))



def test_jax_errors_names_and_hierarchy():
    """Every class of jax.errors is ember.errors' (catching JAX's base classes catches ember's errors too)."""
    import jax.errors
    public = [n for n in dir(jax.errors) if not n.startswith("_")]
    assert [n for n in public if not hasattr(ember.errors, n)] == []
    for name in public:
        ours, theirs = getattr(ember.errors, name), getattr(jax.errors, name)
        builtin = [c for c in theirs.__mro__ if c.__module__ == "builtins"]
        assert all(issubclass(ours, c) for c in builtin), (name, builtin)
    for name in ("ConcretizationTypeError", "TracerArrayConversionError", "TracerBoolConversionError",
                 "TracerIntegerConversionError", "UnexpectedTracerError", "KeyReuseError"):
        assert issubclass(getattr(ember.errors, name), ember.errors.JAXTypeError), name
    assert issubclass(ember.errors.NonConcreteBooleanIndexError, ember.errors.JAXIndexError)
    assert issubclass(ember.errors.UnexpectedTracerError, RuntimeError)  # (ember's own base, kept)


def test_non_concrete_boolean_index_as_jax():
    import jax
    import jax.numpy as jnp
    x, mask = np.arange(3.0, dtype=np.float32), np.array([True, False, True])
    for lib, xs in ((ember, enp), (jax, jnp)):
        for fn in (lambda v, m: v[m], lambda v, m: v.at[m].set(0.0)):
            with pytest.raises(lib.errors.NonConcreteBooleanIndexError, match=r"boolean indices must be concrete; "
                                                                              r"got bool\[3\]"):
                lib.jit(fn)(xs.asarray(x), xs.asarray(mask))
        with pytest.raises(lib.errors.NonConcreteBooleanIndexError):
            lib.vmap(lambda v, m: v[m])(xs.ones((2, 3)), xs.ones((2, 3), bool))
    np.testing.assert_array_equal(np.asarray(enp.asarray(x)[enp.asarray(mask)]), x[mask])  # (concrete: fine)
