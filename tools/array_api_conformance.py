"""Run the array API conformance suite (data-apis/array-api-tests) on ember.numpy and on jax.numpy, side by side,
and summarise: passed / failed / skipped / errors per test file and in total.

    python3 tools/array_api_conformance.py /path/to/array-api-tests [--version 2023.12] [--max-examples 20]
        [--only ember|jax] [--files test_set_functions.py ...] [--out /tmp/conformance]

The suite's source is not on PyPI: clone github.com/data-apis/array-api-tests with its array-api submodule (the
spec, which the suite reads signatures from). Needs hypothesis, ndindex and pytest-json-report. Each namespace runs
in its own pytest process (a crash is reported, not fatal), with the same settings: JAX in 64-bit mode and ember
in 64-bit mode (EMBER_ENABLE_X64=1), since the suite expects int64/float64 defaults; hypothesis deadlines off
(both libraries compile on a new signature); every dtype, complex64 and complex128 included, and every extension
(linalg, fft) by default (--skip-dtypes and --disable-extensions narrow it; the suite's import needs one line
patched for a namespace without complex dtypes, see patch_suite). docs/conformance.md records the numbers.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMESPACES = {"ember": "ember.numpy", "jax": "jax.numpy"}


# The suite assumes complex dtypes (max() of an empty sequence when a namespace has none, as ember.numpy): the one
# line patched, so that a namespace without complex dtypes can be measured at all (their tests then skip or fail).
_NO_COMPLEX_PATCH = ("    [(dt, dtype_nbits[dt]) for dt in complex_dtypes], key=lambda x: x[1]\n)[0]",
                     "    [(dt, dtype_nbits[dt]) for dt in complex_dtypes], key=lambda x: x[1], default=(None,)\n)[0]")


def patch_suite(suite: pathlib.Path) -> None:
    helpers = suite / "array_api_tests" / "dtype_helpers.py"
    text = helpers.read_text()
    if _NO_COMPLEX_PATCH[0] in text:
        helpers.write_text(text.replace(*_NO_COMPLEX_PATCH))
        print(f"patched {helpers}: widest_complex_dtype may be None (a namespace without complex dtypes)")


def run(suite: pathlib.Path, label: str, version: str, max_examples: int, files: list[str],
        out: pathlib.Path, skip_dtypes: list[str], disabled: list[str]) -> dict:
    report = out / f"{label}.json"
    env = dict(os.environ, ARRAY_API_TESTS_MODULE=NAMESPACES[label], ARRAY_API_TESTS_VERSION=version,
               JAX_PLATFORMS="cpu", JAX_ENABLE_X64="1", EMBER_ENABLE_X64="1",
               ARRAY_API_TESTS_SKIP_DTYPES=",".join(skip_dtypes),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    targets = [str(suite / "array_api_tests" / f) for f in files] or [str(suite / "array_api_tests")]
    cmd = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q", "--disable-deadline",
           f"--max-examples={max_examples}", "--json-report", f"--json-report-file={report}",
           *(f for name in disabled for f in ("--disable-extension", name)), "-o", "addopts=",
           "--continue-on-collection-errors"]
    start = time.time()
    proc = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True)
    elapsed = time.time() - start
    (out / f"{label}.log").write_text(proc.stdout + proc.stderr)
    if not report.exists():
        return {"label": label, "crashed": True, "returncode": proc.returncode, "seconds": elapsed, "files": {}}
    data = json.loads(report.read_text())
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for test in data.get("tests", []):
        per_file[test["nodeid"].split("::")[0].rsplit("/", 1)[-1]][test["outcome"]] += 1
    return {"label": label, "crashed": proc.returncode not in (0, 1), "returncode": proc.returncode,
            "seconds": elapsed, "files": {k: dict(v) for k, v in sorted(per_file.items())}}


def totals(result: dict) -> collections.Counter:
    total: collections.Counter = collections.Counter()
    for counts in result["files"].values():
        total.update(counts)
    return total


def markdown(results: list[dict], version: str, max_examples: int) -> str:
    lines = [f"array-api-tests, API version {version}, --max-examples={max_examples}", "",
             "| file | " + " | ".join(f"{r['label']} passed / failed / skipped" for r in results) + " |",
             "|---|" + "---|" * len(results)]
    files = sorted({f for r in results for f in r["files"]})
    for f in files:
        cells = []
        for r in results:
            c = r["files"].get(f, {})
            cells.append(f"{c.get('passed', 0)} / {c.get('failed', 0) + c.get('error', 0)} / {c.get('skipped', 0)}")
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    cells = []
    for r in results:
        t = totals(r)
        cells.append(f"**{t['passed']} / {t['failed'] + t['error']} / {t['skipped']}**")
    lines.append("| total | " + " | ".join(cells) + " |")
    lines.append("")
    for r in results:
        lines.append(f"- {r['label']}: {r['seconds']:.0f} s, pytest exit code {r['returncode']}"
                     + (" (CRASHED)" if r["crashed"] else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", type=pathlib.Path)
    parser.add_argument("--version", default="2023.12")
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--only", choices=sorted(NAMESPACES))
    parser.add_argument("--files", nargs="*", default=[])
    parser.add_argument("--skip-dtypes", default="",
                        help="dtypes neither namespace is tested with, comma-separated (default: none)")
    parser.add_argument("--disable-extensions", default="",
                        help="extensions of the standard left out, comma-separated, e.g. fft (default: none)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/conformance"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    patch_suite(args.suite)
    labels = [args.only] if args.only else ["ember", "jax"]
    results = [run(args.suite, label, args.version, args.max_examples, args.files, args.out,
                   [d for d in args.skip_dtypes.split(",") if d], [e for e in args.disable_extensions.split(",") if e])
               for label in labels]
    (args.out / "summary.json").write_text(json.dumps(results, indent=1))
    text = markdown(results, args.version, args.max_examples)
    (args.out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
