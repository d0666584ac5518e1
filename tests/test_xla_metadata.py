"""ember.experimental.xla_metadata.set_xla_metadata against JAX's: the same programs lowered by both carry the same
XLA frontend attributes on the same ops (nested blocks merged, values written as JAX writes them, kept by grad and
vmap on what each equation becomes), and computing with them gives the numbers computed without."""
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.xla_metadata import set_xla_metadata as jax_set_xla_metadata

import ember
import ember.numpy as enp
from ember.experimental.xla_metadata import set_xla_metadata

LIBS = {"jax": (jax, jnp, jax_set_xla_metadata), "ember": (ember, enp, set_xla_metadata)}


def _attributes(text):
    """The (op, frontend attributes) pairs of a module's text: which kinds of ops carry which attributes (each
    compiler writes its ops in its own order, and a derivative may take other ops: JAX's tanh rule is not ember's).
    An op with regions written over several lines (ember's generic form) has its attributes on its closing line."""
    found, open_ops = set(), []
    for line in text.splitlines():
        op = re.search(r"stablehlo\.[a-z_]+", line)
        if re.match(r"\s*\}\)", line):
            op = open_ops.pop()
        elif op and line.rstrip().endswith("({"):
            open_ops.append(op)
            continue
        attrs = re.search(r"mhlo\.frontend_attributes = (\{[^}]*\})", line)
        if op and attrs:
            found.add((op.group(0), attrs.group(1)))
    return found


def nested(m, np_, meta, x):
    with meta(a="b", n=1):
        y = np_.sin(x) * 2
        with meta(c=True, a="z", f=0.5):
            z = y + 1
            with meta(n=None):  # (None takes a key away)
                z = np_.exp(z)
    return z.sum()


def decorated(m, np_, meta, x):
    return meta(layer="dense", idx=3)(lambda v: np_.tanh(v @ v.T))(x.reshape(3, 1))


def value_form(m, np_, meta, x):
    y = meta(np_.exp(x) + 1, k="v")
    return meta({"a": y * 2, "b": np_.cos(x)}, tag="pair")


def control_flow(m, np_, meta, x):
    with meta(loop="yes"):
        y = m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2 + 1), (0, x))[1]
    with meta(branch=True):
        return m.lax.cond(y.sum() > 0, lambda v: v * 2, lambda v: v - 1, y)


PROGRAMS = {"nested": nested, "decorated": decorated, "value_form": value_form,
            "control_flow": control_flow}


def _total(m, out):
    return sum(m.numpy.sum(leaf) for leaf in m.tree_util.tree_leaves(out))


TRANSFORMS = {"jit": lambda m, f: m.jit(f), "grad": lambda m, f: m.jit(m.grad(lambda x: _total(m, f(x)))),
              "vmap": lambda m, f: m.jit(m.vmap(f))}


class _NoBlock:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None

    def __call__(self, fun):
        return fun


def no_metadata(x=None, **metadata):
    """set_xla_metadata's forms, doing nothing: the programs without metadata."""
    return _NoBlock() if x is None else x


def _program(name, transform, lib, meta=None):
    m, np_, set_meta = LIBS[lib]
    f = TRANSFORMS[transform](m, lambda x: PROGRAMS[name](m, np_, meta or set_meta, x))
    x = np.linspace(0.1, 0.9, 6, dtype=np.float32)
    return f, (x.reshape(2, 3) if transform == "vmap" else x[:3])


# (JAX differentiates no while_loop in reverse mode)
COMBINATIONS = [(n, t) for n in sorted(PROGRAMS) for t in sorted(TRANSFORMS) if (n, t) != ("control_flow", "grad")]


@pytest.mark.parametrize("name, transform", COMBINATIONS)
def test_frontend_attributes_as_jax(name, transform):
    texts = {}
    for lib in LIBS:
        f, x = _program(name, transform, lib)
        texts[lib] = f.lower(x).as_text()
    assert _attributes(texts["ember"]) == _attributes(texts["jax"])
    # (under grad, the value form's ops are the primal's, which the gradient drops, in both)
    assert bool(_attributes(texts["jax"])) == (name != "value_form" or transform != "grad")


@pytest.mark.parametrize("name, transform", COMBINATIONS)
def test_the_numbers_are_unchanged(name, transform):
    f, x = _program(name, transform, "ember")
    plain, _ = _program(name, transform, "ember", no_metadata)
    theirs, _ = _program(name, transform, "jax")
    assert ("frontend_attributes" in f.lower(x).as_text()) == (name != "value_form" or transform != "grad")
    assert "frontend_attributes" not in plain.lower(x).as_text()
    for ours, same, jaxs in zip(*(jax.tree.leaves(g(x)) for g in (f, plain, theirs))):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(same))
        np.testing.assert_allclose(np.asarray(ours), np.asarray(jaxs), rtol=2e-6, atol=1e-6)


def test_a_jitted_function_is_traced_again_under_other_metadata():
    f = ember.jit(lambda x: enp.sin(x))
    x = np.ones(3, np.float32)
    assert "frontend_attributes" not in f.lower(x).as_text()
    with set_xla_metadata(phase="eval"):
        assert 'phase = "eval"' in f.lower(x).as_text()
        np.testing.assert_allclose(np.asarray(f(x)), np.sin(x), rtol=1e-6)
    assert "frontend_attributes" not in f.lower(x).as_text()


def test_a_decorated_jitted_function_lowers_inside_the_block():
    """As JAX's decorator: the function's callable attributes (lower) run under the metadata too."""
    for m, np_, meta in LIBS.values():
        f = meta(role="head")(m.jit(lambda x: np_.cos(x)))
        assert 'role = "head"' in f.lower(np.ones(2, np.float32)).as_text()


def test_as_jax_reaches_set_xla_metadata():
    code = ("import ember.as_jax; ember.as_jax.install(); import jax, jax.numpy as jnp, ember\n"
            "from jax.experimental.xla_metadata import set_xla_metadata\n"
            "assert set_xla_metadata is ember.experimental.xla_metadata.set_xla_metadata\n"
            "with set_xla_metadata(k=1):\n"
            "    print(jax.jit(jnp.sin).lower(jnp.ones(2)).as_text())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and 'mhlo.frontend_attributes = {k = "1"}' in done.stdout, done.stderr
