"""ember.experimental.custom_partitioning against jax.experimental.custom_partitioning: the function's values
eagerly and under jit over a 2-device mesh (a sharded and a replicated operand), static arguments and keywords,
the rule strings parsed into the same SdyShardingRules (and the same refusals), def_partition's and the call's
errors, and the derivative and batching refusals. JAX calls the rules while XLA partitions; ember cannot be asked
(the plugin has no Custom_Partitioner extension) and runs the function's own computation, so the rules are checked
to be kept, not called."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax._src.custom_partitioning_sharding_rule import str_to_sdy_sharding_rule as jax_parse
from jax.experimental import custom_partitioning as jax_cp

import ember
import ember.numpy as enp
from ember.experimental import custom_partitioning as cp


def _defined(module, np_, log):
    @module.custom_partitioning
    def f(x, y):
        return np_.sin(x) * 2 + y

    def partition(mesh, arg_shapes, result_shape):
        log.append(([str(a.sharding.spec) for a in arg_shapes], str(result_shape.sharding.spec)))
        return mesh, lambda x, y: np_.sin(x) * 2 + y, arg_shapes[0].sharding, (arg_shapes[0].sharding,) * 2
    f.def_partition(partition=partition, sharding_rule="i j, i j -> i j")
    return f


def _mesh(lib):
    return lib.sharding.Mesh(np.array(lib.devices()[:2]), ("x",))


def test_values_as_jax_eagerly_and_under_jit():
    x, y = np.arange(8, dtype=np.float32).reshape(4, 2), np.ones((4, 2), np.float32)
    outs = {}
    for name, lib, np_ in (("ember", ember, enp), ("jax", jax, jnp)):
        log = []
        f = _defined(lib.experimental.custom_partitioning if name == "ember" else jax_cp, np_, log)
        mesh = _mesh(lib)
        xs = lib.device_put(x, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))
        ys = lib.device_put(y, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec()))
        outs[name] = [f(x, y), f(xs, ys), lib.jit(f)(xs, ys), lib.jit(lambda a, b: f(a * 2, b) + 1)(xs, ys)]
        outs[name + " log"] = log
    for got, want in zip(outs["ember"], outs["jax"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert str(outs["ember"][2].sharding.spec) == str(outs["jax"][2].sharding.spec)
    assert outs["jax log"] and not outs["ember log"]  # (JAX's partitioner called the rule; ember runs the function)


def test_static_arguments_keywords_and_the_ir():
    seen = []

    @cp.custom_partitioning
    def scaled(x, k, *, bias=None):
        seen.append(k)
        return x * k
    g = cp.custom_partitioning(lambda x, k: x * k, static_argnums=(1,))
    g.def_partition(partition=lambda k, mesh, args, result: None, sharding_rule="i -> i")
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda x: g(x, 3.0))(np.ones(2, np.float32))), [3, 3])
    ir = ember.make_jaxpr(lambda x: g(x, k=3.0))(np.ones(2, np.float32))
    text = str(ir)
    assert "custom_partitioning[" in text and "static_args=(3.0,)" in text and "SdyShardingRule((('i',),)" in text
    jaxpr = str(jax.make_jaxpr(lambda x: _jax_static()(x, 3.0))(np.ones(2, np.float32)))
    assert "custom_partitioning[" in jaxpr and "static_args=(3.0,)" in jaxpr
    with pytest.raises(TypeError, match="keyword arguments could not be resolved to positions"):
        scaled(np.ones(2), 2.0, bias=1.0)
    with pytest.raises(ember.errors.UnexpectedTracerError, match="static argument"):
        ember.jit(lambda x, k: g(x, k))(np.ones(2, np.float32), 2.0)


def _jax_static():
    g = jax_cp.custom_partitioning(lambda x, k: x * k, static_argnums=(1,))
    g.def_partition(partition=lambda k, mesh, args, result: None, sharding_rule="i -> i")
    return g


RULES = [("i j, j k -> i k", {}), ("... i, ... i -> ... i", {}), ("(a b) c -> a c", {"b": 2}), ("i, j -> ", {}),
         ("...1 i, ...2 j -> ...1 i", {}), ("i j -> i", {"reduction_factors": ("j",)}), (" -> i", {}),
         ("i, -> i", {}), ("i j -> i", {"need_replication_factors": ("j",), "permutation_factors": ("i",)}),
         # refused by both
         ("(a b) -> c", {}), ("i j", {}), ("i -> j", {"j": 3}), ("1i -> i", {}), ("i. -> i", {}),
         ("((a b) c) -> a", {"b": 1, "c": 1}), ("(a) -> a", {}),
         ("i -> i", {"reduction_factors": ("i",), "permutation_factors": ("i",)}), ("i -> i", {"k": 2}),
         ("i -> i", {"reduction_factors": ("i", "i")})]


@pytest.mark.parametrize("rule,keywords", RULES)
def test_rule_strings_as_jax(rule, keywords):
    def parse(parser):
        try:
            return str(parser(rule, **keywords))
        except ValueError:
            return "ValueError"
    assert parse(cp.str_to_sdy_sharding_rule) == parse(jax_parse)


def test_def_partition_and_call_errors_as_jax():
    for module, np_ in ((cp, enp), (jax_cp, jnp)):
        f = module.custom_partitioning(lambda x: np_.sin(x))
        with pytest.raises(ValueError, match="Unknown keyword arguments"):
            f.def_partition(partition=None, sharding_rule=None, i=2)
        f.def_partition(partition=lambda *a: None, infer_sharding_from_operands=lambda *a: None)
        with pytest.raises(NotImplementedError, match="Shardy is used, but sharding propagation callbacks"):
            f(np.ones(3, np.float32))
        assert f.def_partition(partition=len, sharding_rule=module.SdyShardingRule(
            (module.ArrayMapping("i"),), (module.ArrayMapping("i"),))) is len
        with pytest.raises(ValueError, match="at least two factors"):
            module.CompoundFactor("a")
        with pytest.raises(ValueError, match="Ellipsis can only be used at the beginning"):
            module.ArrayMapping("a", module.BATCHING)
    assert cp.BATCHING == jax_cp.BATCHING


def test_no_derivatives_and_no_batching_as_jax():
    f = cp.custom_partitioning(lambda x: enp.sin(x))
    f.def_partition(partition=None, sharding_rule="i -> i")
    jf = jax_cp.custom_partitioning(lambda x: jnp.sin(x))
    jf.def_partition(partition=None, sharding_rule="i -> i")
    x = np.ones(3, np.float32)
    for transform in (lambda g: ember.grad(lambda v: g(v).sum()), lambda g: ember.jacfwd(g)):
        with pytest.raises(NotImplementedError, match="Differentiation rule for 'custom_partitioning' not"):
            transform(f)(x)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'custom_partitioning' not"):
        jax.grad(lambda v: jf(v).sum())(x)
    with pytest.raises(NotImplementedError, match="Batching rule for 'custom_partitioning' not implemented"):
        ember.vmap(f)(np.ones((2, 3), np.float32))
    with pytest.raises(NotImplementedError, match="Batching rule for 'custom_partitioning' not implemented"):
        jax.vmap(jf)(np.ones((2, 3), np.float32))

    @ember.custom_vjp  # (JAX's advice: its own derivative around it)
    def g(x):
        return f(x)
    g.defvjp(lambda x: (f(x), x), lambda x, ct: (ct * enp.cos(x),))
    np.testing.assert_allclose(ember.grad(lambda v: g(v).sum())(x), np.cos(x), rtol=1e-6)
