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


def _run(script, *args):
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow  # (13 s: two models trained, checkpointed, resumed; quickstart.py and mlp.py run by default)
def test_digits_quick_trains_both_models_and_resumes(tmp_path):
    out = _run("digits.py", "--quick", "--out", str(tmp_path))
    accuracies = [float(line.split("test accuracy ")[1].split()[0]) for line in out.splitlines()
                  if line.startswith(("mlp: test accuracy", "cnn: test accuracy"))]
    assert len(accuracies) == 2 and min(accuracies) > 0.95, out
    for name in ("digits_mlp_loss.png", "digits_cnn_loss.png", "digits_mlp.safetensors", "digits_cnn.safetensors"):
        assert (tmp_path / name).stat().st_size > 0
    resumed = _run("digits.py", "--model", "mlp", "--epochs", "16", "--resume", "--out", str(tmp_path))
    assert "resumed from" in resumed and "at epoch 15" in resumed and "mlp epoch 16:" in resumed
    assert "mlp epoch 1:" not in resumed


@pytest.mark.slow  # (10 s; the digits example trains, saves and resumes in the default run)
def test_char_lm_quick_loss_falls_and_samples(tmp_path):
    out = _run("char_lm.py", "--quick", "--out", str(tmp_path))
    line = next(line for line in out.splitlines() if line.startswith("training loss"))
    first, last = (float(v) for v in line.split("training loss ")[1].split(" nats")[0].split(" -> "))
    assert last < first - 1.5, line
    assert "sample:\ndef " in out
    assert (tmp_path / "char_lm_loss.png").stat().st_size > 0
    resumed = _run("char_lm.py", "--quick", "--steps", "160", "--resume", "--out", str(tmp_path))
    assert "resumed from" in resumed and "at step 150" in resumed
