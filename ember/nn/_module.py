"""Modules: classes whose instances are pytrees (parameters are the leaves), in the style of equinox.

A Module subclass is written as a plain class: __init__ stores the parameters and settings as attributes, and
__call__ computes. Attributes holding arrays (or Modules, or lists/tuples/dicts of them) are the pytree's
children; every other attribute (sizes, strings, activation functions, None) is static and part of the tree
structure, so a Module passes through jit, grad, vmap, tree_map and the optimizers of ember.optim like a dict of
arrays. Which attributes are children is decided once, from the values __init__ stored; a Module is immutable
afterwards (make changed copies with .replace(name=value))."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember._core.pytree import register_pytree_with_keys, tree_leaves, GetAttrKey


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.generic, type))


def _holds_arrays(value: Any) -> bool:
    if isinstance(value, Module):
        return True
    try:
        return any(_is_array(leaf) or isinstance(leaf, Module) for leaf in tree_leaves(value))
    except Exception:  # noqa: BLE001 - not a pytree of ours: static
        return False


_CACHE = "_ember_tree"  # (child attribute names, aux data), fixed when the module is first flattened


class Module:
    """The base class of ember.nn's layers (see the module docstring)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_pytree_with_keys(cls, _flatten_with_keys, _unflatten_for(cls), _flatten)

    def __setattr__(self, name: str, value: Any) -> None:
        if _CACHE in self.__dict__:
            raise AttributeError(f"{type(self).__name__} is immutable once used as a pytree; make a changed copy "
                                 f"with .replace({name}=...)")
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> "Module":
        """A copy of this module with some attributes replaced."""
        new = object.__new__(type(self))
        unknown = set(changes) - set(self._fields())
        if unknown:
            raise AttributeError(f"{type(self).__name__}.replace: no attribute(s) {sorted(unknown)}")
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k != _CACHE})
        new.__dict__.update(changes)
        return new

    def _fields(self) -> list[str]:
        return [k for k in self.__dict__ if k != _CACHE]

    def _tree(self) -> tuple[tuple[str, ...], Any]:
        info = self.__dict__.get(_CACHE)
        if info is None:
            children = tuple(k for k in self._fields() if _holds_arrays(self.__dict__[k]))
            static = tuple((k, self.__dict__[k]) for k in self._fields() if k not in children)
            info = (children, (children, static))
            object.__setattr__(self, _CACHE, info)
        return info

    def _children(self) -> tuple[str, ...]:
        return self._tree()[0]

    def __repr__(self) -> str:
        parts = []
        for name in self._fields():
            value = self.__dict__[name]
            if _is_array(value):
                text = f"{np.dtype(value.dtype).name}{list(value.shape)}"
            elif callable(value) and not isinstance(value, Module):
                text = getattr(value, "__name__", repr(value))
            else:
                text = repr(value)
            parts.append(f"{name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _flatten(module: Module) -> tuple[list[Any], Any]:
    children, aux = module._tree()
    values = module.__dict__
    return [values[k] for k in children], aux


def _flatten_with_keys(module: Module) -> tuple[list[tuple[Any, Any]], Any]:
    children, aux = module._tree()
    return [(GetAttrKey(k), module.__dict__[k]) for k in children], aux


def _unflatten_for(cls: type) -> Any:
    def unflatten(aux: Any, values: Any) -> Module:
        children, static = aux
        module = object.__new__(cls)
        module.__dict__.update(static)
        module.__dict__.update(zip(children, values))
        module.__dict__[_CACHE] = (children, aux)
        return module
    return unflatten
