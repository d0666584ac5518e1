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
values. `load(path)` returns a flat {name: Array} dict."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from ember import numpy as enp
from ember._core.pytree import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, tree_flatten_with_path
from ember._core.pytree import tree_unflatten

FORMAT = "ember.checkpoint/1"


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


def save(path: str | os.PathLike[str], tree: Any, *, metadata: dict[str, str] | None = None) -> None:
    """Save a pytree of arrays to a safetensors file (written to a temporary file, then renamed into place)."""
    named, _ = _named_leaves(tree)
    tensors = {}
    for name, leaf in named:
        array = _host(name, leaf)
        if array.dtype.kind not in "biuf" and array.dtype.name != "bfloat16":
            raise TypeError(f"ember.checkpoints.save: leaf {name!r} has dtype {array.dtype}, which safetensors "
                            "cannot store")
        tensors[name] = array
    info = {"format": FORMAT}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"ember.checkpoints.save: metadata must map str to str, got {key!r}: {value!r}")
        info[key] = value
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ember-checkpoint-")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=info)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The metadata stored in a checkpoint."""
    with safe_open(os.fspath(path), framework="numpy") as f:
        return dict(f.metadata() or {})


def load(path: str | os.PathLike[str], target: Any = None) -> Any:
    """The checkpoint's arrays: in target's structure (checked leaf by leaf), or as a flat {name: Array} dict."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"ember.checkpoints.load: no checkpoint at {path!r}")
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
        if tuple(value.shape) != shape or value.dtype != dtype:
            raise ValueError(f"ember.checkpoints.load({path!r}): leaf {name!r} is {value.dtype}{list(value.shape)} "
                             f"in the file but {dtype}{list(shape)} in target")
        values.append(enp.asarray(value))
    return tree_unflatten(treedef, values)


__all__ = ["FORMAT", "load", "metadata", "save"]
