"""A bounded cache: every cache ember keeps (eager executables, compiled signatures, vjp plans) has a limit."""
from __future__ import annotations

from collections import OrderedDict
import threading
from typing import Any, Hashable

from ember._core.config import config


class LRUCache(OrderedDict):
    """A dict holding at most maxsize entries: storing one more drops the least recently used. maxsize is a number,
    or the name of an `ember.config` option read at each store (so `config.update` resizes live caches).
    Lookups and stores are safe from several threads."""

    def __init__(self, maxsize: int | str):
        super().__init__()
        self._maxsize = maxsize
        self._lock = threading.Lock()

    @property
    def maxsize(self) -> int:
        return config.read(self._maxsize) if isinstance(self._maxsize, str) else self._maxsize

    def lookup(self, key: Hashable) -> Any:
        """The value for key (None if absent), marked as the most recently used."""
        with self._lock:
            value = self.get(key)
            if value is not None:
                self.move_to_end(key)
            return value

    def store(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self[key] = value
            self.move_to_end(key)
            limit = self.maxsize
            while len(self) > limit:
                self.popitem(last=False)
