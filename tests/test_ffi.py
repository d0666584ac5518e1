"""ember.ffi against jax.ffi (docs/extending.md#ffi): the same C handlers (tests/ffi_handlers.py, compiled with ember's
header, ember.ffi.include_dir()) registered with both and called eagerly, under jit and vmap (every vmap_method), with
every kind of attribute, layouts, aliases and side effects; the errors of registration (handlers that are not
capsules, FFI API versions the plugin would drop, stages and API versions the plugin cannot register), of
differentiation and of export."""
import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import ember
from ember._hlo import module_check
from ffi_handlers import build, compiler

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler to build the test handlers")
SDS = ember.ShapeDtypeStruct
TARGETS = ["affine", "add_tiled", "raw_copy", "describe_attrs", "counter", "increment_in_place", "always_fails"]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """The handlers, registered with ember and with JAX (the oracle) under the same names."""
    library = build(tmp_path_factory.mktemp("ffi"))
    for name in TARGETS:
        ember.ffi.register_ffi_target(f"t_{name}", ember.ffi.pycapsule(getattr(library, name)), platform="cpu")
        jax.ffi.register_ffi_target(f"t_{name}", jax.ffi.pycapsule(getattr(library, name)), platform="cpu")
    return library


def _both(name, shape_dtypes, **kwargs):
    """The ffi_call of target t_<name> in ember and in JAX."""
    return (ember.ffi.ffi_call(f"t_{name}", shape_dtypes, **kwargs),
            jax.ffi.ffi_call(f"t_{name}", shape_dtypes if not isinstance(shape_dtypes, SDS) else
                             jax.ShapeDtypeStruct(shape_dtypes.shape, shape_dtypes.dtype), **kwargs))


def test_include_dir_holds_the_header_the_handlers_are_built_with(lib):
    assert (pathlib.Path(ember.ffi.include_dir()) / "ember" / "ffi.h").is_file()
    assert callable(lib.affine)


def test_call_eagerly_and_under_jit_as_jax(lib):
    x = np.linspace(-2, 3, 7, dtype=np.float32)
    ours, theirs = _both("affine", SDS(x.shape, x.dtype), vmap_method="sequential")
    for kwargs in [{}, {"scale": 2.0, "offset": np.float32(-1)}, {"scale": 3}]:
        want = np.asarray(theirs(x, **kwargs))
        np.testing.assert_array_equal(want, x * kwargs.get("scale", 1.0) + kwargs.get("offset", 0.0))
        eager, jitted = ours(x, **kwargs), ember.jit(lambda v: ours(v, **kwargs))(x)
        for got in (eager, jitted):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), want)
    # the equation is JAX's primitive with JAX's params
    eqn = ember.make_jaxpr(lambda v: ours(v, scale=2.0))(x).eqns[0]
    jeqn = jax.make_jaxpr(lambda v: theirs(v, scale=2.0))(x).eqns[0]
    assert eqn.primitive.name == jeqn.primitive.name == "ffi_call"
    assert set(eqn.params) == set(jeqn.params)
    for key in ("target_name", "has_side_effect", "vmap_method", "input_layouts", "output_layouts",
                "input_output_aliases", "custom_call_api_version", "legacy_backend_config", "attributes"):
        assert eqn.params[key] == jeqn.params[key], key


def test_float64_with_x64(lib, ember_x64):
    x = np.linspace(-2, 3, 5)
    out = ember.ffi.ffi_call("t_affine", SDS(x.shape, x.dtype))(x, scale=0.1)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(out), x * 0.1)


def test_every_kind_of_attribute_reaches_the_handler_as_in_jax(lib):
    ours, theirs = _both("describe_attrs", SDS((20,), np.int32))
    kwargs = dict(a=1, b=1.5, c=True, d=np.int32(3), e="hello", f=np.arange(3, dtype=np.int32),
                  g={"x": 1, "y": "s"}, h=np.float32(2), i=np.uint8(7), j=np.ones(2))
    want = np.asarray(theirs(**kwargs))
    np.testing.assert_array_equal(np.asarray(ours(**kwargs)), want)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda: ours(**kwargs))()), want)
    assert list(want[:4]) == [3, 5, 3, 12]  # (a: an int64 scalar, b: a float64 one)
    for call in (ours, theirs):  # XLA carries no 16-bit float attribute: the compile fails, in JAX as in ember
        with pytest.raises(RuntimeError, match="Unsupported float attribute bit width"):
            call(k=np.float16(1.0))


def test_attribute_errors_as_jax(lib):
    f = ember.ffi.ffi_call("t_describe_attrs", SDS((4,), np.int32))
    with pytest.raises(TypeError, match="Non-hashable keyword argument to ffi_call a"):
        f(a=[1, 2])
    with pytest.raises(TypeError, match="Unsupported scalar attribute type"):
        f(a=np.complex64(1))
    with pytest.raises(TypeError, match="No attribute handler defined for type"):
        f(a=None)


@pytest.mark.parametrize("method,axes", [("sequential", (0, None)), ("sequential_unrolled", (0, 0)),
                                         ("expand_dims", (0, None)), ("broadcast_all", (1, None)),
                                         ("legacy_vectorized", (0, None)), ("broadcast_all", (None, 0))])
def test_vmap_methods_as_jax(lib, method, axes):
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    y = np.arange(4.0, dtype=np.float32) * 10
    args = (x if axes[0] is not None or axes[1] is None else x[0],
            (y if axes[1] is None else np.stack([y, y + 1, y + 2], axis=axes[1])))
    if axes[0] == 1:
        args = (x.T, args[1])
    ours, theirs = _both("add_tiled", SDS((4,), np.float32), vmap_method=method)
    want = jax.vmap(theirs, in_axes=axes)(*args)
    got = ember.vmap(ours, in_axes=axes)(*args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(ember.jit(ember.vmap(ours, in_axes=axes))(*args)), np.asarray(want))
    if method.startswith("sequential"):  # (a loop of calls: a scan in both, unrolled by ember itself)
        return
    # the batched call's layouts and result types are JAX's
    call, = [e for e in ember.make_jaxpr(ember.vmap(ours, in_axes=axes))(*args).eqns if e.primitive.name == "ffi_call"]
    jcall, = [e for e in jax.make_jaxpr(jax.vmap(theirs, in_axes=axes))(*args).eqns if e.primitive.name == "ffi_call"]
    for key in ("input_layouts", "output_layouts", "vmap_method"):
        assert call.params[key] == jcall.params[key], key
    assert [(a.shape, a.dtype) for a in call.params["result_avals"]] == \
        [(a.shape, a.dtype) for a in jcall.params["result_avals"]]


def test_vmap_without_a_method_and_bad_methods_as_jax(lib):
    f = ember.ffi.ffi_call("t_affine", SDS((4,), np.float32))
    with pytest.raises(NotImplementedError, match="vmap_method is one of"):
        ember.vmap(f)(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        ember.ffi.ffi_call("t_affine", SDS((4,), np.float32), vmap_method="bad")


def test_not_differentiable_as_jax(lib):
    f = ember.ffi.ffi_call("t_affine", SDS((4,), np.float32), vmap_method="sequential")
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="cannot be differentiated"):
        ember.grad(lambda v: f(v).sum())(x)
    with pytest.raises(ValueError, match="cannot be differentiated"):
        ember.jvp(f, (x,), (x,))
    with pytest.raises(ValueError, match="cannot be differentiated"):  # (JAX's)
        jax.grad(lambda v: jax.ffi.ffi_call("t_affine", jax.ShapeDtypeStruct((4,), jnp.float32))(v).sum())(x)
    # a constant operand is no derivative: grad through the rest works
    np.testing.assert_array_equal(np.asarray(ember.grad(lambda v: (f(x) * v).sum())(x)), x)


def test_complex_operands_reach_the_handler():
    from ffi_handlers import register_python_sin
    x = (np.linspace(-1, 1, 4) + 1j * np.linspace(0, 2, 4)).astype(np.complex64)
    f = ember.ffi.ffi_call(register_python_sin(), SDS(x.shape, x.dtype))
    for got in (f(x), ember.jit(f)(x)):
        assert got.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(got), np.sin(x), rtol=1e-6)


def test_several_results_keep_their_container(lib):
    x = np.arange(3.0, dtype=np.float32)
    as_list = ember.ffi.ffi_call("t_affine", [SDS((3,), np.float32)])(x)
    as_tuple = ember.ffi.ffi_call("t_affine", (SDS((3,), np.float32),))(x)
    assert isinstance(as_list, list) and isinstance(as_tuple, tuple)
    np.testing.assert_array_equal(np.asarray(as_tuple[0]), x)


def test_layouts_as_jax(lib):
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for layouts in [None, [(0, 1)], [(1, 0)]]:
        ours, theirs = _both("raw_copy", SDS((6,), np.float32), input_layouts=layouts)
        want = np.asarray(theirs(x))
        np.testing.assert_array_equal(np.asarray(ours(x)), want)
        np.testing.assert_array_equal(np.asarray(ember.jit(ours)(x)), want)
    np.testing.assert_array_equal(want, x.T.reshape(-1))  # (column-major: the transposed bytes)
    # a result laid out column-major: XLA gives it back row-major
    ours, theirs = _both("raw_copy", SDS((3, 2), np.float32), output_layouts=(1, 0))
    np.testing.assert_array_equal(np.asarray(ours(x.reshape(-1))), np.asarray(theirs(x.reshape(-1))))
    with pytest.raises(ValueError, match="number of input layouts"):
        ember.ffi.ffi_call("t_raw_copy", SDS((6,), np.float32), input_layouts=[None, None])(x)
    with pytest.raises(ValueError, match="not an order of the 2 dimensions"):
        ember.ffi.ffi_call("t_raw_copy", SDS((6,), np.float32), input_layouts=[(0, 0)])(x)


def test_input_output_aliases_as_jax(lib):
    x = np.arange(4.0, dtype=np.float32)
    ours, theirs = _both("increment_in_place", SDS((4,), np.float32), input_output_aliases={0: 0})
    np.testing.assert_array_equal(np.asarray(ember.jit(ours)(x)), np.asarray(jax.jit(theirs)(x)))
    np.testing.assert_array_equal(np.asarray(ours(x)), x + 1)
    for aliases, match in [({1: 0}, "input index 1 outside the range"), ({0: 1}, "output index 1 outside"),
                           ({0: 0}, "different abstract value")]:
        shape = (5,) if "abstract" in match else (4,)
        with pytest.raises(ValueError, match=match):
            ember.ffi.ffi_call("t_increment_in_place", SDS(shape, np.float32), input_output_aliases=aliases)(x)


def test_side_effects_keep_the_call(lib):
    x = np.zeros(1, np.float32)
    effectful = ember.ffi.ffi_call("t_counter", SDS((), np.int32), has_side_effect=True)
    pure = ember.ffi.ffi_call("t_counter", SDS((), np.int32))

    @ember.jit
    def unused(v, f=None):
        effectful(v)
        return v + 1

    @ember.jit
    def unused_pure(v):
        pure(v)
        return v + 1

    before = lib.count_calls()
    unused(x)
    assert lib.count_calls() == before + 1  # kept, though its result is unused
    unused_pure(x)
    assert lib.count_calls() == before + 1  # dropped: no effect, result unused (as JAX's DCE)
    assert int(pure(x)) == before + 2
    # no results at all: a call for its effect alone
    ember.jit(lambda v: (ember.ffi.ffi_call("t_counter", [], has_side_effect=True)(v), v)[1])(x)
    assert lib.count_calls() == before + 3


def test_handler_errors_and_unknown_targets_are_runtime_errors(lib):
    x = np.ones(4, np.float32)
    with pytest.raises(ember.errors.JaxRuntimeError, match="always_fails: the handler refused the call"):
        ember.ffi.ffi_call("t_always_fails", SDS((4,), np.float32))(x)
    with pytest.raises(RuntimeError, match="No FFI handler registered for t_nobody"):
        ember.jit(ember.ffi.ffi_call("t_nobody", SDS((4,), np.float32)))(x)
    with pytest.raises(ValueError, match="must have 'shape' and 'dtype'"):
        ember.ffi.ffi_call("t_affine", (3,))
    with pytest.raises(ValueError, match="legacy_backend_config"):
        ember.ffi.ffi_call("t_affine", SDS((4,), np.float32), legacy_backend_config="x")


def test_registration_checks_the_handler(lib):
    capsule = ember.ffi.pycapsule(lib.affine)
    ember.ffi.register_ffi_target("t_affine", capsule)  # the same handler again: nothing happens
    ember.ffi.register_ffi_target("t_affine", {"execute": capsule})
    with pytest.raises(ValueError, match="already has another handler"):
        ember.ffi.register_ffi_target("t_affine", ember.ffi.pycapsule(lib.add_tiled))
    for bad in [lib.affine, ctypes.cast(lib.affine, ctypes.c_void_p).value, None, "affine"]:
        with pytest.raises(TypeError, match="must be a PyCapsule"):
            ember.ffi.register_ffi_target("t_bad", bad)
    with pytest.raises(ValueError, match="must provide an execute implementation"):
        ember.ffi.register_ffi_target("t_bad", {"prepare": capsule})
    with pytest.raises(NotImplementedError, match="execute stage"):
        ember.ffi.register_ffi_target("t_bad", {"execute": capsule, "instantiate": capsule})
    with pytest.raises(NotImplementedError, match="legacy custom calls"):
        ember.ffi.register_ffi_target("t_bad", capsule, api_version=0)
    with pytest.raises(ValueError, match="API version 2 is not supported"):
        ember.ffi.register_ffi_target("t_bad", capsule, api_version=2)
    for reserved in ["ember_lapack_potrf", "ember_callback", "Eigh"]:
        with pytest.raises(ValueError, match="ember's own lowering calls"):
            ember.ffi.register_ffi_target(reserved, capsule)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ember.ffi.register_ffi_target("t_bad", capsule, bogus=1)


def test_registration_refuses_handlers_the_plugin_would_drop(lib):
    with pytest.raises(ValueError, match=r"accepts handlers of XLA FFI API 0\.1 to 0\.2: it was built for XLA FFI "
                                         r"API 0\.3"):
        ember.ffi.register_ffi_target("t_newer", ember.ffi.pycapsule(lib.built_for_newer_api))
    with pytest.raises(ValueError, match="did not answer the metadata query"):
        ember.ffi.register_ffi_target("t_silent", ember.ffi.pycapsule(lib.silent))
    with pytest.raises(ValueError, match="refuses_metadata: not today"):
        ember.ffi.register_ffi_target("t_refuses", ember.ffi.pycapsule(lib.refuses_metadata))


def test_other_platforms_are_accepted_and_never_called(lib):
    ember.ffi.register_ffi_target("t_cuda_only", ember.ffi.pycapsule(lib.affine), platform="CUDA")
    with pytest.raises(RuntimeError, match="No FFI handler registered for t_cuda_only"):
        ember.ffi.ffi_call("t_cuda_only", SDS((4,), np.float32))(np.ones(4, np.float32))


def test_pycapsule_and_the_other_registrations():
    assert type(ember.ffi.pycapsule(ctypes.c_void_p(16))).__name__ == "PyCapsule"
    with pytest.raises(TypeError, match="ctypes function pointer"):
        ember.ffi.pycapsule("not a pointer")
    with pytest.raises(ValueError, match="null"):
        ember.ffi.pycapsule(0)
    with pytest.raises(ValueError, match="register_ffi_type_id is not supported"):
        ember.ffi.register_ffi_type_id("t", None)
    with pytest.raises(NotImplementedError, match="custom FFI types"):
        ember.ffi.register_ffi_type("t", {"type_id": None})
    ember.ffi.register_ffi_target_as_batch_partitionable("t_affine")  # (accepted: no effect on ember)


def test_ffi_lowering_of_a_primitive_defined_the_jax_way(lib):
    """A primitive of one's own lowered by ffi_lowering (JAX's FFI tutorial's form), its params the attributes."""
    from ember.extend.core import Primitive
    from ember.interpreters import mlir
    import jax.extend as jex
    from jax.interpreters import mlir as jmlir

    ours, theirs = Primitive("my_affine"), jex.core.Primitive("my_affine")
    for prim, core_ in ((ours, ember.core), (theirs, jax.core)):
        prim.def_abstract_eval(lambda x, **params: core_.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(ours, ember.ffi.ffi_lowering("t_affine"))
    jmlir.register_lowering(theirs, jax.ffi.ffi_lowering("t_affine"))
    theirs.def_impl(lambda x, **params: jax.jit(lambda v: theirs.bind(v, **params))(x))
    x = np.arange(5.0, dtype=np.float32)
    want = np.asarray(jax.jit(lambda v: theirs.bind(v, scale=np.float32(2), offset=np.float32(1)))(x))
    got = ember.jit(lambda v: ours.bind(v, scale=np.float32(2), offset=np.float32(1)))(x)
    np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError, match="is a lowering rule"):
        ember.ffi.ffi_lowering("t_affine")(None)


def test_export_refuses_a_users_target_and_deserialize_refuses_the_artifact(lib):
    f = ember.ffi.ffi_call("t_affine", SDS((4,), np.float32))
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility guarantees"):
        ember.export.export(ember.jit(f))(x)
    text = ember.jit(f).lower(x).as_text()
    with pytest.raises(module_check.ModuleError, match="custom_call @t_affine"):
        module_check.check_module(text)


@pytest.mark.slow  # (a C++ compile of XLA's headers: seconds)
def test_jaxlibs_own_headers_make_handlers_the_plugin_refuses(tmp_path):
    """A handler built with XLA's C++ headers from jaxlib 0.10.2 (jax.ffi.include_dir()) reports FFI API 0.3:
    registration says why it cannot be used, where the plugin would drop it silently."""
    cxx = __import__("shutil").which("c++") or __import__("shutil").which("g++")
    header = pathlib.Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "ffi.h"
    if cxx is None or not header.is_file():
        pytest.skip("no C++ compiler or no jaxlib headers")
    source = tmp_path / "x.cc"
    source.write_text('#include "xla/ffi/api/ffi.h"\nnamespace ffi = xla::ffi;\n'
                      "static ffi::Error Impl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {\n"
                      "  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = x.typed_data()[i];\n"
                      "  return ffi::Error::Success();\n}\n"
                      "XLA_FFI_DEFINE_HANDLER_SYMBOL(Copy, Impl, ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>()"
                      ".Ret<ffi::Buffer<ffi::F32>>());\n")
    subprocess.run([cxx, "-std=c++17", "-O0", "-shared", "-fPIC", "-w", "-I", jax.ffi.include_dir(), "-o",
                    str(tmp_path / "libx.so"), str(source)], check=True, capture_output=True)
    library = ctypes.CDLL(str(tmp_path / "libx.so"))
    with pytest.raises(ValueError, match=r"built for XLA FFI API 0\.3"):
        ember.ffi.register_ffi_target("t_xla_copy", ember.ffi.pycapsule(library.Copy))




@pytest.mark.slow  # (a subprocess; tests/test_as_jax.py imports jax.ffi under the drop-in in the default run)
def test_import_jax_ffi_under_the_drop_in(lib, tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("import ctypes, sys, numpy as np\nimport jax, jax.ffi\n"
                       f"lib = ctypes.CDLL({str(lib._name)!r})\n"
                       "jax.ffi.register_ffi_target('t_affine', jax.ffi.pycapsule(lib.affine))\n"
                       "f = jax.ffi.ffi_call('t_affine', jax.ShapeDtypeStruct((3,), np.float32))\n"
                       "x = np.arange(3.0, dtype=np.float32)\n"
                       "print(jax.ffi.__name__, np.asarray(jax.jit(lambda v: f(v, scale=2))(x)))\n")
    out = subprocess.run([sys.executable, "-m", "ember.as_jax", str(program)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ember.ffi [0. 2. 4.]"
