"""The one bounded cache of the open provider: least recently used items dropped past a count or a size; thread-safe.

Every cache kept between requests uses it, each with its bound stated once where it is made: file facts and folder
listings (`kernel/sources/facts.py`), block summaries and block lineages (`kernel/sources/blocks.py`), a host
folder's rotation groups (`kernel/sources/files.py`), kept answers (`answers.py`). `bench/cache.py` measures it
against `cachetools.LRUCache` behind a lock, the library alternative.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """At most `entries` items and, with a `size` function, at most `max_size` of their sizes added up."""

    def __init__(
        self, entries: int, *, max_size: int | None = None, size: Callable[[V], int] | None = None
    ) -> None:
        assert (max_size is None) == (size is None), "a size bound needs a size function"
        self.entries = entries
        self.max_size = max_size
        self._size = size
        #: the sizes of the items held, added up (0 without a size function)
        self.held = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        """The item under `key`, made the most recently used; None when absent."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def peek(self, key: K) -> V | None:
        """The item under `key`, its place in the order unchanged."""
        with self._lock:
            item = self._items.get(key)
        return None if item is None else item[0]

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key` as the most recently used item, dropping the least recently used past the bounds;
        an item larger than the size bound on its own is not kept."""
        if self.entries <= 0:
            return
        if self._size is None:  # a count bound alone: the common case, kept short
            with self._lock:
                items = self._items
                items[key] = (value, 0)
                items.move_to_end(key)
                if len(items) > self.entries:
                    items.popitem(last=False)
            return
        size = self._size(value)
        if self.max_size is not None and size > self.max_size:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.held -= old[1]
            self._items[key] = (value, size)
            self.held += size
            while len(self._items) > self.entries or (self.max_size is not None and self.held > self.max_size):
                _, (_, dropped) = self._items.popitem(last=False)
                self.held -= dropped

    def pop(self, key: K, only: V | None = None) -> None:
        """Drop the item under `key` (with `only`, just when that very item is still the one held)."""
        with self._lock:
            item = self._items.get(key)
            if item is not None and (only is None or item[0] is only):
                del self._items[key]
                self.held -= item[1]


__all__ = ["Bounded"]
