"""The cache of what the missing-value path builds lazily (component plans, each network's
shared log tables): least recently used out first, bounded in bytes, not in entries.

A plan costs little to build next to the elimination it runs, but many distinct missing
patterns used to keep gigabytes. One cache may serve many compiled models (the server
shares one across every version it holds: ``server serve --plan-cache-bytes``). An entry
larger than the whole budget is built for the call that needs it and not kept: the same
exact answer, paid again on the next call.

Inside ``cached_plans_only()`` a miss raises ``PlanNotReady`` instead of building: the
server's event loop predicts that way, and hands a request that needs a plan built (which
may take seconds) to its work pool.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Protocol, TypeVar

from bnserve.store.errors import InvalidInput

DEFAULT_PLAN_CACHE_BYTES = 64 * 1024 * 1024


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=Sized)

_BUILDS_ALLOWED = contextvars.ContextVar("plan_builds_allowed", default=True)


class PlanNotReady(Exception):
    """A plan the cache does not hold was needed inside ``cached_plans_only()``."""


@contextlib.contextmanager
def cached_plans_only() -> Iterator[None]:
    """Within it, a cache miss raises ``PlanNotReady`` rather than building the entry."""
    token = _BUILDS_ALLOWED.set(False)
    try:
        yield
    finally:
        _BUILDS_ALLOWED.reset(token)


def builds_allowed() -> bool:
    """False inside ``cached_plans_only()``: what the missing-value path builds at first need
    outside this cache (a network's descendant relation) raises ``PlanNotReady`` there too."""
    return _BUILDS_ALLOWED.get()


class PlanCache:
    """key -> a value with ``nbytes``, at most ``budget`` bytes in all; safe across threads.

    ``on_change(bytes held)`` is called after every change, under the cache's lock (the
    server sets a gauge with it).
    """

    def __init__(self, budget: int = DEFAULT_PLAN_CACHE_BYTES, on_change: Callable[[int], None] | None = None):
        if budget < 0:
            raise InvalidInput(f"the plan cache budget must be 0 bytes or more, got {budget}")
        self.budget = budget
        self.nbytes = 0
        self._entries: OrderedDict[Hashable, tuple[Sized, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._on_change = on_change

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[Sized]:
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept under ``key``, else ``build()``'s, kept when it fits the budget
        (evicting the least recently used). Built outside the lock: two threads may build
        the same value once each; the first kept wins."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0]  # type: ignore[return-value]
        if not _BUILDS_ALLOWED.get():
            raise PlanNotReady(key)
        value = build()
        size = value.nbytes
        if size > self.budget:
            return value
        with self._lock:
            if key in self._entries:
                return self._entries[key][0]  # type: ignore[return-value]
            self._entries[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.budget:
                _, (_, evicted) = self._entries.popitem(last=False)
                self.nbytes -= evicted
            if self._on_change is not None:
                self._on_change(self.nbytes)
        return value
