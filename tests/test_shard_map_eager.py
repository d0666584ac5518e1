"""shard_map outside jit, as JAX 0.10.2 runs it: the body sees each device's values (print shows every device's block,
"On cpu:0 at mesh coordinates (i, j,) = (0, 1):"; Python branches on a value the same on every device; bool of a
varying one is JAX's TracerBoolConversionError), with collectives (psum, axis_index, ppermute, all_gather) in it;
psum over axes some of which the value does not vary over is JAX's ValueError, as is a shard_map whose mesh is not
the context mesh; visualize_array_sharding draws JAX's boxes, and an array's repr is JAX's (no sharding). One
program, run as JAX code on JAX and on ember (ember.as_jax), each in a process of eight CPU devices: the same
output, line for line."""

import pytest

from recorded import jax_result
from reliability.subproc import run_python

PROGRAM = r"""
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, NamedSharding
mesh = jax.make_mesh((4, 2), ("i", "j"))
jax.set_mesh(mesh)
x = jax.device_put(jnp.arange(32).reshape(8, 4), P("i", "j"))
@jax.shard_map(in_specs=P("i", "j"), out_specs=P("i", None))
def rows(block):
    print("block", block)
    total = jax.lax.psum(block, "j")
    print("psum over j", total)
    print("index", jax.lax.axis_index("i") * 10 + jax.lax.axis_index("j"))
    if jax.lax.psum(total.sum(), "i") > 0:
        print("the grand total is positive")
    try:
        bool(block.sum() > 3)
    except Exception as err:
        print("bool of a varying value:", type(err).__name__)
    return total
print(rows(x))
line = jax.make_mesh((8,), ("k",))
y = jax.device_put(jnp.arange(16.0), NamedSharding(line, P("k")))
def ring(b):
    print(jax.lax.ppermute(b, "k", [(n, (n + 1) % 8) for n in range(8)]))
    print(jax.lax.all_gather(b, "k", tiled=True))
    return jnp.sin(b) * 2
try:
    jax.shard_map(ring, mesh=line, in_specs=P("k"), out_specs=P("k"))(y)
except ValueError as err:
    print(str(err).replace("jax.", "").replace("ember.", ""))
with jax.set_mesh(line):
    print(jax.shard_map(ring, mesh=line, in_specs=P("k"), out_specs=P("k"))(y))
for shape, spec in [((8, 4), P("i", "j")), ((8, 4), P("i")), ((8, 4), P(None, "j")), ((16, 4), P(("i", "j"))),
                    ((8, 16), P(None, "j")), ((8, 16), P("j", "i")), ((8,), P("i")), ((32,), P())]:
    jax.debug.visualize_array_sharding(jax.device_put(jnp.zeros(shape), P(*spec)))
print(repr(jax.device_put(jnp.arange(4.0), NamedSharding(line, P()))))
"""


def _output(code):
    env = {"EMBER_NUM_CPU_DEVICES": "8", "JAX_NUM_CPU_DEVICES": "8",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    done = run_python(code, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _jax_output():
    pytest.importorskip("jax")
    return _output(PROGRAM)


@pytest.fixture(scope="module")
def outputs():
    # (JAX's output is recorded: tests/recorded.py; EMBER_JAX_RECORDS=off runs it live)
    return jax_result(_jax_output), _output("import ember.as_jax\nember.as_jax.install()\n" + PROGRAM)


def test_jax_and_ember_print_the_same(outputs):
    theirs, ours = outputs
    assert "On cpu:7 at mesh coordinates (k,) = (7,):" in theirs and "CPU 0,2,4,6" in theirs
    assert ours.splitlines() == theirs.splitlines()
