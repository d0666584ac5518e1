"""Sub-IR transformations are computed once per request (ember._transforms.cache), and reverse mode checks the
cotangents its rules return.

Staging vmap(grad(f)) of loops nested d deep must transform each sub-IR at most once per distinct request, so the
number of transformations grows linearly with d (recomputing them grew it about 2^d); the results must stay right
(compared with JAX), and a cached result must die with its IR."""
from __future__ import annotations

import gc
import importlib
import sys
import weakref
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._core import IR, Primitive, ShapedArray, Var, stage_flat
from ember._core.cache import clear_all_caches
from ember._core.dtypes import float32
from ember._transforms import ad as ad_module
from ember._transforms import batching as batching_module
from ember._transforms import jvp as jvp_module
from ember._transforms.ad import RuleError
from ember._transforms.batching import BATCHED, batch_ir
from ember._transforms.cache import TransformCache, holds_tracers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
staging_depth = importlib.import_module("staging_depth")  # the benchmark's nested programs (one per loop kind)

loops_module = importlib.import_module("ember._control.loops")  # (ember._control re-exports functions of its name)

KINDS = ("scan", "cond", "while")
X = np.linspace(0.1, 0.9, 12, dtype=np.float32).reshape(4, 3)

# the uncached transformations, by module, and what their request is made of (the arguments after the IR)
UNCACHED = [(batching_module, "stage_batched"), (jvp_module, "stage_jvp"), (ad_module, "stage_vjp"),
            (loops_module, "_stage_scan_body_split")]


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list | tuple) else value


class TransformCalls:
    """Records every call of the uncached transformations: (name, IR, request) in order. The IRs are held, so
    that no id is reused while the test runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.calls: list[tuple[str, IR, Any]] = []
        for module, name in UNCACHED:
            monkeypatch.setattr(module, name, self._recording(name, getattr(module, name)))

    def _recording(self, name: str, transform: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(ir: IR, *request: Any) -> Any:
            self.calls.append((name, ir, _hashable(request)))
            return transform(ir, *request)
        return recorded

    def repeated(self) -> list[tuple[str, Any]]:
        """The (transformation, request) pairs computed more than once for the same IR object."""
        counts = Counter((name, id(ir), request) for name, ir, request in self.calls)
        return [(name, request) for (name, _, request), n in counts.items() if n > 1]


def _derivative_of_nested(kind: str, depth: int) -> Callable[[Any], Any]:
    f = staging_depth.nested(ember.lax, enp, kind, depth)
    return ember.vmap(staging_depth.derivative(ember, f, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_each_sub_ir_is_transformed_once_per_request_and_the_count_grows_linearly(kind, monkeypatch):
    recorder = TransformCalls(monkeypatch)
    totals = []
    for depth in range(1, 5):
        recorder.calls.clear()
        clear_all_caches()
        ember.make_ir(_derivative_of_nested(kind, depth))(ember.asarray(X))
        assert recorder.repeated() == [], f"depth {depth}: transformed again"
        totals.append(len(recorder.calls))
    steps = [b - a for a, b in zip(totals, totals[1:])]
    assert all(s > 0 for s in steps), totals
    assert max(steps) == min(steps), f"transformations per depth {totals}: not linear"  # the same work per level


@pytest.mark.parametrize("kind", KINDS)
def test_nested_loops_match_jax(kind):
    depth = 3
    got = _derivative_of_nested(kind, depth)(ember.asarray(X))
    jf = staging_depth.nested(jax.lax, jnp, kind, depth)
    want = jax.vmap(staging_depth.derivative(jax, jf, kind))(jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)


def test_nested_scans_under_jit_match_jax():
    f = staging_depth.nested(ember.lax, enp, "scan", 2)
    got = ember.jit(ember.vmap(ember.grad(f)))(ember.asarray(X))
    want = jax.vmap(jax.grad(staging_depth.nested(jax.lax, jnp, "scan", 2)))(jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)


def _sin_ir() -> IR:
    return stage_flat(lambda x: [enp.sin(x) * 2.0], [ShapedArray((3,), float32)])


def test_a_cache_entry_dies_with_its_ir_and_does_not_keep_it_alive():
    ir = _sin_ir()
    batched, dims = batch_ir(ir, [0], 4)
    assert dims == [0] and batched.in_avals[0].shape == (4, 3)
    assert batch_ir(ir, [0], 4)[0] is batched  # the same request: the kept result
    assert batch_ir(ir, [0], 5)[0] is not batched  # another request
    assert BATCHED.requests(ir) == 2
    alive = weakref.ref(ir)
    kept = len(BATCHED)
    del ir
    gc.collect()
    assert alive() is None, "the cached result keeps its IR alive"
    assert len(BATCHED) == kept - 1
    assert batched.in_avals[0].shape == (4, 3)  # the result lives on without its IR


def test_out_dims_requests_reuse_the_natural_batching(monkeypatch):
    recorder = TransformCalls(monkeypatch)
    ir = _sin_ir()
    natural, _ = batch_ir(ir, [0], 4)
    moved, dims = batch_ir(ir, [0], 4, [1])
    assert dims == [1] and moved.out_avals[0].shape == (3, 4)
    assert batch_ir(ir, [0], 4, [0])[0] is natural  # the natural dims asked for: the natural IR itself
    assert [name for name, _, _ in recorder.calls] == ["stage_batched"]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(np.asarray(ember.eval_ir(moved, ember.asarray(x))), 2 * np.sin(x).T, rtol=1e-6)


def test_enable_x64_is_part_of_every_request():
    ir = _sin_ir()
    narrow, _ = batch_ir(ir, [0], 2)
    with ember.config.override(enable_x64=True):
        wide, _ = batch_ir(ir, [0], 2)
        assert batch_ir(ir, [0], 2)[0] is wide
    assert wide is not narrow
    assert batch_ir(ir, [0], 2)[0] is narrow


def test_a_result_holding_tracers_of_an_enclosing_staging_is_not_kept():
    cache = TransformCache("test")
    ir = _sin_ir()

    def stage(x: Any) -> list[Any]:  # a "transformation" that captured x, a tracer of this staging, as a constant
        cache.get(ir, "captures", lambda: IR([Var(x.aval)], [x], [], [], []))
        return [x]
    stage_flat(stage, [ShapedArray((3,), float32)])
    assert cache.requests(ir) == 0
    kept = cache.get(ir, "closed", _sin_ir)
    assert cache.requests(ir) == 1 and cache.get(ir, "closed", _sin_ir) is kept


def test_a_custom_rule_closing_over_an_outer_tracer_is_not_cached(monkeypatch):
    """The body's VJP runs a custom_jvp rule that closes over w, a tracer of the enclosing jit: that VJP holds w
    as a constant, so it is used once and not kept; the values follow each call's w."""
    made: list[tuple[IR, IR]] = []
    stage_vjp = ad_module.stage_vjp

    def recording(ir: IR, *request: Any) -> IR:
        made.append((ir, stage_vjp(ir, *request)))
        return made[-1][1]
    monkeypatch.setattr(ad_module, "stage_vjp", recording)

    def loss(lib: Any, np_: Any, x: Any, w: Any) -> Any:
        @lib.custom_jvp
        def g(y):
            return np_.sin(y)

        @g.defjvp
        def g_jvp(primals, tangents):
            return np_.sin(primals[0]), np_.cos(primals[0]) * tangents[0] * w
        return lib.lax.scan(lambda c, _: (g(c) + c, None), x, None, length=3)[0].sum()

    def grads(lib: Any, np_: Any) -> Callable[..., Any]:  # w is traced by the jit, not by grad
        return lambda x, w: lib.vmap(lib.grad(lambda x: loss(lib, np_, x, w)))(x)
    for w in (0.5, 1.5):
        got = ember.jit(grads(ember, enp))(ember.asarray(X), np.float32(w))
        want = jax.jit(grads(jax, jnp))(jnp.asarray(X), np.float32(w))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5)
    capturing = [ir for ir, result in made if holds_tracers(result)]
    assert capturing, "no VJP captured the outer tracer: the test does not test what it says"
    assert all(ad_module.VJPS.requests(ir) == 0 for ir in capturing)


# ---------------------------------------------------------------------------------------------------------------
# Reverse mode checks the cotangents its rules return
def _scale_primitive(name: str) -> Primitive:
    """A throwaway primitive x -> 2x (unregistered), with a vjp rule returning a cotangent of the wrong shape."""
    prim = Primitive(name, register=False)
    prim.def_rule("abstract_eval", lambda x: x)
    prim.def_rule("vjp", lambda cts, ins, outs, needs: [enp.sum(cts[0])])
    return prim


def test_a_vjp_rule_returning_a_wrong_shape_is_an_internal_error():
    prim = _scale_primitive("wrong_shape_vjp")
    with pytest.raises(RuleError, match=r"vjp rule of primitive 'wrong_shape_vjp'.*f32\[\].*input 0.*f32\[3\]"):
        ember.make_ir(ember.grad(lambda x: enp.sum(prim.bind(x))))(np.ones(3, np.float32))


def test_a_vjp_split_pullback_returning_a_wrong_shape_is_an_internal_error():
    prim = _scale_primitive("wrong_shape_vjp_split")
    prim.def_rule("vjp_split", lambda ins, active: ([ins[0]], lambda cts, needs: [enp.ones((2,), np.float32)]))
    with pytest.raises(RuleError, match=r"vjp_split rule of primitive 'wrong_shape_vjp_split'.*f32\[2\]"):
        ember.make_ir(ember.grad(lambda x: enp.sum(prim.bind(x))))(np.ones(3, np.float32))


def test_a_vjp_rule_returning_an_integer_cotangent_is_an_internal_error():
    prim = Primitive("integer_vjp", register=False)
    prim.def_rule("abstract_eval", lambda x: x)
    prim.def_rule("vjp", lambda cts, ins, outs, needs: [enp.zeros((3,), np.int32)])
    with pytest.raises(RuleError, match="integer_vjp"):
        ember.make_ir(ember.grad(lambda x: enp.sum(prim.bind(x))))(np.ones(3, np.float32))


def test_a_lower_precision_cotangent_is_cast_not_an_error():
    prim = Primitive("half_vjp", register=False)
    prim.def_rule("abstract_eval", lambda x: x)
    prim.def_rule("vjp", lambda cts, ins, outs, needs: [(cts[0] * 2.0).astype(np.float16)])
    ir = ember.make_ir(ember.grad(lambda x: enp.sum(prim.bind(x))))(np.ones(3, np.float32))
    assert [a.dtype for a in ir.out_avals] == [np.dtype(np.float32)]
