"""Generate docs/api.md: which public names of every public JAX 0.10.2 module (listed in
tests/api_names/jax_0.10.2.json) ember has, each with its summary line, and why each name it lacks is absent.

    python3 tools/api_docs.py                  # rewrite docs/api.md
    python3 tools/api_docs.py --check          # exit 1 if docs/api.md is out of date (tests/test_api_coverage.py)
    python3 tools/api_docs.py --refresh-names  # rewrite the reference list from the installed JAX (needs jax)

`jax.X` corresponds to `ember.X` (the `jax` module to `ember`), as the drop-in `ember.as_jax` maps them. A name is
present when ember's module has it (or has it as a submodule); otherwise it must be listed in ABSENT
(tools/api_absent.py) with the reason it is deliberately absent: tests/test_api_coverage.py fails on a name that is
neither.
"""
from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = ROOT / "tests" / "api_names" / "jax_0.10.2.json"
DOC = ROOT / "docs" / "api.md"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from api_absent import ABSENT, NOT_YET  # noqa: E402

# The modules whose dir() is their API by design (kept whole); in the others a name bound to a foreign module, to
# a typing helper or to a `from __future__` feature is an import, not API.
_FACADES = ("jax.numpy", "jax.lax")
_FOREIGN = {"typing", "typing_extensions", "collections.abc", "collections", "functools", "itertools",
            "dataclasses", "contextlib", "warnings", "operator", "abc", "enum", "types", "weakref", "threading",
            "logging", "os", "sys", "math", "re", "inspect"}
# Public modules below these are counted one level deep (jax.experimental.pallas, not jax.experimental.pallas.ops).
_ONE_LEVEL = ("experimental", "extend", "interpreters", "tools", "example_libraries")


def refresh_names() -> dict[str, list[str]]:
    """{module: sorted public names} of every importable public module of the installed JAX."""
    import pkgutil

    import jax

    def in_scope(name: str) -> bool:
        parts = name.split(".")
        return (not any(p.startswith("_") for p in parts)
                and not (len(parts) > 3 and parts[1] in _ONE_LEVEL))

    modules = ["jax"]
    for info in pkgutil.walk_packages(jax.__path__, "jax."):
        if in_scope(info.name):
            try:
                importlib.import_module(info.name)
            except Exception:  # a module that needs what is not installed (jax2tf: TensorFlow)
                continue
            modules.append(info.name)
    out = {}
    for name in modules:
        module = importlib.import_module(name)
        kept = []
        for attr in sorted(dir(module)):
            if attr.startswith("_"):
                continue
            value = getattr(module, attr)
            if name not in _FACADES:
                if isinstance(value, types.ModuleType) and value.__name__ not in (f"{name}.{attr}", f"jax.{attr}"):
                    continue
                if type(value).__name__ == "_Feature" or (
                        not isinstance(value, (types.ModuleType, int, float, str))
                        and getattr(value, "__module__", None) in _FOREIGN):
                    continue
            kept.append(attr)
        out[name] = kept
    return out


def reference(module: str) -> list[str]:
    """The public names of JAX 0.10.2's `module` (checked in)."""
    return json.loads(NAMES.read_text())[module]


def ember_module(jax_module: str) -> types.ModuleType | None:
    """ember's module for `jax_module` (jax.X -> ember.X), or None."""
    try:
        return importlib.import_module("ember" + jax_module[len("jax"):])
    except ImportError:
        return None


def has(module: types.ModuleType, name: str) -> bool:
    if hasattr(module, name):
        return True
    try:
        importlib.import_module(f"{module.__name__}.{name}")
    except ImportError:
        return False
    return True


def coverage(later: bool = False) -> dict[str, tuple[list[str], dict[str, str], list[str]]]:
    """{jax module: (present, {absent name: reason}, missing)}: missing names are neither present nor explained.
    later: the names NOT_YET lists (planned, not deliberately absent) instead of the deliberately absent ones."""
    out = {}
    for jax_module, names in json.loads(NAMES.read_text()).items():
        module = ember_module(jax_module)
        reasons = (NOT_YET if later else ABSENT).get(jax_module, {})
        present, absent, missing = [], {}, []
        if module is None and not any("*" in table.get(jax_module, {}) for table in (ABSENT, NOT_YET)):
            missing.append("(the module)")
        for name in names:
            if module is not None and has(module, name):
                present.append(name)
            elif name in reasons or "*" in reasons:
                absent[name] = reasons.get(name, reasons.get("*"))
            else:
                missing.append(name)
        out[jax_module] = (present, absent, missing)
    return out


def summary(obj: object) -> str:
    from ember._core import Primitive
    if isinstance(obj, Primitive):
        return f"ember's `{obj.name}` primitive (its params are ember's)"
    if inspect.ismodule(obj):
        return (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ")
    doc = inspect.getdoc(obj) if callable(obj) or inspect.isclass(obj) else None
    if not doc or (inspect.isclass(obj) and obj.__module__.split(".")[0] in ("numpy", "builtins", "ml_dtypes")):
        if isinstance(obj, type) or type(obj).__module__.startswith("numpy"):
            return "numpy's own" if not callable(obj) or isinstance(obj, type) else (doc or "").split("\n")[0]
        return ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ")
    return (line[:117] + "...") if len(line) > 120 else line


def render() -> str:
    cov, later = coverage(), coverage(later=True)
    lines = ["# API coverage", "",
             "Generated by `python3 tools/api_docs.py` from the code (tests/test_api_coverage.py fails when it is "
             "stale, and when a name is neither in ember nor listed as deliberately absent with its reason in "
             "tools/api_absent.py). The reference is every public module of JAX 0.10.2 and its public names "
             "(`dir()`, less imports; tests/api_names/jax_0.10.2.json); `jax.X` is `ember.X`, as under the drop-in "
             "`ember.as_jax`.", "",
             "| JAX module | names | in ember | deliberately absent | not yet | missing |",
             "|---|---:|---:|---:|---:|---:|"]
    totals = [0, 0, 0, 0, 0]
    for jax_module, (present, absent, missing) in cov.items():
        planned = later[jax_module][1]
        missing = [n for n in missing if n not in planned]
        row = [len(present) + len(absent) + len(planned) + len(missing), len(present), len(absent), len(planned),
               len(missing)]
        totals = [a + b for a, b in zip(totals, row)]
        lines.append(f"| [`{jax_module}`](#{jax_module.replace('.', '')}) | " + " | ".join(map(str, row)) + " |")
    lines += ["| all | " + " | ".join(map(str, totals)) + " |", ""]
    for jax_module, (present, absent, missing) in cov.items():
        module = ember_module(jax_module)
        names = sorted(present + list(absent) + missing, key=str.lower)
        planned = later[jax_module][1]
        lines += [f"## {jax_module}", ""]
        whole = ABSENT.get(jax_module, {}).get("*")
        if not whole and not present and "*" in NOT_YET.get(jax_module, {}):
            listed = ", ".join(f"`{n}`" for n in names if n != "(the module)") or "no public names"
            lines += [f"Not yet in ember: {NOT_YET[jax_module]['*']} ({listed}).", ""]
            continue
        if whole and not present:
            listed = ", ".join(f"`{n}`" for n in names) or "no public names"
            lines += [f"Deliberately absent: {whole} ({listed}).", ""]
            continue
        if not names:
            lines += [f"`{jax_module}` has no public names; `ember{jax_module[3:]}` imports.", ""]
            continue
        lines += ["| name | in ember | summary or reason |", "|---|---|---|"]
        for name in names:
            if name in present:
                value = (getattr(module, name) if hasattr(module, name)
                         else importlib.import_module(f"{module.__name__}.{name}"))
                text = summary(value)
                lines.append(f"| `{name}` | yes | {text.replace('|', chr(92) + '|')} |")
            elif name in absent:
                lines.append(f"| `{name}` | absent | {absent[name]} |")
            elif name in planned:
                lines.append(f"| `{name}` | not yet | {planned[name]} |")
            else:
                lines.append(f"| `{name}` | **missing** | |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    if "--refresh-names" in sys.argv:
        NAMES.write_text(json.dumps(refresh_names(), indent=0, sort_keys=True) + "\n")
        print(f"wrote {NAMES}")
        return 0
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/api.md is out of date: run python3 tools/api_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
