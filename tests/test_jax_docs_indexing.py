"""JAX's own documentation examples on indexing, `.at` updates, sorting, searching, cumulative and windowed ops,
run with ember in place of jax and compared with real JAX.

Two sources:
- the doctest examples (`>>> ...`) of the installed JAX's docstrings of the functions ember implements (jnp.take,
  jnp.ndarray.at, jnp.unique, jax.ops.segment_sum, jax.lax.dynamic_slice, ...): each function's examples run in
  order in one namespace with `jnp`/`jax`/`lax` bound to ember's modules, and every example whose last statement is
  an expression is compared with the same example run with JAX (values and dtypes; JAX in its default 32-bit mode,
  as ember). Examples that fail under JAX itself (they rely on printing or on state the docstring does not show) are
  not compared;
- the indexing sections of "The Sharp Bits" (docs/notebooks/Common_Gotchas_in_JAX.md: in-place updates, array
  updates, out-of-bounds indexing), written out with `doc_example` (tests/test_jax_docs.py).

One deliberate difference: plain indexing with a static Python integer out of bounds raises IndexError in ember
(as numpy), where JAX clamps; `.at[...]` follows JAX's modes for every index.
"""
import ast
import doctest

import jax as jax_oracle
import jax.numpy as jnp_oracle
import numpy as np
import pytest
from jax._src.numpy import array_methods
from recorded import jax_result
from test_jax_docs import doc_example, recorded_if_exact  # tests/ is on sys.path (conftest.py)

import ember
import ember.numpy as enp

FUNCTIONS = [
    "numpy.take", "numpy.take_along_axis", "numpy.put_along_axis", "numpy.nonzero", "numpy.where", "numpy.argwhere",
    "numpy.flatnonzero", "numpy.compress", "numpy.extract", "numpy.select", "numpy.roll", "numpy.flip",
    "numpy.fliplr", "numpy.flipud", "numpy.rot90", "numpy.tri", "numpy.tril", "numpy.triu", "numpy.diff",
    "numpy.sort", "numpy.argsort", "numpy.lexsort", "numpy.partition", "numpy.argpartition", "numpy.searchsorted",
    "numpy.unique", "numpy.unique_all", "numpy.unique_counts", "numpy.unique_inverse", "numpy.unique_values",
    "numpy.cumsum", "numpy.cumprod", "numpy.nancumsum", "numpy.nancumprod", "numpy.cumulative_sum",
    "numpy.cumulative_prod", "ops.segment_sum", "ops.segment_prod", "ops.segment_max", "ops.segment_min",
    "lax.top_k", "lax.sort", "lax.sort_key_val", "lax.dynamic_slice", "lax.dynamic_slice_in_dim",
    "lax.dynamic_index_in_dim", "lax.dynamic_update_slice", "lax.dynamic_update_slice_in_dim",
    "lax.dynamic_update_index_in_dim", "lax.gather", "lax.scatter", "lax.scatter_add", "lax.select_n", "lax.clamp",
    "lax.cumsum", "lax.cummax", "lax.reduce_window", "lax.conv_general_dilated", "lax.conv_transpose", "at",
]
# Examples that use what ember does not have yet, by the text they need: column_stack (issue #15)
MISSING = {"column_stack"}


def _docstring(name):
    if name == "at":
        return array_methods._IndexUpdateHelper.__doc__
    module, attr = name.split(".")
    return getattr({"numpy": jnp_oracle, "ops": jax_oracle.ops, "lax": jax_oracle.lax}[module], attr).__doc__


class _Imports(ast.NodeTransformer):
    """`from jax import numpy as jnp`, `from jax.lax import x`, `import jax.numpy as jnp`: bind the names from the
    namespace's own `jax` (ember or JAX), so that imports inside an example do not bring in real JAX."""
    def visit_ImportFrom(self, node):
        if not (node.module or "").startswith("jax"):
            return node
        base = ".".join(["jax"] + node.module.split(".")[1:])
        return [ast.parse(f"{alias.asname or alias.name} = {base}.{alias.name}").body[0] for alias in node.names]

    def visit_Import(self, node):
        return [ast.parse(f"{alias.asname} = {alias.name}" if alias.asname else "pass").body[0]
                for alias in node.names]


def _run(source, namespace):
    """Execute an example; the value of its last statement when that is an expression (the arguments of a final
    print), else None."""
    tree = _Imports().visit(ast.parse(source))
    ast.fix_missing_locations(tree)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<example>", "exec"), namespace)
    if last is None:
        return None
    value = last.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        value = ast.Tuple(elts=value.args, ctx=ast.Load())
        ast.fix_missing_locations(value)
    return eval(compile(ast.Expression(value), "<example>", "eval"), namespace)


def _same(ours, theirs, where):
    ours_leaves, theirs_leaves = ember.tree.leaves(ours), jax_oracle.tree.leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves), where
    for a, b in zip(ours_leaves, theirs_leaves):
        if hasattr(b, "dtype"):
            assert np.dtype(a.dtype) == np.dtype(b.dtype), (where, a.dtype, b.dtype)
            np.testing.assert_allclose(np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64),
                                       rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=where)
        else:
            assert a == b, where


# Every other function's examples run with -m slow: the functions themselves are checked against JAX by
# tests/test_numpy_indexing.py in the default run.
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if i % 2 else name
                                  for i, name in enumerate(FUNCTIONS)])
def test_docstring_examples(name):
    examples = doctest.DocTestParser().get_examples(_docstring(name) or "")
    ours_ns = {"jnp": enp, "jax": ember, "lax": ember.lax, "np": np}
    if name != "at":  # the docstrings call their function by its bare name too
        module, attr = name.split(".")
        ours_ns[attr] = getattr({"numpy": enp, "ops": ember.ops, "lax": ember.lax}[module], attr)
    sources = [example.source for example in examples]
    compared = 0
    for source, theirs in zip(sources, recorded_if_exact(lambda: _run_with_jax(name, sources))):
        if theirs is None:  # it fails under JAX: the docstring's own context is missing, nothing to compare
            continue
        if any(missing in source for missing in MISSING):
            continue
        ours = _run(source, ours_ns)
        if theirs[0] is not None:
            _same(ours, theirs[0], f"{name}: {source.strip()}")
            compared += 1
    if examples:
        assert compared, f"{name}: nothing compared"


def _run_with_jax(name, sources):
    """The examples `sources` of `name`'s docstring run in order in one namespace with JAX (x64 off): for each, None
    where it fails under JAX, else [the value of its last statement]."""
    theirs_ns = {"jnp": jnp_oracle, "jax": jax_oracle, "lax": jax_oracle.lax, "np": np}
    if name != "at":
        module, attr = name.split(".")
        theirs_ns[attr] = getattr({"numpy": jnp_oracle, "ops": jax_oracle.ops, "lax": jax_oracle.lax}[module], attr)
    values = []
    for source in sources:
        try:
            with jax_oracle.enable_x64(False):
                values.append([_run(source, theirs_ns)])
        except Exception:  # noqa: BLE001 (the docstring's own context is missing: nothing to compare)
            values.append(None)
    return values


# ------------------------------------------------------------------- The Sharp Bits: in-place updates, out of bounds

@doc_example()
def test_sharp_bits_array_updates_set(jax, jnp):
    jax_array = jnp.zeros((3, 3), dtype=jnp.float32)
    updated_array = jax_array.at[1, :].set(1.0)
    return jax_array, updated_array  # "original array unchanged", "updated array"


@doc_example()
def test_sharp_bits_array_updates_add(jax, jnp):
    jax_array = jnp.ones((5, 6))
    new_jax_array = jax_array.at[::2, 3:].add(7.)
    return jax_array, new_jax_array


@doc_example()
def test_sharp_bits_out_of_bounds_at_get(jax, jnp):
    return jnp.arange(10.0).at[11].get(), jnp.arange(10.0).at[11].get(mode='fill', fill_value=jnp.nan)


@doc_example()
def test_sharp_bits_out_of_bounds_traced_index(jax, jnp):
    # adapted: the docs' static jnp.arange(10)[11] with the index traced, which ember clamps as JAX does
    return jax.jit(lambda x, i: x[i])(jnp.arange(10), 11)


def test_sharp_bits_out_of_bounds_static_index_is_an_error_in_ember():
    """The docs' `jnp.arange(10)[11]` returns 9 in JAX; ember raises IndexError, as numpy does."""
    assert jax_result(lambda: int(jnp_oracle.arange(10)[11])) == 9
    with pytest.raises(IndexError, match="index 11 is out of bounds for axis 0 with size 10"):
        enp.arange(10)[11]


@doc_example()
def test_sharp_bits_reduction_out_of_bounds_is_dropped(jax, jnp):
    # "for update operations out-of-bounds indices are dropped"
    x = jnp.arange(5.0)
    return x.at[10].add(10), x.at[20].add(10, mode='clip'), x.at[jnp.array([1, 7])].set(3.0)
