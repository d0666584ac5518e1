"""jax.lax's small names side by side with JAX 0.10.2: dce_sink, stage, shape_as_value, psend/precv (GPU-only in JAX:
the same kind of error on the CPU), platform_dependent's errors and lowering, and the composite op."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax


# ---------------------------------------------------------------------------------------------------------------
# dce_sink
def test_dce_sink_keeps_its_operand_and_returns_none_as_jax():
    x = np.arange(3.0, dtype=np.float32)
    assert lax.dce_sink(enp.asarray(x)) is None and jax.lax.dce_sink(x) is None
    ir = ember.make_jaxpr(lambda x: (lax.dce_sink({"a": x * 2, "b": x}), x)[1])(x)
    assert [e.prim.name for e in ir.eqns] == ["mul", "dce_sink", "dce_sink"]  # (one per leaf, as JAX's tree_map)
    jaxpr = jax.make_jaxpr(lambda x: (jax.lax.dce_sink({"a": x * 2, "b": x}), x)[1])(x)
    assert [e.primitive.name for e in jaxpr.eqns] == ["mul", "dce_sink", "dce_sink"]
    f = ember.jit(lambda x: (lax.dce_sink(x * 2, prevent_mlir_dce=True), x + 1)[1])
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    assert "stablehlo.custom_call" in f.lower(x).as_text()  # (the module keeps x * 2 too)
    assert "custom_call" not in ember.jit(lambda x: (lax.dce_sink(x * 2), x)[1]).lower(x).as_text()
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda x: (lax.dce_sink(x * 2), x + 1)[1])(x)), x + 1)
