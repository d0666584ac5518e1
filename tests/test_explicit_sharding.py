"""JAX's explicit sharding mode (sharding in types), against JAX 0.10.2: on a mesh whose axes are Explicit (make_mesh's
default, as JAX's), an array's type says how it is split (`typeof(x)` prints f32[8@X,4@Y]), each primitive's sharding
rule types its results (ember/_prims/explicit.py) or raises JAX's ShardingTypeError, `out_sharding=` decides where a
rule cannot, and the values are numpy's. The types and errors below were recorded from JAX 0.10.2 on the same 2x2
mesh of CPU devices (its `float32` printed as ember's `f32`); the programs run in a process of four devices."""
import pathlib

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P
from ember.sharding import ShardingTypeError
from reliability.subproc import check_python, program_result

# name -> JAX 0.10.2's type of the result, or "!" + the start of its ShardingTypeError message
JAX_TYPES = {
    "typeof a": "f32[8@X,4@Y]",
    "a + c": "f32[8@X,4@Y]",
    "a + 1": "f32[8@X,4@Y]",
    "sin": "f32[8@X,4@Y]",
    "a.T": "f32[4@Y,8@X]",
    "sum 0": "f32[4@Y]",
    "sum 1": "f32[8@X]",
    "sum": "f32[]",
    "mean 1": "f32[8@X]",
    "argmax 0": "i32[4@Y]",
    "a @ a.T": "!Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please "
               "specify the output sharding via the `out_sharding` parameter. Got lhs_contracting_spec=('Y',) and "
               "rhs_contracting_spec=('Y',)",
    "c @ c.T": "!dot_general operation with inputs: f32[8@X,4], f32[4,8@X] produces an illegally sharded result: "
               "f32[8@X,8@X]",
    "dot out_sharding": "f32[8@X,8]",
    "x @ w": "f32[8@X,8@Y]",
    "einsum": "!dot_general operation with inputs: f32[8@X,4@Y], f32[8@X,4] produces an illegally sharded result: "
              "f32[8@X,8@X]",
    "reshape split": "f32[8@X,2@Y,2]",
    "reshape merge": "f32[32@(X,Y)]",
    "reshape split first": "f32[4@X,2,4]",
    "reshape other": "!This reshape is not supported. Please specify the sharding of the output via the "
                     "`out_sharding` argument of",
    "reshape out_sharding": "f32[4@X,8]",
    "a[None]": "f32[1,8@X,4@Y]",
    "expand_dims": "f32[8@X,1,4@Y]",
    "broadcast_to": "f32[3,8@X,4@Y]",
    "a[0]": "!Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing",
    "at get": "f32[4@Y]",
    "concatenate 0": "f32[16@X,4@Y]",
    "concatenate mixed": "!All operands should have the same sharding.",
    "a + row": "f32[8@X,4@Y]",
    "a + row split": "!add got incompatible shardings for broadcasting: ('X', 'Y'), (None, 'X').",
    "a + a'": "!add got incompatible shardings for broadcasting: ('X', 'Y'), ('Y', 'X').",
    "where": "f32[8@X,4@Y]",
    "astype": "i32[8@X,4@Y]",
    "pad": "f32[10@X,4@Y]",
    "cumsum 0": "!Input should be unsharded over the axis being reduced. Got input type=float32[8@X,4@Y] and axis=0",
    "sort 0": "!Arguments to sort must be unsharded over the sorting dimension.",
    "zeros out_sharding": "f32[8@X,4]",
    "normal out_sharding": "f32[8@X,4]",
    "reshard": "f32[8,4@X]",
    "jit": "f32[8@X,4@Y]",
    "grad": "f32[8@X,4@Y]",
    "grad of x @ w, w": "f32[4,8@Y]",
    "grad of dot out_sharding": "f32[8@X,4@Y]",
    "vmap": "f32[8@X,4@Y]",
    "jvp": "f32[8@X,4@Y]",
    "cond": "f32[8@X,4@Y]",
    "auto_axes": "f32[8@X,8]",
    "jit auto_axes": "f32[8@X,8]",
    "matmul batched": "f32[2,8,3]",
    "scan carry": "!scan body function carry input and carry output must have equal types, but they differ:\n\nThe "
                  "input carry c has type float32[4] but the corresponding output carry component has type "
                  "float32[4@Y].\n\nRevise the function so that all output types match the corresponding input types.",
    "scan ys": "f32[8,4@Y]",
    "fori_loop": "f32[8@X,4@Y]",
    "map": "f32[8,4@Y]",
    "cummax 1": "f32[8@X,4]",
    "eigh": "f32[4@X,3,3]",
    "fft": "c64[4@X,8]",
    "fft split": "c64[4@X,8]",
    "conv": "f32[4@X,5,8,8]",
    "maxpool": "f32[4@X,3,4,4]",
    "grad conv": "f32[4@X,3,8,8]",
    "scatter": "f32[4@X,8]",
    "pure_callback": "f32[4,8]",
    "igamma": "f32[4@X,8]",
    "vmap body": "f32[4@Y]",
    "vmap over columns": "f32[4@Y]",
    "einsum out_sharding": "f32[8@X,8]",
    "randint out_sharding": "i32[8@X,4]",
    "arange out_sharding": "i32[8@X]",
    "broadcasted_iota out_sharding": "i32[8@X,4]",
    "shard_map, in_specs from types": "f32[8@X,1]",
    "shard_map eagerly": "f32[8@X,4@Y]",
    "shard_map, in_specs not the types": "!in_specs passed to shard_map: P('X', None) does not match the specs of the "
                                         "input: P('X', 'Y') for arg: float32[8@X,4@Y].",
}

PROGRAM = """
import json
import numpy as np, ember, ember.numpy as jnp
from ember import P
from ember.sharding import reshard, auto_axes
A = np.arange(32.0, dtype=np.float32).reshape(8, 4)
W = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
mesh = ember.make_mesh((2, 2), ("X", "Y"))
types, values = {}, {}
def record(name, f, value=None):
    try:
        out = f()
        types[name] = (out if isinstance(out, ember.ShapedArray) else ember.typeof(out)).str_short()
        if value is not None:
            values[name] = float(np.abs(np.asarray(out).astype(np.complex128) - value).max())
    except (ember.sharding.ShardingTypeError, TypeError, ValueError) as err:
        types[name] = "!" + str(err)
with ember.sharding.set_mesh(mesh):
    a = ember.device_put(A, P("X", "Y"))
    c = ember.device_put(A, P("X", None))
    x = ember.device_put(A / 10, P("X", None))
    w = ember.device_put(W, P(None, "Y"))
    record("typeof a", lambda: a, A)
    record("a + c", lambda: a + c, 2 * A)
    record("a + 1", lambda: a + 1, A + 1)
    record("sin", lambda: jnp.sin(a), np.sin(A))
    record("a.T", lambda: a.T, A.T)
    record("sum 0", lambda: a.sum(0), A.sum(0))
    record("sum 1", lambda: a.sum(1), A.sum(1))
    record("sum", lambda: a.sum(), A.sum())
    record("mean 1", lambda: a.mean(1), A.mean(1))
    record("argmax 0", lambda: a.argmax(0), A.argmax(0))
    record("a @ a.T", lambda: a @ a.T)
    record("c @ c.T", lambda: c @ c.T)
    record("dot out_sharding", lambda: jnp.dot(a, a.T, out_sharding=P("X", None)), A @ A.T)
    record("x @ w", lambda: x @ w, (A / 10) @ W)
    record("einsum", lambda: jnp.einsum("ij,kj->ik", a, c))
    record("reshape split", lambda: a.reshape(8, 2, 2), A.reshape(8, 2, 2))
    record("reshape merge", lambda: a.reshape(32), A.reshape(32))
    record("reshape split first", lambda: c.reshape(4, 2, 4), A.reshape(4, 2, 4))
    record("reshape other", lambda: a.reshape(4, 8))
    record("reshape out_sharding", lambda: a.reshape(4, 8, out_sharding=P("X", None)), A.reshape(4, 8))
    record("a[None]", lambda: a[None], A[None])
    record("expand_dims", lambda: jnp.expand_dims(a, 1), A[:, None])
    record("broadcast_to", lambda: jnp.broadcast_to(a, (3, 8, 4)), np.broadcast_to(A, (3, 8, 4)))
    record("a[0]", lambda: a[0])
    record("at get", lambda: a.at[0].get(out_sharding=P("Y")), A[0])
    record("concatenate 0", lambda: jnp.concatenate([a, a], 0), np.concatenate([A, A]))
    record("concatenate mixed", lambda: jnp.concatenate([a, c], 1))
    record("a + row", lambda: a + jnp.ones(4), A + 1)
    record("a + row split", lambda: a + ember.device_put(np.ones(4, np.float32), P("X")))
    record("a + a'", lambda: a + ember.device_put(A, P("Y", "X")))
    record("where", lambda: jnp.where(a > 3, a, 0.0), np.where(A > 3, A, 0))
    record("astype", lambda: a.astype(jnp.int32), A.astype(np.int32))
    record("pad", lambda: jnp.pad(a, ((1, 1), (0, 0))), np.pad(A, ((1, 1), (0, 0))))
    record("cumsum 0", lambda: jnp.cumsum(a, 0))
    record("sort 0", lambda: jnp.sort(a, 0))
    record("zeros out_sharding", lambda: jnp.zeros((8, 4), out_sharding=P("X")), np.zeros((8, 4)))
    record("normal out_sharding", lambda: ember.random.normal(ember.random.key(0), (8, 4), out_sharding=P("X")),
           np.asarray(ember.random.normal(ember.random.key(0), (8, 4))))
    record("reshard", lambda: reshard(a, P(None, "X")), A)
    record("jit", lambda: ember.jit(lambda v: v * 2)(a), 2 * A)
    record("grad", lambda: ember.grad(lambda v: (v ** 2).sum())(a), 2 * A)
    loss = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    record("grad of x @ w, w", lambda: ember.jit(ember.grad(loss))(w, x),
           np.asarray(ember.grad(loss)(W, A / 10)))
    gram = lambda v: jnp.dot(v, v.T, out_sharding=P("X", None)).sum()
    record("grad of dot out_sharding", lambda: ember.grad(gram)(a),
           np.asarray(ember.grad(lambda v: jnp.dot(v, v.T).sum())(A)))
    record("vmap", lambda: ember.vmap(lambda r: r * 2)(a), 2 * A)
    record("jvp", lambda: ember.jvp(jnp.sin, (a,), (a,))[1], np.cos(A) * A)
    record("cond", lambda: ember.lax.cond(True, lambda v: v, lambda v: v * 2, a), A)
    f = auto_axes(lambda v: v @ v.T, out_sharding=P("X", None))
    record("auto_axes", lambda: f(a), A @ A.T)
    record("jit auto_axes", lambda: ember.jit(f)(a), A @ A.T)
    record("matmul batched", lambda: jnp.ones((2, 8, 4)) @ jnp.ones((2, 4, 3)), np.full((2, 8, 3), 4.0))
    rows = reshard(a, P(None, "Y"))
    record("scan carry", lambda: ember.lax.scan(lambda c, x: (c + x, x * 2), jnp.zeros(4), rows))
    record("scan ys", lambda: ember.lax.scan(lambda c, x: (c + x, x * 2), jnp.zeros(4, out_sharding=P("Y")), rows)[1],
           2 * A)
    record("fori_loop", lambda: ember.lax.fori_loop(0, 3, lambda i, v: v * 2, a), 8 * A)
    record("map", lambda: ember.lax.map(lambda r: r * 2, rows), 2 * A)
    record("cummax 1", lambda: ember.lax.cummax(c, 1), np.maximum.accumulate(A, 1))
    B = np.linspace(-1, 1, 36, dtype=np.float32).reshape(4, 3, 3)
    S = B @ B.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)
    s = ember.device_put(S, P("X"))
    record("eigh", lambda: jnp.linalg.eigh(s)[1])
    x4 = ember.device_put(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), P("X"))
    record("fft", lambda: jnp.fft.fft(x4), np.fft.fft(np.asarray(x4)))
    record("fft split", lambda: jnp.fft.fft(x4, axis=0), np.fft.fft(np.asarray(x4), axis=0))
    img = ember.device_put(np.linspace(-1, 1, 768, dtype=np.float32).reshape(4, 3, 8, 8), P("X"))
    kernel = np.linspace(-1, 1, 135, dtype=np.float32).reshape(5, 3, 3, 3)
    conv = lambda i: ember.lax.conv_general_dilated(i, kernel, (1, 1), "SAME")
    record("conv", lambda: conv(img), np.asarray(conv(np.asarray(img))))
    pool = lambda i: ember.lax.reduce_window(i, -np.inf, ember.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    record("maxpool", lambda: pool(img), np.asarray(pool(np.asarray(img))))
    record("grad conv", lambda: ember.grad(lambda i: jnp.sum(conv(i) ** 2))(img),
           np.asarray(ember.grad(lambda i: jnp.sum(conv(i) ** 2))(np.asarray(img))))
    record("scatter", lambda: x4.at[:, 0].set(1.0), np.asarray(x4.at[:, 0].set(1.0)))
    record("pure_callback", lambda: ember.pure_callback(lambda v: np.asarray(v) * 2,
                                                        ember.ShapeDtypeStruct(x4.shape, x4.dtype), x4),
           2 * np.asarray(x4))
    record("igamma", lambda: ember.lax.igamma(jnp.abs(x4) + 1, jnp.abs(x4)))
    inside = []
    record("vmap body", lambda: (ember.vmap(lambda r: inside.append(ember.typeof(r)) or r)(a), inside[-1])[1])
    record("vmap over columns", lambda: ember.vmap(lambda r: r.sum(), in_axes=1)(a), A.sum(0))
    record("einsum out_sharding", lambda: jnp.einsum("ij,kj->ik", a, c, out_sharding=P("X", None)), A @ A.T)
    record("randint out_sharding", lambda: ember.random.randint(ember.random.key(1), (8, 4), 0, 5,
                                                                out_sharding=P("X")),
           np.asarray(ember.random.randint(ember.random.key(1), (8, 4), 0, 5)))
    record("arange out_sharding", lambda: jnp.arange(8, out_sharding=P("X")), np.arange(8))
    record("broadcasted_iota out_sharding",
           lambda: ember.jit(lambda: ember.lax.broadcasted_iota(jnp.int32, (8, 4), 0, out_sharding=P("X")))(),
           np.broadcast_to(np.arange(8)[:, None], (8, 4)))
    row_sums = ember.jit(lambda v: ember.shard_map(lambda b: ember.lax.psum(b.sum(1, keepdims=True), "Y"),
                                                   out_specs=P("X", None))(v))
    record("shard_map, in_specs from types", lambda: row_sums(a), A.sum(1, keepdims=True))
    record("shard_map eagerly", lambda: ember.shard_map(lambda b: b * 2, out_specs=P("X", "Y"))(a), 2 * A)
    record("shard_map, in_specs not the types",
           lambda: ember.shard_map(lambda b: b * 2, in_specs=P("X", None), out_specs=P("X", None))(a))
    text = ember.jit(lambda v: jnp.sin(v).sum(0)).lower(a).as_text()
    values["constraints"] = text.count('call_target_name = "Sharding"')
    values["result sharding"] = str(jnp.sin(a).sum(0).sharding.spec)
print("RESULT" + json.dumps({"types": types, "values": values}))
"""


@pytest.fixture(scope="module")
def four_devices():
    return program_result(PROGRAM, 4)


@pytest.mark.parametrize("name", sorted(JAX_TYPES))
def test_types_and_errors_as_jax(four_devices, name):
    got, want = four_devices["types"][name], JAX_TYPES[name]
    if want.startswith("!"):
        assert got.startswith(want), (got, want)
    else:
        assert got == want


def test_values_are_numpys(four_devices):
    values = four_devices["values"]
    for name, err in values.items():
        if name not in ("constraints", "result sharding"):
            assert err < 1e-4, (name, err)
    assert len([n for n in values if n in JAX_TYPES]) >= 35
    # each typed result is constrained in the module (as JAX's lowering constrains it), and the array is split so
    assert values["constraints"] == 2 and values["result sharding"] == "P('Y',)"


def test_types_print_and_compare_on_two_devices():
    mesh = ember.make_mesh((2,), ("X",))
    a = ember.device_put(np.arange(8.0, dtype=np.float32).reshape(4, 2), ember.NamedSharding(mesh, P("X")))
    assert ember.typeof(a).str_short() == "f32[4@X,2]"
    sharding = ember.typeof(a).sharding
    assert sharding.spec == P("X", None) and sharding.mesh == mesh.abstract_mesh
    assert sharding.mesh.are_all_axes_explicit and repr(sharding.mesh).startswith("AbstractMesh('X': 2")
    assert ember.typeof(np.ones(3)).sharding.mesh.empty
    ir = ember.make_jaxpr(lambda v: jnp.sin(v).sum(1))(a)
    assert "b:f32[4@X,2] = sin a" in str(ir) and "c:f32[4@X] = reduce_sum" in str(ir)
    # the type is part of the aval: an Auto mesh puts nothing in it
    auto = ember.sharding.Mesh(np.array(ember.devices()[:2]), ("X",))
    b = ember.device_put(np.ones((4, 2), np.float32), ember.NamedSharding(auto, P("X")))
    assert ember.typeof(b).str_short() == "f32[4,2]" and ember.typeof(a) != ember.typeof(b)
    with pytest.raises(ValueError, match="Mesh for all inputs should be equal"):
        a + ember.device_put(np.ones((4, 2), np.float32), ember.NamedSharding(
            ember.make_mesh((2,), ("Z",)), P("Z")))
    with pytest.raises(ShardingTypeError, match="only lhs's batch dimension may be split"):
        ember.lax.conv_general_dilated(a.reshape(1, 1, 4, 2), np.ones((1, 1, 1, 1), np.float32), (1, 1), "SAME")


def test_abstract_mesh_and_explicit_axes():
    mesh = ember.make_mesh((2,), ("X",))
    assert ember.sharding.get_abstract_mesh().empty
    with ember.sharding.set_mesh(mesh):
        assert ember.sharding.get_abstract_mesh() == mesh.abstract_mesh
        seen = []
        ember.jit(lambda v: seen.append(ember.sharding.get_abstract_mesh()) or v)(np.ones(2))
        assert seen == [mesh.abstract_mesh]
    abstract = ember.sharding.AbstractMesh((2, 4), ("a", "b"))
    with ember.sharding.use_abstract_mesh(abstract):
        assert ember.sharding.get_abstract_mesh() is abstract
    auto = ember.make_mesh((2,), ("X",), axis_types=(ember.sharding.AxisType.Auto,))
    with ember.sharding.set_mesh(auto):
        seen = []
        f = ember.sharding.explicit_axes(lambda v: seen.append(ember.typeof(v).str_short()) or v * 2,
                                         in_sharding=P("X"))
        out = f(np.ones((4, 2), np.float32))
        assert seen == ["f32[4@X,2]"] and ember.typeof(out).str_short() == "f32[4,2]"
        np.testing.assert_array_equal(out, np.full((4, 2), 2.0))
    with pytest.raises(ValueError, match="Context mesh cannot be empty"):
        ember.sharding.explicit_axes(lambda v: v, in_sharding=P("X"))(np.ones(2))
    with pytest.raises(TypeError, match="out_sharding"):
        ember.sharding.auto_axes(lambda v: v)(np.ones(2))


# JAX's explicit sharding notebook (docs/notebooks/explicit-sharding.md), its cells in order with JAX 0.10.2's names
# (out_sharding=, in_sharding=, set_mesh as a context for the Auto mesh), and what JAX 0.10.2 printed running it
# (tests/recorded/explicit_sharding_notebook.txt).
NOTEBOOK = """
LIB = "ember"
import ember as jax
import ember.numpy as jnp
from ember.sharding import PartitionSpec as P, AxisType, set_mesh, get_abstract_mesh
from ember.sharding import reshard, auto_axes, explicit_axes
import numpy as np
import functools
jax.config.update('jax_num_cpu_devices', 8)
some_array = np.arange(8)
print(f"JAX-level type of some_array: {jax.typeof(some_array)}")
@jax.jit
def foo(x):
  print(f"JAX-level type of x during tracing: {jax.typeof(x)}")
  return x + x
print(foo(some_array))
mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit, AxisType.Explicit))
set_mesh(mesh)
print(f"Current mesh is: {get_abstract_mesh()}")
replicated_array = np.arange(8).reshape(4, 2)
sharded_array = reshard(replicated_array, P("X", None))
print(f"replicated_array type: {jax.typeof(replicated_array)}")
print(f"sharded_array type: {jax.typeof(sharded_array)}")
arg0 = reshard(np.arange(4).reshape(4, 1), P("X", None))
arg1 = reshard(np.arange(8).reshape(1, 8), P(None, "Y"))
result = arg0 + arg1
print(f"arg0 sharding: {jax.typeof(arg0)}")
print(f"arg1 sharding: {jax.typeof(arg1)}")
print(f"result sharding: {jax.typeof(result)}")
@jax.jit
def add_arrays(x, y):
  ans = x + y
  print(f"x sharding: {jax.typeof(x)}")
  print(f"y sharding: {jax.typeof(y)}")
  print(f"ans sharding: {jax.typeof(ans)}")
  return ans
print(np.asarray(add_arrays(arg0, arg1)).sum())
some_x = reshard(np.arange(16).reshape(4, 4), P("X", None))
some_y = reshard(np.arange(16).reshape(4, 4), P(None, "X"))
try:
  some_x + some_y
except Exception as e:
  print("ERROR!")
  print(e)
print("=== try again with auto_axes ===")
@auto_axes
def add_with_out_sharding_kwarg(x, y):
  print(f"We're in auto-sharding mode here. This is the current mesh: {get_abstract_mesh()}")
  return x + y
result = add_with_out_sharding_kwarg(some_x, some_y, out_sharding=P("X", None))
print(f"Result type: {jax.typeof(result)}")
print(f"Current mesh is: {get_abstract_mesh()}")
@functools.partial(auto_axes, axes='X')
def g(y):
  print(f'mesh inside g: {get_abstract_mesh()}')
  print(f'y.sharding inside g: {jax.typeof(y) = }', end='\\n\\n')
  return y * 2
@jax.jit
def f(arr1):
  print(f'mesh inside f: {get_abstract_mesh()}')
  x = jnp.sin(arr1)
  print(f'x.sharding: {jax.typeof(x)}', end='\\n\\n')
  z = g(x, out_sharding=P("X", "Y"))
  print(f'z.sharding: {jax.typeof(z)}', end="\\n\\n")
  return z + 1
some_x = reshard(np.arange(16).reshape(4, 4), P("X", "Y"))
print(np.asarray(f(some_x)).sum())
auto_mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto, AxisType.Auto))
@functools.partial(explicit_axes, axes=('X', 'Y'))
def explicit_g(y):
  print(f'mesh inside g: {get_abstract_mesh()}')
  print(f'y.sharding inside g: {jax.typeof(y) = }')
  z = y * 2
  print(f'z.sharding inside g: {jax.typeof(z) = }', end='\\n\\n')
  return z
@jax.jit
def f(arr1):
  print(f'mesh inside f: {get_abstract_mesh()}', end='\\n\\n')
  x = jnp.sin(arr1)
  z = explicit_g(x, in_sharding=P("X", "Y"))
  return z + 1
with set_mesh(auto_mesh):
  some_x = jax.device_put(np.arange(16).reshape(4, 4), P("X", "Y"))
  print(np.asarray(f(some_x)).sum())
"""
NOTEBOOK_JAX_OUTPUT = pathlib.Path(__file__).parent / "recorded" / "explicit_sharding_notebook.txt"


def test_the_explicit_sharding_notebook_prints_what_jax_prints():
    out = check_python(NOTEBOOK)
    assert out == NOTEBOOK_JAX_OUTPUT.read_text()


def test_cotangents_are_split_as_their_primals():
    """JAX's rule for derivatives in explicit sharding mode (docs/301/sharding-ad.md): every cotangent of the
    backward pass has its primal's type, so the gradient of a replicated weight is replicated, of a split batch split,
    and the intermediate cotangents of the staged gradient are split as their primals."""
    mesh = ember.make_mesh((2,), ("X",))
    with ember.sharding.set_mesh(mesh):
        x = ember.device_put(jnp.arange(8 * 4.).reshape(8, 4), P("X", None))
        w = ember.device_put(jnp.arange(4 * 2.).reshape(4, 2) / 10., P(None, None))

        def loss(w, x):
            return jnp.sum((x @ w) ** 2)
        dw, dx = ember.grad(loss, argnums=(0, 1))(w, x)
        assert (str(ember.typeof(dw)), str(ember.typeof(dx))) == ("float32[4,2]", "float32[8@X,4]")  # (JAX's)
        ir = ember.make_jaxpr(ember.grad(loss))(w, x)
        for eqn in ir.eqns:  # (each cotangent of the batch's rows is split over X)
            if eqn.outputs[0].aval.shape == (8, 2) and eqn.prim.name != "broadcast_in_dim":
                assert eqn.outputs[0].aval.str_short() == "f32[8@X,2]", str(ir)
        want = ember.grad(loss, argnums=(0, 1))(np.arange(8).astype(np.float32).reshape(4, 2) / 10,
                                                np.arange(32.0, dtype=np.float32).reshape(8, 4))
        np.testing.assert_allclose(np.asarray(dw), np.asarray(want[0]), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(dx), np.asarray(want[1]), rtol=1e-6)


def test_a_types_sharding_as_an_argument():
    """optax passes `out_sharding=jax.typeof(leaf).sharding` (a NamedSharding over an AbstractMesh) to its samplers:
    over the empty mesh (an unsplit value) it names no placement, over a mesh's it means the current mesh's."""
    g = jnp.ones((3, 4))
    key = ember.random.key(0)
    want = np.asarray(ember.random.normal(key, (3, 4)))
    np.testing.assert_array_equal(ember.random.normal(key, (3, 4), out_sharding=ember.typeof(g).sharding), want)
    np.testing.assert_array_equal(ember.jit(lambda k, v: ember.random.normal(
        k, (3, 4), out_sharding=ember.typeof(v).sharding))(key, g), want)
    mesh = ember.make_mesh((2,), ("X",))
    with ember.sharding.set_mesh(mesh):
        a = ember.device_put(np.ones((4, 2), np.float32), P("X"))
        out = ember.jit(lambda v: jnp.zeros_like(v, out_sharding=ember.typeof(v).sharding))(a)
        assert str(ember.typeof(out)) == "float32[4@X,2]"
    with pytest.raises(ValueError, match="over an AbstractMesh"):
        jnp.zeros((4, 2), out_sharding=ember.typeof(a).sharding)
