"""Checkpoints: any pytree of arrays (a dict of parameters, a Module, an optimizer state, a typed PRNG key) saved
to and loaded from a safetensors file.

Key layout: each leaf is stored under its key path, the path's entries joined with "/": a dict key as its str
(it must not contain "/"), a list or tuple index as its number, an attribute (a Module's or NamedTuple's field)
as its name, the position of a child of another registered node as its number. So
`{"encoder": [Linear(...)], "step": 3}` stores "encoder/0/weight", "encoder/0/bias" and "step". Every dtype ember
has is stored in safetensors' own types (bfloat16 as BF16), so other safetensors readers (PyTorch, JAX) read the
file. The file's metadata holds ember's format version and whatever you pass as metadata.

`load(path, target)` checks the file against target (the same names; for each leaf the same shape and dtype) and
says what differs, naming the leaf; it returns target's structure (a Module stays a Module) with the file's
values. `load(path)` returns a flat {name: Array} dict.

Errors name the function, the path and what is wrong: a file that is not a readable checkpoint (corrupted,
truncated, not safetensors) raises `CheckpointError` (a `ValueError`); a directory given as a path, or a write
that fails (file size limit, disk full), raises the `OSError` of its errno with the path as its filename.
`save` writes the safetensors format itself (the header, then each array streamed from memory, fsynced; the
safetensors package's writer makes its own anonymous 0600 temporary file) to a temporary file
`.ember-checkpoint-<pid>@<host>-<token>.tmp` beside the target (created with mode
0666 less the umask, as `open` and `numpy.save` do), renames it into place, and first removes the temporary
files of earlier saves in that directory whose writer is gone (a dead process on this host, or no write for
`STALE_AFTER_S` seconds)."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import socket
import struct
import time
from typing import Any, Iterator

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file

from ember import numpy as enp
from ember._core.pytree import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, tree_flatten_with_path
from ember._core.dtypes import canonicalize_dtype
from ember._core.pytree import tree_unflatten

FORMAT = "ember.checkpoint/1"
TEMP_PREFIX = ".ember-checkpoint-"
STALE_AFTER_S = 3600.0  # a temporary file not written for this long belongs to a writer that is gone
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)@(.+)-[0-9a-f]{16}\.tmp")
_OS_ERROR_CODE = re.compile(r"os error (\d+)")


class CheckpointError(ValueError):
    """A file that is not a readable ember checkpoint (corrupted, truncated or not a safetensors file)."""


def _os_error(code: int, function: str, what: str, path: str) -> OSError:
    """The OSError subclass of errno code (OSError picks it), naming the function and the path."""
    return OSError(code, f"ember.checkpoints.{function}: {what}: {os.strerror(code)}", path)


def _translated(err: BaseException, function: str, path: str, what: str) -> BaseException:
    """safetensors' error as ember's: an OSError when it reports an errno, else a CheckpointError."""
    if isinstance(err, OSError) and err.errno is not None:
        return _os_error(err.errno, function, what, path)
    found = _OS_ERROR_CODE.search(str(err))  # safetensors' I/O errors: "... (os error 27)"
    if found:
        return _os_error(int(found.group(1)), function, what, path)
    return CheckpointError(f"ember.checkpoints.{function}: {path!r} is not a readable checkpoint (corrupted, "
                           f"truncated or not a safetensors file): {err}")


@contextlib.contextmanager
def _reporting(function: str, path: str, what: str) -> Iterator[None]:
    try:
        yield
    except (SafetensorError, OSError) as err:
        raise _translated(err, function, path, what) from err


def _readable_path(function: str, path: str | os.PathLike[str]) -> str:
    path = os.fspath(path)
    if os.path.isdir(path):
        raise _os_error(errno.EISDIR, function, "expected a checkpoint file, got a directory", path)
    if not os.path.exists(path):
        raise _os_error(errno.ENOENT, function, "no checkpoint at this path", path)
    return path


def _entry(key: Any) -> str:
    if isinstance(key, DictKey):
        text = str(key.key)
        if "/" in text:
            raise ValueError(f"ember.checkpoints: dict key {key.key!r} contains '/', the separator of the key layout")
        return text
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def _named_leaves(tree: Any) -> tuple[list[tuple[str, Any]], Any]:
    leaves, treedef = tree_flatten_with_path(tree)
    named = [("/".join(_entry(k) for k in path) or "value", leaf) for path, leaf in leaves]
    seen: set[str] = set()
    for name, _ in named:
        if name in seen:
            raise ValueError(f"ember.checkpoints: two leaves share the name {name!r}")
        seen.add(name)
    return named, treedef


def _host(name: str, leaf: Any) -> np.ndarray:
    try:
        array = np.asarray(leaf)
        return array if array.flags.c_contiguous else array.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    except Exception as err:  # noqa: BLE001 - a tracer or an object
        raise TypeError(f"ember.checkpoints.save: leaf {name!r} ({type(leaf).__name__}) is not an array: {err}") \
            from None


# numpy dtype name -> safetensors dtype name
_SAFETENSORS_DTYPES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16",
                       "float16": "F16", "bfloat16": "BF16", "uint32": "U32", "int32": "I32", "float32": "F32",
                       "uint64": "U64", "int64": "I64", "float64": "F64"}


def _stored_arrays(named: list[tuple[str, Any]]) -> list[tuple[str, np.ndarray]]:
    """The leaves as little-endian C-contiguous host arrays, largest itemsize first (each stays aligned in the
    file, as safetensors orders them)."""
    arrays = []
    for name, leaf in named:
        array = _host(name, leaf)
        if array.dtype.name not in _SAFETENSORS_DTYPES:
            raise TypeError(f"ember.checkpoints.save: leaf {name!r} has dtype {array.dtype}, which safetensors "
                            "cannot store")
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        arrays.append((name, array))
    return sorted(arrays, key=lambda item: (-item[1].dtype.itemsize, item[0]))


def _header(arrays: list[tuple[str, np.ndarray]], info: dict[str, str]) -> bytes:
    """safetensors' header: its length (8 bytes, little-endian), then JSON padded with spaces to 8 bytes."""
    entries: dict[str, Any] = {"__metadata__": info}
    offset = 0
    for name, array in arrays:
        entries[name] = {"dtype": _SAFETENSORS_DTYPES[array.dtype.name], "shape": list(array.shape),
                         "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def _write_file(fd: int, arrays: list[tuple[str, np.ndarray]], info: dict[str, str]) -> None:
    with os.fdopen(fd, "wb") as f:
        f.write(_header(arrays, info))
        for _, array in arrays:
            f.write(memoryview(array.reshape(-1).view(np.uint8)))
        f.flush()
        os.fsync(f.fileno())


def save(path: str | os.PathLike[str], tree: Any, *, metadata: dict[str, str] | None = None) -> None:
    """Save a pytree of arrays to a safetensors file (written to a temporary file, then renamed into place)."""
    named, _ = _named_leaves(tree)
    arrays = _stored_arrays(named)
    info = {"format": FORMAT}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"ember.checkpoints.save: metadata must map str to str, got {key!r}: {value!r}")
        info[key] = value
    path = os.fspath(path)
    if os.path.isdir(path):
        raise _os_error(errno.EISDIR, "save", "expected a file name, got a directory", path)
    directory = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(directory)
    tmp = os.path.join(directory, _temporary_name())
    with _reporting("save", path, f"cannot create a temporary file in {directory!r}"):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0666 less the umask, as open() gives
    try:
        with _reporting("save", path, f"writing the checkpoint (temporary file {os.path.basename(tmp)!r}) failed"):
            _write_file(fd, arrays, info)
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _temporary_name() -> str:
    return f"{TEMP_PREFIX}{os.getpid()}@{socket.gethostname()}-{secrets.token_hex(8)}.tmp"


def _writer_is_gone(name: str, modified: float) -> bool:
    if time.time() - modified > STALE_AFTER_S:
        return True
    found = _TEMP_NAME.fullmatch(name)
    if found is None or found.group(2) != socket.gethostname():
        return False
    try:
        os.kill(int(found.group(1)), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, another user's
        return False
    return False


def _remove_stale_temporaries(directory: str) -> None:
    """Removes the temporary files of interrupted saves in directory (those whose writer is gone)."""
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(TEMP_PREFIX) and e.is_file()]
    except OSError:  # save reports an unusable directory when it creates its own temporary file
        return
    for entry in entries:
        try:
            if _writer_is_gone(entry.name, entry.stat().st_mtime):
                os.remove(entry.path)
        except FileNotFoundError:  # removed meanwhile by another saver
            continue


def metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The metadata stored in a checkpoint."""
    path = _readable_path("metadata", path)
    with _reporting("metadata", path, "reading the checkpoint failed"), safe_open(path, framework="numpy") as f:
        return dict(f.metadata() or {})


def load(path: str | os.PathLike[str], target: Any = None) -> Any:
    """The checkpoint's arrays: in target's structure (checked leaf by leaf), or as a flat {name: Array} dict."""
    path = _readable_path("load", path)
    with _reporting("load", path, "reading the checkpoint failed"):
        stored = load_file(path)
    if target is None:
        return {name: enp.asarray(value) for name, value in stored.items()}
    named, treedef = _named_leaves(target)
    wanted = [name for name, _ in named]
    missing = [n for n in wanted if n not in stored]
    extra = [n for n in stored if n not in set(wanted)]
    if missing or extra:
        raise ValueError(f"ember.checkpoints.load({path!r}): the checkpoint's leaves differ from target's: "
                         f"missing from the file {missing}, in the file but not in target {extra}")
    values = []
    for name, leaf in named:
        value = stored[name]
        shape, dtype = tuple(np.shape(leaf)), np.dtype(getattr(leaf, "dtype", np.asarray(leaf).dtype))
        # (dtypes compared as ember holds them: a float64 leaf is float32 without enable_x64, in the file or target)
        if tuple(value.shape) != shape or canonicalize_dtype(value.dtype) != canonicalize_dtype(dtype):
            raise ValueError(f"ember.checkpoints.load({path!r}): leaf {name!r} is {value.dtype}{list(value.shape)} "
                             f"in the file but {dtype}{list(shape)} in target")
        values.append(enp.asarray(value))
    return tree_unflatten(treedef, values)


__all__ = ["FORMAT", "STALE_AFTER_S", "CheckpointError", "load", "metadata", "save"]
