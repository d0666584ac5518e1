"""jit's fast path: the dispatch key of a call (structure, abstract values, static values, weak types, enable_x64)
computed in one pass for every calling convention, and the general path for the rest."""
import collections
import dataclasses

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api.jit import Jitted


@pytest.fixture
def general_calls(monkeypatch):
    """Counts the calls that take the general path (flattening with PyTreeDefs)."""
    calls = []
    signature = Jitted._signature

    def counted(self, args, kwargs):
        calls.append(1)
        return signature(self, args, kwargs)
    monkeypatch.setattr(Jitted, "_signature", counted)
    return calls


def arr(*values, dtype=np.float32):
    return ember.asarray(np.asarray(values, dtype))


def test_every_calling_convention_hits_the_fast_path(general_calls):
    traces = []

    def f(xs, params, scale, *, bias, n, mode=None):
        traces.append(1)
        out = xs[0] + xs[-1] * params["w"] + params["b"] * scale + bias["v"][0]
        return {"out": out * n, "pair": (out, xs[1])}

    g = ember.jit(f, static_argnames=("n", "mode"))
    calls = [
        lambda k: g([arr(1, 2) * k, arr(3, 4), arr(5, 6)], {"w": arr(2, 2), "b": arr(1, 1)}, 2.0,
                    bias={"v": [arr(k, k)]}, n=3),
        lambda k: g([np.array([1, 2], np.float32) * k, arr(3, 4), arr(5, 6)], {"b": arr(1, 1), "w": arr(2, 2)},
                    np.float32(2), n=3, bias={"v": (arr(k, k),)}),
    ]
    for call in calls:
        before = len(general_calls)
        for k in range(1, 5):
            out = call(k)
            expected = (np.array([1, 2]) * k + np.array([5, 6]) * 2 + 2 + k) * 3
            np.testing.assert_allclose(np.asarray(out["out"]), expected)
            np.testing.assert_allclose(np.asarray(out["pair"][1]), [3, 4])
            assert isinstance(out["pair"], tuple)
        assert len(general_calls) == before + 1  # only the first call of each convention
    assert len(traces) == 2  # a tuple where a list was is another structure


def test_the_key_tells_apart_what_the_signature_does():
    traces = []
    f = ember.jit(lambda x, y=None: traces.append(1) or (ember.tree_util.tree_map(lambda v: v * 2, x) if y is None
                                                          else x * y))
    cases = [(arr(1, 2),), (arr(1, 2, 3),), (arr(1, 2, dtype=np.int32),), (np.ones(2, np.float32),),
             (np.ones(2, np.float16),), (np.float32(1),), (np.float16(1),), (1.0,), (1,), (True,), ([arr(1)],),
             ((arr(1),),), ({"a": arr(1)},), ({"b": arr(1)},), (arr(1), arr(2)), (arr(1), None)]
    for args in cases:
        f(*args)
    n = len(traces)
    for args in cases:
        f(*args)
    assert len(traces) == n  # each was cached ...
    results = [f(*args) for args in cases]
    assert results[3].dtype == np.float32 and results[4].dtype == np.float16  # ... under its own signature
    assert results[7].dtype == np.float32 and results[7].weak_type and results[8].dtype == np.int32
    assert results[9].dtype == np.int32  # True * 2
    np.testing.assert_array_equal(np.asarray(results[14]), [2.0])


def test_weak_types_are_part_of_the_key():
    f = ember.jit(lambda a, b: a + b)
    weak, strong = ember.jit(lambda: 2.0)(), arr(2.0).reshape(())
    assert weak.weak_type and not strong.weak_type
    half = np.ones(2, np.float16)
    for _ in range(2):
        assert f(weak, half).dtype == np.float16
        assert f(strong, half).dtype == np.float32


def test_dicts_in_another_key_order_and_keywords_in_another_order():
    traces = []
    f = ember.jit(lambda p, *, a, b: traces.append(1) or p["x"] - p["y"] + a * b)
    x, y = arr(5.0), arr(2.0)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f({"x": x, "y": y}, a=arr(1.0), b=arr(3.0))), [6.0])
        np.testing.assert_allclose(np.asarray(f({"y": y, "x": x}, b=arr(3.0), a=arr(2.0))), [9.0])
    assert len(traces) == 1
    with pytest.raises(ValueError, match="sortable"):
        ember.jit(lambda d: d[1])({1: arr(1.0), "a": arr(2.0)})


def test_static_values_are_in_the_key(general_calls):
    traces = []
    f = ember.jit(lambda x, n, s="a": traces.append((n, s)) or x * n, static_argnums=1, static_argnames="s")
    x = arr(1.0, 2.0)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x, 2)), [2.0, 4.0])
        np.testing.assert_allclose(np.asarray(f(x, 3, s="b")), [3.0, 6.0])
        np.testing.assert_allclose(np.asarray(f(x, n=4)), [4.0, 8.0])
    assert traces == [(2, "a"), (3, "b"), (4, "a")]
    assert len(general_calls) == 3
    for _ in range(2):  # the error is raised every time, also once the function has a fast path
        with pytest.raises(TypeError, match="static argument 1 must be hashable, got a list"):
            f(x, [1])
        with pytest.raises(TypeError, match="static argument 's' must be hashable, got a dict"):
            f(x, 2, s={})


def test_static_argnums_counted_from_the_end():
    f = ember.jit(lambda *args: args[0] * args[-1], static_argnums=-1)
    assert float(f(arr(2.0)[0], 3)) == 6.0 and float(f(arr(2.0)[0], arr(1.0)[0], 4)) == 8.0
    with pytest.raises(ValueError, match="includes -1, but the call passes only 0 positional arguments"):
        f()


def test_enable_x64_is_in_the_key():
    f = ember.jit(lambda x, xs: (x * 2, xs[0] * 2))
    for _ in range(2):
        assert [r.dtype for r in f(1.0, [1])] == [np.float32, np.int32]
        with ember.config.override(enable_x64=True):
            assert [r.dtype for r in f(1.0, [1])] == [np.float64, np.int64]


def test_custom_nodes_namedtuples_and_subclasses_take_the_general_path():
    Point = collections.namedtuple("Point", "x y")

    @ember.tree_util.register_dataclass
    @dataclasses.dataclass
    class Pair:
        a: object
        b: object

    class Items(list):
        pass

    one, two = arr(1.0)[0], arr(2.0)[0]
    for _ in range(2):
        assert float(ember.jit(lambda p: p.x + p.y)(Point(one, two))) == 3.0
        assert float(ember.jit(lambda d: d["x"] - d["y"])(collections.OrderedDict(y=two, x=one))) == -1.0
        assert float(ember.jit(lambda pair: pair.a * pair.b)(Pair(one, two))) == 2.0
        assert float(ember.jit(lambda p: p.args[0] + p.args[1])(ember.tree_util.Partial(print, one, two))) == 3.0
        with pytest.raises(TypeError, match="argument 0 contains a value of type Items"):
            ember.jit(lambda items: items)(Items([one]))


def test_errors_of_the_arguments_stay_the_same():
    f = ember.jit(lambda x: x + 1)
    f(arr(1.0))
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 0 contains a value of type str"):
        f("hello")
    with pytest.raises(TypeError, match="ember cannot take"):
        f(np.ones(2, np.clongdouble))
    with pytest.raises(OverflowError):
        f(2 ** 40)
    leaked = []
    ember.jit(lambda x: leaked.append(x) or x)(arr(1.0))
    with pytest.raises(ember.UnexpectedTracerError, match="leaked out of the function"):
        f(leaked[0])
    deleted = arr(1.0)
    deleted.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f(deleted)


def test_inside_a_trace_the_function_is_one_equation():
    """A jitted function called while another is staged (its dispatch cache filled outside) is one pjit equation
    holding its IR, the array it is called with (closed over by the outer function) an operand."""
    inner = ember.jit(lambda xs: xs[0] * xs[1])
    x = arr(2.0, 3.0)
    inner([x, x])  # cached outside
    outer = ember.jit(lambda y: inner([y, x]) + 1)
    ir = outer.trace(x).jaxpr
    assert [e.prim.name for e in ir.eqns] == ["pjit", "add"] and "mul" in str(ir.eqns[0].params["body"])
    np.testing.assert_allclose(np.asarray(outer(x)), [5.0, 10.0])


def test_disable_jit_and_the_fast_path():
    seen = []
    f = ember.jit(lambda xs: seen.append(type(xs[0])) or xs[0] * 2)
    f([arr(1.0)])
    f([arr(1.0)])
    with ember.disable_jit():
        f([arr(1.0)])
    assert seen[-1] is ember.Array and len(seen) == 2


def test_the_fast_path_is_bounded_and_cleared():
    with ember.config.override(jit_cache_size=3):
        f = ember.jit(lambda p: p["a"] * 2)
        for n in range(1, 10):
            f({"a": np.ones(n, np.float32)})
            f({"a": arr(*range(n))})
        assert len(f._dispatch) <= 3
        np.testing.assert_allclose(np.asarray(f({"a": np.ones(2, np.float32)})), [2.0, 2.0])
    ember.clear_caches()
    assert len(f._dispatch) == 0
    np.testing.assert_allclose(np.asarray(f({"a": arr(1.0, 2.0)})), [2.0, 4.0])


def test_outputs_of_every_shape():
    x = arr(1.0, 2.0)
    for fun, check in [(lambda v: v, lambda o: isinstance(o, ember.Array)),
                       (lambda v: (v, v), lambda o: isinstance(o, tuple) and len(o) == 2),
                       (lambda v: [v], lambda o: isinstance(o, list)),
                       (lambda v: None, lambda o: o is None),
                       (lambda v: (), lambda o: o == ()),
                       (lambda v: {"a": (v, [v])}, lambda o: isinstance(o["a"][1], list))]:
        f = ember.jit(fun)
        for _ in range(2):
            assert check(f(x))


def test_a_computation_follows_its_arguments_device():
    other = ember.devices()[1]
    f = ember.jit(lambda xs: xs[0] + 1)
    f([arr(1.0)])
    out = f([ember.device_put(np.ones(1, np.float32), other)])
    assert out.device == other
    np.testing.assert_allclose(np.asarray(enp.asarray(out)), [2.0])
