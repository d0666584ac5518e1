"""ember.as_jax: run unmodified JAX code on ember (docs/as_jax.md).

    python -m ember.as_jax program.py args...      # or -m module args..., or -c code
    python -m pytest -p ember.as_jax.pytest_plugin  # a JAX test suite, xdist workers included
    import ember.as_jax; ember.as_jax.install()    # in a notebook, before anything imports jax

install() puts a finder first on `sys.meta_path` that answers every `jax` and `jax.<name>` import:

- `jax` is a module of its own that reads its attributes from `ember` (`jax.jit is ember.jit`), except the version:
  `jax.__version__` (and `jax.version.__version__`) is JAX_VERSION, the JAX API ember implements, while
  `ember.__version__` stays ember's.
- `jax.<name>` is ember's module `ember.<name>` itself (`jax.numpy is ember.numpy`, `jax.scipy.stats.norm is
  ember.scipy.stats.norm`); the finder puts ember's module into `sys.modules` under the JAX name, so ember's modules
  keep their own names and specs.
- a JAX module ember has no module for (`jax.extend.core`, `jax.interpreters.ad`), or a private one (`jax._src.*`),
  is a ModuleNotFoundError that names it and says ember has none (`import jax.core` and `from jax import core`
  alike), so `try: import jax.x except ImportError:` works. Its `.name` is ember's missing module (`ember.core`).

JAX need not be installed; when it is, it is untouched in processes that do not install the alias. A process that
has already imported the real JAX cannot also have the alias (two `jax` modules in one process): install() refuses
with an ImportError that says so. uninstall() takes the alias away again (what was imported keeps its modules).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types
from typing import Any, Sequence

import ember
from ember.as_jax._shims import JAX_VERSION, PACKAGES, SHIMS
JAX_VERSION_INFO = tuple(int(part) for part in JAX_VERSION.split("."))

# The submodules `import jax` imports itself (JAX 0.10.2), so that `jax.core` reads without `import jax.core`:
# under the alias the first read of one imports it (ember's module, a shim, or the AttributeError of a missing one).
_SUBMODULES_OF_IMPORT_JAX = frozenset((
    "_src", "api_util", "core", "custom_batching", "custom_derivatives", "debug", "distributed", "dlpack", "dtypes",
    "errors", "experimental", "export", "ffi", "image", "interpreters", "lax", "lib", "monitoring", "nn", "numpy",
    "ops",
    "profiler", "random", "ref", "scipy", "sharding", "stages", "tree", "tree_util", "typing"))

# The JAX modules that are not ember's module of the same name: only the version differs.
_VERSION_OVERRIDES = {"__version__": JAX_VERSION, "_version": JAX_VERSION, "__version_info__": JAX_VERSION_INFO}


class _Alias(types.ModuleType):
    """A JAX module that is an ember module but for a few attributes (`jax` and `jax.version`): reads fall through
    to the ember module; what JAX code sets on it (`jax.numpy` after `import jax.numpy`) stays on the alias."""

    def __init__(self, name: str, target: types.ModuleType, overrides: dict[str, Any]):
        super().__init__(name, target.__doc__)
        self.__dict__.update(overrides)
        self.__dict__["_ember_target"] = target

    def __getattr__(self, name: str) -> Any:
        target = self.__dict__["_ember_target"]
        if self.__name__ == "jax" and name == "version":  # jax.version is the alias, not ember.version
            return importlib.import_module("jax.version")
        if self.__name__ == "jax" and name in _SUBMODULES_OF_IMPORT_JAX and not hasattr(target, name):
            try:
                return importlib.import_module(f"jax.{name}")
            except ModuleNotFoundError:
                pass
        try:
            return getattr(target, name)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (JAX code run by ember: "
                                 f"{target.__name__} has no {name!r})") from None

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} (ember's {self.__dict__['_ember_target'].__name__}, by ember.as_jax)>"

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_ember_target"])) | set(self.__dict__) - {"_ember_target"})


def _ember_name(jax_name: str) -> str:
    return "ember" + jax_name[len("jax"):]


def _missing(jax_name: str, why: str) -> ModuleNotFoundError:
    # Its name is ember's module's, not jax_name: `from jax import core` would take a ModuleNotFoundError named
    # jax.core for "no such submodule" and raise "cannot import name 'core' from 'jax'" instead of this message.
    return ModuleNotFoundError(f"No module named {jax_name!r}: ember, running JAX code through ember.as_jax, {why}",
                               name=_ember_name(jax_name))


class JaxFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The meta-path finder (and loader) of the `jax` alias: see the module's docstring."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "jax" and not fullname.startswith("jax."):
            return None
        if fullname in ("jax", "jax.version"):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "jax")
        if fullname in SHIMS:  # (a module only the alias has: jax.lib, the few jax._src ones libraries import)
            return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname in PACKAGES)
        if any(part.startswith("_") for part in fullname.split(".")):
            raise _missing(fullname, "has no counterpart of JAX's private modules")
        name = _ember_name(fullname)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is None or not (name == error.name or name.startswith(error.name + ".")):
                raise  # a module ember's module imports is missing: not this one
            raise _missing(fullname, f"has no module for it ({name} does not exist)") from None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=hasattr(module, "__path__"))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if spec.name == "jax":
            return _Alias("jax", ember, {**_VERSION_OVERRIDES, "__path__": []})
        if spec.name == "jax.version":
            return _Alias("jax.version", ember.version, _VERSION_OVERRIDES)
        shim = SHIMS.get(spec.name)
        if isinstance(shim, str):
            return None  # (ember's module itself, in exec_module)
        if isinstance(shim, tuple):
            return _Alias(spec.name, importlib.import_module(shim[0]), shim[1])
        if shim is not None:
            module = types.ModuleType(spec.name, "JAX's module, as libraries read it (ember.as_jax._shims)")
            module.__dict__.update(shim)
            if spec.name in PACKAGES:
                module.__path__ = []
            return module
        return None  # a placeholder, replaced by ember's module in exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        if isinstance(SHIMS.get(module.__name__), str):
            sys.modules[module.__name__] = importlib.import_module(SHIMS[module.__name__])
            return
        if isinstance(module, _Alias) or module.__name__ in SHIMS:
            return
        name = _ember_name(module.__name__)
        # The module replaces itself in sys.modules (the import system returns what sys.modules holds), so ember's
        # module keeps its name and spec. Its submodules that live only in sys.modules (ember.lax.linalg: ember.lax
        # is no package) are aliased at once: the import system would never ask a finder for them.
        sys.modules[module.__name__] = sys.modules[name]
        for key, sub in list(sys.modules.items()):
            if key.startswith(name + ".") and "._" not in key:
                sys.modules.setdefault("jax" + key[len("ember"):], sub)


_FINDER = JaxFinder()


def _real_jax_modules() -> list[str]:
    return [name for name, module in sys.modules.items()
            if (name == "jax" or name.startswith("jax.")) and module is not None
            and not (isinstance(module, _Alias) or getattr(module, "__name__", "").startswith("ember"))]


def installed() -> bool:
    """Whether the `jax` alias is installed in this process."""
    return _FINDER in sys.meta_path


def install() -> None:
    """Make `import jax` (and every `jax.<name>`) resolve to ember in this process, from now on. Call it before
    anything imports jax; a process that has imported the real JAX already is refused (ImportError). Installing
    twice is installing once."""
    if installed():
        return
    real = _real_jax_modules()
    if real:
        where = getattr(sys.modules.get("jax"), "__file__", None) or sys.modules[real[0]]
        raise ImportError(f"ember.as_jax.install(): JAX itself is already imported in this process ({where}); the "
                          "alias cannot replace it. Install it before anything imports jax: first thing in the "
                          "notebook, or run the program with `python -m ember.as_jax program.py`.")
    sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Take the alias away: `import jax` finds what it would without it (the real JAX, or nothing). Modules that
    imported jax under the alias keep ember's modules."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == "jax" or n.startswith("jax.")]:
        module = sys.modules[name]
        if isinstance(module, _Alias) or getattr(module, "__name__", "").startswith("ember"):
            del sys.modules[name]


USAGE = """usage: python -m ember.as_jax program.py [args...]
       python -m ember.as_jax -m module [args...]
       python -m ember.as_jax -c code [args...]

Runs a JAX program on ember, unchanged: `import jax` and every `jax.<name>` resolve to ember's modules
(docs/as_jax.md). The arguments are what `python` itself would take after the program."""


def main(argv: Sequence[str]) -> None:
    """`python -m ember.as_jax ...`: install the alias, then run a program, a module or code as `python` would
    (as `__main__`, with sys.argv and sys.path[0] set the same way)."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    install()
    if argv[0] == "-m" and len(argv) > 1:
        sys.argv = [argv[1], *argv[2:]]  # runpy puts the module's file name in sys.argv[0]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c" and len(argv) > 1:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    elif argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        raise SystemExit(2)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


__all__ = ["JAX_VERSION", "JAX_VERSION_INFO", "JaxFinder", "install", "installed", "main", "uninstall"]
