"""JAX's printed form of an IR (what jax.make_jaxpr(f)(...) prints): a small Wadler/Lindig pretty printer laid out
at width 80 (a group prints on one line when it fits, else its breaks become newlines), and the jaxpr layout on it:
`{ lambda consts; ins. let eqns in (outs,) }`, variable names unique across nested jaxprs, literals with their
types (`2.0:f32[]`), unused top-level outputs as `_`, and each primitive under JAX's name with the params JAX
prints (see _jax_view). ember's own IR printing (ember._core.ir.pretty_print) is separate and unchanged."""
from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any

import numpy as np

from ember._core.ir import IR, JAX_PRINTERS, Jaxpr, Literal, Var

# ---------------------------------------------------------------------------------------------------------------
# Documents: ("text", s) | ("brk", s) | ("cat", [docs]) | ("nest", n, doc) | ("group", doc)
NIL = ("cat", [])


def text(s: str, annotation: str | None = None) -> tuple:
    """Literal text; an annotation (a source line) prints at the end of the line the text lands on."""
    return ("text", s) if annotation is None else ("text", s, annotation)


def brk(s: str = " ") -> tuple:
    return ("brk", s)


def cat(*docs: tuple) -> tuple:
    return ("cat", list(docs))


def nest(n: int, doc: tuple) -> tuple:
    return ("nest", n, doc)


def group(doc: tuple) -> tuple:
    return ("group", doc)


def join(sep: tuple, docs: list[tuple]) -> tuple:
    out: list[tuple] = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return ("cat", out)


def _fits(doc: tuple, width: int, rest: list[tuple[int, bool, tuple]]) -> bool:
    """Whether doc printed flat, and what follows it up to the next line break, take at most width columns."""
    agenda: list[tuple[bool, tuple]] = [(flat, d) for _, flat, d in rest[-64:]] + [(True, doc)]
    while agenda and width >= 0:
        flat, d = agenda.pop()
        kind = d[0]
        if kind == "text":
            width -= len(d[1])
        elif kind == "brk":
            if not flat:
                return True
            width -= len(d[1])
        elif kind == "cat":
            agenda.extend((flat, c) for c in reversed(d[1]))
        else:
            agenda.append((flat, d[-1]))
    return width >= 0


def _sparse(doc: tuple) -> bool:
    """Whether doc holds at most one annotation after any break (else it cannot print flat: each annotated
    equation needs a line of its own), as JAX's printer."""
    agenda, seen_break, count = [doc], False, 0
    while agenda:
        d = agenda.pop()
        kind = d[0]
        if kind == "text":
            if len(d) > 2:
                if count and seen_break:
                    return False
                count += 1
        elif kind == "brk":
            seen_break = True
        elif kind == "cat":
            agenda.extend(reversed(d[1]))
        else:
            agenda.append(d[-1])
    return True


def format_doc(doc: tuple, width: int = 80) -> str:
    """Lay doc out: a group prints flat when it, and what follows it up to the next line break, fit the rest of
    the line, else its breaks are newlines (indented by the enclosing nests), as JAX's pretty printer."""
    lines: list[tuple[str, list[str]]] = []
    line: list[str] = []
    notes: list[str] = []
    column = 0
    agenda: list[tuple[int, bool, tuple]] = [(0, False, doc)]  # (indent, flat, doc)
    while agenda:
        indent, flat, d = agenda.pop()
        kind = d[0]
        if kind == "text":
            line.append(d[1])
            column += len(d[1])
            if len(d) > 2:
                notes.append(d[2])
        elif kind == "cat":
            agenda.extend((indent, flat, c) for c in reversed(d[1]))
        elif kind == "brk":
            if flat:
                line.append(d[1])
                column += len(d[1])
            else:
                lines.append(("".join(line), notes))
                line, notes = [" " * indent], []
                column = indent
        elif kind == "nest":
            agenda.append((indent + d[1], flat, d[2]))
        else:  # group
            agenda.append((indent, flat or (_sparse(d[1]) and _fits(d[1], width - column, agenda)), d[1]))
    lines.append(("".join(line), notes))
    # (annotations line up after the widest annotated line)
    widest = max((len(t) for t, n in lines if n), default=0)
    out = []
    for t, n in lines:  # (a line with several annotations: one under the other)
        out.append(t.ljust(widest) + " # " + n[0] if n else t)
        out.extend(" " * widest + " # " + note for note in n[1:])
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Jaxprs

def _aval_str(aval: Any) -> str:
    return aval.str_short()  # (as JAX's short form: f32[3], bool[], f32[8@X]{V:i}, Ref{f32[3]})


def _letters(n: int) -> str:
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(97 + i) + s
    return s


class _Context:
    """Variable names shared by a jaxpr and every jaxpr nested in it (as JAX's JaxprPpContext)."""

    def __init__(self, names: dict[Var, str]):
        self.names = dict(names)
        self.shared: dict[int, str] = {}  # id(IR) -> its name, for jaxprs printed once before the top-level one
        self.shared_names: set[str] = set()
        self.source_info = False  # (annotate each equation with its source line, file:line:column (function))
        self.name_stack = False  # (annotate each equation with its named scopes, [outer/inner])
        self._fresh = (n for n in map(_letters, itertools.count()) if n not in self.shared_names)

    def name(self, var: Var) -> str:
        if var not in self.names:
            self.names[var] = next(self._fresh)
        return self.names[var]

    def suggest(self, for_vars: list[Any], like_vars: list[Any]) -> None:
        """Name for_vars as like_vars (a jit's inner jaxpr's inputs and outputs as the equation's)."""
        if len(for_vars) != len(like_vars):
            return
        used: set[Var] = set()
        for v, like in zip(for_vars, like_vars):
            if isinstance(like, Var) and like not in used and isinstance(v, Var) and v not in self.names:
                used.add(like)
                self.names[v] = self.name(like)


def _atom(a: Any, ctx: _Context) -> str:
    if isinstance(a, Literal):
        value = np.asarray(a.value).item()
        return f"{value}:{_aval_str(a.aval)}"
    return ctx.name(a)


def _vars(vs: list[Any], ctx: _Context, separator: str = "", shapes: bool = False) -> tuple:
    docs = [text(_atom(v, ctx) + (":" + _aval_str(v.aval) if shapes else "")) for v in vs]
    return nest(2, group(join(cat(text(separator), group(brk())), docs)))


def _is_jaxpr_tuple(v: Any) -> bool:
    return type(v) is tuple and len(v) > 0 and all(isinstance(j, IR) for j in v)


def _param_doc(v: Any, ctx: _Context) -> tuple:
    if isinstance(v, IR):
        return _jaxpr(v, ctx)
    if isinstance(v, Jaxpr) and not v.constvars:  # (an open jaxpr: a call primitive's call_jaxpr)
        return _jaxpr(v.closed([]), ctx)
    if _is_jaxpr_tuple(v):
        return group(cat(nest(2, cat(text("("), brk(""), join(brk(), [_jaxpr(j, ctx) for j in v]))),
                         brk(""), text(")")))
    if isinstance(v, np.dtype):
        return text(v.name)
    if isinstance(v, type) and issubclass(v, np.generic):
        return text(np.dtype(v).name)
    return text(re.sub(r" at 0x([0-9a-fA-F]+)", lambda m: " at 0x" + "X" * len(m.group(1)), str(v)))


def _kv_pairs(pairs: list[tuple[str, Any]], ctx: _Context) -> tuple:
    if not pairs:
        return NIL
    return group(cat(nest(2, cat(text("["), brk(""), join(brk(), [cat(text(f"{k}="), _param_doc(v, ctx))
                                                                  for k, v in pairs]))),
                     brk(""), text("]")))


_ACCURACY = {"exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos", "tan", "sqrt", "rsqrt",
             "cbrt"}
_RENAMES = {"select": "select_n", "pjit": "jit", "scatter_add": "scatter-add", "scatter_mul": "scatter-mul",
            "scatter_min": "scatter-min", "scatter_max": "scatter-max"}


def _jax_view(eqn: Any) -> tuple[str, list[tuple[str, Any]], list[Any]]:
    """The equation as JAX prints it: JAX's primitive name, the params JAX prints (in its order), the inputs."""
    name = eqn.prim.name
    params = dict(eqn.params)
    inputs = list(eqn.inputs)
    if name == "select":  # (JAX's select_n takes the case for False first)
        inputs = [inputs[0], inputs[2], inputs[1]]
    elif name in _ACCURACY or name == "mul":
        if params.get("accuracy", 1) is None:
            del params["accuracy"]
        if params.get("out_dtype", 1) is None:
            del params["out_dtype"]
    elif name in ("reduce_max", "reduce_min") and inputs and inputs[0].aval.dtype == np.bool_:
        name = "reduce_or" if name == "reduce_max" else "reduce_and"
    elif name == "reduce_sum":
        params.setdefault("out_sharding", None)
    elif name == "broadcast_in_dim":
        params.pop("shape", None)
        params.pop("sharding", None)
        if not params.get("broadcast_dimensions"):
            params.pop("broadcast_dimensions", None)
    elif name == "reshape":
        params.setdefault("dimensions", None)
        params.setdefault("sharding", None)
    elif name == "convert_element_type":
        params.pop("sharding", None)
    elif name == "dot_general":
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        params["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
        params.setdefault("preferred_element_type", eqn.outputs[0].aval.dtype)
        params.pop("out_sharding", None)
        params = {k: v for k, v in params.items() if v is not None}
    elif name == "slice":
        if params.get("strides") is not None and all(s == 1 for s in params["strides"]):
            params["strides"] = None
    elif name == "iota":
        params.setdefault("sharding", None)
    elif name == "top_k":
        params.setdefault("axis", len(inputs[0].aval.shape) - 1)
    elif name == "rng_bit_generator":  # (JAX's out_sharding, a param only when given in ember)
        params.setdefault("out_sharding", None)
    elif name == "ragged_dot_general":  # (JAX's params beyond ember's, at their defaults)
        for key in ("group_offset", "out_sharding", "precision", "preferred_element_type"):
            params.setdefault(key, None)
    elif name == "conv_general_dilated":  # (JAX's params beyond ember's, at their defaults)
        for key in ("out_sharding", "precision", "preferred_element_type"):
            params.setdefault(key, None)
    elif name == "fft":  # (JAX's FftType prints as its number)
        kinds = ("FFT", "IFFT", "RFFT", "IRFFT")
        if str(params.get("fft_type")) in kinds:
            params["fft_type"] = kinds.index(str(params["fft_type"]))
    elif name == "gather":  # (ember's gather is XLA's: indices promised in bounds; ember masks around it)
        params.setdefault("fill_value", None)
        params.setdefault("mode", "GatherScatterMode.PROMISE_IN_BOUNDS")
    elif name.startswith("scatter"):  # (XLA's scatter drops out-of-bounds updates)
        params.setdefault("mode", "GatherScatterMode.FILL_OR_DROP")
    elif name == "while":
        params["cond_jaxpr"] = params.pop("cond_ir")
        params["body_jaxpr"] = params.pop("body_ir")
    elif name == "scan":
        params["jaxpr"] = params.pop("body_ir")
        params.setdefault("unroll", 1)
        params = {k: params[k] for k in ("jaxpr", "length", "num_carry", "num_consts", "reverse", "unroll")
                  if k in params}
    elif name == "pjit":
        params["jaxpr"] = params.pop("body")
        for key in ("in_shardings", "out_shardings", "donated_invars"):
            if key in params and not any(s is not None and s is not False for s in params[key]):
                del params[key]
        params.pop("inline", None)
        if not params.get("keep_unused", True):
            del params["keep_unused"]
        jit_name = params.pop("name", "<unnamed function>")
        return "jit", [("name", jit_name)] + sorted(params.items()), inputs
    elif name == "custom_jvp_call":  # (name=, call_jaxpr=, jvp= by the functions' names, as JAX)
        params["call_jaxpr"] = params.pop("fun_ir")
        if not params.get("num_consts"):
            params.pop("num_consts", None)
        jvp = params.pop("jvp", None)
        fun_name, jvp_name = getattr(jvp, "printed_names", ("function", "jvp"))
        params["jvp"] = jvp_name
        params["symbolic_zeros"] = bool(getattr(jvp, "symbolic_zeros", False))
        return name, [("name", fun_name)] + sorted(params.items()), inputs
    elif name == "custom_vjp_call":
        params["call_jaxpr"] = params.pop("fun_ir")
        if not params.get("num_consts"):
            params.pop("num_consts", None)
        fwd = params.pop("fwd", None)
        params.pop("bwd", None)
        fun_name, fwd_name, bwd_name, symbolic = getattr(fwd, "printed_names", ("function", "fwd", "bwd", False))
        params.update(fwd=fwd_name, bwd=bwd_name, symbolic_zeros=symbolic)
        return name, [("name", fun_name)] + sorted(params.items()), inputs
    elif name == "remat":  # (JAX's checkpoint primitive is remat2)
        params["jaxpr"] = params.pop("body_ir")
        params.setdefault("differentiated", False)
        params.setdefault("prevent_cse", True)
        return "remat2", sorted(params.items()), inputs
    return _RENAMES.get(name, name), sorted(params.items()), inputs


def _eqn(eqn: Any, ctx: _Context, used: set[Var]) -> tuple:
    name = eqn.prim.name
    if name == "ref_get" and not eqn.params:
        return text(f"{ctx.name(eqn.outputs[0])}:{_aval_str(eqn.outputs[0].aval)} <- {_atom(eqn.inputs[0], ctx)}[...]")
    if name == "ref_swap" and not eqn.params:
        ref, value = _atom(eqn.inputs[0], ctx), _atom(eqn.inputs[1], ctx)
        if eqn.outputs[0] in used:
            out = f"{ctx.name(eqn.outputs[0])}:{_aval_str(eqn.outputs[0].aval)}"
            return text(f"{out}, {ref}[...] <- {ref}[...], {value}")
        return text(f"{ref}[...] <- {value}")
    if name == "pjit":
        body = eqn.params.get("body")
        if isinstance(body, IR) and id(body) not in ctx.shared:
            ctx.suggest(body.in_vars, eqn.inputs)
            ctx.suggest(body.outs, eqn.outputs)
    jax_name, params, inputs = _jax_view(eqn)
    lhs = _vars(eqn.outputs, ctx, shapes=True)
    scopes = f"[{eqn.source.name_stack if eqn.source is not None else ''}]" if ctx.name_stack else None
    rhs = [text(jax_name, scopes), _kv_pairs(params, ctx), cat(text(" "), _vars(inputs, ctx))]
    note = None
    if ctx.source_info:
        note = eqn.source.with_column() if eqn.source is not None else ""
    return cat(lhs, text(" = ", note), *rhs) if eqn.outputs else cat(*rhs)


def _jaxpr(ir: IR, ctx: _Context) -> tuple:
    if id(ir) in ctx.shared:
        return text(ctx.shared[id(ir)])
    return _skeleton(ir, ctx)


def _skeleton(ir: IR, ctx: _Context) -> tuple:
    consts = _vars(ir.const_vars, ctx, shapes=True)
    ins = _vars(ir.in_vars, ctx, shapes=True)
    used = {a for e in ir.eqns for a in e.inputs if isinstance(a, Var)} | {a for a in ir.outs if isinstance(a, Var)}
    eqns = join(brk("; "), [_eqn(e, ctx, used) for e in ir.eqns])
    outs = cat(text("("), _vars(ir.outs, ctx, separator=","), text(")" if len(ir.outs) != 1 else ",)"))
    return cat(group(nest(2, cat(text("{ "), text("lambda "), consts, text("; "), ins, text(". "), text("let"),
                                 nest(2, cat(brk(), eqns)), brk(), text("in "), outs))), text(" }"))


def _sub_irs(params: dict[str, Any]) -> list[IR]:
    found = []
    for v in params.values():
        if isinstance(v, IR):
            found.append(v)
        elif _is_jaxpr_tuple(v):
            found.extend(v)
    return found


def jaxpr_doc(top: IR, source_info: bool = False, name_stack: bool = False) -> tuple:
    """The document of top as JAX lays it out (jaxprs used more than once, or nested ones of more than 10
    equations, are printed first as `let name = { ... } in`)."""
    dropped: dict[Var, str] = {}
    used = {a for a in top.outs if isinstance(a, Var)}
    for eqn in reversed(top.eqns):
        for v in eqn.outputs:
            if v not in used:
                dropped[v] = "_"
        used.update(a for a in eqn.inputs if isinstance(a, Var))
    ctx = _Context(dropped)
    ctx.source_info, ctx.name_stack = source_info, name_stack
    names: dict[int, str] = {}
    counts: Counter = Counter()
    order: dict[int, IR] = {}
    queue = [top]
    while queue:
        ir = queue.pop(0)
        order.setdefault(id(ir), ir)
        counts[id(ir)] += 1
        if ir is not top and len(ir.eqns) > 10:
            counts[id(ir)] += 1
        for eqn in ir.eqns:
            name = eqn.params.get("name") if eqn.prim.name == "pjit" else None
            subs = _sub_irs(eqn.params)
            queue.extend(subs)
            if isinstance(name, str):
                for sub in subs:
                    names.setdefault(id(sub), name.strip("<>"))
    name_counts: Counter = Counter()
    shared = []
    for key, count in counts.items():
        if count == 1:
            continue
        name = names.get(key, "jaxpr")
        if name_counts[name] > 0:
            name_counts[name] += 1
            name += str(name_counts[name] - 1)
            name_counts[name] += 1
        else:
            name_counts[name] += 1
        ctx.shared_names.add(name)
        ctx.shared[key] = name
        shared.append((name, order[key]))
    docs = [cat(text("let "), text(name), text(" = "), _skeleton(ir, ctx), text(" in"), brk())
            for name, ir in shared]
    docs.append(_jaxpr(top, ctx))
    return cat(*docs)


def eqn_text(eqn: Any, width: int = 80) -> str:
    """One equation as JAX prints it: its variables named in the order they appear."""
    return format_doc(_eqn(eqn, _Context({}), set(eqn.outputs)), width)


def jaxpr_text(ir: IR, width: int = 80, source_info: bool = False, name_stack: bool = False) -> str:
    """ir printed as jax.make_jaxpr's result prints (with source_info, each equation's source line; with
    name_stack, its named scopes)."""
    return format_doc(jaxpr_doc(ir, source_info, name_stack), width)


class ClosedJaxpr(IR):
    """What ember's make_jaxpr returns: an IR (all its attributes and uses) whose str() and repr() are JAX's
    printed jaxpr."""
    __slots__ = ()

    def __str__(self) -> str:
        return jaxpr_text(self)

    __repr__ = __str__

    def pretty_print(self, *, source_info: bool = False, name_stack: bool = False, width: int = 80,
                     **unused: Any) -> str:
        """The jaxpr as JAX prints it; with source_info, each equation's source (file:line:column (function)), and
        with name_stack its named scopes ([outer/inner]), at the end of its line, aligned."""
        return jaxpr_text(self, width, source_info, name_stack)


JAX_PRINTERS.update(jaxpr=jaxpr_text, eqn=eqn_text)
