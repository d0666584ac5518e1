"""The composition matrix: ten features of the last wave, every pair of them, and the triples users hit.

The features: donation, Refs, in/out shardings, host callbacks, export (serialize/deserialize), the persistent
compilation cache, the profiler, checkify, vmap and grad. Each program below is written once against a namespace `L`
holding either library (`EMBER` or `JAX`) and run in both: results equal (values, dtypes, shardings' specs), donated
inputs deleted as JAX deletes them, callbacks called as often, checkify's messages word for word. Where JAX refuses
a combination, ember must refuse it likewise (the same exception type, a message naming what is wrong).

The persistent cache and the profiler change how a program runs, never what it computes: every program of the pairs
of the eight others is also run under each of them (the persistent cache: compiled and stored, then, with the
in-memory caches cleared, loaded from the directory; the profiler: recorded, its executions in the trace) and under
both, against JAX's values of the same program run plainly."""
import gzip
import itertools
import json
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify as jax_checkify

import ember
import ember.numpy as enp
from ember._runtime import compile_cache
from ember.experimental import checkify as ember_checkify

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # float32 in both


def _namespace(lib, np_, checkify, io_callback, debug_callback, sharding):
    devices = lib.devices()[:2]
    mesh = sharding.Mesh(np.array(devices), ("x",))
    return types.SimpleNamespace(
        name=lib.__name__, lib=lib, np=np_, jit=lib.jit, grad=lib.grad, vmap=lib.vmap,
        value_and_grad=lib.value_and_grad, new_ref=lib.new_ref, freeze=lib.freeze,
        pure_callback=lib.pure_callback, io_callback=io_callback, debug_callback=debug_callback,
        checkify=checkify, check=checkify.check, export=lib.export, S=lib.ShapeDtypeStruct,
        stop_gradient=lib.lax.stop_gradient, device_put=lib.device_put, mesh=mesh,
        split=sharding.NamedSharding(mesh, sharding.PartitionSpec("x")),
        whole=sharding.NamedSharding(mesh, sharding.PartitionSpec()))


EMBER = _namespace(ember, enp, ember_checkify, ember.experimental.io_callback, ember.debug.callback, ember.sharding)
JAX = _namespace(jax, jnp, jax_checkify, jax.experimental.io_callback, jax.debug.callback, jax.sharding)
FEATURES = ["donation", "refs", "shardings", "callbacks", "export", "cache", "profiler", "checkify", "vmap", "grad"]
F32 = np.float32


def arr(L, values):
    """A device Array of these float32 values (a fresh one: donation may delete it)."""
    return L.device_put(np.asarray(values, F32))


def X(L, n=4):
    return arr(L, np.linspace(-1.0, 2.0, n))


def spec(x):
    """A result's sharding as data: the PartitionSpec over how many devices (None for a single-device Array)."""
    s = x.sharding
    if not hasattr(s, "spec"):
        return None
    return (tuple(s.spec) + (None,) * (x.ndim - len(tuple(s.spec))), len(s.device_set))


def host(v):
    if isinstance(v, dict):
        return {k: host(w) for k, w in v.items()}
    if isinstance(v, (list, tuple)):
        return [host(w) for w in v]
    if isinstance(v, (ember.Array, jax.Array, np.ndarray, np.generic)):
        return np.asarray(v)
    return v


def assert_same(got, want, where="result"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, got, want)
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), (where, got)
        assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape, want.dtype,
                                                                     want.shape)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=where)
    else:
        assert got == want, (where, got, want)


def raised(thunk):
    """(the builtin exception class, message) of what thunk() raises (None: nothing)."""
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 (any exception is data here)
        return next(c for c in type(e).__mro__ if c.__module__ == "builtins"), str(e)
    return None


# ----------------------------------------------------------------------------------------------------------------
# The programs: pairs of the eight features that are properties of a program (the cache and the profiler wrap them
# below). Each takes L and returns what it computed, as data.


def donation_refs(L):
    """A donated parameter beside a Ref argument (an accumulator) and a closed-over Ref (a step counter)."""
    steps = L.new_ref(np.zeros((), np.int32))

    def step(w, g, acc):
        acc[...] += g * g
        steps[...] += 1
        return w - 0.1 * g
    f = L.jit(step, donate_argnums=0)
    acc = L.new_ref(L.np.zeros(4, F32))
    w0 = X(L)
    w1 = f(w0, arr(L, [1, 2, 3, 4]), acc)
    w2 = f(w1, arr(L, [1, 1, 1, 1]), acc)
    return {"w": w2, "acc": acc[...], "steps": steps[...], "deleted": [w0.is_deleted(), w1.is_deleted()]}


def donation_shardings(L):
    """A sharded argument taken as the program takes it is deleted; one the call splits (on one device) is kept."""
    f = L.jit(lambda w, g: w - 0.5 * g, donate_argnums=0, in_shardings=(L.split, L.split), out_shardings=L.split)
    w_split = L.device_put(X(L), L.split)
    out1 = f(w_split, X(L))
    w_one = X(L)
    out2 = f(w_one, X(L))
    return {"out1": out1, "out2": out2, "spec": [spec(out1), spec(out2)],
            "deleted": [w_split.is_deleted(), w_one.is_deleted()]}


def donation_callbacks(L):
    calls = []

    def host_scale(a):
        calls.append(np.asarray(a).tolist())
        return (np.asarray(a) * 3).astype(F32)

    def step(w):
        y = L.pure_callback(host_scale, L.S(w.shape, w.dtype), w)
        L.debug_callback(lambda v: calls.append(float(np.asarray(v).sum())), y)
        return w + L.io_callback(lambda v: np.asarray(v) + 1, L.S(w.shape, w.dtype), y, ordered=True)
    f = L.jit(step, donate_argnums=0)
    w0 = X(L)
    w1 = f(w0)
    w2 = f(w1)
    return {"w": w2, "calls": calls, "deleted": [w0.is_deleted(), w1.is_deleted()]}


def donation_export(L):
    """Export a donating jit: the Exported calls (fresh, and deserialized) compute the same and delete what JAX's
    delete (nothing: an Exported's call is not the jitted function's)."""
    f = L.jit(lambda w, g: w * 2.0 - g, donate_argnums=0)
    exp = L.export.export(f)(L.S((4,), F32), L.S((4,), F32))
    restored = L.export.deserialize(exp.serialize())
    w0, w1 = X(L), X(L)
    out = [exp.call(w0, X(L)), restored.call(w1, X(L))]
    return {"out": out, "deleted": [w0.is_deleted(), w1.is_deleted()]}


def donation_checkify(L):
    def step(w, lr):
        L.check(lr > 0, "lr must be positive, got {}", lr)
        return w - lr * L.np.sqrt(w)
    f = L.jit(L.checkify.checkify(step, errors=L.checkify.all_checks), donate_argnums=0)
    w0, w1 = X(L), arr(L, [1, 4, 9, 16])
    e0, out0 = f(w0, F32(0.5))
    e1, out1 = f(w1, F32(-1.0))
    return {"errors": [e0.get(), e1.get()], "out": [out0, out1], "deleted": [w0.is_deleted(), w1.is_deleted()]}


def donation_vmap(L):
    """jit of vmap donates; vmap of a donating jit (the jit is staged into vmap's program) donates nothing."""
    def step(w, g):
        return w - 0.1 * g
    outer = L.jit(L.vmap(step, in_axes=(0, None)), donate_argnums=0)
    inner = L.vmap(L.jit(step, donate_argnums=0), in_axes=(0, None))
    w0, w1 = arr(L, np.ones((3, 4))), arr(L, np.ones((3, 4)))
    out = [outer(w0, X(L)), inner(w1, X(L))]
    return {"out": out, "deleted": w0.is_deleted(), "inner deleted": w1.is_deleted()}


def donation_grad(L):
    """A donating training step (grad inside), and grad of a donating jit (staged into grad: donates nothing)."""
    loss = lambda w, x: L.np.sum(L.np.tanh(x * w) ** 2)  # noqa: E731
    step = L.jit(lambda w, x: w - 0.1 * L.grad(loss)(w, x), donate_argnums=0)
    w0 = X(L)
    w1 = step(w0, X(L))
    w2 = step(w1, X(L))
    v = X(L)
    g = L.grad(L.jit(loss, donate_argnums=0))(v, X(L))
    return {"w": w2, "g": g, "deleted": [w0.is_deleted(), w1.is_deleted()], "inner deleted": v.is_deleted()}


def refs_shardings(L):
    """A jit with in/out shardings reading and writing a closed-over Ref and a Ref argument."""
    total = L.new_ref(L.device_put(np.zeros((), F32), L.whole))  # JAX: a Ref's devices must be the program's

    def f(x, acc):
        acc[...] = acc[...] + x * x
        total[...] += L.np.sum(x)
        return x * 2.0
    g = L.jit(f, in_shardings=(L.split, None), out_shardings=L.split)
    acc = L.new_ref(L.device_put(np.zeros(4, F32), L.split))
    out = g(L.device_put(X(L), L.split), acc)
    out = g(out, acc)
    return {"out": out, "spec": [spec(out), spec(acc[...]), spec(total[...])], "acc": acc[...],
            "total": total[...]}


def refs_callbacks(L):
    """Callbacks reading a Ref's value and their results written into Refs, in jit."""
    log = L.new_ref(L.np.zeros(3, F32))
    seen = []

    def f(x):
        y = L.pure_callback(lambda a: np.cos(np.asarray(a)).astype(F32), L.S(x.shape, x.dtype), x)
        log[...] = log[...] + y
        L.debug_callback(lambda v: seen.append(np.asarray(v).tolist()), log[...])
        log[0] = L.io_callback(lambda v: np.asarray(v).sum().astype(F32), L.S((), F32), log[...])
        return log[1]
    g = L.jit(f)
    out = [g(X(L, 3)), g(X(L, 3))]
    return {"out": out, "log": log[...], "seen": seen}


def refs_export(L):
    """A function that makes and ends its own Refs exports and round-trips."""
    def f(x):
        r = L.new_ref(x)
        r[0] = r[1] * r[0]
        r[...] = L.np.sin(r[...])
        return L.freeze(r)
    exp = L.export.export(L.jit(f))(L.S((4,), F32))
    return {"out": L.export.deserialize(exp.serialize()).call(X(L)), "avals": str(exp.out_avals)}


def refs_checkify(L):
    """checkify of a jitted step writing a Ref argument: the check sees the Ref's value."""
    def f(x, acc):
        acc[...] += x
        L.check(L.np.all(acc[...] < 3.0), "accumulated too much: {}", acc[...])
        return L.np.sum(acc[...])
    g = L.jit(L.checkify.checkify(f))
    acc = L.new_ref(L.np.zeros(4, F32))
    e0, out0 = g(X(L), acc)
    e1, out1 = g(X(L), acc)
    return {"errors": [e0.get(), e1.get()], "out": [out0, out1], "acc": acc[...]}


def refs_vmap(L):
    """A mapped Ref argument filled row by row (JAX's pairwise-distances example), and a closed-over Ref read."""
    scale = L.new_ref(arr(L, 2.0))

    def dist(u, v, out):
        out[...] = L.np.sum((u - v) ** 2) * scale[...]
    vecs = arr(L, np.arange(6.0).reshape(3, 2))
    out = L.new_ref(L.np.zeros((3, 3), F32))
    L.vmap(L.vmap(dist, (0, None, 0)), (None, 0, 0))(vecs, vecs, out)
    return out[...]


def refs_grad(L):
    """grad of a function making its own Ref, counting its calls into a plumbing Ref, under jit."""
    calls = L.new_ref(np.zeros((), np.int32))

    def f(x):
        calls[...] += 1
        r = L.new_ref(x)
        r[1:] = r[1:] * r[:-1]
        return L.np.sum(L.np.sin(L.freeze(r)))
    g = L.jit(L.grad(f))
    return {"g": [g(X(L)), g(X(L) * 2.0)], "calls": calls[...]}


def shardings_callbacks(L):
    """Callbacks in a program over sharded arrays: called once, on the whole operand, as JAX calls them."""
    seen = []

    def f(x):
        y = L.pure_callback(lambda a: (seen.append(np.asarray(a).shape) or np.exp(np.asarray(a))).astype(F32),
                            L.S(x.shape, x.dtype), x)
        L.debug_callback(lambda a: seen.append(np.asarray(a).tolist()), y.sum())
        return y * x
    g = L.jit(f, in_shardings=L.split, out_shardings=L.split)
    out = g(L.device_put(X(L), L.split))
    return {"out": out, "spec": spec(out), "seen": seen}


def shardings_export(L):
    exp = L.export.export(L.jit(lambda x, y: (x * y).sum(0) + 1.0, in_shardings=(L.split, L.whole),
                                out_shardings=L.whole))(L.S((4, 2), F32), L.S((4, 2), F32))
    restored = L.export.deserialize(exp.serialize())
    x = arr(L, np.arange(8.0).reshape(4, 2))
    out = restored.call(L.device_put(x, L.split), x)
    return {"out": out, "spec": spec(out), "devices": restored.nr_devices,
            "in": [tuple(s.spec) for s in restored.in_shardings_jax(L.mesh)]}


def shardings_checkify(L):
    def f(x):
        L.check(L.np.all(x > -2.0), "too small: {}", x)
        return L.np.log(x) * 2.0
    g = L.jit(L.checkify.checkify(f, errors=L.checkify.float_checks), in_shardings=L.split)
    results = [g(L.device_put(v, L.split)) for v in (arr(L, [1, 2, 3, 4]), X(L), arr(L, [1, -3, 1, 1]))]
    return {"errors": [e.get() for e, _ in results], "out": [o for _, o in results]}


def shardings_vmap(L):
    g = L.jit(L.vmap(lambda row, w: L.np.tanh(row @ w), in_axes=(0, None)), in_shardings=(L.split, L.whole),
              out_shardings=L.split)
    out = g(arr(L, np.linspace(0, 1, 8).reshape(4, 2)), arr(L, [[1, -1, 0.5], [0.25, 2, -2]]))
    return {"out": out, "spec": spec(out)}


def shardings_grad(L):
    loss = lambda w, x: L.np.mean((L.np.tanh(x @ w) - 0.5) ** 2)  # noqa: E731
    g = L.jit(L.grad(loss, argnums=(0, 1)), in_shardings=(L.whole, L.split), out_shardings=(L.whole, L.split))
    gw, gx = g(arr(L, [[0.5, -1.0], [2.0, 0.25]]), arr(L, np.linspace(-1, 1, 8).reshape(4, 2)))
    return {"grads": [gw, gx], "spec": [spec(gw), spec(gx)]}


def callbacks_checkify(L):
    """A check on a callback's result, a division by zero in what follows, inside jit."""
    def f(x):
        y = L.pure_callback(lambda a: (np.asarray(a) - 1).astype(F32), L.S(x.shape, x.dtype), x)
        L.check(L.np.all(y < 5.0), "callback gave {}", y)
        L.io_callback(lambda v: None, None, y, ordered=True)
        return x / y
    g = L.jit(L.checkify.checkify(f, errors=L.checkify.all_checks))
    results = [g(v) for v in (arr(L, [3, 4, 5]), arr(L, [3, 1, 2]), arr(L, [3, 9, 1]))]
    return {"errors": [e.get() for e, _ in results], "out": [o for _, o in results]}


def callbacks_vmap(L):
    """vmap of each callback: pure_callback by its vmap_method, io_callback and debug.callback once per member."""
    calls = []

    def f(x):
        a = L.pure_callback(lambda v: (calls.append(("seq", np.shape(v))) or np.asarray(v) * 2),
                            L.S(x.shape, x.dtype), x, vmap_method="sequential")
        b = L.pure_callback(lambda v: (calls.append(("expand", np.shape(v))) or np.asarray(v) + 1),
                            L.S(x.shape, x.dtype), x, vmap_method="expand_dims")
        L.debug_callback(lambda v: calls.append(("debug", np.asarray(v).tolist())), x[0])
        c = L.io_callback(lambda v: (calls.append(("io", np.shape(v))) or np.asarray(v).sum().astype(F32)),
                          L.S((), F32), x)
        return a * b + c
    out = L.jit(L.vmap(f))(arr(L, np.arange(6.0).reshape(3, 2)))
    return {"out": out, "calls": calls}


def callbacks_grad(L):
    """debug.callback under grad is called once, on the primal values; pure_callback and io_callback under grad
    are refused."""
    seen = []

    def f(x):
        L.debug_callback(lambda v: seen.append(np.asarray(v).tolist()), x)
        return L.np.sum(L.np.sin(x) ** 2)
    g = L.jit(L.grad(f))(X(L, 3))
    pure = raised(lambda: L.grad(lambda x: L.pure_callback(np.sin, L.S((), F32), x))(F32(1.0)))
    io = raised(lambda: L.grad(lambda x: L.io_callback(np.sin, L.S((), F32), x))(F32(1.0)))
    return {"g": g, "seen": seen, "pure": pure[0], "io": io[0]}


def export_checkify(L):
    """Export of a checkified function: the Error comes back from its call; its pytree type is not serializable."""
    def f(x):
        L.check(L.np.all(x > 0), "nonpositive: {}", x)
        return L.np.sqrt(x)
    exp = L.export.export(L.jit(L.checkify.checkify(f)))(L.S((3,), F32))
    results = [exp.call(v) for v in (arr(L, [1, 4, 9]), arr(L, [1, -4, 9]))]
    return {"errors": [e.get() for e, _ in results], "out": [o for _, o in results],
            "serialize": raised(exp.serialize)[0]}


def export_vmap(L):
    """vmap of an Exported's call (ember maps it with a scan, docs/aot.md) against JAX's vmap of the function
    itself (JAX has no batching rule for call_exported: test_vmap_of_an_exported_call_is_beyond_jax)."""
    def f(x, w):
        return L.np.tanh(x * w).sum()
    if L is EMBER:
        f = L.export.deserialize(L.export.export(L.jit(f))(L.S((2,), F32), L.S((2,), F32)).serialize()).call
    xs = arr(L, np.arange(6.0).reshape(3, 2) / 4)
    return [L.vmap(f, in_axes=(0, None))(xs, arr(L, [1, -2])), L.jit(L.vmap(f))(xs, xs)]


def test_vmap_of_an_exported_call_is_beyond_jax():
    exp = jax.export.export(jax.jit(lambda x: x * 2.0))(JAX.S((2,), F32))
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported'"):
        jax.vmap(exp.call)(jnp.ones((3, 2), F32))


def export_grad(L):
    exp = L.export.export(L.jit(lambda x, w: {"y": L.np.tanh(x @ w)}))(L.S((3, 2), F32), L.S((2,), F32))
    restored = L.export.deserialize(exp.serialize(vjp_order=1))
    x = arr(L, np.linspace(-1, 1, 6).reshape(3, 2))
    loss = lambda x, w: L.np.sum(restored.call(x, w)["y"] ** 2)  # noqa: E731
    return [L.grad(loss, argnums=(0, 1))(x, arr(L, [0.5, -1])), L.jit(L.grad(loss))(x, arr(L, [0.5, -1]))]


def checkify_vmap(L):
    def f(x):
        L.check(x < 2.0, "too big: {}", x)
        return 1.0 / x
    xs = arr(L, [1, 0, 3, 4])
    e1, o1 = L.jit(L.vmap(L.checkify.checkify(f, errors=L.checkify.all_checks)))(xs)
    e2, o2 = L.jit(L.checkify.checkify(L.vmap(f), errors=L.checkify.all_checks))(xs)
    e3, o3 = L.vmap(L.checkify.checkify(f))(arr(L, [1, 0.5, 3]))
    return {"errors": [e1.get(), e2.get(), e3.get()], "out": [o1, o2, o3]}


def checkify_grad(L):
    def f(x):
        L.check(L.np.all(x != 1.0), "one at {}", x)
        return L.np.sum(L.np.log(x) * x)
    c = L.jit(L.checkify.checkify(L.grad(f), errors=L.checkify.all_checks))
    e1, g1 = c(arr(L, [0.5, 2, 3]))
    e2, g2 = c(arr(L, [0.5, 1, -3]))
    g3 = L.grad(lambda x: L.checkify.checkify(f)(x)[1])(arr(L, [0.5, 2, 3]))  # grad of a checkified output
    return {"errors": [e1.get(), e2.get()], "g": [g1, g2, g3]}


def vmap_grad(L):
    loss = lambda w, x: L.np.sum(L.np.tanh(x * w) ** 2)  # noqa: E731
    xs = arr(L, np.linspace(-1, 1, 8).reshape(4, 2))
    return [L.jit(L.vmap(L.grad(loss), in_axes=(None, 0)))(arr(L, [0.5, 2]), xs),
            L.grad(lambda w: L.np.sum(L.vmap(loss, in_axes=(None, 0))(w, xs)))(arr(L, [0.5, 2]))]


PAIR_PROGRAMS = {
    ("donation", "refs"): donation_refs, ("donation", "shardings"): donation_shardings,
    ("donation", "callbacks"): donation_callbacks, ("donation", "export"): donation_export,
    ("donation", "checkify"): donation_checkify, ("donation", "vmap"): donation_vmap,
    ("donation", "grad"): donation_grad,
    ("refs", "shardings"): refs_shardings, ("refs", "callbacks"): refs_callbacks, ("refs", "export"): refs_export,
    ("refs", "checkify"): refs_checkify, ("refs", "vmap"): refs_vmap, ("refs", "grad"): refs_grad,
    ("shardings", "callbacks"): shardings_callbacks, ("shardings", "export"): shardings_export,
    ("shardings", "checkify"): shardings_checkify, ("shardings", "vmap"): shardings_vmap,
    ("shardings", "grad"): shardings_grad,
    ("callbacks", "checkify"): callbacks_checkify,
    ("callbacks", "vmap"): callbacks_vmap, ("callbacks", "grad"): callbacks_grad,
    ("export", "checkify"): export_checkify, ("export", "vmap"): export_vmap, ("export", "grad"): export_grad,
    ("checkify", "vmap"): checkify_vmap, ("checkify", "grad"): checkify_grad,
    ("vmap", "grad"): vmap_grad,
}
XFAIL: dict[tuple[str, str], str] = {}


INNER = "inner deleted"  # compared on its own: test_a_donating_jit_under_eager_vmap_or_grad_deletes_as_jax


def comparable(result):
    return {k: v for k, v in result.items() if k != INNER} if isinstance(result, dict) else result


def check(program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unusable donations (e.g. under vmap) warn in both
        want = host(program(JAX))
        got = host(program(EMBER))
    assert_same(comparable(got), comparable(want))
    return got


def _pair_params():
    for pair, program in PAIR_PROGRAMS.items():
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[pair])] if pair in XFAIL else []
        yield pytest.param(program, id="-".join(pair), marks=marks)


@pytest.mark.parametrize("program", _pair_params())
def test_pair_against_jax(program):
    check(program)


@pytest.mark.xfail(strict=True, reason=(
    "ember stages a donating jit called under an eager vmap or grad into the transformation's program, which "
    "donates nothing; JAX 0.10.2 runs the inner jit's transformed program with its donation, deleting the Array"))
@pytest.mark.parametrize("program", [donation_vmap, donation_grad])
def test_a_donating_jit_under_eager_vmap_or_grad_deletes_as_jax(program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = program(JAX)[INNER]
        got = program(EMBER)[INNER]
    assert want is True
    assert got is want


# ----------------------------------------------------------------------------------------------------------------
# Refusals: where JAX refuses a combination, ember refuses it likewise.


def with_callbacks(L, calls):
    def f(x):
        L.debug_callback(lambda a: calls.append(np.asarray(a).tolist()), x)
        return L.pure_callback(lambda a: np.square(np.asarray(a)), L.S(x.shape, x.dtype), x) + 1.0
    return f


def test_callbacks_and_export():
    """JAX refuses to export a program with host callbacks (on the CPU, already at export); ember exports it for
    calls in this process (docs/aot.md), computing what JAX's jit computes, and refuses it where it would leave the
    process, at serialize, with JAX's error."""
    jax_calls, ember_calls = [], []
    with pytest.raises(NotImplementedError) as jax_error:
        jax.export.export(jax.jit(with_callbacks(JAX, [])))(JAX.S((3,), F32))
    want = jax.jit(with_callbacks(JAX, jax_calls))(X(JAX, 3))
    exp = ember.export.export(ember.jit(with_callbacks(EMBER, ember_calls)))(EMBER.S((3,), F32))
    got = exp.call(X(EMBER, 3))
    assert_same(host([got, ember_calls]), host([want, jax_calls]))
    with pytest.raises(NotImplementedError) as ember_error:
        exp.serialize()
    assert str(jax_error.value) in str(ember_error.value) and "f calls back" in str(ember_error.value)


def test_refs_cannot_be_exported():
    """A Ref argument to an exported function: JAX and ember both refuse it (NotImplementedError), ember naming the
    function and the Ref."""
    def f(x, acc):
        acc[...] += x
        return x * 2.0
    with pytest.raises(NotImplementedError):
        jax.export.export(jax.jit(f))(X(JAX), jax.new_ref(jnp.zeros(4, F32)))
    with pytest.raises(NotImplementedError, match=r"export\(jit\(f\)\): the function takes or closes over a "
                                                  r"mutable array reference \(ember.Ref\)"):
        ember.export.export(ember.jit(f))(X(EMBER), ember.new_ref(enp.zeros(4, F32)))


@pytest.mark.parametrize("which", ["pure_callback", "io_callback"])
def test_callbacks_under_grad_are_refused_naming_the_callback(which):
    for L in (JAX, EMBER):
        callback = getattr(L, which)
        with pytest.raises(ValueError, match="callbacks do not support JVP" if L is JAX else
                           f"differentiation of primitive '{which}': callbacks are not differentiable: wrap the "
                           "callback in ember.custom_jvp"):
            L.grad(lambda x: callback(np.sin, L.S((), F32), x))(F32(1.0))


# ----------------------------------------------------------------------------------------------------------------
# The persistent compilation cache and the profiler, each wrapping every program above (and each other).

BASE = ["donation", "refs", "shardings", "callbacks", "export", "checkify", "vmap", "grad"]
# One program per feature of the eight (each a pair program: two of them meet in it, then a third).
FOR_ENV = {"donation": donation_checkify, "refs": refs_grad, "shardings": shardings_grad,
           "callbacks": callbacks_vmap, "export": export_grad, "checkify": checkify_vmap, "vmap": donation_vmap,
           "grad": vmap_grad}
CALLING_BACK = {callbacks_vmap}  # their text holds this process's callback tokens: no hits


def read_trace(directory):
    (path,) = directory.glob("plugins/profile/*/*.trace.json.gz")
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]


def under_cache(program, directory):
    """Run the program with a fresh cache directory: every program is stored; then with the in-memory caches
    cleared, the second run loads them (hits) and compiles nothing but programs calling back (whose text holds this
    process's callback tokens: never a hit)."""
    before = dict(compile_cache.stats)
    with ember.config.override(compilation_cache_dir=str(directory), persistent_cache_min_compile_time_secs=0):
        ember.clear_caches()
        first = host(program(EMBER))
        stored = compile_cache.stats["stores"] - before["stores"]
        assert stored >= 1
        ember.clear_caches()
        middle = dict(compile_cache.stats)
        second = host(program(EMBER))
    hits = compile_cache.stats["hits"] - middle["hits"]
    misses = compile_cache.stats["misses"] - middle["misses"]
    return first, second, hits, misses


def _env_params():
    return [pytest.param(program, id=name) for name, program in FOR_ENV.items()]


@pytest.mark.parametrize("program", _env_params())
def test_under_the_persistent_cache(program, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = host(program(JAX))
        first, second, hits, misses = under_cache(program, tmp_path)
    assert_same(comparable(first), comparable(want), "first run")
    assert_same(comparable(second), comparable(want), "second run (loaded)")
    if program in CALLING_BACK:
        assert misses >= 1
    else:
        assert hits >= 1 and misses == 0, f"{hits} programs loaded, {misses} compiled again"


@pytest.mark.parametrize("program", _env_params())
def test_under_the_profiler(program, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = host(program(JAX))
        with ember.profiler.trace(tmp_path):
            got = host(program(EMBER))
    assert_same(comparable(got), comparable(want))
    events = read_trace(tmp_path)
    assert any(e["cat"] == "execute" for e in events)


def test_the_persistent_cache_under_the_profiler(tmp_path):
    """Loading programs from the cache while profiling: the executions are recorded, the values are JAX's."""
    want = host(donation_grad(JAX))
    with ember.profiler.trace(tmp_path / "trace"):
        first, second, hits, misses = under_cache(donation_grad, tmp_path / "cache")
    assert_same(comparable(first), comparable(want))
    assert_same(comparable(second), comparable(want))
    assert misses == 0
    executes = [e["name"] for e in read_trace(tmp_path / "trace") if e["cat"] == "execute"]
    assert executes.count("jit(<lambda>)") >= 4, executes


# ----------------------------------------------------------------------------------------------------------------
# Triples users hit.


def training_step_with_accumulator(L):
    """A donated, sharded training step, accumulating its loss into a closed-over Ref."""
    total = L.new_ref(L.device_put(np.zeros((), F32), L.whole))

    def loss(w, x, y):
        return L.np.mean((L.np.tanh(x @ w) - y) ** 2)

    def step(w, x, y):
        value, g = L.value_and_grad(loss)(w, x, y)
        total[...] += value
        return w - 0.5 * g
    f = L.jit(step, donate_argnums=0, in_shardings=(L.whole, L.split, L.split), out_shardings=L.whole)
    x = L.device_put(arr(L, np.linspace(-1, 1, 12).reshape(4, 3)), L.split)
    y = L.device_put(arr(L, np.linspace(0, 1, 8).reshape(4, 2)), L.split)
    ws = [L.device_put(arr(L, np.full((3, 2), 0.1)), L.whole)]
    for _ in range(3):
        ws.append(f(ws[-1], x, y))
    return {"w": ws[-1], "spec": spec(ws[-1]), "total": total[...], "deleted": [w.is_deleted() for w in ws]}


def test_donated_sharded_training_step_with_a_ref_accumulator_under_the_profiler(tmp_path):
    want = host(training_step_with_accumulator(JAX))
    with ember.profiler.trace(tmp_path):
        got = host(training_step_with_accumulator(EMBER))
    assert_same(got, want)
    assert want["deleted"] == [True, True, True, False]
    executes = [e["name"] for e in read_trace(tmp_path) if e["cat"] == "execute"]
    assert executes.count("jit(step)") == 3, executes


def grad_of_checkified_under_sharded_jit(L):
    def loss(w, x):
        L.check(L.np.all(x > -5.0), "bad input {}", x)
        z = x @ w
        return L.np.sum(L.np.log(z) * z)

    def checked_grad(w, x):
        return L.checkify.checkify(L.grad(loss), errors=L.checkify.all_checks)(w, x)
    g = L.jit(checked_grad, in_shardings=(L.whole, L.split), out_shardings=(None, L.whole))
    w = arr(L, [[1.0], [0.5]])
    results = [g(w, L.device_put(arr(L, v), L.split)) for v in
               ([[1, 2], [3, 4], [0.5, 1], [2, 2]], [[1, 2], [-3, 4], [0.5, 1], [2, 2]],
                [[1, 2], [-6, 4], [0.5, 1], [2, 2]])]
    outer = L.jit(L.grad(lambda w, x: L.checkify.checkify(loss)(w, x)[1]), in_shardings=(L.whole, L.split))
    return {"errors": [e.get() for e, _ in results], "g": [g for _, g in results],
            "spec": spec(results[0][1]), "outer": outer(w, L.device_put(arr(L, np.ones((4, 2))), L.split))}


def test_grad_of_a_checkified_function_under_jit_with_shardings():
    check(grad_of_checkified_under_sharded_jit)


def test_export_of_a_vmapped_function_with_a_callback():
    """As test_callbacks_and_export: the Exported's call against JAX's jit of the same vmapped function, whose export
    JAX refuses."""
    def vmapped(L, calls):
        def f(x):
            return L.pure_callback(lambda v: (calls.append(np.shape(v)) or np.cos(np.asarray(v))).astype(F32),
                                   L.S(x.shape, x.dtype), x, vmap_method="sequential") * x
        return L.jit(L.vmap(f))
    xs = np.arange(6.0, dtype=F32).reshape(3, 2)
    with pytest.raises(NotImplementedError, match="host_callbacks"):
        jax.export.export(vmapped(JAX, []))(JAX.S((3, 2), F32))
    jax_calls, ember_calls = [], []
    want = vmapped(JAX, jax_calls)(arr(JAX, xs))
    exp = ember.export.export(vmapped(EMBER, ember_calls))(EMBER.S((3, 2), F32))
    got = exp.call(arr(EMBER, xs))
    assert_same(host([got, ember_calls]), host([want, jax_calls]))
    with pytest.raises(NotImplementedError, match="host_callbacks"):
        exp.serialize()


@pytest.mark.xfail(strict=True, reason=(
    "checkify(grad(f)) misses a NaN made on the forward pass by a value the gradient does not need: ember's grad "
    "drops dead forward equations (DCE) before checkify sees its IR; JAX's grad keeps the forward pass"))
def test_checkify_of_grad_checks_the_whole_forward_pass():
    for L in (JAX, EMBER):
        f = L.checkify.checkify(L.grad(lambda x: L.np.sum(L.np.log(x))), errors=L.checkify.nan_checks)
        err, g = f(arr(L, [1.0, -1.0]))
        assert err.get() == "nan generated by primitive: log.", L.name
        np.testing.assert_allclose(np.asarray(g), [1.0, -1.0])


def test_every_pair_is_in_the_matrix():
    covered = set(PAIR_PROGRAMS) | {(n, "cache") for n in BASE} | {(n, "profiler") for n in BASE}
    covered |= {("cache", "profiler"), ("callbacks", "export")}
    assert set(FOR_ENV.values()) <= set(PAIR_PROGRAMS.values())
    for a, b in itertools.combinations(FEATURES, 2):
        assert (a, b) in covered or (b, a) in covered, (a, b)
