"""A bounded cache: every cache ember keeps (eager executables, compiled signatures, vjp plans) has a limit."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable


class LRUCache(OrderedDict):
    """A dict holding at most maxsize entries: storing one more drops the least recently used."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def lookup(self, key: Hashable) -> Any:
        """The value for key (None if absent), marked as the most recently used."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def store(self, key: Hashable, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.maxsize:
            self.popitem(last=False)
