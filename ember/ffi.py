"""ember.ffi, as jax.ffi: call your own C functions (XLA FFI handlers) from ember programs (docs/extending.md#ffi).

    lib = ctypes.CDLL("./libkernels.so")                        # built with -I ember.ffi.include_dir()
    ember.ffi.register_ffi_target("add_one", ember.ffi.pycapsule(lib.add_one), platform="cpu")
    y = ember.ffi.ffi_call("add_one", ember.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="sequential")(x)

A handler is a typed XLA FFI handler (custom-call api_version 4): a C function of the XLA FFI call frame, written
with ember's header (include_dir(): ember/ffi.h) or XLA's C++ headers of an API the plugin takes. ember registers it
with the PJRT CPU plugin through the plugin's FFI extension; register_ffi_target first asks the handler the metadata
query XLA asks (which FFI API version it was built for) and refuses, with the versions, a handler the plugin would
drop silently (jaxlib 0.10.2's headers report API 0.3; the CPU plugin takes 0.1 to 0.2). ffi_call stages the
primitive `ffi_call` (JAX's, with JAX's params): a `stablehlo.custom_call` to the target, eagerly, under jit, under
vmap (vmap_method as JAX's), never differentiated (JAX's ValueError). ember.export refuses to export a program
calling a user's target, as JAX does without its custom-call safety check disabled, and an artifact calling one is
refused when deserialized (ember._hlo.module_check: an artifact is data, and may not name handlers).

How ember differs (each also raised with a message where it applies): handlers register for the CPU plugin only
(another platform's are accepted, as JAX accepts them, and never called); only the execute stage (the plugin's FFI
extension registers one function per target: a dict with instantiate/prepare/initialize handlers is refused), only
typed FFI handlers (api_version=0, XLA's legacy custom calls, is refused), and no custom FFI types
(register_ffi_type: nothing on ember would pass them to a handler)."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, Mapping, Sequence

from ember._control.callbacks import VMAP_METHODS
from ember._control.ffi import ffi_call_p
from ember._core import ShapedArray, Tracer, aval_of
from ember._core.dtypes import parse_dtype
from ember._hlo import ffi as _hlo_ffi
from ember._hlo.module_check import CALLBACK_TARGET, XLA_TARGETS
from ember._runtime import ffi as _ffi
from ember._runtime import pjrt as _pjrt
from ember._runtime.array import Array, asarray
from ember._runtime.layout import Layout
from ember.extend._protocol import RuleContext, Value

_STAGES = ("instantiate", "prepare", "initialize", "execute")
_lock = threading.Lock()
_kept: dict[str, Any] = {}  # CPU target name -> what the user registered (the capsules stay alive)
_other_platforms: dict[tuple[str, str], Any] = {}  # (name, platform) -> what was registered: accepted, never called
_batch_partitionable: set[str] = set()
_cpu_plugin: list[_pjrt.Plugin] = []


def include_dir() -> str:
    """The directory of ember's C header for writing FFI handlers: compile with -I include_dir() and
    `#include "ember/ffi.h"` (jax.ffi.include_dir() holds XLA's C++ headers, xla/ffi/api/ffi.h, instead)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


# (function objects of ember's own: ctypes.pythonapi.PyCapsule_New is shared, and jax.ffi.pycapsule sets its argtypes)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(  # (the name's address: compared by pointer)
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _address(funcptr: Any, where: str) -> int:
    if isinstance(funcptr, ctypes._CFuncPtr):  # (a function of a ctypes library, or a CFUNCTYPE)
        address = ctypes.cast(funcptr, ctypes.c_void_p).value
    elif isinstance(funcptr, ctypes.c_void_p):
        address = funcptr.value
    elif isinstance(funcptr, int) and not isinstance(funcptr, bool):
        address = funcptr
    else:
        raise TypeError(f"{where}: expected a ctypes function pointer (a function of a library loaded with "
                        f"ctypes.CDLL), a ctypes.c_void_p or an address, got {type(funcptr).__name__}")
    if not address or not 0 < address < 2**64:
        raise ValueError(f"{where}: the function pointer is null or not an address ({address!r})")
    return int(address)


def pycapsule(funcptr: Any) -> Any:
    """Wrap a function pointer (a ctypes function of a library loaded with ctypes.CDLL, a c_void_p, or an address)
    in a PyCapsule, as register_ffi_target takes a handler."""
    return _capsule_new(_address(funcptr, "pycapsule"), None, None)


def _capsule_address(capsule: Any, name: str) -> int:
    """The address a PyCapsule holds (TypeError for anything else: never a crash)."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"register_ffi_target: the handler of {name!r} must be a PyCapsule holding the address of "
                        f"an XLA FFI handler (ember.ffi.pycapsule(lib.handler)), or a dict {{'execute': capsule}}; "
                        f"got {type(capsule).__name__}")
    tag = _capsule_name(capsule)
    if not _capsule_valid(capsule, tag):
        raise TypeError(f"register_ffi_target: the PyCapsule given for {name!r} is not a valid capsule")
    address = _capsule_pointer(capsule, tag)
    if not address:
        raise ValueError(f"register_ffi_target: the PyCapsule given for {name!r} holds a null pointer")
    return int(address)


def _handler_of(name: str, fn: Any) -> int:
    if isinstance(fn, dict):
        unknown = sorted(map(repr, set(fn) - set(_STAGES)))
        if unknown:
            raise ValueError(f"register_ffi_target: unknown FFI stages {', '.join(unknown)} for {name!r} (the "
                             f"stages: {', '.join(_STAGES)})")
        if fn.get("execute") is None:
            raise ValueError(f"FFI handler for {name} on a platform Host must provide an execute implementation")
        others = [stage for stage in _STAGES[:-1] if fn.get(stage) is not None]
        if others:
            raise NotImplementedError(
                f"register_ffi_target: {name!r} has {', '.join(others)} handlers; the PJRT CPU plugin's FFI "
                "extension registers one handler per target, run at the execute stage (stateful handlers, which "
                "need the instantiate stage, cannot be registered through it)")
        fn = fn["execute"]
    return _capsule_address(fn, name)


def _plugin() -> _pjrt.Plugin:
    """The PJRT CPU plugin, loaded (no client is started: a handler may be registered before the device count is
    set)."""
    with _lock:
        if not _cpu_plugin:
            _cpu_plugin.append(_pjrt.Plugin(_pjrt.cpu_plugin_path()))
        return _cpu_plugin[0]


def _reserved(name: str) -> bool:
    return name.startswith("ember_") or name in XLA_TARGETS or name == CALLBACK_TARGET


def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1, **kwargs: Any) -> None:
    """Register an XLA FFI handler (fn: a PyCapsule of its address, or {"execute": capsule}) as the custom-call
    target `name`, for ffi_call (as jax.ffi.register_ffi_target). On platform "cpu" (or "host") ember asks the
    handler which XLA FFI API version it was built for and refuses (ValueError) one the plugin would drop, then
    registers it with the PJRT CPU plugin (now, and with every client ember starts). Another platform's handler is
    accepted, as JAX accepts it without that platform, and never called (ember runs FFI calls on the CPU).
    Registering the same handler again does nothing; another handler under a registered name is a ValueError.
    api_version 1 is the typed FFI, the only kind the plugin's FFI extension registers (0, XLA's legacy custom
    calls, is a NotImplementedError). kwargs: `traits` (XLA_FFI_Handler_Traits; the CPU plugin reads none)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_ffi_target: the target name must be a non-empty str, got {name!r}")
    if not isinstance(platform, str):
        raise TypeError(f"register_ffi_target: platform must be a str, got {platform!r}")
    traits = kwargs.pop("traits", 0)
    if kwargs:
        raise TypeError(f"register_ffi_target: unexpected keyword arguments {sorted(kwargs)} (ember takes traits)")
    if not isinstance(traits, int):
        raise TypeError(f"register_ffi_target: traits must be an int, got {traits!r}")
    if api_version == 0:
        raise NotImplementedError(
            f"register_ffi_target({name!r}, api_version=0): XLA's legacy custom calls cannot be registered with the "
            "PJRT CPU plugin, whose FFI extension takes typed XLA FFI handlers only (api_version=1: write the "
            "handler with ember/ffi.h, ember.ffi.include_dir())")
    if api_version != 1:
        raise ValueError(f"API version {api_version} is not supported by RegisterCustomCallTarget. Supported "
                         "versions are 0 and 1.")
    if _reserved(name):
        raise ValueError(f"register_ffi_target: {name!r} is the name of a custom-call target ember's own lowering "
                         "calls (ember's kernels are named ember_*; XLA's Qr, Eigh, ProductOfElementaryHouseholder"
                         "Reflectors and sharding markers): choose another name")
    handler = _handler_of(name, fn)
    if platform.lower() not in ("cpu", "host"):
        with _lock:
            _other_platforms[(name, platform)] = fn
        return
    plugin = _plugin()
    api = _ffi.plugin_ffi_api(plugin)
    _ffi.check_handler_version(api, _ffi.handler_metadata(api, handler), name)
    _ffi.add_handlers({name: handler})  # (ValueError: another handler has the name)
    with _lock:
        _kept[name] = fn


def register_ffi_type_id(name: str, obj: Any, platform: str = "cpu") -> None:
    """JAX 0.10.2 no longer registers FFI type ids this way: the same ValueError (register_ffi_type is its
    successor)."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def register_ffi_type(name: str, type_registration: Mapping[str, Any], platform: str = "cpu") -> None:
    """Register a custom FFI type (jax.ffi.register_ffi_type): not on ember, a NotImplementedError. Such types are
    the states of stateful handlers (the instantiate stage) and the user data of an execution context, and the
    PJRT CPU plugin's FFI extension lets ember register neither kind of handler nor pass such data."""
    raise NotImplementedError(
        f"register_ffi_type({name!r}): custom FFI types serve stateful handlers (the instantiate stage) and user "
        "data of the execution context; the PJRT CPU plugin's FFI extension registers execute handlers only, so "
        "ember has nothing that would pass a value of such a type to a handler")


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Mark a target as batch partitionable (as jax.ffi's): accepted, and nothing changes on ember, whose FFI calls
    in a program partitioned over several devices run where XLA's partitioner places a custom call it does not
    know (operands gathered, results replicated)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_ffi_target_as_batch_partitionable: the target name must be a non-empty str, got "
                        f"{name!r}")
    with _lock:
        _batch_partitionable.add(name)


# ---------------------------------------------------------------------------------------------------------------
# Layouts: ffi_call takes them major-to-minor (or as Layouts), the lowering minor-to-major (XLA's order)
def _minor_to_major(ndim: int, layout: Any, major_to_minor_given: bool, where: str) -> tuple[int, ...]:
    if layout is None:
        return tuple(reversed(range(ndim)))
    if isinstance(layout, Layout):
        if layout.tiling:
            raise ValueError("The FFI does not support layouts with tiling")
        order = tuple(layout.major_to_minor)[::-1]
    else:
        try:
            order = tuple(int(d) for d in layout)
        except TypeError:
            raise TypeError(f"{where}: a layout is None, an ember.experimental.layout.Layout or a sequence of "
                            f"dimensions, got {layout!r}") from None
        order = order[::-1] if major_to_minor_given else order
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"{where}: the layout {layout!r} is not an order of the {ndim} dimensions of its array")
    return order


def _result_avals(results: Sequence[Any]) -> tuple[ShapedArray, ...]:
    avals = []
    for i, result in enumerate(results):
        if not hasattr(result, "shape") or not hasattr(result, "dtype"):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and 'dtype' attributes. Got "
                             f"{result} at position {i}.")
        avals.append(ShapedArray(tuple(int(d) for d in result.shape), parse_dtype(result.dtype)))
    return tuple(avals)


def _checked_aliases(api: str, aliases: dict[int, int] | None, positional: int, in_avals: Sequence[Any],
                    result_avals: Sequence[Any]) -> list[tuple[int, int]]:
    """input_output_aliases ({input index: output index}) checked as JAX checks them (ffi_call's and
    buffer_callback's): the input below the number of positional arguments, the output below the number of
    results, the two of one type; sorted (input, output) pairs. api: the prefix of the messages."""
    checked = []
    for i, o in sorted((aliases or {}).items()):
        i, o = int(i), int(o)
        if not 0 <= i < min(positional, len(in_avals)):
            raise ValueError(f"{api}input_output_aliases contains the mapping '{i}:{o}' with input index {i} outside "
                             f"the range [0, {positional}).")
        if not 0 <= o < len(result_avals):
            raise ValueError(f"{api}input_output_aliases contains the mapping '{i}:{o}' with output index {o} "
                             f"outside the range [0, {len(result_avals)}).")
        a, r = in_avals[i], result_avals[o]
        if tuple(a.shape) != tuple(r.shape) or a.dtype != r.dtype:
            raise ValueError(f"{api}input_output_aliases contains the mapping '{i}:{o}' referring to an input with "
                             f"abstract value {a.str_short()} and an output with a different abstract value "
                             f"{r.str_short()}.")
        checked.append((i, o))
    return checked


def ffi_call(target_name: str, result_shape_dtypes: Any, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts: Sequence[Any] | None = None,
             output_layouts: Any = None, input_output_aliases: dict[int, int] | None = None,
             custom_call_api_version: int = 4, legacy_backend_config: str | None = None) -> Callable[..., Any]:
    """A function calling the FFI target `target_name` (registered with register_ffi_target) on its positional
    arguments, its keyword arguments passed to the handler as attributes; it returns one array per result of
    result_shape_dtypes (objects with shape and dtype: one, or a sequence for a list of results), as
    jax.ffi.ffi_call. has_side_effect: the call runs though its results are unused. vmap_method: how vmap calls it
    (JAX's methods; none: vmap refuses). input_layouts / output_layouts: each array's memory layout the handler
    wants, major-to-minor (None: row-major), which XLA arranges. input_output_aliases: {input: output} pairs whose
    buffers the handler shares (an output written in place)."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        allowed = [*VMAP_METHODS, None]
        raise ValueError(f"vmap_method must be on of the allowed methods {allowed}, but got: {vmap_method}")
    if not isinstance(target_name, str) or not target_name:
        raise TypeError(f"ffi_call: target_name must be a non-empty str, got {target_name!r}")
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires custom_call_api_version < 4; got "
                         f"{custom_call_api_version}.")
    if custom_call_api_version != 4:
        raise NotImplementedError(
            f"ffi_call({target_name!r}, custom_call_api_version={custom_call_api_version}): ember calls typed FFI "
            "handlers only (api_version 4), the only kind the PJRT CPU plugin's FFI extension registers")
    multiple = isinstance(result_shape_dtypes, Sequence)
    result_avals = _result_avals(result_shape_dtypes if multiple else [result_shape_dtypes])
    output_layouts_ = output_layouts if multiple else (output_layouts,)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        operands = [a if isinstance(a, (Tracer, Array)) else asarray(a) for a in args]
        in_avals = [aval_of(o) for o in operands]
        if input_layouts is None:
            ins = tuple(_minor_to_major(a.ndim, None, True, "ffi_call") for a in in_avals)
        else:
            if len(input_layouts) != len(in_avals):
                raise ValueError(f"The number of input arguments ({len(in_avals)}) must equal the number of input "
                                 f"layouts ({len(input_layouts)}).")
            ins = tuple(_minor_to_major(a.ndim, lay, True, "ffi_call input_layouts")
                        for a, lay in zip(in_avals, input_layouts))
        if output_layouts_ is None:
            outs = tuple(_minor_to_major(a.ndim, None, True, "ffi_call") for a in result_avals)
        else:
            if len(output_layouts_) != len(result_avals):
                raise ValueError(f"The number of outputs ({len(result_avals)}) must equal the number of output "
                                 f"layouts ({len(output_layouts_)}).")
            outs = tuple(_minor_to_major(a.ndim, lay, True, "ffi_call output_layouts")
                         for a, lay in zip(result_avals, output_layouts_))
        aliases = []
        for i, o in _checked_aliases("", input_output_aliases, len(args), in_avals, result_avals):
            if ins[i] != outs[o]:
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring to an input with "
                                 f"layout {ins[i]} and an output with a different layout {outs[o]}.")
            aliases.append((i, o))
        attributes = tuple((k, _hlo_ffi.hashable_attribute(k, v)) for k, v in sorted(kwargs.items()))
        for k, v in attributes:
            _hlo_ffi.attribute_text(k, v)  # (a type XLA cannot carry is the caller's TypeError now)
        results = ffi_call_p.bind(*operands, result_avals=result_avals, vmap_method=vmap_method,
                                  target_name=target_name, has_side_effect=bool(has_side_effect),
                                  input_layouts=ins, output_layouts=outs, input_output_aliases=tuple(aliases),
                                  custom_call_api_version=custom_call_api_version,
                                  legacy_backend_config=legacy_backend_config, attributes=attributes)
        if multiple:
            return tuple(results) if isinstance(result_shape_dtypes, tuple) else list(results)
        return results[0]

    return wrapped


# ---------------------------------------------------------------------------------------------------------------
# Lowering rules for primitives defined the JAX way (ember.extend.core.Primitive + mlir.register_lowering)
class LoweredCall:
    """What a rule of build_ffi_lowering_function returns in place of JAX's MLIR op: its `results`, the values of
    the module ember is writing (a lowering rule returns them)."""

    def __init__(self, results: list[Value]):
        self.results = results

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"the FFI call has {len(self.results)} results, not one")
        return self.results[0]


_LOWERING_ARGS = {"has_side_effect", "api_version", "operand_output_aliases"}


def build_ffi_lowering_function(call_target_name: str, *, operand_layouts: Sequence[Any] | None = None,
                                result_layouts: Sequence[Any] | None = None,
                                backend_config: Mapping[str, Any] | str | None = None,
                                skip_ffi_layout_processing: bool = False,
                                **lowering_args: Any) -> Callable[..., LoweredCall]:
    """A lowering rule of (ctx, *operands, **params) for a primitive defined with ember.extend.core.Primitive that
    calls the FFI target (as jax.ffi's): the params and backend_config are the handler's attributes; the layouts,
    minor-to-major (XLA's order, unlike ffi_call's), default to row-major. It returns a LoweredCall whose
    `results` are the call's values. lowering_args: has_side_effect, operand_output_aliases ({operand: result}),
    api_version (4 only)."""
    unknown = sorted(set(lowering_args) - _LOWERING_ARGS)
    if unknown:
        raise NotImplementedError(f"build_ffi_lowering_function({call_target_name!r}): ember writes the custom call "
                                  f"from the avals and takes only {sorted(_LOWERING_ARGS)}, not {unknown}")
    api_version = lowering_args.get("api_version", 4)
    if api_version != 4:
        raise NotImplementedError(f"build_ffi_lowering_function({call_target_name!r}, api_version={api_version}): "
                                  "ember calls typed FFI handlers only (api_version 4)")
    if backend_config is not None and not isinstance(backend_config, dict):
        raise ValueError("When api_version > 4, backend_config must be a dictionary.")

    def lowering_op(ctx: Any, *operands: Any, **params: Any) -> LoweredCall:
        if not isinstance(ctx, RuleContext) or not all(isinstance(o, Value) for o in operands):
            raise TypeError(f"the FFI lowering of {call_target_name!r} is a lowering rule: register it with "
                            "ember.interpreters.mlir.register_lowering, and ember calls it with its context")
        config = dict(backend_config or {}, **params)
        attributes = tuple((k, _hlo_ffi.hashable_attribute(k, v)) for k, v in sorted(config.items()))
        if skip_ffi_layout_processing:
            ins = outs = None
        else:
            ins = [_minor_to_major(a.ndim, lay, False, "ffi_lowering operand_layouts")
                   for a, lay in zip(ctx.avals_in, operand_layouts or [None] * len(ctx.avals_in))]
            outs = [_minor_to_major(a.ndim, lay, False, "ffi_lowering result_layouts")
                    for a, lay in zip(ctx.avals_out, result_layouts or [None] * len(ctx.avals_out))]
        ins = ins or [tuple(reversed(range(a.ndim))) for a in ctx.avals_in]
        outs = outs or [tuple(reversed(range(a.ndim))) for a in ctx.avals_out]
        aliases = sorted((int(i), int(o)) for i, o in (lowering_args.get("operand_output_aliases") or {}).items())
        names = _hlo_ffi.user_custom_call(ctx.ember, call_target_name, [o.name for o in operands], ctx.avals_out,
                                          attributes, ins, outs, aliases,
                                          has_side_effect=bool(lowering_args.get("has_side_effect", False)))
        return LoweredCall([Value(n, a) for n, a in zip(names, ctx.avals_out)])

    return lowering_op


def ffi_lowering(call_target_name: str, *, operand_layouts: Sequence[Any] | None = None,
                 result_layouts: Sequence[Any] | None = None, backend_config: Mapping[str, Any] | str | None = None,
                 skip_ffi_layout_processing: bool = False, **lowering_args: Any) -> Callable[..., list[Value]]:
    """A lowering rule calling the FFI target, for mlir.register_lowering(prim, ffi_lowering(name)) (as jax.ffi's):
    build_ffi_lowering_function's rule, returning the call's results."""
    build = build_ffi_lowering_function(call_target_name, operand_layouts=operand_layouts,
                                        result_layouts=result_layouts, backend_config=backend_config,
                                        skip_ffi_layout_processing=skip_ffi_layout_processing, **lowering_args)

    def lowering(ctx: Any, *operands: Any, **params: Any) -> list[Value]:
        return build(ctx, *operands, **params).results

    return lowering


__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir", "pycapsule",
           "register_ffi_target", "register_ffi_target_as_batch_partitionable", "register_ffi_type",
           "register_ffi_type_id"]
