"""Every registered primitive carries every rule kind in RULE_KINDS (or an explicit mark saying why not), and the
oracle harness exercises each: forward values (abstract eval, lowering), derivatives (jvp, vjp) or the "not
differentiable" mark, and batching; and each Case binds the primitive it names. A new transformation adds its kind
to RULE_KINDS and a check to the harness (and a planted wrong rule to tests/test_harness_selftest.py)."""
import pathlib

import pytest

from ember._control.custom_batching import CUSTOM_VMAP_NO_REVERSE_MODE
from ember._control.callbacks import CALLBACK_NOT_DIFFERENTIABLE
from ember._control.ffi import FFI_NOT_DIFFERENTIABLE
from ember._control.custom import CUSTOM_VJP_NO_FORWARD_MODE
from ember._control.composite import COMPOSITE_NO_JVP, COMPOSITE_NO_TRANSPOSE, COMPOSITE_NOT_BATCHABLE
from ember.experimental.custom_partitioning import (CUSTOM_PARTITIONING_NO_DERIVATIVE,
                                                    CUSTOM_PARTITIONING_NOT_BATCHABLE)
from ember._control.exported import EXPORTED_NO_FORWARD_MODE
from ember._prims.linalg import NO_DERIVATIVE_RULES
from ember._prims.indexing import SCATTER_APPLY_NOT_DIFFERENTIABLE
from ember._prims.reduction import GENERAL_REDUCE_NOT_DIFFERENTIABLE
from ember._prims.windowed import (GENERAL_REDUCE_WINDOW_NOT_DIFFERENTIABLE,
                                   GENERAL_SELECT_AND_SCATTER_NOT_DIFFERENTIABLE)
from ember._core import CHECK_KINDS, NOT_DIFFERENTIABLE, PRIMITIVES, RULE_KINDS
from oracle import bound_primitives, load_cases, staged

CASES = load_cases()

# How the harness (tests/oracle.py) exercises each rule kind, given a primitive's cases.
TESTED_BY = {
    "abstract_eval": lambda prim, cases: bool(cases),            # check_forward stages and type-checks
    "lowering": lambda prim, cases: bool(cases),                 # check_forward runs it under jit and eagerly
    "jvp": lambda prim, cases: any(c.grad and c.forward for c in cases),  # check_jvp vs JAX and finite differences
    "vjp": lambda prim, cases: any(c.grad and c.reverse for c in cases),  # check_grad vs JAX and finite differences
    "batching": lambda prim, cases: bool(cases),                 # check_vmap vs a loop over the batch
}
MARKS_TESTED_BY = {
    NOT_DIFFERENTIABLE: lambda prim, cases: bool(cases),         # check_not_differentiable
    CUSTOM_VJP_NO_FORWARD_MODE: lambda prim, cases: any(c.grad and not c.forward for c in cases),  # the error
    CUSTOM_VMAP_NO_REVERSE_MODE: lambda prim, cases: any(c.grad and not c.reverse for c in cases),  # the error
    EXPORTED_NO_FORWARD_MODE: lambda prim, cases: any(c.grad and not c.forward for c in cases),  # the error
    GENERAL_REDUCE_WINDOW_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors
        c.grad and not c.forward and not c.reverse for c in cases),
    GENERAL_REDUCE_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors
        c.grad and not c.forward and not c.reverse for c in cases),
    SCATTER_APPLY_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors
        c.grad and not c.forward and not c.reverse for c in cases),
    GENERAL_SELECT_AND_SCATTER_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors
        c.grad and not c.forward and not c.reverse for c in cases),
    NO_DERIVATIVE_RULES: lambda prim, cases: any(  # both errors (geqrf, schur)
        c.grad and not c.forward and not c.reverse for c in cases),
    CALLBACK_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors (pure_callback, io_callback)
        c.grad and not c.forward and not c.reverse for c in cases),
    FFI_NOT_DIFFERENTIABLE: lambda prim, cases: any(  # both errors (ffi_call)
        c.grad and not c.forward and not c.reverse for c in cases),
    COMPOSITE_NO_JVP: lambda prim, cases: any(c.grad and not c.forward for c in cases),  # the error
    COMPOSITE_NO_TRANSPOSE: lambda prim, cases: any(c.grad and not c.reverse for c in cases),  # the error
    COMPOSITE_NOT_BATCHABLE: lambda prim, cases: any(not c.batching for c in cases),  # check_vmap: the error
    CUSTOM_PARTITIONING_NO_DERIVATIVE: lambda prim, cases: any(  # both errors
        c.grad and not c.forward and not c.reverse for c in cases),
    CUSTOM_PARTITIONING_NOT_BATCHABLE: lambda prim, cases: any(not c.batching for c in cases),  # the error
}


def test_every_rule_kind_has_a_check():
    assert set(TESTED_BY) == set(RULE_KINDS)


# Primitives a Case cannot exercise, each with the tests of every rule in its own module: checkify's `check` only
# lowers once checkify has replaced it (its lowering rule is the "not functionalized" error), so its rules are tested
# through checkify: abstract eval and lowering (the error), jvp, vjp and batching (checkify of jvp, grad, vmap).
# The reference primitives (ember/_prims/refs.py) are discharged before lowering and before every transformation
# (their marks), except the boundary reads and writes of a Ref a function takes: their rules are tested with refs.
_REF_TESTS = ("tests/test_refs.py", ["test_the_ir_shows_the_references_and_their_discharge",
                                     "test_rules_of_the_reference_primitives", "test_grad_of_functions_using_refs",
                                     "test_plumbing_refs_along_for_the_ride_under_grad",
                                     "test_vmap_over_ref_arguments_and_internal_refs", "test_errors_as_jax"])
# custom_lin (the tangents of a custom_vjp call in forward mode, which only reverse mode computes) is made by
# custom_vjp_call's jvp rule; a Case of custom_vjp_call with forward=False checks that running it is the error.
_CUSTOM_LIN_TESTS = ("tests/test_jax_docs_gaps.py", ["test_jvp_of_a_custom_vjp_function_is_a_type_error",
                                                     "test_linearize_of_a_custom_vjp_function_as_jax"])
# The tokens' primitives (ember/_prims/effects.py): a Case compares arrays, and a token has no value to compare.
_TOKEN_TESTS = ("tests/test_tokens.py", ["test_tokens_eagerly_and_under_jit_as_jax",
                                          "test_token_programs_lower_to_stablehlo_tokens", "test_token_errors_as_jax",
                                          "test_rules_of_the_token_primitives"])
FORWARD_MODE_ERROR_AT_RUN_TIME = {"custom_vjp_call"}
TESTED_IN_OWN_MODULE = {"custom_lin": _CUSTOM_LIN_TESTS,
                        "new_ref": _REF_TESTS, "ref_get": _REF_TESTS, "ref_swap": _REF_TESTS, "freeze": _REF_TESTS,
                        "check": ("tests/test_checkify.py", ["test_check_rules_under_every_transformation",
                                                              "test_check_outside_checkify"]),
                        "create_token": _TOKEN_TESTS, "after_all": _TOKEN_TESTS,
                        # (a symbolic dimension as a value: it exists only while a function is exported with
                        # symbolic shapes, so its rules are tested against jax.export's there)
                        "dim_as_value": ("tests/test_shape_poly.py", ["test_dim_as_value_rules"])}


@pytest.mark.parametrize("kind", RULE_KINDS)
@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_has_rule_and_test(name, kind):
    prim = PRIMITIVES[name]
    if name in TESTED_IN_OWN_MODULE:
        path, tests = TESTED_IN_OWN_MODULE[name]
        text = (pathlib.Path(__file__).parent.parent / path).read_text()
        assert (kind in prim.rules or kind in prim.marks) and all(f"def {t}(" in text for t in tests), (name, kind)
        return
    cases = [c for c in CASES if c.prim == name]
    assert cases, f"primitive {name} has no Case in tests/prims/test_*.py"
    has_rule, mark = kind in prim.rules, prim.marks.get(kind)
    assert has_rule != (mark is not None), f"primitive {name} needs exactly one of a {kind} rule or a mark"
    if has_rule and kind == "jvp" and name in FORWARD_MODE_ERROR_AT_RUN_TIME:
        assert any(c.grad and not c.forward for c in cases), f"primitive {name}: no case checks its forward error"
    elif has_rule:
        assert TESTED_BY[kind](prim, cases), f"primitive {name}'s {kind} rule has no test case"
    else:
        assert mark in MARKS_TESTED_BY, f"primitive {name} is marked {mark!r} for {kind}, which nothing tests"
        assert MARKS_TESTED_BY[mark](prim, cases)


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_differentiability_marks_agree(name):
    prim = PRIMITIVES[name]
    not_differentiable = [prim.marks.get(k) == NOT_DIFFERENTIABLE for k in ("jvp", "vjp")]
    assert all(not_differentiable) or not any(not_differentiable), \
        f"{name}: jvp and vjp must be marked not differentiable together"


@pytest.mark.usefixtures("ember_x64")  # (as the Cases run: tests/oracle.py)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.label())
def test_case_binds_the_primitive_it_names(case):
    """A Case exercises the primitive it names (so the checks above count the right one): staged at each of its
    shapes and dtypes, its function binds that primitive, at the top level or in a sub-IR. The one exception is a
    dtype at which the function binds nothing at all (a conversion to the dtype the argument already has)."""
    for shapes in case.shapes:
        bound = {dtype: bound_primitives(staged(case, shapes, dtype)) for dtype in case.dtypes}
        assert any(bound.values()), f"{case.label()} at {shapes} binds no primitive at any dtype"
        for dtype, names in bound.items():
            assert not names or case.prim in names, \
                f"{case.label()} at {shapes} {dtype} names {case.prim} but binds only {sorted(names)}"


# Primitives that never meet an explicitly sharded operand: iota and dim_as_value have none (iota's out_sharding=
# param types it), and the reference primitives are discharged before any rule runs on array values.
NO_SHARDING_RULE = {"iota", "dim_as_value", "new_ref", "ref_get", "ref_swap", "freeze"}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_types_explicit_shardings(name):
    """Every primitive says how its results are split in JAX's explicit sharding mode (ember/_prims/explicit.py): a
    sharding_rule, or an abstract eval that types them (own_sharding: the higher-order primitives, collectives,
    sharding constraints); tests/test_explicit_sharding.py checks the rules against JAX's."""
    prim = PRIMITIVES[name]
    assert "sharding_rule" in prim.rules or prim.own_sharding or name in NO_SHARDING_RULE, name


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_says_what_checkify_checks(name):
    """Every primitive says what checkify does with its equations, where it is defined: a "checkify" hook (the
    higher-order primitives, which carry the error state through their bodies, and check), or the automatic checks
    it declares (`checks=`: "nan", "div", "oob", or none); an "oob" check comes with the index_bounds hook it reads
    (tests/test_checkify.py runs every kind against JAX's checkify)."""
    prim = PRIMITIVES[name]
    assert ("checkify" in prim.rules) != (prim.checks is not None), \
        f"primitive {name} needs exactly one of a checkify hook or its declared checks (Primitive(..., checks=...))"
    if prim.checks is not None:
        assert set(prim.checks) <= set(CHECK_KINDS), name
        assert ("oob" in prim.checks) == ("index_bounds" in prim.rules), \
            f"primitive {name}: an out-of-bounds check and its index_bounds hook go together"


def test_a_primitive_without_its_checkify_behaviour_fails_the_meta_test():
    """The check above fails for a new primitive that declares nothing (a planted one, unregistered)."""
    from ember._core import Primitive
    planted = Primitive("planted_for_the_meta_test", register=False)
    PRIMITIVES[planted.name] = planted
    try:
        with pytest.raises(AssertionError, match="checkify hook or its declared checks"):
            test_primitive_says_what_checkify_checks(planted.name)
        planted.def_checks("oob")  # (without its index_bounds hook)
        with pytest.raises(AssertionError, match="index_bounds"):
            test_primitive_says_what_checkify_checks(planted.name)
    finally:
        del PRIMITIVES[planted.name]
