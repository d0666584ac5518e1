"""tests/default_tier.py's rules name tests that exist (a renamed test would otherwise come back into the default
run unnoticed, or a rule outlive its test), and say why; the rules never take the last default case of a
primitive's forward, jvp, grad or vmap check (they are applied here to the parametrizations of tests/prims' modules
with default_tier.slow_cases, the function conftest.py applies at collection)."""
import ast
import functools
import importlib.util
import os
import sys

import default_tier

TESTS = os.path.dirname(os.path.abspath(__file__))
PRIMS = os.path.join(TESTS, "prims")


@functools.lru_cache(maxsize=None)
def _functions(path):
    """The test functions a module defines or imports (tests/prims' modules import the harness's checks)."""
    with open(os.path.join(TESTS, path)) as f:
        tree = ast.parse(f.read())
    names = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
              for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {t.id for t in ast.walk(target) if isinstance(t, ast.Name)}
    return names


def _exists(key):
    path, name = key.split("::")
    assert os.path.exists(os.path.join(TESTS, path)), f"{key}: no such test file"
    assert name in _functions(path), f"{key}: no such test function"


def test_every_rule_names_a_test_that_exists_and_says_why():
    for key, rule in default_tier.RULES.items():
        _exists(key)
        assert rule.why.strip(), f"{key}: a rule says which default test covers the same ground"
        if isinstance(rule, default_tier.Every):
            assert rule.k >= 2, f"{key}: Every(k) with k >= 2"
        if isinstance(rule, default_tier.Ids):
            assert rule.ids, f"{key}: Ids names the cases it takes"
        if isinstance(rule, default_tier.Primitives):
            assert rule.names and key.startswith("prims/"), f"{key}: Primitives names the primitives it takes"
    for key, why in default_tier.KEEP.items():
        _exists(key)
        assert why.strip() and key not in default_tier.RULES, f"{key}: KEEP says why, and no rule names it"
    for key, primitives in default_tier.PRIMITIVE_EXCEPTIONS.items():
        _exists(key)
        assert all(why.strip() for why in primitives.values()), f"{key}: an exception says which test covers it"


def test_slow_cases_applies_each_kind_of_rule(monkeypatch):
    """Every and FirstOfEach count the cases still in the default run; a sweep (3 or more cases) outside
    tests/prims keeps every SWEEP_EVERY-th; KEEP and single tests stay whole."""
    k = default_tier.SWEEP_EVERY
    cases = [(f"c{i}", i == 1) for i in range(3 * k + 1)]  # c1 marked slow at the test
    slow = default_tier.slow_cases("test_x.py", "test_sweep", cases)
    kept = [case for (case, _), is_slow in zip(cases, slow) if not is_slow]
    assert kept == [case for case, marked in cases if not marked][::k]
    assert default_tier.slow_cases("test_x.py", "test_pair", [("a", False), ("b", False)]) == [False, False]
    assert default_tier.slow_cases("test_x.py", "test_single", [(None, False)]) == [False]
    keep = next(iter(default_tier.KEEP))
    assert not any(default_tier.slow_cases(*keep.split("::"), [(f"c{i}", False) for i in range(9)]))
    ids = ["add-(5,)-float32", "add-(5,)-float64", "add_complex-(4,)-complex64", "mul-(5,)-float32",
           "mul-(2, 3)-float32"]
    slow = default_tier.slow_cases("prims/test_x.py", "test_forward", [(i, i == ids[0]) for i in ids])
    assert slow == [True, False, False, False, True]  # the first default case of each label stays
    monkeypatch.setitem(default_tier.RULES, "test_x.py::test_sweep", default_tier.Whole("test"))
    assert all(default_tier.slow_cases("test_x.py", "test_sweep", cases))


def test_heavy_cases_leave_each_file_a_default_case(monkeypatch):
    """A default case measured at HEAVY_SECONDS or more is slow, except KEEP's, tests/prims' primitive checks and a
    file's last default case (its least heavy one stays)."""
    heavy = default_tier.HEAVY_SECONDS
    keep_path, keep_name = next(iter(default_tier.KEEP)).split("::")
    monkeypatch.setattr(default_tier, "measured", lambda: {
        "test_x.py::test_a": heavy + 1, "test_x.py::test_b[1]": heavy, "test_x.py::test_b[2]": heavy - 0.1,
        "test_x.py::test_c": heavy + 5, f"{keep_path}::{keep_name}[0]": heavy + 1,
        "prims/test_x.py::test_vmap[add-(5,)]": heavy + 1, "prims/test_x.py::test_jacobians[add-(5,)]": heavy + 1,
        "test_y.py::test_a": heavy + 2, "test_y.py::test_b": heavy + 1})
    cases = [("test_a", False), ("test_b[1]", False), ("test_b[2]", False), ("test_c", True), ("test_d", False)]
    assert default_tier.heavy_cases("test_x.py", cases) == [True, True, False, True, False]
    assert default_tier.heavy_cases(keep_path, [(f"{keep_name}[0]", False)]) == [False]
    assert default_tier.heavy_cases("prims/test_x.py", [("test_vmap[add-(5,)]", False), ("test_jacobians[add-(5,)]",
                                                        False), ("test_grad[add-(5,)]", False)]) == [False, True, False]
    # every default case of test_y.py is heavy: the least heavy stays
    assert default_tier.heavy_cases("test_y.py", [("test_a", False), ("test_b", False)]) == [True, False]


def test_the_recorded_durations_name_test_files_that_exist():
    for path, why in {**default_tier.HEAVY_KEEP_FILES, **default_tier.SHARED_SETUP}.items():
        assert os.path.exists(os.path.join(TESTS, path)) and why.strip(), path
    times = default_tier.measured()
    assert times and all(seconds >= 0 for seconds in times.values())
    for key in times:
        path, name = key.split("::", 1)
        assert os.path.exists(os.path.join(TESTS, path)), f"{key}: no such test file"
        assert name.split("[", 1)[0] in _functions(path), f"{key}: no such test function"


def _prims_module(path):
    """A tests/prims module: the one pytest imported (under its file's name), or a private copy of it."""
    stem = os.path.basename(path)[:-3]
    module = sys.modules.get(stem)
    if module is not None and os.path.abspath(getattr(module, "__file__", "")) == os.path.abspath(path):
        return module
    spec = importlib.util.spec_from_file_location(f"_tier_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(module, function):
    """The parametrization of a tests/prims check as conftest sees it: [(id, case, marked slow at the test)]."""
    def slow(marks):
        return any(mark.name == "slow" for mark in marks)
    def listed(marks):  # (pytestmark: one mark or a list of them)
        return marks if isinstance(marks, list) else [marks]
    marks = listed(getattr(function, "pytestmark", [])) + listed(getattr(module, "pytestmark", []))
    (parametrize,) = [mark for mark in marks if mark.name == "parametrize"]
    return [(param.id, param.values[0], slow(param.marks) or slow(marks)) for param in parametrize.args[1]]


def _lost_primitives(path, name, cases):
    """The primitives with a default case of the check before the rules and none after them."""
    flags = default_tier.slow_cases(path, name, [(case_id, marked) for case_id, _, marked in cases])
    before = {default_tier.primitive_of(case_id) for case_id, _, marked in cases if not marked}
    after = {default_tier.primitive_of(case_id) for (case_id, _, _), is_slow in zip(cases, flags) if not is_slow}
    return before - after


def _primitive_checks():
    for file in sorted(os.listdir(PRIMS)):
        if file.startswith("test_") and file.endswith(".py"):
            module = _prims_module(os.path.join(PRIMS, file))
            for name in default_tier.PRIMITIVE_CHECKS:
                if hasattr(module, name):
                    yield f"prims/{file}", name, _cases(module, getattr(module, name))


def test_the_rules_keep_a_default_case_of_every_primitives_checks(monkeypatch):
    checks = list(_primitive_checks())
    assert len(checks) > 40
    for path, name, cases in checks:
        for case_id, case, _ in cases:  # the ids start with the Case's label: primitive_of reads it
            assert default_tier.primitive_of(case_id) == case.label(), (path, name, case_id)
        lost = _lost_primitives(path, name, cases)
        allowed = default_tier.PRIMITIVE_EXCEPTIONS.get(f"{path}::{name}", {})
        assert lost == set(allowed), (f"{path}::{name}: the rules take every default case of {sorted(lost)}; "
                                      f"PRIMITIVE_EXCEPTIONS allows {sorted(allowed)}")
    # (and a rule that would take a primitive's last default case is caught)
    path, name, cases = checks[0]
    monkeypatch.setitem(default_tier.RULES, f"{path}::{name}", default_tier.Whole("test"))
    assert _lost_primitives(path, name, cases) == {default_tier.primitive_of(i) for i, _, slow in cases if not slow}
