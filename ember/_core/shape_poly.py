"""Symbolic dimensions: shape polymorphism, as jax.export's (its contract, ember's own code).

A symbolic dimension (DimExpr) is an integer polynomial over named dimension variables ("b", "seq"), whose factors
may also be floordiv(e, k), mod(e, k), max(e1, e2) and min(e1, e2) of other expressions. Expressions are kept in a
normal form (a sum of terms, each a product of factors raised to powers, largest first, as JAX orders them), so
that equal polynomials are equal objects and print alike (`2*b + 1`, `b^2`, `floordiv(b, 2)`); one that is a
constant is a Python int. Every variable is >= 1, and the scope's constraints (`symbolic_shape(..., constraints=
("a >= b + 2", "c == 2*d"))`) add more facts.

Arithmetic (+, -, * with ints and other expressions of the same scope, //, % and divmod, ** by a non-negative int)
gives an expression. Comparisons are decided from bounds (interval arithmetic over the factors, refined with the
constraints): `b >= 1` is True, `2*b > b` is True, `b >= 2` is inconclusive and raises
InconclusiveDimensionOperation, as in JAX. `==` is decided structurally: it is True when the difference is the
constant 0, False otherwise (an inconclusive equality reads as False, JAX's unsound-but-total choice, because `==`
also serves hashing). `int(b)` raises InconclusiveDimensionOperation; an expression used as an array value
(`x / x.shape[0]`) is a weakly typed integer scalar (the dim_as_value primitive, filled in by ember._prims).

The same strict parser reads the shapes of symbolic_shape, constraints, and the expressions stored in an exported
artifact (with limits on their length, nesting and size: an artifact is untrusted data; nothing is ever eval'd)."""
from __future__ import annotations

import math
import operator
import re
from typing import Any, Callable, Iterable, Sequence

_HELP = ("\nThis error arises for comparison operations with shapes that are non-constant, and the result of the "
         "operation cannot be represented as a boolean value for all values of the symbolic dimensions involved "
         "(see ember's docs/aot.md, \"Shape polymorphism\", and JAX's shape_poly documentation).")

INF = math.inf


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation with symbolic dimensions whose result depends on the values of the dimension
    variables (as jax.errors.InconclusiveDimensionOperation)."""

    def __init__(self, message: str):
        super().__init__(message + _HELP)


# ---------------------------------------------------------------------------------------------------------------
# Factors, terms, expressions. Each has a sort key (size first, then structure) reproducing JAX's syntactic order,
# so that normal forms print as JAX prints them.

FLOORDIV, MOD, MAX, MIN = "floordiv", "mod", "max", "min"
_OPERATIONS = (FLOORDIV, MOD, MAX, MIN)


def _key_of(e: "int | DimExpr") -> tuple:
    return e._key if isinstance(e, DimExpr) else (1, (((0, ()), e),))


def _size_of(e: "int | DimExpr") -> int:
    return e._size if isinstance(e, DimExpr) else 1


class _Factor:
    """A dimension variable, or an operation (floordiv, mod, max, min) of two expressions."""
    __slots__ = ("var", "op", "operands", "size", "key", "_hash")

    def __init__(self, var: str | None = None, op: str | None = None, operands: tuple = ()):
        self.var, self.op, self.operands = var, op, operands
        if var is not None:
            self.size = 1
            self.key: tuple = (1, var)
        else:
            self.size = 1 + sum(_size_of(o) for o in operands)
            self.key = (self.size, op, tuple(_key_of(o) for o in operands))
        self._hash = hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Factor) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.var if self.var is not None else f"{self.op}({', '.join(map(str, self.operands))})"

    def variables(self) -> set[str]:
        if self.var is not None:
            return {self.var}
        return set().union(*(o.variables() for o in self.operands if isinstance(o, DimExpr)))


class _Term:
    """A product of factors with positive exponents, stored largest factor first; the empty product is 1."""
    __slots__ = ("factors", "size", "key", "_hash")

    def __init__(self, factors: Iterable[tuple[_Factor, int]]):
        self.factors: tuple[tuple[_Factor, int], ...] = tuple(
            sorted(factors, key=lambda fe: (fe[0].key, fe[1]), reverse=True))
        self.size = sum(1 + e * f.size for f, e in self.factors)
        self.key: tuple = (self.size, tuple((f.key, e) for f, e in self.factors))
        self._hash = hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Term) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        ordered = sorted(self.factors, key=lambda fe: (fe[0].key, fe[1]))
        return "*".join(f"{f}^{e}" if e != 1 else str(f) for f, e in ordered)

    def mul(self, other: "_Term") -> "_Term":
        exps: dict[_Factor, int] = dict(self.factors)
        for f, e in other.factors:
            exps[f] = exps.get(f, 0) + e
        return _Term(exps.items())

    def divide(self, other: "_Term") -> "_Term | None":
        """self / other when it is a term (every exponent stays >= 0), else None."""
        exps: dict[_Factor, int] = dict(self.factors)
        for f, e in other.factors:
            left = exps.get(f, 0) - e
            if left < 0:
                return None
            exps[f] = left
        return _Term((f, e) for f, e in exps.items() if e)

    def factor(self) -> _Factor | None:
        """The one factor of a term that is a single factor to the power 1, else None."""
        return self.factors[0][0] if len(self.factors) == 1 and self.factors[0][1] == 1 else None

    def variables(self) -> set[str]:
        return set().union(*(f.variables() for f, _ in self.factors))


_ONE = _Term(())


class DimExpr:
    """A symbolic dimension: an integer expression over dimension variables (see the module docstring). Made by
    ember.export.symbolic_shape; arithmetic with ints and expressions of the same scope gives expressions (or ints,
    when constant); comparisons are decided where the variables' bounds decide them, else they raise
    InconclusiveDimensionOperation."""
    __slots__ = ("_terms", "_scope", "_size", "_key", "_hash")
    __array_priority__ = 1000  # (numpy defers to our reflected operators)

    def __init__(self, terms: tuple[tuple[_Term, int], ...], scope: "SymbolicScope"):
        self._terms, self._scope = terms, scope  # (sorted largest term first; nonzero coefficients)
        self._size = sum(1 + abs(c) * t.size for t, c in terms)
        self._key: tuple = (self._size, tuple((t.key, c) for t, c in terms))
        self._hash = hash((self._key, id(scope)))

    @property
    def scope(self) -> "SymbolicScope":
        """The SymbolicScope of the expression (its constraints; expressions of different scopes do not mix)."""
        return self._scope

    # -- normal forms -------------------------------------------------------------------------------------------
    @staticmethod
    def _make(coeffs: dict[_Term, int], scope: "SymbolicScope") -> "int | DimExpr":
        """The normal form of a sum of terms: zero coefficients dropped, the scope's equality constraints applied,
        an int when constant."""
        coeffs = {t: c for t, c in coeffs.items() if c}
        if scope._rules:
            coeffs = scope._normalize(coeffs)
        if not coeffs:
            return 0
        if len(coeffs) == 1 and _ONE in coeffs:
            return coeffs[_ONE]
        terms = tuple(sorted(coeffs.items(), key=lambda tc: tc[0].key, reverse=True))
        if len(terms) > MAX_TERMS:
            raise InconclusiveDimensionOperation(f"Symbolic dimension expression with {len(terms)} terms is larger "
                                                 f"than the {MAX_TERMS} terms ember represents")
        return DimExpr(terms, scope)

    @staticmethod
    def _var(name: str, scope: "SymbolicScope") -> "int | DimExpr":
        return DimExpr._make({_Term(((_Factor(var=name), 1),)): 1}, scope)

    @staticmethod
    def _operation(op: str, a: "int | DimExpr", b: "int | DimExpr", scope: "SymbolicScope") -> "int | DimExpr":
        return DimExpr._make({_Term(((_Factor(op=op, operands=(a, b)), 1),)): 1}, scope)

    def _coeffs(self) -> dict[_Term, int]:
        return dict(self._terms)

    def _constant_part(self) -> int:
        return dict(self._terms).get(_ONE, 0)

    def variables(self) -> set[str]:
        """The dimension variables the expression uses."""
        return set().union(*(t.variables() for t, _ in self._terms))

    def _single_variable(self) -> str | None:
        """The variable's name when the expression is exactly one variable, else None."""
        if len(self._terms) == 1 and self._terms[0][1] == 1:
            f = self._terms[0][0].factor()
            return f.var if f is not None else None
        return None

    # -- arithmetic ---------------------------------------------------------------------------------------------
    def _poly(self, other: Any, what: str) -> dict[_Term, int] | None:
        """other's terms when it is an int or an expression of this scope; None for other kinds of values."""
        if isinstance(other, DimExpr):
            self._scope._check_same(other, what)
            return dict(other._terms)
        if type(other) is int:
            return {_ONE: other} if other else {}
        if isinstance(other, float | complex | str) or other is None:
            return None
        try:
            value = operator.index(other)
        except TypeError:  # (a traced value, an array of floats: the expression computes as a value)
            return None
        return {_ONE: value} if value else {}

    def _combine(self, other: dict[_Term, int], k1: int, k2: int) -> "int | DimExpr":
        coeffs = {t: c * k1 for t, c in self._terms}
        for t, c in other.items():
            coeffs[t] = coeffs.get(t, 0) + c * k2
        return DimExpr._make(coeffs, self._scope)

    def __add__(self, other: Any) -> Any:
        poly = self._poly(other, "for operation add")
        return self._as_value().__add__(other) if poly is None else self._combine(poly, 1, 1)

    def __radd__(self, other: Any) -> Any:
        poly = self._poly(other, "for operation add")
        return self._as_value().__radd__(other) if poly is None else self._combine(poly, 1, 1)

    def __sub__(self, other: Any) -> Any:
        poly = self._poly(other, "for operation sub")
        return self._as_value().__sub__(other) if poly is None else self._combine(poly, 1, -1)

    def __rsub__(self, other: Any) -> Any:
        poly = self._poly(other, "for operation sub")
        return self._as_value().__rsub__(other) if poly is None else self._combine(poly, -1, 1)

    def __neg__(self) -> "int | DimExpr":
        return self._combine({}, -1, 0)

    def __pos__(self) -> "DimExpr":
        return self

    def __mul__(self, other: Any) -> Any:
        poly = self._poly(other, "for operation mul")
        if poly is None:
            return self._as_value().__mul__(other)
        coeffs: dict[_Term, int] = {}
        for t1, c1 in self._terms:
            for t2, c2 in poly.items():
                t = t1.mul(t2)
                coeffs[t] = coeffs.get(t, 0) + c1 * c2
        return DimExpr._make(coeffs, self._scope)

    def __rmul__(self, other: Any) -> Any:
        if self._poly(other, "for operation mul") is None:
            return self._as_value().__rmul__(other)
        return self.__mul__(other)

    def __pow__(self, power: Any, modulo: Any = None) -> Any:
        if modulo is not None:
            raise NotImplementedError("Symbolic dimension: pow with a modulo is not supported")
        if isinstance(power, DimExpr) or not isinstance(power, int) or isinstance(power, bool):
            if isinstance(power, int | DimExpr):
                return self._as_value().__pow__(power)
            raise ValueError(f"Symbolic dimension cannot be raised to non-integer powers: '{self}' ** '{power}'")
        if power < 0:
            raise ValueError(f"Symbolic dimension cannot be raised to negative powers: '{self}' ** '{power}'")
        result: int | DimExpr = 1
        for _ in range(power):
            result = result * self
        return result

    def __rpow__(self, other: Any, modulo: Any = None) -> Any:
        return self._as_value().__rpow__(other)

    def __floordiv__(self, divisor: Any) -> Any:
        if self._poly(divisor, "for operation floordiv") is None:
            return self._as_value().__floordiv__(divisor)
        return self._divmod(divisor)[0]

    def __rfloordiv__(self, dividend: Any) -> Any:
        if self._poly(dividend, "for operation floordiv") is None:
            return self._as_value().__rfloordiv__(dividend)
        return _ensure(dividend, self._scope)._divmod(self)[0]

    def __mod__(self, divisor: Any) -> Any:
        if self._poly(divisor, "for operation mod") is None:
            return self._as_value().__mod__(divisor)
        return self._divmod(divisor)[1]

    def __rmod__(self, dividend: Any) -> Any:
        if self._poly(dividend, "for operation mod") is None:
            return self._as_value().__rmod__(dividend)
        return _ensure(dividend, self._scope)._divmod(self)[1]

    def __divmod__(self, divisor: Any) -> Any:
        if self._poly(divisor, "for operation divmod") is None:
            return self._as_value().__divmod__(divisor)
        return self._divmod(divisor)

    def __rdivmod__(self, dividend: Any) -> Any:
        if self._poly(dividend, "for operation divmod") is None:
            return self._as_value().__rdivmod__(dividend)
        return _ensure(dividend, self._scope)._divmod(self)

    def __truediv__(self, divisor: Any) -> Any:  # ("/" gives a float value, as in JAX: an array computation)
        return self._as_value().__truediv__(divisor)

    def __rtruediv__(self, dividend: Any) -> Any:
        return self._as_value().__rtruediv__(dividend)

    def _divmod(self, divisor: "int | DimExpr") -> tuple["int | DimExpr", "int | DimExpr"]:
        """(self // divisor, self % divisor): the polynomial quotient when the division is exact term by term
        (with an integer remainder for a constant divisor, as integer divmod), else floordiv/mod factors."""
        if isinstance(divisor, int) and divisor == 0:
            raise ZeroDivisionError(f"Symbolic dimension '{self}' divided by 0")
        dividend: int | DimExpr = self
        quotient: int | DimExpr = 0
        exact = True
        while isinstance(dividend, DimExpr):
            term, count = dividend._terms[0]
            if isinstance(divisor, DimExpr):
                dterm, dcount = divisor._terms[0]
                qterm = term.divide(dterm)
            else:
                qterm, dcount = term, divisor
            if qterm is None or count % dcount:
                exact = False
                break
            q = DimExpr._make({qterm: count // dcount}, self._scope)
            quotient = quotient + q
            dividend = dividend - q * divisor
        if exact:
            if isinstance(divisor, DimExpr):
                if dividend == 0:
                    return quotient, 0
            else:
                q, r = divmod(dividend, divisor)
                return quotient + q, r
        return (DimExpr._operation(FLOORDIV, self, divisor, self._scope),
                DimExpr._operation(MOD, self, divisor, self._scope))

    def __bool__(self) -> bool:
        """`self != 0`, decided from the bounds (JAX's is always True; ember decides it, so that no rule silently
        takes a dimension that may be 0 for a nonzero one), else InconclusiveDimensionOperation."""
        lo, hi = bounds(self)
        if lo > 0 or hi < 0:
            return True
        raise InconclusiveDimensionOperation(f"Symbolic dimension comparison '{self}' != '0' is inconclusive.")

    def __int__(self) -> int:
        raise InconclusiveDimensionOperation(f"Symbolic dimension '{self}' used in a context that requires a "
                                             "constant")

    def _as_value(self) -> Any:
        """The expression as an array value (a weakly typed integer scalar, while staging)."""
        return DIM_AS_VALUE.make(self)

    def __jax_array__(self) -> Any:
        return self._as_value()

    def dimension_as_value(self) -> Any:
        """The dimension as a value to compute with (JAX's dimension_as_value)."""
        return self._as_value()

    # -- comparisons --------------------------------------------------------------------------------------------
    def __eq__(self, other: Any) -> bool:
        if isinstance(other, DimExpr):
            if other._scope is not self._scope:
                return False
        elif self._poly(other, "") is None:
            return False
        diff = self - other
        return not isinstance(diff, DimExpr) and diff == 0

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    def __ge__(self, other: Any) -> bool:
        return _geq(self, other, lambda: f"'{self}' >= '{other}'")

    def __le__(self, other: Any) -> bool:
        return _geq(other, self, lambda: f"'{self}' <= '{other}'")

    def __gt__(self, other: Any) -> bool:
        return not _geq(other, self, lambda: f"'{self}' > '{other}'")

    def __lt__(self, other: Any) -> bool:
        return not _geq(self, other, lambda: f"'{self}' < '{other}'")

    def max(self, other: Any) -> "int | DimExpr":
        return max_dim(self, other)

    def rmax(self, other: Any) -> "int | DimExpr":
        return max_dim(other, self)

    def min(self, other: Any) -> "int | DimExpr":
        return min_dim(self, other)

    def rmin(self, other: Any) -> "int | DimExpr":
        return min_dim(other, self)

    # -- printing -----------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = []
        for t, c in self._terms:
            sign = "+" if c > 0 else "-"
            if t is _ONE or not t.factors:
                parts.append(f"{sign} {abs(c)}")
            elif abs(c) == 1:
                parts.append(f"{sign} {t}")
            else:
                parts.append(f"{sign} {abs(c)}*{t}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else text

    __repr__ = __str__

    def __deepcopy__(self, memo: dict) -> "DimExpr":
        return self

    def __copy__(self) -> "DimExpr":
        return self


MAX_TERMS = 256  # terms in one expression, at most
MAX_BOUNDS_CACHE = 100_000  # memoized bounds per scope, at most (then cleared)


def _ensure(x: "int | DimExpr", scope: "SymbolicScope") -> "DimExpr":
    """x as a DimExpr (a constant one for an int), for the reflected division operators."""
    if isinstance(x, DimExpr):
        return x
    return DimExpr(((_ONE, int(x)),) if int(x) else (), scope)


def is_symbolic_dim(d: Any) -> bool:
    """Whether d is a symbolic dimension (an expression over dimension variables, not an int)."""
    return isinstance(d, DimExpr)


def is_constant_dim(d: Any) -> bool:
    return not isinstance(d, DimExpr)


def is_symbolic_shape(shape: Sequence[Any]) -> bool:
    for d in shape:
        if isinstance(d, DimExpr):
            return True
    return False


def scope_of(shape: Iterable[Any]) -> "SymbolicScope | None":
    for d in shape:
        if isinstance(d, DimExpr):
            return d.scope
    return None


def max_dim(a: Any, b: Any) -> "int | DimExpr":
    """max(a, b) of dimensions: the larger where the bounds decide it, else a max(a, b) factor."""
    if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
        return max(int(a), int(b))
    lo, hi = bounds(a - b)
    if lo >= 0:
        return a
    if hi <= 0:
        return b
    scope = a.scope if isinstance(a, DimExpr) else b.scope
    return _constant_if_known(DimExpr._operation(MAX, a, b, scope))


def min_dim(a: Any, b: Any) -> "int | DimExpr":
    """min(a, b) of dimensions: the smaller where the bounds decide it, else a min(a, b) factor."""
    if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
        return min(int(a), int(b))
    lo, hi = bounds(a - b)
    if lo >= 0:
        return b
    if hi <= 0:
        return a
    scope = a.scope if isinstance(a, DimExpr) else b.scope
    return _constant_if_known(DimExpr._operation(MIN, a, b, scope))


def _constant_if_known(e: Any) -> Any:
    """e, or the int it is when its bounds pin it (max(0, min(0, b - 2)) is 0)."""
    lo, hi = bounds(e)
    return int(lo) if lo == hi and not math.isinf(lo) else e


def slice_indices(sl: slice, n: Any) -> tuple[Any, Any, Any]:
    """(start, step, count) of x[sl] along a dimension of size n (ints or symbolic), numpy's slicing rules: the
    step's sign and each bound's sign must be decided (else InconclusiveDimensionOperation); bounds are clamped
    with min/max, decided where the bounds of n decide them (as JAX's canonicalize_slice)."""
    def index(v: Any) -> Any:
        return v if isinstance(v, DimExpr) else operator.index(v)
    step = 1 if sl.step is None else index(sl.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    try:
        forward = step > 0
    except InconclusiveDimensionOperation as err:
        raise InconclusiveDimensionOperation(f"In slice with non-constant elements the step ({step}) must be "
                                             f"resolved statically if it is > 0 or < 0.\nDetails: {err}") from None

    def clamp(i: Any, which: str) -> Any:
        try:
            nonnegative = i >= 0
        except InconclusiveDimensionOperation as err:
            raise InconclusiveDimensionOperation(f"In slice with non-constant elements the {which} ({i}) must be "
                                                 f"resolved statically if it is >= 0.\nDetails: {err}") from None
        if nonnegative:
            return min_dim(n, i) if forward else min_dim(n - 1, i)
        return max_dim(0, n + i) if forward else max_dim(-1, n + i)
    start = (0 if forward else n - 1) if sl.start is None else clamp(index(sl.start), "start")
    stop = (n if forward else -1) if sl.stop is None else clamp(index(sl.stop), "stop")
    gap = step if forward else -step
    distance = stop - start if forward else start - stop
    return start, step, max_dim(0, distance + gap - 1) // gap


def check_index_in_bounds(i: int, n: Any, what: str) -> None:
    """A static index into a dimension of size n (symbolic): -n <= i < n must be decided (IndexError when it is
    decided false, InconclusiveDimensionOperation when it cannot be: a constraint on the dimension decides it)."""
    try:
        inside = -n <= i and i < n
    except InconclusiveDimensionOperation:
        raise InconclusiveDimensionOperation(f"{what}: whether the index is within the dimension of size '{n}' "
                                             "is inconclusive (a constraint, e.g. symbolic_shape(..., constraints="
                                             f"['{n} >= {abs(i) + (0 if i < 0 else 1)}']), decides it)") from None
    if not inside:
        raise IndexError(f"{what}: index {i} is out of bounds for a dimension of size {n}")


class _DimAsValue:
    """How an expression becomes an array value: ember._prims fills `make` with the dim_as_value primitive."""

    def make(self, d: DimExpr, dtype: Any = None, weak: bool = True) -> Any:
        raise TypeError(f"the symbolic dimension '{d}' cannot be used as a value here")


DIM_AS_VALUE = _DimAsValue()


# ---------------------------------------------------------------------------------------------------------------
# Scopes and their constraints.

class SymbolicScope:
    """The scope of symbolic expressions that interact (as jax.export.SymbolicScope): the dimension variables of
    one function's arguments and the constraints on them (`e1 >= e2`, `e1 <= e2`, `e1 == e2`). Expressions of
    different scopes do not mix (a ValueError)."""

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError(f"The symbolic constraints should be a sequence of strings. Got {constraints_str!r}")
        self._rules: dict[_Term, tuple[int | DimExpr, int]] = {}  # t -> (e, k): an explicit k*t == e
        self._constraints: list[tuple[str, str, int | DimExpr]] = []  # (">=" or "==", text, diff): diff >= or == 0
        self._bounds_cache: dict[tuple[DimExpr, int], tuple[float, float]] = {}
        self._single: dict[_Term, tuple[float, float]] | None = None  # (bounds of terms the constraints give)
        for text in constraints_str:
            self._add_constraint(text)
        self._bounds_cache.clear()

    @property
    def constraints(self) -> tuple[str, ...]:
        """The constraints as the user wrote them."""
        return tuple(text for _, text, _ in self._constraints)

    def __str__(self) -> str:
        extra = "".join(f"\n  {text}" for text in self.constraints)
        return f"SymbolicScope({id(self)})" + (f" with constraints:{extra}" if extra else "")

    __repr__ = __str__

    def _check_same(self, other: DimExpr, what: str) -> None:
        if other._scope is not self:
            raise ValueError(f"Invalid mixing of symbolic scopes {what}.\nExpected scope {self}\nand found for "
                             f"'{other}' scope {other._scope}\n(all the symbolic dimensions of one function's "
                             "arguments must come from one scope: pass scope= to symbolic_shape).")

    def _add_constraint(self, text: Any, variables: set[str] | None = None) -> None:
        """Add `e1 >= e2`, `e1 <= e2` or `e1 == e2`; with variables (an artifact's), parsed strictly."""
        if not isinstance(text, str):
            raise ValueError(f"SymbolicScope constraint must be a string: got {text!r}")
        limited = variables is not None
        if limited and len(text) > MAX_EXPR_TEXT:
            raise ValueError(f"the constraint {text[:80]!r}... is longer than {MAX_EXPR_TEXT} characters")
        for op in ("==", ">=", "<="):
            at = text.find(op)
            if at >= 0:
                break
        else:
            raise ValueError("Constraint parsing error: must contain one of '==' or '>=' or '<='")
        sides = []
        for part in (text[:at], text[at + 2:]):
            dims = _Parser(part, None, repr(part), self, variables, limited).parse()
            if len(dims) != 1:
                raise ValueError(f"Constraint parsing error: {part!r} is not one dimension expression")
            sides.append(dims[0])
        e1, e2 = sides
        if op == "<=":
            e1, e2 = e2, e1
        diff = e1 - e2
        if not isinstance(diff, DimExpr):
            if (op == "==" and diff != 0) or (op != "==" and diff < 0):
                raise ValueError(f"Unsatisfiable explicit constraint: {text}")
            return
        if op == "==":
            if not isinstance(e1, DimExpr) or len(e1._terms) != 1 or e1._terms[0][0] is _ONE:
                raise ValueError(f"Invalid equality constraint: {e1} == {e2}. The left-hand-side must be of the "
                                 "form `term * coefficient`.")
            term, k = e1._terms[0]
            if term in self._rules:
                raise NotImplementedError(f"Found multiple equality constraints with the same left-hand-side: {term}")
            self._rules[term] = (e2, k)
            f = term.factor()
            if k == 1 and e2 == 0 and f is not None and f.op == MOD and not isinstance(f.operands[1], DimExpr):
                # mod(e, k) == 0 also says k*floordiv(e, k) == e
                k2 = f.operands[1]
                lhs = DimExpr._make({_Term(((_Factor(op=FLOORDIV, operands=f.operands), 1),)): k2}, self)
                if isinstance(lhs, DimExpr) and lhs._terms[0][0] not in self._rules:
                    self._rules[lhs._terms[0][0]] = (f.operands[0], k2)
                    self._constraints.append(("==", f"{lhs} == {f.operands[0]}", lhs - f.operands[0]))
        self._constraints.append(("==" if op == "==" else ">=", text, diff))
        self._single = None

    def _normalize(self, coeffs: dict[_Term, int]) -> dict[_Term, int]:
        """coeffs with the equality constraints applied once (k*t == e rewrites c*t to e*(c//k) when k divides c;
        a rule for one factor of a product applies to the product)."""
        for t, c in list(coeffs.items()):
            rule = self._rules.get(t)
            rest = _ONE
            if rule is None and len(t.factors) > 1:
                for f, e in t.factors:
                    rule = self._rules.get(_Term(((f, e),)))
                    if rule is not None:
                        rest = t.divide(_Term(((f, e),)))  # type: ignore[assignment]
                        break
            if rule is None or c % rule[1]:
                continue
            after, k = rule
            coeffs = dict(coeffs)
            del coeffs[t]
            after_terms = dict(after._terms) if isinstance(after, DimExpr) else ({_ONE: after} if after else {})
            for t2, c2 in after_terms.items():
                t3 = t2.mul(rest)
                coeffs[t3] = coeffs.get(t3, 0) + c2 * (c // k)
            return {t: c for t, c in coeffs.items() if c}
        return coeffs


# ---------------------------------------------------------------------------------------------------------------
# Deciding comparisons: bounds of an expression.

def _mul_interval(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    products = [0.0 if (x == 0 or y == 0) else x * y for x in a for y in b]
    return min(products), max(products)


def _pow_interval(a: tuple[float, float], e: int) -> tuple[float, float]:
    result = (1.0, 1.0)
    for _ in range(e):
        result = _mul_interval(result, a)
    if e % 2 == 0:  # (an even power is >= 0)
        result = (max(result[0], 0.0), result[1])
    return result


def _floor_div(x: float, k: float) -> float:
    return x if math.isinf(x) else math.floor(x / k)


def _factor_bounds(f: _Factor, scope: SymbolicScope, depth: int) -> tuple[float, float]:
    if f.var is not None:
        return 1.0, INF
    a, b = f.operands
    la, ua = bounds(a, depth)
    lb, ub = bounds(b, depth)
    if f.op == MAX:
        return max(la, lb), max(ua, ub)
    if f.op == MIN:
        return min(la, lb), min(ua, ub)
    if f.op == MOD:
        if lb > 0:  # 0 <= mod(a, b) < b, and <= a for a >= 0
            return 0.0, min(ub - 1, ua) if la >= 0 else ub - 1
        if ub < 0:
            return lb + 1, 0.0
        return -INF, INF
    # FLOORDIV
    if lb > 0 and lb == ub:
        return _floor_div(la, lb), _floor_div(ua, lb)
    if ub < 0 and lb == ub:
        return _floor_div(ua, lb), _floor_div(la, lb)
    if lb > 0 and la >= 0:
        return 0.0, _floor_div(ua, lb)
    return -INF, INF


def _term_bounds(t: _Term, scope: SymbolicScope, depth: int) -> tuple[float, float]:
    result = (1.0, 1.0)
    for f, e in t.factors:
        result = _mul_interval(result, _pow_interval(_factor_bounds(f, scope, depth), e))
    return result


def _interval(e: DimExpr, depth: int) -> tuple[float, float]:
    lo = hi = 0.0
    scope = e._scope
    single = _single_term_constraints(scope)
    for t, c in e._terms:
        if t is _ONE:
            lo, hi = lo + c, hi + c
            continue
        tl, th = _term_bounds(t, scope, depth)
        if t in single:
            cl, ch = single[t]
            tl, th = max(tl, cl), min(th, ch)
        cl, ch = _mul_interval((tl, th), (float(c), float(c)))
        lo, hi = lo + cl, hi + ch
    return lo, hi


def _single_term_constraints(scope: SymbolicScope) -> dict[_Term, tuple[float, float]]:
    """Bounds of terms that the constraints give directly (k*t + c >= 0, or == 0)."""
    found = scope._single
    if found is not None:
        return found
    found = {}
    for op, _, diff in scope._constraints:
        if not isinstance(diff, DimExpr):
            continue
        terms = [(t, c) for t, c in diff._terms if t is not _ONE]
        if len(terms) != 1:
            continue
        (t, k), const = terms[0], diff._constant_part()
        lo, hi = found.get(t, (-INF, INF))
        if k > 0:  # k*t >= -const
            lo = max(lo, math.ceil(-const / k))
            if op == "==":
                hi = min(hi, math.floor(-const / k))
        else:  # -|k|*t + const >= 0: t <= const / |k|
            hi = min(hi, math.floor(const / -k))
            if op == "==":
                lo = max(lo, math.ceil(const / -k))
        found[t] = (lo, hi)
    scope._single = found
    return found


def bounds(e: Any, depth: int = 2) -> tuple[float, float]:
    """(lower, upper) bounds of a dimension expression (floats, possibly infinite), given that every variable is
    >= 1 and the scope's constraints: interval arithmetic, refined by eliminating a term between the expression
    and a constraint that has it (as JAX's decision procedure does, one step deep)."""
    if not isinstance(e, DimExpr):
        return float(int(e)), float(int(e))
    scope = e._scope
    cached = scope._bounds_cache.get((e, depth))  # (memoized per depth: the operands of nested factors recur)
    if cached is not None:
        return cached
    lo, hi = _interval(e, depth - 1 if depth > 0 else 0)
    for t, c in e._terms:  # c*max(a1, a2) + rest is c*a1 + rest or c*a2 + rest: bounded by both (min alike)
        f = t.factor()
        if f is not None and f.op in (MAX, MIN):
            rest = e - DimExpr._make({t: c}, scope)
            (l1, h1), (l2, h2) = (bounds(rest + operand * c, depth) for operand in f.operands)
            lo, hi = max(lo, min(l1, l2)), min(hi, max(h1, h2))
            break
    implicit = _implicit_constraints(e) if depth > 0 else []
    if depth > 0 and (scope._constraints or implicit):
        coeffs = dict(e._terms)
        for op, _, diff in scope._constraints + implicit:
            if not isinstance(diff, DimExpr):
                continue
            for t, kc in diff._terms:
                if t is _ONE or t not in coeffs:
                    continue
                ke = coeffs[t]
                for sign in ((1, -1) if op == "==" else (1,)):
                    kcs = kc * sign
                    # e0 = e*|kc| - (sign*diff)*sgn(kcs)*ke eliminates t; sign*diff >= 0
                    e0 = e * abs(kcs) - diff * (sign * (1 if kcs > 0 else -1) * ke)
                    l0, h0 = bounds(e0, depth - 1)
                    if (1 if kcs > 0 else -1) * ke > 0:
                        if not math.isinf(l0):
                            lo = max(lo, math.ceil(l0 / abs(kcs)))
                    elif not math.isinf(h0):
                        hi = min(hi, math.floor(h0 / abs(kcs)))
                break
    if len(scope._bounds_cache) > MAX_BOUNDS_CACHE:
        scope._bounds_cache.clear()
    scope._bounds_cache[(e, depth)] = (lo, hi)
    return lo, hi


def _implicit_constraints(e: DimExpr) -> list[tuple[str, str, Any]]:
    """The facts of the operation factors of e's terms: max(a, b) >= a and >= b, min(a, b) <= a and <= b, and for
    a constant k > 0, 0 <= a - k*floordiv(a, k) <= k - 1 and 0 <= mod(a, k) <= k - 1 (with a - mod(a, k) a
    multiple of k that is >= 0 when a is)."""
    found: list[tuple[str, str, Any]] = []
    for t, _ in e._terms:
        for f, _ in t.factors:
            whole = DimExpr._make({_Term(((f, 1),)): 1}, e._scope)
            a, k = f.operands if f.op is not None else (None, None)
            if f.op in (MAX, MIN):
                for operand in f.operands:
                    found.append((">=", "", whole - operand if f.op == MAX else operand - whole))
            elif f.op == FLOORDIV and isinstance(k, int) and k > 0:
                rest = a - whole * k
                found += [(">=", "", rest), (">=", "", k - 1 - rest)]
    return found


def _geq(e1: Any, e2: Any, describe: Callable[[], str]) -> bool:
    """e1 >= e2, decided by the bounds of e1 - e2, else InconclusiveDimensionOperation."""
    if isinstance(e1, DimExpr):
        scope = e1.scope
        if isinstance(e2, DimExpr):
            scope._check_same(e2, f"when comparing {describe()}")
    elif isinstance(e2, DimExpr):
        scope = e2.scope
    else:
        return operator.index(e1) >= operator.index(e2)
    try:
        e1, e2 = (x if isinstance(x, DimExpr) else operator.index(x) for x in (e1, e2))
    except TypeError:
        raise TypeError(f"Symbolic dimension comparison {describe()}: both sides must be dimensions (ints or "
                        "symbolic dimensions)") from None
    lo, hi = bounds(e1 - e2)
    if lo >= 0:
        return True
    if hi < 0:
        return False
    where = f"\nUsing symbolic scope {scope}" if scope._constraints else ""
    raise InconclusiveDimensionOperation(f"Symbolic dimension comparison {describe()} is inconclusive.{where}")


# ---------------------------------------------------------------------------------------------------------------
# Parsing: symbolic_shape's specifications, constraints, and the expressions of an exported artifact.

_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>\.\.\.|[-+*^(),]))")


class _Parser:
    """A recursive-descent parser of a shape: `(e1, e2, ...)` (parentheses optional), each entry an expression,
    `_` or `...` (filled from `like`). Expressions: integers, variables, e1 + e2, e1 - e2, e1 * e2, e ^ k,
    floordiv(e1, e2), mod(e1, e2), max(e1, e2), min(e1, e2). With `limits` (artifacts): bounded length, nesting,
    exponents and integers, and only the given variables."""

    def __init__(self, text: str, like: Sequence[Any] | None, text_repr: str, scope: SymbolicScope,
                 variables: set[str] | None = None, limited: bool = False):
        self.text, self.like, self.repr, self.scope = text, like, text_repr, scope
        self.variables, self.limited = variables, limited
        self.dims: list[Any] = []
        self.tokens: list[tuple[str, str, int]] = []
        self.pos = 0
        self.depth = 0

    def error(self, detail: str) -> ValueError:
        at = self.tokens[self.pos][2] if self.pos < len(self.tokens) else len(self.text)
        return ValueError(f"syntax error in symbolic shape {self.repr} in dimension {len(self.dims)}: {detail}. "
                          f"Parsed '{self.text[:at]}', remaining '{self.text[at:]}'.")

    def tokenize(self) -> None:
        at = 0
        text = self.text
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at >= len(text):
                break
            m = _TOKEN.match(text, at)
            if m is None or m.end() == at:
                self.pos = len(self.tokens)
                self.tokens.append(("bad", text[at], at))
                raise self.error(f"unexpected character {text[at]!r}")
            kind = m.lastgroup
            start = m.start(kind)  # type: ignore[arg-type]
            self.tokens.append((kind, m.group(kind), start))  # type: ignore[arg-type]
            at = m.end()
        self.tokens.append(("end", "", len(text)))

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.pos]

    def take(self, kind: str, value: str | None = None) -> str:
        k, v, _ = self.tokens[self.pos]
        if k != kind or (value is not None and v != value):
            want = repr(value) if value is not None else kind
            found = "end of string" if k == "end" else repr(v)
            raise self.error(f"expecting {want} but found {found}")
        self.pos += 1
        return v

    def parse(self) -> tuple[Any, ...]:
        if self.limited and len(self.text) > MAX_EXPR_TEXT:
            raise ValueError(f"symbolic shape {self.repr[:80]}... is longer than {MAX_EXPR_TEXT} characters")
        self.tokenize()
        k, v, _ = self.peek()
        if v == "(":
            self.pos += 1
            self.shape()
            self.take("op", ")")
        else:
            self.shape()
        if self.peek()[0] != "end":
            raise self.error(f"expecting end of string but found {self.peek()[1]!r}")
        return tuple(self.dims)

    def shape(self) -> None:
        while True:
            k, v, _ = self.peek()
            if k == "end" or v == ")":
                return
            if v == "..." or (k == "name" and v == "_"):
                if self.like is None:
                    raise self.error(f"spec contains {v} but no 'like' shape was given")
                if v == "...":
                    self.pos += 1
                    for d in self.like[len(self.dims):]:
                        self.add(d)
                    return
                if len(self.like) <= len(self.dims):
                    raise self.error(f"cannot resolve placeholder '_' because we parsed {len(self.dims)} already "
                                     f"and 'like' shape has only {len(self.like)} dimensions")
                self.pos += 1
                self.add(self.like[len(self.dims)])
            else:
                self.add(self.expr())
            k, v, _ = self.peek()
            if k == "end" or v == ")":
                return
            self.take("op", ",")

    def add(self, d: Any) -> None:
        if d is None:
            raise self.error(f"unexpected placeholder for unknown dimension; like={self.like}")
        if self.like is not None and not isinstance(d, DimExpr):
            known = self.like[len(self.dims)] if len(self.like) > len(self.dims) else None
            if known is None or known != d:
                raise self.error(f"different size {d} for known dimension; like={self.like}")
        self.dims.append(d)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_EXPR_DEPTH:
            raise self.error(f"nested more than {MAX_EXPR_DEPTH} deep")

    def expr(self) -> Any:
        self.enter()
        k, v, _ = self.peek()
        negate = v == "-"
        if v in ("-", "+"):
            self.pos += 1
        total: Any = None
        while True:
            t = self.term()
            t = -t if negate else t
            total = t if total is None else total + t
            k, v, _ = self.peek()
            if v not in ("+", "-"):
                self.depth -= 1
                return total
            negate = v == "-"
            self.pos += 1

    def term(self) -> Any:
        product: Any = None
        while True:
            f = self.factor()
            if self.peek()[1] == "^":
                self.pos += 1
                power = self.integer()
                if self.limited and power > MAX_POWER:
                    raise self.error(f"exponent {power} is larger than {MAX_POWER}")
                f = f ** power
            product = f if product is None else product * f
            if self.peek()[1] != "*":
                return product
            self.pos += 1

    def integer(self) -> int:
        text = self.take("num")
        if len(text) > MAX_DIGITS:
            raise self.error(f"integer {text[:20]}... has more than {MAX_DIGITS} digits")
        return int(text)

    def factor(self) -> Any:
        k, v, _ = self.peek()
        if k == "name":
            self.pos += 1
            if v in _OPERATIONS:
                self.take("op", "(")
                a = self.expr()
                self.take("op", ",")
                b = self.expr()
                self.take("op", ")")
                if v == MAX:
                    return max_dim(a, b) if isinstance(a, DimExpr) or isinstance(b, DimExpr) else max(a, b)
                if v == MIN:
                    return min_dim(a, b) if isinstance(a, DimExpr) or isinstance(b, DimExpr) else min(a, b)
                if isinstance(b, int) and b == 0:
                    raise self.error(f"{v} by 0")
                if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
                    return divmod(a, b)[0 if v == FLOORDIV else 1]
                return DimExpr._operation(v, a, b, self.scope)
            if self.variables is not None and v not in self.variables:
                raise self.error(f"unknown dimension variable {v!r} (the artifact declares "
                                 f"{', '.join(sorted(self.variables)) or 'none'})")
            return DimExpr._var(v, self.scope)
        sign = 1
        if v == "-":
            sign = -1
            self.pos += 1
        if self.peek()[0] == "num":
            return sign * self.integer()
        raise self.error(f"expecting a dimension variable, an integer or an operation but found "
                         f"{'end of string' if k == 'end' else repr(v)}")


MAX_EXPR_TEXT = 1000  # characters of one expression read from an artifact, at most
MAX_EXPR_DEPTH = 32  # nesting of expressions
MAX_POWER = 8
MAX_DIGITS = 12


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (), scope: SymbolicScope | None = None,
                   like: Sequence[int | None] | None = None) -> tuple[Any, ...]:
    """A shape of ints and symbolic dimensions parsed from a string (as jax.export.symbolic_shape): "b, 3",
    "(b, 2*b + 1)", "batch, _" with like=; constraints ("a >= b", "c == 2*d") or scope= (not both) say which
    SymbolicScope its variables live in."""
    text_repr = repr(shape_spec)
    if shape_spec is None:
        shape_spec = "..."
    elif not isinstance(shape_spec, str):
        raise ValueError(f"polymorphic shape spec should be None or a string. Found {text_repr}.")
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    elif not isinstance(scope, SymbolicScope):
        raise TypeError(f"symbolic_shape: scope must be a SymbolicScope, got {type(scope).__name__}")
    return _Parser(shape_spec, like, text_repr, scope).parse()


def parse_dim(text: str, scope: SymbolicScope, variables: set[str], what: str) -> Any:
    """One dimension expression of an exported artifact, parsed strictly (limits, declared variables only); any
    failure is a ValueError."""
    try:
        dims = _Parser(text, None, repr(text[:80]), scope, variables, limited=True).parse()
    except (InconclusiveDimensionOperation, ZeroDivisionError, RecursionError) as err:
        raise ValueError(f"{what}: {text[:80]!r}: {str(err).splitlines()[0]}") from None
    if len(dims) != 1:
        raise ValueError(f"{what}: {text[:80]!r} is not one dimension expression")
    return dims[0]


# ---------------------------------------------------------------------------------------------------------------
# Placeholders: how a symbolic dimension is written into a StableHLO template (ember.export).

PLACEHOLDER_OPEN, PLACEHOLDER_CLOSE = "$dim[", "]"


def placeholder(d: DimExpr) -> str:
    return f"{PLACEHOLDER_OPEN}{d}{PLACEHOLDER_CLOSE}"


def dim_text(d: Any) -> str:
    """A dimension as StableHLO text: the integer, or a placeholder holding the expression."""
    return placeholder(d) if isinstance(d, DimExpr) else str(int(d))


# ---------------------------------------------------------------------------------------------------------------
# Binding the dimension variables of an exported function from the shapes of a call's arguments.

def _linear_in(e: DimExpr, var: str) -> tuple[int, Any] | None:
    """(k, rest) when e == k*var + rest with var nowhere in rest, else None."""
    k = 0
    rest: dict[_Term, int] = {}
    for t, c in e._terms:
        f = t.factor()
        if f is not None and f.var == var:
            k = c
        elif var in t.variables():
            return None
        else:
            rest[t] = c
    return (k, DimExpr._make(rest, e._scope)) if k else None


def _spec_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


class ShapeSolver:
    """How the variables of a symbolic signature are found from a call's argument shapes (as jax.export solves
    them): a variable is the value of a dimension that is linear in it, k*v + rest, once rest's variables are
    known (solved in a fixed order, found once). `names` name the arguments (args[0], kwargs['x'])."""

    def __init__(self, shapes: Sequence[Sequence[Any]], names: Sequence[str], scope: SymbolicScope | None):
        self.shapes, self.names, self.scope = [tuple(s) for s in shapes], list(names), scope
        variables = set().union(*(d.variables() for s in self.shapes for d in s if isinstance(d, DimExpr)))
        self.variables = sorted(variables)
        self.specs = ",".join(f"{n}.shape = {_spec_text(s)}" for n, s in zip(self.names, self.shapes))
        known: set[str] = set()
        self.steps: list[tuple[int, int, str, int, Any]] = []  # (argument, dimension, variable, k, rest)
        progress = True
        while progress and len(known) < len(variables):
            progress = False
            for i, shape in enumerate(self.shapes):
                for j, d in enumerate(shape):
                    if not isinstance(d, DimExpr):
                        continue
                    unknown = d.variables() - known
                    if len(unknown) != 1:
                        continue
                    var, = unknown
                    found = _linear_in(d, var)
                    if found is None:
                        continue
                    self.steps.append((i, j, var, found[0], found[1]))
                    known.add(var)
                    progress = True
        if len(known) < len(variables):
            left = sorted(variables - known)
            pending = "".join(f" '{d}' for dimension size {n}.shape[{j}]."
                              for n, s in zip(self.names, self.shapes) for j, d in enumerate(s)
                              if isinstance(d, DimExpr) and d.variables() - known)
            raise ValueError(f"Cannot solve for values of dimension variables {{{', '.join(map(repr, left))}}}. We "
                             "can only solve linear uni-variate constraints. Using the following polymorphic shapes "
                             f"specifications: {self.specs}. Unprocessed specifications:{pending}")

    def _fail(self, detail: str, found: str = "", prefix: bool = True) -> ValueError:
        head = "Input shapes do not match the polymorphic shapes specification. " if prefix else ""
        return ValueError(f"{head}{detail} Using the following polymorphic shapes specifications: {self.specs}. "
                          f"Obtained dimension variables: {found}.")

    def solve(self, actual: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """The variables' values from the actual shapes (each of the argument's rank), every dimension and
        constraint checked (ValueError with JAX's words otherwise)."""
        env: dict[str, Any] = {}
        found = ""
        for i, j, var, k, rest in self.steps:
            size = actual[i][j]
            numerator = size - evaluate(rest, env)
            if isinstance(numerator, int):
                value, remainder = divmod(numerator, k)
                if remainder:
                    raise self._fail(f"Division had remainder {remainder} when computing the value of '{var}'.",
                                     found)
            else:  # (a symbolic size: a call of the export inside another export)
                value = numerator // k
                if value * k != numerator:
                    raise self._fail(f"Dimension {self.names[i]}.shape[{j}] (= {size}) is not of the form "
                                     f"'{self.shapes[i][j]}'.", found)
            env[var] = value
            found += (f"'{var}' = {value} from specification '{self.shapes[i][j]}' for dimension "
                      f"{self.names[i]}.shape[{j}] (= {size}), ")
        for i, shape in enumerate(self.shapes):
            for j, d in enumerate(shape):
                if isinstance(d, DimExpr):
                    want = evaluate(d, env)
                    if want != actual[i][j]:
                        raise self._fail(f"Found inconsistency between dimension size {self.names[i]}.shape[{j}] "
                                         f"(= {actual[i][j]}) and the specification '{d}' (= {want}).", found)
        for var in self.variables:
            value = env[var]
            if not (value >= 1 if isinstance(value, int) else _geq(value, 1, lambda: f"'{value}' >= 1")):
                raise self._fail(f"Expected value >= 1 for dimension variable '{var}'.", found)
        if self.scope is not None:
            for op, text, diff in self.scope._constraints:
                value = evaluate(diff, env)
                if not isinstance(value, int):
                    continue  # (symbolic: decided where the enclosing export is called)
                if (op == "==" and value != 0) or (op == ">=" and value < 0):
                    relation = "equal to" if op == "==" else "greater or equal to"
                    raise self._fail(f"Input shapes do not match the symbolic shape constraint {text}. Expected "
                                     f"'{diff}' to be {relation} 0, but found {value}. ", found, prefix=False)
        return env


def evaluate(e: Any, env: dict[str, Any]) -> Any:
    """The value of a dimension expression for values of its variables: ints (an int), or symbolic dimensions of
    another scope (an expression of that scope). KeyError for a missing variable; ZeroDivisionError for a
    division by 0."""
    if not isinstance(e, DimExpr):
        return int(e)
    total: Any = 0
    for t, c in e._terms:
        value: Any = c
        for f, exp in t.factors:
            value = value * _evaluate_factor(f, env) ** exp
        total = total + value
    return total


def _evaluate_factor(f: _Factor, env: dict[str, Any]) -> Any:
    if f.var is not None:
        return env[f.var]
    a, b = (evaluate(o, env) for o in f.operands)
    if f.op == MAX:
        return max_dim(a, b)
    if f.op == MIN:
        return min_dim(a, b)
    if f.op == FLOORDIV:
        return a // b
    return a % b


def scope_from_artifact(constraints: Sequence[str], variables: set[str]) -> SymbolicScope:
    """The scope of an exported artifact: its constraints parsed strictly (limits, declared variables only)."""
    scope = SymbolicScope(())
    for text in constraints:
        scope._add_constraint(text, variables)
    scope._bounds_cache.clear()
    return scope


# ---------------------------------------------------------------------------------------------------------------
# Templates: StableHLO text holding placeholders, filled with the values of a binding.

class Template:
    """A module text whose placeholders ($dim[expression]) are parsed strictly once (the expression grammar above,
    the declared variables only, bounded); `fill(env)` writes each one's integer value. ValueError for a
    placeholder that does not parse."""

    def __init__(self, text: str, scope: SymbolicScope, variables: set[str]):
        self.pieces: list[str] = []
        self.dims: list[Any] = []
        parsed: dict[str, Any] = {}
        at = 0
        while True:
            start = text.find(PLACEHOLDER_OPEN, at)
            if start < 0:
                self.pieces.append(text[at:])
                break
            end = text.find(PLACEHOLDER_CLOSE, start, start + len(PLACEHOLDER_OPEN) + MAX_EXPR_TEXT + 1)
            if end < 0:
                raise ValueError(f"the placeholder at offset {start} is not closed within {MAX_EXPR_TEXT} characters")
            body = text[start + len(PLACEHOLDER_OPEN):end]
            if body not in parsed:
                parsed[body] = parse_dim(body, scope, variables, f"the placeholder at offset {start}")
            self.pieces.append(text[at:start])
            self.dims.append(parsed[body])
            at = end + len(PLACEHOLDER_CLOSE)
        if len(self.dims) > MAX_PLACEHOLDERS:
            raise ValueError(f"the module has {len(self.dims)} placeholders, more than {MAX_PLACEHOLDERS}")

    def fill(self, env: dict[str, Any], limit: int) -> str:
        """The text with each placeholder replaced by its value under env: an int of at most `limit` in magnitude
        (ValueError otherwise), or, for symbolic values (a call inside another export), that one's placeholder."""
        out = [self.pieces[0]]
        values: dict[int, str] = {}
        for d, piece in zip(self.dims, self.pieces[1:]):
            key = id(d)
            text = values.get(key)
            if text is None:
                try:
                    value = evaluate(d, env)
                except ZeroDivisionError:
                    raise ValueError(f"the placeholder '{d}' divides by 0 for {env}") from None
                if isinstance(value, int) and abs(value) > limit:
                    raise ValueError(f"the placeholder '{d}' is {value} for {env}, beyond {limit}")
                text = values[key] = dim_text(value)
            out.append(text)
            out.append(piece)
        return "".join(out)


MAX_PLACEHOLDERS = 10_000_000


__all__ = ["DIM_AS_VALUE", "DimExpr", "InconclusiveDimensionOperation", "ShapeSolver", "SymbolicScope", "Template",
           "bounds", "check_index_in_bounds", "dim_text", "evaluate", "is_constant_dim", "is_symbolic_dim",
           "is_symbolic_shape", "max_dim",
           "min_dim", "parse_dim", "placeholder", "scope_from_artifact", "scope_of", "slice_indices", "symbolic_shape"]
