"""JAX's shard_map tutorial (docs/notebooks/shard_map.md of github.com/jax-ml/jax at jax-v0.10.2, the installed
oracle's version) run on ember and on JAX, in one process with eight CPU devices for each: the tutorial's programs
must give JAX's results, printed types and errors.

Covered: the first matmul_basic; rank-preserving maps and in_specs/out_specs (f1-f5, untiling a closed-over value);
"Tracking how values vary over manual mesh axes" (typeof texts before and after psum, on one and two axes; the
out_specs error; check_vma=False; pcast; the implicit pcast in make_jaxpr; the scan carry error and its pcast fix;
beyond the tutorial, a gradient inside the body); the collectives tutorial (psum over one and two axes, all_gather
tiled and stacked, psum_scatter, ppermute, psum_scatter written with ppermute, all_to_all: results and the types
before/after each); the collective matmuls (all-gather matmul, its ppermute-overlapped and bidirectional forms;
psum_scatter matmul, its overlapped and bidirectional forms; beyond the tutorial, the gradients of the
bidirectional ones); the toy network under 8-way data parallelism (with the sizes of the gradient's all-reduces),
4-way FSDP (remat with the all_gather policy), 8-way tensor parallelism and 4x2 FSDP + TP: the loss and gradient
against the reference model's (the tutorial's checks) and, beyond it, two jitted steps of gradient descent (losses,
first gradient, parameters after); SPMD pipeline parallelism (loss, gradient); beyond the tutorial, a
partial-manual shard_map (axis_names={'x'} of a 2x2 mesh: values, gradients, vmap, axis_index, the errors) and
vmap's spmd_axis_name (the shardings of its constraints). Each compared with JAX's.

Adaptations, the same on both sides (each framework runs the same function, given `jax` or `ember` as `jax`):
- meshes are built as Mesh(np.array(devices).reshape(...), names) (Auto axes) rather than jax.make_mesh (JAX 0.10.2
  makes Explicit axes) and jax.set_mesh; shard_map gets mesh=; device_put gets a NamedSharding (not a bare
  PartitionSpec, which needs set_mesh);
- matmul_basic's reference is jnp.dot(a, b) without out_sharding=P('x', None);
- in_specs are given where the tutorial leaves them out (loss_dp, loss_fsdp: inference needs Explicit axes);
- typeof(y).manual_axis_type.varying is read by its short name, typeof(y).mat.varying (ember has only that one);
- the tutorial prints values inside the body (per device, eagerly): their typeof texts are recorded instead;
- the network's parameters and data are drawn with numpy's generator rather than jax.random (whose first use costs
  seconds of compiling; ember's random numbers are JAX's, tests/test_jax_docs_random.py), once; the unsharded
  reference loss and gradient are computed once, on unsharded arrays, and each strategy's checks compare with them
  (the tutorial places the reference's arguments on the mesh first);
- the tutorial's allclose (tree_map of jnp.allclose) compares on the host, with numpy's: ember's eager operations
  on sharded arrays compile a program each (1.8 s of CPU for one gradient tree, JAX 0.3 s);
- shard_maps the tutorial calls eagerly run eagerly on ember and under jit on JAX (JAX's eager shard_map runs op by
  op: seconds for the ppermute loops), the results being the same.
"""
import re
import textwrap
import time
import traceback
from functools import partial

import numpy as np
import pytest
from recorded import jax_result
from reliability.subproc import check_python

DTYPE_NAMES = {"float": "f", "int": "i", "uint": "u", "complex": "c", "bfloat": "bf"}
FAILS: list[str] = []


def short_types(text):
    """A type text with short dtype names: float32[3]{V:i} -> f32[3]{V:i}."""
    return re.sub(r"\b(bfloat|float|uint|int|complex)(\d+)\b", lambda m: DTYPE_NAMES[m[1]] + m[2], str(text))


def fail(name, detail):
    FAILS.append(name)
    print(f"MISMATCH {name}:\n  " + str(detail).replace("\n", "\n  "))


def compare(name, ours, theirs, rtol, atol):
    if isinstance(theirs, dict):
        if sorted(ours) != sorted(theirs):
            return fail(name, f"keys: ember {sorted(ours)} vs JAX {sorted(theirs)}")
        for k in theirs:
            compare(f"{name}.{k}", ours[k], theirs[k], rtol, atol)
        return
    if isinstance(theirs, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(theirs):
            return fail(name, f"ember {ours!r} vs JAX {theirs!r}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            compare(f"{name}[{i}]", a, b, rtol, atol)
        return
    if isinstance(theirs, (str, bool, int, set, frozenset, type(None))):
        if isinstance(theirs, str):  # (types in messages and jaxprs compared by their short names on both sides)
            theirs, ours = short_types(theirs), short_types(ours) if isinstance(ours, str) else ours
        if ours != theirs:
            fail(name, f"ember: {ours!r}\nJAX:   {theirs!r}")
        return
    a, b = np.asarray(ours), np.asarray(theirs)
    if a.shape != b.shape or a.dtype != b.dtype:
        return fail(name, f"ember {a.dtype}{list(a.shape)} vs JAX {b.dtype}{list(b.shape)}")
    if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        fail(name, f"max abs difference {err.max():.3g} (rtol={rtol}, atol={atol})\n"
                   f"ember: {np.array2string(a.ravel()[:8], precision=6)}\nJAX:   "
                   f"{np.array2string(b.ravel()[:8], precision=6)}")


def error_of(fn):
    """fn() must raise: (the exception's type name, its message); or the value it returned, as a mismatch."""
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return "no error", repr(out)


def run(name, program, rtol=1e-5, atol=1e-5):
    """program(fw) for fw = JAX and ember: the same results (arrays, type texts, errors)."""
    import jax

    import ember
    results, seconds = {}, []
    for fw in (jax, ember):
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            # (JAX's results are recorded: tests/recorded.py; EMBER_JAX_RECORDS=off runs them live)
            results[fw.__name__] = jax_result(partial(program, jax)) if fw is jax else program(fw)
            seconds.append(f"{fw.__name__} {time.perf_counter() - t0:.1f}s (cpu {time.process_time() - c0:.1f}s)")
        except Exception:  # noqa: BLE001
            return fail(name, f"{fw.__name__} raised:\n{traceback.format_exc(limit=-6)}")
    print(f"{name}: {', '.join(seconds)}")
    compare(name, results["ember"], results["jax"], rtol, atol)


def mesh_of(fw, shape, names, start=0):
    devices = fw.devices()[start:start + int(np.prod(shape))]
    return fw.sharding.Mesh(np.array(devices).reshape(shape), names)


def put(fw, x, mesh, spec):
    return fw.device_put(x, fw.sharding.NamedSharding(mesh, spec))


def eager(fw, f):
    """A shard_map the tutorial calls eagerly: as it is on ember; under jit on JAX, whose eager shard_map runs op by
    op (seconds for the ppermute loops below) and gives the same results."""
    return f if fw.__name__ == "ember" else fw.jit(f)


def tree_allclose(fw, a, b):
    """The tutorial's allclose, on the host (numpy's allclose of each leaf)."""
    return fw.tree_util.tree_all(fw.tree_util.tree_map(
        lambda u, v: np.allclose(np.asarray(u), np.asarray(v), atol=1e-2, rtol=1e-2), a, b))


# ------------------------------------------------------------------------------------ "So, let's see a shard_map!"
def matmul_basic_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    mesh = mesh_of(jax, (4, 2), ("x", "y"))
    a = put(jax, jnp.arange(8 * 16.).reshape(8, 16), mesh, P("x", "y"))
    b = put(jax, jnp.arange(16 * 4.).reshape(16, 4), mesh, P("y", None))

    @jax.shard_map(mesh=mesh, in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))
    def matmul_basic(a_block, b_block):
        c_partialsum = jnp.dot(a_block, b_block)
        c_block = jax.lax.psum(c_partialsum, "y")
        return c_block

    c = matmul_basic(a, b)
    c_ref = jax.jit(lambda a, b: jnp.dot(a, b))(a, b)
    return {"c": c, "allclose": bool(tree_allclose(jax, c, c_ref)), "c_ref": c_ref,
            "spec": str(c.sharding.spec)}


# ------------------------------------------------------------------------------ Rank-reducing vs rank-preserving maps
def in_out_specs_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    out = {}
    xs = jnp.arange(12).reshape(4, 3)
    f = lambda x: x @ x  # noqa: E731
    out["check_vmap"] = bool(tree_allclose(jax, jax.vmap(f, in_axes=(0,), out_axes=0)(xs),
                                           jnp.stack([f(x) for x in xs])))
    mesh = mesh_of(jax, (4,), ("i",))
    y = jnp.arange(32).reshape(8, 4)
    g = lambda x: x.T @ x  # noqa: E731
    ans = jax.shard_map(g, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(y)
    out["check_shmap"] = (ans, bool(tree_allclose(jax, ans, jnp.concatenate([g(b) for b in jnp.split(y, 4)]))))

    mesh = mesh_of(jax, (4, 2), ("i", "j"))
    shapes = []

    @jax.shard_map(mesh=mesh, in_specs=P("i", None), out_specs=P("i", "j"))
    def f1(x_block):
        shapes.append(x_block.shape)  # print(x_block.shape): (3, 12)
        return x_block
    x1 = put(jax, jnp.arange(12 * 12).reshape(12, 12), mesh, P("i", None))
    out["f1"] = f1(x1)

    @jax.shard_map(mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", "j"))
    def f2(x_block):
        shapes.append(x_block.shape)
        return x_block
    x = jnp.arange(12 * 12).reshape(12, 12)
    x_ = put(jax, x, mesh, P("i", "j"))
    out["f2"] = f2(x_)

    x = jnp.array([[3.]])
    out["untile"] = [jax.shard_map(lambda: x, mesh=mesh, in_specs=(), out_specs=spec)()
                     for spec in (P("i", "j"), P("i", None), P(None, None))]

    @jax.shard_map(mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", None))
    def f3(x_block):
        return jax.lax.psum(x_block, "j")

    @jax.shard_map(mesh=mesh, in_specs=P("i", "j"), out_specs=P(None, "j"))
    def f4(x_block):
        return jax.lax.psum(x_block, "i")

    @jax.shard_map(mesh=mesh, in_specs=P("i", "j"), out_specs=P(None, None))
    def f5(x_block):
        return jax.lax.psum(x_block, ("i", "j"))
    x = put(jax, jnp.arange(12 * 12).reshape(12, 12), mesh, P("i", "j"))
    out["f3"], out["f4"], out["f5"] = f3(x), f4(x), f5(x)
    out["shapes"] = shapes
    return out


# -------------------------------------------------------- Tracking how values vary over manual mesh axes (check_vma)
def vma_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    out = {}
    types = []
    mesh = mesh_of(jax, (2,), ("i",))

    @jax.shard_map(mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    def f(x):
        types.append(str(jax.typeof(x)))  # the tutorial prints x (each device's value)
        return 2 * x
    out["split"] = f(put(jax, jnp.arange(6.), mesh, P("i")))

    @jax.shard_map(mesh=mesh, in_specs=P(), out_specs=P())
    def f(x):
        types.append(str(jax.typeof(x)))
        return 2 * x
    out["replicated"] = f(jnp.arange(6.))

    @jax.shard_map(mesh=mesh, in_specs=P("i"), out_specs=P())
    def f(x):
        types.append(str(jax.typeof(x)))  # f32[3]{V:i}
        y = jax.lax.psum(x, "i")
        types.append(str(jax.typeof(y)))  # f32[3]
        return y
    out["psum"] = f(put(jax, jnp.arange(6.), mesh, P("i")))

    mesh2 = mesh_of(jax, (4, 2), ("i", "j"))

    @jax.shard_map(mesh=mesh2, in_specs=P("i", "j"), out_specs=P("i"))
    def f(x):
        types.append(str(jax.typeof(x)))  # f32[2,2]{V:(i,j)}
        y = jax.lax.psum(x, "j")
        assert jax.typeof(y).mat.varying == {"i"}  # (the tutorial: .manual_axis_type.varying)
        types.append(set(jax.typeof(y).mat.varying))
        types.append(str(jax.typeof(y)))  # f32[2,2]{V:i}
        return y
    out["2d"] = f(put(jax, jnp.arange(8 * 4.).reshape(8, 4), mesh2, P("i", "j")))

    # the out_specs bug caught by check_vma=True; with check_vma=False: no error (the first device's value)
    x = put(jax, jnp.arange(6.), mesh, P("i"))
    kind, msg = error_of(lambda: jax.shard_map(lambda x: x, mesh=mesh, in_specs=P("i"), out_specs=P())(x))
    out["out_specs_error"] = (kind, [line for line in msg.splitlines()
                                     if line.startswith(("The mesh given", "out_specs is P()"))])
    out["unchecked"] = jax.shard_map(lambda x: x, mesh=mesh, in_specs=P("i"), out_specs=P(), check_vma=False)(x)

    @jax.shard_map(mesh=mesh, in_specs=P(), out_specs=None)
    def f(x):
        types.append(str(jax.typeof(x)))  # f32[6]
        y = jax.lax.pcast(x, "i", to="varying")
        types.append(str(jax.typeof(y)))  # f32[6]{V:i}
    out["pcast"] = f(jnp.arange(6.))

    @jax.shard_map(mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i"))
    def f(x, y):
        return x * y
    x, y = put(jax, jnp.arange(6.), mesh, P("i")), jnp.arange(3.)
    out["implicit_pcast"] = f(x, y)
    # the jaxpr's body: a cast (JAX's pvary, ember's pcast) of y to varying over i, then the product
    text = str(jax.make_jaxpr(f)(x, y))
    eqns = re.findall(r"^\s*\w+:(\S+) = (\w+)(\[axes=\S+\])?", text, re.MULTILINE)
    out["implicit_pcast_eqns"] = [(short_types(t), "pcast" if p == "pvary" else p, a) for t, p, a in eqns
                                  if p != "shard_map"]

    # (beyond the tutorial) a gradient inside the body: w is the same on every device, its gradient (through the
    # implicit pcast, transposed to a psum) is the sum of the devices' contributions, invariant again
    @jax.shard_map(mesh=mesh, in_specs=(P(), P("i")), out_specs=P())
    def grad_inside(w, x):
        g = jax.grad(lambda w: jnp.sin(w * x).sum())(w)
        types.append(str(jax.typeof(g)))
        return g
    out["grad_inside"] = grad_inside(jnp.float32(0.5), put(jax, jnp.arange(6.), mesh, P("i")))
    out["types"] = types
    return out


def scan_vma_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    mesh = mesh_of(jax, (2,), ("i",))

    @jax.shard_map(mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i"))
    def f(x, y):
        def body(carry, _):
            c1, c2 = carry
            return (c2, c1), ()  # swap the carry
        (x_, y_), _ = jax.lax.scan(body, (x, y), (), length=2)
        return x_, y_

    x = jnp.arange(6.)
    y = jnp.arange(3.)
    kind, msg = error_of(lambda: f(x, y))
    first = msg.splitlines()[0] if msg else msg
    mismatch = [re.sub(r"\s+", " ", line.strip()) for line in msg.splitlines() if "manual axis types" in line]

    @jax.shard_map(mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i"))
    def f_fixed(x, y):  # (f in the tutorial)
        def body(carry, _):
            c1, c2 = carry
            return (c2, c1), ()  # swap the carry
        y = jax.lax.pcast(y, "i", to="varying")  # apply pcast to fix the error
        (x_, y_), _ = jax.lax.scan(body, (x, y), (), length=2)
        return x_, y_

    x = put(jax, jnp.arange(6.), mesh, P("i"))
    return {"error": (kind, first, mismatch), "fixed": f_fixed(x, y)}


# --------------------------------------------------------------------------------------------- Collectives tutorial
def collectives_program(jax):
    jnp, P, Mesh = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.Mesh
    out, types = {}, {}
    mesh1d = Mesh(np.array(jax.devices()[:4]), ("i",))
    mesh2d = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("i", "j"))

    def logged(name, collective):
        """The tutorial prints each block BEFORE and AFTER the collective: here their types are recorded."""
        def body(x_block):
            y_block = collective(x_block)
            types[name] = (str(jax.typeof(x_block)), str(jax.typeof(y_block)))
            return y_block
        return body

    x = jnp.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2])
    f1 = jax.shard_map(logged("f1", lambda b: jax.lax.psum(b, "i")), mesh=mesh1d, in_specs=P("i"),
                       out_specs=P(None))
    out["f1_psum"] = eager(jax, f1)(x)
    f2 = jax.shard_map(logged("f2", lambda b: jax.lax.psum(b, "i")), mesh=mesh2d, in_specs=P("i", "j"),
                       out_specs=P(None, "j"))
    out["f2_psum_i"] = eager(jax, f2)(jnp.arange(16).reshape(4, 4))
    f3 = jax.shard_map(logged("f3", lambda b: jax.lax.psum(b, ("i", "j"))), mesh=mesh2d, in_specs=P("i", "j"),
                       out_specs=P(None, None))
    out["f3_psum_ij"] = eager(jax, f3)(jnp.arange(16).reshape(4, 4))

    x = jnp.array([3, 9, 5, 2])
    f4 = jax.shard_map(logged("f4", lambda b: jax.lax.all_gather(b, "i", tiled=True)), mesh=mesh1d,
                       in_specs=P("i"), out_specs=P("i"))
    out["f4_all_gather_tiled"] = eager(jax, f4)(x)
    f5 = jax.shard_map(logged("f5", lambda b: jax.lax.all_gather(b, "i", tiled=False)), mesh=mesh1d,
                       in_specs=P("i"), out_specs=P("i"))
    out["f5_all_gather"] = eager(jax, f5)(x)

    x = jnp.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2])
    f6 = jax.shard_map(logged("f6", lambda b: jax.lax.psum_scatter(b, "i", tiled=True)), mesh=mesh1d,
                       in_specs=P("i"), out_specs=P("i"))
    out["f6_psum_scatter"] = eager(jax, f6)(x)

    def f7_body(x_block):
        sz = jax.lax.axis_size("i")
        return jax.lax.ppermute(x_block, "i", [(i, (i + 1) % sz) for i in range(sz)])
    f7 = jax.shard_map(logged("f7", f7_body), mesh=mesh1d, in_specs=P("i"), out_specs=P("i"))
    out["f7_ppermute"] = eager(jax, f7)(jnp.arange(8))

    def psum_scatter(x, axis_name, *, tiled=False):
        size = jax.lax.axis_size(axis_name)
        idx = jax.lax.axis_index(axis_name)  # function instance index along axis_name
        if tiled:
            x = x.reshape(size, -1, *x.shape[1:])  # split leading axis
        shift = partial(jax.lax.ppermute, axis_name=axis_name,
                        perm=[(i, (i - 1) % size) for i in range(size)])
        for i in range(1, size):
            update = shift(x[(idx + i) % size])
            x = x.at[(idx + i + 1) % size].add(update)
        return x[idx]
    f8 = jax.shard_map(logged("f8", lambda b: psum_scatter(b, "i", tiled=True)), mesh=mesh1d, in_specs=P("i"),
                       out_specs=P("i"))
    out["f8_ppermute_psum_scatter"] = eager(jax, f8)(x)
    f9 = jax.shard_map(logged("f9", lambda b: jax.lax.all_to_all(b, "i", split_axis=0, concat_axis=0, tiled=True)),
                       mesh=mesh1d, in_specs=P("i"), out_specs=P("i"))
    out["f9_all_to_all"] = eager(jax, f9)(x)
    out["types"] = types
    return out


# ------------------------------------------------------------------------------------ Matrix multiplies (collective)
def matmul_programs(jax):
    jnp, P, lax = jax.numpy, jax.sharding.PartitionSpec, jax.lax
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("i",))
    shard_map = partial(jax.shard_map, mesh=mesh)
    out = {}

    lhs_spec = P("i", None)
    lhs = put(jax, jax.random.normal(jax.random.key(0), (8, 8)), mesh, lhs_spec)
    rhs_spec = P("i", None)
    rhs = put(jax, jax.random.normal(jax.random.key(1), (8, 4)), mesh, rhs_spec)

    @jax.jit
    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather(lhs_block, rhs_block):
        rhs = jax.lax.all_gather(rhs_block, "i", tiled=True)
        return lhs_block @ rhs

    @jax.jit
    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather_overlapped(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        B = lhs_block.shape[1] // size
        lhs_blocks = lambda i: lax.dynamic_slice_in_dim(lhs_block, i * B, B, 1)  # noqa: E731
        out_block = lhs_blocks(idx) @ rhs_block
        for i in range(1, size):
            rhs_block = shift(rhs_block)
            out_block += lhs_blocks((idx - i) % size) @ rhs_block
        return out_block

    @jax.jit
    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather_overlapped_bidi(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift_up = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        shift_dn = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        B = lhs_block.shape[1] // size // 2  # half-size blocks
        lhs_blocks = lambda i, hi: lax.dynamic_slice_in_dim(lhs_block, (2 * i + hi) * B, B, 1)  # noqa: E731
        rhs_block_lo, rhs_block_hi = jnp.split(rhs_block, 2, axis=0)
        out_block = lhs_blocks(idx, 0) @ rhs_block_lo
        out_block += lhs_blocks(idx, 1) @ rhs_block_hi
        for i in range(1, size):
            rhs_block_lo = shift_up(rhs_block_lo)
            rhs_block_hi = shift_dn(rhs_block_hi)
            out_block += lhs_blocks((idx - i) % size, 0) @ rhs_block_lo
            out_block += lhs_blocks((idx + i) % size, 1) @ rhs_block_hi
        return out_block

    def check(name, f, grad=False):
        out[name] = o = f(lhs, rhs)
        out[name + "_allclose"] = bool(np.allclose(np.asarray(o), np.asarray(lhs @ rhs), atol=1e-3, rtol=1e-3))
        if grad:  # (beyond the tutorial) the gradient, through ppermute's transposes (all_gather's and
            # psum_scatter's are in the networks' gradients below)
            out[name + "_grad"] = jax.jit(jax.grad(lambda a, b: (f(a, b) ** 2).sum(), argnums=(0, 1)))(lhs, rhs)

    check("allgather", matmul_allgather)
    check("allgather_overlapped", matmul_allgather_overlapped)
    check("allgather_overlapped_bidi", matmul_allgather_overlapped_bidi, grad=True)

    lhs_spec = P(None, "i")
    lhs = put(jax, lhs, mesh, lhs_spec)
    rhs_spec = P("i", None)
    rhs = put(jax, rhs, mesh, rhs_spec)

    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter(lhs_block, rhs_block):
        out_summand = lhs_block @ rhs_block
        return jax.lax.psum_scatter(out_summand, "i", tiled=True)

    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter_overlapped(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        lhs_block = lhs_block.reshape(size, -1, lhs_block.shape[1])  # split 1st axis
        out_summand = lhs_block[(idx + 1) % size] @ rhs_block
        for i in range(1, size):
            out_summand = shift(out_summand)
            out_summand += lhs_block[(idx + i + 1) % size] @ rhs_block
        return out_summand

    @shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter_overlapped_bidi(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift_up = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        shift_dn = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        B = lhs_block.shape[0] // size // 2  # half-size blocks
        lhs_blocks = lambda i, hi: lax.dynamic_slice_in_dim(lhs_block, (2 * i + hi) * B, B, 0)  # noqa: E731
        out_summand_lo = lhs_blocks((idx - 1) % size, 0) @ rhs_block
        out_summand_hi = lhs_blocks((idx + 1) % size, 1) @ rhs_block
        for i in range(1, size):
            out_summand_lo = shift_up(out_summand_lo)
            out_summand_hi = shift_dn(out_summand_hi)
            out_summand_lo += lhs_blocks((idx - i - 1) % size, 0) @ rhs_block
            out_summand_hi += lhs_blocks((idx + i + 1) % size, 1) @ rhs_block
        return jnp.concatenate([out_summand_lo, out_summand_hi])

    check("psumscatter", eager(jax, matmul_psumscatter))
    check("psumscatter_overlapped", eager(jax, matmul_psumscatter_overlapped))
    check("psumscatter_overlapped_bidi", eager(jax, matmul_psumscatter_overlapped_bidi), grad=True)
    return out


# ------------------------------------------------------------------------------------------------- Neural networks
LR, STEPS = 0.05, 2


NETWORKS = {}


def network(jax):
    """The tutorial's toy network, its parameters and random data (numpy's, the same for both frameworks; made once
    per framework) and the reference model's loss and gradient under jit (the tutorial's checks compare every
    strategy with them)."""
    if jax.__name__ not in NETWORKS:
        NETWORKS[jax.__name__] = make_network(jax)
    return NETWORKS[jax.__name__]


def make_network(jax):
    jnp = jax.numpy

    def predict(params, inputs):
        for W, b in params:
            outputs = jnp.dot(inputs, W) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    def loss(params, batch):
        inputs, targets = batch
        predictions = predict(params, inputs)
        return jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))

    rng = np.random.default_rng(0)  # (the tutorial draws with jax.random.key(0))
    normal = lambda *shape: jnp.asarray(rng.standard_normal(shape, dtype=np.float32))  # noqa: E731

    def init_layer(n_in, n_out):
        W = normal(n_in, n_out) / jnp.sqrt(n_in)
        b = normal(n_out)
        return W, b

    def init(layer_sizes, batch_size):
        params = list(map(init_layer, layer_sizes[:-1], layer_sizes[1:]))
        inputs = normal(batch_size, layer_sizes[0])
        targets = normal(batch_size, layer_sizes[-1])
        return params, (inputs, targets)

    layer_sizes = [784, 128, 128, 128, 128, 128, 8]
    batch_size = 32
    params, batch = init(layer_sizes, batch_size)
    return predict, params, batch, jax.jit(jax.value_and_grad(loss))(params, batch)


def all_reduce_sizes(stablehlo):
    """The number of elements each all_reduce of a StableHLO module sums, sorted."""
    types = re.findall(r'"stablehlo\.all_reduce".*?\}\)[^\n]*? : \(tensor<([^>]*)>\)', stablehlo, re.DOTALL)
    return sorted(int(np.prod([int(d) for d in t.split("x")[:-1]])) for t in types)


def train(jax, loss_fn, params, batch):
    """The tutorial's checks (the loss and its gradient against the reference model's) and, beyond it, STEPS steps
    of gradient descent under jit: the losses, the first step's gradient, the parameters after."""
    @jax.jit
    def step(params, batch):
        value, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), value, grads

    out, losses = {}, []
    for i in range(STEPS):
        params, value, grads = step(params, batch)
        losses.append(value)
        if i == 0:
            ref_loss, ref_grads = network(jax)[3]
            out["loss_matches_reference"] = bool(tree_allclose(jax, value, ref_loss))
            out["grad_matches_reference"] = bool(tree_allclose(jax, ref_grads, grads))
            out["grads"] = grads
    out["losses"], out["params"] = losses, params
    return out


def data_parallel_program(jax):
    jnp, P, NamedSharding = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    predict, params, batch, _ = network(jax)
    mesh = mesh_of(jax, (8,), ("batch",))
    batch = jax.device_put(batch, NamedSharding(mesh, P("batch")))
    params = jax.device_put(params, NamedSharding(mesh, P()))

    @jax.shard_map(mesh=mesh, in_specs=(P(), P("batch")), out_specs=P())
    def loss_dp(params, local_batch):
        inputs, targets = local_batch
        predictions = predict(params, inputs)  # use reference 'predict`
        local_loss = jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))
        return jax.lax.pmean(local_loss, "batch")

    # "We can print the compiler IR to inspect the gradient computation and verify that the collective
    # all-reduce-sum operations happen where we'd expect": the sizes of the all-reduces in the gradient's program
    text = jax.jit(jax.grad(loss_dp)).lower(params, batch).as_text()
    return {"init": (params, batch), "all_reduce_sizes": all_reduce_sizes(text), **train(jax, loss_dp, params, batch)}


def fsdp_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    _, params, batch, _ = network(jax)
    mesh = mesh_of(jax, (4,), ("batch",))
    batch = put(jax, batch, mesh, P("batch"))
    params = put(jax, params, mesh, P("batch"))

    @partial(jax.remat, policy=lambda op, *_, **__: str(op) != "all_gather")
    def predict_fsdp(params_frag, inputs):
        for W_frag, b_frag in params_frag:
            W = jax.lax.all_gather(W_frag, "batch", tiled=True)
            b = jax.lax.all_gather(b_frag, "batch", tiled=True)
            outputs = jnp.dot(inputs, W) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    @jax.shard_map(mesh=mesh, in_specs=(P("batch"), P("batch")), out_specs=P())
    def loss_fsdp(local_params, local_batch):
        inputs, targets = local_batch
        predictions = predict_fsdp(local_params, inputs)
        local_loss = jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))
        return jax.lax.pmean(local_loss, "batch")

    return train(jax, loss_fsdp, params, batch)


def tensor_parallel_program(jax):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    _, params, batch, _ = network(jax)
    mesh = mesh_of(jax, (8,), ("feats",))
    batch = put(jax, batch, mesh, P(None, "feats"))
    params = put(jax, params, mesh, P("feats"))

    def predict_tp(params, inputs):
        for W, b in params:
            outputs = gemm_tp(inputs, W, b)
            inputs = jax.nn.relu(outputs)
        return outputs

    @jax.shard_map(mesh=mesh, in_specs=(P(None, "feats"), P("feats", None), P("feats")), out_specs=P(None, "feats"))
    def gemm_tp(inputs, W, b):
        block_result = jnp.dot(inputs, W)
        return jax.lax.psum_scatter(block_result, "feats", scatter_dimension=1, tiled=True) + b

    def loss_tp(params, batch):
        inputs, targets = batch
        predictions = predict_tp(params, inputs)
        return jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))  # NOTE psum!

    return train(jax, loss_tp, params, batch)


def fsdp_tp_program(jax):
    jnp, P, NamedSharding = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    _, params, batch, _ = network(jax)
    mesh = mesh_of(jax, (4, 2), ("batch", "feats"))
    batch = jax.device_put(batch, NamedSharding(mesh, P("batch", "feats")))
    params = jax.device_put(params, NamedSharding(mesh, P(("feats", "batch"))))

    @partial(jax.remat, policy=lambda op, *_, **__: str(op) != "all_gather")
    def predict_fsdp_tp(params_frag, inputs):
        for W_frag, b_frag in params_frag:
            W = jax.lax.all_gather(W_frag, "batch", tiled=True)
            b = jax.lax.all_gather(b_frag, "batch", tiled=True)
            block_result = jnp.dot(inputs, W)
            outputs = jax.lax.psum_scatter(block_result, "feats", scatter_dimension=1, tiled=True) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    @jax.shard_map(mesh=mesh, in_specs=(P(("feats", "batch")), P("batch", "feats")), out_specs=P())
    def loss_fsdp_tp(local_params, local_batch):
        inputs, targets = local_batch
        predictions = predict_fsdp_tp(local_params, inputs)
        sq_err = jax.lax.psum(jnp.sum((predictions - targets) ** 2, axis=-1), "feats")
        return jax.lax.pmean(jnp.mean(sq_err), "batch")

    return train(jax, loss_fsdp_tp, params, batch)


def pipeline_parallel_program(jax):
    jnp, P, NamedSharding = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    _, params, batch, _ = network(jax)
    batch_size = 32
    L = len(params) - 2        # num layers, excluding first and last
    N = batch_size             # batch size
    F = params[0][0].shape[1]  # num features

    # choose some pipeline parameters
    S = 2      # number of stages
    B = 8      # size of each microbatch
    assert L % S == 0, "S (number of stages) must divide L (number of inner layers)"

    # compute some useful quantities
    M, ragged = divmod(N, B)  # M is number of microbatches
    assert not ragged, "B (size of each microbatch) must divide total batch size"
    K, ragged = divmod(M, S)  # K is microbatches per stage
    assert not ragged, "S (number of stages) must divide number of microbatches"

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:S]), ("stages",))

    def predict_pp(params, inputs):
        (W_first, b_first), inner_params, (W_last, b_last) = params
        inputs = jax.nn.relu(jnp.dot(inputs, W_first) + b_first)
        inputs = spmd_pipeline(lambda Wb, x: jax.nn.relu(x @ Wb[0] + Wb[1]), inner_params, inputs)
        outputs = jnp.dot(inputs, W_last) + b_last
        return outputs

    @jax.shard_map(mesh=mesh, in_specs=((P(), P("stages"), P()), P("stages")), out_specs=P())
    def loss_pp(params, batch):
        inputs, targets = batch
        predictions = predict_pp(params, inputs.reshape(K, B, -1)).reshape(K * B, -1)
        local_loss = jnp.mean(jnp.sum((predictions - targets)**2, axis=-1))
        return jax.lax.pmean(local_loss, "stages")

    def spmd_pipeline(fn, stage_params, inputs):
        stage = jax.lax.axis_index("stages")
        outputs = jnp.zeros_like(inputs) * jnp.nan
        state = jnp.zeros((L // S, B, F)) * jnp.nan
        for i in range(M + L - 1):
            state = state.at[0].set(jnp.where(stage == 0, inputs[i % K], state[0]))
            state = jax.vmap(fn)(stage_params, state)
            outputs = outputs.at[(i - L + 1) % K].set(jnp.where(stage == S - 1, state[-1], outputs[(i - L + 1) % K]))
            state, inputs, outputs = shift(i, state, inputs, outputs)
        outputs = jax.lax.ppermute(outputs, "stages", [(i, (i + 1) % S) for i in range(S)])
        return outputs

    def shift(i, state, inputs, outputs):
        sh = lambda x, d: jax.lax.ppermute(x, "stages", [(i, (i + d) % S) for i in range(S)])  # noqa: E731
        state = jnp.roll(state, +1, axis=0).at[0].set(sh(state[-1], +1))
        if (i % K) == (-1 % K):
            inputs = sh(inputs, +1)
        if ((i - L + 1) % K) == (-1 % K):
            outputs = sh(outputs, +1)
        return state, inputs, outputs

    first_params, *inner_params, last_params = params
    Ws, bs = zip(*inner_params)
    params_stacked = jnp.stack(Ws), jnp.stack(bs)
    first_params = jax.device_put(first_params, NamedSharding(mesh, P()))
    params_stacked = jax.device_put(params_stacked, NamedSharding(mesh, P("stages")))
    last_params = jax.device_put(last_params, NamedSharding(mesh, P()))
    params_ = first_params, params_stacked, last_params
    batch_ = jax.device_put(batch, NamedSharding(mesh, P("stages")))
    loss = jax.jit(loss_pp)(params_, batch_)
    grads = jax.jit(jax.grad(loss_pp))(params_, batch_)  # (the tutorial: "don't crash")
    return {"loss": loss, "loss_matches_reference": bool(tree_allclose(jax, loss, network(jax)[3][0])),
            "grads": grads}


def partial_manual_program(jax):
    """Beyond the tutorial: a shard_map manual over one axis of a 2x2 mesh (axis_names={'x'}): values, gradients
    inside and outside the body, axis_index, vmap, and JAX's errors for a spec or a collective naming the other
    axis."""
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    mesh = mesh_of(jax, (2, 2), ("x", "y"))
    x = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    out = {}

    def body(a):
        return jax.lax.psum(a * 2, "x") + jnp.sin(a)
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"}))
    out["value"] = np.asarray(f(x))
    out["grad_outside"] = np.asarray(jax.grad(lambda v: f(v).sum())(x))
    out["vmap"] = np.asarray(jax.vmap(f)(np.stack([x, x + 1])))

    def loss(p, xb):
        return jax.lax.pmean(((xb * p) ** 2).sum(), "x")
    g = jax.shard_map(lambda p, xb: jax.grad(loss)(p, xb), mesh=mesh, in_specs=(P(), P("x")), out_specs=P(),
                      axis_names={"x"})
    out["grad_inside"] = np.asarray(jax.jit(g)(np.float32(1.0), x))
    h = jax.shard_map(lambda a: a * jax.lax.axis_index("x"), mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                      axis_names={"x"})
    out["axis_index"] = np.asarray(jax.jit(h)(x))
    for what, make in (("spec_names_auto_axis", lambda: jax.shard_map(lambda a: a, mesh=mesh, in_specs=P("y"),
                                                                         out_specs=P("y"), axis_names={"x"})),
                       ("psum_over_auto_axis", lambda: jax.shard_map(lambda a: jax.lax.psum(a, "y"), mesh=mesh,
                                                                        in_specs=P("x"), out_specs=P("x"),
                                                                        axis_names={"x"}))):
        try:
            jax.jit(make())(x)
            out[what] = "no error"
        except (ValueError, NameError) as err:  # (the first words: JAX's and ember's texts go on differently)
            first = str(err).splitlines()[0]
            out[what] = f"{type(err).__name__}: " + ("unbound axis name: y" if "unbound axis name: y" in first
                                                     else first[:60])
    return out


def vmap_spmd_axis_name_program(jax):
    """Beyond the tutorial: vmap's spmd_axis_name splits the batch dimension of the sharding constraints inside the
    function over those mesh axes (their result shardings, values, a gradient)."""
    P, NamedSharding = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    mesh = mesh_of(jax, (2, 2), ("x", "y"))
    x = np.arange(16.0, dtype=np.float32).reshape(4, 4)

    def f(a):
        return jax.lax.with_sharding_constraint(a * 2, NamedSharding(mesh, P("y")))
    out = {}
    for name, spmd in (("one", "x"), ("tuple", ("x",)), ("none", None)):
        y = jax.jit(jax.vmap(f, spmd_axis_name=spmd))(x)
        out[name] = [str(tuple(y.sharding.spec)), np.asarray(y)]
    out["grad"] = np.asarray(jax.jit(jax.vmap(jax.grad(lambda a: (f(a) ** 2).sum()), spmd_axis_name="x"))(x))
    return out


PROGRAMS = [("matmul_basic", matmul_basic_program, {}),
            ("in_out_specs", in_out_specs_program, {}),
            ("vma", vma_program, {}),
            ("scan_vma", scan_vma_program, {}),
            ("collectives", collectives_program, {}),
            ("matmuls", matmul_programs, {}),
            ("data_parallel", data_parallel_program, {"rtol": 2e-4, "atol": 2e-5}),
            ("fsdp", fsdp_program, {"rtol": 2e-4, "atol": 2e-5}),
            ("tensor_parallel", tensor_parallel_program, {"rtol": 2e-4, "atol": 2e-5}),
            ("fsdp_tp", fsdp_tp_program, {"rtol": 2e-4, "atol": 2e-5}),
            ("pipeline_parallel", pipeline_parallel_program, {"rtol": 2e-4, "atol": 2e-5}),
            ("partial_manual", partial_manual_program, {"rtol": 1e-5, "atol": 1e-5}),
            ("vmap_spmd_axis_name", vmap_spmd_axis_name_program, {})]


def main():
    """Run every program on JAX and ember (in a process with 8 devices for each); print the mismatches, then "ok"."""
    t0 = time.perf_counter()
    for name, program, tolerances in PROGRAMS:
        run(name, program, **tolerances)
    print(f"{len(PROGRAMS)} programs in {time.perf_counter() - t0:.1f}s")
    print("ok" if not FAILS else f"FAILED {len(FAILS)}: {', '.join(FAILS)}")


@pytest.mark.slow  # (16 s; the default run covers shard_map in test_shard_map_vma.py, test_shard_map_eager.py and
# the collectives' tests; CI runs the slow tier too)
def test_shard_map_tutorial_programs():
    out = check_python(textwrap.dedent("""
        import sys
        sys.path.insert(0, "tests")
        from test_shard_map_programs import main
        main()
    """), timeout=300, env={"EMBER_NUM_CPU_DEVICES": "8", "JAX_NUM_CPU_DEVICES": "8"})
    assert out.strip().splitlines()[-1] == "ok", out
