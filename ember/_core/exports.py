"""Public names, declared once. Each private module lists the public names it defines in its `__all__`; a public
face (ember._prims, ember.lax, ember.numpy) re-exports the union of an ordered list of such modules with
`reexport`, and builds its own `__all__` from what that returns. Adding a function to a module's `__all__` is
then all it takes to publish it, and docs/api.md (tools/api_docs.py) follows."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Collection, Iterable, MutableMapping


def declared_names(module: ModuleType) -> list[str]:
    """The public names a module declares (its `__all__`), each checked to exist in the module."""
    names = getattr(module, "__all__", None)
    if names is None:
        raise AttributeError(f"{module.__name__} declares no __all__ to re-export")
    undefined = [name for name in names if not hasattr(module, name)]
    if undefined:
        raise AttributeError(f"{module.__name__}.__all__ lists names the module does not define: {undefined}")
    return list(names)


def reexport(namespace: MutableMapping[str, Any], modules: Iterable[ModuleType],
             exclude: Collection[str] = ()) -> list[str]:
    """Bind the declared public names of modules, module by module, into namespace (a public module's
    `globals()`), leaving out those in exclude, and return the bound names in that order (for `__all__`). A name
    declared by two of the modules is an error: which object it means would depend on the order."""
    owners: dict[str, str] = {}
    for module in modules:
        for name in declared_names(module):
            if name in owners:
                raise ValueError(f"{name!r} is declared public by both {owners[name]} and {module.__name__}")
            owners[name] = module.__name__
            if name not in exclude:
                namespace[name] = getattr(module, name)
    return [name for name in owners if name not in exclude]
