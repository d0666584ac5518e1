"""Write tests/default_tier_durations.json from the JUnit XML reports of default runs: each test case's time, the
least over the reports (a case that ran first on a worker, or beside a busy neighbour, reads slower once), for the
cases that took at least RECORDED_SECONDS (tests/default_tier.py moves the ones at HEAVY_SECONDS or more to the slow
tier). Cases absent from the reports (the slow tier's, which a default run does not time) keep their recorded time.

    python3 -m pytest -n 2 -q --junitxml=/tmp/run1.xml        # the default run, once or more, on a quiet machine
    python3 tools/default_tier_durations.py /tmp/run1.xml [/tmp/run2.xml ...]
"""
from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

RECORDED_SECONDS = 1.0
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "default_tier_durations.json")


def case_key(classname: str, name: str) -> str:
    """A JUnit test case's key as tests/conftest.py forms it: its file under tests/ and its name with the id
    ('reliability/test_runtime.py::test_x[on]'); classname is the module's dotted path (no test classes here)."""
    module = classname.split(".", 1)[1] if classname.startswith("tests.") else classname
    group = name.rpartition("@")[2]  # (xdist's loadgroup appends '@group' to the names of a group's tests)
    if group.endswith(".py") and " " not in group:
        name = name.rpartition("@")[0]
    return module.replace(".", "/") + ".py::" + name


def read(paths: list[str]) -> dict[str, float]:
    times: dict[str, float] = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("skipped") is not None:
                continue
            key = case_key(case.get("classname", ""), case.get("name", ""))
            seconds = float(case.get("time", "0"))
            times[key] = min(seconds, times.get(key, seconds))
    return times


def main(paths: list[str]) -> None:
    if not paths:
        sys.exit(__doc__)
    old = {}
    if os.path.exists(OUT):
        with open(OUT) as f:
            old = json.load(f)["seconds"]
    new = read(paths)
    seconds = {k: v for k, v in old.items() if k not in new}
    seconds.update({k: round(v, 2) for k, v in new.items() if v >= RECORDED_SECONDS})
    with open(OUT, "w") as f:
        json.dump({"about": "tools/default_tier_durations.py: seconds per test case in default runs (the least "
                            "over the runs read), the cases of at least %.1f s" % RECORDED_SECONDS,
                   "seconds": dict(sorted(seconds.items()))}, f, indent=0)
        f.write("\n")
    print(f"{len(seconds)} cases recorded in {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
