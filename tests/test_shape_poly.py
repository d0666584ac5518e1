"""Shape polymorphism, as jax.export's (docs/aot.md#shape-polymorphism): symbolic dimensions print and compare as
JAX's; a function exported with symbolic shapes by ember and by JAX gives the same result types and the same values
at several sizes, called eagerly, inside jit, under vmap, and under grad through serialize(vjp_order=1); calls with
the wrong rank, dtype or inconsistent dimensions are JAX's errors; a crafted artifact's placeholders are parsed,
never evaluated, and refused; and the rest of jax.export's names (DisabledSafetyCheck, the calling convention
versions, pytree node serialization, Exported's attributes) behave as JAX's."""
import collections
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api.export import MAGIC

F32 = np.float32


def _dims(mod, text, scope=None, **kwargs):
    return mod.export.symbolic_shape(text, scope=scope, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Symbolic dimensions

EXPRESSIONS = ["a + b", "b + a", "a * b + a", "b * b + b", "a * b * c + 3", "2 * a - 3 * b + 1", "-a",
               "(a + 1) * (b - 1)", "a * a * b", "b // 2 + a", "(a + b) % 3", "a - b", "3 - a", "(2 * a + 4) // 2",
               "(2 * a + 3) // 2", "(a * b) // b", "(a * b + a) // a", "(a * b + 1) // a", "a ** 3", "(a + b) ** 2",
               "a * 3 // 4", "-(a * b) // 3", "(a - b) // 2", "c - b * 2"]
SPECS = ["max(a, b)", "min(a,b)+floordiv(a,4)", "mod(a*b, 7) - 2", "a^2*b + 3", "max(a, 3)", "max(a, 1)",
         "min(a, 1)", "floordiv(a, 1)", "mod(a, 1)", "(a, 2*a + 1, 3)", "a, ", ""]
COMPARISONS = ["a >= 1", "a > 0", "a >= 2", "2 * a >= a", "a * b >= a", "a * a >= a", "a - b >= 0", "b // 2 >= 0",
               "a % 3 < 3", "a % 3 >= 1", "M >= a", "(a + b) // 2 >= 1", "-a < 0", "a == a", "2 * a == a + a",
               "a != 1", "a == 1", "a - a // 2 >= 1", "F <= a"]
CONSTRAINED = ["a >= c", "a - c >= 2", "a >= 3", "b <= 10", "b < 10", "b >= 11", "d >= 2", "d == 2 * e", "d >= e",
               "f >= 4", "f // 4 * 4 == f", "a > c + 2", "10 - b >= 0", "d + 1", "2 * e + d", "f % 4", "f // 4",
               "a - c"]


def _evaluate(mod, scope, names, cases):
    dims = dict(zip(names, mod.export.symbolic_shape(", ".join(names), scope=scope)))
    dims["M"] = mod.export.symbolic_shape("max(a, b)", scope=scope)[0] if "b" in dims else None
    dims["F"] = mod.export.symbolic_shape("floordiv(a, 2)", scope=scope)[0]
    out = []
    for text in cases:
        try:
            out.append(str(eval(text, {}, dims)))
        except Exception as err:  # (the kind of error is compared)
            out.append(type(err).__name__)
    return out


def test_symbolic_dimensions_print_and_compare_as_jax():
    for cases in (EXPRESSIONS, COMPARISONS):
        assert _evaluate(ember, None, ["a", "b", "c"], cases) == _evaluate(jax, None, ["a", "b", "c"], cases)
    got = [str(ember.export.symbolic_shape(s)) for s in SPECS]
    assert got == [str(jax.export.symbolic_shape(s)) for s in SPECS]
    constraints = ["a >= c + 2", "b <= 10", "d == 2*e", "mod(f, 4) == 0"]
    assert (_evaluate(ember, ember.export.SymbolicScope(constraints), list("abcdef"), CONSTRAINED)
            == _evaluate(jax, jax.export.SymbolicScope(constraints), list("abcdef"), CONSTRAINED))


def test_symbolic_dimension_errors_as_jax():
    b, = ember.export.symbolic_shape("b")
    with pytest.raises(ember.errors.InconclusiveDimensionOperation, match="'b' >= '2' is inconclusive"):
        b >= 2  # noqa: B015
    with pytest.raises(ember.errors.InconclusiveDimensionOperation, match="requires a constant"):
        int(b)
    with pytest.raises(TypeError):
        np.zeros((b, 3))
    other, = ember.export.symbolic_shape("b")  # (another scope: not equal, and not mixable)
    assert b != other
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        b + other
    for bad in ["a, 3+", "2*(a+1)", "a $", "floordiv(a)", "a b"]:
        with pytest.raises(ValueError, match="syntax error in symbolic shape"):
            ember.export.symbolic_shape(bad)
        with pytest.raises(ValueError, match="syntax error in symbolic shape"):
            jax.export.symbolic_shape(bad)
    for mod in (jax, ember):
        with pytest.raises(ValueError, match="Unsatisfiable explicit constraint"):
            mod.export.SymbolicScope(["3 >= 4"])
        with pytest.raises(ValueError, match="sequence of strings"):
            mod.export.SymbolicScope("a >= 1")
        with pytest.raises(ValueError, match="Cannot specify both"):
            mod.export.symbolic_shape("a", constraints=["a >= 2"], scope=mod.export.SymbolicScope())
        assert mod.export.symbolic_shape("b, _", like=(5, 3))[1] == 3
        assert [str(d) for d in mod.export.symbolic_shape("b, ...", like=(5, 3, 2))] == ["b", "3", "2"]
        with pytest.raises(ValueError, match="different size 4 for known dimension"):
            mod.export.symbolic_shape("b, 4", like=(5, 3))
        assert mod.export.is_symbolic_dim(mod.export.symbolic_shape("b")[0]) and not mod.export.is_symbolic_dim(3)


# ---------------------------------------------------------------------------------------------------------------
# Exporting with symbolic shapes, against jax.export

def mlp(np_, nn, x, w1, b1, w2):
    return nn.relu(np_.tanh(x @ w1 + b1) @ w2)


def attention(np_, nn, q, k, v):
    s = q @ np_.swapaxes(k, -1, -2) / np_.sqrt(np_.float32(q.shape[-1]))
    return nn.softmax(s, axis=-1) @ v


KERNEL = np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(F32)


def cnn(np_, nn, x):
    lax = jax.lax if np_ is jnp else ember.lax
    y = nn.relu(lax.conv_general_dilated(x, KERNEL, (1, 1), "SAME"))
    y = lax.reduce_window(y, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return y.reshape(y.shape[0], -1).mean(axis=1)


FUNCTIONS = {  # name: (specs, function of (numpy module, nn module, *args))
    "cnn": (["b, 2, h, h"], cnn),
    "mlp": (["b, 4", "4, 8", "8", "8, 2"], mlp),
    "attention": (["b, t, 4", "b, s, 4", "b, s, 4"], attention),
    "mean_and_count": (["b, 3"], lambda np_, nn, x: np_.mean(x, axis=0) + x.sum(1).sum() / x.shape[0]),
    "reshape": (["b, 4"], lambda np_, nn, x: x.reshape(-1, 2).T.reshape(2, x.shape[0], 2).sum(0)),
    "slicing": (["b, 3"], lambda np_, nn, x: x[1:, :2] * x[:-1, 1:] + x[0, :2] - x[-1, :0:-1]),
    "concat_pad_iota": (["b, 3"], lambda np_, nn, x: np_.concatenate([np_.pad(x, ((1, 0), (0, 0))), x * 2])
                        + np_.arange(2 * x.shape[0] + 1, dtype=np_.float32)[:, None]),
    "reductions": (["b, 3"], lambda np_, nn, x: np_.argmax(x, axis=0).astype(np_.float32) + x.max(0)
                   + nn.logsumexp(x, axis=0) + np_.var(x, axis=0)),
    "cumsum_sort_where": (["b, 3"], lambda np_, nn, x: np_.cumsum(np_.sort(x, axis=0), axis=0)
                          + np_.where(x > 1, x, -x)),
    "square": (["b, b"], lambda np_, nn, x: np_.triu(x @ x.T) + np_.eye(x.shape[0], dtype=np_.float32)),
}
SIZES = [dict(b=1, t=2, s=3, h=6), dict(b=4, t=1, s=2, h=3), dict(b=6, t=3, s=5, h=8)]


def _exports(name):
    specs, fn = FUNCTIONS[name]
    jscope, escope = jax.export.SymbolicScope(), ember.export.SymbolicScope()
    jexp = jax.export.export(jax.jit(lambda *a: fn(jnp, jax.nn, *a)))(
        *[jax.ShapeDtypeStruct(jax.export.symbolic_shape(s, scope=jscope), F32) for s in specs])
    eexp = ember.export.export(ember.jit(lambda *a: fn(enp, ember.nn, *a)))(
        *[ember.ShapeDtypeStruct(ember.export.symbolic_shape(s, scope=escope), F32) for s in specs])
    return specs, jexp, eexp


def _args(specs, env, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(int(eval(d, {}, dict(env))) for d in s.split(","))).astype(F32) + 1
            for s in specs]


QUICK = ("mlp", "attention", "slicing", "mean_and_count")  # (the default run; every function in the slow one)


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(FUNCTIONS)])
def test_exported_with_symbolic_shapes_as_jax(name):
    """The types print as JAX's (f32[b,3]); the deserialized Exported called at several sizes gives JAX's values,
    eagerly, in jit, under vmap (against a loop: JAX's Exported has no batching rule) and, serialized with its
    VJP, under grad."""
    specs, jexp, eexp = _exports(name)
    assert str(eexp.in_avals) == str(jexp.in_avals) and str(eexp.out_avals) == str(jexp.out_avals)
    assert eexp.uses_global_constants and eexp.calling_convention_version == 3
    restored = ember.export.deserialize(eexp.serialize(vjp_order=1))
    assert str(restored.out_avals) == str(jexp.out_avals)
    for k, env in enumerate(SIZES):
        args = _args(specs, env)
        want = np.asarray(jexp.call(*args))
        np.testing.assert_allclose(np.asarray(restored.call(*args)), want, rtol=2e-5, atol=2e-5)
        if k:
            continue  # (jit and grad at one size: their programs are the same templates, filled alike)
        np.testing.assert_allclose(np.asarray(ember.jit(lambda *a: restored.call(*a) * 2)(*args)), want * 2,
                                   rtol=2e-5, atol=2e-5)
        argnums = tuple(range(len(args)))
        want_g = jax.grad(lambda *a: (jnp.cos(jexp.call(*a)) * jexp.call(*a)).sum(), argnums)(*args)
        got_g = ember.grad(lambda *a: (enp.cos(restored.call(*a)) * restored.call(*a)).sum(), argnums)(*args)
        for g, w in zip(got_g, want_g):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
    batch = [np.stack([a, a * 0.5]) for a in args]
    want_v = np.stack([np.asarray(jexp.call(*[a[i] for a in batch])) for i in range(2)])
    np.testing.assert_allclose(np.asarray(ember.vmap(restored.call)(*batch)), want_v, rtol=2e-5, atol=2e-5)


def test_slices_that_may_be_empty_as_jax():
    """numpy's slicing of a symbolic dimension, with steps of both signs and counts that are 0 for small sizes: the
    values at sizes 1 to 5 and their derivatives are JAX's."""
    def fn(np_, x):
        parts = [x[::-1], x[-2::-1], x[:1:-1], x[1::-3], x[1:-1:2], x[:-2], x[2:], x[::2]]
        return np_.concatenate(parts) * np_.arange(1, 9, dtype=F32).sum()
    jexp = jax.export.export(jax.jit(lambda x: fn(jnp, x)))(jax.ShapeDtypeStruct(jax.export.symbolic_shape("b"), F32))
    eexp = ember.export.export(ember.jit(lambda x: fn(enp, x)))(
        ember.ShapeDtypeStruct(ember.export.symbolic_shape("b"), F32))
    restored = ember.export.deserialize(eexp.serialize(vjp_order=1))
    for n in (1, 2, 3, 5):
        x = np.arange(n, dtype=F32) + 1
        np.testing.assert_allclose(np.asarray(restored.call(x)), np.asarray(jexp.call(x)), rtol=1e-6)
        if n in (2, 5):
            continue  # (derivatives at sizes where some slices are empty and where none is)
        np.testing.assert_allclose(np.asarray(ember.grad(lambda x: (restored.call(x) ** 2).sum())(x)),
                                   np.asarray(jax.grad(lambda x: (jexp.call(x) ** 2).sum())(x)), rtol=1e-5)


def test_a_fresh_export_is_called_and_differentiated_without_serializing():
    b, = ember.export.symbolic_shape("b")
    exp = ember.export.export(ember.jit(lambda x: enp.sin(x) * x.shape[0]))(ember.ShapeDtypeStruct((b, 2), F32))
    x = np.arange(6, dtype=F32).reshape(3, 2)
    np.testing.assert_allclose(np.asarray(exp.call(x)), np.sin(x) * 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: exp.call(x).sum())(x)), np.cos(x) * 3, rtol=1e-5)
    assert exp.has_vjp()
    vjp = exp.vjp()  # (JAX's: the VJP's Exported, flat: inputs, then the outputs' cotangents)
    assert [str(a) for a in vjp.in_avals] == ["float32[b,2]", "float32[b,2]"]
    np.testing.assert_allclose(np.asarray(vjp.call(x, np.ones_like(x))[0]), np.cos(x) * 3, rtol=1e-5)


def test_calling_an_exported_function_inside_another_symbolic_export():
    """The inner program's variables are bound to the outer one's expressions (c -> 2*c), and the whole checked
    when the outer one is called."""
    b, = ember.export.symbolic_shape("b")
    inner = ember.export.export(ember.jit(lambda x: enp.sin(x) * x.shape[0]))(ember.ShapeDtypeStruct((b, 3), F32))
    inner = ember.export.deserialize(inner.serialize(vjp_order=1))
    c, = ember.export.symbolic_shape("c")
    outer = ember.export.export(ember.jit(lambda y: inner.call(enp.concatenate([y, y])) + 1))(
        ember.ShapeDtypeStruct((c, 3), F32))
    assert str(outer.out_avals[0]) == "float32[2*c,3]"
    restored = ember.export.deserialize(outer.serialize(vjp_order=1))
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(restored.call(x)), np.sin(np.concatenate([x, x])) * 4 + 1, rtol=1e-5)
    want = jax.grad(lambda y: (jnp.sin(jnp.concatenate([y, y])) * 4).sum())(x)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda y: restored.call(y).sum())(x)), want, rtol=1e-5)


def test_one_compiled_program_per_binding():
    b, = ember.export.symbolic_shape("b")
    exp = ember.export.export(ember.jit(lambda x: x * 2))(ember.ShapeDtypeStruct((b,), F32))
    exp.call(np.ones(3, F32))
    exp.call(np.ones(3, F32))
    exp.call(np.ones(5, F32))
    assert len(exp._poly._instances) == 2


def _errors(mod, specs, constraints, fn, *args):
    scope = mod.export.SymbolicScope(constraints)
    exp = mod.export.export(mod.jit(fn))(*[mod.ShapeDtypeStruct(mod.export.symbolic_shape(s, scope=scope), F32)
                                           for s in specs])
    try:
        exp.call(*args)
    except (TypeError, ValueError) as err:
        return type(err).__name__, str(err).split(" Using the following")[0].split(" Please see")[0]
    return None


@pytest.mark.parametrize("specs, constraints, shapes, dtype", [
    (["b, b", "b, b"], (), [(3, 4), (3, 4)], F32),        # inconsistent dimensions in one argument
    (["b, b", "b, b"], (), [(3, 3), (4, 4)], F32),        # and across arguments
    (["b, b", "b, b"], (), [(3, 3), (3, 3)], np.int32),   # dtype
    (["b, 3"], (), [(4, 2)], F32),                       # a constant dimension
    (["b, 3"], (), [(4,)], F32),                         # rank
    (["b, 3"], (), [(0, 3)], F32),                       # a variable must be >= 1
    (["2*b, c, d"], ["c >= d + 1"], [(3, 4, 2)], F32),   # a division with a remainder
    (["2*b, c, d"], ["c >= d + 1"], [(4, 4, 4)], F32),   # a constraint
    (["a, a + b"], (), [(3, 2)], F32),                   # b solved to -1
    (["floordiv(a, 2), a"], (), [(3, 5)], F32),          # a dimension that is not its expression's value
])
def test_call_errors_as_jax(specs, constraints, shapes, dtype):
    args = [np.ones(s, dtype) for s in shapes]
    def fn(*a):
        return sum(x.sum() for x in a)
    want = _errors(jax, specs, constraints, fn, *args)
    assert want is not None and _errors(ember, specs, constraints, fn, *args) == want


def test_unsolvable_variables_and_undecidable_shapes_are_refused_at_export():
    for spec in ("a*a", "a + b"):
        with pytest.raises(ValueError, match="Cannot solve for values of dimension variables"):
            ember.export.export(ember.jit(lambda x: x))(ember.ShapeDtypeStruct(ember.export.symbolic_shape(spec), F32))
    b, = ember.export.symbolic_shape("b")
    x = ember.ShapeDtypeStruct((b, 3), F32)
    with pytest.raises(ember.errors.InconclusiveDimensionOperation, match="inconclusive"):
        ember.export.export(ember.jit(lambda x: x[3]))(x)  # (b >= 4 is not known)
    with pytest.raises(ember.errors.InconclusiveDimensionOperation):
        ember.export.export(ember.jit(lambda x: x.reshape(2, -1)))(x)  # (3*b may be odd)
    b4, = ember.export.symbolic_shape("b", constraints=["b >= 4"])  # (a constraint decides it)
    exp = ember.export.export(ember.jit(lambda x: x[3]))(ember.ShapeDtypeStruct((b4, 3), F32))
    np.testing.assert_array_equal(np.asarray(exp.call(np.arange(15, dtype=F32).reshape(5, 3))), [9, 10, 11])
    with pytest.raises(ValueError, match=r"symbolic shape constraint b >= 4"):
        exp.call(np.ones((3, 3), F32))
    with pytest.raises(ValueError, match="symbolic shapes, which compile only once"):
        ember.jit(lambda x: x * 2).lower(x).compile()  # (JAX's ValueError too)


# ---------------------------------------------------------------------------------------------------------------
# The artifact: format 3, untrusted

def _symbolic_blob(vjp_order=0):
    b, = ember.export.symbolic_shape("b", constraints=["b <= 1000"])
    exp = ember.export.export(ember.jit(lambda x: enp.sin(x).sum(0) / x.shape[0]))(
        ember.ShapeDtypeStruct((b, 3), F32))
    return exp.serialize(vjp_order=vjp_order)


def _payload(blob):
    return json.loads(blob[len(MAGIC):])


def _blob(payload):
    return MAGIC + json.dumps(payload).encode()


def test_the_artifact_stores_the_symbols_and_a_template():
    payload = _payload(_symbolic_blob(vjp_order=1))
    assert payload["format"] == 3 and payload["shape_poly"] == {"variables": ["b"], "constraints": ["b <= 1000"]}
    assert payload["in_avals"] == [[["b", 3], "float32", False]] and "$dim[b]" in payload["module"]
    assert "tensor<$dim[b]x3xf32>" in payload["vjp"]["module"] and payload["disabled_checks"] == []
    concrete = ember.export.export(ember.jit(lambda x: x + 1))(np.ones(2, F32))
    assert _payload(concrete.serialize())["format"] == 1  # (concrete shapes: the format earlier embers read)


@pytest.mark.parametrize("placeholder, why", [
    ("$dim[__import__('os').system('true')]", "syntax error|unexpected character"),
    ("$dim[c]", "unknown dimension variable 'c'"),
    ("$dim[b^99]", "exponent 99 is larger"),
    ("$dim[b" + " + b" * 400 + "]", "not closed|longer than"),
    ("$dim[" + "max(" * 40 + "b" + ", 1)" * 40 + "]", "nested more than"),
    ("$dim[b + 99999999999999]", "more than 12 digits|beyond"),
])
def test_a_crafted_placeholder_is_refused_never_evaluated(placeholder, why):
    payload = _payload(_symbolic_blob())
    payload["module"] = payload["module"].replace("$dim[b]", placeholder, 1)
    with pytest.raises(ValueError, match=why):
        restored = ember.export.deserialize(_blob(payload))
        restored.call(np.ones((2, 3), F32))


def test_crafted_symbols_avals_and_values_are_refused():
    def refused(change, why):
        payload = _payload(_symbolic_blob())
        change(payload)
        with pytest.raises(ValueError, match=why):
            ember.export.deserialize(_blob(payload)).call(np.ones((2, 3), F32))
    refused(lambda p: p["shape_poly"].update(variables=["b", "os.system"]), "distinct names")
    refused(lambda p: p["shape_poly"].update(variables=["b", "c"]), "declares the variables")
    refused(lambda p: p["shape_poly"].update(constraints=["b >= __import__"]), "constraints")
    refused(lambda p: p["in_avals"][0][0].__setitem__(0, "b*b"), "Cannot solve")
    refused(lambda p: p["out_avals"][0][0].append("c"), "unknown dimension variable")
    refused(lambda p: p["out_avals"][0][0].append("- b"), "is negative")
    refused(lambda p: p["out_avals"][0][0].append("b - 5"), "refused")  # (negative for b = 2: when it is bound)
    refused(lambda p: p.update(shape_poly={"variables": ["b"]}), "lacks 'constraints'")
    # a template whose program for a binding is not ember's: refused when filled, before anything compiles
    payload = _payload(_symbolic_blob())
    payload["module"] = payload["module"].replace("tensor<$dim[b]x3xf32>", "tensor<$dim[b * 1000000]x3xf32>", 1)
    with pytest.raises(ValueError, match="refused"):
        ember.export.deserialize(_blob(payload)).call(np.ones((2000, 3), F32))


def test_old_artifacts_still_load():
    exp = ember.export.export(ember.jit(lambda x: x * 2))(np.ones(3, F32))
    blob = exp.serialize()
    assert _payload(blob)["format"] == 1 and ember.export.maximum_supported_calling_convention_version == 3
    np.testing.assert_array_equal(np.asarray(ember.export.deserialize(blob).call(np.ones(3, F32))), [2, 2, 2])


# ---------------------------------------------------------------------------------------------------------------
# The rest of jax.export's names

def test_jax_export_names_are_all_there():
    public = {n for n in dir(jax.export) if not n.startswith("_")}
    assert public <= {n for n in dir(ember.export) if not n.startswith("_")}
    fields = {n for n in dir(jax.export.Exported) if not n.startswith("_")}
    b, = ember.export.symbolic_shape("b")
    exp = ember.export.export(ember.jit(lambda x: x * 2))(ember.ShapeDtypeStruct((b,), F32))
    jexp = jax.export.export(jax.jit(lambda x: x * 2))(jax.ShapeDtypeStruct(jax.export.symbolic_shape("b"), F32))
    fields |= {f for f in vars(jexp) if not f.startswith("_")}
    assert fields <= set(dir(exp))
    for name in ("ordered_effects", "unordered_effects", "disabled_safety_checks", "module_kept_var_idx",
                 "uses_global_constants", "nr_devices", "platforms", "in_shardings_hlo"):
        assert getattr(exp, name) == getattr(jexp, name), name
    assert isinstance(exp.mlir_module_serialized, bytes) and exp.mlir_module_serialized.decode() == exp.mlir_module()
    assert ember.export.default_export_platform() == jax.export.default_export_platform() == "cpu"
    assert ember.export.minimum_supported_calling_convention_version == 1  # (ember's artifact formats)


def test_disabled_safety_checks_as_jax():
    for mod in (jax, ember):
        check = mod.export.DisabledSafetyCheck
        assert str(check.platform()) == "platform" and check.platform() == check.platform()
        assert check.custom_call("foo").is_custom_call() == "foo" and check.platform().is_custom_call() is None
        assert str(check.custom_call("foo")) == "custom_call:foo"
    exp = ember.export.export(ember.jit(lambda x: x + 1),
                              disabled_checks=[ember.export.DisabledSafetyCheck.platform()])(np.ones(2, F32))
    payload = _payload(exp.serialize())
    assert payload["format"] == 3 and payload["disabled_checks"] == ["platform"] and payload["shape_poly"] is None
    payload["platforms"] = ["cuda"]  # (exported elsewhere: runs here, the platform check disabled)
    restored = ember.export.deserialize(_blob(payload))
    np.testing.assert_array_equal(np.asarray(restored.call(np.ones(2, F32))), [2, 2])
    payload["disabled_checks"] = []
    with pytest.raises(ValueError, match="was exported for platforms"):
        ember.export.deserialize(_blob(payload)).call(np.ones(2, F32))
    with pytest.raises(TypeError, match="DisabledSafetyCheck"):
        ember.export.export(ember.jit(lambda x: x), disabled_checks=["platform"])


Point = collections.namedtuple("Point", ["x", "y"])


class Box:
    def __init__(self, value, label):
        self.value, self.label = value, label


ember.tree_util.register_pytree_node(Box, lambda b: ((b.value,), b.label), lambda label, c: Box(c[0], label))
ember.export.register_namedtuple_serialization(Point, serialized_name="test_shape_poly.Point")
jax.export.register_namedtuple_serialization(Point, serialized_name="test_shape_poly.Point")  # (JAX's registry)
ember.export.register_pytree_node_serialization(Box, serialized_name="test_shape_poly.Box",
                                                serialize_auxdata=lambda label: label.encode(),
                                                deserialize_auxdata=lambda data: data.decode())


def test_registered_pytree_nodes_are_serialized():
    exp = ember.export.export(ember.jit(lambda p, box, od: Point(p.x + box.value, od["a"] * 2)))(
        Point(np.ones(2, F32), np.ones(2, F32)), Box(np.ones(2, F32), "tag"),
        collections.OrderedDict(a=np.ones(2, F32)))
    restored = ember.export.deserialize(exp.serialize())
    out = restored.call(Point(np.ones(2, F32), np.ones(2, F32)), Box(np.full(2, 3, F32), "tag"),
                        collections.OrderedDict(a=np.ones(2, F32)))
    assert type(out) is Point
    np.testing.assert_array_equal(np.asarray(out.x), [4, 4])
    for mod in (jax, ember):
        with pytest.raises(ValueError, match="Duplicate serialization registration"):
            mod.export.register_namedtuple_serialization(Point, serialized_name="another")
        with pytest.raises(ValueError, match="collections.namedtuple"):
            mod.export.register_namedtuple_serialization(Box, serialized_name="Box2")
    payload = _payload(exp.serialize())
    text = json.dumps(payload).replace("test_shape_poly.Box", "not.registered")
    with pytest.raises(ValueError, match="not registered here"):
        ember.export.deserialize(MAGIC + text.encode())


def test_symbolic_args_specs_as_jax():
    args = (np.ones((4, 3), F32), {"w": np.ones((3,), F32)})
    for specs in ["b, ...", ("b, _", {"w": None})]:
        got = ember.export.symbolic_args_specs(args, specs)
        want = jax.export.symbolic_args_specs(args, specs)
        assert str(jax.tree_util.tree_map(lambda s: s.shape, want)) == \
            str(ember.tree_util.tree_map(lambda s: s.shape, got))
    b_got = ember.export.symbolic_args_specs(args, "b, ...")
    assert b_got[0].shape[0].scope is b_got[1]["w"].shape[0].scope  # (one scope for all the arguments)


# ---------------------------------------------------------------------------------------------------------------
# dim_as_value: its rules (it cannot be a Case of the primitive harness: it exists only in symbolic tracing)

def test_dim_as_value_rules():
    from ember._core import PRIMITIVES
    prim = PRIMITIVES["dim_as_value"]
    b, = ember.export.symbolic_shape("b")
    x = ember.ShapeDtypeStruct((b, 3), F32)
    # abstract eval: a weakly typed default int (x.shape[0] in arithmetic is a Python int to promotion)
    ir = ember.jit(lambda x: x * x.shape[0]).trace(x).jaxpr
    assert "dim_as_value[dim=b]" in str(ir) and "f32[b,3] = mul" in str(ir)
    aval = prim.rules["abstract_eval"](dim=b)
    assert aval.dtype == np.int32 and aval.weak_type and aval.shape == ()
    with pytest.raises(TypeError, match="dim_as_value: dim must be a symbolic dimension"):
        prim.rules["abstract_eval"](dim=3)
    # lowering: a constant holding the placeholder, filled with the argument's size at call time
    exp = ember.export.export(ember.jit(lambda x: x * x.shape[0] + (2 * x.shape[0] + 1)))(x)
    assert "dense<$dim[b]> : tensor<i32>" in exp.mlir_module()
    jexp = jax.export.export(jax.jit(lambda x: x * x.shape[0] + (2 * x.shape[0] + 1)))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 3"), F32))
    v = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(np.asarray(exp.call(v)), np.asarray(jexp.call(v)))
    # jvp, vjp: not differentiable (an integer without operands); the derivative flows through x alone
    assert prim.marks["jvp"] == prim.marks["vjp"] == "not differentiable"
    np.testing.assert_allclose(np.asarray(ember.grad(lambda v: exp.call(v).sum())(v)),
                               np.asarray(jax.grad(lambda v: jexp.call(v).sum())(v)))
    # batching: vmap inside the exported function (x.shape[1] of a batched x is the member's size)
    vexp = ember.export.export(ember.jit(ember.vmap(lambda r: r / r.shape[0])))(
        ember.ShapeDtypeStruct(ember.export.symbolic_shape("n, b"), F32))
    jv = jax.export.export(jax.jit(jax.vmap(lambda r: r / r.shape[0])))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("n, b"), F32))
    np.testing.assert_allclose(np.asarray(vexp.call(v)), np.asarray(jv.call(v)))
    def batched(r):  # (the rule itself: no operands, so the value is the same for every member)
        outs, dims = prim.rules["batching"]([], [], dim=r.shape[0])
        assert dims == [None]
        return r * outs[0]
    np.testing.assert_array_equal(np.asarray(ember.export.export(ember.jit(batched))(x).call(v)), v * 4)
    # outside symbolic tracing it has no value
    with pytest.raises(TypeError, match="has no value outside"):
        b * 1.5


# ---------------------------------------------------------------------------------------------------------------
# The sweep (slow): more functions, more sizes

SWEEP = {
    "broadcast_col": ("b, 3", lambda np_, x: x * x[:, :1]), "var_std": ("b, 3", lambda np_, x: np_.std(x, 0)),
    "reshape_m1": ("b, 4", lambda np_, x: x.reshape(-1)), "transpose": ("b, 3", lambda np_, x: x.T @ x),
    "index_col": ("b, 3", lambda np_, x: x[:, 1]), "stack": ("b, 3", lambda np_, x: np_.stack([x, x], axis=1)),
    "convert": ("b, 3", lambda np_, x: (x * 3).astype(np_.int32).astype(np_.float32)),
    "expand": ("b, 3", lambda np_, x: np_.squeeze(np_.expand_dims(x, 1), 1)),
    "full": ("b, 3", lambda np_, x: np_.full((x.shape[0], 2), 3.0) + x[:, :2] + np_.zeros_like(x)[:, 1:]),
    "broadcast_to": ("b, 3", lambda np_, x: np_.broadcast_to(x[:, :1], x.shape) + x),
    "flip_roll": ("b, 3", lambda np_, x: np_.roll(np_.flip(x, 0), 1, axis=1)),
    "take": ("b, 3", lambda np_, x: x[np_.array([0, 0])]), "tile": ("b, 3", lambda np_, x: np_.tile(x, (2, 1))),
    "repeat": ("b, 3", lambda np_, x: np_.repeat(x, 2, axis=0)),
    "einsum": ("b, 3", lambda np_, x: np_.einsum("bi,bj->ij", x, x)),
    "layernorm": ("b, 3", lambda np_, x: (x - x.mean(-1, keepdims=True)) / np_.sqrt(x.var(-1, keepdims=True) + 1)),
    "split": ("b, 4", lambda np_, x: np_.split(x, 2, axis=1)[0]), "clip": ("b, 3", lambda np_, x: np_.clip(x, 1, 2)),
    "any_all": ("b, 3", lambda np_, x: (np_.any(x > 2, 0) & np_.all(x > -1, 0)).astype(np_.float32)),
    "diag_trace": ("b, b", lambda np_, x: np_.diagonal(x) + np_.trace(x)),
    "half": ("b, 4", lambda np_, x: x[: x.shape[0] // 2]), "strided": ("b, 3", lambda np_, x: x[::2] + 1),
    "cumsum_rev": ("b, 3", lambda np_, x: np_.cumsum(x[::-1], axis=0)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_as_jax(name):
    spec, fn = SWEEP[name]
    jexp = jax.export.export(jax.jit(lambda x: fn(jnp, x)))(jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec), F32))
    eexp = ember.export.export(ember.jit(lambda x: fn(enp, x)))(
        ember.ShapeDtypeStruct(ember.export.symbolic_shape(spec), F32))
    assert str(eexp.out_avals) == str(jexp.out_avals)
    restored = ember.export.deserialize(eexp.serialize(vjp_order=1))
    for n in (1, 2, 5, 8):
        x, = _args([spec], {"b": n}, seed=n)
        np.testing.assert_allclose(np.asarray(restored.call(x)), np.asarray(jexp.call(x)), rtol=2e-5, atol=2e-5)
        got = ember.grad(lambda x: (restored.call(x) ** 2).sum())(x)
        want = jax.grad(lambda x: (jexp.call(x) ** 2).sum())(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
