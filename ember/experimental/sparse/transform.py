"""sparsify: run a function written with dense operations on sparse (BCOO) arguments (like
jax.experimental.sparse.sparsify).

ember stages a function to its IR, so sparsify is an interpreter of that IR: the function is staged at the dense
shapes and dtypes of its arguments (a BCOO argument stands in as a dense array of its shape), then its equations
are evaluated on the actual values; an equation none of whose inputs is sparse is bound as it is (eagerly, or
into an enclosing jit, grad or vmap), and one with a sparse input goes to the rule of its primitive in RULES,
which computes it with the bcoo_* operations. The rules are JAX's: operations that keep zeros (neg, sin, mul,
dot_general, slicing, reshapes, sums) stay sparse; add of two BCOO arrays concatenates their elements (or adds
their data when they share indices); a primitive that would make a dense result from a sparse input (exp, cos,
comparisons) is a NotImplementedError that says to use todense. Nested jit and custom_jvp bodies are interpreted
in place; cond, while and scan are rebuilt with lax.switch, lax.while_loop and lax.scan around the interpreted
bodies (sparse values are pytrees, so they flow through as carries and operands).

The BCOO operators (`@`, `*`, `+`, `-`, `/`, `**`, `abs`, comparisons, indexing, `sum`, `reshape`, `astype`) are
sparsify of the numpy function, as in JAX."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

import ember
import ember.lax as lax
import ember.numpy as jnp
from ember._core import IR, Literal, ShapedArray, Tracer, aval_of, stage_flat
from ember._core.eval import bind_outputs
from ember._core.pytree import tree_flatten
from ember.experimental.sparse._base import JAXSparse
from ember.experimental.sparse import bcoo as _bcoo
from ember.experimental.sparse.bcoo import BCOO

Rule = Callable[..., list[Any]]
RULES: dict[str, Rule] = {}


def _is_sparse(x: Any) -> bool:
    return isinstance(x, JAXSparse)


def _is_array(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, ember.Array))


def sparsify(f: Callable[..., Any], use_tracer: bool = False) -> Callable[..., Any]:
    """f made to take BCOO arrays wherever it takes arrays (see the module docstring); the outputs are BCOO where
    the operations keep sparsity and dense elsewhere. use_tracer is JAX's choice of implementation, accepted and
    ignored (ember has one)."""
    del use_tracer

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_flatten((args, kwargs), is_leaf=_is_sparse)
        for leaf in leaves:
            if _is_sparse(leaf) and not isinstance(leaf, BCOO):
                raise NotImplementedError(f"sparsify: {type(leaf).__name__} arguments are not supported (BCOO is)")
        inputs = [i for i, x in enumerate(leaves) if _is_sparse(x) or _is_array(x)]
        for i in inputs:  # (numpy arrays as ember's: their dtypes canonical)
            if not _is_sparse(leaves[i]) and not isinstance(leaves[i], Tracer):
                leaves[i] = jnp.asarray(leaves[i])
        avals = [ShapedArray(leaves[i].shape, leaves[i].dtype) if _is_sparse(leaves[i])
                 else aval_of(leaves[i]).strip_weak_type() for i in inputs]
        out_tree: list[Any] = []

        def flat(*values: Any) -> list[Any]:
            full = list(leaves)
            for i, v in zip(inputs, values):
                full[i] = v
            a, k = tree.unflatten(full)
            outs, treedef = tree_flatten(f(*a, **k))
            out_tree.append(treedef)
            return [jnp.asarray(o) for o in outs]
        ir = stage_flat(flat, avals, label=f"sparsify({getattr(f, '__name__', 'f')})")
        outs = _eval_sparse(ir, [_with_pattern(leaves[i], object()) if _is_sparse(leaves[i]) else leaves[i]
                                 for i in inputs])
        return out_tree[0].unflatten(outs)
    return wrapped


def _literal_value(x: Any) -> Any:
    return jnp.asarray(x.value, x.aval.dtype) if isinstance(x, Literal) else x


def _eval_sparse(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> list[Any]:
    """The outputs of ir on args, some of them sparse (the interpreter of sparsify)."""
    env: dict[Any, Any] = dict(zip(ir.const_vars, ir.consts if consts is None else consts))
    env.update(zip(ir.in_vars, args))

    def read(atom: Any) -> Any:
        return atom if isinstance(atom, Literal) else env[atom]
    for eqn in ir.eqns:
        ins = [read(a) for a in eqn.inputs]
        if not any(_is_sparse(x) for x in ins):
            outs = bind_outputs(eqn, ins)
        else:
            rule = RULES.get(eqn.prim.name)
            if rule is None:
                _unimplemented(eqn.prim.name)
            outs = rule(*(_literal_value(x) for x in ins), **eqn.params)
        env.update(zip(eqn.outputs, outs))
    return [_literal_value(read(a)) for a in ir.outs]


_DENSIFYING = {"acos", "acosh", "bessel_i0e", "cos", "cosh", "eq", "exp", "exp2", "ge", "gt", "le", "log", "lt",
               "ne", "xor", "logistic"}


def _unimplemented(name: str) -> None:
    if name in _DENSIFYING:
        raise NotImplementedError(f"sparse rule for {name} is not implemented because it would result in dense "
                                  "output. If this is your intent, use sparse.todense() to convert your arguments "
                                  "to dense matrices.")
    raise NotImplementedError(f"sparse rule for {name} is not implemented.")


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return register


def _with_pattern(mat: BCOO, pattern: Any) -> BCOO:
    """mat (a copy) marked with the token of its sparsity pattern: inside sparsify, two values with the same token
    have the same indices (JAX's indices_ref), so that x + x adds data and x * x multiplies it. Each sparse
    argument gets a token of its own (as in JAX, even when the same array is passed twice)."""
    out = mat._with_shape(mat.shape)
    out._pattern = pattern
    return out


def _same_pattern(x: BCOO, y: BCOO) -> bool:
    pattern = getattr(x, "_pattern", None)
    return pattern is not None and pattern is getattr(y, "_pattern", None)


def _like(mat: BCOO, data: Any, *, indices_sorted: bool | None = None, unique_indices: bool | None = None) -> BCOO:
    """A BCOO with mat's indices and pattern token and new data."""
    out = BCOO((data, mat.indices), shape=mat.shape,
               indices_sorted=mat.indices_sorted if indices_sorted is None else indices_sorted,
               unique_indices=mat.unique_indices if unique_indices is None else unique_indices)
    return _with_pattern(out, getattr(mat, "_pattern", None)) if getattr(mat, "_pattern", None) else out


def _unique(mat: BCOO) -> BCOO:
    """mat with repeated indices summed (same nse), so a nonlinear elementwise function sees each element once."""
    if mat.unique_indices:
        return mat
    return _bcoo.bcoo_sum_duplicates(mat, nse=mat.nse)


def _unary(name: str, linear: bool) -> None:
    def rule(x: BCOO, **params: Any) -> list[Any]:
        if not linear:
            x = _unique(x)
        return [_like(x, lax_bind(name, x.data, **params))]
    RULES[name] = rule


def lax_bind(name: str, *args: Any, **params: Any) -> Any:
    """Bind the ember primitive called name (the one an equation named)."""
    return ember._core.PRIMITIVES[name].bind(*args, **params)


for _name in ("neg", "conj", "copy", "real", "imag", "copy_p"):
    _unary(_name, linear=True)
for _name in ("abs", "asin", "asinh", "atan", "atanh", "bessel_i1e", "expm1", "log1p", "sign", "sin", "sinh",
              "sqrt", "square", "tan", "tanh", "convert_element_type", "erf", "erf_inv", "cbrt", "round", "floor",
              "ceil"):
    _unary(_name, linear=False)


@_rule("integer_pow")
def _integer_pow(x: BCOO, *, y: int) -> list[Any]:
    if y <= 0:
        raise NotImplementedError(f"sparse rule for integer_pow with non-positive exponent {y} is not implemented "
                                  "because it would result in dense output. If this is your intent, use "
                                  "sparse.todense() to convert your argument to a dense array.")
    x = _unique(x)
    return [_like(x, lax.integer_pow(x.data, y))]


@_rule("mul")
def _mul(x: Any, y: Any) -> list[Any]:
    if _is_sparse(x) and _is_sparse(y):
        if _same_pattern(x, y) and x.unique_indices:
            return [_like(x, x.data * y.data, unique_indices=True)]
        out = _bcoo.bcoo_multiply_sparse(x, y)
        return [out]
    if _is_sparse(y):
        x, y = y, x
    return [_like(x, _bcoo.bcoo_multiply_dense(x, y))]


@_rule("div")
def _div(x: Any, y: Any) -> list[Any]:
    if _is_sparse(y):
        raise NotImplementedError("Division by a sparse array is not implemented because it would result in dense "
                                  "output. If this is your intent, use sparse.todense() to convert your arguments "
                                  "to a dense array.")
    return [_like(x, _bcoo.bcoo_multiply_dense(x, 1 / y))]


@_rule("add")
def _add(x: Any, y: Any) -> list[Any]:
    out_shape = tuple(jnp.broadcast_shapes(x.shape, y.shape))
    if _is_sparse(x) and _is_sparse(y):
        if x.shape != y.shape:
            raise NotImplementedError(f"Addition between sparse matrices of different shapes ({x.shape} and "
                                      f"{y.shape}).")
        if _same_pattern(x, y):
            return [_like(x, x.data + y.data)]
        if x.indices.ndim != y.indices.ndim or x.data.ndim != y.data.ndim:
            raise NotImplementedError("Addition between sparse matrices with different batch/dense dimensions.")
        axis = x.indices.ndim - 2
        return [BCOO((lax.concatenate([x.data, y.data], axis), lax.concatenate([x.indices, y.indices], axis)),
                     shape=x.shape)]
    if _is_sparse(y):
        x, y = y, x
    if tuple(y.shape) != out_shape:
        raise NotImplementedError("Addition between a sparse array X and a dense array Y is not implemented when "
                                  "the output shape is larger than Y.shape. This is to prevent silent "
                                  "densification of a large sparse array. If this is your intent, you can "
                                  "explicitly cast the sparse array to a dense matrix.")
    return [x.todense() + y]


@_rule("sub")
def _sub(x: Any, y: Any) -> list[Any]:
    if _is_sparse(x) and _is_sparse(y):
        return _add(x, _like(y, -y.data))
    raise NotImplementedError("Subtraction between sparse and dense array.")


@_rule("reduce_sum")
def _reduce_sum(x: BCOO, *, axes: Sequence[int], **params: Any) -> list[Any]:
    out = _bcoo.bcoo_reduce_sum(x, axes=axes)
    return [out.data.sum() if out.shape == () else out]


@_rule("transpose")
def _transpose(x: BCOO, *, permutation: Sequence[int]) -> list[Any]:
    permutation = tuple(permutation)
    out = _bcoo.bcoo_transpose(x, permutation=permutation)
    nb, ns = x.n_batch, x.n_sparse
    same_batch = permutation[:nb] == tuple(range(nb))
    data = x.data if same_batch and permutation[nb + ns:] == tuple(range(nb + ns, x.ndim)) else out.data
    same_indices = same_batch and permutation[nb:nb + ns] == tuple(range(nb, nb + ns))
    indices = x.indices if same_indices else out.indices
    result = BCOO((data, indices), shape=out.shape, indices_sorted=out.indices_sorted,
                  unique_indices=out.unique_indices)
    return [_with_pattern(result, getattr(x, "_pattern", None)) if same_indices else result]


def _standard(name: str, fn: Callable[..., Any]) -> None:
    def rule(*args: Any, **params: Any) -> list[Any]:
        for i, a in enumerate(args[1:], 1):
            if _is_sparse(a) and name not in ("concatenate", "dot_general", "conv_general_dilated"):
                raise NotImplementedError(f"sparse rule for {name} with a sparse operand {i} is not implemented.")
        return [fn(*args, **params)]
    RULES[name] = rule


_standard("broadcast_in_dim", lambda x, shape, broadcast_dimensions, **_: _bcoo.bcoo_broadcast_in_dim(
    x, shape=shape, broadcast_dimensions=broadcast_dimensions))
_standard("concatenate", lambda *xs, dimension: _bcoo.bcoo_concatenate(
    [x if _is_sparse(x) else _bcoo.bcoo_fromdense(x) for x in xs], dimension=dimension))
_standard("dot_general", lambda x, y, dimension_numbers, preferred_element_type=None, **_: _bcoo.bcoo_dot_general(
    x, y, dimension_numbers=dimension_numbers, preferred_element_type=preferred_element_type))
_standard("dynamic_slice", lambda x, *starts, slice_sizes: _bcoo.bcoo_dynamic_slice(x, starts, slice_sizes))
_standard("reshape", lambda x, new_sizes, **_: _bcoo.bcoo_reshape(x, new_sizes=new_sizes))
_standard("rev", lambda x, dimensions: _bcoo.bcoo_rev(x, tuple(dimensions)))
_standard("slice", lambda x, start_indices, limit_indices, strides=None: _bcoo.bcoo_slice(
    x, start_indices=start_indices, limit_indices=limit_indices, strides=strides))
_standard("squeeze", lambda x, dimensions: _bcoo.bcoo_squeeze(x, dimensions=dimensions))
_standard("gather", lambda x, idx, dimension_numbers, slice_sizes, indices_are_sorted=False, unique_indices=False,
          mode=None, fill_value=None: _bcoo.bcoo_gather(x, idx, dimension_numbers, slice_sizes,
                                                        indices_are_sorted=indices_are_sorted,
                                                        unique_indices=unique_indices, mode=mode,
                                                        fill_value=fill_value))
_standard("conv_general_dilated", lambda x, y, **p: _bcoo.bcoo_conv_general_dilated(x, y, **p))


@_rule("stack")
def _stack(*xs: Any, axis: int) -> list[Any]:
    xs = [x if _is_sparse(x) else _bcoo.bcoo_fromdense(x) for x in xs]
    shape = xs[0].shape
    new = shape[:axis] + (1,) + shape[axis:]
    dims = tuple(d if d < axis else d + 1 for d in range(len(shape)))
    expanded = [_bcoo.bcoo_broadcast_in_dim(x, shape=new, broadcast_dimensions=dims) for x in xs]
    return [_bcoo.bcoo_concatenate(expanded, dimension=axis)]


@_rule("todense")
def _todense(x: Any) -> list[Any]:
    return [x.todense()]


@_rule("cond")
def _cond(index: Any, *operands: Any, branches: Sequence[IR]) -> list[Any]:
    if _is_sparse(index):
        raise NotImplementedError("sparsify: a sparse index or predicate of cond is not supported")
    fns = [functools.partial(_eval_sparse, branch) for branch in branches]
    return list(lax.switch(index, [lambda *ops, fn=fn: fn(ops) for fn in fns], *operands))


@_rule("while")
def _while(*args: Any, cond_ir: IR, body_ir: IR, cond_nconsts: int, body_nconsts: int) -> list[Any]:
    cond_consts, body_consts = args[:cond_nconsts], args[cond_nconsts:cond_nconsts + body_nconsts]
    init = list(args[cond_nconsts + body_nconsts:])

    def cond_fn(carry: list[Any]) -> Any:
        return _eval_sparse(cond_ir, [*cond_consts, *carry])[0]

    def body_fn(carry: list[Any]) -> list[Any]:
        return _eval_sparse(body_ir, [*body_consts, *carry])
    return list(lax.while_loop(cond_fn, body_fn, init))


@_rule("scan")
def _scan(*args: Any, body_ir: IR, num_consts: int, num_carry: int, length: int, reverse: bool,
          **params: Any) -> list[Any]:
    consts, carry = args[:num_consts], list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    if any(_is_sparse(x) for x in xs):
        raise NotImplementedError("sparsify: sparse xs (the scanned-over inputs) of scan are not supported")

    def body(c: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        outs = _eval_sparse(body_ir, [*consts, *c, *x])
        return outs[:num_carry], outs[num_carry:]
    carry_out, ys = lax.scan(body, carry, xs, length=length, reverse=reverse)
    # (a sparse output stacked over the steps: its buffers gained a leading batch dimension, as vmap stacks it)
    return [*carry_out, *(y._with_shape((length, *y.shape)) if _is_sparse(y) else y for y in ys)]


@_rule("pjit")
def _pjit(*args: Any, body: IR, **params: Any) -> list[Any]:
    return _eval_sparse(body, args)


@_rule("custom_jvp_call")
def _custom_jvp(*args: Any, fun_ir: IR, num_consts: int = 0, **params: Any) -> list[Any]:
    return _eval_sparse(fun_ir, args)


# ---------------------------------------------------------------------------------------------------------------------
# BCOO methods defined by sparsify (as JAX's)

def _swap(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: f(b, a)


def _sum(self: BCOO, *args: Any, **kwargs: Any) -> Any:
    """The sum over axis (all by default), a BCOO array (dense for a full sum), through sparsify(jnp.sum)."""
    return sparsify(lambda x: x.sum(*args, **kwargs))(self)


def _reshape(self: BCOO, *args: Any, **kwargs: Any) -> BCOO:
    """The array reshaped (bcoo_reshape's rules), through sparsify."""
    return sparsify(lambda x: x.reshape(*args, **kwargs))(self)


def _astype(self: BCOO, *args: Any, **kwargs: Any) -> BCOO:
    """The array with its data converted (indices unchanged), through sparsify."""
    return sparsify(lambda x: x.astype(*args, **kwargs))(self)


def _getitem(self: BCOO, index: Any) -> Any:
    """Static indexing (integers, slices, None, Ellipsis) of a BCOO array, through sparsify."""
    result = sparsify(lambda x: x[index])(self)
    if not isinstance(result, BCOO) and np.size(result) == 0:
        result = _bcoo.bcoo_fromdense(result)
    return result


def _iter(self: BCOO) -> Any:
    return iter(self[i] for i in range(self.shape[0]))


_METHODS = {
    "astype": _astype, "reshape": _reshape, "sum": _sum,
    "__abs__": sparsify(jnp.abs), "__neg__": sparsify(jnp.negative), "__pos__": sparsify(jnp.positive),
    "__matmul__": sparsify(jnp.matmul), "__rmatmul__": sparsify(_swap(jnp.matmul)),
    "__mul__": sparsify(jnp.multiply), "__rmul__": sparsify(_swap(jnp.multiply)),
    "__truediv__": sparsify(jnp.divide), "__rtruediv__": sparsify(_swap(jnp.divide)),
    "__add__": sparsify(jnp.add), "__radd__": sparsify(_swap(jnp.add)),
    "__sub__": sparsify(jnp.subtract), "__rsub__": sparsify(_swap(jnp.subtract)),
    "__pow__": lambda x, y: sparsify(lambda x: jnp.power(x, y))(x), "__rpow__": sparsify(_swap(jnp.power)),
    "__getitem__": _getitem, "__iter__": _iter,
    "__gt__": sparsify(jnp.greater), "__ge__": sparsify(jnp.greater_equal), "__lt__": sparsify(jnp.less),
    "__le__": sparsify(jnp.less_equal), "__eq__": sparsify(jnp.equal), "__ne__": sparsify(jnp.not_equal),
}
for _method, _impl in _METHODS.items():
    setattr(BCOO, _method, _impl)

__all__ = ["sparsify"]
