"""ember's global options (`ember.config`): one table of named options, each with a default, a parser, its
environment variables and a docstring. JAX's option names are accepted with or without the `jax_` prefix, so
`ember.config.update("jax_enable_x64", True)` and `ember.config.update("enable_x64", True)` are the same.

Values are read where they matter (`config.enable_x64` when a Python scalar gets its dtype, the cache sizes when a
cache stores an entry); `update` checks the value and runs the option's change hooks (e.g. trimming a cache)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ember._core import config_jax


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"ember.config: option {name!r} takes a boolean, got the string {value!r}")
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"ember.config: option {name!r} takes a boolean, got {value!r} of type {type(value).__name__}")


def _parse_path(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"ember.config: option {name!r} takes a directory path (or None), got {value!r}")
    return value


def _parse_seconds(name: str, value: Any) -> float:
    try:
        seconds = float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
    except ValueError:
        seconds = None
    if seconds is None or not seconds >= 0:
        raise ValueError(f"ember.config: option {name!r} takes a number of seconds >= 0, got {value!r}")
    return seconds


def _int_at_least(name: str, value: Any, minimum: int, what: str) -> int:
    """value (an int, or a string of one) if it is at least minimum, else a ValueError saying what it takes."""
    try:
        size = int(value) if isinstance(value, str) else value
    except ValueError:
        size = value
    if isinstance(size, bool) or not isinstance(size, int) or size < minimum:
        raise ValueError(f"ember.config: option {name!r} takes {what}, got {value!r}")
    return size


def _choice(*choices: str | None) -> Callable[[str, Any], str | None]:
    """A parser for an option taking one of these strings (or None, when it is among them)."""
    def parse(name: str, value: Any) -> str | None:
        if value not in choices or (value is not None and not isinstance(value, str)):
            raise ValueError(f"ember.config: option {name!r} takes one of {', '.join(map(repr, choices))}, got "
                             f"{value!r}")
        return value
    return parse


_GUARD_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")


def _parse_bytes(name: str, value: Any) -> int:
    return _int_at_least(name, value, -1, "a number of bytes (or -1: no limit)")


def _parse_size(name: str, value: Any) -> int:
    return _int_at_least(name, value, 1, "a positive integer")


@dataclass
class Option:
    name: str
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str
    env: tuple[str, ...] = ()
    hooks: list[Callable[[Any], None]] = field(default_factory=list)


OPTIONS: dict[str, Option] = {}


def _option(name: str, default: Any, parse: Callable[[str, Any], Any], doc: str, env: tuple[str, ...] = ()) -> None:
    OPTIONS[name] = Option(name, default, parse, doc, (f"EMBER_{name.upper()}",) + env)


_option("enable_x64", False, _parse_bool,
        "64-bit mode: 64-bit values and dtypes are kept, and Python scalars, Python lists and default dtypes "
        "(zeros, arange, ...) are 64-bit (float64, int64). Without it (JAX's default) everything is 32-bit: "
        "float64/int64 numpy values become float32/int32 where they enter ember, and a 64-bit dtype asked for "
        "gives the 32-bit one with a warning.", env=("JAX_ENABLE_X64",))
_option("debug_nans", False, _parse_bool,
        "Raise FloatingPointError at the first primitive that produces a NaN, naming it and its source line "
        "(a jitted function whose result has a NaN is re-run one primitive at a time to find it).",
        env=("JAX_DEBUG_NANS",))
_option("debug_infs", False, _parse_bool, "As debug_nans, for infinities.", env=("JAX_DEBUG_INFS",))
_option("explain_cache_misses", False, _parse_bool,
        "Log (logger 'ember', level WARNING) why each jitted function compiles again: which argument changed and "
        "how (shape, dtype, weak type, pytree structure, static value) or that the function object is new, with "
        "the call site.", env=("JAX_EXPLAIN_CACHE_MISSES",))
_option("log_compiles", False, _parse_bool,
        "Log (logger 'ember', level WARNING) every program compiled for a jitted function, with its signature.",
        env=("JAX_LOG_COMPILES",))
_option("check_tracer_leaks", False, _parse_bool,
        "When a staging (jit, grad, vmap, ...) ends, raise UnexpectedTracerError if one of its tracers is still "
        "referenced (leaked into a global or an object), naming the operation and user line that made it (as "
        "jax_check_tracer_leaks; it runs the garbage collector after each staging: slow, for debugging).",
        env=("JAX_CHECK_TRACER_LEAKS",))
_option("numpy_dtype_promotion", "standard", _choice("standard", "strict"),
        "'standard': ember.numpy promotes mixed dtypes on JAX's lattice; 'strict': only Python scalars join an "
        "array (of their kind or above), other mixed dtypes raise TypePromotionError (as "
        "jax_numpy_dtype_promotion). Read when an operation is staged.", env=("JAX_NUMPY_DTYPE_PROMOTION",))
_option("numpy_rank_promotion", "allow", _choice("allow", "warn", "raise"),
        "Implicit rank promotion in ember.numpy's elementwise operations (an array of shape (3,) broadcast with "
        "one of shape (2, 3); scalars are not counted): 'allow', 'warn' (a UserWarning) or 'raise' (ValueError), "
        "as jax_numpy_rank_promotion. Read when an operation is staged.", env=("JAX_NUMPY_RANK_PROMOTION",))
_option("default_matmul_precision", None,
        _choice(None, "default", "high", "highest", "bfloat16", "bfloat16_3x", "tensorfloat32", "float32", "fastest",
                # the names of lax.DotAlgorithmPreset's members, as jax_default_matmul_precision takes them
                "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
                "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16", "BF16_BF16_F32",
                "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3",
                "F32_F32_F32", "F64_F64_F64"),
        "The precision of dots and convolutions whose precision argument is None (as jax_default_matmul_precision; "
        "None: XLA's default): a level goes into the programs' precision_config, which accelerators read (the CPU "
        "computes in the operands' dtype at every level); a lax.DotAlgorithmPreset's name is that algorithm. Read "
        "when an operation is staged.",
        env=("JAX_DEFAULT_MATMUL_PRECISION",))
_option("allow_f16_reductions", True, _parse_bool,
        "Off, lax.reduce_sum of float16 or bfloat16 values raises ValueError (as jax_allow_f16_reductions; "
        "ember.numpy's sum and mean accumulate in float32 and are not affected).", env=("JAX_ALLOW_F16_REDUCTIONS",))
_option("enable_checks", False, _parse_bool,
        "Check ember's own invariants as it works (as jax_enable_checks): every IR that jit and the "
        "transformations stage or derive is type-checked (ember.check_ir) before it is lowered; slow, for "
        "debugging ember and custom rules.", env=("JAX_ENABLE_CHECKS",))
_option("transfer_guard", "allow", _choice(None, *_GUARD_LEVELS),
        "The level of the three transfer guards below when they are not set (as jax_transfer_guard): 'allow'; "
        "'log' (log implicit transfers, logger 'ember', level WARNING); 'disallow' (implicit transfers raise "
        "JaxRuntimeError); 'log_explicit' and 'disallow_explicit' (explicit ones too: device_put, device_get); None "
        "(JAX's default) is 'allow'.",
        env=("JAX_TRANSFER_GUARD",))
for _kind, _what in (("host_to_device", "host values (numpy arrays, Python scalars) given to a jitted function or "
                      "an operation as arguments (implicit), device_put of a host value (explicit)"),
                     ("device_to_host", "np.asarray, float(), int(), bool(), item(), tolist() of an Array "
                      "(implicit), device_get (explicit); printing an Array is not guarded"),
                     ("device_to_device", "device_put of an Array on another device (explicit), the constants of "
                      "a program copied to the device it runs on (implicit)")):
    _option(f"transfer_guard_{_kind}", None, _choice(None, *_GUARD_LEVELS),
            f"The transfer guard of {_kind.replace('_', '-')} transfers: {_what}; None: transfer_guard's level.",
            env=(f"JAX_TRANSFER_GUARD_{_kind.upper()}",))
del _kind, _what
_option("no_tracing", False, _parse_bool,
        "Tracing a jitted function raises RuntimeError (as jax_no_tracing): to check that a loop reuses its "
        "compiled programs.", env=("JAX_NO_TRACING",))
_option("no_execution", False, _parse_bool,
        "Running a compiled program (a jitted function, or an operation outside jit) raises RuntimeError (as "
        "jax_no_execution).", env=("JAX_NO_EXECUTION",))
_option("disable_jit", False, _parse_bool,
        "jit-decorated functions run their Python body one primitive at a time (for debugging with print and pdb).",
        env=("JAX_DISABLE_JIT",))
_option("use_lapack", True, _parse_bool,
        "Lower linear algebra to ember's LAPACK kernels (XLA FFI custom calls; needs scipy and ember's _lapack "
        "extension); off, it lowers to XLA's own ops where they exist (cholesky, triangular_solve) and the other "
        "factorisations raise. Read when a program is lowered: programs already compiled keep their kernels.")
_option("cpu_backend_forms", True, _parse_bool,
        "On the CPU backend, float32 sums and products with several dimensions in one role are lowered in the "
        "forms its XLA runs fastest (a matrix-vector product for trailing axes, two stages for leading axes, "
        "merged dimensions; docs/performance.md). Off, they are written as one stablehlo.reduce / dot_general. "
        "Read when a program is lowered.")
_option("num_cpu_devices", 1, _parse_size,
        "How many devices the CPU backend has (as jax_num_cpu_devices; JAX's default is one too). Read when the "
        "CPU backend starts, at the first computation (or ember.devices()): update it before; a later change "
        "raises RuntimeError. When neither config.update nor a variable of its own (read at import, as JAX "
        "reads JAX_NUM_CPU_DEVICES) gave it, JAX's XLA_FLAGS=--xla_force_host_platform_device_count=N sets it, "
        "read when the backend starts: a program may set XLA_FLAGS after `import ember`, as after `import jax`. "
        "Once the backend has started, the option reads the count it started with.",
        env=("JAX_NUM_CPU_DEVICES",))
_option("eager_cache_size", 1024, _parse_size,
        "How many one-primitive executables (operations run outside jit) are kept, least recently used dropped.")
_option("max_compiled_equations", 20000, _parse_size,
        "Outside jit, a transformation (grad, value_and_grad, vjp, jvp, vmap, the Jacobians) compiles its program "
        "when it has at most this many equations and runs it one primitive at a time (as JAX's transformations "
        "outside jit do) when it has more: XLA's compile time grows faster than the program (a grad over 32000 "
        "parameters compiled for 3.5 minutes), running op by op stays linear. jit always compiles.")
_option("while_grad_memory", 64 << 20, _parse_size,
        "The memory, in bytes, reverse-mode differentiation of a while_loop may use for the carries it saves (two "
        "buffers of K carries, K between 8 and 1024; docs/while_grad.md). Read when the gradient is staged.")
_option("jit_cache_size", 256, _parse_size,
        "How many compiled signatures (shapes, dtypes, static arguments) each jitted or transformed function keeps.")
_option("program_cache_size", 128, _parse_size,
        "How many programs are kept process-wide by what they compute (not by the function that staged them), "
        "least recently used dropped: executables by their StableHLO text, lowerings and transformed IRs by the "
        "structure of the IR, so that a new function (a fresh closure per step) staging out to a program seen "
        "before reuses its executable.")
_option("compilation_cache_dir", None, _parse_path,
        "A directory for the persistent compilation cache (as jax_compilation_cache_dir): compiled programs are "
        "stored there and loaded by later processes instead of compiled again. Off (None) by default.",
        env=("JAX_COMPILATION_CACHE_DIR",))
_option("persistent_cache_min_compile_time_secs", 1.0, _parse_seconds,
        "Only programs whose compile took at least this long are stored in the persistent cache (as JAX).",
        env=("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",))
_option("persistent_cache_min_entry_size_bytes", 0, _parse_bytes,
        "Only compiled programs at least this large (serialized, in bytes) are stored in the persistent cache.",
        env=("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",))
_option("compilation_cache_max_size", 1 << 30, _parse_bytes,
        "The persistent cache's size limit in bytes (-1: none); least recently used entries are removed first.",
        env=("JAX_COMPILATION_CACHE_MAX_SIZE",))


config_jax.declare(_option, _parse_bool)  # (JAX's other options: ember/_core/config_jax.py)


class State:
    """An option as a context manager and a value, as JAX's top-level flags (jax.debug_nans, jax.enable_x64, ...):
    `with ember.debug_nans(True): ...` sets it for the block; `ember.debug_nans.value` reads it."""

    def __init__(self, name: str):
        self.name = name

    @property
    def value(self) -> Any:
        return config.read(self.name)

    def __call__(self, new_val: Any = True) -> Any:
        return config.override(**{self.name: new_val})

    def __bool__(self) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"State({self.name}={self.value!r})"


def canonical_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"ember.config: option names are strings, got {name!r}")
    key = name[4:] if name.startswith("jax_") else name
    if key not in OPTIONS:
        known = ", ".join(sorted(OPTIONS))
        raise AttributeError(f"ember.config: unrecognized option {name!r}; known options: {known} "
                             "(each also accepted with a 'jax_' prefix)")
    return key


def _from_xla_flags(option: Option, value: Any) -> Any:
    """num_cpu_devices from JAX's way of asking for CPU devices, `XLA_FLAGS=--xla_force_host_platform_device_count=N`
    (which the plugin itself ignores), as $XLA_FLAGS says now (the last such flag wins, as in XLA); value when it
    does not say, or for another option."""
    if option.name != "num_cpu_devices":
        return value
    for flag in os.environ.get("XLA_FLAGS", "").split():
        if flag.startswith("--xla_force_host_platform_device_count="):
            value = option.parse(f"{option.name} (from $XLA_FLAGS {flag})", flag.split("=", 1)[1])
    return value


class Config:
    """The option values. Attribute reads (`config.enable_x64`, `config.jax_enable_x64`) and `read(name)` give the
    current value; `update(name, value)` sets one."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        # the options given a value (a variable of their own at import, or update), rather than left at the default
        self._given: set[str] = set()
        self._lock = threading.Lock()
        for option in OPTIONS.values():
            value = option.default
            for var in option.env:
                if var in os.environ:
                    value = option.parse(f"{option.name} (from ${var})", os.environ[var])
                    self._given.add(option.name)
                    break
            self._values[option.name] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._values[canonical_name(name)]

    def read(self, name: str) -> Any:
        return self._values[canonical_name(name)]

    def read_canonical(self, key: str) -> Any:
        """read for a canonical option name (no "jax_" prefix), without checking it: for hot paths."""
        return self._values[key]

    def update(self, name: str, value: Any) -> None:
        key = canonical_name(name)
        option = OPTIONS[key]
        parsed = option.parse(name, value)
        with self._lock:
            old, self._values[key] = self._values[key], parsed
        try:
            for hook in option.hooks:
                hook(parsed)
        except BaseException:  # a hook refused the value (e.g. too late to change it): keep the old one
            with self._lock:
                self._values[key] = old
            raise
        with self._lock:
            self._given.add(key)

    def read_at_backend_start(self, name: str) -> Any:
        """The option's value for a backend starting now, stored so that later reads agree: the value given
        (update, or a variable of the option's own at import) if any, else what $XLA_FLAGS says now, else the
        default. JAX's CPU client reads --xla_force_host_platform_device_count when it is created, not when jax is
        imported: a program (a notebook) may set XLA_FLAGS after `import ember`, before its first computation."""
        key = canonical_name(name)
        with self._lock:
            if key not in self._given:
                self._values[key] = _from_xla_flags(OPTIONS[key], OPTIONS[key].default)
            return self._values[key]

    @contextlib.contextmanager
    def override(self, **values: Any) -> Iterator[None]:
        """Set options for the duration of a with-block: `with config.override(debug_nans=True): ...`."""
        old = {canonical_name(name): self.read(name) for name in values}
        try:
            for name, value in values.items():
                self.update(name, value)
            yield
        finally:
            for name, value in old.items():
                self.update(name, value)

    def on_change(self, name: str, hook: Callable[[Any], None]) -> None:
        """Call hook(new_value) whenever the option is updated (used by the layers above, e.g. to trim a cache)."""
        OPTIONS[canonical_name(name)].hooks.append(hook)

    def parse_flags_with_absl(self, argv: Sequence[str] | None = None) -> None:
        """Set options from `--jax_<option>=value` (and `--jax_<bool option>`, `--nojax_<bool option>`) command-line
        flags, as JAX's parse_flags_with_absl does (absl itself is not needed: the flags are read from argv,
        sys.argv by default); other arguments are left alone."""
        for arg in sys.argv[1:] if argv is None else argv:
            if not arg.startswith(("--jax_", "--nojax_")):
                continue
            name, has_value, value = arg[2:].partition("=")
            negated = name.startswith("no")
            key = canonical_name(name[2:] if negated else name)
            if not has_value:
                if not isinstance(OPTIONS[key].default, bool):
                    raise ValueError(f"ember.config: flag {arg!r} needs a value (--{name}=...)")
                value = not negated
            self.update(key, value)

    def config_with_absl(self) -> None:
        """JAX's entry point for absl programs (it defines JAX's absl flags): here, the options are read from
        `--jax_*` command-line flags (parse_flags_with_absl)."""
        self.parse_flags_with_absl()

    def complete_absl_config(self, absl_flags: Any) -> None:
        """Take the values of `jax_*` flags an absl flags module parsed (JAX's complete_absl_config): each flag that
        names an option of ember's and was given on the command line updates it."""
        holder = getattr(absl_flags, "FLAGS", absl_flags)
        for key in OPTIONS:
            try:
                flag = holder[f"jax_{key}"]
            except (KeyError, TypeError, AttributeError):
                continue
            if getattr(flag, "present", False):
                self.update(key, flag.value)

    def describe(self) -> str:
        return "\n".join(f"{o.name} = {self._values[o.name]!r}: {o.doc} (environment: {', '.join(o.env)})"
                         for o in OPTIONS.values())

    def __repr__(self) -> str:
        return "ember.config(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


config = Config()


def _set_logging_level(level: str | None) -> None:
    logging.getLogger("ember").setLevel(logging.NOTSET if level in (None, "NOTSET") else level)


def _set_debug_log_modules(names: str) -> None:
    for name in filter(None, (n.strip() for n in names.split(","))):
        logging.getLogger("ember" + name[3:] if name == "jax" or name.startswith("jax.") else name).setLevel(
            logging.DEBUG)


config.on_change("logging_level", _set_logging_level)
config.on_change("debug_log_modules", _set_debug_log_modules)
if config.read("logging_level") not in (None, "NOTSET"):
    _set_logging_level(config.read("logging_level"))
if config.read("debug_log_modules"):
    _set_debug_log_modules(config.read("debug_log_modules"))
