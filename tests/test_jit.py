"""jit: pytrees, caching by signature, static arguments, eager primitives, Arrays."""
import collections

import numpy as np
import pytest

import ember
import ember.numpy as enp


def test_pytree_args_and_outputs():
    @ember.jit
    def f(tree, scale):
        a, (b, c) = tree["pair"], tree["list"]
        return {"sum": a + b, "prod": [a * c, scale * 2]}

    tree = {"pair": np.ones(2, np.float32), "list": [np.full(2, 2.0, np.float32), np.full(2, 3.0, np.float32)]}
    out = f(tree, 1.5)
    np.testing.assert_allclose(np.asarray(out["sum"]), [3.0, 3.0])
    np.testing.assert_allclose(np.asarray(out["prod"][0]), [3.0, 3.0])
    np.testing.assert_allclose(float(out["prod"][1]), 3.0)


def test_namedtuple_and_none_leaves():
    Point = collections.namedtuple("Point", "x y")

    @ember.jit
    def f(p, nothing):
        assert nothing is None
        return Point(p.y, p.x)

    out = f(Point(np.ones(2), np.zeros(2)), None)
    assert isinstance(out, Point)
    np.testing.assert_array_equal(np.asarray(out.x), [0.0, 0.0])


def test_no_retrace_for_same_signature():
    traces = []

    @ember.jit
    def f(x, y):
        traces.append(1)
        return x * y + 1

    f(np.ones(3, np.float32), np.ones(3, np.float32))
    f(np.full(3, 2.0, np.float32), np.ones(3, np.float32))
    assert len(traces) == 1
    f(np.ones(4, np.float32), np.ones(4, np.float32))  # new shape
    f(np.ones(3, np.int32), np.ones(3, np.int32))  # new dtype
    f(np.ones(3, np.float64), np.ones(3, np.float32))  # (float64 is float32 without 64-bit mode: no new trace)
    f(np.ones(3, np.float32), 2.0)  # a weakly typed Python scalar
    assert len(traces) == 4
    f(np.ones(3, np.float32), 5.0)
    assert len(traces) == 4


def test_static_argnums_and_argnames():
    traces = []

    def f(x, n, *, mode="add"):
        traces.append((n, mode))
        out = x
        for _ in range(n):  # Python control flow on a static value
            out = out + x if mode == "add" else out * x
        return out

    g = ember.jit(f, static_argnums=1, static_argnames="mode")
    x = np.full(2, 2.0, np.float32)
    np.testing.assert_allclose(np.asarray(g(x, 3)), [8.0, 8.0])
    np.testing.assert_allclose(np.asarray(g(x, 3, mode="mul")), [16.0, 16.0])
    g(x, 3)
    assert traces == [(3, "add"), (3, "mul")]
    with pytest.raises(TypeError, match="static argument 1 must be hashable"):
        g(x, [1, 2])


def test_out_of_range_static_argnums_are_errors_as_in_jax():
    """JAX 0.10.2: ValueError at jit() when the signature has no such position, at the call for a negative index
    beyond the arguments passed (with *args); a position past the end with *args is a parameter not passed."""
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): static_argnums=\(3,\) includes 3, but <lambda> accepts "
                                         r"only 1 positional argument"):
        ember.jit(lambda x: x, static_argnums=(3,))
    for nums in ((1,), (-2,)):
        with pytest.raises(ValueError, match=f"includes {nums[0]}"):
            ember.jit(lambda x: x, static_argnums=nums)
    with pytest.raises(ValueError, match="includes 2, but <lambda> accepts only 2 positional arguments"):
        ember.jit(lambda x, y=1: x, static_argnums=(0, 2))

    def with_default(x, n=2):
        return x * n

    assert float(ember.jit(with_default, static_argnums=1)(1.5)) == 3.0
    assert float(ember.jit(with_default, static_argnums=-1)(1.5, 3)) == 4.5  # -1 counts from the call's end

    def varargs(*args):
        return args[0] * len(args)

    assert float(ember.jit(varargs, static_argnums=3)(2.0)) == 2.0
    assert float(ember.jit(varargs, static_argnums=-1)(2.0, 3)) == 4.0
    with pytest.raises(ValueError, match=r"jit\(varargs\): static_argnums=\(-5,\) includes -5, but the call passes "
                                         "only 2 positional arguments"):
        ember.jit(varargs, static_argnums=-5)(2.0, 3)


def test_static_argnames_must_name_parameters_as_in_jax():
    def f(x, n=3):
        return x * n

    with pytest.raises(ValueError, match=r"jit\(f\): static_argnames \['zz'\] are not parameters of f"):
        ember.jit(f, static_argnames=["zz"])
    with pytest.raises(ValueError, match="positional-only"):
        ember.jit(lambda x, /, n: x, static_argnames="x")

    def with_kwargs(x, **options):
        return x * options["zz"]

    assert float(ember.jit(with_kwargs, static_argnames="zz")(1.5, zz=2)) == 3.0


def test_static_argnames_passed_by_position():
    """The JAX guide's example: static_argnames=['n'] with n passed by position unrolls the loop."""
    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    g_jit = ember.jit(g, static_argnames=["n"])
    assert int(g_jit(10, 20)) == 30 and int(g_jit(10, n=5)) == 15
    assert float(ember.jit(g, static_argnums=1)(1.0, n=2)) == 3.0


def test_control_flow_on_traced_value_is_a_clear_error():
    @ember.jit
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ember.ConcretizationTypeError, match=r"bool\(\) of a traced value bool\[\]"):
        f(np.float32(1.0))


def test_jit_inside_jit_stays_one_equation():
    """A nested jit is a pjit equation (as in JAX) holding its function's IR, named after it; its program is a
    function of the module; transformations go through it."""
    def double_sine(x):
        return enp.sin(x) * 2
    inner = ember.jit(double_sine)
    outer = ember.jit(lambda x: inner(x) + inner(x * 2))
    ir = outer.trace(np.ones(3, np.float32)).jaxpr
    calls = [e for e in ir.eqns if e.prim.name == "pjit"]
    assert len(calls) == 2 and calls[0].params["body"] is calls[1].params["body"]  # (one IR per signature)
    assert calls[0].params["name"] == "double_sine" and "sin" in [e.prim.name for e in calls[0].params["body"].eqns]
    assert "func.func private @double_sine" in outer.lower(np.ones(3, np.float32)).as_text()
    np.testing.assert_allclose(np.asarray(outer(np.ones(3, np.float32))),
                               2 * np.sin(1.0) + 2 * np.sin(2.0), rtol=1e-6)
    x = np.linspace(0, 1, 3).astype(np.float32)
    want = 2 * np.cos(x) + 4 * np.cos(2 * x)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: outer(x).sum())(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jvp(outer, (x,), (np.ones(3, np.float32),))[1]), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.vmap(outer)(np.stack([x, x]))[1]),
                               2 * np.sin(x) + 2 * np.sin(2 * x), rtol=1e-6)
    # reverse mode saves the residuals of the forward call (no second call of the function's program)
    backward = ember.make_jaxpr(ember.grad(lambda x: inner(x).sum()))(x)
    assert [e.prim.name for e in backward.eqns].count("pjit") == 2


def test_closed_over_arrays_become_constants():
    w = ember.asarray(np.arange(3, dtype=np.float32))
    f = ember.jit(lambda x: x * w + np.float32(1))
    np.testing.assert_allclose(np.asarray(f(np.ones(3, np.float32))), [1.0, 2.0, 3.0])
    assert "lambda a:f32[3] ; b:f32[3]" in str(f.trace(np.ones(3, np.float32)).jaxpr)


def test_closed_over_numpy_arrays_are_captured_by_value():
    """As JAX: a numpy array a function closes over is copied when the function is staged; mutating it afterwards
    changes no staged program (a new signature stages again and sees the new value)."""
    c = np.ones(3, np.float32)
    x = ember.asarray(np.zeros(3, np.float32))
    f = ember.jit(lambda v: v + c)
    np.testing.assert_array_equal(np.asarray(f(x)), [1, 1, 1])
    c[:] = 5
    np.testing.assert_array_equal(np.asarray(f(x)), [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(f(np.zeros(3, np.float16))), [5, 5, 5])  # staged again
    np.testing.assert_array_equal(np.asarray(f(x)), [1, 1, 1])
    assert c.flags.writeable  # the user's array is left alone

    g = ember.jit(lambda v: v * c)
    g.trace(x)  # staged (not yet compiled or run) while c is 5
    c[:] = 2
    np.testing.assert_array_equal(np.asarray(g(x + 1)), [5, 5, 5])
    other = ember.devices()[1]  # the constants placed on another device are the staged ones too
    np.testing.assert_array_equal(np.asarray(g(ember.device_put(np.ones(3, np.float32), other))), [5, 5, 5])

    ir = ember.stage_out(lambda v: v - c, ember.ShapedArray((3,), "f32"))
    c[:] = 7
    for result in (ember.eval_ir(ir, x), ember.compile(ir)(x)):  # op by op, or compiled: the staged value
        np.testing.assert_array_equal(np.asarray(result), [-2, -2, -2])
    np.testing.assert_array_equal(np.asarray(x + c), [7, 7, 7])  # eager operations see the current value


def test_leaked_tracer_is_a_clear_error():
    leaked = []

    @ember.jit
    def f(x):
        leaked.append(x)
        return x

    f(np.ones(2, np.float32))
    with pytest.raises(ember.UnexpectedTracerError):
        leaked[0] + 1


def test_weak_types_follow_jax():
    f = ember.jit(lambda x: x * 2)
    assert f(np.ones(2, np.float16)).dtype == np.float16
    assert f(3.0).dtype == np.float32 and f(3.0).weak_type
    assert f(np.int32(3)).dtype == np.int32


def test_outputs_are_inputs_and_literals():
    f = ember.jit(lambda x: (x, 1.0, np.float32(2)))
    x, one, two = f(np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(x), [1.0, 1.0])
    assert float(one) == 1.0 and two.dtype == np.float32


def test_wrong_arguments_are_clear():
    f = ember.jit(lambda x: x + 1)
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 0 contains a value of type str"):
        f("hello")
    compiled = ember.compile(ember.stage_out(lambda x: x + 1, ember.ShapedArray((2,), "f32")))
    with pytest.raises(TypeError, match=r"argument 0: expected f32\[2\], got f32\[3\]"):
        compiled(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"argument 0: expected f32\[2\], got i32\[2\]"):
        compiled(np.ones(2, np.int32))
    with pytest.raises(TypeError, match=r"expected 1 arguments \(f32\[2\]\), got 2"):
        compiled(np.ones(2, np.float32), np.ones(2, np.float32))


def test_array_basics():
    a = ember.array([[1.0, 2.0], [3.0, 4.0]])
    assert a.dtype == np.float32 and a.shape == (2, 2) and a.ndim == 2 and a.size == 4
    assert "Array([[1., 2.],\n       [3., 4.]], dtype=float32" in repr(a)
    np.testing.assert_array_equal(np.asarray(a + 1), [[2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_array_equal(np.asarray(1 - a), [[0.0, -1.0], [-2.0, -3.0]])
    np.testing.assert_array_equal(np.asarray(np.ones(2, np.float32) + a), [[2.0, 3.0], [4.0, 5.0]])
    assert a.block_until_ready() is a
    assert float(a[1, 0]) == 3.0 and a[0].shape == (2,)
    assert [float(r.sum()) for r in a] == [3.0, 7.0]
    assert ember.device_put(np.arange(3)).dtype == np.int32  # (int64 narrowed without 64-bit mode, as JAX)
    assert ember.array(3).dtype == np.int32 and ember.array(True).dtype == np.bool_
    assert ember.asarray(a) is a
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    assert a.device == ember.default_device()


@pytest.mark.parametrize("array, asarray", [(ember.array, ember.asarray), (enp.array, enp.asarray)])
def test_array_and_asarray_copy_follow_numpy2(array, asarray):
    a = ember.asarray(np.arange(3, dtype=np.int32))
    for copied in (array(a), array(a, copy=True), asarray(a, copy=True)):
        assert copied is not a and type(copied) is ember.Array
        assert copied.dtype == a.dtype and copied.device == a.device
        np.testing.assert_array_equal(np.asarray(copied), [0, 1, 2])
    kept = array(a, copy=True)
    a.delete()  # a distinct buffer, not a second handle on the same one
    np.testing.assert_array_equal(np.asarray(kept + 1), [1, 2, 3])
    a = ember.asarray(np.arange(3, dtype=np.int32))
    assert asarray(a) is a and asarray(a, copy=False) is a and array(a, copy=False) is a
    assert asarray(a, dtype=np.int32) is a and asarray(a, np.int32, "C") is a
    assert asarray(a, dtype=np.float32).dtype == np.float32
    assert type(asarray(np.ones(2), copy=False)) is ember.Array  # a transfer to the device, not a copy
    for needs_a_copy in (lambda: asarray(a, dtype=np.float32, copy=False), lambda: asarray([1, 2], copy=False),
                         lambda: asarray(1.0, copy=False), lambda: array(np.float32(1), copy=False),
                         lambda: asarray(np.ones(2, np.float32), dtype=np.float16, copy=False)):
        with pytest.raises(ValueError, match="unable to avoid a copy"):
            needs_a_copy()
    assert array(a, ndmin=3).shape == (1, 1, 3)
    with pytest.raises(NotImplementedError, match="row-major"):
        asarray(a, order="F")
    with pytest.raises(ValueError, match="order must be one of"):
        array(a, order="Z")

    @ember.jit
    def f(x):
        assert asarray(x) is x and asarray(x, copy=False) is x
        with pytest.raises(ValueError, match="unable to avoid a copy"):
            asarray(x, dtype=np.float32, copy=False)
        return asarray(x, dtype=np.float32), array([x, x], ndmin=3)
    converted, stacked = f(a)
    assert converted.dtype == np.float32 and stacked.shape == (1, 2, 3)


def test_leaked_tracer_entering_ember_is_an_error():
    leaked = []
    ember.jit(lambda x: leaked.append(x) or x)(np.ones(2, np.float32))
    entries = [ember.array, ember.asarray, enp.array, enp.asarray, ember.device_put,
               lambda t: enp.asarray(t, dtype=np.int32), lambda t: enp.array([t, t]),
               lambda t: ember.array(t, copy=True), lambda t: enp.asarray([[t]], copy=None),
               ember.jit(lambda v: v + 1), ember.grad(lambda v: v.sum())]
    for enter in entries:
        with pytest.raises(ember.UnexpectedTracerError, match="leaked out of the function"):
            enter(leaked[0])
        with pytest.raises(ember.UnexpectedTracerError):  # also while another function is being staged
            ember.jit(lambda y, enter=enter: enter(leaked[0]) + y)(np.ones(2, np.float32))


def test_isinstance_array_is_true_of_tracers_as_in_jax():
    seen = []

    def f(x):
        seen.append((isinstance(x, ember.Array), isinstance(x, enp.ndarray), issubclass(type(x), ember.Array)))
        return x * 2 if isinstance(x, ember.Array) else x

    x = ember.asarray(np.ones(2, np.float32))
    for transformed in (ember.jit(f), ember.vmap(f), lambda v: ember.grad(lambda u: f(u).sum())(v)):
        transformed(x)
    assert seen == [(True, True, False)] * 3
    assert isinstance(x, ember.Array) and isinstance(x, enp.ndarray)
    assert not isinstance(np.ones(2), ember.Array) and not isinstance(1.0, ember.Array)
    assert not isinstance(ember.ShapedArray((2,), "f32"), ember.Array)
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(x)), [2.0, 2.0])


def test_eager_primitives_are_cached():
    from ember._runtime.eager import _eager_cache
    x = ember.array([1.0, 2.0])
    x + x
    size = len(_eager_cache)
    ember.array([5.0, 6.0]) + ember.array([7.0, 8.0])
    assert len(_eager_cache) == size


def test_compile_error_shows_the_module():
    from ember._core import IR, Eqn, Primitive, Var
    bogus = Primitive("bogus_for_test", register=False)
    bogus.def_rule("abstract_eval", lambda x: x)
    bogus.def_rule("lowering", lambda ctx, x: [ctx.op("stablehlo.no_such_op", [x], ctx.aval_out)])
    x, y = Var(ember.ShapedArray((2,), "f32")), Var(ember.ShapedArray((2,), "f32"))
    ir = IR([], [], [x], [Eqn(bogus, [x], [y], {})], [y])
    with pytest.raises(ember.CompileError, match=r"(?s)XLA could not compile.*stablehlo.no_such_op"):
        ember.compile(ir)


def test_tracing_in_threads_is_independent():
    import threading
    results = {}

    def work(i):
        f = ember.jit(lambda x: enp.sin(x) * i)
        results[i] = float(f(np.float32(1.0)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: pytest.approx(np.sin(1.0) * i, rel=1e-6) for i in range(4)}


def test_computations_follow_their_arrays_device():
    other = ember.devices()[1]
    a = ember.device_put(np.arange(3, dtype=np.float32), other)  # committed to the other device
    w = ember.asarray(np.full(3, 2.0, np.float32))  # a closed-over constant on the default device (uncommitted)
    for out in (a + 1, ember.jit(lambda x: x * w)(a), ember.grad(lambda x: enp.sum(x * x))(a)):
        assert out.device == other and out.committed
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda x: x * w)(a)), [0.0, 2.0, 4.0])
    for out in (a + w, w + a, ember.jit(lambda x, y: x * y)(w, a)):  # the uncommitted one moves (JAX's rule)
        assert out.device == other and out.committed
    np.testing.assert_array_equal(np.asarray(w * a), [0.0, 2.0, 4.0])
    with pytest.raises(ValueError, match=r"Received incompatible devices for jitted computation"):
        a + ember.device_put(w, ember.devices()[0])  # committed to different devices


def test_static_argnames_apply_to_positional_arguments_and_argnums_to_keywords():
    f = ember.jit(lambda x, n: x if n > 0 else -x, static_argnames="n")
    assert float(f(2.0, 1)) == 2.0 and float(f(2.0, -1)) == -2.0  # n passed by position is static too
    g = ember.jit(lambda x, n: enp.ones(n) * x, static_argnums=1)
    assert g(2.0, n=3).shape == (3,)  # numbered static, passed by keyword


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16", "bfloat16", "uint8", "float64", "int64"])
def test_numpy_arguments_give_the_results_of_arrays(dtype):
    """numpy arguments are uploaded by the compiled call itself (the C fast path) or by the general path (other
    layouts, byte orders, ml_dtypes' types): the same results as with Arrays, for every layout."""
    f = ember.jit(lambda a, b: a * 2 + b)
    x = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    want = np.asarray(f(ember.asarray(x), ember.asarray(x)))
    readonly = x.copy()
    readonly.flags.writeable = False
    strided = np.zeros((3, 8), dtype)
    strided[:, ::2] = x
    for a, b in [(x, x), (x, ember.asarray(x)), (ember.asarray(x), x), (readonly, x), (strided[:, ::2], x),
                 (np.asfortranarray(x), x)]:
        got = f(a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)
    if dtype == "float32":
        swapped = x.astype(">f4")
        np.testing.assert_array_equal(np.asarray(f(swapped, x)), want)
        with pytest.raises(TypeError, match="argument 0"):
            ember.jit(lambda a: a).lower(x).compile()(np.zeros((3, 5), np.float32))
