"""Host callbacks (docs/callbacks.md): debug.print/debug.callback, pure_callback and io_callback under jit, grad,
vmap and loops, against JAX's printed output and behaviour; errors raised at the call site; effects kept by the
passes; re-entry refused where it would deadlock."""
import os
import pathlib
import re
import subprocess
import sys
import threading
import traceback

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import ember
import ember.numpy as enp
from ember import lax
from ember._control.callbacks import io_callback_p
from ember.experimental import io_callback

PROGRAM = pathlib.Path(__file__).parent / "callbacks_program.py"
SDS = ember.ShapeDtypeStruct


def _start(which: str) -> subprocess.Popen:
    x64 = "1" if ember.config.enable_x64 else "0"  # (both in ember's mode: JAX's x64 is on for the oracles)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": x64, "EMBER_ENABLE_X64": x64}
    return subprocess.Popen([sys.executable, str(PROGRAM), which], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _output(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err[-3000:]
    return out


def test_printed_output_equals_jax():
    """One program (jit, grad, jit of grad, vmap, scan, fori_loop, cond, eager, ordered prints and io_callback,
    pure_callback under vmap, debug.callback under jit of vmap): ember prints exactly what JAX prints (the two
    subprocesses run side by side)."""
    ember_run, jax_run = _start("ember"), _start("jax")
    ours = _output(ember_run)
    assert ours == _output(jax_run)
    assert ours.count("step ") == 20 and "ordered 1 [0 1]\nordered 2 [0 2]\nio 1 [0 1]\nio 2 [1 2]\n" in ours
    assert "start\nw 0\nw 1\ns 0.0\ns 1.0\npos\nend\n" in ours


def test_values_and_transformations_against_jax():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    y = np.arange(3.0, dtype=np.float32)

    def f(e, sds, a, b, method):
        return e.pure_callback(lambda u, v: np.asarray(u * 2 + v, np.float32), sds((3,), np.float32), a, b,
                               vmap_method=method)

    for method, axes in [("sequential", (0, None)), ("sequential_unrolled", (0, 0)), ("expand_dims", (0, None)),
                         ("broadcast_all", (None, 0)), ("legacy_vectorized", (0, 0))]:
        a = x if axes[0] is not None else y
        b = x if axes[1] is not None else y
        want = jax.vmap(lambda u, v: f(jax, jax.ShapeDtypeStruct, u, v, method), in_axes=axes)(a, b)
        got = ember.jit(ember.vmap(lambda u, v: f(ember, SDS, u, v, method), in_axes=axes))(a, b)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), err_msg=method)
    # eager calls run the function at once; pytree results
    out = ember.pure_callback(lambda u: {"s": u.sum(), "d": u * 2},
                              {"s": SDS((), np.float32), "d": SDS((3,), np.float32)}, y)
    np.testing.assert_allclose(np.asarray(out["d"]), y * 2)
    # complex and bfloat16 values cross to Python and back, under jit
    z = (y + 1j * y[::-1]).astype(np.complex64)
    got = ember.jit(lambda u: ember.pure_callback(lambda v: (v * 1j).astype(np.complex64), SDS((3,), np.complex64), u))
    np.testing.assert_array_equal(np.asarray(got(z)), z * 1j)
    halves = ember.jit(lambda u: ember.pure_callback(lambda v: v + v, SDS((3,), u.dtype), u))
    np.testing.assert_array_equal(np.asarray(halves(y.astype(ember.numpy.bfloat16))).astype(np.float32), y * 2)
    # derivatives refuse as JAX's (a ValueError); custom_jvp around the callback differentiates
    for transform in (ember.grad, ember.jacfwd):
        with pytest.raises(ValueError, match="not differentiable"):
            transform(lambda u: ember.pure_callback(np.sin, SDS((), np.float32), u))(1.0)

    @ember.custom_jvp
    def sin(u):
        return ember.pure_callback(np.sin, SDS(u.shape, u.dtype), u)
    sin.defjvp(lambda p, t: (sin(p[0]), enp.cos(p[0]) * t[0]))
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(lambda u: sin(u).sum()))(y)), np.cos(y), rtol=1e-6)
    # vmap without a method, and of an ordered io_callback, refuse (as JAX)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        ember.vmap(lambda u: ember.pure_callback(np.sin, SDS((), np.float32), u))(y)
    with pytest.raises(ValueError, match="ordered io_callback"):
        ember.vmap(lambda u: io_callback(np.sin, SDS((), np.float32), u, ordered=True))(y)
    with pytest.raises(ValueError, match="vmap_method"):
        ember.pure_callback(np.sin, SDS((), np.float32), 1.0, vmap_method="bogus")


def test_effects_are_kept_and_pure_calls_may_go(capfd):
    calls = []
    keep = ember.jit(lambda u: (io_callback(lambda v: calls.append("io") or v, SDS((), np.float32), u), u * 2)[1])
    drop = ember.jit(lambda u: (ember.pure_callback(lambda v: calls.append("pure") or v, SDS((), np.float32), u),
                                u * 2)[1])
    keep(1.0), drop(1.0)
    assert calls == ["io"]
    # dce keeps an effectful equation (and a loop whose body has one), cse does not merge two
    ir = ember.make_ir(lambda u: (io_callback(np.sin, SDS((), np.float32), u),
                                  io_callback(np.sin, SDS((), np.float32), u), u)[2])(1.0)
    assert [e.prim for e in ember.dce(ir).eqns].count(io_callback_p) == 2

    def loop(u):
        def body(i, c):
            ember.debug.print("i={}", i)
            return c + 1.0
        lax.fori_loop(0, 2, body, u)  # (result unused)
        return u
    ember.jit(loop)(0.0)
    # an ordered program: the token chain is in the module, and grad runs the forward print once
    text = ember.jit(lambda u: (ember.debug.print("a", ordered=True), ember.debug.print("b", ordered=True), u)[2]
                     ).lower(1.0).as_text()
    assert text.count("effect_in = 1") == 2 and "effect_in = 0" not in text
    ember.grad(lambda u: (ember.debug.print("g {}", u), u * u)[1])(3.0)
    assert capfd.readouterr().out == "i=0\ni=1\ng 3.0\n"


def test_errors_surface_at_the_call_site_and_reentry():
    def bad(v):
        raise KeyError("boom")
    f = ember.jit(lambda u: ember.pure_callback(bad, SDS((), np.float32), u) + 1)
    with pytest.raises(ember.PjrtError, match="KeyError") as info:
        f(1.0)
    assert isinstance(info.value.__cause__, KeyError)
    assert any(frame.name == "bad" for frame in traceback.extract_tb(info.value.__cause__.__traceback__))
    with pytest.raises(ember.PjrtError, match="shape"):  # a result of the wrong shape
        ember.jit(lambda u: ember.pure_callback(lambda v: np.zeros(2, np.float32), SDS((), np.float32), u))(1.0)
    # a callback XLA runs inline may use ember; one run on XLA's threads is refused instead of deadlocking
    g = ember.jit(lambda v: v * 3)
    small = ember.jit(lambda u: ember.pure_callback(lambda v: np.asarray(g(v)), SDS((3,), np.float32), u))
    np.testing.assert_allclose(np.asarray(small(np.ones(3, np.float32))), 3.0)
    big = ember.jit(lambda u: ember.pure_callback(lambda v: np.asarray(g(v)), SDS((256, 256), np.float32), u @ u))
    with pytest.raises(ember.PjrtError) as info:
        big(np.ones((256, 256), np.float32))
    assert isinstance(info.value.__cause__, RuntimeError) and "deadlock" not in str(info.value.__cause__)
    # the process is still usable
    np.testing.assert_allclose(np.asarray(small(np.ones(3, np.float32))), 3.0)
    np.testing.assert_allclose(np.asarray(jnp.ones(1)), 1.0)


def test_effects_barrier_waits_for_programs_in_other_threads():
    started, release, seen = threading.Event(), threading.Event(), []

    def slow(v):
        started.set()
        release.wait(30)
        seen.append(float(v))
        return np.float32(v)
    f = ember.jit(lambda u: ember.experimental.io_callback(slow, SDS((), np.float32), u * 2))
    worker = threading.Thread(target=lambda: f(1.0))
    worker.start()
    assert started.wait(30)
    threading.Timer(0.2, release.set).start()
    ember.effects_barrier()  # returns once the other thread's program (and its callback) is done
    assert seen == [2.0]
    worker.join(30)
    ember.effects_barrier()  # nothing running: returns at once
    assert ember.dlpack.is_supported_dtype(np.complex64) and not ember.dlpack.is_supported_dtype(np.object_)
    np.testing.assert_array_equal(np.asarray(ember.dlpack.from_dlpack(np.arange(3.0))), np.arange(3.0))


def test_callbacks_in_programs_over_several_devices(capfd):
    """As JAX places them: in a jitted program over sharded arrays a callback runs once, on the whole value (its
    operands gathered on the first device); inside a shard_map body every device calls it on its own block."""
    if len(ember.devices()) < 2:
        pytest.skip("needs two CPU devices")

    def run(lib, np_, P, sharding, mesh):
        x = lib.device_put(np.arange(8.0, dtype=np.float32), sharding)
        report = []
        for name in ("print", "pure", "io", "debug"):
            calls = []

            def host(v):
                calls.append(np.asarray(v).shape)
                return np.asarray(v) * 2

            def f(v, name=name, host=host, calls=calls):
                sds = lib.ShapeDtypeStruct(v.shape, v.dtype)
                if name == "print":
                    lib.debug.print("sum={s}", s=v.sum())
                    return v * 2
                if name == "pure":
                    return lib.pure_callback(host, sds, v) + 1
                if name == "io":
                    return lib.experimental.io_callback(host, sds, v) + 1
                lib.debug.callback(lambda a: calls.append(np.asarray(a).shape), v)
                return v + 1
            for mapped in (False, True):
                g = lib.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x")) if mapped else f
                out = np.asarray(lib.jit(g)(x))
                if lib is jax:
                    jax.effects_barrier()
                else:
                    ember.effects_barrier()
                report.append((name, mapped, sorted(calls), out.tolist()))
        return report
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    want = run(jax, jnp, jax.P, jax.sharding.NamedSharding(jmesh, jax.P("x")), jmesh)
    jax_printed = sorted(capfd.readouterr().out.splitlines())
    emesh = ember.sharding.Mesh(np.array(ember.devices()[:2]), ("x",))
    got = run(ember, enp, ember.P, ember.NamedSharding(emesh, ember.P("x")), emesh)
    assert got == want
    # (the two devices of a shard_map body print at once: their lines may interleave, in either library)
    printed = sorted(re.findall(r"sum=[0-9.]+", capfd.readouterr().out))
    assert printed == sorted(re.findall(r"sum=[0-9.]+", "\n".join(jax_printed))) == ["sum=22.0", "sum=28.0",
                                                                                      "sum=6.0"]
