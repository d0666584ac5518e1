"""The persistent compilation cache: compiled programs kept in a directory, so that a later process loads them
instead of compiling them again (JAX's `jax_compilation_cache_dir`, with its option names).

Off by default; `ember.config.update("jax_compilation_cache_dir", path)` (or `$EMBER_COMPILATION_CACHE_DIR`,
`$JAX_COMPILATION_CACHE_DIR`) turns it on; the recommended path is a per-user one (`~/.cache/ember/xla`, or
`$XDG_CACHE_HOME/ember/xla`), never a directory others can write. An entry is the plugin's serialization of an
executable (PJRT_Executable_Serialize): machine code that a hit runs in this process. It is stored only when its
compile took at least `persistent_cache_min_compile_time_secs` (1 s, as JAX) and it is at least
`persistent_cache_min_entry_size_bytes` large (and at most MAX_ENTRY_BYTES).

Trust (docs/security.md): whoever can write the directory or an entry can run code in every process that uses it,
so the cache trusts its owner only. The directory (the one a path names, symbolic links on the way followed) must
be owned by this process's user and not writable by group or others, else it is refused: one warning for that
directory, and programs are compiled without the cache. A directory ember creates is made with mode 0o700. It is
opened once per lookup or store and every operation goes through that descriptor, so the directory checked is the
one used. An entry is refused (a miss, one warning) unless it is a regular file (never a symbolic link, a FIFO or a
device: looked at with lstat and opened with O_NOFOLLOW | O_NONBLOCK, so nothing is followed and nothing blocks),
owned by the user, not writable by group or others, and at most MAX_ENTRY_BYTES large (checked on the open
descriptor before anything is read).

Its name is a SHA-256 of everything that decides the executable: the entry format, the StableHLO text, the compile
options, the XLA flags the plugin read, the number of devices, the plugin (its path, API version, size and
modification time) and ember's version. Its content is a header (magic, format version, a SHA-256 of its key,
the payload's length, a SHA-256 of the header and payload) and the payload, so that a corrupt, truncated or
foreign file is recognised, and an entry renamed or swapped (another program's executable under this key's name)
is too: each is ignored with one warning per process, and the program compiled (and stored) again. Writes go to a
temporary file created in the directory (O_EXCL, mode 0o600), written, fsynced and renamed into place, then the
directory is fsynced (atomic and durable: several processes may read and write one directory at once; the last
writer of an entry wins, with equal content). Hits refresh the entry's modification time, and after each write
the directory is trimmed to `compilation_cache_max_size` bytes (1 GiB; -1: no limit), least recently used entries
first; temporary files that a killed writer left behind are removed when they are an hour old. A cache that cannot
be read or written (a file in the way, no permission, a full disk, a path with a NUL byte or too long) or that is
refused never fails a compile: it warns once and compiles.

Every compile of a program goes through here: one device's (compile_with_cache), one partitioned over several
devices by XLA's SPMD partitioner (compile_spmd_with_cache: the devices' ids and which outputs XLA places are in the
key, and a loaded executable must run on exactly those devices) and the partitions of a small SPMD program compiled
for their devices one by one (compile_hlo_with_cache)."""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import stat
import threading
import time
import warnings
from typing import Any, Callable

from ember._core import monitoring
from ember._core.config import config
from ember._runtime import pjrt as _pjrt
from ember._runtime.pjrt.structs import COMPILE_OPTIONS, one_device_compile_options, spmd_compile_options

MAGIC = b"ember-xla-executable\n"
FORMAT = 2  # 1: no key or length in the header (such entries have other names: the format is part of the key)
SUFFIX = ".ember-xla"
_TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 3600.0
_DIGEST = 32
_HEADER = len(MAGIC) + 1 + _DIGEST + 8 + _DIGEST  # magic, format, SHA-256 of the key, length, SHA-256 of the rest
MAX_ENTRY_BYTES = 256 << 20  # a larger entry is refused unread (and a larger executable is not stored)

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_warned: set[str] = set()  # the warnings given in this process (one per kind and directory)
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "stores": 0}  # this process's lookups and stores (for tests and users)


class CompilationCacheWarning(RuntimeWarning):
    """The persistent compilation cache refused or could not use a directory or an entry (the program is compiled
    instead)."""


def _warn_once(kind: str, message: str) -> None:
    if config.read_canonical("raise_persistent_cache_errors"):  # (jax_raise_persistent_cache_errors)
        raise RuntimeError(f"ember's persistent compilation cache: {message}")
    with _lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn(f"ember's persistent compilation cache: {message}", CompilationCacheWarning, stacklevel=4)


def plugin_identity(client: _pjrt.Client) -> str:
    """Which plugin a client runs (its path, API version, size and modification time, platform): an executable
    serialized by one plugin is loaded only by the same one."""
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


def entry_key(client: _pjrt.Client, text: str | bytes, overrides: bytes = b"") -> str:
    """The entry name (hex SHA-256) of a program's executable on this client (compiled with these XLA option
    overrides)."""
    digest = hashlib.sha256()
    for part in (f"ember {package_version()}", f"entry format {FORMAT}", plugin_identity(client),
                 os.environ.get("XLA_FLAGS", ""), f"devices {len(client.devices)}"):
        digest.update(part.encode() + b"\0")
    digest.update(COMPILE_OPTIONS + b"\0")
    if overrides:
        digest.update(overrides + b"\0")
    digest.update(text if isinstance(text, bytes) else text.encode())
    return digest.hexdigest()


def _header(key: str, payload: bytes) -> bytes:
    head = MAGIC + bytes([FORMAT]) + hashlib.sha256(key.encode()).digest() + len(payload).to_bytes(8, "little")
    checksum = hashlib.sha256(head)
    checksum.update(payload)
    return head + checksum.digest()


def encode_entry(key: str, payload: bytes) -> bytes:
    """An entry's content: the header (naming its key, and proving its integrity, not its provenance), then the
    payload."""
    return _header(key, payload) + payload


def _untrusted(info: os.stat_result) -> str | None:
    """Why a file or directory (its lstat or fstat) may not be trusted: its owner or its mode; None if it may."""
    uid = os.geteuid()
    if info.st_uid != uid:
        return f"is owned by uid {info.st_uid}, not by this process's user (uid {uid})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        who = " and ".join(name for bit, name in ((0o020, "group"), (0o002, "others")) if mode & bit)
        return f"is writable by {who} (mode {mode:04o})"
    return None


def _entry_problem(info: os.stat_result) -> tuple[str, str] | None:
    """(warning kind, why) an entry (its lstat or fstat) is refused before it is read; None if it is not."""
    if stat.S_ISLNK(info.st_mode):
        return "refused", "is a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a directory" if stat.S_ISDIR(info.st_mode) else \
            "a device or socket"
        return "refused", f"is not a regular file ({kind})"
    why = _untrusted(info)
    if why is not None:
        return "refused", why
    if info.st_size > MAX_ENTRY_BYTES:
        return "large", (f"is {info.st_size} bytes, more than an entry may be "
                         f"(ember._runtime.compile_cache.MAX_ENTRY_BYTES = {MAX_ENTRY_BYTES}); it is not read")
    return None


def _open_directory(directory: str, create: bool) -> int | None:
    """A descriptor of the cache directory when it exists (or, with create, was made) and may be trusted; None
    otherwise (absent without create: silently; unusable or refused: one warning per directory and process)."""
    kind = "directory:" + directory
    try:
        fd = os.open(directory, _DIRECTORY_FLAGS)
    except (FileNotFoundError, NotADirectoryError) as err:  # (absent: a miss; a file in its place warns on write)
        if not create:
            return None
        try:
            if isinstance(err, FileNotFoundError):
                _make_directories(directory)
            fd = os.open(directory, _DIRECTORY_FLAGS)
        except (OSError, ValueError) as err2:
            _warn_once(kind, f"cannot write {directory!r} ({err2}); programs are compiled but not stored")
            return None
    except (OSError, ValueError) as err:  # (no permission, a name too long, a NUL byte, ...)
        _warn_once(kind, f"cannot use {directory!r} as the cache directory ({err}); programs are compiled "
                         "without the cache")
        return None
    try:
        why = _untrusted(os.fstat(fd))
    except OSError as err:
        why = f"cannot be examined ({err})"
    if why is None:
        return fd
    os.close(fd)
    _warn_once(kind, f"refusing the cache directory {directory!r}: it {why}, and whoever can write it could run "
                     "code in this process (docs/security.md); programs are compiled without the cache. Use a "
                     "directory of your own that only you can write (chmod 700), e.g. ~/.cache/ember/xla")
    return None


def _make_directories(directory: str) -> None:
    """os.makedirs(directory, 0o700), without recursion (a path of thousands of levels fails with an OSError, not
    a RecursionError); every level made is 0o700."""
    missing = []
    path = directory
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if not parent or parent == path:
            break
        path = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # (another process made it; a file there fails on the next level or the open)
            pass


def _read_exactly(fd: int, size: int) -> bytes:
    """Up to size bytes (fewer only at the end of the file)."""
    parts = []
    while size > 0:
        chunk = os.read(fd, size)  # (a regular file: normally all of it at once)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read(directory: str, key: str) -> bytes | None:
    """The payload of the entry for key, or None (a miss; an entry that is refused or invalid warns once)."""
    dfd = _open_directory(directory, create=False)
    if dfd is None:
        return None
    try:
        return _read_entry(dfd, directory, key)
    finally:
        os.close(dfd)


def _read_entry(dfd: int, directory: str, key: str) -> bytes | None:
    name = key + SUFFIX
    path = os.path.join(directory, name)

    def refuse(kind: str, why: str) -> None:
        _warn_once(f"{kind}:{directory}", f"refusing the entry {path}: it {why}; the program is compiled instead")

    try:
        problem = _entry_problem(os.stat(name, dir_fd=dfd, follow_symlinks=False))  # (never open a FIFO/device)
        if problem is not None:
            refuse(*problem)
            return None
        fd = os.open(name, _ENTRY_FLAGS, dir_fd=dfd)
    except FileNotFoundError:  # (a miss)
        return None
    except (OSError, ValueError) as err:  # (ELOOP: replaced by a symbolic link since)
        _warn_once(f"read:{directory}", f"cannot read {path} ({err}); compiling instead")
        return None
    try:
        info = os.fstat(fd)  # (the file opened is the one checked)
        problem = _entry_problem(info)
        if problem is not None:
            refuse(*problem)
            return None
        head = _read_exactly(fd, min(_HEADER, info.st_size))
        length = int.from_bytes(head[_HEADER - _DIGEST - 8:_HEADER - _DIGEST], "little")
        payload = None
        if (len(head) == _HEADER and head.startswith(MAGIC) and head[len(MAGIC)] == FORMAT
                and length == info.st_size - _HEADER):
            payload = _read_exactly(fd, length)
            checksum = hashlib.sha256(head[:-_DIGEST])
            checksum.update(payload)
            if len(payload) != length or checksum.digest() != head[-_DIGEST:]:
                payload = None
        if payload is None:
            _warn_once(f"corrupt:{directory}", f"{path} is not a valid entry (corrupt, truncated or of another "
                                               "format); it is compiled and stored again")
            return None
        if head[len(MAGIC) + 1:len(MAGIC) + 1 + _DIGEST] != hashlib.sha256(key.encode()).digest():
            _warn_once(f"key:{directory}", f"{path} holds another program's executable (its header names another "
                                           "key: a renamed or swapped entry); it is not loaded, and the program is "
                                           "compiled and stored again")
            return None
        try:
            os.utime(fd)  # (least recently used: a hit makes the entry recent)
        except OSError:
            pass
        return payload
    except OSError as err:
        _warn_once(f"read:{directory}", f"cannot read {path} ({err}); compiling instead")
        return None
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write(directory: str, key: str, payload: bytes) -> None:
    """Store payload as the entry for key (not when it is larger than MAX_ENTRY_BYTES), then trim the directory."""
    if _HEADER + len(payload) > MAX_ENTRY_BYTES:
        return
    dfd = _open_directory(directory, create=True)
    if dfd is None:
        return
    try:
        name = key + SUFFIX
        temp = f"{_TEMP_PREFIX}{os.getpid()}-{os.urandom(8).hex()}"
        try:
            fd = os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=dfd)
            try:
                try:
                    _write_all(fd, _header(key, payload))
                    _write_all(fd, payload)
                    os.fsync(fd)  # (the content is on disk before its name is)
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                _remove(dfd, temp)
                raise
        except (OSError, ValueError) as err:
            _warn_once(f"write:{directory}", f"cannot write {os.path.join(directory, name)} ({err}); programs are "
                                             "compiled but not stored")
            return
        try:
            os.fsync(dfd)  # (the rename is on disk)
        except OSError:  # (a file system that cannot sync a directory: the entry is in place all the same)
            pass
        stats["stores"] += 1
        _trim(dfd)
    finally:
        os.close(dfd)


def _trim(dfd: int) -> None:
    """Remove least recently used entries until the directory is within compilation_cache_max_size, and
    temporary files a killed writer left behind."""
    limit = config.read_canonical("compilation_cache_max_size")
    now = time.time()
    entries = []
    try:
        with os.scandir(dfd) as it:
            for item in it:
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue
                if item.name.startswith(_TEMP_PREFIX):
                    if now - info.st_mtime > _STALE_TEMP_SECONDS:
                        _remove(dfd, item.name)
                elif item.name.endswith(SUFFIX):
                    entries.append((info.st_mtime, info.st_size, item.name))
    except OSError:
        return
    if limit < 0:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, name in sorted(entries):
        if total <= limit:
            break
        _remove(dfd, name)
        total -= size


def _remove(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:  # (another process removed it first)
        pass


def reset() -> None:
    """This process's cache state as a fresh process has it: no warnings given yet, no lookups counted, and the
    next compile using the cache the first (ember.experimental.compilation_cache's reset_cache)."""
    _warned.clear()
    stats.update(hits=0, misses=0, stores=0)
    monitoring.reset_cache_use()


def compile_with_cache(client: _pjrt.Client, text: str, overrides: bytes = b"") -> Any:
    """client.compile(text, overrides), through the persistent cache when a directory is set."""
    return _through_cache(client, text, overrides, lambda payload: client.deserialize(payload, text),
                          lambda: client.compile(text, overrides) if overrides else client.compile(text))


def compile_spmd_with_cache(client: _pjrt.Client, text: str, devices: list[Any], propagate_to_outputs: list[bool]
                            ) -> Any:
    """client.compile_spmd(...) (a program partitioned over devices), through the persistent cache when a directory
    is set: keyed by its compile options too (the devices' ids, which outputs XLA places), and loaded only onto
    the devices it was compiled for."""
    options = spmd_compile_options([d.id for d in devices], propagate_to_outputs)
    return _through_cache(client, text, b"spmd\0" + options,
                          lambda payload: client.deserialize(payload, text, list(devices)),
                          lambda: client.compile_spmd(text, list(devices), propagate_to_outputs))


def compile_hlo_with_cache(client: _pjrt.Client, module: bytes, device: Any) -> Any:
    """client.compile_hlo_for(module, device) (one partition of an SPMD program, compiled on its own for its
    device), through the persistent cache when a directory is set; an entry is used only on the device it was
    compiled for."""
    def load(payload: bytes) -> Any:
        executable = client.deserialize(payload, module)
        if executable._device is not device:
            raise _pjrt.PjrtError(f"the entry's executable runs on device {executable._device.id}, not {device.id}")
        return executable
    return _through_cache(client, module, b"hlo\0" + one_device_compile_options(device.id), load,
                          lambda: client.compile_hlo_for(module, device))


def _through_cache(client: _pjrt.Client, text: str | bytes, overrides: bytes, load: Callable[[bytes], Any],
                   compile_now: Callable[[], Any]) -> Any:
    """compile_now(), or the executable the cache holds for (text, overrides) on this client, loaded by load (a
    PjrtError: the entry is compiled and stored again); stored after a compile long enough."""
    directory = config.read_canonical("compilation_cache_dir")
    if directory is None or not config.read_canonical("enable_compilation_cache"):
        return compile_now()
    monitoring.record_cache_use()
    start = time.perf_counter()
    key = entry_key(client, text, overrides)
    payload = _read(directory, key)
    if payload is not None:
        try:
            executable = load(payload)
        except _pjrt.PjrtError as err:
            _warn_once(f"load:{directory}", f"the plugin could not load the entry {key}{SUFFIX} ({err}); it is "
                                            "compiled and stored again")
        else:
            stats["hits"] += 1
            monitoring.record_event(monitoring.CACHE_EVENT + "cache_hits")
            monitoring.record_event_duration_secs(monitoring.CACHE_EVENT + "cache_retrieval_time_sec",
                                                  time.perf_counter() - start)
            return executable
    stats["misses"] += 1
    monitoring.record_event(monitoring.CACHE_EVENT + "cache_misses")
    start = time.perf_counter()
    executable = compile_now()
    if time.perf_counter() - start >= config.read_canonical("persistent_cache_min_compile_time_secs"):
        try:
            payload = executable.serialize()
        except _pjrt.PjrtError as err:
            _warn_once("serialize", f"the plugin could not serialize an executable ({err})")
            return executable
        if len(payload) >= config.read_canonical("persistent_cache_min_entry_size_bytes"):
            _write(directory, key, payload)
    return executable


__all__ = ["CompilationCacheWarning", "MAX_ENTRY_BYTES", "compile_spmd_with_cache", "compile_with_cache",
           "encode_entry", "entry_key", "package_version", "plugin_identity", "reset", "stats"]
