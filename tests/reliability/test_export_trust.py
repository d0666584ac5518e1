"""Exported artifacts are data, not code (docs/security.md, "Exported programs"): deserialize checks the JSON and the
module text before anything runs, serialize refuses host callbacks (as JAX), and ember's FFI handlers check every
call's buffers, so that a crafted artifact, or a module text spliced in past those checks, is an error and never a
read past a buffer or a call of a live callback. Each attack of the issue is reproduced; the ones that would run a
handler run in a subprocess with a timeout (they crashed before)."""
import json
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api.export import MAGIC
from subproc import run_python

F32 = np.float32
HEAD = "module @ember attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"


def module(args, results, body, ret):
    """A module text in ember's layout: @main(args) -> (results) with the body's ops, returning ret."""
    arg_text = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    return (HEAD + f"  func.func public @main({arg_text}) -> ({', '.join(results)}) {{\n"
            + "".join(f"    {line}\n" for line in body) + f"    func.return {ret} : {', '.join(results)}\n  }}\n}}\n")


def callback_call(key, operand="tensor<1xf32>", result="tensor<4096xf32>"):
    return (f'%0 = "stablehlo.custom_call"(%arg0) {{call_target_name = "ember_callback", api_version = 4 : i32, '
            f"backend_config = {{callback = {key} : i64}}, has_side_effect = true, operand_layouts = "
            f"[dense<[0]> : tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>]}} : ({operand}) -> "
            f"{result}")


# The artifact: the host-callback handler's copy (callback 0) on an f32[1] operand to an f32[4096] result
ATTACK = module(["tensor<1xf32>"], ["tensor<4096xf32>"], [callback_call(0)], "%0")


def artifact(text, in_avals, out_avals, **changes):
    payload = {"format": 1, "ember": "0.1", "fun_name": "f",
               "in_tree": {"tuple": [{"tuple": ["*"] * len(in_avals)}, {"dict": []}]},
               "out_tree": {"tuple": ["*"] * len(out_avals)}, "platforms": ["cpu"], "in_avals": in_avals,
               "out_avals": out_avals, "module": text, "vjp": None}
    payload.update(changes)
    return MAGIC + json.dumps(payload).encode()


def payload_of(blob):
    return json.loads(blob[len(MAGIC):])


def blob_of(payload):
    return MAGIC + json.dumps(payload).encode()


def legit(vjp_order=1):
    fun = ember.jit(lambda x, d: {"y": enp.tanh(x @ np.ones((2, 3), F32)) * d["s"], "n": (x > 0).sum()})
    exp = ember.export.export(fun)(ember.ShapeDtypeStruct((4, 2), F32), {"s": F32(2)})
    return exp.serialize(vjp_order=vjp_order)


def refused(blob, *patterns):
    with pytest.raises(ValueError) as info:
        ember.export.deserialize(blob)
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), message
    return message


# ---------------------------------------------------------------------------------------------------------------
def test_the_crafted_callback_artifact_is_refused_at_deserialize():
    refused(artifact(ATTACK, [[[1], "float32", False]], [[[4096], "float32", False]]), r"function 'f'",
            r"custom_call @ember_callback: a host callback")


def test_an_artifact_naming_a_live_callback_is_refused():
    fun = ember.jit(lambda x: ember.pure_callback(lambda a: a * 2, ember.ShapeDtypeStruct((1,), F32), x))
    lowered = fun.lower(np.ones(1, F32))
    key = int(re.search(r"callback = (\d+)", lowered.as_text()).group(1))
    assert key > 2**32  # (a random token, not a count a crafted module could guess)
    text = module(["tensor<1xf32>"], ["tensor<1xf32>"], [callback_call(key, result="tensor<1xf32>")], "%0")
    refused(artifact(text, [[[1], "float32", False]], [[[1], "float32", False]]), "ember_callback")


@pytest.mark.parametrize("kind", ["pure_callback", "debug.print", "io_callback"])
def test_programs_with_host_callbacks_cannot_be_serialized_as_in_jax(kind):
    def body(lib, np_, x):
        if kind == "pure_callback":
            return lib.pure_callback(lambda a: a * 2, lib.ShapeDtypeStruct(x.shape, x.dtype), x)
        if kind == "debug.print":
            lib.debug.print("x={}", x)
            return x + 1
        io = jax.experimental.io_callback if lib is jax else ember.experimental.io_callback
        return io(lambda a: a * 2, lib.ShapeDtypeStruct(x.shape, x.dtype), x)
    x = np.ones(3, F32)
    with pytest.raises(NotImplementedError) as jax_error:
        jax.export.export(jax.jit(lambda x: body(jax, jnp, x)))(x)
    exp = ember.export.export(ember.jit(lambda x: body(ember, enp, x)))(x)
    with pytest.raises(NotImplementedError) as ember_error:
        exp.serialize()
    assert str(jax_error.value) in str(ember_error.value)  # "serialization of host_callbacks is not yet implemented"
    assert "ember.export" in str(ember_error.value)
    np.testing.assert_array_equal(np.asarray(exp.call(x)), 2 * x if kind != "debug.print" else x + 1)  # (here: ok)


def test_malformed_json_is_a_clear_value_error():
    blob = legit()
    for body in (b"[]", b'"text"', b"1", b"null"):
        refused(MAGIC + body, "JSON is not an object")
    deep = payload_of(blob)
    deep["in_tree"] = "DEEP"
    for levels in (150, 100_000):  # (more than 200 JSON levels; json.loads: a RecursionError before)
        nested = '{"tuple":[' * levels + '"*"' + "]}" * levels
        refused(blob_of(deep).replace(b'"DEEP"', nested.encode()), "nested more than the 200 levels")
    refused(blob.replace(b'"format":1', b'"format":true'), "format is a boolean")
    refused(blob.replace(b'"format":1', b'"format":4'), "format 4 is not supported", "newer")
    refused(blob.replace(b'"format":1', b'"format":3'), "lacks 'disabled_checks', 'shape_poly'")
    # (format 2 is a program exported for a mesh: it has the mesh and the specs a format-1 artifact lacks)
    refused(blob.replace(b'"format":1', b'"format":2'), "lacks 'in_specs', 'mesh', 'out_specs'")
    refused(blob.replace(b'"fun_name":', b'"fun_name":"x","fun_name":'), "appears twice")
    extra = payload_of(blob)
    extra["code"] = "import os"
    refused(blob_of(extra), "function '<lambda>'", "unknown keys 'code'")
    missing = payload_of(blob)
    del missing["platforms"]
    refused(blob_of(missing), "lacks 'platforms'")
    for platforms in ([], "cpu", ["CPU;"], [1]):
        refused(blob_of({**payload_of(blob), "platforms": platforms}), "platforms must be")
    with pytest.raises(TypeError, match="expected the artifact's bytes"):
        ember.export.deserialize("ember-exported\n{}")


def test_bad_avals_and_pytrees_are_clear_value_errors():
    blob = legit()
    for aval, pattern in (([[-4, 2], "float32", False], "shape"), ([[4, 2.0], "float32", False], "shape"),
                          ([[True, 2], "float32", False], "shape"), ([[4, 2], "object", False], "dtype"),
                          ([[4, 2], "float32", 0], "weak_type"), ([[2**31 - 1] * 3, "float32", False], "larger"),
                          ([[4, 2], "float32"], r"\[shape, dtype, weak_type\]")):
        bad = payload_of(blob)
        bad["in_avals"][0] = aval
        refused(blob_of(bad), r"in_avals\[0\]", pattern)
    bad = payload_of(blob)
    bad["in_avals"][0] = [[4, 3], "float32", False]  # (the module's @main takes f32[4,2])
    refused(blob_of(bad), "@main takes", "not the types of")
    bad = payload_of(blob)
    bad["out_tree"] = "*"
    refused(blob_of(bad), "out_tree has 1 leaves for 2 out_avals")
    bad = payload_of(blob)
    bad["in_tree"] = {"set": ["*"]}
    refused(blob_of(bad), "unknown pytree node 'set'")
    bad = payload_of(blob)
    bad["vjp"]["out_avals"] = [[[4, 2], "float64", False]]
    refused(blob_of(bad), "vjp module.s @main takes")
    bad = payload_of(blob)
    bad["vjp"]["in_avals"].pop()
    bad["vjp"]["module"] = bad["vjp"]["module"].replace(", %arg2: tensor<4x3xf32>", "")
    refused(blob_of(bad), "its vjp takes .* a VJP of the function takes its inputs")


def test_an_artifact_for_another_platform_is_refused_in_jax_words():
    x = np.ones(3, F32)
    jax_exp = jax.export.export(jax.jit(lambda x: x * 2), platforms=["cuda"])(x)
    with pytest.raises(ValueError) as jax_error:
        jax_exp.call(x)
    exp = ember.export.export(ember.jit(lambda x: x * 2))(x)
    cuda = payload_of(exp.serialize())
    cuda["platforms"], cuda["fun_name"] = ["cuda"], "<lambda>"
    restored = ember.export.deserialize(blob_of(cuda))
    assert restored.platforms == ("cuda",)
    with pytest.raises(ValueError) as ember_error:
        restored.call(x)
    assert str(ember_error.value) == str(jax_error.value)
    with pytest.raises(ValueError, match="exported for platforms"):
        ember.jit(restored.call)(x)


MODULES = {
    "an op ember never emits": (module(["tensor<2xf32>"], ["tensor<2xf32>"], [
        '%0 = "chlo.bessel_i0e"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'], "%0"),
        "bessel_i0e is not one ember emits"),
    "another custom call target": (module(["tensor<2xui32>"], ["tensor<2xui32>"], [
        '%0 = "stablehlo.custom_call"(%arg0) {call_target_name = "some_other_target"} : (tensor<2xui32>) -> '
        "tensor<2xui32>"], "%0"), "some_other_target: not a target ember"),
    "a LAPACK call whose result outgrows its operand": (module(["tensor<2x2xf32>"], ["tensor<64x64xf32>"], [
        '%0:2 = "stablehlo.custom_call"(%arg0) {call_target_name = "ember_lapack_potrf", api_version = 4 : i32, '
        "backend_config = {lower = 1 : i64}, has_side_effect = false, operand_layouts = [dense<[0, 1]> : "
        "tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : "
        "(tensor<2x2xf32>) -> (tensor<64x64xf32>, tensor<i32>)"], "%0#0"),
        "ember_lapack_potrf: operand and result types disagree"),
    "a sort call whose result outgrows its operand": (module(["tensor<2xf32>"], ["tensor<4096xf32>"], [
        '%0 = "stablehlo.custom_call"(%arg0) {call_target_name = "ember_sort", api_version = 4 : i32, '
        "backend_config = {num_keys = 1 : i64, positions = 0 : i64}, has_side_effect = false, operand_layouts = "
        "[dense<[0]> : tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>]} : (tensor<2xf32>) -> "
        "tensor<4096xf32>"],
        "%0"), "ember_sort: the results must be the operands' types"),
    "a sort call with no keys": (module(["tensor<2xf32>"], ["tensor<2xf32>"], [
        '%0 = "stablehlo.custom_call"(%arg0) {call_target_name = "ember_sort", api_version = 4 : i32, '
        "backend_config = {num_keys = 0 : i64, positions = 0 : i64}, has_side_effect = false, operand_layouts = "
        "[dense<[0]> : tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>]} : (tensor<2xf32>) -> "
        "tensor<2xf32>"],
        "%0"), "ember_sort: num_keys = 0: the keys must be 1 to 1 operands"),
    "a sort call whose positions replace a key": (module(["tensor<2xf32>"], ["tensor<2xf32>"], [
        '%0:2 = "stablehlo.custom_call"(%arg0) {call_target_name = "ember_sort", api_version = 4 : i32, '
        "backend_config = {num_keys = 1 : i64, positions = 1 : i64}, has_side_effect = false, operand_layouts = "
        "[dense<[0]> : tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>, dense<[0]> : "
        "tensor<1xindex>]} : (tensor<2xf32>) -> (tensor<2xi32>, tensor<2xf32>)"], "%0#1"),
        "ember_sort: num_keys = 1: the keys must be 1 to 1 operands, the positions after them"),
    "a call of a function outside the module": (module(["tensor<2xui32>"], ["tensor<2xui32>"], [
        '%0 = "func.call"(%arg0) {callee = @shmap_body} : (tensor<2xui32>) -> tensor<2xui32>'], "%0"),
        "@shmap_body, which is not a function of the module"),
    "an attribute alias": ("#target = \"ember_callback\"\n" + module(["tensor<2xui32>"], ["tensor<2xui32>"], [],
                                                                       "%arg0"), "expected 'module'"),
    "an escaped target name": (module(["tensor<1xf32>"], ["tensor<4096xf32>"], [
        callback_call(0).replace("ember_callback", "ember\\5Fcallback")], "%0"), "ember_callback"),
    "recursion (it crashed XLA)": (HEAD + "".join(
        f"  func.func {'public' if name == 'main' else 'private'} @{name}(%arg0: tensor<2xf32>) -> (tensor<2xf32>) {{\n"
        f'    %0 = "func.call"(%arg0) {{callee = @{callee}}} : (tensor<2xf32>) -> tensor<2xf32>\n'
        "    func.return %0 : tensor<2xf32>\n  }\n" for name, callee in (("main", "g"), ("g", "main"))) + "}\n",
        r"a cycle \(@main -> @g -> @main\)"),
    "a custom-form op": (module(["tensor<2xui32>"], ["tensor<2xui32>"], [
        "%0 = stablehlo.not %arg0 : tensor<2xui32>"], "%0"), "generic form"),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_a_module_ember_would_not_write_is_refused(name):
    text, pattern = MODULES[name]
    shape = re.search(r"@main\(%arg0: tensor<([0-9x]*)(\w+)>", text)
    dims, element = [int(d) for d in shape.group(1).split("x")[:-1]], shape.group(2)
    dtype = {"f32": "float32", "ui32": "uint32"}[element]
    out = re.search(r"-> \(tensor<([0-9x]*)", text).group(1)
    refused(artifact(text, [[dims, dtype, False]], [[[int(d) for d in out.split("x")[:-1]], dtype, False]]),
            "function 'f'", pattern)


def test_the_op_list_covers_the_ops_ember_emits():
    """Every op name ember's source writes (quoted, through the lowerings' op helpers, or as an elementwise family's
    op) is one deserialize accepts: a new lowering's op must be added to module_check.OPS."""
    from ember._hlo.module_check import OPS
    names = set()
    for path in pathlib.Path(ember.__file__).parent.rglob("*.py"):
        text = path.read_text()
        names |= {"stablehlo." + m for m in re.findall(r'\bop\("([a-z_]+)"', text)}
        names |= set(re.findall(r'"((?:stablehlo|chlo)\.[a-z_0-9]+)"', text))
        names |= {m if "." in m else "stablehlo." + m
                  for m in re.findall(r'\b(?:unary|binary)\(\s*"\w+",\s*"([\w.]+)"', text)}
    assert len(names) > 80 and names <= OPS, sorted(names - OPS)


# ---------------------------------------------------------------------------------------------------------------
def test_legitimate_exports_round_trip_and_run():
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], F32)

    def linalg(m):
        q, r = enp.linalg.qr(m)
        lu = ember.lax.linalg.lu(m)[0]
        return (enp.linalg.cholesky(m), enp.linalg.eigh(m)[0], enp.linalg.svd(m, compute_uv=False), q @ r, lu,
                enp.linalg.solve(m, m[:, :1]), enp.abs(enp.linalg.eigvals(m)).sum(),
                ember.lax.linalg.triangular_solve(m, m, left_side=True, lower=True))
    exp = ember.export.export(ember.jit(linalg))(a)
    text = exp.mlir_module()
    for target in ("potrf", "syevd", "gesdd", "geqrf", "orgqr", "getrf", "geev", "trsm"):
        assert f"ember_lapack_{target}" in text
    got = ember.export.deserialize(exp.serialize()).call(a)
    for g, w in zip(got, exp.call(a)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got[3]), a, rtol=1e-5, atol=1e-6)

    def control(x, i):
        y = ember.lax.fori_loop(0, 3, lambda k, c: c * 2.0, x)
        z = ember.lax.cond(i > 0, lambda v: v + 1, lambda v: v - 1, y)
        return ember.lax.scan(lambda c, v: (c + v, c * v), 0.0, z)
    exp = ember.export.export(ember.jit(control))(np.arange(4, dtype=F32), np.int32(1))
    for g, w in zip(ember.export.deserialize(exp.serialize()).call(np.arange(4, dtype=F32), np.int32(1)),
                    exp.call(np.arange(4, dtype=F32), np.int32(1))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))

    mesh = ember.make_mesh((1,), ("x",))
    sharded = ember.shard_map(lambda x: ember.lax.psum(x, "x") * 2, mesh=mesh, in_specs=ember.P("x"),
                              out_specs=ember.P("x"))
    exp = ember.export.export(ember.jit(sharded))(np.ones(4, F32))
    np.testing.assert_array_equal(np.asarray(ember.export.deserialize(exp.serialize()).call(np.ones(4, F32))),
                                  np.full(4, 2, F32))


@pytest.mark.usefixtures("every_kernel_shape")  # (the kernels on the AVX-512F form's shapes, either form)
def test_row_kernels_round_trip_where_they_run():
    from ember._hlo import targets
    if not targets.available("ember_rows"):
        pytest.skip("ember's row kernels need the C extension and AVX-512F or AVX2 with FMA")
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(F32)
    b = np.random.default_rng(1).standard_normal((4, 64, 64)).astype(F32)
    c = np.arange(512 * 1024, dtype=np.float32).reshape(512, 1024)
    exp = ember.export.export(ember.jit(lambda x, b, c: (ember.nn.softmax(x, axis=-1), b @ b, c.T + 1)))(x, b, c)
    assert all(f'"{t}"' in exp.mlir_module() for t in ("ember_rows", "ember_rows_bmm", "ember_rows_transpose"))
    soft, prod, transposed = ember.export.deserialize(exp.serialize()).call(x, b, c)
    np.testing.assert_array_equal(np.asarray(transposed), c.T + 1)
    np.testing.assert_allclose(np.asarray(soft), np.asarray(jax.nn.softmax(x, axis=-1)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(prod), b @ b, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------------------------
# Defence in depth: module texts spliced in past deserialize (call_exported of an ExportedModule, an internal API)
# reach the handlers, which refuse them. In a subprocess: before, these read or wrote past buffers (a 16 MiB result
# segfaulted).
HANDLERS = r'''
import re, numpy as np, ember
from ember._control.exported import ExportedModule, call_exported
from ember._core import ShapedArray
from ember._hlo import targets

def run(text, ins, outs, args):
    module = ExportedModule(text, [ShapedArray(s, d) for s, d in ins], [ShapedArray(s, d) for s, d in outs], None,
                            "attack")
    try:
        result = call_exported(args, module)
        print("RAN", [np.asarray(r).shape for r in result])
    except Exception as err:
        print("REFUSED", type(err).__name__, str(err).splitlines()[0][:300])

f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
restored = ember.export.deserialize(CHOLESKY)  # (first: its LAPACK kernel is loaded at deserialize)
print("CHOLESKY", np.asarray(restored.call(np.array([[4.0, 1.0], [1.0, 3.0]], f32))).tolist())
x = np.ones(1, f32)
assert targets.available("ember_callback")
for n in (4096, 4194304):  # the issue's copy: result-sized bytes read from a one-float operand
    run(ATTACK.replace("4096", str(n)), [((1,), f32)], [((n,), f32)], [x])
fun = ember.jit(lambda v: ember.pure_callback(lambda a: a * 2, ember.ShapeDtypeStruct((1,), np.float32), v))
lowered = fun.lower(x)
key = int(re.search(r"callback = (\d+)", lowered.as_text()).group(1))
print("KEY", key)
run(LIVE_RESULT.replace("12345", str(key)), [((1,), f32)], [((4096,), f32)], [x])  # the wrong result buffer
run(LIVE_OPERAND.replace("12345", str(key)), [((2,), f32)], [((1,), f32)], [np.ones(2, f32)])  # wrong operands
assert targets.available("ember_lapack_potrf")
run(POTRF, [((2, 2), f32)], [((64, 64), f32)], [np.eye(2, dtype=f32)])
if targets.available("ember_rows_bmm"):
    run(BMM, [((1,), f32), ((1,), f32)], [((1,), f32)], [x, x])
    run(ROWS, [((4,), i32), ((1,), f32)], [((1,), f32)], [np.zeros(4, i32), x])
else:
    print("REFUSED skipped\nREFUSED skipped")
'''

BMM = module(["tensor<1xf32>", "tensor<1xf32>"], ["tensor<1xf32>"], [
    '%0 = "stablehlo.custom_call"(%arg0, %arg1) {call_target_name = "ember_rows_bmm", api_version = 4 : i32, '
    "backend_config = {batch = 4611686018427387904 : i64, k = 2 : i64, m = 2 : i64, n = 2 : i64, trans_a = 0 : i64, "
    "trans_b = 0 : i64}, has_side_effect = false, operand_layouts = [dense<[0]> : tensor<1xindex>, dense<[0]> : "
    "tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>]} : (tensor<1xf32>, tensor<1xf32>) -> "
    "tensor<1xf32>"], "%0")
ROWS = module(["tensor<4xi32>", "tensor<1xf32>"], ["tensor<1xf32>"], [
    '%0 = "stablehlo.custom_call"(%arg0, %arg1) {call_target_name = "ember_rows", api_version = 4 : i32, '
    "backend_config = {row = 1099511627776 : i64, rows = 1 : i64}, has_side_effect = false, operand_layouts = "
    "[dense<[0]> : tensor<1xindex>, dense<[0]> : tensor<1xindex>], result_layouts = [dense<[0]> : tensor<1xindex>]} "
    ": (tensor<4xi32>, tensor<1xf32>) -> tensor<1xf32>"], "%0")


def test_the_handlers_refuse_calls_their_buffers_do_not_fit():
    """And a fresh process runs an exported linear-algebra program: the artifact's LAPACK kernels are loaded at
    deserialize (before, XLA found no handler for them)."""
    potrf = MODULES["a LAPACK call whose result outgrows its operand"][0]
    a = np.array([[4.0, 1.0], [1.0, 3.0]], F32)
    cholesky = ember.export.export(ember.jit(enp.linalg.cholesky))(a).serialize()
    live_result = module(["tensor<1xf32>"], ["tensor<4096xf32>"], [callback_call(12345)], "%0")
    live_operand = module(["tensor<2xf32>"], ["tensor<1xf32>"],
                          [callback_call(12345, operand="tensor<2xf32>", result="tensor<1xf32>")], "%0")
    code = (f"CHOLESKY = {cholesky!r}\nATTACK = {ATTACK!r}\nPOTRF = {potrf!r}\nBMM = {BMM!r}\nROWS = {ROWS!r}\n"
            f"LIVE_RESULT = {live_result!r}\nLIVE_OPERAND = {live_operand!r}\n" + HANDLERS)
    done = run_python(code, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    key = int(next(line for line in lines if line.startswith("KEY")).split()[1])
    chol = eval(next(line for line in lines if line.startswith("CHOLESKY"))[len("CHOLESKY"):])
    np.testing.assert_allclose(chol, np.linalg.cholesky(a), rtol=1e-6)
    outcomes = [line for line in lines if line.startswith(("RAN", "REFUSED"))]
    assert len(outcomes) == 7 and all(line.startswith("REFUSED") for line in outcomes), done.stdout
    assert all("ordering copy's operands (f32[1]) and results" in line for line in outcomes[:2]), outcomes
    assert "declares results (f32[1]), but the call has result buffers (f32[4096])" in outcomes[2]
    assert "lowered no call of it with those types" in outcomes[3]
    assert "ember lapack kernel potrf: its operands, results and attributes disagree" in outcomes[4]
    assert key > 2**32
    if "skipped" not in outcomes[5]:
        assert "ember_rows_bmm: operands and attributes batch, m, n, k disagree" in outcomes[5]
        assert "ember_rows: the attributes rows and row are out of range" in outcomes[6]
