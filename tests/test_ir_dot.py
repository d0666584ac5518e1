"""IR.to_dot (issue 27): a Graphviz graph of an IR, its sub-IRs as clusters. Checked structurally (every edge joins
declared nodes, one node per equation, one cluster per carried IR, labels quoted); no Graphviz binary is needed."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax


def count_eqns(ir):
    from ember._core.ir import sub_irs
    return sum(1 + sum(count_eqns(body) for body in sub_irs(e.params)) for e in ir.eqns)


def check(dot, ir):
    assert dot.startswith('digraph "') and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    nodes = set(re.findall(r"^\s*(\w+) \[", dot, re.M))
    for a, b in re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M):
        assert a in nodes and b in nodes, (a, b)
    assert len(re.findall(r"shape=ellipse", dot)) == count_eqns(ir)
    for label in re.findall(r'label=("(?:[^"\\]|\\.)*")', dot):  # quoted, with escapes only
        assert label.startswith('"') and label.endswith('"')


def test_a_plain_ir():
    ir = ember.make_ir(lambda x, y: enp.sin(x) * y + 2.0)(np.ones(3, np.float32), np.ones(3, np.float32))
    dot = ir.to_dot("f")
    check(dot, ir)
    assert "sin" in dot and "in 0: f32[3]" in dot and "out 0: f32[3]" in dot and "2.0:f32[]" in dot


def test_control_flow_bodies_are_clusters():
    def f(xs, w):
        carry, ys = lax.scan(lambda c, r: (c + r @ w, c.sum()), xs[0], xs)
        return lax.cond(ys.sum() > 0, lambda v: v * 2, lambda v: -v, carry)
    ir = ember.make_ir(f)(np.ones((3, 4), np.float32), np.ones((4, 4), np.float32))
    dot = ir.to_dot()
    check(dot, ir)
    assert dot.count("subgraph cluster_") == 3  # the scan's body and the cond's two branches
    assert "scan body 0" in dot and "cond body 1" in dot and "compound=true" in dot


def test_gradient_irs_and_quotes_in_names():
    ir = ember.grad(ember.make_ir(lambda x: enp.sum(enp.tanh(x) ** 2))(np.ones(4, np.float32)))
    check(ir.to_dot('say "hi"'), ir)
    assert 'digraph "say \\"hi\\""' in ir.to_dot('say "hi"')


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt install graphviz)")
def test_graphviz_renders_it(tmp_path):
    ir = ember.make_ir(ember.grad(lambda w, xs: lax.scan(lambda h, x: (enp.tanh(w * h + x),) * 2, 0.0, xs)[1].sum()))(
        np.float32(0.5), np.ones(3, np.float32))
    out = subprocess.run(["dot", "-Tsvg"], input=ir.to_dot("rnn"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count('class="cluster"') == 2 and "tanh" in out.stdout
