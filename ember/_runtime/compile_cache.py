"""The persistent compilation cache: compiled programs kept in a directory, so that a later process loads them
instead of compiling them again (JAX's `jax_compilation_cache_dir`, with its option names).

Off by default; `ember.config.update("jax_compilation_cache_dir", path)` (or `$EMBER_COMPILATION_CACHE_DIR`,
`$JAX_COMPILATION_CACHE_DIR`) turns it on. An entry is the plugin's serialization of an executable
(PJRT_Executable_Serialize), stored only when its compile took at least `persistent_cache_min_compile_time_secs`
(1 s, as JAX) and it is at least `persistent_cache_min_entry_size_bytes` large.

Its name is a SHA-256 of everything that decides the executable: the StableHLO text, the compile options, the XLA
flags the plugin read, the number of devices, the plugin (its path, API version, size and modification time) and
ember's version. Its content is a header (magic, format version, a SHA-256 of the payload) and the payload, so
that a corrupt, truncated or foreign file is recognised: it is ignored with one warning per process, and the
program compiled (and stored) again. Writes go to a temporary file that is renamed into place (atomic: several
processes may read and write one directory at once; the last writer of an entry wins, with equal content). Hits
refresh the entry's modification time, and after each write the directory is trimmed to
`compilation_cache_max_size` bytes (1 GiB; -1: no limit), least recently used entries first; temporary files that
a killed writer left behind are removed when they are an hour old. A cache that cannot be read or written (a
file in the way, no permission, a full disk) never fails a compile: it warns once and compiles."""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
import threading
import time
import warnings
from typing import Any

from ember._core.config import config
from ember._runtime import pjrt as _pjrt
from ember._runtime.pjrt.structs import COMPILE_OPTIONS

MAGIC = b"ember-xla-executable\n"
FORMAT = 1
SUFFIX = ".ember-xla"
_TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 3600.0
_HEADER = len(MAGIC) + 1 + 32  # magic, format version, SHA-256 of the payload

_warned: set[str] = set()  # the kinds of warning given in this process (one each)
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "stores": 0}  # this process's lookups and stores (for tests and users)


def _warn_once(kind: str, message: str) -> None:
    with _lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn(f"ember's persistent compilation cache: {message}", RuntimeWarning, stacklevel=4)


def _plugin_identity(client: _pjrt.Client) -> str:
    plugin = client.plugin
    try:
        info = os.stat(plugin.path)
        stamp = f"{info.st_size}:{info.st_mtime_ns}"
    except OSError:
        stamp = "?"
    return f"{os.path.realpath(plugin.path)}|{plugin.api_version}|{stamp}|{client.platform_name}"


def package_version(name: str = "ember", missing: str = "unknown") -> str:
    """The installed version of a package (ember's keys cache entries and is written into exported artifacts), or
    missing where it is not installed (ember run from a source tree that is not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return missing


def entry_key(client: _pjrt.Client, text: str) -> str:
    """The entry name (hex SHA-256) of a program's executable on this client."""
    digest = hashlib.sha256()
    for part in (f"ember {package_version()}", _plugin_identity(client), os.environ.get("XLA_FLAGS", ""),
                 f"devices {len(client.devices)}"):
        digest.update(part.encode() + b"\0")
    digest.update(COMPILE_OPTIONS + b"\0")
    digest.update(text.encode())
    return digest.hexdigest()


def _read(directory: str, key: str) -> bytes | None:
    path = os.path.join(directory, key + SUFFIX)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):  # (a miss; a file in the directory's place warns on write)
        return None
    except OSError as err:
        _warn_once("read", f"cannot read {path} ({err}); compiling instead")
        return None
    payload = data[_HEADER:]
    if (not data.startswith(MAGIC) or data[len(MAGIC)] != FORMAT
            or data[len(MAGIC) + 1:_HEADER] != hashlib.sha256(payload).digest()):
        _warn_once("corrupt", f"{path} is not a valid entry (corrupt, truncated or of another format); it is "
                              "compiled and stored again")
        return None
    try:
        os.utime(path)  # (least recently used: a hit makes the entry recent)
    except OSError:
        pass
    return payload


def _write(directory: str, key: str, payload: bytes) -> None:
    path = os.path.join(directory, key + SUFFIX)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + bytes([FORMAT]) + hashlib.sha256(payload).digest())
                f.write(payload)
            os.replace(temp, path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
    except OSError as err:
        _warn_once("write", f"cannot write {path} ({err}); programs are compiled but not stored")
        return
    stats["stores"] += 1
    _trim(directory)


def _trim(directory: str) -> None:
    """Remove least recently used entries until the directory is within compilation_cache_max_size, and
    temporary files a killed writer left behind."""
    limit = config.read_canonical("compilation_cache_max_size")
    now = time.time()
    entries = []
    try:
        with os.scandir(directory) as it:
            for item in it:
                try:
                    info = item.stat()
                except OSError:
                    continue
                if item.name.startswith(_TEMP_PREFIX):
                    if now - info.st_mtime > _STALE_TEMP_SECONDS:
                        _remove(item.path)
                elif item.name.endswith(SUFFIX):
                    entries.append((info.st_mtime, info.st_size, item.path))
    except OSError:
        return
    if limit < 0:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        _remove(path)
        total -= size


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # (another process removed it first)
        pass


def compile_with_cache(client: _pjrt.Client, text: str) -> Any:
    """client.compile(text), through the persistent cache when a directory is set."""
    directory = config.read_canonical("compilation_cache_dir")
    if directory is None:
        return client.compile(text)
    key = entry_key(client, text)
    payload = _read(directory, key)
    if payload is not None:
        try:
            executable = client.deserialize(payload, text)
        except _pjrt.PjrtError as err:
            _warn_once("load", f"the plugin could not load the entry {key}{SUFFIX} ({err}); it is compiled and "
                               "stored again")
        else:
            stats["hits"] += 1
            return executable
    stats["misses"] += 1
    start = time.perf_counter()
    executable = client.compile(text)
    if time.perf_counter() - start >= config.read_canonical("persistent_cache_min_compile_time_secs"):
        try:
            payload = executable.serialize()
        except _pjrt.PjrtError as err:
            _warn_once("serialize", f"the plugin could not serialize an executable ({err})")
            return executable
        if len(payload) >= config.read_canonical("persistent_cache_min_entry_size_bytes"):
            _write(directory, key, payload)
    return executable


__all__ = ["compile_with_cache", "entry_key", "package_version", "stats"]
