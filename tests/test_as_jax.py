"""ember.as_jax, the drop-in for JAX (docs/as_jax.md): `import jax` resolves to ember in a process that installed the
alias. Each case runs in a subprocess of its own (the alias is process-wide), in a few seconds."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import ember
import ember.as_jax

ROOT = pathlib.Path(__file__).resolve().parent.parent
HAVE_JAX = importlib.util.find_spec("jax") is not None


def _python(*args: str, cwd: pathlib.Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "EMBER_", "PYTEST_"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


PROGRAM = """
import json
import sys

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax, random, tree_util
from jax.flatten_util import ravel_pytree

k1, k2 = random.split(random.key(0))
w, x = random.normal(k1, (3, 4)), random.uniform(k2, (5, 3))

def loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)

grad = jax.jit(jax.grad(loss))(w, x)
per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0))(w, x[:, None, :])
loop = lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, 1.0)
flat, unravel = ravel_pytree({"w": w, "n": jnp.arange(3)})
leaves = tree_util.tree_leaves(unravel(flat))
print(json.dumps({"numpy": jnp.__name__, "version": jax.__version__, "argv": sys.argv[1:],
                  "w": np.asarray(w).tolist(), "grad": np.asarray(grad).tolist(),
                  "per_example": np.asarray(per_example).tolist(), "loop": float(loop),
                  "flat": [str(flat.dtype), np.asarray(flat).tolist()], "leaves": [str(l.dtype) for l in leaves]}))
"""


def test_a_jax_program_runs_unchanged_with_jaxs_numbers(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    ours = json.loads(_python("-m", "ember.as_jax", str(program), "a", "-b").stdout)
    assert ours["numpy"] == "ember.numpy" and ours["version"] == ember.as_jax.JAX_VERSION == "0.10.2"
    assert ours["argv"] == ["a", "-b"]
    assert ours["flat"][0] == "float32" and ours["leaves"] == ["int32", "float32"]
    if not HAVE_JAX:
        pytest.skip("JAX is not installed: ember's side ran, there is nothing to compare with")
    theirs = json.loads(_python(str(program), "a", "-b").stdout)
    assert theirs["numpy"] == "jax.numpy"
    assert ours["w"] == theirs["w"]  # the same random bits
    for name in ("grad", "per_example", "loop"):
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(ours["flat"][1], theirs["flat"][1], rtol=1e-6)
    assert ours["flat"][0] == theirs["flat"][0] and ours["leaves"] == theirs["leaves"]


SCIPY_PROGRAM = """
import json
import numpy as np
import jax.numpy as jnp
import jax.scipy.optimize, jax.scipy.sparse.linalg, jax.scipy.cluster.vq, jax.scipy.interpolate
from jax.scipy.spatial.transform import Rotation, Slerp

opt = jax.scipy.optimize.minimize(lambda x: jnp.sum((x - jnp.arange(3.0)) ** 2 * jnp.arange(1.0, 4.0)),
                                  jnp.ones(3), method="BFGS")
a, b = jnp.array([[4.0, 1.0], [1.0, 3.0]]), jnp.array([1.0, 2.0])
codes, dist = jax.scipy.cluster.vq.vq(jnp.array([[0.1], [2.2]]), jnp.array([[0.0], [2.0]]))
interp = jax.scipy.interpolate.RegularGridInterpolator((jnp.array([0.0, 1.0, 2.0]),), jnp.array([0.0, 10.0, 40.0]))
keys = Rotation.from_euler("xyz", jnp.array([[0.1, 0.2, 0.3], [0.5, -0.2, 1.0]]))
out = {"x": opt.x, "nit": opt.nit, "cg": jax.scipy.sparse.linalg.cg(a, b)[0], "codes": codes, "dist": dist,
       "interp": interp(jnp.array([0.5, 1.5])), "slerp": Slerp.init(jnp.array([0.0, 1.0]), keys)(0.25).as_quat(),
       "loggamma": jax.scipy.special.loggamma(jnp.array([1.0 + 2.0j]))}
print(json.dumps({k: np.asarray(v).view(float).tolist() if np.iscomplexobj(v) else np.asarray(v).tolist()
                  for k, v in out.items()}))
"""


def test_jax_scipy_program_runs_unchanged():
    """jax.scipy's optimize, sparse.linalg, cluster.vq, interpolate, spatial.transform (and complex loggamma)
    resolve to ember's, with JAX's numbers."""
    ours = json.loads(_python("-m", "ember.as_jax", "-c", SCIPY_PROGRAM).stdout)
    if not HAVE_JAX:
        pytest.skip("JAX is not installed: ember's side ran, there is nothing to compare with")
    theirs = json.loads(_python("-c", SCIPY_PROGRAM).stdout)
    assert ours.keys() == theirs.keys() and ours["nit"] == theirs["nit"] and ours["codes"] == theirs["codes"]
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=2e-5, atol=1e-6, err_msg=name)


def test_jax_and_its_modules_are_embers():
    code = """
import sys, types
import ember
import jax, jax.numpy as jnp, jax.scipy.stats.norm, jax.lax.linalg, jax.version
from jax import lax, random, tree_util, flatten_util, test_util, nn
from jax.numpy import linalg
assert sys.modules["jax"] is jax and type(jax).__name__ == "_Alias"
assert jnp is ember.numpy and lax is ember.lax and random is ember.random and tree_util is ember.tree_util
assert sys.modules["jax.numpy"] is ember.numpy and jnp.__name__ == "ember.numpy"
assert ember.numpy.__spec__.name == "ember.numpy"  # ember's module keeps its own name and spec
assert jax.scipy.stats.norm is ember.scipy.stats.norm and jax.lax.linalg is ember.lax.linalg
assert flatten_util is ember.flatten_util and test_util is ember.test_util and nn is ember.nn
assert jax.jit is ember.jit and jax.Array is ember.Array and "jit" in dir(jax)
assert jax.__version__ == jax.version.__version__ == "0.10.2" and jax.__version_info__ == (0, 10, 2)
assert ember.__version__ == ember.version.__version__ != "0.10.2"
assert not hasattr(jax, "no_such_name")
print("ok")
"""
    assert _python("-m", "ember.as_jax", "-c", code).stdout.strip() == "ok"


def test_a_missing_jax_module_is_a_clear_import_error():
    code = """
import jax
for statement in ("import jax.collect_profile", "from jax import collect_profile", "import jax.experimental.jax2tf",
                  "from jax._src import pjit", "import jax.numpy.no_such_module"):
    try:
        exec(statement)
    except ModuleNotFoundError as error:
        print(error)
    else:
        raise AssertionError(statement)
"""
    lines = _python("-m", "ember.as_jax", "-c", code).stdout.splitlines()
    prefix = "ember, running JAX code through ember.as_jax,"
    assert lines == [f"No module named 'jax.collect_profile': {prefix} has no module for it (ember.collect_profile "
                     "does not exist)"] * 2 + [
        f"No module named 'jax.experimental.jax2tf': {prefix} has no module for it (ember.experimental.jax2tf does "
        "not exist)",
        f"No module named 'jax._src.pjit': {prefix} has no counterpart of JAX's private modules",
        f"No module named 'jax.numpy.no_such_module': {prefix} has no module for it (ember.numpy.no_such_module does "
        "not exist)"]


def test_the_modules_of_this_round_import_under_the_drop_in():
    """jax.ffi, jax.monitoring, jax.experimental.random, jax.experimental.compilation_cache.compilation_cache,
    jax.experimental.ode, jax.experimental.rnn (its lstm running on the CPU) and jax.extend's submodules are ember's
    modules under the alias."""
    code = """
import jax, jax.ffi, jax.monitoring, jax.experimental.random, jax.extend.backend, jax.extend.core.primitives
import jax.experimental.compilation_cache.compilation_cache as cc
import jax.experimental.ode
from jax import monitoring
from jax.experimental.ode import odeint
from jax.experimental import rnn
from jax.extend import random, sharding, mlir, xla, pallas, lowering
w = rnn.init_lstm_weight(jax.random.key(0), 2, 3, 1, False)  # (JAX's lstm needs cuDNN; ember's runs here)
y, _, _ = rnn.lstm(jax.numpy.ones((1, 4, 2)), jax.numpy.zeros((1, 1, 3)), jax.numpy.zeros((1, 1, 3)), w,
                   jax.numpy.array([4], jax.numpy.int32), input_size=2, hidden_size=3, num_layers=1, dropout=False,
                   bidirectional=False)
print(jax.ffi.__name__, monitoring.__name__, jax.experimental.random.__name__, cc.__name__, random.__name__,
      jax.extend.core.primitives.add_p, jax.profiler.ProfileData.__module__, jax.debug.log.__module__,
      jax.experimental.ode.__name__, odeint.__module__, rnn.lstm.__module__, y.shape)
"""
    out = _python("-m", "ember.as_jax", "-c", code).stdout.split()
    assert out == ["ember.ffi", "ember.monitoring", "ember.experimental.random",
                   "ember.experimental.compilation_cache.compilation_cache", "ember.extend.random", "add",
                   "ember.profiler", "ember._api.callbacks", "ember.experimental.ode", "ember.experimental.ode",
                   "ember.experimental.rnn", "(1,", "4,", "3)"]


def test_the_private_modules_libraries_import():
    """The few jax._src modules equinox imports at its top level exist with the names it reads; no others."""
    code = """
import jax._src.traceback_util as tu, jax._src.dispatch, jax.lib
from jax._src.dtypes import TypePromotionError
import ember
f = lambda x: x
assert tu.api_boundary(f) is f and tu.api_boundary(repro_api_name="x")(f) is f
assert TypePromotionError is ember.dtypes.TypePromotionError and jax._src.dispatch.wait_for_tokens is ember.effects_barrier
assert jax.lib.__version__ == jax.__version__
print("ok")
"""
    assert _python("-m", "ember.as_jax", "-c", code).stdout.split() == ["ok"]


def test_install_refuses_when_jax_is_already_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))  # (the real one may be here already too)
    with pytest.raises(ImportError, match=r"JAX itself is already imported in this process .* before anything"):
        ember.as_jax.install()
    assert not ember.as_jax.installed()


@pytest.mark.slow  # (5 s; the drop-in by default: the other tests here)
@pytest.mark.skipif(not HAVE_JAX, reason="JAX is not installed")
def test_install_refuses_after_the_real_jax_and_uninstall_gives_it_back():
    code = """
import jax
import ember.as_jax
try:
    ember.as_jax.install()
except ImportError as error:
    print("refused:", "already imported" in str(error))
"""
    assert _python("-c", code).stdout.strip() == "refused: True"
    code = """
import sys
import ember, ember.as_jax
ember.as_jax.install()
ember.as_jax.install()  # (twice is once)
import jax.numpy
assert jax.numpy is ember.numpy and sys.meta_path.count(ember.as_jax._FINDER) == 1
ember.as_jax.uninstall()
import jax, jax.numpy
print(jax.numpy.__name__, jax.__version__ == ember.as_jax.JAX_VERSION, ember.as_jax.installed())
"""
    assert _python("-c", code).stdout.split() == ["jax.numpy", "True", "False"]


@pytest.mark.slow  # (4 s; the drop-in by default: test_a_jax_program_runs_unchanged_with_jaxs_numbers)
def test_the_runner_runs_a_program_a_module_or_code_as_python_does(tmp_path):
    (tmp_path / "helper.py").write_text("import jax\nVALUE = jax.__name__ + ' ' + jax.numpy.__name__\n")
    (tmp_path / "main.py").write_text("import sys, helper\nprint(helper.VALUE, __name__, sys.argv)\n")
    out = _python("-m", "ember.as_jax", str(tmp_path / "main.py"), "x").stdout.strip()
    assert out == f"jax ember.numpy __main__ ['{tmp_path / 'main.py'}', 'x']"  # the program's directory is on sys.path
    out = _python("-m", "ember.as_jax", "-m", "main", "y", cwd=tmp_path).stdout.strip()
    assert out == f"jax ember.numpy __main__ ['{tmp_path / 'main.py'}', 'y']"
    code = _python("-m", "ember.as_jax", "-c", "import jax, sys; print(jax.__version__, sys.argv); raise SystemExit(3)",
                   "z", check=False)
    assert code.returncode == 3 and code.stdout.strip() == "0.10.2 ['-c', 'z']"  # the exit code passes through


@pytest.mark.slow  # (two pytest processes and their xdist workers: the runner and install() are in the default run)
def test_the_pytest_plugin_reaches_xdist_workers(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        def test_on_ember():
            assert jnp.__name__ == "ember.numpy" and float(jax.grad(jnp.sin)(0.0)) == 1.0
        """))
    proc = _python("-m", "pytest", "-q", "-p", "ember.as_jax.pytest_plugin", "-n", "1", "-p", "no:cacheprovider",
                   "test_sample.py", cwd=tmp_path, check=False)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
