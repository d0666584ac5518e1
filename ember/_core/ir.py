"""The IR: typed variables, scalar literals, equations and graphs; its printer and its type checker."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import numpy as np

from ember._core.dtypes import (ShapedArray, check_int_fits, dtype_and_weak, highest, is_int, join_vma, lowest,
                                short_name)
from ember._core.shape_poly import DIM_AS_VALUE, DimExpr

if TYPE_CHECKING:
    from ember._core.primitive import Primitive


class Var:
    """A value defined once in an IR (an input, a constant or an equation's output), typed by its aval."""
    __slots__ = ("aval", "_serial")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self._serial = next(Var._counter)

    def __repr__(self) -> str:
        return f"Var#{self._serial}:{self.aval.str_short()}"


class Literal:
    """A scalar constant written in place (a Python or numpy scalar)."""
    __slots__ = ("value", "aval")

    def __init__(self, value: Any, aval: ShapedArray):
        if aval.shape != ():
            raise ValueError(f"Literal: only scalars can be literals, got {aval}")
        self.value = value
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({format_scalar(self.value)}:{self.aval.str_short()})"

    @property
    def val(self) -> Any:
        """The value (JAX's name: a Literal of jax.extend.core)."""
        return self.value


Atom = Var | Literal


def scalar_literal(value: Any, dtype: np.dtype, weak: bool = True) -> Literal:
    """The one way a Python or numpy scalar becomes a literal of a given dtype (weakly typed by default).
    A Python int that does not fit the dtype is an OverflowError, never a silent wrap-around; a float beyond the
    dtype's range becomes +-inf with numpy's "overflow encountered in cast" warning (as JAX). A symbolic dimension
    (ember.export) is no literal: it becomes its value, computed (the dim_as_value primitive)."""
    if isinstance(value, DimExpr):
        return DIM_AS_VALUE.make(value, dtype, weak)
    check_int_fits(value, dtype)
    if dtype.kind != "c" and np.iscomplexobj(value):
        raise TypeError(f"the complex number {value!r} cannot become a literal of the real dtype {dtype.name} "
                        "(take its real part explicitly, or use a complex dtype)")
    if is_int(dtype) and isinstance(value, float | np.floating) and not np.isfinite(value):
        # (as XLA's convert, which JAX uses: NaN becomes 0, an infinity the dtype's extreme; no numpy warning)
        value = 0 if np.isnan(value) else highest(dtype) if value > 0 else lowest(dtype)
    return Literal(np.asarray(value).astype(dtype)[()], ShapedArray((), dtype, weak))


def python_scalar_literal(x: bool | int | float) -> Literal:
    """A Python scalar as a literal of its default dtype (int32, float32, bool), weakly typed as in JAX."""
    dtype, weak = dtype_and_weak(x)
    return scalar_literal(x, dtype, weak)


class Position:
    """Where in its line a frame was (its code and last instruction, as bound: cheap to record); the column is
    computed from the code's positions table only when asked for. Equal for equal instruction offsets (a Source's
    file, line and function tell the rest)."""
    __slots__ = ("code", "lasti", "_column")

    def __init__(self, code: Any, lasti: int, column: int | None = None):
        self.code, self.lasti, self._column = code, lasti, column

    @property
    def column(self) -> int | None:
        """The 0-based column where the instruction's expression starts (None where Python does not know)."""
        if self._column is None and self.code is not None and self.lasti >= 0:
            self._column = next(itertools.islice(self.code.co_positions(), self.lasti // 2, None),
                                (None, None, None, None))[2]
        return self._column

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Position) and other.lasti == self.lasti

    def __hash__(self) -> int:
        return hash(self.lasti)

    def __reduce__(self) -> Any:  # (a code object does not pickle: keep the column)
        return (Position, (None, self.lasti, self.column))

    def __repr__(self) -> str:
        return f"Position(lasti={self.lasti}, column={self.column})"


# JAX's printed forms of an open jaxpr and an equation (ember._core.jaxpr_print, a later module, registers them)
JAX_PRINTERS: dict[str, Any] = {}


class TransformName(str):
    """An entry of the named scopes that is a transformation's name (jax.extend.source_info_util's
    transform_name_stack): it wraps the scope entered after it, as JAX writes name stacks (see scope_text). Equal
    only to another TransformName of the same name (not to a named scope of that name)."""
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is TransformName and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("TransformName", str(self)))


def scope_text(scope: Sequence[str]) -> str:
    """Named scopes as JAX writes a name stack: joined with '/', a transformation's name wrapping the entry after
    it ('outer', jvp, 'inner' is 'outer/jvp(inner)'; a transformation last is 'jvp()')."""
    parts: list[str] = []
    for entry in reversed(scope):
        if type(entry) is TransformName:
            if parts:
                parts[-1] = f"{entry}({parts[-1]})"
            else:
                parts.append(f"{entry}()")
        else:
            parts.append(entry)
    return "/".join(reversed(parts))


class Source(NamedTuple):
    """Where an equation came from: the line of user code (outside ember) that bound its primitive, and the named
    scopes (ember.named_scope, ember.named_call) it was bound in, outermost first, relative to the IR that holds
    the equation (an equation of a sub-IR is inside its parent equation's scopes). metadata: the XLA metadata
    (ember.experimental.xla_metadata.set_xla_metadata) it was bound under, sorted (key, value) strings, which its
    lowering writes as the frontend attributes of the ops giving its results; a transformation binding what an
    equation becomes under this Source keeps them, as JAX keeps an equation's context."""
    filename: str
    lineno: int
    function: str
    scope: tuple[str, ...] = ()
    position: Position | None = None  # (where in the line: its column, see with_column)
    metadata: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} ({self.function})"

    @property
    def column(self) -> int | None:
        """The 0-based column of the expression that bound the primitive (None if unknown)."""
        return None if self.position is None else self.position.column

    def with_column(self) -> str:
        """`file:line:column (function)`, as JAX's source_info_util.summarize (without the column if unknown)."""
        column = self.column
        where = f"{self.filename}:{self.lineno}" + ("" if column is None else f":{column}")
        return f"{where} ({self.function})"

    @property
    def name_stack(self) -> str:
        """The scopes joined with '/' (JAX's name stack, see scope_text), "" outside any."""
        return scope_text(self.scope)


class Eqn:
    """outputs = primitive(inputs; params), and the Source of the user code that made it (None if unknown)."""
    __slots__ = ("prim", "inputs", "outputs", "params", "source")

    def __init__(self, prim: "Primitive", inputs: Sequence[Atom], outputs: Sequence[Var], params: dict[str, Any],
                 source: Source | None = None):
        self.prim = prim
        self.inputs: list[Atom] = list(inputs)
        self.outputs: list[Var] = list(outputs)
        self.params = params
        self.source = source

    def __repr__(self) -> str:
        return f"Eqn({self.prim.name}, {self.inputs} -> {self.outputs}, {self.params})"

    def __str__(self) -> str:
        """The equation as JAX prints one (`b:f32[3] = sin a`, its variables named afresh)."""
        return JAX_PRINTERS["eqn"](self)

    # JAX's names for the fields (a JaxprEqn of jax.extend.core: ember's IR is its jaxpr); ember has no effect
    # types (Primitive.effectful is the mechanism), so effects is empty, and an equation has no tracing context.
    invars = property(lambda self: self.inputs)
    outvars = property(lambda self: self.outputs)
    primitive = property(lambda self: self.prim)
    source_info = property(lambda self: self.source)
    effects: frozenset = frozenset()
    ctx = None

    def replace(self, invars: Sequence[Atom] | None = None, outvars: Sequence[Var] | None = None,
                primitive: "Primitive | None" = None, params: dict[str, Any] | None = None, **unused: Any) -> "Eqn":
        """A copy with the given fields replaced (JAX's JaxprEqn.replace; effects, source_info and ctx are ember's
        to decide and ignored)."""
        return Eqn(self.prim if primitive is None else primitive, self.inputs if invars is None else invars,
                   self.outputs if outvars is None else outvars, self.params if params is None else params,
                   self.source)


class IR:
    """A first-order typed graph: const_vars (bound to consts) and in_vars -> eqns -> outs.

    consts are the values of arrays the staged function closed over; they are passed as leading arguments when
    the IR is compiled, and bound in place when it is evaluated or inlined. out_tree optionally records the
    pytree structure in which a compiled IR returns its outputs. `compiled` is a slot where the runtime keeps the
    IR's compiled program (ember.compile), so that the program is freed with the IR."""
    __slots__ = ("const_vars", "consts", "in_vars", "eqns", "outs", "out_tree", "compiled", "__weakref__")

    def __init__(self, const_vars: Sequence[Var], consts: Sequence[Any], in_vars: Sequence[Var],
                 eqns: Sequence[Eqn], outs: Sequence[Atom], out_tree: Any = None):
        if len(const_vars) != len(consts):
            raise ValueError("IR: const_vars and consts differ in length")
        self.const_vars: list[Var] = list(const_vars)
        self.consts: list[Any] = list(consts)
        self.in_vars: list[Var] = list(in_vars)
        self.eqns: list[Eqn] = list(eqns)
        self.outs: list[Atom] = list(outs)
        self.out_tree = out_tree  # how compiled outputs are returned: a PyTreeDef, or None for one or a tuple
        self.compiled: Any = None

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.in_vars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outs]

    def __str__(self) -> str:
        return pretty_print(self)

    def __repr__(self) -> str:
        return pretty_print(self)

    def pretty_print(self, *, source_info: bool = False, name_stack: bool = False) -> str:
        """The printed IR (as str), with each equation's user source line (source_info) and named scopes
        (name_stack, joined with '/') as a trailing comment, as JAX's Jaxpr.pretty_print."""
        return pretty_print(self, source_info=source_info, name_stack=name_stack)

    # JAX's view (make_jaxpr's ClosedJaxpr: ember's IR, with its constants, is one): closed.jaxpr is the open term
    # (a Jaxpr: constvars, invars, outvars, eqns), closed.consts the constants' values.
    @property
    def jaxpr(self) -> "Jaxpr":
        return Jaxpr(self.const_vars, self.in_vars, self.outs, self.eqns)

    effects: frozenset = frozenset()  # (ember has no effect types: Primitive.effectful is the mechanism)

    def to_dot(self, name: str = "ir") -> str:
        """The IR as a Graphviz graph (DOT text; `dot -Tpng`): inputs, constants, literals and equations as nodes,
        values as edges labelled with their types, and the IRs an equation carries (a scan's body, a cond's
        branches) as clusters beside it, linked to it by a dashed edge."""
        return to_dot(self, name)

    # Python control flow and hashing: an IR is a value compared by identity (it is used as a static param).
    __hash__ = object.__hash__


# ---------------------------------------------------------------------------------------------------------------
# Printer

class Jaxpr:
    """An open IR, as JAX's jax.extend.core.Jaxpr: constvars (bound by the caller: eval_jaxpr's consts), invars,
    outvars and eqns; `closed(consts)` (or jax.extend.core.ClosedJaxpr(jaxpr, consts)) closes it into an IR."""
    __slots__ = ("constvars", "invars", "outvars", "eqns", "debug_info", "__weakref__")

    def __init__(self, constvars: Sequence[Var], invars: Sequence[Var], outvars: Sequence[Atom], eqns: Sequence[Eqn],
                 effects: Any = frozenset(), debug_info: Any = None):
        self.constvars: list[Var] = list(constvars)
        self.invars: list[Var] = list(invars)
        self.outvars: list[Atom] = list(outvars)
        self.eqns: list[Eqn] = list(eqns)
        self.debug_info = debug_info

    effects: frozenset = frozenset()
    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def closed(self, consts: Sequence[Any]) -> IR:
        if len(consts) != len(self.constvars):
            raise TypeError(f"ClosedJaxpr: {len(self.constvars)} constvars but {len(consts)} consts")
        return IR(self.constvars, consts, self.invars, self.eqns, self.outvars)

    def __str__(self) -> str:  # (as JAX prints an open jaxpr: its constvars before the ';')
        return JAX_PRINTERS["jaxpr"](IR(self.constvars, [None] * len(self.constvars), self.invars, self.eqns,
                                        self.outvars))

    __repr__ = __str__

def format_scalar(value: Any) -> str:
    value = value.item() if isinstance(value, np.generic | np.ndarray) else value
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value)


def _var_names() -> Any:
    for length in itertools.count(1):
        for letters in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=length):
            yield "".join(letters)


class _Namer:
    def __init__(self) -> None:
        self.names: dict[Var, str] = {}
        self.fresh = _var_names()

    def define(self, var: Var) -> str:
        self.names[var] = name = next(self.fresh)
        return f"{name}:{var.aval.str_short()}"

    def use(self, atom: Atom) -> str:
        if isinstance(atom, Literal):
            text = format_scalar(atom.value)
            return text if atom.aval.weak_type else f"{text}:{short_name(atom.aval.dtype)}"
        return self.names.get(atom, f"<undefined {atom!r}>")


def _format_param(value: Any, indent: int, **flags: bool) -> str:
    if isinstance(value, IR):
        body = pretty_print(value, **flags).replace("\n", "\n" + " " * (indent + 2))
        return "\n" + " " * (indent + 2) + body
    if isinstance(value, tuple) and value and all(isinstance(v, IR) for v in value):
        return "(" + ",".join(_format_param(v, indent, **flags) for v in value) + ")"
    if isinstance(value, np.dtype):
        return short_name(value)
    return repr(value)


def _source_comment(source: Source | None, source_info: bool, name_stack: bool) -> str:
    notes = []
    if name_stack and source is not None and source.scope:
        notes.append(source.name_stack)
    if source_info and source is not None:
        notes.append(str(source))
    return "  # " + " ".join(notes) if notes else ""


def pretty_print(ir: IR, indent: int = 0, source_info: bool = False, name_stack: bool = False) -> str:
    namer = _Namer()
    consts = " ".join(namer.define(v) for v in ir.const_vars)
    ins = " ".join(namer.define(v) for v in ir.in_vars)
    head = f"{{ lambda {consts} ; {ins} . let" if consts else f"{{ lambda {ins} . let"
    lines = [head]
    used: set[Var] | None = None
    for eqn in ir.eqns:
        if eqn.prim.name in ("ref_get", "ref_swap") and not eqn.params:  # (as JAX prints reads and writes)
            if used is None:
                used = {a for e in ir.eqns for a in e.inputs if isinstance(a, Var)} | {
                    a for a in ir.outs if isinstance(a, Var)}
            lines.append(_ref_line(eqn, namer, used) + (_source_comment(eqn.source, source_info, name_stack)
                                                         if source_info or name_stack else ""))
            continue
        outs = " ".join(namer.define(v) for v in eqn.outputs)
        params = " ".join(f"{k}={_format_param(v, indent + 4, source_info=source_info, name_stack=name_stack)}"
                          for k, v in sorted(eqn.params.items()))
        args = " ".join(namer.use(a) for a in eqn.inputs)
        call = f"{eqn.prim.name}[{params}]" if params else eqn.prim.name
        comment = _source_comment(eqn.source, source_info, name_stack) if source_info or name_stack else ""
        lines.append(f"    {outs} = {call} {args}".rstrip() + comment)
    outs = ", ".join(namer.use(a) for a in ir.outs)
    lines.append(f"  in ({outs}) }}")
    return "\n".join(lines)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(ir: IR, name: str = "ir") -> str:
    """See IR.to_dot."""
    lines = [f"digraph {_dot_quote(name)} {{", "  rankdir=TB; compound=true;",
             '  node [fontname="monospace", fontsize=10];', '  edge [fontname="monospace", fontsize=9];']
    counter = iter(range(1 << 62))

    def draw(sub: IR, prefix: str, indent: str) -> str:
        """Emit sub's nodes and edges; returns the id of a node inside it (for links to the cluster)."""
        producer: dict[Var, str] = {}
        first = None
        for kind, variables in (("const", sub.const_vars), ("in", sub.in_vars)):
            for i, var in enumerate(variables):
                node = f"{prefix}{kind}{i}"
                shape = "box" if kind == "const" else "invhouse"
                label = _dot_quote(f"{kind} {i}: {var.aval.str_short()}")
                lines.append(f"{indent}{node} [shape={shape}, label={label}];")
                producer[var] = node
                first = first or node
        for eqn in sub.eqns:
            node = f"{prefix}e{next(counter)}"
            params = ", ".join(f"{k}={_format_param(v, 0)}" for k, v in sorted(eqn.params.items())
                               if not isinstance(v, IR) and not (isinstance(v, tuple | list) and any(
                                   isinstance(x, IR) for x in v)))
            label = eqn.prim.name + (f"\n{params}" if params and len(params) < 80 else "")
            lines.append(f"{indent}{node} [shape=ellipse, label={_dot_quote(label)}];")
            first = first or node
            for i, atom in enumerate(eqn.inputs):
                if isinstance(atom, Var) and atom in producer:
                    lines.append(f"{indent}{producer[atom]} -> {node} [label={_dot_quote(atom.aval.str_short())}];")
                elif isinstance(atom, Literal):
                    lit = f"{node}_lit{i}"
                    text = f"{format_scalar(atom.value)}:{atom.aval.str_short()}"
                    lines.append(f"{indent}{lit} [shape=plaintext, label={_dot_quote(text)}];")
                    lines.append(f"{indent}{lit} -> {node};")
            for k, body in enumerate(sub_irs(eqn.params)):
                cluster = f"cluster_{node}_{k}"
                lines.append(f"{indent}subgraph {cluster} {{")
                lines.append(f"{indent}  label={_dot_quote(f'{eqn.prim.name} body {k}')}; style=rounded;")
                inner = draw(body, f"{node}_{k}_", indent + "  ")
                lines.append(f"{indent}}}")
                if inner is not None:
                    lines.append(f"{indent}{node} -> {inner} [style=dashed, arrowhead=none, lhead={cluster}];")
            for var in eqn.outputs:
                producer[var] = node
        for i, atom in enumerate(sub.outs):
            node = f"{prefix}out{i}"
            lines.append(f"{indent}{node} [shape=house, label={_dot_quote(f'out {i}: {atom.aval.str_short()}')}];")
            if isinstance(atom, Var) and atom in producer:
                lines.append(f"{indent}{producer[atom]} -> {node};")
            first = first or node
        return first

    draw(ir, "n", "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Type checker
def _ref_line(eqn: Eqn, namer: _Namer, used: set[Var]) -> str:
    """A read `b:f32[3] <- a[...]` or a write `a[...] <- c` (`b:f32[3], a[...] <- a[...], c` when the old value is
    used) of a mutable array reference."""
    ref = namer.use(eqn.inputs[0])
    if eqn.prim.name == "ref_get":
        return f"    {namer.define(eqn.outputs[0])} <- {ref}[...]"
    value = namer.use(eqn.inputs[1])
    if eqn.outputs[0] in used:
        return f"    {namer.define(eqn.outputs[0])}, {ref}[...] <- {ref}[...], {value}"
    namer.names[eqn.outputs[0]] = "_"  # (the old value, unused: no name)
    return f"    {ref}[...] <- {value}"


class IRTypeError(TypeError):
    pass


def operand_vma_error(name: str, avals: Sequence[ShapedArray]) -> str:
    """JAX's words for operands of a primitive varying over different axes (an IR built without the casts)."""
    return (f"Primitive {name} requires varying manual axes to match, but got {[set(a.vma) for a in avals]}: cast "
            "the less varying operands with ember.lax.pcast(x, axes, to='varying'), or pass check_vma=False to "
            "ember.shard_map")


def sub_irs(params: dict[str, Any]) -> list[IR]:
    """The IRs an equation carries in its params (the bodies of higher-order primitives)."""
    found = []
    for value in params.values():
        if isinstance(value, IR):
            found.append(value)
        elif isinstance(value, tuple | list):
            found.extend(v for v in value if isinstance(v, IR))
    return found


def check_ir(ir: IR) -> None:
    """Check that every var is defined once before use and that every equation's output types are what its
    primitive's abstract evaluation rule says, recursing into the IRs that equations carry. Raises IRTypeError
    naming the offending equation."""
    defined: set[Var] = set()

    def define(var: Var, where: str) -> None:
        if not isinstance(var, Var):
            raise IRTypeError(f"{where}: binder {var!r} is not a Var")
        if var in defined:
            raise IRTypeError(f"{where}: variable {var!r} defined twice")
        defined.add(var)

    def check_use(atom: Atom, where: str) -> None:
        if isinstance(atom, Literal):
            return
        if not isinstance(atom, Var):
            raise IRTypeError(f"{where}: {atom!r} is neither a Var nor a Literal")
        if atom not in defined:
            raise IRTypeError(f"{where}: variable {atom!r} used before it is defined")

    for v in ir.const_vars:
        define(v, "const binders")
    for v in ir.in_vars:
        define(v, "input binders")
    for i, eqn in enumerate(ir.eqns):
        where = f"equation {i} ({eqn.prim.name})"
        for atom in eqn.inputs:
            check_use(atom, where)
        for sub in sub_irs(eqn.params):
            try:
                check_ir(sub)
            except IRTypeError as err:
                raise IRTypeError(f"{where}, in a sub-IR: {err}") from err
        in_avals = [a.aval for a in eqn.inputs]
        vma = None if eqn.prim.own_vma else join_vma(in_avals)
        try:
            expected = eqn.prim.out_avals(in_avals, eqn.params, vma)
        except TypeError as err:
            raise IRTypeError(f"{where}: {err}") from err
        if vma is not None:  # (operands vary alike, but for literals: see ember._core.vma)
            if any(type(a) is Var and a.aval.vma != vma for a in eqn.inputs):
                raise IRTypeError(f"{where}: {operand_vma_error(eqn.prim.name, in_avals)}")
        got = [v.aval for v in eqn.outputs]
        if [(a.shape, a.dtype, a.vma, a.explicit) for a in expected] != \
                [(a.shape, a.dtype, a.vma, a.explicit) for a in got]:
            raise IRTypeError(f"{where}: outputs typed {[a.str_short() for a in got]} but the rule gives "
                              f"{[a.str_short() for a in expected]}")
        for v in eqn.outputs:
            define(v, where)
    for atom in ir.outs:
        check_use(atom, "outputs")


# ---------------------------------------------------------------------------------------------------------------
# Structural keys
class NotKeyable(Exception):
    """An IR whose structure cannot be told by value (an unhashable param, a sub-IR with constants)."""


def structural_key(ir: IR, sources: bool = True) -> tuple[Any, ...]:
    """A hashable key equal for two IRs exactly when they compute the same thing from the same inputs: the avals
    of the constants and inputs (not the constants' values: they are arguments of the compiled program), then
    each equation's primitive, inputs (by position of definition; literals by dtype and bits), params (by value;
    sub-IRs by their own keys; Python callables, such as custom rules, by identity: two closures of the same code
    are different keys, as JAX's caches key on function identity) and, with sources, source line (which error
    messages name), and the outputs. NotKeyable when a param is not hashable, or the IR uses a variable it does
    not define."""
    try:
        return _structural_key(ir, sources)
    except KeyError:
        raise NotKeyable("a variable used but not defined") from None


def _structural_key(ir: IR, sources: bool) -> tuple[Any, ...]:
    ids: dict[Var, int] = {}
    parts: list[Any] = [len(ir.const_vars)]
    for var in ir.const_vars:
        ids[var] = len(ids)
        parts.append(var.aval)
    for var in ir.in_vars:
        ids[var] = len(ids)
        parts.append(var.aval)
    for eqn in ir.eqns:
        parts.append(eqn.prim)
        parts.append(tuple(ids[a] if type(a) is Var else _literal_key(a) for a in eqn.inputs))
        if eqn.params:
            parts.append(tuple((k, _param_key(v)) for k, v in eqn.params.items()))
        else:
            parts.append(None)
        if sources:
            parts.append(eqn.source)
        elif eqn.source is not None and eqn.source.metadata:  # (the program's text has them)
            parts.append(eqn.source.metadata)
        for var in eqn.outputs:
            ids[var] = len(ids)
            parts.append(var.aval)
    parts.append(tuple(ids[a] if type(a) is Var else _literal_key(a) for a in ir.outs))
    return tuple(parts)


def _literal_key(literal: Literal) -> tuple[Any, ...]:
    """A literal by its aval and exact value: its bits (so -0.0 and 0.0 differ, and a NaN equals itself)."""
    value = literal.value
    if isinstance(value, np.generic):
        return (literal.aval, value.tobytes())
    return (literal.aval, type(value), repr(value))


_PLAIN = (int, str, type(None), ShapedArray)  # (compared by ==, which tells them apart exactly)


def _param_key(value: Any) -> Any:
    """A param by value, tagged by its type where == would confuse kinds (True == 1 == 1.0, a dtype == its name)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return (kind, tuple(map(_param_key, value)))
    if kind is float:
        return (float, repr(value))
    if kind is bool:
        return (bool, value)
    if isinstance(value, np.generic):
        return (kind, value.tobytes())
    if isinstance(value, IR):
        if value.consts:
            raise NotKeyable("a sub-IR with constants")
        return (IR, structural_key(value))  # (with its sources: a key with them must not match one without)
    if isinstance(value, tuple):  # a namedtuple
        return (kind, tuple(map(_param_key, value)))
    try:
        hash(value)
    except TypeError:
        raise NotKeyable(f"an unhashable param of type {kind.__name__}") from None
    return (kind, value)  # a dtype, an enum member, a function (by identity), ...
