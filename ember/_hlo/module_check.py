"""Checking a StableHLO module text that came from outside (an exported artifact, ember.export.deserialize) before
anything compiles or runs it: it must be a module as ember's own lowering writes one, so that splicing it into a
program cannot run anything ember itself would not.

check_module(text) parses the text with a strict grammar of what ember/_hlo/emitter.py writes (MLIR's generic op
form, one module of func.func functions, regions, attribute dictionaries, `loc(...)` locations) and refuses, with a
ModuleError saying what and where (line:column):

  - anything outside that grammar: attribute or type aliases, dialect resources, comments, `!` types, block
    successors, symbol references other than func.call's callee and stablehlo.composite's decomposition (which
    must name a function of the module itself: a spliced module cannot call the functions of the program it is
    spliced into), functions calling each other in a cycle (which crashed XLA), nesting deeper than MAX_NESTING;
  - an op ember never emits (OPS: the ops ember's lowering rules write, found by grepping the lowering code for
    `ctx.op("stablehlo.` and the emitter's ops, and the families' op names), or an attribute name ember never
    writes (ATTRIBUTES);
  - a custom call to a target other than ember's own FFI kernels (the LAPACK kernels ember_lapack_*, the row
    kernels ember_rows, ember_rows_bmm and ember_rows_transpose, the sort kernels ember_sort and ember_sort_top_k,
    the transcendentals kernel ember_elementwise: never ember_callback, since host callbacks are not serialized)
    and the XLA targets ember's lowering writes (Qr, ProductOfElementaryHouseholderReflectors, Eigh; Sharding,
    SPMDFullToShardShape, SPMDShardToFullShape of a one-device shard_map); and a custom call whose operand and
    result types, attributes and layouts are not related as ember's lowering relates them for that target
    (ember/_prims/linalg.py, ember/_hlo/row_fusion.py, ember/_hlo/backend_forms.py, ember/_prims/sorting.py): the
    kernels would otherwise trust sizes the artifact chose (they check again at run time: ember/_runtime/_lapack.c,
    _rows.c, _sort.c, _vmath.c);
  - tensor types of element types ember does not have, of rank above MAX_RANK, dimensions above MAX_DIM or more
    than MAX_BYTES bytes; collectives naming a device other than 0 (an exported program runs on one device);
  - a module whose @main is missing, not public, or has other functions public, or other attributes than
    ember's single-device module has.

It returns the module's facts the caller checks further (Module: @main's argument and result types, the custom-call
targets used). The parse is linear in the text; a large constant (`dense<...>`) is one token."""
from __future__ import annotations

import functools
import math
import re
from typing import Any, NamedTuple

from ember._core import dtypes as dt
from ember._hlo.backend_forms import ELEMENTWISE_OPS
from ember._hlo.lower import CALLBACK_TARGET

MAX_NESTING = 64  # regions in regions, brackets in attributes
MAX_RANK = 64
MAX_DIM = 2**31 - 1  # (the kernels' LAPACK int)
MAX_BYTES = 2**40  # one tensor of the module at most (a tebibyte)

# The ops ember's lowering emits (grep `ctx.op("`, `emitter.op(`, `op(f"stablehlo.{...}"` and the elementwise
# families' names in ember/_prims, ember/_control, ember/_hlo; tests/reliability/test_export_trust.py checks the
# literal ones against the source). stablehlo.return ends regions; func.func and func.return are written in their
# custom form (the grammar below), func.call in the generic one. (create_token and after_all make and take
# !stablehlo.token values, a type the grammar refuses: a program with tokens is not deserialized.)
OPS = frozenset("stablehlo." + name for name in """
    abs add after_all all_gather all_reduce all_to_all and atan2 bitcast_convert broadcast_in_dim case cbrt ceil
    cholesky clamp collective_permute compare complex composite concatenate constant convert convolution cosine
    count_leading_zeros create_token custom_call divide dot_general dynamic_slice dynamic_update_slice exponential
    exponential_minus_one fft floor gather imag iota is_finite log log_plus_one logistic maximum minimum multiply
    negate not optimization_barrier or pad partition_id popcnt power real reduce reduce_precision reduce_scatter
    reduce_window remainder reshape return reverse rng rng_bit_generator round_nearest_afz round_nearest_even rsqrt
    scatter select select_and_scatter shift_left shift_right_arithmetic shift_right_logical sign sine slice sort sqrt
    subtract tan tanh transpose triangular_solve while xor""".split()) | frozenset("chlo." + name for name in """
    acos acosh asin asinh atan atanh bessel_i1e cosh digamma erf erf_inv erfc lgamma next_after polygamma sinh
    zeta""".split()) | {"func.call"}

# The attribute names ember writes on ops (the same sources).
ATTRIBUTES = frozenset("""
    algorithm all_gather_dim api_version backend_config base_dilations batch_group_count broadcast_dimensions
    call_target_name callee channel_handle compare_type comparison_direction composite_attributes concat_dimension
    decomposition dimension dimension_numbers dimensions dot_dimension_numbers edge_padding_high edge_padding_low
    exponent_bits feature_group_count fft_length fft_type has_side_effect indices_are_sorted interior_padding
    iota_dimension is_stable left_side lhs_dilation limit_indices lower mantissa_bits mhlo.sharding name
    operand_layouts padding permutation precision_config replica_groups result_layouts rhs_dilation rng_algorithm
    rng_distribution
    scatter_dimension scatter_dimension_numbers slice_sizes source_target_pairs split_count split_dimension
    start_indices strides transpose_a unique_indices unit_diagonal use_global_device_ids value version
    window_dilations window_dimensions window_strides""".split())

# ember's own FFI kernels (api_version 4): target -> the backend_config attributes ember's lowering gives it
LAPACK = {"ember_lapack_potrf": {"lower"}, "ember_lapack_getrf": set(), "ember_lapack_geqrf": set(),
          "ember_lapack_orgqr": set(), "ember_lapack_syevd": {"lower"}, "ember_lapack_gesdd": {"job"},
          "ember_lapack_trsm": {"left_side", "lower", "transpose_a", "unit_diagonal"},
          "ember_lapack_geev": {"compute_left", "compute_right"}, "ember_lapack_gees": {"vectors"}}
ROWS = {"ember_rows": {"rows", "row"}, "ember_rows_bmm": {"batch", "m", "n", "k", "trans_a", "trans_b"},
        "ember_rows_transpose": {"batch", "m", "n"}}
SORT = {"ember_sort": {"num_keys", "positions"}, "ember_sort_top_k": {"k"}}
ELEMENTWISE = {"ember_elementwise": {"op"}}
FFI_TARGETS = {**LAPACK, **ROWS, **SORT, **ELEMENTWISE}
ELEMENTWISE_OP_CODES = len(ELEMENTWISE_OPS)  # the transcendentals kernel's functions: op in [0, 11) (_vmath.c)
XLA_TARGETS = frozenset({"Qr", "ProductOfElementaryHouseholderReflectors", "Eigh", "Sharding",
                         "SPMDFullToShardShape", "SPMDShardToFullShape"})
MAX_ROW_LENGTH = 1 << 20  # the row kernel's longest row (ember/_runtime/_rows.c)

_ELEMENTS = {row.mlir: row.dtype for row in dt.DTYPE_TABLE}
_MATRIX = {"f32", "f64", "complex<f32>", "complex<f64>"}
_REAL_OF = {"f32": "f32", "f64": "f64", "complex<f32>": "f32", "complex<f64>": "f64"}
_COMPLEX_OF = {"f32": "complex<f32>", "f64": "complex<f64>", "complex<f32>": "complex<f32>",
               "complex<f64>": "complex<f64>"}


class ModuleError(ValueError):
    """The module text is not one ember would have written (what and where)."""


class TensorType(NamedTuple):
    shape: tuple[int, ...]
    element: str  # the MLIR element type ("f32", "complex<f64>", "index" in layouts)

    def __str__(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.element + ">"


class Op(NamedTuple):
    name: str
    operands: tuple[TensorType, ...]
    results: tuple[TensorType, ...]
    attrs: dict[str, Any]


class Function(NamedTuple):
    name: str
    public: bool
    args: tuple[TensorType, ...]
    results: tuple[TensorType, ...]


class Module(NamedTuple):
    """The facts of a checked module: its functions (@main among them) and the custom-call targets it uses."""
    functions: dict[str, Function]
    targets: frozenset[str]

    @property
    def main(self) -> Function:
        return self.functions["main"]


# ---------------------------------------------------------------------------------------------------------------
# Tokens
# One token after optional whitespace: the alternatives below, or any other single character (an error, found
# by _kind). A token's kind is known from its text (_kind): tokens are plain strings, for speed.
_TOKEN = re.compile(r"""
    [ \t\r\n]*
    ( [(){}\[\]<>,:=]                                          # punctuation
    | %[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?                          # a value
    | tensor<(?:[0-9]+x)*(?:complex<f(?:32|64)>|[a-z0-9]+)>     # a tensor type
    | dense<[\[\]\s,()0-9A-Za-z.+\-]*>                          # a dense literal (numbers, lists)
    | [A-Za-z_][A-Za-z0-9_$.]*                                  # a name
    | "(?:[^"\\\n]|\\(?:[\\"nt]|[0-9A-Fa-f]{2}))*"                # a string
    | ->                                                        # an arrow
    | -?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+\-]?[0-9]+)?)  # a number
    | @[A-Za-z_][A-Za-z0-9_$.\-]*                               # a symbol
    | \#[A-Za-z_][A-Za-z0-9_$.]*                                # a dialect attribute
    | \^[A-Za-z0-9_$.\-]+                                       # a block
    | [^ \t\r\n]                                                # anything else (an error)
    )""", re.X)
_TYPE = re.compile(r"tensor<((?:[0-9]+x)*)(complex<f(?:32|64)>|[a-z0-9]+)>")
_FUNC = re.compile(r"^  func\.func (public|private) @([\w$.-]+)\(", re.M)  # (exported.py splits the text there)
_ESCAPE = re.compile(r"\\(?:([\\\"])|(n)|(t)|([0-9A-Fa-f]{2}))")
_PUNCT = frozenset("(){}[]<>,:=")
_FIRST = {"%": "value", "@": "symbol", "#": "hash", "^": "block", '"': "string"}


def _kind(token: str) -> str:
    """The kind of a token (see _TOKEN): punct, value, type, dense, id, string, arrow, number, symbol, hash,
    block, end (""), or bad (a character no token starts with)."""
    if len(token) <= 1:
        if not token:
            return "end"
        return ("punct" if token in _PUNCT else "number" if token.isdigit() else
                "id" if token.isascii() and (token.isalpha() or token == "_") else "bad")
    first = token[0]
    if first in _FIRST:
        return _FIRST[first]
    if first == "-":
        return "arrow" if token == "->" else "number"
    if first.isdigit():
        return "number"
    if token.startswith("tensor<"):
        return "type"
    if token.startswith("dense<"):
        return "dense"
    return "id"


def _tokens(text: str) -> list[str]:
    tokens = _TOKEN.findall(text)
    tokens.append("")  # (the end)
    return tokens


def _position(text: str, index: int) -> int:
    """Where the index-th token starts (for messages: a second pass over the text)."""
    for i, m in enumerate(_TOKEN.finditer(text)):
        if i == index:
            return m.start(1)
    return len(text)


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def _unescape(token: str) -> str:
    def one(m: re.Match) -> str:
        if m.group(1):
            return m.group(1)
        if m.group(2):
            return "\n"
        if m.group(3):
            return "\t"
        return chr(int(m.group(4), 16))
    return _ESCAPE.sub(one, token[1:-1])


@functools.lru_cache(maxsize=4096)
def tensor_type(text: str) -> TensorType:
    """A tensor type's shape and element type, checked (ModuleError when ember has no such type)."""
    m = _TYPE.fullmatch(text)
    if m is None:
        raise ModuleError(f"{text} is not a tensor type ember writes")
    shape = tuple(int(d) for d in m.group(1).split("x")[:-1])
    element = m.group(2)
    if element not in _ELEMENTS and element != "index":
        raise ModuleError(f"{text}: element type {element} is not one of ember's")
    if len(shape) > MAX_RANK or any(d > MAX_DIM for d in shape):
        raise ModuleError(f"{text}: more than {MAX_RANK} dimensions, or a dimension above {MAX_DIM}")
    itemsize = _ELEMENTS[element].itemsize if element in _ELEMENTS else 8
    if math.prod(shape) * itemsize > MAX_BYTES:
        raise ModuleError(f"{text}: more than {MAX_BYTES} bytes")
    return TensorType(shape, element)


def _dense_depth_ok(body: str) -> bool:
    """The brackets and parentheses of a dense literal balance, at most MAX_NESTING deep."""
    s = "".join(re.findall(r"[\[\]()]+", body))
    for _ in range(MAX_NESTING + 1):
        if not s:
            return True
        t = s.replace("[]", "").replace("()", "")
        if t == s:
            return False
        s = t
    return not s


# ---------------------------------------------------------------------------------------------------------------
# Attribute values, as far as the checks read them
class Dense(NamedTuple):
    body: str  # between dense< and >
    type: TensorType

    def ints(self) -> list[int]:
        """The elements of an integer literal (ModuleError otherwise)."""
        words = [w for w in re.split(r"[\[\]\s,]+", self.body) if w]
        if not all(re.fullmatch(r"-?[0-9]+", w) for w in words):
            raise ModuleError(f"dense<{self.body[:40]}> is not a list of integers")
        return [int(w) for w in words]


class Int(NamedTuple):
    value: int
    type: str | None


class Opaque(NamedTuple):
    """Any other attribute value (its text, for messages)."""
    text: str


class _Parser:
    def __init__(self, text: str, partitions: int = 1):
        self.text, self.partitions = text, partitions
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0
        self.ops: list[tuple[Op, int]] = []  # (op, the index of its name's token)
        self.callees: list[tuple[str, str, int]] = []  # (caller, callee, token index)
        self.function_name = ""
        for i, token in enumerate(self.tokens):
            if len(token) == 1 and _kind(token) == "bad":
                raise self.error(f"unexpected {token!r} (not StableHLO as ember writes it)", i)

    def where(self, index: int) -> str:
        """"line L:C" of the index-th token."""
        return _where(self.text, _position(self.text, index))

    # -- tokens (plain strings; "" at the end)
    def peek(self) -> str:
        return self.tokens[self.i]  # (next never moves past the end)

    def next(self) -> str:
        token = self.tokens[self.i]
        if token:
            self.i += 1
        return token

    def at(self, text: str) -> bool:
        return self.tokens[self.i] == text  # (a punctuation mark, arrow or name: no other token has its text)

    def error(self, message: str, index: int | None = None) -> ModuleError:
        return ModuleError(f"{self.where(self.i if index is None else index)}: {message}")

    def expect(self, text: str) -> str:
        token = self.next()
        if token != text:
            raise self.error(f"expected {text!r}, found {token[:40]!r}", self.i - (1 if token else 0))
        return token

    def expect_kind(self, kind: str, what: str) -> str:
        token = self.next()
        if _kind(token) != kind:
            raise self.error(f"expected {what}, found {token[:40]!r}", self.i - (1 if token else 0))
        return token

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nested more than {MAX_NESTING} deep")

    def type(self) -> TensorType:
        token = self.expect_kind("type", "a tensor type")
        try:
            found = tensor_type(token)
        except ModuleError as err:
            raise self.error(str(err), self.i - 1) from None
        if found.element == "index":
            raise self.error(f"{token} is not a value's type", self.i - 1)
        return found

    def types(self, close: str) -> list[TensorType]:
        found: list[TensorType] = []
        while not self.at(close):
            if found:
                self.expect(",")
            found.append(self.type())
        self.expect(close)
        return found

    # -- the module
    def module(self) -> dict[str, Function]:
        self.expect("module")
        self.expect_kind("symbol", "the module's name")
        self.expect("attributes")
        attrs = self.attr_dict(module=True)
        want = {"mhlo.num_partitions": Int(self.partitions, "i32"), "mhlo.num_replicas": Int(1, "i32")}
        if attrs != want:
            raise self.error(f"the module's attributes must be mhlo.num_partitions = {self.partitions} : i32, "
                             "mhlo.num_replicas = 1 : i32 (an exported program runs on "
                             f"{'one device' if self.partitions == 1 else f'its {self.partitions} devices'}), got "
                             f"{_show(attrs)}")
        self.expect("{")
        functions: dict[str, Function] = {}
        while not self.at("}"):
            function = self.function()
            if function.name in functions:
                raise self.error(f"the function @{function.name} is defined twice")
            functions[function.name] = function
        self.expect("}")
        if self.peek():
            raise self.error("text after the module")
        if [m.group(2) for m in _FUNC.finditer(self.text)] != list(functions):
            raise ModuleError("each function must start a line as ember writes it: `  func.func public|private "
                              "@name(` (ember/_control/exported.py splits the module there)")
        return functions

    def function(self) -> Function:
        self.expect("func.func")
        visibility = self.next()
        if visibility not in ("public", "private"):
            raise self.error("expected public or private", self.i - 1)
        name = self.expect_kind("symbol", "the function's name")[1:]
        self.function_name = name
        self.expect("(")
        args: list[TensorType] = []
        while not self.at(")"):
            if args:
                self.expect(",")
            self.expect_kind("value", "an argument")
            self.expect(":")
            args.append(self.type())
        self.expect(")")
        self.expect("->")
        self.expect("(")
        results = self.types(")")
        self.expect("{")
        self.nest()
        while not self.at("func.return"):
            self.op()
        self.next()
        if _kind(self.peek()) == "value":
            count = 1
            self.next()
            while self.at(","):
                self.next()
                self.expect_kind("value", "a returned value")
                count += 1
            self.expect(":")
            returned = [self.type()]
            while self.at(","):
                self.next()
                returned.append(self.type())
            if len(returned) != count:
                raise self.error("func.return's values and types differ in number")
        self.expect("}")
        self.depth -= 1
        return Function(name, visibility == "public", tuple(args), tuple(results))

    def op(self) -> None:
        if _kind(self.peek()) == "value":
            self.next()
            if self.at(":"):
                self.next()
                self.expect_kind("number", "a result count")
            self.expect("=")
        index = self.i
        token = self.next()
        if _kind(token) != "string":
            raise self.error(f"expected an op in generic form (\"dialect.op\"), found {token[:40]!r}", index)
        name = _unescape(token)
        if name not in OPS:
            raise self.error(f"the op {name} is not one ember emits", index)
        self.expect("(")
        n_operands = 0
        while not self.at(")"):
            if n_operands:
                self.expect(",")
            self.expect_kind("value", "an operand")
            n_operands += 1
        self.expect(")")
        if self.at("("):  # regions
            self.next()
            self.region()
            while self.at(","):
                self.next()
                self.region()
            self.expect(")")
        attrs: dict[str, Any] = {}
        if self.at("{"):
            attrs = self.attr_dict()
        self.expect(":")
        self.expect("(")
        operands = self.types(")")
        self.expect("->")
        if self.at("("):
            self.next()
            results = self.types(")")
        else:
            results = [self.type()]
        if len(operands) != n_operands:
            raise self.error(f"{name}: {n_operands} operands, {len(operands)} operand types", index)
        if self.at("loc"):
            self.location()
        self.ops.append((Op(name, tuple(operands), tuple(results), attrs), index))

    def region(self) -> None:
        self.expect("{")
        self.nest()
        if _kind(self.peek()) == "block":
            self.next()
            self.expect("(")
            count = 0
            while not self.at(")"):
                if count:
                    self.expect(",")
                self.expect_kind("value", "a block argument")
                self.expect(":")
                self.type()
                count += 1
            self.expect(")")
            self.expect(":")
        while not self.at("}"):
            self.op()
        self.expect("}")
        self.depth -= 1

    def location(self) -> None:
        """loc(...): strings, numbers and colons in balanced parentheses."""
        self.expect("loc")
        self.expect("(")
        self.nest()
        depth = 1
        while depth:
            token = self.next()
            if token == "(":
                depth += 1
                self.nest()
            elif token == ")":
                depth -= 1
                self.depth -= 1
            elif not (_kind(token) in ("string", "number") or token == ":"):
                raise self.error(f"a location holds {token[:40]!r} (ember writes names, files and lines)",
                                 self.i - (1 if token else 0))

    # -- attributes
    def attr_dict(self, module: bool = False) -> dict[str, Any]:
        self.expect("{")
        self.nest()
        found: dict[str, Any] = {}
        while not self.at("}"):
            if found:
                self.expect(",")
            key = self.expect_kind("id", "an attribute name")
            if not module and key not in ATTRIBUTES:
                raise self.error(f"the attribute {key} is not one ember writes", self.i - 1)
            if key in found:
                raise self.error(f"the attribute {key} is given twice", self.i - 1)
            self.expect("=")
            found[key] = self.attr_value(key)
        self.expect("}")
        self.depth -= 1
        return found

    def attr_value(self, key: str) -> Any:
        index = self.i
        text = self.next()
        kind = _kind(text)
        if kind == "string":
            return _unescape(text)
        if kind == "number":
            if self.at(":"):
                self.next()
                type_token = self.next()
                if _kind(type_token) not in ("id", "type"):
                    raise self.error("expected a type", self.i - 1)
                if type_token in ("f32", "f64") and not text.lstrip("-").startswith("0x"):
                    return Opaque(f"{float(text)} : {type_token}")  # (a composite's float attribute)
                return Int(self.integer(text, index), type_token)
            return Int(self.integer(text, index), None)
        if kind == "symbol":
            if key not in ("callee", "decomposition"):
                raise self.error(f"a symbol reference in the attribute {key} (ember writes them only as "
                                 "func.call's callee and stablehlo.composite's decomposition)", index)
            self.callees.append((self.function_name, text[1:], index))
            return text[1:]
        if kind == "dense":
            if not _dense_depth_ok(text):
                raise self.error(f"a dense literal nested more than {MAX_NESTING} deep, or unbalanced", index)
            self.expect(":")
            type_token = self.expect_kind("type", "the literal's tensor type")
            try:
                return Dense(text[len("dense<"):-1], tensor_type(type_token))
            except ModuleError as err:
                raise self.error(str(err), self.i - 1) from None
        if kind == "id" and text in ("true", "false"):
            return text == "true"
        if kind == "id" and text == "unit":
            return Opaque(text)
        if kind == "id" and text == "array":
            return Opaque(text + self.balanced("<", ">"))
        if kind == "hash" and (text == "#stablehlo" or text.startswith("#stablehlo.")):
            return Opaque(text + self.balanced("<", ">"))
        if text == "[":
            self.nest()
            items = []
            while not self.at("]"):
                if items:
                    self.expect(",")
                items.append(self.attr_value(key))
            self.expect("]")
            self.depth -= 1
            return items
        if text == "{":
            self.i -= 1
            return self.attr_dict(module=True)
        raise self.error(f"the attribute {key} has a value ember does not write ({text[:40]!r})", index)

    def integer(self, text: str, index: int) -> int:
        try:
            return int(text, 0)
        except ValueError:
            raise self.error(f"{text} is not an integer", index) from None

    def balanced(self, open_: str, close: str) -> str:
        """The text of <...> (a dialect attribute's or array's body): names, numbers, lists, arrows, nested <>."""
        self.expect(open_)
        self.nest()
        depth, parts = 1, [open_]
        while depth:
            token = self.next()
            if token == open_:
                depth += 1
                self.nest()
            elif token == close:
                depth -= 1
                self.depth -= 1
            elif _kind(token) not in ("id", "number", "punct", "arrow") or token in "{}":
                raise self.error(f"{token[:40]!r} in a dialect attribute", self.i - (1 if token else 0))
            parts.append(token)
        return " ".join(parts)


def _show(attrs: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"


# ---------------------------------------------------------------------------------------------------------------
def check_module(text: str, partitions: int = 1) -> Module:
    """Check a module text (see the module docstring); its facts, or ModuleError. partitions: the devices the
    program runs on (an export for a mesh: its size); its sharding markers must name them, each once."""
    if not isinstance(text, str):
        raise ModuleError("the module is not text")
    parser = _Parser(text, partitions)
    functions = parser.module()
    main = functions.get("main")
    if main is None or not main.public:
        raise ModuleError("the module has no public function @main")
    public = sorted(name for name, f in functions.items() if f.public and name != "main")
    if public:
        raise ModuleError(f"the module's functions other than @main must be private, @{public[0]} is public")
    calls: dict[str, set[str]] = {name: set() for name in functions}
    for caller, callee, pos in parser.callees:
        if callee not in functions:
            raise ModuleError(f"{parser.where(pos)}: func.call of @{callee}, which is not a function of the "
                              "module")
        calls[caller].add(callee)
    cycle = _cycle(calls)
    if cycle:
        raise ModuleError(f"the functions call each other in a cycle ({' -> '.join('@' + f for f in cycle)}): ember "
                          "never writes recursion, and XLA cannot compile it")
    targets = set()
    for op, index in parser.ops:
        try:
            if op.name == "stablehlo.custom_call":
                targets.add(_check_custom_call(op, partitions))
            elif op.name == "func.call" and set(op.attrs) != {"callee"}:
                raise ModuleError("func.call takes a callee only")
            elif op.name == "stablehlo.composite" and not (
                    {"name", "decomposition"} <= set(op.attrs) <= {"name", "composite_attributes", "decomposition",
                                                                   "version"}
                    and isinstance(op.attrs["name"], str) and isinstance(op.attrs.get("composite_attributes", {}),
                                                                         dict)):
                raise ModuleError("stablehlo.composite takes a name, a decomposition, and optionally "
                                  "composite_attributes and a version")
            elif op.name in _COLLECTIVES:
                _check_devices(op, partitions)
        except ModuleError as err:
            raise ModuleError(f"{parser.where(index)}: {err}") from None
    return Module(functions, frozenset(targets))


def _cycle(calls: dict[str, set[str]]) -> list[str]:
    """A cycle of the call graph (its functions, the first repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for root in calls:
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(calls[root]))]
        state[root] = 1
        while stack:
            callee = next(stack[-1], None)
            if callee is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(callee) == 1:
                return path[path.index(callee):] + [callee]
            elif not state.get(callee):
                state[callee] = 1
                path.append(callee)
                stack.append(iter(sorted(calls[callee])))
    return []


_COLLECTIVES = {"stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
                "stablehlo.collective_permute"}


def _check_devices(op: Op, partitions: int = 1) -> None:
    """A collective of an exported program names its devices only (device 0 alone for one device)."""
    for key in ("replica_groups", "source_target_pairs"):
        value = op.attrs.get(key)
        if value is None:
            continue
        if not isinstance(value, Dense) or any(not 0 <= i < partitions for i in value.ints()):
            if partitions == 1:
                raise ModuleError(f"{op.name} names devices other than 0 in {key} (an exported program runs on one "
                                  "device)")
            raise ModuleError(f"{op.name} names devices past the program's {partitions} in {key}")


# ---------------------------------------------------------------------------------------------------------------
# Custom calls: each target's operands, results, attributes and layouts, as ember's lowering relates them
def _check_custom_call(op: Op, partitions: int = 1) -> str:
    target = op.attrs.get("call_target_name")
    if not isinstance(target, str):
        raise ModuleError("a custom call without a call_target_name")
    where = f"custom_call @{target}"
    if target in FFI_TARGETS:
        keys = {"call_target_name", "api_version", "backend_config", "has_side_effect", "operand_layouts",
                "result_layouts"}
        if set(op.attrs) != keys:
            raise ModuleError(f"{where}: attributes {sorted(op.attrs)}, ember writes {sorted(keys)}")
        if op.attrs["api_version"] != Int(4, "i32") or not isinstance(op.attrs["has_side_effect"], bool):
            raise ModuleError(f"{where}: ember calls its kernels with api_version = 4 : i32")
        config = op.attrs["backend_config"]
        if (not isinstance(config, dict) or set(config) != FFI_TARGETS[target]
                or not all(isinstance(v, Int) and v.type == "i64" for v in config.values())):
            got = _show(config) if isinstance(config, dict) else config
            raise ModuleError(f"{where}: backend_config must hold the int64 attributes "
                              f"{sorted(FFI_TARGETS[target])}, got {got}")
        values = {k: v.value for k, v in config.items()}
        check = (_check_lapack if target in LAPACK else _check_sort if target in SORT
                 else _check_elementwise if target in ELEMENTWISE else _check_rows)
        problem = check(target, op, values)
    elif target in XLA_TARGETS:
        problem = _check_xla(target, op, partitions)
    elif target == CALLBACK_TARGET:
        raise ModuleError(f"{where}: a host callback (a Python function of the process that exported it: ember, "
                          "as JAX, does not serialize host callbacks)")
    else:
        raise ModuleError(f"{where}: not a target ember's lowering calls (ember's own kernels, and XLA's Qr, "
                          "ProductOfElementaryHouseholderReflectors, Eigh and sharding markers)")
    if problem:
        raise ModuleError(f"{where}: {problem} ({_signature(op)}), not as ember's lowering calls it")
    return target


def _signature(op: Op) -> str:
    return "(" + ", ".join(map(str, op.operands)) + ") -> (" + ", ".join(map(str, op.results)) + ")"


def _like(t: TensorType, element: str, batch: tuple[int, ...], *tail: int) -> bool:
    return t.element == element and t.shape == batch + tuple(tail)


def _layouts(op: Op, matrices_in: list[bool], matrices_out: list[bool]) -> str:
    """The layouts ember writes: column-major matrices (ember._hlo.ffi.column_major) where flagged, else
    row-major."""
    def expected(t: TensorType, matrix: bool) -> list[int]:
        rank = len(t.shape)
        if matrix and rank >= 2:
            return [rank - 2, rank - 1] + list(range(rank - 3, -1, -1))
        return list(range(rank - 1, -1, -1))
    for key, types, flags in (("operand_layouts", op.operands, matrices_in),
                              ("result_layouts", op.results, matrices_out)):
        layouts = op.attrs[key]
        if not isinstance(layouts, list) or len(layouts) != len(types):
            return f"{key} do not match the {len(types)} types"
        for t, flag, layout in zip(types, flags, layouts):
            if (not isinstance(layout, Dense) or layout.type.element != "index"
                    or layout.type.shape != (len(t.shape),) or layout.ints() != expected(t, flag)):
                return f"{key} are not the layouts ember's lowering gives"
    return ""


def _check_lapack(target: str, op: Op, attrs: dict[str, int]) -> str:
    """ember/_prims/linalg.py's calls (ember/_runtime/_lapack.c's kernels)."""
    routine = target[len("ember_lapack_"):]
    ins, outs = op.operands, op.results
    if not ins or len(ins[0].shape) < 2 or ins[0].element not in _MATRIX:
        return "the first operand is not a float or complex matrix (or batch of them)"
    a = ins[0]
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k, e = min(m, n), a.element
    info = TensorType(batch, "i32")
    flags = {"lower": (0, 1), "left_side": (0, 1), "transpose_a": (0, 1), "unit_diagonal": (0, 1),
             "job": (0, 1, 2), "compute_left": (0, 1), "compute_right": (0, 1), "vectors": (0, 1)}
    for key, value in attrs.items():
        if value not in flags[key]:
            return f"{key} = {value}"
    square = m == n
    if routine in ("potrf", "syevd", "geev", "gees") and not square:
        return "the matrix is not square"
    if routine == "potrf":
        want_in, want_out = [a], [a, info]
    elif routine == "getrf":
        want_in, want_out = [a], [a, TensorType(batch + (k,), "i32"), TensorType(batch + (m,), "i32"), info]
    elif routine == "geqrf":
        want_in, want_out = [a], [a, TensorType(batch + (k,), e), info]
    elif routine == "orgqr":
        if len(ins) != 2 or len(ins[1].shape) != len(a.shape) - 1:
            return "orgqr takes the reflectors and their taus"
        taus = ins[1].shape[-1]
        if not taus <= n <= m:
            return "orgqr needs rows >= columns >= taus"
        want_in, want_out = [a, TensorType(batch + (taus,), e)], [a, info]
    elif routine == "syevd":
        want_in, want_out = [a], [a, TensorType(batch + (n,), _REAL_OF[e]), info]
    elif routine == "gesdd":
        s = TensorType(batch + (k,), _REAL_OF[e])
        job = attrs["job"]
        u = TensorType(batch + (m, m if job == 2 else k), e)
        vt = TensorType(batch + (n if job == 2 else k, n), e)
        want_in, want_out = [a], [s, info] if job == 0 else [s, u, vt, info]
    elif routine == "trsm":
        if len(ins) != 2 or len(ins[1].shape) != len(a.shape):
            return "trsm takes a and b"
        b = ins[1]
        size = b.shape[-2] if attrs["left_side"] else b.shape[-1]
        want_in, want_out = [TensorType(b.shape[:-2] + (size, size), b.element), b], [b]
    elif routine == "geev":
        c = _COMPLEX_OF[e]
        vectors = [TensorType(batch + (n, n), c)] * (attrs["compute_left"] + attrs["compute_right"])
        want_in, want_out = [a], [TensorType(batch + (n,), c), *vectors, info]
    else:  # gees
        want_in, want_out = [a], [a] * (1 + attrs["vectors"]) + [info]
    if list(ins) != want_in or list(outs) != want_out:
        return "operand and result types disagree"
    matrix_out = {"potrf": [True, False], "getrf": [True, False, False, False], "geqrf": [True, False, False],
                  "orgqr": [True, False], "syevd": [True, False, False], "trsm": [True],
                  "gesdd": [False] + [True] * (len(outs) - 2) + [False],
                  "geev": [False] + [True] * (len(outs) - 2) + [False],
                  "gees": [True] * (len(outs) - 1) + [False]}[routine]
    matrix_in = [True, routine == "trsm"][:len(ins)]
    return _layouts(op, matrix_in, matrix_out)


def _check_rows(target: str, op: Op, attrs: dict[str, int]) -> str:
    """ember/_hlo/row_fusion.py's and backend_forms.py's calls (ember/_runtime/_rows.c's kernels)."""
    ins, outs = op.operands, op.results
    if target == "ember_rows":
        rows, row = attrs["rows"], attrs["row"]
        if not (0 <= rows and 1 <= row <= MAX_ROW_LENGTH) or rows * row * 4 > MAX_BYTES:
            return f"rows = {rows}, row = {row}"
        if not ins or len(ins[0].shape) != 1 or ins[0].element != "i32" or ins[0].shape[0] < 4:
            return "the first operand is not the row program (int32[k])"
        if not outs:
            return "no results"
        sizes = {rows * row, rows, row, 1}
        for t in ins[1:] + outs:
            if t.element != "f32" or math.prod(t.shape) not in sizes:
                return "an operand or result is not float32 of rows * row, rows, row or 1 elements"
        return _layouts(op, [False] * len(ins), [False] * len(outs))
    if target == "ember_rows_transpose":
        batch, m, n = attrs["batch"], attrs["m"], attrs["n"]
        element = ins[0].element if len(ins) == 1 else ""
        if (len(ins) != 1 or len(outs) != 1 or min(batch, m, n) < 1 or ins[0] != TensorType((batch, m, n), element)
                or outs[0] != TensorType((batch, n, m), element) or _ELEMENTS[element].itemsize != 4):
            return "operand and result are not [batch, m, n] -> [batch, n, m] of one 4-byte element type"
        return _layouts(op, [False], [False])
    batch, m, n, k = attrs["batch"], attrs["m"], attrs["n"], attrs["k"]
    if min(batch, m, n, k) < 1 or attrs["trans_a"] not in (0, 1) or attrs["trans_b"] not in (0, 1):
        return "batch, m, n, k must be positive, trans_a and trans_b 0 or 1"
    if (len(ins) != 2 or len(outs) != 1 or any(t.element != "f32" for t in ins + outs)
            or [math.prod(t.shape) for t in ins + outs] != [batch * m * k, batch * k * n, batch * m * n]):
        return "operands and result are not float32 [batch, m, k], [batch, k, n] -> [batch, m, n]"
    return _layouts(op, [False, False], [False])


def _check_elementwise(target: str, op: Op, attrs: dict[str, int]) -> str:
    """ember/_hlo/backend_forms.py's call (ember/_runtime/_vmath.c): one float32 operand, a result of its type, op
    a function the kernel has."""
    ins, outs = op.operands, op.results
    if not 0 <= attrs["op"] < ELEMENTWISE_OP_CODES:
        return f"op = {attrs['op']} is not a function of the kernel"
    if len(ins) != 1 or list(outs) != list(ins) or ins[0].element != "f32":
        return "needs one float32 operand and a result of its type"
    return _layouts(op, [False], [False])


# what ember/_prims/sorting.py hands the sort kernel: keys of these element types, other operands of these and complex
_SORT_KEYS = frozenset({"i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "f16", "bf16", "f32", "f64"})
_SORT_VALUES = _SORT_KEYS | {"complex<f32>", "complex<f64>"}


def _check_sort(target: str, op: Op, attrs: dict[str, int]) -> str:
    """ember/_prims/sorting.py's call (ember/_runtime/_sort.c): operands of one shape sorted along the last axis,
    num_keys of them keys; a result per operand of its type, and an integer result of the positions for each bit of
    `positions` (results after the keys), in order."""
    ins, outs = op.operands, op.results
    if target == "ember_sort_top_k":
        return _check_top_k(op, attrs["k"])
    num_keys, positions = attrs["num_keys"], attrs["positions"]
    if not 1 <= len(outs) <= 63 or not 0 <= positions < 1 << len(outs):
        return f"positions = {positions} does not name results of the 1 to 63"
    written = [k for k in range(len(outs)) if positions >> k & 1]
    if list(ins) != [t for k, t in enumerate(outs) if k not in written]:
        return "the results must be the operands' types, and the positions'"
    if not 1 <= num_keys <= len(ins) or any(k < num_keys for k in written):
        return f"num_keys = {num_keys}: the keys must be 1 to {len(ins)} operands, the positions after them"
    if not outs[0].shape or any(t.shape != outs[0].shape for t in outs):
        return "the operands must share one shape of rank 1 or more"
    if (any(t.element not in _SORT_KEYS for t in ins[:num_keys]) or any(t.element not in _SORT_VALUES for t in ins)
            or any(outs[k].element not in ("i32", "i64", "ui32", "ui64") for k in written)):
        return "an operand's element type is not one the sort kernel takes"
    return _layouts(op, [False] * len(ins), [False] * len(outs))


def _check_top_k(op: Op, k: int) -> str:
    """lax.top_k's call: x [..., n] of a key type of at most 4 bytes -> values [..., k] of its type, int32 [..., k]."""
    ins, outs = op.operands, op.results
    if len(ins) != 1 or len(outs) != 2 or not ins[0].shape or not 0 <= k <= ins[0].shape[-1]:
        return f"k = {k}: needs one operand [..., n] with k <= n, and two results"
    x = ins[0]
    want = x.shape[:-1] + (k,)
    if (x.element not in _SORT_KEYS or _ELEMENTS[x.element].itemsize > 4
            or outs != (TensorType(want, x.element), TensorType(want, "i32"))):
        return "the results must be the operand's type and int32, of its shape with k last"
    return _layouts(op, [False], [False, False])


_SHARDING = re.compile(r"\{(replicated|manual|maximal device=0"
                       r"|devices=\[[0-9,]+\]<=\[[0-9,]+\](?: last_tile_dim_replicate)?)\}")


_TILED = re.compile(r"\{devices=\[([0-9]{1,9}(?:,[0-9]{1,9}){0,16})\]([0-9]{1,9}(?:,[0-9]{1,9}){0,65535})"
                    r"( last_tile_dim_replicate| last_tile_dims=\{(?:replicated|manual)(?:, (?:replicated|manual))?\})?"
                    r"\}")


def _tiled_problem(sharding: str, partitions: int) -> str:
    """What is wrong with a sharding marker's text in a program over `partitions` devices ("" if nothing): it is
    replicated, manual, maximal on one of them, or a tile grid of exactly `partitions` tiles naming each device
    once (the forms ember's HloSharding.text writes)."""
    if sharding in ("{replicated}", "{manual}"):
        return ""
    maximal = re.fullmatch(r"\{maximal device=([0-9]{1,9})\}", sharding)
    if maximal:
        return "" if int(maximal.group(1)) < partitions else f"the sharding {sharding!r} names a device past " \
                                                               f"the program's {partitions}"
    tiled = _TILED.fullmatch(sharding)
    if tiled is None:
        return f"the sharding {sharding[:80]!r} is not one ember writes"
    dims = [int(d) for d in tiled.group(1).split(",")]
    devices = [int(d) for d in tiled.group(2).split(",")]
    if math.prod(dims) != partitions or sorted(devices) != list(range(partitions)):
        return (f"the sharding {sharding[:80]!r} is not a grid of the program's {partitions} devices, each named "
                "once")
    return ""


def _check_xla(target: str, op: Op, partitions: int = 1) -> str:
    """The XLA custom calls ember's lowering writes (its fallbacks without LAPACK, and sharding markers: a
    one-device shard_map's, or those of a program exported for a mesh of `partitions` devices)."""
    ins, outs, attrs = op.operands, op.results, op.attrs
    if target in ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"):
        sharding = attrs.get("mhlo.sharding")
        if set(attrs) != {"call_target_name", "mhlo.sharding"} or not isinstance(sharding, str):
            return "sharding markers take call_target_name and mhlo.sharding"
        if partitions > 1:
            problem = _tiled_problem(sharding, partitions)
            if problem:
                return problem
            if len(ins) != 1 or len(outs) != 1 or ins[0].element != outs[0].element or (
                    target == "Sharding" and outs[0] != ins[0]) or len(outs[0].shape) != len(ins[0].shape):
                return "a sharding marker returns its operand's element type and rank (a constraint: its type)"
            return ""
        if not _SHARDING.fullmatch(sharding):
            return f"the sharding {sharding!r} is not one of a one-device program"
        if len(ins) != 1 or list(outs) != list(ins):
            return "a one-device sharding marker returns its operand's type"
        return ""
    keys = {"call_target_name", "api_version"} | ({"backend_config"} if target == "Eigh" else set())
    if set(attrs) != keys or attrs.get("api_version") != Int(1, "i32"):
        return f"attributes {sorted(attrs)}, ember writes {sorted(keys)} with api_version = 1 : i32"
    if not ins or len(ins[0].shape) < 2 or ins[0].element not in _MATRIX:
        return "the first operand is not a float or complex matrix (or batch of them)"
    a = ins[0]
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if target == "Qr":
        ok = len(ins) == 1 and list(outs) == [a, TensorType(batch + (min(m, n),), a.element)] and 0 not in a.shape
    elif target == "ProductOfElementaryHouseholderReflectors":
        ok = (len(ins) == 2 and len(ins[1].shape) == len(a.shape) - 1 and ins[1].shape[-1] <= n <= m
              and ins[1] == TensorType(batch + ins[1].shape[-1:], a.element) and list(outs) == [a])
    else:  # Eigh: "lower,sort,max_sweeps,tol"
        config = attrs["backend_config"]
        ok = (len(ins) == 1 and m == n and 0 not in a.shape and isinstance(config, str)
              and re.fullmatch(r"[01],1,[0-9]{1,4},[0-9.eE+\-]{1,32}", config) is not None
              and list(outs) == [a, TensorType(batch + (n,), _REAL_OF[a.element])])
    return "" if ok else "operand and result types disagree"


__all__ = ["ATTRIBUTES", "CALLBACK_TARGET", "FFI_TARGETS", "MAX_BYTES", "MAX_DIM", "MAX_NESTING", "MAX_RANK",
           "Module", "ModuleError", "OPS", "TensorType", "XLA_TARGETS", "check_module", "tensor_type"]
