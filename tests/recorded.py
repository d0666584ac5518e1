"""JAX's results, recorded: the oracle's values kept beside the tests, so that the default run does not compile
JAX's side of every comparison again (XLA compiles are most of the suite's time, and JAX's are about half of them).

`jax_result(thunk)` returns what `thunk()` (a computation with JAX) returns, with its arrays as numpy arrays. The
value is looked up in tests/recorded/<test module>.pkl under a key made of the test's node id, the call's position
in the test, a fingerprint of the thunk (its code, the code of the functions it closes over, and the values they
close over, and the module globals their code reads: arrays by content, test functions by code, a library
function by name and what it closes over, a test's class by its members), JAX's version, its x64 mode and every
JAX option set otherwise than the suite sets it. Anything that changes the computation changes the key, and a
missing key is computed live: a stale record is not used, only left unused. What the fingerprint cannot see it
refuses, and the thunk runs live: a wrapper object made outside the thunk (jax.jit(f, donate_argnums=...): its
options are invisible), a value of an unknown type. (It cannot see a change in a global it cannot fingerprint,
which contributes its name only, or in a library other than JAX; `verify` mode below catches those.) A JAX
result holding an ember value is a TypeError: the thunk ran ember, and its record would compare ember with
itself.

EMBER_JAX_RECORDS selects the mode (default `use`):
  use     recorded values where there are, live JAX elsewhere
  off     live JAX everywhere (the records are not read)
  record  live JAX, and every value is added to its module's record when the process ends (xdist workers merge
          theirs under a lock): EMBER_JAX_RECORDS=record python3 -m pytest -n 2 [tests ...]
  verify  live JAX, and each value must equal its record: bit for bit for integers and booleans, within 64 ulps for
          floats (the rounding of another CPU's XLA; a stale record differs by more); the check CI runs on a sample
          of modules (.ci/run), and a maintainer's after an edit of helper code or a JAX upgrade
Re-recording a module: delete its .pkl and run it in record mode."""
from __future__ import annotations

import atexit
import functools
import hashlib
import os
import pickle
import types
import warnings
from typing import Any, Callable

import numpy as np

_TESTS = os.path.dirname(os.path.abspath(__file__))
_DIR = os.path.join(_TESTS, "recorded")
_MODE = os.environ.get("EMBER_JAX_RECORDS", "use")
if _MODE not in ("use", "off", "record", "verify"):
    raise ValueError(f"EMBER_JAX_RECORDS={_MODE!r}: expected use, off, record or verify")

_MAX_BYTES = 64 * 1024  # the largest result recorded (pickled)
_stores: dict[str, dict[str, Any]] = {}  # module -> key -> value
_dirty: set[str] = set()
_position: list[Any] = [None, 0]  # the current test's node id, and the number of results it asked for so far


class _Unfingerprintable(Exception):
    pass


class _ReadsRandomState(_Unfingerprintable):
    """The code reads a module's random generator: its values depend on what ran before (never recorded)."""


def _feed(h: "hashlib._Hash", x: Any, depth: int = 0) -> None:
    if depth > 12:
        raise _Unfingerprintable("too deep")
    t = type(x)
    h.update(t.__name__.encode())
    if x is None or t in (bool, int, float, complex, str, bytes, range, slice) or x is Ellipsis:
        h.update(repr(x).encode())
    elif t is object:  # (a library's sentinel, object(): its type is what it says)
        pass
    elif isinstance(x, np.generic) or t is np.dtype:
        h.update(repr(x).encode() + str(getattr(x, "dtype", "")).encode())
    elif isinstance(x, np.ndarray):
        h.update(f"{x.dtype}{x.shape}".encode() + np.ascontiguousarray(x).tobytes())
    elif t in (tuple, list):
        for item in x:
            _feed(h, item, depth + 1)
    elif t is dict:
        for k in sorted(x, key=repr):
            _feed(h, k, depth + 1)
            _feed(h, x[k], depth + 1)
    elif t is types.FunctionType and not x.__code__.co_filename.startswith(_TESTS):
        h.update(f"{x.__module__}.{x.__qualname__}".encode())  # a library's function: its version is in the key,
        for cell in x.__closure__ or ():  # and what it closes over (grad(f, argnums=1)'s f and argnums)
            try:
                value = cell.cell_contents
            except ValueError:
                value = None
            _feed(h, value, depth + 1)
    elif t is types.FunctionType:
        _feed_code(h, x.__code__, depth)
        _feed(h, x.__defaults__, depth + 1)
        _feed(h, x.__kwdefaults__, depth + 1)
        for cell in x.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                value = None
            _feed(h, value, depth + 1)
        _feed_globals(h, x)
    elif t is np.ufunc:
        h.update(x.__name__.encode())
    elif t is functools.partial:
        _feed(h, (x.func, x.args, x.keywords), depth + 1)
    elif t is types.ModuleType:
        h.update(x.__name__.encode())
    elif isinstance(x, type):
        h.update(f"{x.__module__}.{x.__qualname__}".encode())
        if x.__module__.startswith("test") or x.__module__ in ("recorded", "oracle", "lax_oracles"):
            for name in sorted(vars(x)):  # a test's class: its methods and class attributes, not its name only
                if not name.startswith("__") or name in ("__init__", "__call__"):
                    h.update(name.encode())
                    _feed(h, vars(x)[name], depth + 1)
    elif callable(x) and hasattr(x, "__wrapped__"):
        # (a wrapper object, jax.jit(f, donate_argnums=...): its options are not visible to the fingerprint, so the
        # thunk runs live; a wrapper made inside the thunk is part of the thunk's code, and fingerprinted)
        raise _Unfingerprintable(f"a wrapped callable {type(x).__name__}")
    elif callable(x) and isinstance(getattr(x, "__qualname__", None), str) and not hasattr(x, "__self__") \
            and not str(getattr(x, "__module__", "")).startswith("test"):
        h.update(f"{x.__module__}.{x.__qualname__}".encode())  # a library function (jnp.sin, np.float32 ...)
    elif hasattr(x, "__array__") and hasattr(x, "dtype") and "key" not in str(x.dtype):
        _feed(h, np.asarray(x), depth + 1)  # a JAX or ember array
    else:
        raise _Unfingerprintable(t.__name__)


_seen_globals: set[int] = set()  # the test functions whose globals the fingerprint being made has fed


def _feed_globals(h: "hashlib._Hash", fn: types.FunctionType) -> None:
    """The values of the module globals a test function's code reads (helper functions, constant arrays, case
    tables), each once per fingerprint; a value that cannot be fingerprinted contributes its name only."""
    if id(fn) in _seen_globals:
        return
    _seen_globals.add(id(fn))
    for name in sorted(_names(fn.__code__)):
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        if type(value) is types.ModuleType:
            continue
        if isinstance(value, (np.random.Generator, np.random.RandomState)):  # (its draws depend on what ran before)
            raise _ReadsRandomState(name)
        sub = hashlib.sha256()
        try:
            _feed(sub, value, 1)
        except _ReadsRandomState:
            raise
        except _Unfingerprintable:
            sub = hashlib.sha256(b"?")
        h.update(name.encode() + sub.digest())


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _feed_code(h: "hashlib._Hash", code: types.CodeType, depth: int) -> None:
    h.update(code.co_code + repr(code.co_names).encode() + repr(code.co_varnames).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const, depth + 1)
        else:
            _feed(h, const, depth + 1)


def _to_numpy(x: Any) -> Any:
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple (jnp.linalg's results)
        return type(x)(*(_to_numpy(item) for item in x))
    if type(x) in (tuple, list):
        return type(x)(_to_numpy(item) for item in x)
    if type(x) is dict:
        return {k: _to_numpy(v) for k, v in x.items()}
    if isinstance(x, (np.ndarray, np.generic, int, float, complex, bool, str, bytes)) or x is None:
        if isinstance(x, np.ndarray) and (type(x) is not np.ndarray or x.dtype == object):
            raise _Unfingerprintable("an ndarray subclass or an object array")
        return x
    if "key<" in str(getattr(x, "dtype", "")) or not hasattr(x, "__array__"):
        raise _Unfingerprintable(type(x).__name__)  # (kept live: a typed key, a pytree node, an OrderedDict ...)
    array = np.asarray(x)
    if array.dtype == object:
        raise _Unfingerprintable(type(x).__name__)
    return array


def _store(module: str) -> dict[str, Any]:
    store = _stores.get(module)
    if store is None:
        path = os.path.join(_DIR, module + ".pkl")
        store = {}
        if _MODE != "off" and os.path.exists(path):
            with open(path, "rb") as f:
                store = pickle.load(f)
        _stores[module] = store
    return store


_baseline: dict[str, Any] | None = None  # JAX's options as the suite sets them (at the first key made)


def _config_changes(jax: Any) -> list[tuple[str, str]]:
    """The JAX options whose values differ from the suite's (x64 aside: in every key), as (name, repr)."""
    global _baseline
    values = {k: v for k, v in jax.config.values.items() if k != "jax_enable_x64"}
    if _baseline is None:
        _baseline = dict(values)
    return sorted((k, repr(v)) for k, v in values.items() if k not in _baseline or _baseline[k] != v)


def _key(thunk: Callable[[], Any]) -> tuple[str, str] | None:
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if not current:
        return None
    if _position[0] != current:
        _position[0], _position[1] = current, 0
    _position[1] += 1
    import jax
    h = hashlib.sha256(f"{current}#{_position[1]}|jax {jax.__version__}|x64 {jax.config.jax_enable_x64}".encode())
    changed = _config_changes(jax)
    if changed:  # (JAX options set otherwise than the suite sets them: a context manager in the test)
        h.update(repr(changed).encode())
    _seen_globals.clear()
    try:
        _feed(h, thunk)
    except _Unfingerprintable:
        return None
    module = os.path.splitext(os.path.basename(current.split("::", 1)[0]))[0]
    return module, h.hexdigest()[:32]


def jax_result(thunk: Callable[[], Any]) -> Any:
    """thunk() (a JAX computation), its arrays as numpy arrays: recorded where the record has it (see the module
    docstring)."""
    where = _key(thunk)
    if where is None:
        if _MODE == "record":
            warnings.warn(f"{os.environ.get('PYTEST_CURRENT_TEST')}: a jax_result whose thunk cannot be fingerprinted "
                          "runs JAX live (tests/recorded.py)", stacklevel=2)
        return _live(thunk)[0]
    module, key = where
    store = _store(module)
    if _MODE == "use" and key in store:
        return store[key]
    value, recordable = _live(thunk)
    if _MODE == "record" and recordable:
        store[key] = value
        _dirty.add(module)
    elif _MODE == "verify" and key in store and recordable:
        _assert_same(value, store[key], f"{os.environ.get('PYTEST_CURRENT_TEST')}: recorded JAX result")
    return value


def _live(thunk: Callable[[], Any]) -> tuple[Any, bool]:
    value = thunk()
    _reject_ember(value)
    try:
        value = _to_numpy(value)
        if _MODE == "record" and len(pickle.dumps(value, protocol=4)) > _MAX_BYTES:
            return value, False  # (a big result stays live: the records are kept in the repository)
        return value, True
    except (_Unfingerprintable, pickle.PicklingError, AttributeError, TypeError):
        return value, False


def _reject_ember(value: Any, depth: int = 0) -> None:
    """A TypeError where JAX's result holds an ember value: the thunk ran ember (a test's bug), not the oracle."""
    if depth > 12:
        return
    if type(value).__module__.split(".")[0] == "ember":
        raise TypeError(f"jax_result: the JAX computation returned an ember value ({type(value).__name__}): the "
                        "thunk ran ember, not JAX (its record would compare ember with itself)")
    if type(value) in (tuple, list):
        for item in value:
            _reject_ember(item, depth + 1)
    elif type(value) is dict:
        for item in value.values():
            _reject_ember(item, depth + 1)


def _assert_same(live: Any, recorded: Any, what: str) -> None:
    if isinstance(live, (tuple, list, dict)) or isinstance(recorded, (tuple, list, dict)):
        assert type(live) is type(recorded) and len(live) == len(recorded), what
        items = live.items() if type(live) is dict else enumerate(live)
        for k, v in items:
            _assert_same(v, recorded[k], f"{what}[{k!r}]")
        return
    a, b = np.asarray(live), np.asarray(recorded)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {b.dtype}{b.shape} recorded, live JAX gives " \
        f"{a.dtype}{a.shape}: re-record the module (see tests/recorded.py)"
    if a.dtype.kind in "fc" and a.tobytes() != b.tobytes():
        # (another CPU's XLA may round the last bits otherwise: a record within a few ulps of live JAX is rounding,
        # one beyond them is stale; tests compare ember with it at their own, looser, tolerances)
        eps = float(np.finfo(a.dtype).eps)
        np.testing.assert_allclose(a, b, rtol=64 * eps, atol=64 * eps, equal_nan=True,
                                   err_msg=f"{what} differs from live JAX beyond rounding: re-record the module")
        return
    assert a.tobytes() == b.tobytes(), f"{what} differs from live JAX: re-record the module (see tests/recorded.py)"


@atexit.register
def _write() -> None:
    if not _dirty:
        return
    import fcntl
    os.makedirs(_DIR, exist_ok=True)
    with open(os.path.join(_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for module in sorted(_dirty):
            path = os.path.join(_DIR, module + ".pkl")
            merged = {}
            if os.path.exists(path):
                with open(path, "rb") as f:
                    merged = pickle.load(f)
            merged.update(_stores[module])
            with open(path + ".tmp", "wb") as f:
                pickle.dump(merged, f, protocol=4)
            os.replace(path + ".tmp", path)
