"""A bounded cache: every cache ember keeps (eager executables, compiled signatures, vjp plans) has a limit."""
from __future__ import annotations

from collections import OrderedDict
import threading
import weakref
from typing import Any, Callable, Hashable

from ember._core.config import config


class LRUCache(OrderedDict):
    """A dict holding at most maxsize entries: storing one more drops the least recently used. maxsize is a number,
    or the name of an `ember.config` option (`config.update` of it trims live caches at once; stores read it).
    Lookups and stores are safe from several threads."""

    def __init__(self, maxsize: int | str):
        super().__init__()
        self._maxsize = maxsize
        self._lock = threading.RLock()  # reentrant: dropping an entry may run finalizers that touch caches
        _caches.add(self)
        if isinstance(maxsize, str) and maxsize not in _sized_by:
            _sized_by.add(maxsize)
            config.on_change(maxsize, lambda limit, option=maxsize: _trim_caches(option, limit))

    @property
    def maxsize(self) -> int:
        return config.read(self._maxsize) if isinstance(self._maxsize, str) else self._maxsize

    def lookup(self, key: Hashable) -> Any:
        """The value for key (None if absent), marked as the most recently used."""
        value = self.get(key)  # lock-free: each OrderedDict operation is atomic; a store may evict key meanwhile
        if value is not None:
            try:
                self.move_to_end(key)
            except KeyError:
                pass
        return value

    def store(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self[key] = value
            self.move_to_end(key)
            self._trim(self.maxsize)

    def _trim(self, limit: int) -> None:
        with self._lock:
            while len(self) > limit:
                self.popitem(last=False)

    def reset(self) -> None:
        """Drop every entry, with a new lock (after a fork, another thread of the parent may have held the old one)."""
        self._lock = threading.RLock()
        self.clear()

    __hash__ = object.__hash__  # kept in a WeakSet: identity, not contents
    __eq__ = object.__eq__  # type: ignore[assignment]


_caches: "weakref.WeakSet[LRUCache]" = weakref.WeakSet()
_sized_by: set[str] = set()  # the config options that size caches (each with a hook that trims them)


def _trim_caches(option: str, limit: int) -> None:
    """config.update of a cache-size option: the live caches it sizes drop their least recently used entries at
    once (not only at their next store), so the bound holds from then on."""
    for cache in list(_caches):
        if cache._maxsize == option:
            cache._trim(limit)
_clear_hooks: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Run hook whenever every cache is cleared (for caches that are not LRUCaches, e.g. a program kept on an IR)."""
    _clear_hooks.append(hook)


def clear_all_caches() -> None:
    """Empty every cache ember keeps (compiled programs, staged IRs, plans), so their programs can be freed."""
    for cache in list(_caches):
        cache.reset()
    for hook in _clear_hooks:
        hook()
