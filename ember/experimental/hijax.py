"""ember.experimental.hijax (jax.experimental.hijax): JAX's names for high-level types, as far as ember has them.

JAX's hijax lets a library define types of its own that its transformations carry (a HiType's values lowered to
arrays by its `to_lojax`, with mutable per-trace state, "QDD"). ember stages arrays, Refs and its typed keys only,
so it has no high-level types: here are the names a library declares its types and primitives with (flax.nnx does
at import, and uses them only when its `flax_hijax_variable` option is on, off by default), with these semantics:

- `HiPrimitive`, `VJPHiPrimitive`: bound outside any staging, `bind` calls the primitive's `impl` (JAX's eager
  rule); bound inside one (jit, grad, vmap, ...), it is a NotImplementedError naming the primitive.
- `HiType`, `MutableHiType`, `HiPspec`, `AvalQDD`, `AvalMutableQDD`: base classes and records to declare with;
  `register_hitype(cls, to_aval)` records the type (`hitype_of`), and a value of it given to a transformation is
  ember's usual TypeError for a value that is not an array.
- `aval_method`, `aval_property`: JAX's markers of an aval's methods and properties (records of the function).
- `control_flow_allowed_effects`: the effect types a control-flow body may have (`add_type`, `remove_type`,
  `contains`).
- `Zero`, `instantiate_zeros`, `is_undefined_primal`, `AbstractValue`, `ShapedArray`, `AbstractRef`: ember's
  (ember.interpreters.ad, ember.core, the type of an ember.Ref).
- `TransformedRef`: a view of a Ref through indexing, reshape, transpose and bitcast (`ref.at[idx]`,
  `ref.reshape(...)`, `ref.T`, `ref.bitcast(dtype)`), read and written as the Ref's elements it shows
  (ember/_prims/ref_views.py; docs/refs.md)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ember._core import is_tracing as _is_tracing
from ember._core.refs import RefAval as AbstractRef
from ember._prims.ref_views import TransformedRef
from ember.core import AbstractValue, ShapedArray
from ember.extend.core import Primitive as _Primitive
from ember.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal


class aval_method(NamedTuple):  # noqa: N801 (JAX's name)
    """A method of an aval that a traced value of its type answers (JAX's marker: a record of the function)."""
    fun: Callable[..., Any]


class aval_property(NamedTuple):  # noqa: N801 (JAX's name)
    """A property of an aval that a traced value of its type answers (JAX's marker: a record of the getter)."""
    fget: Callable[..., Any]


class EffectTypeSet:
    """A set of effect types (JAX's effects.EffectTypeSet)."""

    def __init__(self) -> None:
        self._types: set[type] = set()

    def add_type(self, effect_type: type) -> None:
        self._types.add(effect_type)

    def remove_type(self, effect_type: type) -> None:
        self._types.discard(effect_type)

    def contains(self, effect: Any) -> bool:
        return any(isinstance(effect, t) for t in self._types)


control_flow_allowed_effects = EffectTypeSet()
"""The effect types a cond/scan/while body may have (JAX's effects.control_flow_allowed_effects)."""


class HiType(AbstractValue):
    """The base of a high-level type's aval (JAX's hijax.HiType). ember stages no values of such types."""
    __slots__ = ()


class MutableHiType(HiType):
    """The base of a mutable high-level type's aval (JAX's hijax.MutableHiType)."""
    __slots__ = ()


class HiPspec:
    """A partition spec of a high-level type (JAX's hijax.HiPspec)."""


class AvalQDD(NamedTuple):
    """An aval with its quasi-dynamic data (JAX's core.AvalQDD)."""
    aval: Any
    qdd: Any


class AvalMutableQDD(NamedTuple):
    """An aval with its mutable quasi-dynamic data (JAX's core.AvalMutableQDD)."""
    aval: Any
    mutable_qdd: Any


class HiPrimitive(_Primitive):
    """A primitive over high-level types (JAX's hijax.HiPrimitive): bound outside any staging, its `impl`; inside
    one, a NotImplementedError (ember has no high-level types to stage). A subclass defines `impl` as a method."""

    def __init__(self, name: str):
        super().__init__(name)
        if self.__dict__.get("impl", False) is None:  # (the base's "no def_impl yet" must not hide the method)
            del self.__dict__["impl"]

    def bind(self, *args: Any, **params: Any) -> Any:
        if not _is_tracing():
            return self.impl(*args, **params)
        raise NotImplementedError(
            f"{self.name}: a hijax primitive (jax.experimental.hijax.HiPrimitive) bound inside a transformation: ember "
            "has no high-level types to stage (flax.nnx binds these only with its flax_hijax_variable option on, "
            "which is off by default)")

    def impl(self, *args: Any, **params: Any) -> Any:
        raise NotImplementedError(f"{self.name}: this hijax primitive defines no impl")


class VJPHiPrimitive(HiPrimitive):
    """A high-level primitive with a custom VJP (JAX's hijax.VJPHiPrimitive)."""


_HITYPES: dict[type, Callable[[Any], Any]] = {}


def register_hitype(cls: type, to_aval: Callable[[Any], Any]) -> None:
    """Record cls as a high-level type whose values have the aval to_aval(value) (JAX's register_hitype)."""
    _HITYPES[cls] = to_aval


def hitype_of(cls: type) -> Callable[[Any], Any] | None:
    """The to_aval function registered for cls, or None."""
    return _HITYPES.get(cls)


__all__ = ["AbstractRef", "AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrimitive", "HiPspec", "HiType",
           "MutableHiType", "ShapedArray", "TransformedRef", "VJPHiPrimitive", "Zero", "aval_method", "aval_property",
           "control_flow_allowed_effects", "hitype_of", "instantiate_zeros", "is_undefined_primal",
           "register_hitype"]
