"""The examples run and print what they promise."""
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


@pytest.mark.parametrize("script,expected", [
    ("quickstart.py", ["f(1, 2) = [6.]", "df/dlhs at (1, 2) = [2.]", "one XLA program per step: True",
                        "per-example gradient of w: (64, 3, 1)", "Hessian-vector product matches: True"]),
    ("mlp.py", ["step 300"]),
])
def test_example_runs(script, expected):
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for text in expected:
        assert text in result.stdout
