"""tests/default_tier.py's rules name tests that exist (a renamed test would otherwise come back into the default
run unnoticed, or a rule outlive its test), and say why."""
import ast
import os

import default_tier

TESTS = os.path.dirname(os.path.abspath(__file__))


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


def test_every_rule_names_a_test_that_exists_and_says_why():
    for key, rule in default_tier.RULES.items():
        path, name = key.split("::")
        assert os.path.exists(os.path.join(TESTS, path)), f"{key}: no such test file"
        assert name in _functions(path), f"{key}: no such test function"
        assert rule.why.strip(), f"{key}: a rule says which default test covers the same ground"
        if isinstance(rule, default_tier.Every):
            assert rule.k >= 2, f"{key}: Every(k) with k >= 2"

