"""The package's imports point one way (shared/docs/architecture.md): each layer imports only from the layers
before it, and inside the layered packages, modules import only from the modules listed before them. Imports
under `if TYPE_CHECKING:` (type hints only) are exempt from the order inside a package, never across layers."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parent.parent / "ember"

LAYERS = ["_core", "_hlo", "_prims", "_transforms", "_control", "_runtime", "_api", "_numpy", "public"]
PUBLIC = {"__init__", "config", "lax", "numpy", "ops", "tree_util", "tree", "random", "nn", "optim", "scipy",
          "checkpoints", "stages", "export", "profiler", "dtypes", "errors", "typing", "version", "image",
          "custom_batching", "custom_derivatives", "debug", "experimental", "passes", "dlpack", "distributed",
          "sharding", "example_libraries", "ad_checkpoint", "ref", "as_jax", "flatten_util", "test_util", "extend",
          "core", "interpreters", "api_util", "ffi",
          "monitoring"}

# Module order inside a package: a module imports only modules of its package listed before it.
ORDER = {
    "_core": ["config_jax", "config", "exports", "cache", "profile", "monitoring", "shape_poly", "dtypes", "sharding",
              "refs", "ir",
              "jaxpr_print", "primitive",
              "vma", "trace",
              "eval", "axes", "checks", "pytree", "user_pytree", "__init__"],
    "_hlo": ["emitter", "targets", "backend_forms", "row_fusion", "lower", "module_check", "spmd", "ffi", "__init__"],
    "_prims": ["checks", "explicit", "shape", "families", "elementwise", "slicing", "reduction", "dot", "indexing",
               "sorting", "conv", "windowed", "special", "bits", "fft", "effects", "lax_helpers", "ragged",
               "collectives", "linalg", "sharding", "refs", "ref_views", "__init__"],
    "_transforms": ["cache", "discharge", "passes", "ad", "jvp", "batching", "key_reuse", "__init__"],
    "_runtime": ["fastpath", "pjrt", "xla_proto", "xspace", "distributed", "ffi", "lapack", "rows", "sort", "vmath", "callbacks",
                 "backends", "guards", "layout", "array",
                 "dlpack", "dispatch", "sharded", "compile_cache", "hlo_text", "spmd", "refs", "compiler", "eager",
                 "__init__"],
    "_control": ["common", "cond", "loops", "cumulative", "custom", "solves", "custom_batching", "composite",
                 "exported", "callbacks", "ffi", "shard_eager", "shard_map", "pjit", "checkify", "__init__"],
    "_api": ["staging", "templates", "running", "caches", "signature", "recompiles", "stages", "sharding", "jit",
             "autodiff", "transpose", "vmap", "pmap", "forward", "export", "environment", "scopes", "closures",
             "callbacks", "debugger", "__init__"],
    "_numpy": ["dtypes", "docstrings", "promotion", "shape", "ufuncs", "creation", "mathfuncs", "reductions",
               "logexp", "cumulative", "linalg", "einsum", "indexing", "selection", "sorting", "statistics",
               "manipulation", "grids", "setops", "fft", "utilities", "factorizations", "signal", "ufunc_api",
               "methods", "__init__"],
}
# Imports inside functions hide the order; at most this many remain in ember/, each with a `# reason` comment.
MAX_FUNCTION_LEVEL_IMPORTS = 10


def _layer_and_module(parts: list[str]) -> tuple[str, str]:
    """(layer, module within the layer) of a dotted module path below `ember`."""
    if not parts or parts[0] in PUBLIC:
        return "public", parts[0] if parts else "__init__"
    return parts[0], parts[1] if len(parts) > 1 else "__init__"


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in ROOT.rglob("*.py"))


def _imports(path: pathlib.Path) -> list[tuple[list[str], bool]]:
    """The ember modules a file imports, as dotted parts below `ember`, and whether under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            type_only.update(id(n) for child in node.body for n in ast.walk(child))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ember":
            parts = node.module.split(".")[1:]
            for alias in node.names:  # `from ember._runtime import pjrt` imports the submodule ember._runtime.pjrt
                sub = ROOT.joinpath(*parts, alias.name)
                is_module = sub.with_suffix(".py").exists() or (sub / "__init__.py").exists()
                found.append((parts + [alias.name] if is_module else parts, id(node) in type_only))
        elif isinstance(node, ast.Import):
            found.extend((alias.name.split(".")[1:], id(node) in type_only)
                         for alias in node.names if alias.name.split(".")[0] == "ember")
    return found


def violations(path: pathlib.Path, own: list[str]) -> list[str]:
    """What is wrong with the imports of the file at path, were it the module ember.<own>."""
    layer, module = _layer_and_module(own)
    found = []
    for parts, type_only in _imports(path):
        their_layer, their_module = _layer_and_module(parts)
        name = f"ember.{'.'.join(parts)}"
        if LAYERS.index(their_layer) > LAYERS.index(layer):
            found.append(f"{'/'.join(own)} (layer {layer}) imports {name} (layer {their_layer})")
        elif their_layer == layer and layer in ORDER and not type_only and their_module != module:
            order = ORDER[layer]
            if module not in order or their_module not in order:
                found.append(f"{layer}/{module} or {their_module} is missing from ORDER")
            elif order.index(their_module) > order.index(module):
                found.append(f"{'/'.join(own)} imports {name}, listed after it in {layer}'s order")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way(path):
    assert violations(path, list(path.relative_to(ROOT).with_suffix("").parts)) == []


def test_pjrt_binding_imports_nothing_else_from_ember():
    # (but ember._runtime.fastpath, which picks the C extension of the hot path and imports no ember module)
    for path in sorted((ROOT / "_runtime" / "pjrt").glob("*.py")):
        for parts, _ in _imports(path):
            assert parts[:2] == ["_runtime", "pjrt"] or parts == ["_runtime", "fastpath"], \
                f"{path.name} imports ember.{'.'.join(parts)}"
    assert _imports(ROOT / "_runtime" / "fastpath.py") == []


def test_every_module_is_in_a_layer():
    for path in _modules():
        layer, _ = _layer_and_module(list(path.relative_to(ROOT).with_suffix("").parts))
        assert layer in LAYERS, f"{path.relative_to(ROOT)} is in no layer"


def test_order_lists_every_module():
    for layer, order in ORDER.items():
        present = {p.stem if p.is_file() else p.name for p in (ROOT / layer).iterdir()
                   if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())}
        assert present == set(order), f"{layer}: ORDER lists {sorted(order)}, the package has {sorted(present)}"


def function_level_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, text) of each import statement inside a function of the file at path."""
    lines = path.read_text().splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child.lineno, lines[child.lineno - 1].strip()))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))
    visit(ast.parse(path.read_text()), False)
    return found


def test_few_function_level_imports_each_with_a_reason():
    found = [(str(path.relative_to(ROOT)), line, text) for path in _modules()
             for line, text in function_level_imports(path)]
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, f"{len(found)} imports inside functions: {found}"
    assert [f for f in found if "# " not in f[2]] == [], "an import inside a function needs a `# reason` comment"


def test_function_level_imports_are_found(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef f():\n    import re  # a reason\n    def g():\n        from x import y\n"
                      "    return re\n")
    assert function_level_imports(sample) == [(4, "import re  # a reason"), (6, "from x import y")]


def test_a_violation_is_caught(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ember._api import jit\nfrom ember._prims.dot import dot_general\n")
    assert violations(bad, ["_prims", "shape"]) == [
        "_prims/shape (layer _prims) imports ember._api.jit (layer _api)",
        "_prims/shape imports ember._prims.dot, listed after it in _prims's order"]
