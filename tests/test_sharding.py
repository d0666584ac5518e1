"""Arrays and programs over several devices: device_put by a sharding, eager operations and jit on sharded arrays
(XLA's SPMD partitioner), in_shardings / out_shardings, sharding constraints, shard_map with collectives, pmap and
a data-parallel training step, against numpy and JAX (on a mesh of the same shape). The tests run with ember's two
CPU devices (tests/conftest.py); test_four_devices runs the 2-D meshes in a process with four."""
import pickle
import pathlib
import textwrap

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import NamedSharding, P
from ember.sharding import Mesh, SingleDeviceSharding
from recorded import jax_result
from reliability.subproc import check_python

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

DEVICES = ember.devices()
if len(DEVICES) < 2:  # (conftest asks for two)
    pytest.skip("needs two CPU devices", allow_module_level=True)
MESH = Mesh(np.array(DEVICES[:2]), ("x",))
ROWS, COLS, REPLICATED = NamedSharding(MESH, P("x")), NamedSharding(MESH, P(None, "x")), NamedSharding(MESH, P())
X = np.arange(32, dtype=np.float32).reshape(8, 4) / 7


def jax_mesh():
    import jax
    return jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))


def test_devices_and_environment():
    d = DEVICES[0]
    assert (d.platform, d.device_kind, d.process_index, d.id) == ("cpu", "cpu", 0, 0)
    assert isinstance(d, ember.Device) and ember.device_count() == len(ember.local_devices()) == len(DEVICES)
    assert ember.default_backend() == "cpu" and ember.process_index() == 0 and ember.process_count() == 1
    a = ember.numpy.ones(3)
    assert a.sharding == SingleDeviceSharding(d) and a.devices() == {d} and a.is_fully_addressable
    assert [s.device for s in a.addressable_shards] == [d] and a.addressable_shards[0].index == (slice(None),)
    # JAX's way of asking for CPU devices is read too (the plugin itself ignores the flag)
    out = check_python("import os\n"
                       "for name in ('EMBER_NUM_CPU_DEVICES', 'JAX_NUM_CPU_DEVICES'): os.environ.pop(name, None)\n"
                       "import ember; print(ember.device_count())",
                       env={"XLA_FLAGS": "--xla_force_host_platform_device_count=3"})
    assert out.strip().splitlines()[-1] == "3"



@pytest.mark.slow  # (4.5 s; device counts by default: the two-device tests)
def test_cpu_device_count_is_read_when_the_backend_starts():
    """As JAX's CPU client, ember settles its device count when the backend starts (the first computation or
    devices() call), not at import: XLA_FLAGS set after `import` counts, an explicit jax_num_cpu_devices wins over
    it, and a change once the backend has started raises RuntimeError (in JAX's words). JAX runs beside ember in
    the same process and must agree; subprocesses, as the count is per process."""
    prelude = ("import os\n"
               "for name in ('EMBER_NUM_CPU_DEVICES', 'JAX_NUM_CPU_DEVICES', 'XLA_FLAGS'): os.environ.pop(name, None)\n"
               "import ember, jax\n")
    out = check_python(prelude + "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=6'\n"
                       "print(jax.device_count(), ember.device_count(), ember.config.num_cpu_devices)")
    assert out.split() == ["6", "6", "6"]
    out = check_python(prelude + textwrap.dedent("""
        for lib in (jax, ember):
            lib.config.update("jax_num_cpu_devices", 3)
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=6"  # the explicit update wins
        print(jax.device_count(), ember.device_count())
        for lib in (jax, ember):
            try:
                lib.config.update("jax_num_cpu_devices", 2)
            except RuntimeError as err:
                print("late:", "should be updated before backends are initialized" in str(err),
                      lib.config.jax_num_cpu_devices)
        ember.config.update("num_cpu_devices", 3)  # the count it has is no change
        print(len(ember.devices()))
    """))
    assert out.splitlines() == ["3 3", "late: True 3", "late: True 3", "3"]

def test_device_put_by_sharding_and_back():
    a = ember.device_put(X, ROWS)
    assert isinstance(a, ember.Array) and a.sharding == ROWS and a.devices() == set(DEVICES[:2])
    assert a.shape == X.shape and a.dtype == np.float32 and not a.is_fully_replicated
    shards = a.addressable_shards
    assert [s.device for s in shards] == DEVICES[:2] and [s.replica_id for s in shards] == [0, 0]
    for s in shards:
        np.testing.assert_array_equal(np.asarray(s.data), X[s.index])
        assert s.data.shape == (4, 4) and s.data.device is s.device
    np.testing.assert_array_equal(np.asarray(a), X)
    got = ember.device_get({"a": a})["a"]
    assert type(got) is np.ndarray and ember.block_until_ready(a) is a and any(o is a for o in ember.live_arrays())
    np.testing.assert_array_equal(got, X)
    assert ember.device_put(a, ROWS) is a and jnp.asarray(a) is a  # already placed so
    assert jnp.asarray(a, dtype=jnp.float16).sharding == ROWS and jnp.array(a).sharding == ROWS  # (copies, in place)
    r = ember.device_put(a, REPLICATED)  # resharded
    assert r.is_fully_replicated and [s.replica_id for s in r.addressable_shards] == [0, 1]
    np.testing.assert_array_equal(np.asarray(r), X)
    one = ember.device_put(a, DEVICES[1])  # gathered on one device
    assert type(one) is ember.Array and one.device is DEVICES[1]
    np.testing.assert_array_equal(np.asarray(one), X)
    # pytrees, with a tree prefix of shardings; scalars; pickling; deletion
    tree = ember.device_put({"w": X, "b": np.ones(4, np.float32)}, {"w": COLS, "b": REPLICATED})
    assert tree["w"].sharding == COLS and tree["b"].sharding == REPLICATED
    assert float(ember.device_put(np.float32(2.5), REPLICATED)) == 2.5
    np.testing.assert_array_equal(np.asarray(pickle.loads(pickle.dumps(a))), X)
    assert repr(a).startswith("Array([[") and "sharding" not in repr(a)  # (as JAX's: the placement is a.sharding)
    a.block_until_ready()
    a.delete()
    assert a.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(a)
    with pytest.raises(RuntimeError, match=r"argument 0 \(f32\[8,4\]\) has been deleted"):
        a + 1
    with ember.debug_nans(True):  # the checks see sharded results too
        with pytest.raises(FloatingPointError, match="log"):
            jnp.log(ember.device_put(-X, ROWS))
    with pytest.raises(ValueError, match="not divisible|divide"):
        ember.device_put(np.ones((3, 2)), ROWS)
    with pytest.raises(TypeError, match="device_put: device must be"):
        ember.device_put(X, "cpu:1")


def test_device_put_by_a_partition_spec_under_the_current_mesh():
    """As JAX's: device_put(x, P(...)) means NamedSharding(current mesh, P(...)), a pytree of specs too; without
    a current mesh, JAX's ValueError."""
    with pytest.raises(ValueError, match="Please set a mesh via `ember.sharding.set_mesh` if a PartitionSpec"):
        ember.device_put(X, P("x"))
    with ember.sharding.set_mesh(MESH):
        a = ember.device_put(X, P("x"))
        tree = ember.device_put({"w": X, "b": X[0]}, {"w": P(None, "x"), "b": P()})
        inside = ember.jit(lambda u: ember.device_put(u * 2, P(None, "x")))(a)
    assert a.sharding == ROWS and a.committed and tree["w"].sharding == COLS and tree["b"].sharding.spec == P()
    assert inside.sharding == COLS
    np.testing.assert_allclose(np.asarray(inside), X * 2)


def test_arrays_from_parts():
    a = ember.make_array_from_callback(X.shape, COLS, lambda index: X[index])
    assert a.sharding == COLS
    np.testing.assert_array_equal(np.asarray(a), X)
    parts = [ember.device_put(X[:4], DEVICES[0]), ember.device_put(X[4:], DEVICES[1])]
    b = ember.make_array_from_single_device_arrays(X.shape, ROWS, parts)
    np.testing.assert_array_equal(np.asarray(b), X)
    with pytest.raises(ValueError, match="make_array_from_single_device_arrays"):
        ember.make_array_from_single_device_arrays(X.shape, ROWS, parts[:1])
    np.testing.assert_array_equal(np.asarray(ember.make_array_from_process_local_data(ROWS, X)), X)


def test_eager_operations_on_sharded_arrays():
    a, b = ember.device_put(X, ROWS), ember.device_put(X.T, COLS)
    y = jnp.sin(a) * 2 + 1
    assert y.sharding == ROWS  # elementwise: placed as its input
    np.testing.assert_allclose(np.asarray(y), np.sin(X) * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a.sum(axis=0)), X.sum(0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jnp.max(a, axis=1)), X.max(1))
    np.testing.assert_allclose(float(a.mean()), X.mean(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a @ b), X @ X.T, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a[jnp.array([7, 0, 3])]), X[[7, 0, 3]])  # gather
    np.testing.assert_allclose(np.asarray(a.at[2:6, 1].set(-1.0)), np.where(
        (np.arange(8)[:, None] >= 2) & (np.arange(8)[:, None] < 6) & (np.arange(4) == 1), -1.0, X))  # scatter
    np.testing.assert_allclose(np.asarray(a + ember.numpy.ones(4)), X + 1)  # with a one-device array
    image = ember.device_put(np.random.default_rng(0).normal(size=(4, 3, 6, 6)).astype(np.float32),
                             NamedSharding(MESH, P("x")))
    kernel = np.random.default_rng(1).normal(size=(2, 3, 3, 3)).astype(np.float32)
    got = ember.lax.conv_general_dilated(image, kernel, (1, 1), "SAME")
    want = ember.lax.conv_general_dilated(np.asarray(image), kernel, (1, 1), "SAME")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_jit_partitions_over_the_devices():
    f = ember.jit(lambda u, v: jnp.tanh(u @ v).sum(axis=1))
    want = np.tanh(X @ X.T).sum(1)
    for su, sv in [(ROWS, REPLICATED), (COLS, ROWS), (REPLICATED, COLS), (ROWS, COLS)]:
        got = f(ember.device_put(X, su), ember.device_put(X.T, sv))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    g = ember.jit(lambda u, v: u @ v, in_shardings=(ROWS, COLS), out_shardings=NamedSharding(MESH, P(None, "x")))
    c = g.lower(X, X.T).compile()
    out = c(X, X.T)
    assert out.sharding == NamedSharding(MESH, P(None, "x"))
    np.testing.assert_allclose(np.asarray(out), X @ X.T, rtol=1e-5)
    assert c.input_shardings == ((ROWS, COLS), {}) and c.output_shardings == NamedSharding(MESH, P(None, "x"))
    assert "mhlo.sharding" in g.lower(X, X.T).as_text() and "mhlo.num_partitions = 2" in g.lower(X, X.T).as_text()
    # the contraction over a split dimension needs an all-reduce, inserted by XLA
    h = ember.jit(lambda u, v: u @ v, in_shardings=(COLS, ROWS), out_shardings=REPLICATED)
    assert "all-reduce" in h.lower(X, X.T).compile().as_text()
    np.testing.assert_allclose(np.asarray(h(X, X.T)), X @ X.T, rtol=1e-5)
    # PartitionSpecs under the current mesh; one sharding for every argument
    with ember.sharding.set_mesh(MESH):
        k = ember.jit(lambda u, v: u + v, in_shardings=P("x"))
        assert k(X, X).sharding == ROWS
    with pytest.raises(RuntimeError, match="requires a non-empty mesh in context if you are passing "
                       "`PartitionSpec`s to in_shardings"):
        ember.jit(lambda u: u, in_shardings=P("x"))(X)
    with pytest.raises(TypeError, match="in_shardings must hold"):
        ember.jit(lambda u: u, in_shardings=3)
    with pytest.raises(ValueError, match="names one device"):
        ember.jit(lambda u, v: u + v, in_shardings=(ROWS, SingleDeviceSharding(DEVICES[1])))(X, X)
    # a nested jit keeps its shardings (a pjit equation): the enclosing program is partitioned for them
    inner = ember.jit(lambda u: u * 2, in_shardings=ROWS, out_shardings=COLS)
    outer = ember.jit(lambda u: inner(u) + 1)
    assert "mhlo.num_partitions = 2" in outer.lower(X).as_text()
    got = outer(X)
    assert got.sharding == COLS
    np.testing.assert_allclose(np.asarray(got), X * 2 + 1)


def test_programs_whose_partitions_do_not_communicate_run_one_per_device(capfd, monkeypatch):
    """From its third call a partitioned program whose partitions never communicate (no collective, partition id or
    callback in XLA's partition) runs as one program per device (ember._runtime.spmd: _run_locally): the same values
    and shardings, every call; programs that communicate or call back keep running as compiled."""
    from ember._runtime import spmd
    ran: list[tuple[str, bool]] = []
    original = spmd.SpmdProgram._run_locally

    def counted(self, per_device):
        outs = original(self, per_device)
        ran.append((self.ir.eqns[-1].prim.name, outs is not None))
        return outs
    monkeypatch.setattr(spmd.SpmdProgram, "_run_locally", counted)
    local = ember.jit(lambda u, v: jnp.tanh(u) * v + 1.0)  # elementwise on rows split alike
    mixed = ember.jit(lambda u, v: (u * v).sum(0))  # a sum over the split rows: an all-reduce
    printing = ember.jit(lambda u: (ember.debug.print("n={n}", n=u.shape[0]), u * 2)[1])
    u = ember.device_put(X, ROWS)
    for k in range(5):
        v = ember.device_put(X[::-1] * k, ROWS)
        got = local(u, v)
        assert got.sharding == ROWS
        np.testing.assert_allclose(np.asarray(got), np.tanh(X) * X[::-1] * k + 1.0, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(mixed(u, v)), (X * X[::-1] * k).sum(0), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(printing(u)), X * 2)
    ember.effects_barrier()
    assert capfd.readouterr().out.splitlines() == ["n=8"] * 5  # (once a call, not once a device)
    # the elementwise program (its last equation an add) ran locally from its third call; the others are not
    # candidates (their partitions all-reduce, call back)
    assert ran == [("add", False), ("add", False), ("add", True), ("add", True), ("add", True)], ran


def test_sharding_constraints_under_transformations():
    def f(u):
        return ember.lax.with_sharding_constraint(jnp.sin(u) * 3, COLS).sum()
    jitted = ember.jit(f)
    text = jitted.lower(X).as_text()
    assert '@Sharding' in text or 'call_target_name = "Sharding"' in text
    np.testing.assert_allclose(float(jitted(X)), np.sin(X).sum() * 3, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(f))(X)), 3 * np.cos(X), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jvp(f, (X,), (np.ones_like(X),))[1]), 3 * np.cos(X).sum(),
                               rtol=1e-5)
    batched = ember.vmap(lambda u: ember.lax.with_sharding_constraint(u, COLS))(np.stack([X, X]))
    assert batched.sharding == NamedSharding(MESH, P(None, None, "x"))
    eager = ember.lax.with_sharding_constraint(X, ROWS)  # concrete: placed so
    assert eager.sharding == ROWS
    assert ember.reshard(X, COLS).sharding == COLS
    placed = ember.jit(lambda u: ember.device_put(u * 2, COLS))(X)  # device_put inside jit: a constraint
    assert placed.sharding == COLS
    np.testing.assert_allclose(np.asarray(placed), X * 2)
    with pytest.raises(ValueError, match="more than the rank"):
        ember.lax.with_sharding_constraint(np.ones(3), COLS)


def test_shard_map_collectives_against_jax():
    import jax
    lax = ember.lax

    def body(u, extremes=True):  # every collective once; the result is one block per device
        total = lax.psum(u, "x")
        gathered = lax.all_gather(u, "x", tiled=True)
        scattered = lax.psum_scatter(gathered * 2, "x", scatter_dimension=0, tiled=True)
        swapped = lax.ppermute(u, "x", [(0, 1), (1, 0)])
        moved = lax.all_to_all(u, "x", 1, 0, tiled=True)
        out = total * lax.axis_index("x") + lax.pmean(u, "x") + scattered + swapped + moved.reshape(u.shape) * 2
        return out + lax.pmax(u, "x") * lax.pmin(u, "x") * lax.axis_size("x") if extremes else out

    def jax_body(u, extremes=True):
        total = jax.lax.psum(u, "x")
        gathered = jax.lax.all_gather(u, "x", tiled=True)
        scattered = jax.lax.psum_scatter(gathered * 2, "x", scatter_dimension=0, tiled=True)
        swapped = jax.lax.ppermute(u, "x", [(0, 1), (1, 0)])
        moved = jax.lax.all_to_all(u, "x", 1, 0, tiled=True)
        out = total * jax.lax.axis_index("x") + jax.lax.pmean(u, "x") + scattered + swapped + moved.reshape(u.shape) * 2
        return out + jax.lax.pmax(u, "x") * jax.lax.pmin(u, "x") * jax.lax.axis_size("x") if extremes else out

    every = ember.shard_map(body, mesh=MESH, in_specs=P("x"), out_specs=P("x"))
    f = ember.shard_map(lambda u: body(u, False), mesh=MESH, in_specs=P("x"), out_specs=P("x"))

    def jax_f(extremes=False):
        return jax.shard_map(lambda u: jax_body(u, extremes), mesh=jax_mesh(), in_specs=jax.P("x"),
                             out_specs=jax.P("x"), check_vma=False)

    want = jax_result(lambda: jax.jit(jax_f(True))(X))
    np.testing.assert_allclose(np.asarray(every(X)), want, rtol=1e-5)  # eagerly
    np.testing.assert_allclose(np.asarray(ember.jit(every)(ember.device_put(X, ROWS))), want, rtol=1e-5)
    loss = lambda u: (f(u) ** 2).sum()  # noqa: E731
    want_grad = jax_result(lambda: jax.jit(jax.grad(lambda u: (jax_f()(u) ** 2).sum()))(X))
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(loss))(X)), want_grad, rtol=1e-4)
    tangent = np.cos(X)
    want_jvp = jax_result(lambda: jax.jvp(jax_f(), (X,), (tangent,))[1])
    np.testing.assert_allclose(np.asarray(ember.jvp(f, (X,), (tangent,))[1]), want_jvp, rtol=1e-5)
    stacked = np.stack([X, X[::-1]])
    want_vmap = jax_result(lambda: jax.vmap(jax_f(True))(stacked))
    np.testing.assert_allclose(np.asarray(ember.vmap(every)(stacked)), want_vmap, rtol=1e-5)


def test_shard_map_specs_and_gradients():
    import jax
    # a replicated result of a reduction, replicated and split inputs, a pytree, closed-over arrays
    w = np.linspace(-1, 1, 4).astype(np.float32)

    def body(u, params):
        return {"s": ember.lax.psum((u * params["w"]).sum(0), "x"), "u": u * params["b"]}
    f = ember.shard_map(body, mesh=MESH, in_specs=(P("x"), P()), out_specs={"s": P(), "u": P("x")})
    params = {"w": w, "b": np.float32(3)}
    out = f(X, params)
    assert out["s"].sharding == REPLICATED and out["u"].sharding == ROWS
    np.testing.assert_allclose(np.asarray(out["s"]), (X * w).sum(0), rtol=1e-5)

    def loss(u, p):
        o = f(u, p)
        return (o["s"] ** 2).sum() + (o["u"] * X).sum()

    def jax_loss(u, p):
        jf = jax.shard_map(lambda u, p: {"s": jax.lax.psum((u * p["w"]).sum(0), "x"), "u": u * p["b"]},
                           mesh=jax_mesh(), in_specs=(jax.P("x"), jax.P()), out_specs={"s": jax.P(), "u": jax.P("x")})
        o = jf(u, p)
        return (o["s"] ** 2).sum() + (o["u"] * X).sum()
    want = jax_result(lambda: jax.grad(jax_loss, argnums=(0, 1))(X, params))
    got = ember.grad(loss, argnums=(0, 1))(X, params)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]["w"]), want[1]["w"], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]["b"]), want[1]["b"], rtol=1e-5)
    # in_specs taken from the arguments' shardings
    g = ember.shard_map(lambda u: u * ember.lax.axis_index("x"), mesh=MESH, out_specs=P(None, "x"))
    np.testing.assert_allclose(np.asarray(g(ember.device_put(X, COLS))), X * (np.arange(4) >= 2))
    with pytest.raises(ValueError, match="not divisible"):
        ember.shard_map(lambda u: u, mesh=MESH, in_specs=P("x"), out_specs=P("x"))(np.ones(3))
    with pytest.raises(ValueError, match="does not have"):
        ember.shard_map(lambda u: u, mesh=MESH, in_specs=P("y"), out_specs=P("x"))(X)
    with pytest.raises(ValueError, match="no mesh"):
        ember.shard_map(lambda u: u, in_specs=P("x"), out_specs=P("x"))(X)
    with pytest.raises(NameError, match="unbound axis name"):
        ember.shard_map(lambda u: ember.lax.psum(u, "y"), mesh=MESH, in_specs=P("x"), out_specs=P("x"))(X)


def test_pmap_against_jax():
    import jax
    x = X[:2]
    f = ember.pmap(lambda a: a / ember.lax.psum(a, "i"), axis_name="i")
    y = f(x)
    assert y.sharding.num_devices == 2 and [s.data.shape for s in y.addressable_shards] == [(1, 4), (1, 4)]
    want = jax_result(lambda: jax.pmap(lambda a: a / jax.lax.psum(a, "i"), axis_name="i")(x))
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-6)
    want_grad = jax_result(lambda: jax.grad(lambda a: (jax.pmap(lambda b: b / jax.lax.psum(b, "i"), axis_name="i")(
        a) ** 2).sum())(x))
    np.testing.assert_allclose(np.asarray(ember.grad(lambda a: (f(a) ** 2).sum())(x)), want_grad, rtol=1e-5)
    g = ember.pmap(lambda a, b, k: a * b + k * ember.lax.axis_index("i"), axis_name="i", in_axes=(1, None, None),
                   out_axes=1, static_broadcasted_argnums=2)
    want = jax_result(lambda: jax.pmap(lambda a, b, k: a * b + k * jax.lax.axis_index("i"), axis_name="i",
                                       in_axes=(1, None, None), out_axes=1, static_broadcasted_argnums=2)(
        X[:, :2], np.float32(2), 5))
    np.testing.assert_allclose(np.asarray(g(X[:, :2], np.float32(2), 5)), want, rtol=1e-6)
    with pytest.raises(ValueError, match="device"):
        ember.pmap(lambda a: a)(np.ones((3, 2)))
    # out_axes=None: a result the same on every device, returned once
    both = ember.pmap(lambda a: (a * 2, ember.lax.psum(a, "i")), axis_name="i", out_axes=(0, None))(x)
    want = jax_result(lambda: jax.pmap(lambda a: (a * 2, jax.lax.psum(a, "i")), axis_name="i", out_axes=(0, None))(x))
    assert [np.shape(v) for v in both] == [(2, 4), (4,)]
    np.testing.assert_allclose(np.asarray(both[1]), want[1])
    with pytest.raises(ValueError, match="out_axes 1 is out of range"):
        ember.pmap(lambda a: a.sum(), axis_name="i", out_axes=1)(x)


def test_data_parallel_training_step():
    """An MLP step (value_and_grad + SGD) with the batch split over the devices and the parameters replicated
    equals the same step on one device."""
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(4, 16)).astype(np.float32) * 0.5, "b1": np.zeros(16, np.float32),
              "w2": rng.normal(size=(16, 1)).astype(np.float32) * 0.5}
    xb, yb = rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(8, 1)).astype(np.float32)

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2).mean()

    @ember.jit
    def step(p, x, y):
        value, grads = ember.value_and_grad(loss)(p, x, y)
        return value, ember.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)

    single = step(params, xb, yb)
    sharded_params = ember.device_put(params, REPLICATED)
    sharded = step(sharded_params, ember.device_put(xb, ROWS), ember.device_put(yb, ROWS))
    np.testing.assert_allclose(float(sharded[0]), float(single[0]), rtol=1e-5)
    for k in params:
        assert sharded[1][k].is_fully_replicated
        np.testing.assert_allclose(np.asarray(sharded[1][k]), np.asarray(single[1][k]), rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # (3.5 s; two devices by default)
def test_four_devices():
    """2-D meshes need four devices: a process of its own, JAX's oracle beside it."""
    code = textwrap.dedent("""
        import numpy as np, jax, ember
        from ember import P, NamedSharding
        x = np.arange(64, dtype=np.float32).reshape(8, 8) / 9
        mesh = ember.sharding.Mesh(np.array(ember.devices()[:4]).reshape(2, 2), ("a", "b"))  # (Auto axes, as jmesh)
        jmesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
        for spec in [P("a", "b"), P(("a", "b")), P(None, ("b", "a")), P("b")]:
            s = NamedSharding(mesh, spec)
            u = ember.device_put(x, s)
            assert [d.id for d in u.sharding._device_assignment] == [0, 1, 2, 3]
            f = ember.jit(lambda u, v: (u @ v).sum(1), out_shardings=NamedSharding(mesh, P("a")))
            np.testing.assert_allclose(np.asarray(f(u, ember.device_put(x.T, NamedSharding(mesh, P("b", "a"))))),
                                       (x @ x.T).sum(1), rtol=1e-5)
        body = lambda u: ember.lax.psum(u, "a") * ember.lax.axis_index("b") + ember.lax.all_gather(u, ("a", "b"),
                                                                                                    tiled=True)[:4, :4]
        jbody = lambda u: jax.lax.psum(u, "a") * jax.lax.axis_index("b") + jax.lax.all_gather(u, ("a", "b"),
                                                                                              tiled=True)[:4, :4]
        g = ember.shard_map(body, mesh=mesh, in_specs=P("a", "b"), out_specs=P(None, "b"), check_vma=False)
        jg = jax.shard_map(jbody, mesh=jmesh, in_specs=jax.P("a", "b"), out_specs=jax.P(None, "b"), check_vma=False)
        np.testing.assert_allclose(np.asarray(g(x)), np.asarray(jax.jit(jg)(x)), rtol=1e-5)
        loss = lambda u: (g(u) ** 2).sum()
        jloss = lambda u: (jg(u) ** 2).sum()
        np.testing.assert_allclose(np.asarray(ember.grad(loss)(x)), np.asarray(jax.grad(jloss)(x)), rtol=1e-4)
        print("ok", ember.device_count())
    """)
    out = check_python(code, env={"EMBER_NUM_CPU_DEVICES": "4", "JAX_NUM_CPU_DEVICES": "4"})
    assert out.strip().splitlines()[-1] == "ok 4"


def test_visualize_array_sharding(capsys):
    ember.debug.visualize_array_sharding(ember.device_put(X, COLS))
    picture = capsys.readouterr().out
    assert "CPU 0" in picture and "CPU 1" in picture and picture.count("\n") >= 3


def _placements(lib, lnp, NamedSharding_, SingleDeviceSharding_, mesh, P):
    """(committed, device ids) of each kind of array and result, with ember's or JAX's API (lib: the top-level
    module, lnp: its numpy): JAX's placement rules (an explicit placement commits an array; a computation runs
    where its committed arguments are, its uncommitted ones moving there, and its results are committed when one
    was)."""
    d0, d1 = lib.devices()[:2]
    host = np.arange(4, dtype=np.float32)
    u = lnp.ones(4)
    c0, c1 = lib.device_put(host, d0), lib.device_put(host, d1)
    s = lib.device_put(host, NamedSharding_(mesh, P("x")))
    f = lib.jit(lambda a, b: a * b + 1)
    out = {"ones": u, "asarray": lnp.asarray(host), "device_put()": lib.device_put(host),
           "device_put(d0)": c0, "device_put(d1)": c1,
           "device_put(sharding)": lib.device_put(host, SingleDeviceSharding_(d1)),
           "device_put(c1)": lib.device_put(c1), "device_put(u)": lib.device_put(u),
           "device_put(u, d0)": lib.device_put(u, d0), "device_put(c1, d0)": lib.device_put(c1, d0),
           "ones(device=d1)": lnp.ones(3, device=d1), "asarray(c1)": lnp.asarray(c1),
           "zeros_like(c1)": lnp.zeros_like(c1), "zeros_like(u)": lnp.zeros_like(u),
           "named": s, "shard data": s.addressable_shards[1].data,
           "u + 1": u + 1, "c1 * 2.0": c1 * 2.0, "sin(c1)": lnp.sin(c1), "u + c1": u + c1, "c1 - u": c1 - u,
           "c0 + u": c0 + u, "c1.sum()": c1.sum(), "c1[1:3]": c1[1:3], "where(u > 0, c1, u)": lnp.where(u > 0, c1, u),
           "stack([u, c1])": lnp.stack([u, c1]), "named + u": s + u,
           "jit(u, u)": f(u, u), "jit(u, c1)": f(u, c1), "jit(c1, u)": f(c1, u), "jit(c1, host)": f(c1, host),
           "jit(host, host)": f(host, host), "jit(named, u)": f(s, u),
           "jit closing over c1": lib.jit(lambda a: a + c1)(u),
           "grad at c1": lib.grad(lambda a: (a * a).sum())(c1), "vmap at c1": lib.vmap(lambda a: a * 2)(c1)}
    return {name: (bool(x.committed), sorted(d.id for d in x.devices())) for name, x in out.items()}


def test_committed_arrays_and_where_computations_run_as_jax():
    import jax
    got = _placements(ember, jnp, NamedSharding, SingleDeviceSharding, MESH, P)
    want = jax_result(lambda: _placements(jax, jax.numpy, jax.sharding.NamedSharding,
                                          jax.sharding.SingleDeviceSharding, jax_mesh(), jax.P))
    assert got == want
    assert got["u + c1"] == got["jit(u, c1)"] == (True, [1])  # the uncommitted argument moved to device 1
    assert ember.Array.committed.__doc__ and isinstance(jnp.ones(2).committed, bool)


def _device_errors(lib, lax, NamedSharding_, mesh, P):
    """The messages of the ValueErrors of computations on arrays committed to different devices (None: none)."""
    d0, d1 = lib.devices()[:2]
    host = np.arange(4, dtype=np.float32)
    c0, c1 = lib.device_put(host, d0), lib.device_put(host, d1)
    s = lib.device_put(host, NamedSharding_(mesh, P("x")))
    f = lib.jit(lambda a, b: a * b)
    messages = []
    for thunk in (lambda: f(c0, c1), lambda: lib.jit(lambda t: t["p"] + t["q"])({"p": c1, "q": c0}),
                  lambda: lax.add(c0, c1), lambda: lax.mul(c1, c0.reshape(2, 2).reshape(4)), lambda: f(s, c1),
                  lambda: f(c1, c1 + lib.device_put(host))):
        try:
            thunk()
            messages.append(None)
        except ValueError as err:
            messages.append(str(err))
    return messages


def test_arrays_committed_to_different_devices_raise_jaxs_error():
    import jax
    got = _device_errors(ember, ember.lax, NamedSharding, MESH, P)
    want = jax_result(lambda: _device_errors(jax, jax.lax, jax.sharding.NamedSharding, jax_mesh(), jax.P))
    assert got == want
    assert got[0] == ("Received incompatible devices for jitted computation. Got argument a of "
                      "_device_errors.<locals>.<lambda> with shape float32[4] and with device ids [0] on platform "
                      "CPU and argument b of _device_errors.<locals>.<lambda> with shape float32[4] and with device "
                      "ids [1] on platform CPU")


def _inspected(lib, lnp, lax, NamedSharding_, mesh, P):
    """What inspect_array_sharding's callback receives: outside jit, inside jit on one device and partitioned over
    the mesh (an argument's sharding, a constraint's, XLA's choice for a reduction), as (kind, spec or device ids)."""
    seen = []

    def callback(sharding):
        ids = [d.id for d in sharding._device_assignment]
        if isinstance(sharding, NamedSharding_):
            seen.append(("named", tuple(sharding.spec), ids))
        else:  # a one-device array's (SingleDeviceSharding), or XLA's form (GSPMDSharding, ember's HloShardingSharding)
            seen.append((type(sharding).__name__ == "SingleDeviceSharding", sharding.is_fully_replicated, ids))

    def f(a):
        b = lax.with_sharding_constraint(lnp.sin(a), NamedSharding_(mesh, P(None, "x"))) if a.ndim == 2 else a * 2
        lib.debug.inspect_array_sharding({"in": a, "b": b}, callback=callback)
        lib.debug.inspect_array_sharding(b.sum(0), callback=callback)
        return b

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    s = lib.device_put(x, NamedSharding_(mesh, P("x")))
    lib.debug.inspect_array_sharding([lnp.ones(3), s], callback=callback)  # at once
    g = lib.jit(f)
    g(lnp.ones(3))  # one device: at compile time
    g(lnp.ones(3))  # compiled already: not again
    g(s)  # partitioned: what XLA chose
    return seen


def test_inspect_array_sharding_as_jax():
    import jax
    got = _inspected(ember, jnp, ember.lax, NamedSharding, MESH, P)
    want = jax_result(lambda: _inspected(jax, jax.numpy, jax.lax, jax.sharding.NamedSharding, jax_mesh(), jax.P))
    assert got == want
    # partitioned: the constraint's, the argument's, and what XLA chose for the column sums of b (split as b's columns)
    assert got[-3:] == [("named", (None, "x"), [0, 1]), ("named", ("x",), [0, 1]), ("named", ("x",), [0, 1])]
    with pytest.raises(TypeError, match="positional"):
        ember.debug.inspect_array_sharding(jnp.ones(2), print)


def test_a_transposing_program_repeated_on_sharded_arrays_does_not_abort():
    """The per-device path for small programs (ember/_runtime/spmd.py, _local_module) compiled a partition of XLA's
    optimized module again; a fused transpose there made XLA's CPU compiler abort the process (Check failed:
    output_shape.has_layout()) on the third eager `a.T` of a sharded array. Only instructions seen to compile again
    take that path now; the program runs as one SPMD program."""
    out = check_python("""
        import numpy as np, ember
        from ember import P
        mesh = ember.sharding.Mesh(np.array(ember.devices()[:2]), ("x",))
        a = ember.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), ember.NamedSharding(mesh, P("x")))
        for i in range(4):
            b = a.T
        print("ok", np.array_equal(b, np.arange(32.0).reshape(8, 4).T))
    """, env={"EMBER_NUM_CPU_DEVICES": "2"})
    assert out.strip() == "ok True"


# JAX's "Introduction to sharded computation" (docs/sharded-computation.md): its cells in order (create_device_mesh
# given a shape tuple, as JAX 0.10.2 takes it), and what JAX 0.10.2 printed (tests/recorded/sharded_computation.txt).
SHARDED_COMPUTATION = """
import ember as jax, ember.numpy as jnp
from ember.experimental import mesh_utils
from ember.experimental.shard_map import shard_map
import numpy as np
from functools import partial
jax.config.update('jax_num_cpu_devices', 8)
print(jax.devices())
arr = jnp.arange(32.0).reshape(4, 8)
print(arr.devices())
print(arr.sharding)
P = jax.sharding.PartitionSpec
devices = mesh_utils.create_device_mesh((2, 4))
mesh = jax.sharding.Mesh(devices, ('x', 'y'))
sharding = jax.sharding.NamedSharding(mesh, P('x', 'y'))
print(sharding)
arr_sharded = jax.device_put(arr, sharding)
print(arr_sharded)
@jax.jit
def f_elementwise(x):
  return 2 * jnp.sin(x) + 1
result = f_elementwise(arr_sharded)
print("shardings match:", result.sharding == arr_sharded.sharding)
@jax.jit
def f_contract(x):
  return x.sum(axis=0)
result = f_contract(arr_sharded)
print(result, result.sharding)
@jax.jit
def f_contract_2(x):
  out = x.sum(axis=0)
  devices = mesh_utils.create_device_mesh((8,))
  mesh = jax.sharding.Mesh(devices, 'x')
  sharding = jax.sharding.NamedSharding(mesh, P('x'))
  return jax.lax.with_sharding_constraint(out, sharding)
result = f_contract_2(arr_sharded)
print(result, result.sharding)
mesh = jax.sharding.Mesh(jax.devices(), 'x')
f_elementwise_sharded = shard_map(f_elementwise, mesh=mesh, in_specs=P('x'), out_specs=P('x'))
arr = jnp.arange(32)
print(f_elementwise_sharded(arr))
x = jnp.arange(32)
print(f"global shape: {x.shape=}")
def f(x):
  print(f"device local shape: {x.shape=}")
  return x * 2
y = shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P('x'))(x)
def f(x):
  return jnp.sum(x, keepdims=True)
print(shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P('x'))(x))
def f(x):
  sum_in_shard = x.sum()
  return jax.lax.psum(sum_in_shard, 'x')
print(shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P())(x))
@jax.jit
def layer(x, weights, bias):
  return jax.nn.sigmoid(x @ weights + bias)
rng = np.random.default_rng(0)
x = rng.normal(size=(32,))
weights = rng.normal(size=(32, 4))
bias = rng.normal(size=(4,))
print(layer(x, weights, bias))
sharding = jax.sharding.NamedSharding(mesh, P('x'))
x_sharded = jax.device_put(x, sharding)
weights_sharded = jax.device_put(weights, sharding)
print(layer(x_sharded, weights_sharded, bias))
@jax.jit
def layer_auto(x, weights, bias):
  x = jax.lax.with_sharding_constraint(x, sharding)
  weights = jax.lax.with_sharding_constraint(weights, sharding)
  return layer(x, weights, bias)
print(layer_auto(x, weights, bias))
@jax.jit
@partial(shard_map, mesh=mesh, in_specs=(P('x'), P('x', None), P(None)), out_specs=P(None))
def layer_sharded(x, weights, bias):
  return jax.nn.sigmoid(jax.lax.psum(x @ weights, 'x') + bias)
print(layer_sharded(x, weights, bias))
"""


def test_the_sharded_computation_tutorial_prints_what_jax_prints():
    out = check_python(SHARDED_COMPUTATION)
    assert out == (pathlib.Path(__file__).parent / "recorded" / "sharded_computation.txt").read_text()


def test_pmap_traces_once_and_lowers():
    """pmap stages the function once per signature (as JAX's), and `.lower(args).compile()` is its program."""
    traces = []

    def f(x, y):
        traces.append(1)
        return {"a": x * y, "b": ember.lax.psum(x, "i")}
    g = ember.pmap(f, "i", in_axes=(0, None), out_axes={"a": 0, "b": None})
    x = jnp.arange(2.0)
    out = g(x, 3.0)
    assert len(traces) == 1 and np.asarray(out["a"]).tolist() == [0.0, 3.0] and float(out["b"]) == 1.0
    g(x, 4.0)
    assert len(traces) == 1
    lowered = g.lower(x, 3.0)
    assert "stablehlo" in lowered.as_text() and isinstance(lowered, ember.stages.Lowered)
    assert np.asarray(lowered.compile()(x, 3.0)["a"]).tolist() == [0.0, 3.0]


def test_vmap_spmd_axis_name_errors():
    """vmap's spmd_axis_name: a mesh axis name or a tuple of them; one the constraint inside already uses is an
    error; a shard_map inside is refused (tests/test_shard_map_programs.py compares the constraints with JAX)."""
    x = jnp.arange(4.0).reshape(2, 2)
    with pytest.raises(TypeError, match="spmd_axis_name must be a mesh axis name"):
        ember.vmap(lambda a: a, spmd_axis_name=3)
    with pytest.raises(ValueError, match="spmd_axis_name"):
        ember.jit(ember.vmap(lambda a: ember.lax.with_sharding_constraint(a, NamedSharding(MESH, P("x"))),
                             spmd_axis_name="x"))(x)
    mapped = ember.shard_map(lambda a: a * 2, mesh=MESH, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(NotImplementedError, match="spmd_axis_name"):
        ember.jit(ember.vmap(mapped, spmd_axis_name="x"))(jnp.arange(8.0).reshape(2, 4))
    np.testing.assert_array_equal(np.asarray(ember.jit(ember.vmap(mapped))(jnp.arange(8.0).reshape(2, 4))),
                                  np.arange(8.0).reshape(2, 4) * 2)
