"""Every registered primitive has a lowering rule, an oracle test case, and a VJP rule (or is declared
non-differentiable) with a gradient test."""
import importlib.util
import pathlib

import pytest

from ember._core import PRIMITIVES

PRIM_TEST_DIR = pathlib.Path(__file__).parent / "prims"


def _load_cases():
    cases = []
    for path in sorted(PRIM_TEST_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_meta_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(getattr(module, "CASES", []))
    return cases


CASES = _load_cases()


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_has_lowering(name):
    assert PRIMITIVES[name].lowering is not None, f"primitive {name} has no lowering rule"
    assert PRIMITIVES[name].abstract_eval_rule is not None, f"primitive {name} has no abstract evaluation rule"


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_has_oracle_tests(name):
    assert any(c.prim == name for c in CASES), f"primitive {name} has no Case in tests/prims/test_*.py"


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_has_vjp_rule_and_gradient_test(name):
    prim = PRIMITIVES[name]
    if prim.nondifferentiable:
        assert prim.vjp is None, f"{name} is declared non-differentiable but has a VJP rule"
        return
    assert prim.vjp is not None, f"primitive {name} has no VJP rule and is not declared non-differentiable"
    assert any(c.prim == name and c.grad for c in CASES), f"primitive {name} has no gradient test case"
