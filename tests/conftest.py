import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_ENABLE_X64", "1")  # JAX is an oracle here: let it compute in float64 like ember
# ember reads JAX_ENABLE_X64 too, after its own EMBER_ENABLE_X64: keep ember in its default (32-bit) mode; the
# modules of float64 numerics turn it on (the ember_x64 fixture below), as do the tests of enable_x64.
# (EMBER_ENABLE_X64=1 runs the whole suite in x64 mode.)
os.environ.setdefault("EMBER_ENABLE_X64", "0")
# ember's CPU backend has one device by default (as JAX's); the tests of several devices need two.
os.environ.setdefault("EMBER_NUM_CPU_DEVICES", "2")
# JAX (an oracle) gets four CPU devices, for the meshes of tests/test_sharding_specs.py; ember reads
# EMBER_NUM_CPU_DEVICES first, so it keeps two.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")
sys.path.insert(0, os.path.dirname(__file__))

# The XLA options ember gives the plugin (NaN-propagating max/min, ...) are read from XLA_FLAGS at the plugin's
# first compile in the process, which may be a test's own PJRT client (test_pjrt.py) rather than ember's: set them
# now, whatever test runs first.
from ember._runtime.backends import _set_xla_flags  # noqa: E402

_set_xla_flags()


import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """With several xdist workers, the tests of one xdist_group run on one worker (--dist loadgroup, unless another
    mode was asked for): the files of default_tier.SHARED_SETUP are such groups, so their module fixtures run once.
    (Set here, not in pyproject's addopts, so that a run without xdist, `-p no:xdist`, still parses its options.)"""
    if getattr(config.option, "dist", None) == "load":  # (the controller: it schedules)
        config.option.dist = "loadgroup"
    worker = getattr(config, "workerinput", None)
    if worker is not None and not any(arg.startswith("--dist") for arg in worker.get("mainargv", ())):
        config.option.loadgroup = True  # (a worker: it names a group's tests for the controller's scheduling)


@pytest.hookimpl(tryfirst=True)  # (before -m selects by the marks)
def pytest_collection_modifyitems(config, items):
    """The rules of tests/default_tier.py: the tests they name, and the sweeps' other cases, leave the default run
    for the slow tier. Each test function's cases are counted first (a sweep is a function with 3 or more); then
    the cases measured heavy leave it, file by file (default_tier.heavy_cases)."""
    import default_tier
    tests = os.path.dirname(os.path.abspath(__file__))
    functions: dict = {}
    for item in items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        path = os.path.relpath(str(item.path), tests).replace(os.sep, "/")
        functions.setdefault((path, name, item.nodeid.split("[")[0]), []).append(item)
    for (path, name, _), cases in functions.items():
        marked = [(getattr(getattr(item, "callspec", None), "id", None), item.get_closest_marker("slow") is not None)
                  for item in cases]
        _mark_slow(cases, marked, default_tier.slow_cases(path, name, marked))
    files: dict = {}  # (then the measured heavy cases, file by file)
    for (path, _, _), cases in functions.items():
        files.setdefault(path, []).extend(cases)
        if path in default_tier.SHARED_SETUP:  # (one worker runs the file: its module fixture runs once)
            for item in cases:
                item.add_marker(pytest.mark.xdist_group(path))
    for path, cases in files.items():
        marked = [(item.name, item.get_closest_marker("slow") is not None) for item in cases]
        _mark_slow(cases, marked, default_tier.heavy_cases(path, marked))


def _mark_slow(items, marked, slow):
    """Mark slow the items a rule makes slow (marked: each item's (name or id, slow already))."""
    for item, (_, was_slow), is_slow in zip(items, marked, slow):
        if is_slow and not was_slow:
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session):
    """A test process keeps thousands of IRs, programs and JAX objects alive in its caches, which every full
    collection walks again: the objects alive after collection (modules, Cases) are frozen out of the collector,
    and collections run after 20000 allocations instead of 700 (cycles are still collected; the tests that check
    memory call gc.collect themselves). This saves about 5% of the default run."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 50, 50)


@pytest.fixture
def ember_x64():
    """ember in 64-bit mode, as JAX (the oracle) is here: the modules whose oracles compute in float64 (numpy's,
    JAX's) and whose inputs are float64 use it, pytestmark = pytest.mark.usefixtures("ember_x64"), as JAX's own
    tests run with JAX_ENABLE_X64. (Without it ember narrows 64-bit values to 32 bits, as JAX does:
    tests/test_dtype_defaults.py.)"""
    import ember
    with ember.config.override(enable_x64=True):
        yield


@pytest.fixture
def every_kernel_shape(monkeypatch):
    """The CPU kernels' AVX2 thresholds lowered to the AVX-512F form's (short rows, large batched products,
    transposes of any sides: ember/_hlo/row_fusion.py's MIN_ROW_AVX2 and AVX2_TRANSPOSE_MULTIPLE, backend_forms'
    BMM_AVX2_MAX_PRODUCT), so that the tests of the kernels' results run them on every shape whichever form runs:
    pytestmark = pytest.mark.usefixtures("every_kernel_shape"). (Nothing changes where the AVX-512F form runs.)
    Programs are cached by their IR's structure, not by these thresholds: the caches are emptied before the test (so
    it lowers its programs under them) and after it (so no later test reuses a program lowered under them)."""
    from ember._core.cache import clear_all_caches
    from ember._hlo import backend_forms, row_fusion
    clear_all_caches()
    monkeypatch.setattr(row_fusion, "MIN_ROW_AVX2", row_fusion.MIN_ROW)
    monkeypatch.setattr(row_fusion, "AVX2_TRANSPOSE_MULTIPLE", 1)
    monkeypatch.setattr(backend_forms, "BMM_AVX2_MAX_PRODUCT", 1 << 62)
    yield
    clear_all_caches()


@pytest.fixture
def jax_in_embers_mode():
    """JAX as the oracle in the mode ember is in: 32-bit by default (JAX's x64 is on for the other tests, above),
    64-bit under EMBER_ENABLE_X64=1. Modules comparing with JAX's defaults use it:
    pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")."""
    import jax

    from ember._core.dtypes import x64_enabled
    with jax.enable_x64(x64_enabled()):
        yield


@pytest.fixture
def programs(monkeypatch):
    """The names of the whole programs compiled while the test runs (jit's, the transformations', ember.compile's;
    not the one-primitive programs of eager dispatch)."""
    import ember._api.caches
    import ember._api.running
    names: list[str] = []
    for module in (ember._api.caches, sys.modules["ember._api.jit"], ember._api.running):
        original = module.compile_staged

        def counted(ir, name, *rest, original=original):
            names.append(name)
            return original(ir, name, *rest)
        monkeypatch.setattr(module, "compile_staged", counted)
    return names
