"""The internals of JAX's extension API on ember, run side by side with JAX 0.10.2: linear_util's transformation
stacks and cache, source_info_util's name stacks, core's call primitives, tokens and DropVar, ad.jvp / ad.linearize,
batching's defreducer and register_vmappable, and partial_eval's DCE (dce_jaxpr, dce_jaxpr_consts, dce_rules)."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax._src.tree_util import FlatTree as JaxFlatTree
from jax.extend import core as jcore, linear_util as jlu, source_info_util as jsi
from jax.interpreters import ad as jad, batching as jbatching, partial_eval as jpe

import ember
import ember.api_util
import ember.numpy as enp
from ember.extend import core as ecore, linear_util as elu, source_info_util as esi
from ember.interpreters import ad as ead, batching as ebatching, mlir as emlir, partial_eval as epe

SIDES = [(ecore, elu, enp, ember), (jcore, jlu, jnp, jax)]
DEBUG = jcore.DebugInfo("test", "f", None, None)


def _wrap(lu, f):
    return lu.wrap_init(f, debug_info=DEBUG if lu is jlu else None)


# ---------------------------------------------------------------------------------------------------------------
# linear_util
def _scale(f, factor, *args):
    return [factor * y for y in f(*args)]


def _with_count(f, store, offset, *args):
    out = f(*args)
    store.store(len(out) + offset)
    return out


def _old_style(factor, *args):
    results = yield [a + 1.0 for a in args], {}
    yield [factor * r for r in results]


def _old_style_aux(*args):
    results = yield args, {}
    yield results, ("seen", len(args))


@pytest.mark.parametrize("side", SIDES, ids=["ember", "jax"])
def test_transformation_stacks(side):
    _, lu, np_, _ = side

    def base(x, y):
        return [x + y, x * y]

    wrapped = _wrap(lu, base)
    scaled = lu.transformation2(_scale)(wrapped, 3.0)
    counted, count = lu.transformation_with_aux2(_with_count)(scaled, 10)
    assert [float(v) for v in counted.call_wrapped(2.0, 5.0)] == [21.0, 30.0] and count() == 12
    assert counted.f is base and len(counted.transforms) == 2 and counted.transforms[0][0] is _with_count
    # (equal stacks are equal WrappedFuns: the key of lu.cache)
    assert lu.transformation2(_scale)(wrapped, 3.0) == scaled and hash(lu.transformation2(_scale)(wrapped, 3.0)) \
        == hash(scaled) and lu.transformation2(_scale)(wrapped, 4.0) != scaled
    old = lu.transformation(_old_style)(wrapped, 2.0)
    assert [float(v) for v in old.call_wrapped(1.0, 2.0)] == [10.0, 12.0]
    old_aux, aux = lu.transformation_with_aux(_old_style_aux)(wrapped)
    old_aux.call_wrapped(1.0, 2.0)
    assert aux() == ("seen", 2)
    # the curried form: transformation2(gen, fun, *args) is a partial application, called with ()
    assert [float(v) for v in lu.transformation2(_scale, wrapped, 2.0)().call_wrapped(1.0, 1.0)] == [4.0, 2.0]


@pytest.mark.parametrize("side", SIDES, ids=["ember", "jax"])
def test_merge_linear_aux_and_cache(side):
    _, lu, _, _ = side
    base = _wrap(lu, lambda x: [x * 2.0])
    first, aux1 = lu.transformation_with_aux2(_with_count)(base, 0)
    _, aux2 = lu.transformation_with_aux2(_with_count)(base, 5)
    with pytest.raises(lu.StoreException):
        lu.merge_linear_aux(aux1, aux2)  # (neither filled)
    first.call_wrapped(1.0)
    assert lu.merge_linear_aux(aux1, aux2) == (True, 1)
    assert lu.merge_linear_aux(aux2, aux1) == (False, 1)

    calls = []

    @lu.cache
    def traced(fun, tag):
        calls.append(tag)
        return fun.call_wrapped(3.0)

    def stack():
        return lu.transformation_with_aux2(_with_count)(base, 7)

    counted, count = stack()
    assert [float(v) for v in traced(counted, "a")] == [6.0] and count() == 8
    again, count_again = stack()
    assert [float(v) for v in traced(again, "a")] == [6.0] and calls == ["a"]
    assert count_again() == 8  # (the hit fills the new stack's store, as the first call did)
    traced(stack()[0], "b")
    assert calls == ["a", "b"]
    traced.cache_clear()
    traced(stack()[0], "a")
    assert calls == ["a", "b", "a"]


def test_cache_keeps_at_most_jit_cache_size_entries_per_function():
    from ember.extend import linear_util as elu
    calls = []

    @elu.cache
    def traced(fun, tag):
        calls.append(tag)
        return fun.call_wrapped(1.0)

    base = elu.wrap_init(lambda x: [x * 2.0], debug_info=None)
    with ember.config.override(jit_cache_size=4):
        for tag in range(10):
            traced(base, tag)
        traced(base, 9)  # (the newest entries kept)
        assert calls == list(range(10))
        traced(base, 0)  # (the oldest dropped: called again)
        assert calls == list(range(10)) + [0]


def test_debug_info_as_jax():
    for core in (ecore, jcore):
        info = core.DebugInfo("jit", "f at /tmp/x.py:12", ("a", "b", "c"), ("result[0]", "result[1]"))
        assert (info.func_name, info.func_filename, info.func_lineno) == ("f", "/tmp/x.py", 12)
        assert info.filter_arg_names([True, False, True]) == ("a", "c")
        assert info.filter_result_paths([False, True]) == ("result[1]",)
        assert info.replace_func_name("g").func_src_info == "g at /tmp/x.py:12"
        assert info.with_unknown_names().arg_names is None
        assert info.safe_arg_names(3) == ("a", "b", "c")
    assert ecore.DebugInfo is elu.DebugInfo and ember.api_util.DebugInfo is elu.DebugInfo


# ---------------------------------------------------------------------------------------------------------------
# source_info_util
def _scoped(np_, si, seen):
    def f(x):
        with si.extend_name_stack("outer"):
            with si.transform_name_stack("jvp"):
                with si.extend_name_stack("inner"):
                    y = np_.sin(x)
                    seen.append(str(si.current_name_stack()))
                z = np_.cos(y)
            with si.reset_name_stack():
                w = y * 2
                seen.append(str(si.current_name_stack()))
            with si.set_name_stack(si.new_name_stack("a").extend("b")):
                v = w + 1
        return v + z
    return f


def test_name_stacks_as_jax():
    texts = []
    for np_, si, make_jaxpr in ((enp, esi, ember.make_jaxpr), (jnp, jsi, jax.make_jaxpr)):
        seen = []
        printed = make_jaxpr(_scoped(np_, si, seen))(1.0).pretty_print(name_stack=True)
        texts.append((seen, [line.split("#")[-1].strip() for line in printed.splitlines() if "#" in line]))
    assert texts[0] == texts[1]
    assert texts[0][1] == ["[outer/jvp(inner)]", "[outer/jvp()]", "[]", "[a/b]", "[]"]
    ours, theirs = esi.new_name_stack("a").transform("vmap").extend("b"), jsi.new_name_stack("a").transform(
        "vmap").extend("b")
    for view in (lambda s: s, lambda s: s[:2], lambda s: s + type(s)().extend("c")):
        assert str(view(ours)) == str(view(theirs))
    assert len(ours) == len(theirs) == 3
    assert esi.summarize(esi.new_source_info()) == jsi.summarize(jsi.new_source_info()) == ""
    ours = ember.jit(_scoped(enp, esi, [])).lower(np.float32(1.0)).as_text()
    theirs = jax.jit(_scoped(jnp, jsi, [])).lower(np.float32(1.0)).as_text(debug_info=True)
    for name in ('outer/jvp(inner)/sin"', 'outer/jvp()/cos"', 'a/b/add"'):  # (the ops' locations)
        assert name in ours and name in theirs, name


def test_user_context_attributes_what_it_binds():
    def f(x):
        source = esi.current()
        with esi.user_context(source, name_stack=esi.new_name_stack("replayed")):
            return helper(x)

    def helper(x):
        return enp.sin(x)

    eqn = ember.make_jaxpr(f)(1.0).eqns[0]
    assert eqn.source.function == "f" and eqn.source.name_stack == "replayed"
    with pytest.raises(TypeError, match="user_context"):
        with esi.user_context("not a source"):
            pass


# ---------------------------------------------------------------------------------------------------------------
# core: call primitives, tokens, DropVar
def _call_primitive(core):
    p = core.CallPrimitive("my_call")
    p.def_impl(core.call_impl)
    return p


def _body(np_):
    return lambda x, y: [np_.sin(x) * y, x + 1.0]


@pytest.mark.parametrize("side", SIDES, ids=["ember", "jax"])
def test_call_primitive(side):
    core, lu, np_, api = side
    p = _call_primitive(core)

    def f(x, y):
        return p.bind(x, y, subfuns=(_wrap(lu, _body(np_)),), name="hi")

    assert p.multiple_results and p.call_primitive
    eager = [float(v) for v in f(np.float32(1.0), np.float32(2.0))]
    np.testing.assert_allclose(eager, [2 * np.sin(1.0), 2.0], rtol=1e-6)
    closed = api.make_jaxpr(f)(1.0, 2.0)
    eqn, = closed.jaxpr.eqns
    assert eqn.primitive is p and set(eqn.params) == {"call_jaxpr", "name"}
    assert isinstance(eqn.params["call_jaxpr"], core.Jaxpr) and len(eqn.params["call_jaxpr"].eqns) == 3
    np.testing.assert_allclose([float(v) for v in core.jaxpr_as_fun(closed)(1.0, 2.0)], eager, rtol=1e-6)
    primals, tangents = api.jvp(f, (1.0, 2.0), (1.0, 0.0))
    np.testing.assert_allclose([float(t) for t in tangents], [2 * np.cos(1.0), 1.0], rtol=1e-6)
    batched = api.vmap(f)(np.arange(3.0, dtype=np.float32), np.ones(3, np.float32))
    np.testing.assert_allclose(np.asarray(batched[0]), np.sin(np.arange(3.0)), rtol=1e-6)
    if api is ember:  # (JAX needs a lowering and a transpose rule registered for these; ember derives them)
        np.testing.assert_allclose([float(v) for v in ember.jit(f)(1.0, 2.0)], eager, rtol=1e-6)
        assert float(ember.grad(lambda x, y: f(x, y)[0])(1.0, 2.0)) == pytest.approx(2 * np.cos(1.0), rel=1e-6)


def test_call_primitive_printed_and_checked_as_jax():
    texts = []
    for core, lu, np_, api in SIDES:
        p = _call_primitive(core)
        texts.append(str(api.make_jaxpr(lambda x, y: p.bind(x, y, subfuns=(_wrap(lu, _body(np_)),)))(
            np.float32(1.0), np.float32(2.0))))
    assert texts[0] == texts[1]
    with pytest.raises(TypeError, match="subfuns"):
        _call_primitive(ecore).bind(1.0, 2.0)
    unimplemented = ecore.CallPrimitive("no_impl")
    with pytest.raises(NotImplementedError, match="no_impl"):
        unimplemented.bind(1.0, subfuns=(elu.wrap_init(lambda x: [x]),))


def test_tokens_and_dropvar():
    assert ecore.AbstractToken is type(ember.make_jaxpr(ember.lax.create_token)().out_avals[0])
    token = ember.lax.create_token()
    assert isinstance(token, ecore.Token) and isinstance(jax.lax.create_token(), jcore.Token)
    assert ecore.AbstractToken().str_short() == jcore.AbstractToken().str_short() == "Tok"
    aval = ember.core.ShapedArray((2,), np.float32)
    drop = ecore.DropVar(aval)
    assert isinstance(drop, ecore.Var) and repr(drop) == repr(jcore.DropVar(jax.core.ShapedArray((2,), np.float32)))


# ---------------------------------------------------------------------------------------------------------------
# ad.jvp and ad.linearize
def _fn(np_):
    def f(x, d):
        return {"y": np_.sin(x) * d["w"], "c": np_.ones(2, np.float32) * 3.0, "i": d["k"] * 2}, x.sum()
    return f


X = np.arange(2.0, dtype=np.float32)
D = {"w": np.float32(2.0), "k": np.int32(3)}
TX = np.ones(2, np.float32)
TD = {"w": np.float32(0.5), "k": np.zeros((), jax.dtypes.float0)}


@pytest.mark.parametrize("instantiate", [True, False])
def test_ad_jvp_as_jax(instantiate):
    ours = ead.jvp(_fn(enp), ead.FlatTree.flatten((X, D)), ead.FlatTree.flatten((TX, TD)), has_aux=True,
                   instantiate=instantiate)
    theirs = jad.jvp(_fn(jnp), JaxFlatTree.flatten((X, D)), JaxFlatTree.flatten((TX, TD)), has_aux=True,
                     instantiate=instantiate)
    for mine, want in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(want), rtol=1e-6)
    for mine, want in zip(ours[1], theirs[1]):
        assert (type(mine) is ead.Zero) == (type(want) is jad.Zero)
        if type(want) is jad.Zero:
            assert mine.aval.shape == want.aval.shape and mine.aval.dtype == want.aval.dtype
        else:
            assert np.asarray(mine).dtype == np.asarray(want).dtype
            if np.asarray(want).dtype != jax.dtypes.float0:
                np.testing.assert_allclose(np.asarray(mine), np.asarray(want), rtol=1e-6)
    assert float(ours[2]) == float(theirs[2])
    assert set(ours[0].unflatten()) == {"y", "c", "i"}
    # under jit, with a plain tuple of arguments
    got = ember.jit(lambda x: ead.jvp(lambda a: enp.sin(a) * a, (x,), (enp.ones_like(x),))[1].unflatten())(X)
    np.testing.assert_allclose(np.asarray(got), np.sin(X) + X * np.cos(X), rtol=1e-6)


def test_ad_linearize_as_jax():
    out, zeros, jaxpr, consts, aux = ead.linearize(_fn(enp), ead.FlatTree.flatten((X, D)), has_aux=True)
    j_out, j_zeros, j_jaxpr, j_consts, j_aux = jad.linearize(_fn(jnp), JaxFlatTree.flatten((X, D)), has_aux=True)
    assert zeros == j_zeros == [True, True, False] and float(aux) == float(j_aux)
    assert [(v.aval.shape, v.aval.dtype) for v in jaxpr.invars] == [(v.aval.shape, v.aval.dtype)
                                                                     for v in j_jaxpr.invars]
    for mine, want in zip(out, j_out):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(want), rtol=1e-6)
    tangents = (TX, TD["k"], TD["w"])
    np.testing.assert_allclose(np.asarray(ecore.eval_jaxpr(jaxpr, consts, *tangents)[0]),
                               np.asarray(jax.core.eval_jaxpr(j_jaxpr, j_consts, *tangents)[0]), rtol=1e-6)
    assert ead.add_jaxvals_p.bind(np.float32(1.0), np.float32(2.0)) == 3.0


# ---------------------------------------------------------------------------------------------------------------
# batching: defreducer, register_vmappable
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_defreducer_as_jax(in_axis):
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    results = []
    for core, batching, mlir_rules, np_, api in ((ember.core, ebatching, emlir, enp, ember),
                                                (jax.core, jbatching, jax.interpreters.mlir, jnp, jax)):
        p = (ecore if api is ember else jcore).Primitive(f"my_sum_{api.__name__}")
        p.def_impl(lambda v, *, axes: np_.sum(v, axis=axes))
        p.def_abstract_eval(lambda a, *, axes: core.ShapedArray(tuple(d for i, d in enumerate(a.shape)
                                                                      if i not in axes), a.dtype))
        mlir_rules.register_lowering(p, mlir_rules.lower_fun(lambda v, *, axes: np_.sum(v, axis=axes),
                                                             multiple_results=False))
        batching.defreducer(p)
        results.append(np.asarray(api.jit(api.vmap(lambda v: p.bind(v, axes=(1,)), in_axes=in_axis))(x)))
    np.testing.assert_allclose(results[0], results[1])


class Scaled:
    """values * scale[..., None]: two arrays mapped as one value."""

    def __init__(self, values, scale):
        self.values, self.scale = values, scale

    @property
    def shape(self):
        return self.values.shape

    def dense(self):
        return self.values * self.scale[..., None]


def _to_elt(cont, get_idx, x, axis):
    return x if axis is None else Scaled(cont(x.values, axis), cont(x.scale, axis))


def _from_elt(cont, size, elt, axis):
    return elt if axis is None else Scaled(cont(size, elt.values, axis), cont(size, elt.scale, axis))


def _indexed_to_elt(cont, get_idx, x, axis):
    return Scaled(cont(x.values, axis), get_idx().astype(x.scale.dtype) + cont(x.scale, axis))


class Indexed(Scaled):
    """A Scaled whose members add their index to the scale (to_elt through get_idx)."""


@pytest.fixture
def registered():
    for batching in (ebatching, jbatching):
        batching.register_vmappable(Scaled, int, int, _to_elt, _from_elt, None)
        batching.register_vmappable(Indexed, int, int, _indexed_to_elt, _from_elt, None)
    yield
    for batching in (ebatching, jbatching):
        batching.unregister_vmappable(Scaled)
        batching.unregister_vmappable(Indexed)


def test_register_vmappable_as_jax(registered):
    values = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    scale = np.array([1.0, 2.0, 3.0], np.float32)
    results = []
    for np_, api in ((enp, ember), (jnp, jax)):
        def f(s, y):
            return Scaled(np_.sin(s.values) + y, s.scale * 2), s.dense().sum()
        out, total = api.vmap(f, in_axes=(0, None), out_axes=(0, 0))(Scaled(values, scale), 1.0)
        inside_jit = api.jit(lambda v, c: api.vmap(lambda s: s.dense().sum())(Scaled(v, c)))(values, scale)
        results.append([np.asarray(a) for a in (out.values, out.scale, total, inside_jit)])
        assert type(out) is Scaled
    for mine, want in zip(*results):
        np.testing.assert_allclose(mine, want, rtol=1e-6)
    assert ebatching.is_vmappable(Scaled(values, scale)) and not ebatching.is_vmappable(values)
    # (to_elt's get_idx: each member's index; JAX's leaks its index tracer here)
    np.testing.assert_allclose(np.asarray(ember.vmap(lambda s: s.scale)(Indexed(values, scale))), scale + [0, 1, 2])


# ---------------------------------------------------------------------------------------------------------------
# partial_eval: DCE
def _three(np_):
    def f(x, y, z):
        a = x * 2.0
        return a + 1.0, (y + 1.0) * 2.0, a * 3.0
    return f


@pytest.mark.parametrize("used, instantiate", [([True, False, False], False), ([False, True, True], False),
                                               ([False, False, False], [False, False, True]), (True, True)])
def test_dce_jaxpr_as_jax(used, instantiate):
    ours, used_in = epe.dce_jaxpr(ember.make_jaxpr(_three(enp))(1.0, 2.0, 3.0).jaxpr, used, instantiate)
    theirs, j_used_in = jpe.dce_jaxpr(jax.make_jaxpr(_three(jnp))(1.0, 2.0, 3.0).jaxpr, used, instantiate)
    assert used_in == j_used_in
    assert [e.primitive.name for e in ours.eqns] == [e.primitive.name for e in theirs.eqns]
    assert (len(ours.invars), len(ours.outvars)) == (len(theirs.invars), len(theirs.outvars))


def test_dce_jaxpr_consts_as_jax():
    w = np.arange(3.0, dtype=np.float32)
    ours = ember.make_jaxpr(lambda x: (x + w, x * 2.0))(w).jaxpr
    theirs = jax.make_jaxpr(lambda x: (x + w, x * 2.0))(w).jaxpr
    for used in ([False, True], [True, False]):
        jaxpr, used_consts, used_inputs = epe.dce_jaxpr_consts(ours, used)
        j_jaxpr, j_used_consts, j_used_inputs = jpe.dce_jaxpr_consts(theirs, used)
        assert (used_consts, used_inputs) == (j_used_consts, j_used_inputs)
        assert len(jaxpr.constvars) == len(j_jaxpr.constvars) == sum(used_consts)


def test_dce_rules_are_consulted_by_ember_dce():
    p = _call_primitive(ecore)

    def f(x, y):
        first, second = p.bind(x, y, subfuns=(elu.wrap_init(lambda a, b: [enp.sin(a), enp.cos(b) * 2.0]),))
        return first

    def count_call_outputs(ir):
        eqn, = [e for e in ir.eqns if e.prim is p]
        return len(eqn.outputs), len(eqn.params["call_jaxpr"].eqns), len(eqn.inputs)

    assert count_call_outputs(ember.passes.run(ember.make_jaxpr(f)(1.0, 2.0), "dce")) == (2, 3, 2)
    epe.dce_rules[p] = epe.dce_jaxpr_call_rule
    try:
        pruned = ember.passes.run(ember.make_jaxpr(f)(1.0, 2.0), "dce")
        assert count_call_outputs(pruned) == (1, 1, 1)
        assert float(ember.core.eval_jaxpr(pruned.jaxpr, pruned.consts, 1.0, 2.0)[0]) == pytest.approx(np.sin(1.0))
    finally:
        del epe.dce_rules[p]
    # an effectful call whose outputs are unused stays, unless its rule drops it (None)
    effectful = ecore.CallPrimitive("effectful_call")
    effectful.def_impl(ecore.call_impl)
    effectful.def_effectful_abstract_eval(lambda *avals, call_jaxpr: ([v.aval for v in call_jaxpr.outvars],
                                                                      {"an effect"}))

    def g(x):
        effectful.bind(x, subfuns=(elu.wrap_init(lambda a: [a * 2.0]),))
        return x + 1.0

    assert any(e.prim is effectful for e in ember.passes.run(ember.make_jaxpr(g)(1.0), "dce").eqns)
    epe.dce_rules[effectful] = lambda used, eqn: ([False] * len(eqn.invars), None)
    try:
        assert not any(e.prim is effectful for e in ember.passes.run(ember.make_jaxpr(g)(1.0), "dce").eqns)
    finally:
        del epe.dce_rules[effectful]


def test_dce_jaxpr_closed_call_rule():
    inner = ember.make_jaxpr(lambda a, b: (enp.sin(a), b * 2.0))(1.0, 2.0)
    outer = ember.make_jaxpr(lambda a, b: ember.lax.add(a, b))(1.0, 2.0)
    eqn = ecore.new_jaxpr_eqn(outer.jaxpr.invars, [ecore.Var(a) for a in inner.out_avals], outer.eqns[0].primitive,
                              {"call_jaxpr": inner})
    used_inputs, new_eqn = epe.dce_jaxpr_closed_call_rule([True, False], eqn)
    assert used_inputs == [True, False] and len(new_eqn.outvars) == 1 and len(new_eqn.invars) == 1
    assert isinstance(new_eqn.params["call_jaxpr"], ecore.ClosedJaxpr)
    assert [e.prim.name for e in new_eqn.params["call_jaxpr"].eqns] == ["sin"]
    assert epe.dce_jaxpr_closed_call_rule([False, False], eqn) == ([False, False], None)
