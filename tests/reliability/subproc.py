"""Running a scenario in its own Python process: a crash, abort or hang there fails one test instead of taking the
test run down. Every run has a generous hang guard (a timeout far above the expected time)."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str, timeout: float = 180, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in ("JAX_ENABLE_X64", "EMBER_ENABLE_X64"):
        full_env.pop(name, None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)


def check_python(code: str, timeout: float = 180, env: dict | None = None) -> str:
    """Run code; it must exit normally (not crash or abort). Returns its stdout."""
    done = run_python(code, timeout, env)
    assert done.returncode == 0, f"exit status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def program_result(code: str, devices: int, timeout: float = 180) -> object:
    """Run a program on `devices` CPU devices; it prints "RESULT" and a JSON value last: that value."""
    out = check_python(code, timeout, env={"EMBER_NUM_CPU_DEVICES": str(devices)})
    return json.loads(out[out.index("RESULT") + len("RESULT"):])
