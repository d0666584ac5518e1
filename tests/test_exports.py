"""ember._core.exports: the public faces re-export their modules' declared names (`__all__`) in order, and refuse
a name declared twice or declared but not defined."""
import types

import pytest

from ember._core.exports import reexport


def _module(name, declared, **defined):
    module = types.ModuleType(name)
    module.__dict__.update(defined)
    module.__all__ = declared
    return module


def test_reexport_binds_the_declared_names_in_module_order():
    first = _module("first", ["b", "a"], a=1, b=2, hidden=3)
    second = _module("second", ["c"], c=4)
    namespace = {}
    assert reexport(namespace, [first, second]) == ["b", "a", "c"]
    assert namespace == {"a": 1, "b": 2, "c": 4}


def test_reexport_leaves_out_excluded_names():
    namespace = {}
    assert reexport(namespace, [_module("m", ["a", "b"], a=1, b=2)], exclude={"b"}) == ["a"]
    assert namespace == {"a": 1}


def test_a_name_declared_by_two_modules_is_an_error():
    with pytest.raises(ValueError, match="'a' is declared public by both first and second"):
        reexport({}, [_module("first", ["a"], a=1), _module("second", ["a"], a=2)])


def test_a_declared_name_must_exist():
    with pytest.raises(AttributeError, match=r"m.__all__ lists names the module does not define: \['gone'\]"):
        reexport({}, [_module("m", ["a", "gone"], a=1)])


def test_a_module_without_declaration_is_an_error():
    with pytest.raises(AttributeError, match="declares no __all__"):
        reexport({}, [types.ModuleType("bare")])
