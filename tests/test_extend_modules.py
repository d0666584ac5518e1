"""jax.extend's submodules on ember, against JAX where ember can do what JAX does: backend (clients, default device,
compile options, clear_backends), random (the Threefry hash, seeding with an implementation), sharding (XLA's
sharding protobuf written and read, by both), lowering's rule context, core.primitives; and the clear errors of the
parts that name jaxlib's MLIR tools, XLA compiler passes and Pallas."""
import numpy as np
import pytest

import jax
import jax.extend
import jax.extend.random
import jax.extend.sharding

import ember
import ember.extend
from ember.extend import backend, random as erandom, sharding as esharding
from reliability.subproc import check_python
from ember._core.sharding import HloSharding


def test_names_match_jax():
    import importlib
    for name in ("backend", "lowering", "mlir", "random", "sharding", "xla", "pallas"):
        ours, theirs = importlib.import_module(f"ember.extend.{name}"), importlib.import_module(f"jax.extend.{name}")
        missing = [n for n in dir(theirs) if not n.startswith("_") and not hasattr(ours, n)]
        assert missing == ([] if name != "sharding" else ["xla_client"]), name


def test_backend_as_jax():
    assert set(backend.backends()) == set(jax.extend.backend.backends()) == {"cpu"}
    client = backend.get_backend()
    assert client.platform_name == jax.extend.backend.get_backend().platform == "cpu"
    assert backend.get_backend(client) is client and backend.get_backend("cpu") is client
    assert str(backend.get_default_device()) == str(jax.extend.backend.get_default_device())
    assert backend.backend_xla_version() is None and jax.extend.backend.backend_xla_version() is None
    options = backend.get_compile_options(1, 1)
    assert options.SerializeAsString() == b"\x1a\x04\x20\x01\x28\x01"  # (num_replicas 1, num_partitions 1)
    assert options.num_replicas == jax.extend.backend.get_compile_options(1, 1).executable_build_options.num_replicas
    with pytest.raises(NotImplementedError, match="EMBER_PJRT_PLUGIN"):
        backend.register_backend_factory("mine", lambda: None)
    with pytest.raises(NotImplementedError, match="IFRT proxy"):
        backend.ifrt_proxy.get_client("grpc://x")


_CLEAR_BACKENDS = """
import numpy as np
import pytest
import ember
import ember.numpy as enp
from ember.extend import backend


class Cache:
    cleared = 0

    def cache_clear(self):
        Cache.cleared += 1


backend.register_backend_cache(Cache(), "test cache")
old_client = backend.get_backend()
x = enp.arange(3.0)
backend.clear_backends()
assert Cache.cleared == 1
new_client = backend.get_backend()
assert new_client is not old_client
y = enp.ones(3)
np.testing.assert_array_equal(np.asarray(x + y), [1.0, 2.0, 3.0])
np.testing.assert_array_equal(np.asarray(ember.jit(lambda a, b: a * b)(x, y)), [0.0, 1.0, 2.0])
with pytest.raises(TypeError, match="cache_clear"):
    backend.register_backend_cache(object(), "bad")
print("ok")
"""


def test_clear_backends_starts_new_clients_and_old_arrays_keep_working():
    # (in a process of its own: new clients make the devices other test modules hold at import stale)
    assert check_python(_CLEAR_BACKENDS).strip().splitlines()[-1] == "ok"


def test_random_as_jax():
    key = (np.uint32(1), np.uint32(2))
    for count in (np.arange(5, dtype=np.uint32), np.arange(6, dtype=np.uint32).reshape(2, 3),
                  np.zeros((0,), np.uint32), np.uint32(7)):
        want = np.asarray(jax.extend.random.threefry_2x32(key, count))
        np.testing.assert_array_equal(np.asarray(erandom.threefry_2x32(key, count)), want)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda c: erandom.threefry_2x32(key, c))(np.arange(
        5, dtype=np.uint32))), np.asarray(jax.extend.random.threefry_2x32(key, np.arange(5, dtype=np.uint32))))
    for seed in (42, np.int32(7)):
        ours = ember.random.key_data(erandom.seed_with_impl(erandom.threefry_prng_impl, seed))
        theirs = jax.random.key_data(jax.extend.random.seed_with_impl(jax.extend.random.threefry_prng_impl, seed))
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    seeds = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(
        np.asarray(ember.random.key_data(erandom.random_seed(seeds, erandom.threefry_prng_impl))),
        np.asarray(jax.random.key_data(jax.extend.random.random_seed(seeds, jax.extend.random.threefry_prng_impl))))
    impl = erandom.threefry_prng_impl
    assert (impl.key_shape, impl.name, impl.tag) == (jax.extend.random.threefry_prng_impl.key_shape, "threefry2x32",
                                                     "fry")
    assert erandom.threefry2x32_p.name == jax.extend.random.threefry2x32_p.name
    for ours, theirs in ((erandom.rbg_prng_impl, jax.extend.random.rbg_prng_impl),
                         (erandom.unsafe_rbg_prng_impl, jax.extend.random.unsafe_rbg_prng_impl)):
        np.testing.assert_array_equal(np.asarray(ember.random.key_data(erandom.seed_with_impl(ours, 5))),
                                      np.asarray(jax.random.key_data(jax.extend.random.seed_with_impl(theirs, 5))))
    with pytest.raises(TypeError, match="uint32"):
        erandom.threefry_2x32(key, np.arange(3, dtype=np.int32))


SHARDINGS = [HloSharding.replicated(), HloSharding.manual(), HloSharding.maximal(3),
             HloSharding.tiled((2, 2), [0, 1, 2, 3]), HloSharding.tiled((2, 1, 2), [3, 2, 1, 0],
                                                                        replicate_on_last_tile_dim=True),
             HloSharding.tiled((2, 2, 2), range(8), subgroups=["manual"]),
             HloSharding.tuple_of([HloSharding.replicated(), HloSharding.maximal(1)])]


@pytest.mark.parametrize("sharding", SHARDINGS, ids=lambda s: s.text())
def test_sharding_protos_as_jax(sharding):
    proto = esharding.get_serialized_proto_from_hlo_sharding(sharding)
    assert esharding.get_hlo_sharding_from_serialized_proto(proto) == sharding
    theirs = jax.extend.sharding.get_hlo_sharding_from_serialized_proto(proto)
    assert str(theirs) == sharding.text()
    back = jax.extend.sharding.get_serialized_proto_from_hlo_sharding(theirs)
    assert esharding.get_op_sharding_from_serialized_proto(back) == sharding


def test_gspmd_sharding_and_errors():
    devices = ember.devices()
    sharding = esharding.GSPMDSharding(devices, HloSharding.replicated())
    assert sharding.is_fully_replicated and sharding.device_set == set(devices)
    assert esharding.get_serialized_proto_from_hlo_sharding(sharding) == b""
    with pytest.raises(TypeError, match="expected an HloSharding"):
        esharding.get_serialized_proto_from_hlo_sharding("{replicated}")
    with pytest.raises(ValueError):
        esharding.get_hlo_sharding_from_serialized_proto(b"\x08")


def test_lowering_context_and_core_primitives():
    from ember.extend.core import Primitive
    from ember.interpreters import mlir

    seen = []
    p = Primitive("passthrough")
    p.def_abstract_eval(lambda x: x)

    def rule(ctx, x):
        seen.append(isinstance(ctx, ember.extend.lowering.LoweringRuleContext))
        return [x]
    mlir.register_lowering(p, rule)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda v: p.bind(v))(np.ones(2, np.float32))), [1.0, 1.0])
    assert seen == [True]
    import ember.extend.core.primitives as prims
    assert prims.add_p is ember.lax.add_p and prims.ffi_call_p.name == "ffi_call"
    assert {"add_p", "sin_p", "scan_p"} <= set(dir(prims))
    assert issubclass(ember.extend.core.InconclusiveDimensionOperation, Exception)


def test_what_ember_does_not_have_raises():
    from ember.extend import lowering, mlir, pallas, xla
    for call in (lambda: mlir.serialize_portable_artifact("module {}", "1.0.0"),
                 lambda: mlir.deserialize_portable_artifact(b""), lambda: mlir.hlo_to_stablehlo(b""),
                 lambda: mlir.refine_polymorphic_shapes(b""),
                 lambda: mlir.lower_with_sharding_in_types(None, None, None),
                 lambda: lowering.JaxIrContext(), lambda: lowering.upstream_dialects(),
                 lambda: xla.register_hlo_module_transformation(lambda m: m, name="p"),
                 lambda: pallas.register_lowering_rule(None, None, "cpu"), lambda: pallas.GridMapping()):
        with pytest.raises(NotImplementedError):
            call()
    assert xla.clear_hlo_module_transformation("p") is False
    assert [s.name for s in xla.PipelineStage] == [s.name for s in jax.extend.xla.PipelineStage]
