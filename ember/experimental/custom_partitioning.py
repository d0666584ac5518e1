"""ember.experimental.custom_partitioning (jax.experimental.custom_partitioning): a function with partitioning rules
of its own for XLA's SPMD partitioner.

    @custom_partitioning
    def f(x, y):                    # the function's meaning, and its computation on one device
        return x @ y

    f.def_partition(partition=my_partition, sharding_rule="i j, j k -> i k")   # (JAX's Shardy form), or
    f.def_partition(partition=my_partition, infer_sharding_from_operands=my_infer)

In JAX, XLA's partitioner calls the rules while it partitions a program over several devices: `infer_sharding_from_
operands` (or Shardy, reading `sharding_rule`) picks the result's sharding, and `partition` returns the per-device
computation `lower_fn`, which must compute the function's values shard by shard. It calls them through jaxlib's
custom-call partitioner, an extension the CPU plugin does not have (its PJRT extensions hold no Custom_Partitioner),
so ember cannot be asked. ember therefore runs the function's own computation and lets XLA partition it, as JAX
does for the function on one device and eagerly: the values are the same (lower_fn's contract), the layout and the
communication are XLA's, and the rules are kept, checked and shown (`custom_partitioning_p`'s params) but not
called. Everything else is JAX's: static_argnums (a static argument passed first to the rules), keyword arguments
bound to the function's parameters, a sharding_rule string parsed into an SdyShardingRule (factors, `...` batching
dims, compound factors `(i j)`, factor sizes and the reduction/need_replication/permutation factor lists), the
refusals (no derivatives, no batching: wrap it in custom_vjp / vmap around its callers; tracers among static
arguments; unknown keywords; the Shardy rule missing where the propagation callbacks are given while
jax_use_shardy_partitioner is on)."""
from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Sequence

from ember._control.common import close_over, describe, same_types
from ember._core import IR, Primitive, ShapedArray, Tracer, UnexpectedTracerError, aval_of, eval_ir
from ember._core.config import config
from ember._core.pytree import tree_flatten, tree_leaves
from ember._hlo import LoweringContext
from ember._hlo.lower import call_function

BATCHING = "…"  # (JAX's marker of a batching dimension in a rule's mappings: `...` in a rule string)
CUSTOM_PARTITIONING_NO_DERIVATIVE = "Differentiation rule for 'custom_partitioning' not implemented"
CUSTOM_PARTITIONING_NOT_BATCHABLE = "Batching rule for 'custom_partitioning' not implemented"


def _check_factor(factor: str) -> None:
    if not factor or not factor[0].isalpha():
        raise ValueError(f"Factor names have to start with a letter, but got {factor[:1]!r}")
    for char in factor[1:]:
        if char != "_" and not char.isalnum():
            raise ValueError(f"Unknown character {char!r}")


def _is_batching(factor: str) -> bool:
    """BATCHING, optionally followed by a group number (`...1` in a rule string)."""
    return factor[:1] == BATCHING and (len(factor) == 1 or factor[1:].isdigit())


class CompoundFactor(tuple):
    """Several factors that make up one dimension (`(i j)` in a rule string), as JAX's."""

    def __new__(cls, *factors: str) -> "CompoundFactor":
        if len(factors) < 2:
            raise ValueError("A compound factor should contain at least two factors")
        for factor in factors:
            if not isinstance(factor, str):
                raise ValueError(f"Each element of CompoundFactor must be a str, but got {type(factor)}")
            if _is_batching(factor):
                raise ValueError("Ellipsis can't be used in a compound factor")
            _check_factor(factor)
        return super().__new__(cls, factors)


class ArrayMapping(tuple):
    """The factors of one operand's or result's dimensions (a factor name, a CompoundFactor, or BATCHING first), as
    JAX's."""

    def __new__(cls, *dim_mappings: Any) -> "ArrayMapping":
        for i, d in enumerate(dim_mappings):
            if not isinstance(d, str | CompoundFactor):
                raise ValueError(f"Each element of ArrayMapping must be a str or CompoundFactor, but got {type(d)}")
            if isinstance(d, str):
                if _is_batching(d):
                    if i:
                        raise ValueError("Ellipsis can only be used at the beginning of a dimension")
                else:
                    _check_factor(d)
        return super().__new__(cls, dim_mappings)


class SdyShardingRule:
    """A Shardy sharding rule: the operands' and results' ArrayMappings, the special factors and the sizes of the
    factors used only inside compound factors (JAX's, with its checks)."""

    def __init__(self, operand_mappings: tuple[ArrayMapping, ...], result_mappings: tuple[ArrayMapping, ...], *,
                 reduction_factors: tuple[str, ...] = (), need_replication_factors: tuple[str, ...] = (),
                 permutation_factors: tuple[str, ...] = (), **factor_sizes: int):
        whole: dict[str, bool] = {}  # factor -> whether some dimension is that factor alone (its size inferable)
        for mapping in (*operand_mappings, *result_mappings):
            for dim in mapping:
                if isinstance(dim, CompoundFactor):
                    for factor in dim:
                        whole.setdefault(factor, False)
                else:
                    whole[dim] = True
        for factor in factor_sizes:
            if factor not in whole:
                raise ValueError(f"Factor {factor} is not used in the rule, but size is provided")
        for factor, alone in whole.items():
            if factor not in factor_sizes and not alone:
                raise ValueError(f"Factor {factor} is only used in compound factors; must specify its size")
            if factor in factor_sizes and alone:
                raise ValueError(f"Factor {factor} represents a whole dimension; do not specify its size")
        special: set[str] = set()
        for kind, factors in (("reduction_factors", reduction_factors),
                              ("need_replication_factors", need_replication_factors),
                              ("permutation_factors", permutation_factors)):
            if not isinstance(factors, tuple):
                raise ValueError(f"{kind} must be a tuple of factors")
            if len(factors) != len(set(factors)):
                raise ValueError(f"{kind} contains duplicated factors")
            for factor in factors:
                if factor not in whole:
                    raise ValueError(f"Factor {factor} in {kind} is not used in the rule")
                if factor in special:
                    raise ValueError(f"Factor {factor} can only be in one of the reduction, need replication, or "
                                     "permutation factor sets.")
                special.add(factor)
        self.operand_mappings, self.result_mappings = operand_mappings, result_mappings
        self.factor_sizes = factor_sizes
        self.reduction_factors = reduction_factors
        self.need_replication_factors = need_replication_factors
        self.permutation_factors = permutation_factors

    def __str__(self) -> str:
        extra = "".join(f" {name}={getattr(self, name)}" for name in
                        ("reduction_factors", "need_replication_factors", "permutation_factors")
                        if getattr(self, name))
        return f"SdyShardingRule({self.operand_mappings}, {self.result_mappings}, {self.factor_sizes}{extra})"

    __repr__ = __str__


def str_to_sdy_sharding_rule(rule: str, *, reduction_factors: tuple[str, ...] = (),
                             need_replication_factors: tuple[str, ...] = (), permutation_factors: tuple[str, ...] = (),
                             **factor_sizes: int) -> SdyShardingRule:
    """A rule string as an SdyShardingRule, as JAX parses it: operands and results separated by `->`, each one's
    dimensions by spaces, the mappings by commas; `...` (or `...N`, a batching group) for leading batching
    dimensions, `(i j)` for a compound factor."""
    if not isinstance(rule, str):
        raise TypeError(f"rule must be a str, but got {type(rule)}")
    if BATCHING in rule:
        raise ValueError(f"Unknown character {BATCHING!r}")
    text = rule.replace("...", BATCHING)
    if "." in text:
        raise ValueError("Character '.' must be used inside ellipsis '...'")
    if "->" not in text:
        raise ValueError(f"There is no -> in rule: {rule!r}")
    operands, results = text.split("->", 1)

    def mappings(side: str) -> tuple[ArrayMapping, ...]:
        out: list[ArrayMapping] = []
        for part in side.split(","):
            tokens = re.findall(r"\(|\)|[^\s()]+", part)  # (none: a scalar's mapping, as JAX reads it)
            dims: list[Any] = []
            compound: list[str] | None = None
            for token in tokens:
                if token == "(":
                    if compound is not None:
                        raise ValueError("Compound factors should not be nested")
                    compound = []
                elif token == ")":
                    if compound is None:
                        raise ValueError("Brackets are not balanced")
                    if len(compound) < 2:
                        raise ValueError("Brackets should contain at least two factors")
                    dims.append(CompoundFactor(*compound))
                    compound = None
                elif compound is not None:
                    compound.append(token)
                else:
                    dims.append(BATCHING + "0" if token == BATCHING else token)  # (`...` is group 0, as JAX's)
            if compound is not None:
                raise ValueError(f"Brackets are not balanced in rule: {rule!r}")
            out.append(ArrayMapping(*dims))
        return tuple(out)
    return SdyShardingRule(mappings(operands), mappings(results), reduction_factors=tuple(reduction_factors),
                           need_replication_factors=tuple(need_replication_factors),
                           permutation_factors=tuple(permutation_factors), **factor_sizes)


class _Rules:
    """A custom_partitioning's rules as one param of its equations (compared by identity)."""
    __slots__ = ("partition", "infer_sharding_from_operands", "propagate_user_sharding", "decode_shardings",
                 "sharding_rule")

    def __init__(self, owner: "custom_partitioning"):
        for name in self.__slots__:
            setattr(self, name, getattr(owner, name))

    def __repr__(self) -> str:
        return (f"<rules partition={getattr(self.partition, '__qualname__', self.partition)} "
                f"sharding_rule={self.sharding_rule!r}>")


# custom_partitioning(*consts, *args; call, rules, static_args, in_tree, out_tree) -> results: the function's own
# computation (call), lowered as a private function of the module (XLA inlines and partitions it); the rules are
# carried, not called (see the module's docstring).
custom_partitioning_p = Primitive("custom_partitioning", multiple_results=True, own_vma=True, checks=())


@custom_partitioning_p.def_rule("abstract_eval")
def _abstract_eval(*avals: ShapedArray, call: IR, **params: Any) -> list[ShapedArray]:
    if not same_types(call.in_avals, avals):
        raise TypeError(f"custom_partitioning: the function takes {describe(call.in_avals)}, but the operands are "
                        f"{describe(avals)}")
    return list(call.out_avals)


custom_partitioning_p.impl = lambda *args, call, **params: eval_ir(call, list(args))


@custom_partitioning_p.def_rule("lowering")
def _lowering(ctx: LoweringContext, *args: str, call: IR, **params: Any) -> list[str]:
    return call_function(ctx, call, list(args), "custom_partitioning")


custom_partitioning_p.mark("jvp", CUSTOM_PARTITIONING_NO_DERIVATIVE)
custom_partitioning_p.mark("vjp", CUSTOM_PARTITIONING_NO_DERIVATIVE)
custom_partitioning_p.mark("batching", CUSTOM_PARTITIONING_NOT_BATCHABLE)


class custom_partitioning:  # noqa: N801 (JAX's name)
    """A function with partitioning rules (see the module's docstring); `def_partition` sets the rules."""

    def __init__(self, fun: Callable[..., Any], static_argnums: Sequence[int] = ()):
        self.fun = fun
        self.__wrapped__ = fun
        self.static_argnums = tuple(static_argnums)
        self.partition: Callable[..., Any] | None = None
        self.infer_sharding_from_operands: Callable[..., Any] | None = None
        self.propagate_user_sharding: Callable[..., Any] | None = None
        self.decode_shardings = True
        self.sharding_rule: Any = None
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            if hasattr(fun, name):
                setattr(self, name, getattr(fun, name))

    def def_partition(self, partition: Callable[..., Any], infer_sharding_from_operands: Callable[..., Any] | None
                      = None, propagate_user_sharding: Callable[..., Any] | None = None, decode_shardings: bool = True,
                      sharding_rule: Any = None, *, reduction_factors: Sequence[str] = (),
                      need_replication_factors: Sequence[str] = (), permutation_factors: Sequence[str] = (),
                      **factor_sizes: int) -> Callable[..., Any]:
        """Set the rules (as JAX's def_partition); a rule string is parsed into an SdyShardingRule with the factor
        keywords; given a callable or an SdyShardingRule, factor keywords are a ValueError. Returns partition."""
        self.partition = partition
        self.propagate_user_sharding = propagate_user_sharding
        self.infer_sharding_from_operands = infer_sharding_from_operands
        self.decode_shardings = decode_shardings
        if sharding_rule is None or callable(sharding_rule) or isinstance(sharding_rule, SdyShardingRule):
            extra = dict(factor_sizes)
            for name, value in (("reduction_factors", reduction_factors),
                                ("need_replication_factors", need_replication_factors),
                                ("permutation_factors", permutation_factors)):
                if value:
                    extra[name] = value
            if extra:
                raise ValueError(f"Unknown keyword arguments: {extra}")
            self.sharding_rule = sharding_rule
        else:
            self.sharding_rule = str_to_sdy_sharding_rule(
                sharding_rule, reduction_factors=reduction_factors, need_replication_factors=need_replication_factors,
                permutation_factors=permutation_factors, **factor_sizes)
        return partition

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = _resolve_kwargs(self.fun, args, kwargs)
        static = set(self.static_argnums)
        static_args = tuple(args[i] for i in self.static_argnums)
        if any(isinstance(leaf, Tracer) for leaf in tree_leaves(static_args)):
            raise UnexpectedTracerError("custom_partitioning: a static argument (static_argnums "
                                        f"{self.static_argnums}) is a traced value; pass it unstaged")
        dynamic = [a for i, a in enumerate(args) if i not in static]

        def fun(*dyn: Any) -> Any:
            it, full = iter(dyn), []
            for i in range(len(args)):
                full.append(args[i] if i in static else next(it))
            return self.fun(*full)
        leaves, in_tree = tree_flatten(tuple(dynamic))
        closed = close_over(lambda *xs: fun(*xs), in_tree, [aval_of(x) for x in leaves], "custom_partitioning")
        if any(isinstance(c, Tracer) for c in closed.consts):
            raise UnexpectedTracerError("custom_partitioning: the function closes over a traced value; pass it as "
                                        "an argument")
        if config.jax_use_shardy_partitioner and self.sharding_rule is None and (
                self.propagate_user_sharding is not None or self.infer_sharding_from_operands is not None):
            raise NotImplementedError("Shardy is used, but sharding propagation callbacks instead of sharding_rule "
                                      "are provided. Need to provide sharding_rule to migrate to Shardy.")
        outs = custom_partitioning_p.bind(*closed.consts, *leaves, call=closed.ir, rules=_Rules(self),
                                          static_args=_Static(static_args), in_tree=in_tree,
                                          out_tree=closed.out_tree)
        return closed.out_tree.unflatten(outs)


class _Static:
    """The static arguments as a param (compared by identity: they need not be hashable, as in JAX)."""
    __slots__ = ("values",)

    def __init__(self, values: tuple[Any, ...]):
        self.values = values

    def __repr__(self) -> str:
        return repr(self.values)


def _resolve_kwargs(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Keyword arguments bound to fun's parameters as positional ones (JAX's rule: a keyword-only parameter, or a
    keyword that binds to none, is a TypeError)."""
    if not kwargs:
        return tuple(args)
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as err:
        raise TypeError(f"custom_partitioning: cannot bind the arguments of {fun!r}: {err}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError("keyword arguments could not be resolved to positions")
    return tuple(bound.args)


__all__ = ["ArrayMapping", "BATCHING", "CompoundFactor", "SdyShardingRule", "custom_partitioning",
           "custom_partitioning_p"]
