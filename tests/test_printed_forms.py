"""JAX's printed forms, character for character: jax.make_jaxpr(f)(...)'s text and
jax.ad_checkpoint.print_saved_residuals' lines, for programs from JAX's documentation (and its docstrings) that
ember stages as JAX does. One program runs twice, in subprocesses (JAX and ember's drop-in cannot share a
process): under JAX 0.10.2 and under `python -m ember.as_jax`; each case's printed text must be the same."""
import importlib.util
import os
import pathlib
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._core.jaxpr_print import brk, cat, format_doc, group, nest, text

ROOT = pathlib.Path(__file__).resolve().parent.parent
HAVE_JAX = importlib.util.find_spec("jax") is not None

PROGRAM = '''
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals


def case(name):
    print(f"=== {name}")


case("understanding_jaxprs_func1")  # (docs: "Understanding jaxprs")
def func1(first, second):
    temp = first + jnp.sin(second) * 3.0
    return jnp.sum(temp)
print(jax.make_jaxpr(func1)(jnp.zeros(8), jnp.ones(8)))

case("one_line")  # (a short jaxpr prints on one line)
print(jax.make_jaxpr(lambda x: x * 2.0)(jnp.ones(8)))

case("make_jaxpr_docstring")
print(jax.make_jaxpr(lambda x: jnp.cos(jnp.sin(x)))(3.0))

case("constvars")  # (a closed-over array: a constvar before the ';')
c = jnp.arange(8.0)
print(jax.make_jaxpr(lambda x: x + c)(jnp.ones(8)))

case("unused_output")  # (an unused result prints as _)
def unused(x):
    y = jnp.sin(x)
    return x * 2.0
print(jax.make_jaxpr(unused)(jnp.ones(3)))

case("dot_transpose_convert")  # (params broken onto their own lines; dtype params by name)
print(jax.make_jaxpr(lambda x: jnp.dot(x, x.T).astype(jnp.int32))(jnp.ones((3, 4))))

case("reshape_slice_reduce")
print(jax.make_jaxpr(lambda x: jnp.reshape(x, (2, 6)).transpose()[1:3, :].max(axis=0))(jnp.ones(12)))

case("select_broadcast_iota")
print(jax.make_jaxpr(lambda p, v: lax.select(p, jnp.broadcast_to(v, (2, 3)),
                                             lax.broadcasted_iota(jnp.float32, (2, 3), 1)))(
    jnp.ones((2, 3), bool), jnp.ones(3)))

case("integer_pow_concatenate_pad")
print(jax.make_jaxpr(lambda x: lax.pad(jnp.concatenate([x, x ** 3]), 0.0, [(1, 2, 0)]))(jnp.ones(3)))

case("argmax_exactly_too_wide")  # (80 columns and the closing brace: broken)
print(jax.make_jaxpr(lambda x: lax.argmax(x, 0, jnp.int32))(jnp.ones(3)))

case("lax_ops")  # (lax's own functions: JAX's params at their defaults)
v4, m34 = jnp.ones(4), jnp.ones((3, 4))
for fun in [lambda: lax.top_k(v4, 2), lambda: lax.conv(jnp.ones((1, 1, 5, 5)), jnp.ones((1, 1, 3, 3)), (1, 1), "SAME"),
            lambda: lax.reduce_window(m34, 0.0, lax.add, (2, 2), (1, 1), "VALID"),
            lambda: lax.sort((v4, jnp.ones(4, jnp.int32)), num_keys=1), lambda: lax.argmin(m34, 1, jnp.int32),
            lambda: lax.split(v4, (1, 3)), lambda: lax.map(jnp.sin, v4), lambda: lax.reduce(m34, 0.0, lax.add, (0,)),
            lambda: lax.reduce_precision(v4, 5, 10), lambda: lax.bitcast_convert_type(v4, jnp.int32),
            lambda: lax.expand_dims(v4, (0,)), lambda: lax.full((2,), 3.0), lambda: lax.optimization_barrier(v4),
            lambda: lax.broadcasted_iota(jnp.int32, (2, 3), 0),
            lambda: lax.rng_bit_generator(jnp.ones(4, jnp.uint32), (3,), algorithm=lax.RandomAlgorithm.RNG_PHILOX),
            lambda: lax.ragged_dot(jnp.ones((6, 2)), jnp.ones((2, 2, 3)), jnp.array([2, 3]))]:
    print(jax.make_jaxpr(fun)())

case("cond")  # (docs: control flow; branches=( ... ))
def cf(p, x):
    return lax.cond(p, lambda x: x + 1.0, lambda x: x - 1.0, x)
print(jax.make_jaxpr(cf)(True, jnp.ones(3)))

case("while_loop")
print(jax.make_jaxpr(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c + 1, x))(0))

case("fori_loop")
print(jax.make_jaxpr(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x))(jnp.ones(3)))

case("jit_inside")  # (jit[name=inner jaxpr={...}], the inner jaxpr named as the call's operands and results)
@jax.jit
def inner(x):
    return jnp.cos(x) + 1
print(jax.make_jaxpr(lambda x: inner(x) * 2)(jnp.ones(3)))

case("jit_twice_shared")  # (a jaxpr used twice prints first: let inner = ... in)
print(jax.make_jaxpr(lambda x: inner(inner(x)))(jnp.ones(3)))

case("jit_long_body_shared")  # (a nested jaxpr of more than 10 equations too)
@jax.jit
def big(x):
    for _ in range(6):
        x = jnp.sin(x) * 2.0
    return x
print(jax.make_jaxpr(lambda x: big(x) + 1.0)(jnp.ones(3)))

case("vmap_dot")
print(jax.make_jaxpr(jax.vmap(lambda x, y: jnp.dot(x, y)))(jnp.ones((2, 3)), jnp.ones((2, 3))))

case("cumsum_sort")
print(jax.make_jaxpr(lambda x: lax.cumsum(x) + lax.sort(x))(jnp.ones(3)))

case("custom_jvp")  # (docs: "Custom derivative rules")
@jax.custom_jvp
def cj(x):
    return jnp.sin(x)
@cj.defjvp
def cj_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return cj(x), jnp.cos(x) * t
print(jax.make_jaxpr(lambda x: cj(x) * 2.0)(jnp.ones(3)))

case("custom_vjp")
@jax.custom_vjp
def cv(x):
    return jnp.sin(x)
cv.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (g * jnp.cos(r),))
print(jax.make_jaxpr(lambda x: cv(x) * 2.0)(jnp.ones(3)))

case("checkpoint_remat2")
print(jax.make_jaxpr(lambda x: jax.checkpoint(jnp.sin)(x))(jnp.ones(3)))

case("open_jaxpr_and_equation")  # (closed.jaxpr, and one equation, print as JAX's)
closed = jax.make_jaxpr(lambda x: jnp.sin(x + c))(jnp.ones(8))
print(closed.jaxpr)
print(closed.eqns[-1])

case("source_info")  # (pretty_print(source_info=True): file:line:column (function), aligned)
def with_sources(x, y):
    z = jnp.sin(x) * y
    return jnp.sum(z + 2.0)
print(jax.make_jaxpr(with_sources)(jnp.ones(3), jnp.ones(3)).pretty_print(source_info=True, use_color=False))
print(jax.make_jaxpr(lambda x: x * 2.0)(jnp.ones(8)).pretty_print(source_info=True, use_color=False))

case("name_stack")  # (named scopes as [outer/inner]; with the source too, one annotation under the other)
def scoped(x):
    with jax.named_scope("outer"):
        y = jnp.sin(x)
        with jax.named_scope("inner"):
            y = y * 2.0
    return y + 1.0
scoped_jaxpr = jax.make_jaxpr(scoped)(jnp.ones(3))
print(scoped_jaxpr.pretty_print(name_stack=True, use_color=False))
print(scoped_jaxpr.pretty_print(name_stack=True, source_info=True, use_color=False))

# print_saved_residuals (docs: "Gradient checkpointing with jax.checkpoint")
def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)

def f(W1, W2, W3, x):
    x = g(W1, x)
    x = g(W2, x)
    x = g(W3, x)
    return x

W1, W2, W3, x = jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4)
case("residuals_plain")
print_saved_residuals(f, W1, W2, W3, x)
case("residuals_checkpoint")
print_saved_residuals(jax.checkpoint(f), W1, W2, W3, x)
case("residuals_dots_saveable")
print_saved_residuals(jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable),
                      W1, W2, W3, x)

def g2(W, x):
    y = jnp.dot(W, x)
    y = checkpoint_name(y, "y")
    return jnp.sin(y)

def f2(W1, W2, W3, x):
    x = g2(W1, x)
    x = g2(W2, x)
    x = g2(W3, x)
    return x
case("residuals_named")
print_saved_residuals(jax.checkpoint(f2, policy=jax.checkpoint_policies.save_only_these_names("y")), W1, W2, W3, x)

def loss(params, x, y):
    return jnp.sum((predict(params, x) - y) ** 2)

def predict(params, x):
    *Ws, Wlast = params
    for W in Ws:
        x = layer(W, x)
    return jnp.dot(Wlast, x)

def layer(W, x):
    return jnp.sin(jnp.dot(W, x))
case("residuals_loss")
print_saved_residuals(loss, [W1, W2, jnp.ones((3, 6))], x, jnp.ones(3))
case("residuals_columns")
print_saved_residuals(lambda x: jnp.sin(jnp.sin(x)), 3.0)
'''


def _run(tmp: pathlib.Path, *runner: str) -> dict[str, str]:
    path = tmp / "printed_forms_prog.py"  # (the same file name in both runs: residuals print it)
    path.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "EMBER_", "PYTEST_"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, *runner, str(path)], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases: dict[str, str] = {}
    name = None
    for line in proc.stdout.splitlines():
        if line.startswith("=== "):
            name = line[4:]
            cases[name] = ""
        elif name is not None:
            cases[name] += line + "\n"
    return cases


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("printed_forms")
    return _run(tmp, "-m", "ember.as_jax"), _run(tmp)


CASES = re.findall(r'^case\("([^"]+)"\)', PROGRAM, re.MULTILINE)


@pytest.mark.skipif(not HAVE_JAX, reason="needs jax (the oracle)")
@pytest.mark.parametrize("name", CASES)
def test_printed_as_jax_prints(printed, name):
    ours, jaxs = printed
    assert set(ours) == set(jaxs) == set(CASES)
    assert ours[name] == jaxs[name], f"ember:\n{ours[name]}\njax:\n{jaxs[name]}"


def test_make_jaxpr_is_still_an_ir_and_stage_out_prints_embers_form():
    ir = ember.make_jaxpr(lambda x, y: enp.sum(enp.sin(x) * y))(enp.ones(3), enp.float32(2))
    assert isinstance(ir, ember.IR) and [e.prim.name for e in ir.eqns] == ["sin", "mul", "reduce_sum"]
    assert str(ir).startswith("{ lambda ; a:f32[3] b:f32[]. let") and repr(ir) == str(ir) == ir.pretty_print()
    assert str(ir).endswith("  in (e,) }")
    np.testing.assert_allclose(float(ember.jit(lambda x, y: enp.sum(enp.sin(x) * y))(enp.ones(3), 2.0)),
                               6 * np.sin(1.0), rtol=1e-6)
    own = ember.stage_out(lambda x: x * 2.0, ember.ShapeDtypeStruct((8,), np.float32))
    assert str(own).startswith("{ lambda a:f32[8] . let")  # (ember's own IR printing is unchanged)


def test_layout_breaks_groups_that_do_not_fit():
    doc = group(cat(nest(2, cat(text("["), brk(""), text("a" * 30), brk(), text("b" * 30))), brk(""), text("]")))
    assert format_doc(doc, 80) == "[" + "a" * 30 + " " + "b" * 30 + "]"
    assert format_doc(doc, 40) == "[\n  " + "a" * 30 + "\n  " + "b" * 30 + "\n]"
    assert format_doc(cat(doc, text("x" * 20)), 70) == "[\n  " + "a" * 30 + "\n  " + "b" * 30 + "\n]" + "x" * 20


def test_sources_know_their_column_and_pickle_with_it():
    def f(x):
        return enp.sin(enp.cos(x))  # (cos at column 23, sin at 15)
    ir = ember.make_jaxpr(f)(1.0)
    cos, sin = ir.eqns
    assert (cos.source.column, sin.source.column) == (23, 15)
    assert cos.source.with_column().endswith(f":{cos.source.lineno}:23 (f)")
    again = pickle.loads(pickle.dumps(cos.source))
    assert again == cos.source and again.column == 23
