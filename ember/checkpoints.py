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

A checkpoint is data from outside the process: `load` and `metadata` read the safetensors format themselves, from
one open file (a regular file: a FIFO or a device is refused without blocking), and check every field of the
header before reading any data (docs/security.md): a header of at most `MAX_HEADER_BYTES`, UTF-8 JSON of one
object with no name twice; metadata mapping str to str; each tensor an object of exactly dtype, shape and
data_offsets, its dtype one ember reads, its shape at most `MAX_DIMS` (numpy's limit) non-negative integers, its
offsets integers within the data whose span is the shape's bytes, the tensors covering the data without overlap
or gap (as the safetensors format requires). A failed check is a `CheckpointError` naming the file and the tensor.

`save` writes the safetensors format itself (the header, then each array streamed from memory, fsynced; the
safetensors package's writer makes its own anonymous 0600 temporary file) to a new temporary file
`.ember-checkpoint-<pid>@<host>-<token>.tmp` beside the target (a random token, created with O_EXCL and mode
0666 less the umask, as `open` and `numpy.save` do), renames it into place, and first removes this user's
temporary files of earlier saves in that directory whose writer is gone (a dead process on this host, or no write
for `STALE_AFTER_S` seconds); another user's are left alone (in a shared directory they are not ours to remove)."""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import secrets
import socket
import stat
import struct
import time
from typing import Any, Callable, Iterator, NamedTuple, NoReturn

import numpy as np

from ember import numpy as enp
from ember._core.pytree import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, tree_flatten_with_path
from ember._core.dtypes import bfloat16, canonicalize_dtype
from ember._core.pytree import tree_unflatten

FORMAT = "ember.checkpoint/1"
TEMP_PREFIX = ".ember-checkpoint-"
STALE_AFTER_S = 3600.0  # a temporary file not written for this long belongs to a writer that is gone
MAX_HEADER_BYTES = 100_000_000  # (safetensors' own limit)
MAX_DIMS = 64  # (numpy's)
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)@(.+)-[0-9a-f]{16}\.tmp")


class CheckpointError(ValueError):
    """A file that is not a readable ember checkpoint (corrupted, truncated or not a safetensors file)."""


def _os_error(code: int, function: str, what: str, path: str) -> OSError:
    """The OSError subclass of errno code (OSError picks it), naming the function and the path."""
    return OSError(code, f"ember.checkpoints.{function}: {what}: {os.strerror(code)}", path)


def _unreadable(function: str, path: str, why: str) -> CheckpointError:
    return CheckpointError(f"ember.checkpoints.{function}: {path!r} is not a readable checkpoint (corrupted, "
                           f"truncated or not a safetensors file): {why}")


@contextlib.contextmanager
def _reporting(function: str, path: str, what: str) -> Iterator[None]:
    """An OSError of the block as one naming the function and the path (with its errno)."""
    try:
        yield
    except OSError as err:
        if err.errno is None:
            raise
        raise _os_error(err.errno, function, what, path) from err


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
    with _reporting("save", path, f"cannot create a temporary file in {directory!r}"):
        tmp, fd = _new_temporary(directory)
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


def _new_temporary(directory: str) -> tuple[str, int]:
    """A new temporary file in directory, open for writing: a fresh random name each try, so that no file already
    there (another writer's, live or stale, of any user) can stand in the way."""
    for _ in range(16):
        tmp = os.path.join(directory, _temporary_name())
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0666 less the umask, as open()
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "16 random temporary names were all taken", directory)


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
    """Removes this user's temporary files of interrupted saves in directory (those whose writer is gone). Another
    user's are not ours to remove (in a shared directory, as /tmp, we could not): they never block a save, which
    writes under a new name."""
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(TEMP_PREFIX)]
    except OSError:  # save reports an unusable directory when it creates its own temporary file
        return
    uid = os.geteuid()
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_uid == uid and _writer_is_gone(entry.name, info.st_mtime):
                os.remove(entry.path)
        except OSError:  # removed meanwhile by another saver, or not ours to remove after all: leave it
            continue


# ---------------------------------------------------------------------------------------------------------------
# Reading: every field of the header checked before any data is read
_NUMPY_DTYPES = {code: bfloat16 if name == "bfloat16" else np.dtype(name).newbyteorder("<")
                 for name, code in _SAFETENSORS_DTYPES.items()}  # safetensors dtype code -> little-endian dtype


class _Tensor(NamedTuple):
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    begin: int  # (offsets into the data, which starts after the header)
    end: int


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the header names {key!r} twice")
        found[key] = value
    return found


def _open(function: str, path: str) -> Any:
    """path opened for reading: a regular file (a FIFO or a device is refused, never waited on)."""
    with _reporting(function, path, "cannot open the checkpoint"):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _unreadable(function, path, "not a regular file")
        return os.fdopen(fd, "rb")


def _read_header(function: str, path: str, f: Any) -> tuple[dict[str, str], list[_Tensor], int]:
    """The checkpoint's metadata, its tensors, and where its data starts in the file; each field checked."""
    def bad(why: str) -> NoReturn:
        raise _unreadable(function, path, why)

    size = os.fstat(f.fileno()).st_size
    head = f.read(8)
    if len(head) < 8:
        bad(f"{size} bytes, too short for the header's length (8 bytes)")
    length = struct.unpack("<Q", head)[0]
    if length > MAX_HEADER_BYTES or 8 + length > size:
        bad(f"a header of {length} bytes, in a file of {size} bytes (at most {MAX_HEADER_BYTES} are read)")
    try:
        header = json.loads(f.read(length).decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        bad(f"the header is not JSON: {err}")
    if not isinstance(header, dict):
        bad(f"the header is a JSON {type(header).__name__}, not an object")
    info = header.pop("__metadata__", None)
    info = {} if info is None else info
    if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
        bad("the header's __metadata__ does not map str to str")
    data = size - 8 - length
    tensors = [_tensor(bad, name, entry, data) for name, entry in header.items()]
    covered, last = 0, None
    for t in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if t.begin != covered:
            where = f"overlaps tensor {last.name!r}" if t.begin < covered and last else "leaves a gap before it"
            bad(f"tensor {t.name!r} (data_offsets [{t.begin}, {t.end}]) {where}")
        covered, last = t.end, t
    if covered != data:
        bad(f"the tensors cover {covered} bytes of data, but the file has {data} after the header")
    return info, tensors, 8 + length


def _tensor(bad: Callable[[str], NoReturn], name: str, entry: Any, data: int) -> _Tensor:
    """A header entry, checked: a dtype ember reads, a shape numpy can hold, offsets in range spanning its bytes."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        bad(f"tensor {name!r}: an entry is an object of dtype, shape and data_offsets, got {keys}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(code, str) or code not in _NUMPY_DTYPES:
        bad(f"tensor {name!r} has the dtype code {code!r}, not one of the safetensors dtypes ember reads "
            f"({', '.join(sorted(_NUMPY_DTYPES))})")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        bad(f"tensor {name!r} has the shape {shape!r}, not a list of non-negative integers")
    if len(shape) > MAX_DIMS:
        bad(f"tensor {name!r} has {len(shape)} dimensions, more than the {MAX_DIMS} an array can have")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        bad(f"tensor {name!r} has the data_offsets {offsets!r}, not two integers")
    begin, end = offsets
    if not 0 <= begin <= end <= data:
        bad(f"tensor {name!r} has the data_offsets [{begin}, {end}], outside the file's {data} bytes of data")
    dtype = _NUMPY_DTYPES[code]
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != end - begin:
        bad(f"tensor {name!r} is {code}{shape}, {nbytes} bytes, but its data_offsets [{begin}, {end}] span "
            f"{end - begin}")
    return _Tensor(name, dtype, tuple(shape), begin, end)


def _read(function: str, path: str) -> dict[str, np.ndarray]:
    """The checkpoint's arrays, read after its header is checked."""
    with _open(function, path) as f, _reporting(function, path, "reading the checkpoint failed"):
        _, tensors, start = _read_header(function, path, f)
        arrays = {}
        for t in tensors:
            array = np.empty(t.shape, t.dtype)
            f.seek(start + t.begin)
            if f.readinto(array.reshape(-1).view(np.uint8)) != t.end - t.begin:
                raise _unreadable(function, path, f"tensor {t.name!r}: the file ended while reading it")
            arrays[t.name] = array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))
        return arrays


def metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The metadata stored in a checkpoint (its header is checked whole)."""
    path = _readable_path("metadata", path)
    with _open("metadata", path) as f, _reporting("metadata", path, "reading the checkpoint failed"):
        return _read_header("metadata", path, f)[0]


def load(path: str | os.PathLike[str], target: Any = None) -> Any:
    """The checkpoint's arrays: in target's structure (checked leaf by leaf), or as a flat {name: Array} dict."""
    path = _readable_path("load", path)
    stored = _read("load", path)
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


__all__ = ["FORMAT", "MAX_DIMS", "MAX_HEADER_BYTES", "STALE_AFTER_S", "CheckpointError", "load", "metadata",
           "save"]
