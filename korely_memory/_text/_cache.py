"""Caches of stored text kept for speed: bounded in bytes, and emptied when a person is erased.

A block reads the same facts again and again, so their rendered lines, token
counts and word counts are kept. Memories may be 16,000 characters long, so a
cache bounded by entries could grow by hundreds of megabytes; each cache here
is bounded by the bytes its keys and values take. Every cache registers
itself, so that ``forget_all`` can drop every stored word at once.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_ALL: weakref.WeakSet[TextCache[object, object]] = weakref.WeakSet()
_ENTRY = 120  # bytes an entry costs beyond its key and value: the dict slot and list node


class TextCache(Generic[K, V]):
    """A cache that holds at most ``max_bytes`` of keys and values, forgetting the oldest first."""

    def __init__(self, max_bytes: int, size: Callable[[K, V], int] | None = None) -> None:
        self.max_bytes = max_bytes
        self._size = size or _size_of
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        _ALL.add(self)  # type: ignore[arg-type]

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, or None.

        Reads take no lock and do not reorder: the cache forgets its oldest entries first
        (first in, first out), which costs a read nothing.
        """
        found = self._items.get(key)
        return None if found is None else found[0]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def put(self, key: K, value: V, since: int | None = None) -> V:
        """Keep ``value`` for ``key`` unless it alone would take more than a tenth of the cache,
        or (``since``: the ``generation`` taken before it was read) the caches were emptied
        since."""
        size = self._size(key, value) + _ENTRY
        if size * 10 > self.max_bytes:
            return value
        with self._lock:
            if since is not None and since != _FORGOTTEN[0]:
                return value
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped
        return value

    def clear(self) -> None:
        """Forget everything kept."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def bytes(self) -> int:
        """The bytes the entries take, as counted."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


def cached(max_bytes: int) -> Callable[[Callable[[str], V]], Callable[[str], V]]:
    """Cache a function of one text in a ``TextCache`` of ``max_bytes``."""

    def wrap(function: Callable[[str], V]) -> Callable[[str], V]:
        cache: TextCache[str, V] = TextCache(max_bytes)

        def run(text: str) -> V:
            found = cache.get(text)
            if found is not None:
                return found
            return cache.put(text, function(text))

        run.cache = cache  # type: ignore[attr-defined]
        run.__doc__ = function.__doc__
        run.__name__ = function.__name__
        return run

    return wrap


_FORGOTTEN = [0]  # how many times this process emptied its caches


def generation() -> int:
    """How many times the caches were emptied: taken before a read, and given to ``put`` with
    what it read, so that nothing read before an erasure is kept after it."""
    return _FORGOTTEN[0]


def forget_all() -> None:
    """Empty every cache of stored text in this process (after an erasure)."""
    _FORGOTTEN[0] += 1  # first: a put that checks after this keeps nothing
    for cache in list(_ALL):
        cache.clear()


def _size_of(key: object, value: object) -> int:
    return _deep_size(key) + _deep_size(value)


def _deep_size(value: object) -> int:
    if isinstance(value, (tuple, list)):
        return sys.getsizeof(value) + sum(_deep_size(v) for v in value)
    return sys.getsizeof(value)
