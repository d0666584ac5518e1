"""Run a JAX library's own test suite twice, on JAX and on ember through the drop-in (ember.as_jax,
docs/as_jax.md), and print the counts side by side and the causes of ember's failures.

    python3 tools/run_library_tests.py optax [--only jax|ember] [-n 2] [--files optax/_src/alias_test.py ...]
        [-k EXPR] [--top 15] [--out DIR] [--timeout 3600] [--regroup]
    python3 tools/run_library_tests.py chex [same options; --files chex/_src/asserts_test.py]
    python3 tools/run_library_tests.py equinox --source EQUINOX_CHECKOUT [same options; --files tests/test_nn.py]

optax, chex: the *_test.py files of the installed package (both wheels ship their tests), in a scratch directory
with an empty pytest.ini (neither ember's nor any other configuration applies). equinox: the tests/ of a checkout of
its source at the installed version's tag (`git clone -b v0.13.8 https://github.com/patrick-kidger/equinox`: the
wheel has no tests), with equinox's own pytest configuration (its pyproject.toml: jaxtyping's import hook, warnings
as errors) and its test extras (beartype, optax). Each run is one pytest process (with pytest-xdist's `-n` workers;
`-n 0` runs without xdist) on the same files with the same settings; ember's run adds `-p
ember.as_jax.pytest_plugin`, which installs the `jax` alias in pytest and in every xdist worker before a test module
is imported. Collection errors do not stop a run (--continue-on-collection-errors). Results are read from pytest's
JUnit XML.

Failure causes are ember's failed and erroring tests that pass on JAX (and its collection errors), grouped by
their exception's type and the first line of its message, numbers, addresses and bracketed shapes or values
blurred but quoted names kept (`... has no attribute 'x'` and `'y'` stay two causes; one cause met with other
shapes or dtypes stays one); the most common first, with an example test.
Everything goes to --out (default /tmp/<library>_tests): <label>.xml and <label>.log per run, summary.json and
summary.md.

Test dependencies: optax's tests import absl, numpy, scipy and (two files) flax and scikit-learn; install the ones
missing with pip (`pip install flax scikit-learn`, keeping JAX's version: `-c` a constraints file with
jax==<installed>).
"""
from __future__ import annotations

import argparse
import collections
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
PLUGIN = "ember.as_jax.pytest_plugin"
OUTCOMES = ("passed", "failed", "errors", "skipped")


def package_dir(library: str) -> pathlib.Path:
    spec = importlib.util.find_spec(library)  # (finds it without importing it, so without importing jax)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{library} is not installed (pip install {library})")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def run(label: str, targets: list[str], rootdir: pathlib.Path, ini: pathlib.Path, out: pathlib.Path, workers: int,
        keyword: str | None, timeout: float) -> dict:
    """One pytest process over targets: its outcome per test id, failure messages, seconds, exit code."""
    xml = out / f"{label}.xml"
    xml.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *targets, "-c", str(ini), f"--rootdir={rootdir}", "-p", "no:cacheprovider",
           "-q", "--continue-on-collection-errors", f"--junitxml={xml}", "-o", "junit_family=xunit1",
           "-W", "ignore::DeprecationWarning", "-p", "no:benchmark"]  # (pytest-benchmark warns under xdist)
    if workers:
        cmd += ["-n", str(workers)]
    if keyword:
        cmd += ["-k", keyword]
    if label == "ember":
        cmd += ["-p", PLUGIN]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
        p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p))
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=timeout)
        returncode, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as expired:
        returncode = "timeout"
        log = "".join(part.decode() if isinstance(part, bytes) else (part or "")
                      for part in (expired.stdout, expired.stderr))
    seconds = time.time() - start
    (out / f"{label}.log").write_text(" ".join(cmd) + "\n\n" + log)
    tests: dict[str, str] = {}
    messages: dict[str, str] = {}
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            test_id = f"{case.get('classname')}::{case.get('name')}"
            outcome = "passed"
            for child in case:
                kind = {"failure": "failed", "error": "errors", "skipped": "skipped"}.get(child.tag)
                if kind:
                    outcome = kind
                    if kind != "skipped":
                        messages[test_id] = (child.get("message") or "") + "\n" + (child.text or "")
                    break
            tests[test_id] = outcome
    return {"label": label, "returncode": returncode, "seconds": seconds, "tests": tests, "messages": messages,
            "counts": dict(collections.Counter(tests.values()))}


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Exit|Interrupt)\b")


def cause(message: str) -> str:
    """A failure's message as a cause: the line naming its exception (pytest's crash message, or for a collection
    error the last `E   ...Error: ...` line of the traceback), with numbers, addresses and the (...) and [...] that
    hold numbers or lists blurred, so that one cause with different shapes, dtypes or values is one group."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    found = [ln for ln in lines[:1] if _EXCEPTION.match(ln)]
    found = found or [ln[1:].strip() for ln in lines if ln.startswith("E ") and _EXCEPTION.match(ln[1:].strip())]
    line = found[-1] if found else (lines[0] if lines else "(no message)")
    line = re.sub(r"0x[0-9a-fA-F]+", "0x…", line)
    blurred = None
    while blurred != line:  # a (...) or [...] holding numbers or a list (shapes, types, values), innermost first
        blurred, line = line, re.sub(r"\(([^()\[\]]*[\d,⦅⟦][^()\[\]]*)?\)|\[([^()\[\]]*[\d,⦅⟦][^()\[\]]*)?\]",
                                     lambda m: "⦅⦆" if m.group(0)[0] == "(" else "⟦⟧", line)
    line = line.replace("⦅⦆", "(…)").replace("⟦⟧", "[…]")
    line = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", line)
    line = re.sub(r"\s+", " ", line)
    return line[:160]


def top_causes(ember: dict, jax: dict | None, top: int) -> list[tuple[int, str, str]]:
    """(count, cause, an example test) of ember's failed and erroring tests that pass on JAX or that JAX's run does
    not have (a file ember cannot collect; all of them when JAX did not run), the most common first."""
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for test_id, outcome in ember["tests"].items():
        if outcome in ("failed", "errors") and (jax is None or jax["tests"].get(test_id, "passed") == "passed"):
            groups[cause(ember["messages"].get(test_id, ""))].append(test_id)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [(len(ids), text, ids[0]) for text, ids in ranked[:top]]


def table(results: list[dict]) -> str:
    names = {"jax": "JAX", "ember": "ember (as_jax)"}
    lines = ["| | " + " | ".join(names[r["label"]] for r in results) + " |", "|---|" + "---|" * len(results)]
    for outcome in (*OUTCOMES, "total"):
        cells = [str(sum(r["counts"].values()) if outcome == "total" else r["counts"].get(outcome, 0))
                 for r in results]
        lines.append(f"| {outcome} | " + " | ".join(cells) + " |")
    lines.append("| seconds | " + " | ".join(f"{r['seconds']:.0f}" for r in results) + " |")
    lines.append("| pytest exit code | " + " | ".join(str(r["returncode"]) for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library", choices=["optax", "chex", "equinox"])
    parser.add_argument("--source", type=pathlib.Path, help="equinox: a checkout of its source at the tag of the "
                        "installed version (its tests/ and pyproject.toml)")
    parser.add_argument("--only", choices=["jax", "ember"])
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers (0: no xdist)")
    parser.add_argument("--files", nargs="*", default=[], help="test files, relative to the package's parent "
                        "directory (optax, chex) or to the checkout (equinox)")
    parser.add_argument("-k", dest="keyword", help="pytest's -k expression")
    parser.add_argument("--top", type=int, default=15, help="how many failure causes to list")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--out", type=pathlib.Path, help="default: /tmp/<library>_tests")
    parser.add_argument("--regroup", action="store_true", help="run nothing: summarise --out's last results again")
    args = parser.parse_args()
    args.out = args.out or pathlib.Path(f"/tmp/{args.library}_tests")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.library in ("optax", "chex"):
        package = package_dir(args.library)
        rootdir = package.parent
        targets = [str(rootdir / f) for f in args.files] or [str(package)]
        ini = args.out / "pytest.ini"
        ini.write_text("[pytest]\n")
    else:
        if args.source is None or not (args.source / "tests").is_dir():
            raise SystemExit("equinox: --source must be a checkout of equinox's source (with tests/ and "
                             "pyproject.toml) at the installed version's tag")
        rootdir = args.source.resolve()
        targets = [str(rootdir / f) for f in args.files] or [str(rootdir / "tests")]
        ini = rootdir / "pyproject.toml"
    version = importlib.metadata.version(args.library)
    labels = [args.only] if args.only else ["jax", "ember"]
    results = json.loads((args.out / "summary.json").read_text()) if args.regroup else []
    for label in [] if args.regroup else labels:
        print(f"running {args.library} {version}'s tests on {label} ...", flush=True)
        results.append(run(label, targets, rootdir, ini, args.out, args.workers, args.keyword, args.timeout))
        counts = results[-1]["counts"]
        print(f"  {label}: " + ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES)
              + f" in {results[-1]['seconds']:.0f} s", flush=True)
    by_label = {r["label"]: r for r in results}
    text = [f"{args.library} {version}'s tests ({', '.join(args.files) or 'all'}), -n {args.workers}", "",
            table(results)]
    if "ember" in by_label:
        ember, jax = by_label["ember"], by_label.get("jax")
        failing = sum(1 for o in ember["tests"].values() if o in ("failed", "errors"))
        both = sum(1 for t, o in ember["tests"].items()
                   if o in ("failed", "errors") and jax is not None and jax["tests"].get(t) in ("failed", "errors"))
        text += ["", f"ember's failures and errors: {failing}" + (f" ({both} fail on JAX too)" if jax else ""),
                 "", f"Top causes on ember{' (tests that pass on JAX)' if jax else ''}:", "",
                 "| tests | cause | example |", "|---|---|---|"]
        text += [f"| {count} | {c.replace('|', '/')} | {example.rsplit('.', 1)[-1]} |"
                 for count, c, example in top_causes(ember, jax, args.top)]
    summary = "\n".join(text)
    (args.out / "summary.md").write_text(summary + "\n")
    (args.out / "summary.json").write_text(json.dumps(results, indent=1))
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
