"""ember's sharding objects (ember._core.sharding, ember.sharding: docs/sharding.md) against JAX's: PartitionSpec,
Mesh, NamedSharding over sweeps of meshes and specs (device indices, shard shapes, reprs, errors, XLA's form of
the sharding), XLA's OpSharding protos and text (parsed back by XLA itself), and reading a sharding back from
XLA's. ember's meshes are made of stand-in devices with JAX's device ids; JAX has four CPU devices (conftest)."""
import itertools
import threading

import jax
import numpy as np
import pytest
from jax._src.lib import xla_client as xc
from jax._src.sharding_impls import GSPMDSharding, parse_flatten_op_sharding

import ember
from ember import sharding as es
from ember._core import sharding as cs
from ember._runtime import xla_proto


class FakeDevice:
    """A device as the sharding objects see one: id, platform, process_index (and JAX's repr)."""

    def __init__(self, id):
        self.id, self.platform, self.process_index = id, "cpu", 0

    def __repr__(self):
        return f"CpuDevice(id={self.id})"


FAKE = [FakeDevice(i) for i in range(4)]
MESH_SHAPES = {(4,): ("x",), (2,): ("x",), (2, 2): ("x", "y"), (1, 4): ("x", "y"), (2, 1, 2): ("a", "b", "c")}
SHAPES = {1: (8,), 2: (8, 4), 3: (4, 8, 4)}


def meshes(shape, names, axis_types=None):
    n = int(np.prod(shape))
    jtypes = None if axis_types is None else tuple(getattr(jax.sharding.AxisType, t.name) for t in axis_types)
    return (es.Mesh(np.array(FAKE[:n], dtype=object).reshape(shape), names, axis_types),
            jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(shape), names, jtypes))


def specs(names, ndim):
    """Every spec of rank <= ndim: each axis unused or on one dimension, in every order within a dimension."""
    for slots in itertools.product(range(ndim + 1), repeat=len(names)):
        groups = [[n for n, s in zip(names, slots) if s == d] for d in range(ndim)]
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            parts = [None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders]
            for rank in range(ndim + 1):
                if all(p is None for p in parts[rank:]):
                    yield tuple(parts[:rank])


def by_id(mapping):
    return {d.id: v for d, v in mapping.items()}


def hlo_of_jax(jhlo):
    return xla_proto.op_sharding(jhlo.to_proto().SerializeToString())


def jax_repr(obj):
    return repr(obj)  # (JAX's CPU shardings name the default memory kind, memory_kind=device, as ember's)


def test_partition_spec_matches_jax():
    cases = [(), (None,), ("x",), (("x",),), (["x", "y"],), ("x", None, ("y", "z")), ((),), (("x", None),), (1,),
             (es.P.UNCONSTRAINED, "x")]
    for parts in cases:
        jparts = tuple(jax.P.UNCONSTRAINED if p is es.P.UNCONSTRAINED else p for p in parts)
        spec, jspec = es.P(*parts), jax.P(*jparts)
        assert repr(spec) == repr(jspec) and len(spec) == len(jspec)
        assert spec.partitions == tuple(es.P.UNCONSTRAINED if p is jax.P.UNCONSTRAINED else p
                                        for p in jspec.partitions)
        assert spec == es.P(*parts) and hash(spec) == hash(es.P(*parts)) and spec != tuple(spec)
    assert es.P("x") == es.P(("x",)) and es.P() != es.P(None) and es.P((),) == es.P(None)
    assert es.P("x") + ("y",) == es.P("x", "y") and ("y",) + es.P("x") == es.P("y", "x")
    assert es.P("x", None).index(("x",)) == 0 and es.P("x", None).count(None) == 1
    assert list(es.P("x", "y")) == ["x", "y"]
    for kw in [{"unreduced": {"y"}}, {"reduced": {"y"}}, {"unreduced": {"y"}, "reduced": {"z"}}]:
        assert repr(es.P("x", **kw)) == repr(jax.P("x", **kw)) and repr(es.P(**kw)) == repr(jax.P(**kw))
    for args, kw in [((), {"unreduced": {"y"}, "reduced": {"y"}}), (("y",), {"unreduced": {"y"}}),
                     ((), {"unreduced": ["y"]}), ((), {"reduced": {None}})]:
        with pytest.raises(Exception) as theirs:
            jax.P(*args, **kw)
        with pytest.raises(type(theirs.value)):
            es.P(*args, **kw)
    with pytest.raises(TypeError, match="PartitionSpec"):
        es.P({"x"})
    with pytest.raises(ValueError, match="unreduced"):
        es.P("x", unreduced={"y"})[0]
    with pytest.raises(AttributeError):
        es.P("x").reduced = frozenset()


def test_meshes_match_jax_and_the_current_mesh_is_per_thread():
    for shape, names in MESH_SHAPES.items():
        mesh, jmesh = meshes(shape, names)
        assert (repr(mesh), str(mesh), mesh.shape, mesh.axis_sizes, mesh.size, mesh.empty, mesh.axis_types) == (
            repr(jmesh), str(jmesh), jmesh.shape, jmesh.axis_sizes, jmesh.size, jmesh.empty,
            tuple(getattr(es.AxisType, t.name) for t in jmesh.axis_types))
        np.testing.assert_array_equal(mesh.device_ids, jmesh.device_ids)
        assert mesh == meshes(shape, names)[0] and hash(mesh) == hash(meshes(shape, names)[0])
    mesh, jmesh = meshes((2, 2), ("x", "y"), (es.AxisType.Explicit, es.AxisType.Manual))
    assert repr(mesh) == repr(jmesh) and mesh.manual_axes == ("y",) and mesh.explicit_axes == ("x",)
    assert mesh != meshes((2, 2), ("x", "y"))[0] and mesh != meshes((2, 2), ("y", "x"))[0]
    empty, jempty = es.Mesh(np.empty((), dtype=object), ()), jax.sharding.Mesh(np.empty((), dtype=object), ())
    assert (repr(empty), str(empty), empty.empty, empty.size) == (repr(jempty), str(jempty), True, 0)
    for args in [(FAKE[:2], ("x", "y")), (FAKE[:2], (None,)), (FAKE[:2], ("x",), (1,))]:
        jargs = (jax.devices()[:2],) + args[1:]
        with pytest.raises(Exception) as theirs:
            jax.sharding.Mesh(*jargs)
        with pytest.raises(type(theirs.value)) as ours:
            es.Mesh(*args)
        assert str(ours.value) == str(theirs.value).replace("jax.", "ember.")
    with pytest.raises(ValueError, match="each device may appear once"):
        es.Mesh([FAKE[0], FAKE[0]], "x")
    with pytest.raises(ValueError, match="distinct"):
        es.Mesh(np.array(FAKE).reshape(2, 2), ("x", "x"))

    other = meshes((4,), ("x",))[0]
    assert cs.current_mesh() is None and es.get_mesh().empty
    seen = []
    with pytest.warns(DeprecationWarning, match="`with mesh:` context manager has been deprecated"):
        with mesh:  # (JAX's older resource context: a bare PartitionSpec names it, it is not the context mesh)
            with other:
                thread = threading.Thread(target=lambda: seen.append(cs.current_mesh()))
                thread.start()
                thread.join()
                assert cs.current_mesh() is other
            assert cs.current_mesh() is mesh and es.get_mesh().empty and es.get_abstract_mesh().empty
    assert seen == [None] and cs.current_mesh() is None
    with es.set_mesh(other):
        assert es.get_mesh() is other
        es.set_mesh(None)  # a plain call sets the mesh until the enclosing block ends
        assert cs.current_mesh() is None
    assert cs.current_mesh() is None
    with pytest.raises(ValueError, match="manual axes"):
        es.set_mesh(mesh)
    with pytest.raises(ValueError, match="outside of `ember.jit`"):
        ember.jit(lambda x: (es.get_mesh(), x)[1])(1.0)


def test_named_shardings_match_jax_over_meshes_and_specs():
    checked = 0
    for (shape, names), ndim in itertools.product(MESH_SHAPES.items(), (1, 2, 3)):
        mesh, jmesh = meshes(shape, names)
        global_shape = SHAPES[ndim]
        for parts in specs(names, ndim):
            s, j = es.NamedSharding(mesh, es.P(*parts)), jax.sharding.NamedSharding(jmesh, jax.P(*parts))
            hlo, jhlo = s._to_hlo(ndim), j._to_xla_hlo_sharding(ndim)
            assert hlo == hlo_of_jax(jhlo), (shape, parts)
            assert by_id(s.devices_indices_map(global_shape)) == by_id(j.devices_indices_map(global_shape))
            assert s.shard_shape(global_shape) == j.shard_shape(global_shape)
            assert s.is_fully_replicated == j.is_fully_replicated and repr(s) == jax_repr(j)
            assert [d.id for d in s._device_assignment] == [d.id for d in j._device_assignment]
            assert {d.id for d in s.device_set} == {d.id for d in j.device_set} and s.num_devices == j.num_devices
            back = cs.sharding_from_hlo(hlo, s._device_assignment, ndim, mesh)
            assert isinstance(back, es.NamedSharding) and back._to_hlo(ndim) == hlo
            assert back.is_equivalent_to(s, ndim) and back.spec == es.P(*parse_flatten_op_sharding(jhlo, jmesh)[0])
            checked += 1
    assert checked > 300


def test_named_sharding_errors_match_jax():
    mesh, jmesh = meshes((2, 2), ("x", "y"))
    for parts in [("z",), ("x", "x"), (("x", "y"), "y")]:
        with pytest.raises(Exception) as theirs:
            jax.sharding.NamedSharding(jmesh, jax.P(*parts))
        with pytest.raises(ValueError) as ours:
            es.NamedSharding(mesh, es.P(*parts))
        assert str(ours.value) == str(theirs.value)
    s, j = es.NamedSharding(mesh, es.P("x", "y")), jax.sharding.NamedSharding(jmesh, jax.P("x", "y"))
    for shape in [(3, 4), (8, 5)]:
        with pytest.raises(jax._src.sharding.IndivisibleError) as theirs:
            j.shard_shape(shape)
        for call in (s.shard_shape, s.devices_indices_map):
            with pytest.raises(es.IndivisibleError) as ours:
                call(shape)
            assert str(theirs.value) == str(ours.value)
    with pytest.raises(ValueError, match=r"only valid for values of rank at least 2.*rank 1"):
        s.shard_shape((4,))
    with pytest.raises(ValueError, match=r"rank at least 2.*For scalars the PartitionSpec should be P\(\)"):
        s.devices_indices_map(())
    with pytest.raises(ValueError, match="rank at least 2"):
        s._to_hlo(1)
    with pytest.raises(TypeError, match="devices_indices_map: global_shape"):
        s.devices_indices_map((4.0, 2))
    with pytest.raises(TypeError, match="NamedSharding: spec must be a PartitionSpec"):
        es.NamedSharding(mesh, ("x",))
    explicit = meshes((2,), ("x",), (es.AxisType.Explicit,))[0]
    with pytest.raises(ValueError, match="UNCONSTRAINED"):
        es.NamedSharding(explicit, es.P(es.P.UNCONSTRAINED))
    with pytest.raises(ValueError, match="Unreduced axes can only refer to mesh axes that is of type `Explicit`"):
        es.NamedSharding(mesh, es.P(unreduced={"x"}))
    manual = meshes((2, 2), ("x", "y"), (es.AxisType.Auto, es.AxisType.Manual))[0]
    with pytest.raises(ValueError, match="over the Manual mesh axis y"):
        es.NamedSharding(manual, es.P("y"))._to_hlo(1)


def test_manual_axes_single_device_and_equivalence_match_jax():
    for types in [(es.AxisType.Explicit, es.AxisType.Manual), (es.AxisType.Manual, es.AxisType.Auto),
                  (es.AxisType.Manual, es.AxisType.Manual)]:
        mesh, jmesh = meshes((2, 2), ("x", "y"), types)
        for parts in [(), ("x",), (None, "y"), ("y",)]:
            if any(t == es.AxisType.Manual and n in parts for n, t in zip(mesh.axis_names, types)):
                continue
            s, j = es.NamedSharding(mesh, es.P(*parts)), jax.sharding.NamedSharding(jmesh, jax.P(*parts))
            assert s._to_hlo(2) == hlo_of_jax(j._to_xla_hlo_sharding(2)) and repr(s) == jax_repr(j)
    single, jsingle = es.SingleDeviceSharding(FAKE[1]), jax.sharding.SingleDeviceSharding(jax.devices()[1])
    assert repr(single) == jax_repr(jsingle) and single._to_hlo(2).text() == str(jsingle._to_xla_hlo_sharding(2))
    assert by_id(single.devices_indices_map((2, 3))) == by_id(jsingle.devices_indices_map((2, 3)))
    assert single.shard_shape((2, 3)) == (2, 3) and single.is_fully_replicated and single.num_devices == 1
    assert single.with_memory_kind("pinned_host").memory_kind == "pinned_host" and single.is_fully_addressable
    mesh = meshes((2, 2), ("x", "y"))[0]
    s = es.NamedSharding(mesh, es.P("x"))
    assert s == es.NamedSharding(meshes((2, 2), ("x", "y"))[0], es.P("x"))
    assert s != es.NamedSharding(mesh, es.P("x", None))
    assert s.is_equivalent_to(es.NamedSharding(mesh, es.P("x", None)), 2)
    assert not s.is_equivalent_to(es.NamedSharding(mesh, es.P("y")), 2)
    assert not s.is_equivalent_to(s.with_memory_kind("pinned_host"), 2) and s.with_memory_kind("x") != s
    assert es.NamedSharding(mesh, es.P()).is_equivalent_to(cs.HloShardingSharding(FAKE, cs.HloSharding.replicated()), 1)
    one = meshes((1,), ("x",))[0]
    assert es.NamedSharding(one, es.P("x")).is_equivalent_to(es.SingleDeviceSharding(FAKE[0]), 1)
    assert s.addressable_devices == set(FAKE) and s.addressable_devices_indices_map((4,)) == s.devices_indices_map((4,))


def test_hlo_sharding_text_and_protos_round_trip_through_xla():
    mesh = meshes((2, 2), ("x", "y"), (es.AxisType.Auto, es.AxisType.Manual))[0]
    shardings = [cs.HloSharding.replicated(), cs.HloSharding.manual(), cs.HloSharding.maximal(3),
                 cs.HloSharding.tiled([2, 1], [1, 0]), cs.HloSharding.tiled([2, 2], [0, 2, 1, 3]),
                 cs.HloSharding.tiled([1, 2, 2], [3, 2, 1, 0], replicate_on_last_tile_dim=True),
                 es.NamedSharding(mesh, es.P("x"))._to_hlo(2), es.NamedSharding(mesh, es.P())._to_hlo(1)]
    shardings.append(cs.HloSharding.tuple_of(shardings[:4]))
    for hlo in shardings:
        theirs = xc.HloSharding.from_string(hlo.text())  # XLA parses the text ember writes, to the same sharding
        assert hlo_of_jax(theirs) == hlo, hlo.text()
    assert [s.text() for s in shardings[:6]] == [
        "{replicated}", "{manual}", "{maximal device=3}", "{devices=[2,1]1,0}", "{devices=[2,2]0,2,1,3}",
        "{devices=[1,2,2]2,3,0,1 last_tile_dim_replicate}"]  # replica groups sorted, as XLA
    assert shardings[6].text() == "{devices=[2,1,2]0,1,2,3 last_tile_dims={manual}}"
    assert shardings[7].text() == "{devices=[1,2,2]0,2,1,3 last_tile_dims={manual, replicated}}"
    # XLA's normalizations: size-1 and single-kind subgroups, merged subgroups, one device
    assert cs.HloSharding.tiled([1, 1, 4], range(4), replicate_on_last_tile_dim=True).is_replicated()
    assert cs.HloSharding.tiled([2, 1, 1], [0, 1], replicate_on_last_tile_dim=True) == cs.HloSharding.tiled([2, 1],
                                                                                                            [0, 1])
    merged = cs.HloSharding.tiled([1, 2, 2, 2], range(8), subgroups=["replicated", "manual", "replicated"])
    assert merged.text() == str(xc.HloSharding.subgroup_with_device_ordering(
        np.arange(8).reshape(1, 2, 2, 2), subgroup_types=[xc.OpSharding.Type.REPLICATED, xc.OpSharding.Type.MANUAL,
                                                          xc.OpSharding.Type.REPLICATED]))
    assert cs.HloSharding.tiled([1, 1], [2]).is_replicated()
    # unpacked repeated fields, iota device lists, and bad input
    unpacked = bytes([0x08, 3, 0x18, 2, 0x18, 2, 0x20, 0, 0x20, 2, 0x20, 1, 0x20, 3])
    assert xla_proto.op_sharding(unpacked) == cs.HloSharding.tiled([2, 2], [0, 2, 1, 3])
    assert xla_proto.op_sharding(bytes.fromhex("08031a0202014a0102520100")) == cs.HloSharding.tiled([2, 1], [0, 1])
    with pytest.raises(ValueError, match="OpSharding type 6"):
        xla_proto.op_sharding(xc.HloSharding.unreduced().to_proto().SerializeToString())
    with pytest.raises(ValueError, match="ends inside a varint"):
        xla_proto.op_sharding(b"\x08\x83")
    with pytest.raises(ValueError, match="do not fit 3 devices"):
        cs.HloSharding.tiled([2, 2], [0, 1, 2])


def test_hlo_module_shardings_and_shardings_read_back_from_xla():
    def field(number, payload):
        return bytes([number << 3 | 2, len(payload)]) + payload

    # spmd_output_sharding (12) and spmd_parameters_shardings (14) as this plugin returned them for an f32[8,4]
    # argument split in two, returning (x*x, sum over axis 0)
    module = field(2, b"main") + field(12, bytes.fromhex("08022a0c08031a0202014a01025201002a00")) + field(
        14, bytes.fromhex("08031a0202014a0102520100"))
    params, outputs = xla_proto.hlo_module_shardings(field(1, module) + field(2, b""))
    split = cs.HloSharding.tiled([2, 1], [0, 1])
    assert params == [split] and outputs == [split, cs.HloSharding.replicated()]
    assert xla_proto.hlo_module_shardings(field(1, field(2, b"main"))) == ([], [])
    with pytest.raises(ValueError, match="hlo_module_shardings"):
        xla_proto.hlo_module_shardings(field(2, b""))

    mesh, jmesh = meshes((2,), ("x",))
    assert cs.sharding_from_hlo(split, FAKE[:2], 2, mesh) == es.NamedSharding(mesh, es.P("x"))
    # partition ids name the devices given: tile 0 on partition 1, which is device 0
    assert cs.sharding_from_hlo(cs.HloSharding.tiled([2, 1], [1, 0]), FAKE[1::-1], 2, mesh) == es.NamedSharding(
        mesh, es.P("x"))
    assert cs.sharding_from_hlo(cs.HloSharding.replicated(), FAKE[:1], 2) == es.SingleDeviceSharding(FAKE[0])
    swapped = cs.HloSharding.tiled([2, 1], [1, 0])
    for other in [cs.sharding_from_hlo(swapped, FAKE[:2], 2, mesh), cs.sharding_from_hlo(swapped, FAKE[:2], 2)]:
        jother = GSPMDSharding(jax.devices()[:2], xc.HloSharding.from_string(swapped.text()))
        assert isinstance(other, cs.HloShardingSharding) and other._to_hlo(2) == swapped
        assert by_id(other.devices_indices_map((4, 2))) == by_id(jother.devices_indices_map((4, 2)))
        assert other.shard_shape((4, 2)) == jother.shard_shape((4, 2)) == (2, 2) and not other.is_fully_replicated
        assert other == cs.HloShardingSharding(FAKE[:2], swapped) and "device_ids=[0, 1]" in repr(other)
    assert isinstance(cs.sharding_from_hlo(cs.HloSharding.maximal(1), FAKE[:2], 2, mesh), cs.HloShardingSharding)
    with pytest.raises(ValueError, match="rank 2"):
        cs.HloShardingSharding(FAKE[:2], swapped).shard_shape((4,))
    with pytest.raises(ValueError, match="tuple sharding"):
        cs.sharding_from_hlo(cs.HloSharding.tuple_of([split]), FAKE[:2], 2, mesh)


def test_visualize_sharding_and_make_mesh():
    mesh = meshes((2, 2), ("x", "y"))[0]
    picture = es.visualize_sharding((8, 4), es.NamedSharding(mesh, es.P("x", "y")))
    rows = [line for line in picture.splitlines() if "CPU" in line]
    assert [r.split() for r in rows] == [["│", "CPU", "0", "│", "CPU", "1", "│"],
                                         ["│", "CPU", "2", "│", "CPU", "3", "│"]]
    assert picture.startswith("┌") and picture.endswith("┘") and len({len(line) for line in picture.splitlines()}) == 1
    picture = es.visualize_sharding((8,), es.NamedSharding(mesh, es.P("y")))
    rows = [line for line in picture.splitlines() if "CPU" in line]
    assert rows == ["│CPU 0,2│CPU 1,3│"]  # (JAX's: its minimum width, 9, less the borders; tests/test_shard_map_eager)
    assert "CPU 0,1,2,3" in es.visualize_sharding((4, 4), es.NamedSharding(mesh, es.P()))
    with pytest.raises(ValueError, match="visualize_sharding only works for shapes with 1 and 2 dimensions"):
        es.visualize_sharding((2, 2, 2), es.NamedSharding(mesh, es.P()))

    made, jmade = es.make_mesh((2,), ("x",)), jax.make_mesh((2,), ("x",))
    assert repr(made) == repr(jmade) and list(made.devices.flat) == ember.devices()[:2]
    made = es.make_mesh((1, 1), ("x", "y"), devices=ember.devices()[::-1], axis_types=(es.AxisType.Auto,) * 2)
    assert made.devices[0, 0] is ember.devices()[1] and made.axis_types == (es.AxisType.Auto,) * 2
    with pytest.raises(ValueError, match=r"Number of devices 2 must be >= the product of mesh_shape \(4,\)"):
        es.make_mesh((4,), ("x",))
    with pytest.raises(ValueError, match="should be a sequence of ints"):
        es.make_mesh(("a",), ("x",))
