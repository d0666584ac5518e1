"""Oracle tests for ember/_control/ (cond, while, scan): every control-flow primitive has a Case below, checked
like the first-order primitives (values eagerly and under jit, derivatives against JAX and finite differences,
batching against a loop over the batch). The numpy oracles are plain Python loops and branches."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np

import jax
from jax.ad_checkpoint import checkpoint_name as jax_checkpoint_name

import ember
from ember.experimental.buffer_callback import buffer_callback
from ember.experimental.control_deps import control_dep
from ember.experimental.custom_partitioning import custom_partitioning
import ember.numpy as enp
from ember import lax
from ember.ad_checkpoint import checkpoint_name
from ffi_handlers import register_python_sin
from oracle import Case, oracle_tests

F = ["float32", "float64"]


# cond: p enters both the predicate and the branches
def _cond(lib, np_):
    return lambda p, x: lib.cond(p > 0, lambda x: np_.sin(x) * p, lambda x: np_.cos(x) + p, x)


def _np_cond(p, x):
    return (np.sin(x) * p if p > 0 else np.cos(x) + p).astype(x.dtype)


def _switch(lib, np_):
    branches = [lambda x: np_.sin(x), lambda x: x * x, lambda x: np_.tanh(x) - 1.0]
    return lambda i, x: lib.switch(i, branches, x)


def _np_switch(i, x):
    k = int(np.clip(i, 0, 2))
    return [np.sin(x), x * x, np.tanh(x) - 1.0][k].astype(x.dtype)


# while: a fixed trip count (the predicate reads only the counter), and one that depends on the data
def _while_fixed(lib, np_):
    return lambda x: lib.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, np_.sin(c[1]) * 1.5 + c[1]), (0, x))[1]


def _unrolled_while_fixed(x):  # (JAX's oracle for reverse mode, which JAX's while_loop refuses)
    return jlax.fori_loop(0, 3, lambda i, v: jnp.sin(v) * 1.5 + v, x)


def _np_while_fixed(x):
    for _ in range(3):
        x = np.sin(x) * 1.5 + x
    return x.astype(x.dtype)


def _while_data(lib, np_):
    return lambda x: lib.while_loop(lambda v: np_.sum(v) < 10.0, lambda v: v * 2.0 + 1.0, x)


def _np_while_data(x):
    while x.sum() < 10.0:
        x = x * 2.0 + 1.0
    return x


# scan: an RNN cell over xs (final carry, and the stacked outputs), in both directions; fori_loop and map
def _rnn(lib, np_, reverse=False, final=False):
    def f(w, xs):
        carry, ys = lib.scan(lambda h, x: (np_.tanh(w * h + x), h * x), np_.zeros_like(xs[0]), xs, reverse=reverse)
        return carry if final else ys
    return f


def _np_rnn(reverse=False, final=False):
    def f(w, xs):
        h, ys = np.zeros_like(xs[0]), []
        for x in (xs[::-1] if reverse else xs):
            ys.append(h * x)
            h = np.tanh(w * h + x)
        ys = np.stack(ys[::-1] if reverse else ys)
        return (h if final else ys).astype(xs.dtype)
    return f


def _fori(lib, np_):
    return lambda x: lib.fori_loop(1, 4, lambda i, v: v * np_.cos(v) + i, x)


def _np_fori(x):
    for i in range(1, 4):
        x = x * np.cos(x) + i
    return x.astype(x.dtype)


# custom rules: a custom_jvp whose rule is the true derivative (so JAX and finite differences agree with it),
# a custom_vjp likewise, a checkpointed function, and the optimization barrier
# custom_linear_solve: a dense, well-conditioned system; the derivatives come from the system, not from the solve
def _linear_solve(lib, np_):
    def f(a, b):
        m = a + 4.0 * np_.eye(a.shape[0], dtype=a.dtype)
        return lib.custom_linear_solve(lambda x: m @ x, b, lambda mv, r: np_.linalg.solve(m, r),
                                       lambda vm, r: np_.linalg.solve(m.T, r))
    return f


def _custom_jvp_fn(lib, np_):
    @lib.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), np_.cos(x) * y * tx + np_.sin(x) * ty
    return f


def _custom_vjp_fn(lib, np_):
    @lib.custom_vjp
    def g(x):
        return np_.exp(x) * x

    def g_fwd(x):
        e = np_.exp(x)
        return e * x, (e, x)

    def g_bwd(res, ct):
        e, x = res
        return (ct * e * (x + 1.0),)
    g.defvjp(g_fwd, g_bwd)
    return g


def _checkpointed(lib, np_, policy=None):
    return lib.checkpoint(lambda x, w: np_.tanh(np_.tanh(x * w) * w) * x, policy=policy)


def _exported_call(x, w):
    """The exported program of tanh(x * w) + x at x's and w's types, through serialize (vjp_order=2) and
    deserialize, called: binds call_exported."""
    structs = [ember.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, w)]
    exported = ember.export.export(ember.jit(lambda a, b: enp.tanh(a * b) + a))(*structs)
    return ember.export.deserialize(exported.serialize(vjp_order=2)).call(x, w)


SCAN_SHAPES = [((), (4, 3)), ((3,), (5, 3)), ((), (1, 2))]

def _custom_partitioned():
    f = custom_partitioning(lambda x, y: enp.sin(x) * y)
    f.def_partition(partition=lambda mesh, args, result: (mesh, lambda x, y: enp.sin(x) * y, args[0].sharding,
                                                          tuple(a.sharding for a in args)),
                    sharding_rule="..., ... -> ...")
    return lambda x, y: f(x, y)


def _control_dep(np_):
    def f(x, y):
        b = np_.cos(y)
        a = np_.sin(x)
        control_dep(a, b)
        return a + b * 2
    return f


def _platform_dependent(lib, np_):
    return lambda x, y: lib.platform_dependent(x, y, cpu=lambda a, b: np_.sin(a) * b, tpu=lambda a, b: a + b,
                                               default=lambda a, b: a - b)


CASES = [
    Case("cond", _cond(lax, enp), _np_cond, [((), (5,)), ((), (2, 3))], F, jax=_cond(jlax, jnp)),
    Case("cond", _switch(lax, enp), _np_switch, [((), (4,))], F, jax=_switch(jlax, jnp),
         arg_dtypes=["int32", None], name="switch"),
    Case("while", _while_fixed(lax, enp), _np_while_fixed, [((4,),), ((2, 3),)], F, jax=_unrolled_while_fixed),
    Case("while", _while_data(lax, enp), _np_while_data, [((3,),), ((2, 2),)], F, domain="positive",
         name="while_data_dependent"),  # (derivatives: finite differences; JAX's differ only in their trip count)
    Case("scan", _rnn(lax, enp), _np_rnn(), SCAN_SHAPES, F, jax=_rnn(jlax, jnp)),
    Case("scan", _rnn(lax, enp, final=True), _np_rnn(final=True), SCAN_SHAPES[:2], F,
         jax=_rnn(jlax, jnp, final=True), name="scan_carry"),
    Case("scan", _rnn(lax, enp, reverse=True), _np_rnn(reverse=True), SCAN_SHAPES[:2], F,
         jax=_rnn(jlax, jnp, reverse=True), name="scan_reverse"),
    Case("scan", _fori(lax, enp), _np_fori, [((3,),)], F, jax=_fori(jlax, jnp), name="fori_loop"),
    Case("scan", lambda xs: lax.map(lambda r: enp.sum(r * r), xs), lambda xs: (xs * xs).sum(1).astype(xs.dtype),
         [((4, 3),)], F, jax=lambda xs: jlax.map(lambda r: jnp.sum(r * r), xs), name="map"),
    Case("custom_jvp_call", _custom_jvp_fn(ember, enp), lambda x, y: (np.sin(x) * y).astype(x.dtype),
         [((4,), (4,)), ((2, 3), (2, 3))], F, jax=_custom_jvp_fn(jax, jnp)),
    Case("linear_solve", _linear_solve(lax, enp),
         lambda a, b: np.linalg.solve(a + 4.0 * np.eye(a.shape[0]), b).astype(a.dtype), [((3, 3), (3,)),
         ((2, 2), (2,))], F, jax=_linear_solve(jlax, jnp), domain="unit"),
    Case("custom_vjp_call", _custom_vjp_fn(ember, enp), lambda x: (np.exp(x) * x).astype(x.dtype),
         [((4,),), ((2, 3),)], F, jax=_custom_vjp_fn(jax, jnp), forward=False),
    Case("remat", _checkpointed(ember, enp), lambda x, w: (np.tanh(np.tanh(x * w) * w) * x).astype(x.dtype),
         [((4,), (4,)), ((3,), ())], F, jax=_checkpointed(jax, jnp)),
    Case("call_exported", _exported_call, lambda x, w: (np.tanh(x * w) + x).astype(x.dtype), [((4,), (4,)),
         ((2, 3), (3,))], F, jax=lambda x, w: jnp.tanh(x * w) + x, forward=False),
    Case("remat", _checkpointed(ember, enp, ember.checkpoint_policies.dots_saveable),
         lambda x, w: (np.tanh(np.tanh(x * w) * w) * x).astype(x.dtype), [((4,), (4,))], F,
         jax=_checkpointed(jax, jnp, jax.checkpoint_policies.dots_saveable), name="remat_policy"),
    Case("name", lambda x: checkpoint_name(enp.sin(x), "s") * x, lambda x: (np.sin(x) * x).astype(x.dtype),
         [((3,),), ((2, 2),)], F, jax=lambda x: jax_checkpoint_name(jnp.sin(x), "s") * x),
    Case("optimization_barrier", lambda x: lax.optimization_barrier(x) * 2.0, lambda x: x * 2.0,
         [((3,),), ((2, 2),)], F, jax=lambda x: jlax.optimization_barrier(x) * 2.0),
    # host callbacks (ember/_control/callbacks.py; behaviour in tests/test_callbacks.py): values, vmap (sequential:
    # a scan of calls), and the refusal of derivatives; debug_callback's derivatives are its primal's
    Case("pure_callback", lambda x: ember.pure_callback(np.sin, ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                                                        vmap_method="sequential"),
         np.sin, [((3,),)], F, forward=False, reverse=False),
    Case("io_callback", lambda x: ember.experimental.io_callback(np.cos, ember.ShapeDtypeStruct(x.shape, x.dtype), x),
         np.cos, [((3,),)], F, forward=False, reverse=False),
    Case("buffer_callback", lambda x: buffer_callback(
        lambda ctx, out, a: np.copyto(np.asarray(out), np.sin(np.asarray(a))),
        ember.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="sequential")(x),
         np.sin, [((3,),), ((2, 2),)], F, forward=False, reverse=False),
    Case("debug_callback", lambda x: (ember.debug.callback(lambda v: None, x), x * 2.0)[1], lambda x: x * 2.0,
         [((3,),)], F, jax=lambda x: x * 2.0, jacobians=False),
    # a user's FFI handler (ember/_control/ffi.py; behaviour against jax.ffi in tests/test_ffi.py): a handler
    # written in Python with ctypes, vmap as a scan of calls, and the refusal of derivatives
    Case("ffi_call", lambda x: ember.ffi.ffi_call(register_python_sin(), ember.ShapeDtypeStruct(x.shape, x.dtype),
                                                  vmap_method="sequential")(x),
         np.sin, [((3,),), ((2, 3),)], F, forward=False, reverse=False),
    Case("ffi_call", lambda x: ember.ffi.ffi_call(register_python_sin(), ember.ShapeDtypeStruct(x.shape, x.dtype),
                                                  vmap_method="sequential")(x),
         np.sin, [((3,),)], ["complex64", "complex128"], grad=False, name="ffi_call_complex"),
    # composite: values eagerly (its decomposition) and under jit (a stablehlo.composite the plugin inlines); no
    # derivative and no batching, as JAX's (the errors checked)
    Case("composite", lambda x, y: lax.composite(lambda a, b, *, k: enp.sin(a) * b + k, "ember.sin_times")(x, y, k=1.0),
         lambda x, y: (np.sin(x) * y + 1.0).astype(x.dtype), [((3,), (3,))], F, forward=False, reverse=False,
         batching=False),
    # custom_partitioning: the function's own computation (the rules kept, not called: the plugin has no partitioner
    # callback); no derivative and no batching, as JAX's (the errors checked); behaviour in
    # tests/test_custom_partitioning.py
    Case("custom_partitioning", _custom_partitioned(), lambda x, y: (np.sin(x) * y).astype(x.dtype),
         [((3,), (3,)), ((2, 2), (2, 2))], F, forward=False, reverse=False, batching=False),
    Case("custom_partitioning", _custom_partitioned(), lambda x, y: (np.sin(x) * y).astype(x.dtype),
         [((3,), (3,))], ["complex64", "complex128"], forward=False, reverse=False, batching=False,
         name="custom_partitioning_complex"),
    # dce_sink: a value marked used (an effect, kept by every pass), its rules linear as JAX's (whose Hessian of it
    # fails: safe_zip of its zero outputs)
    Case("dce_sink", lambda x: (lax.dce_sink(enp.sin(x)), x * 2.0)[1], lambda x: x * 2.0, [((3,),), ((2, 2),)], F,
         jax=lambda x: (jlax.dce_sink(jnp.sin(x)), x * 2.0)[1], jacobians=False),
    # control_dep: the destination's equation ordered after the source's (tests/test_control_deps.py checks the
    # order in the lowered program); no outputs, its rules order the primal and batched computations
    Case("control_dep", _control_dep(enp), lambda x, y: (np.sin(x) + np.cos(y) * 2).astype(x.dtype),
         [((3,), (3,)), ((2, 2), ())], F, jax=lambda x, y: jnp.sin(x) + jnp.cos(y) * 2, jacobians=False),
    Case("control_dep", _control_dep(enp), lambda x, y: (np.sin(x) + np.cos(y) * 2).astype(x.dtype),
         [((3,), (3,))], ["complex64", "complex128"], jax=lambda x, y: jnp.sin(x) + jnp.cos(y) * 2, jacobians=False,
         name="control_dep_complex"),
    # platform_dependent: the CPU's branch (its index a constant of the module; the other branches never lowered),
    # eagerly, under jit and every transformation, as JAX's
    Case("platform_index", _platform_dependent(lax, enp), lambda x, y: (np.sin(x) * y).astype(x.dtype),
         [((3,), (3,)), ((2, 2), ())], F, jax=_platform_dependent(jlax, jnp)),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
