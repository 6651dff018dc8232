"""Versions outside the snapshot (neither latest nor aliased), loaded from the store when asked for.

A load reads the store, which may hang for as long as the store timeouts let it. So loads
run on a small pool of their own (``--store-threads``), never on the work pool, and a call
waiting for one holds a future, not a thread: the event loop awaits it
(``bnserve.server.dataplane``). Calls for versions in memory never wait behind a load,
whatever the store does.

What may wait is bounded: ``--max-load-waiters`` calls per version, and
``LOADS_PER_STORE_THREAD`` loads per store thread, running or queued. A call beyond either is
refused at once with UNAVAILABLE (``Busy``), the code a load ended by the store timeouts
gets: the call did no work, and retrying it later, with backoff, is what mends both.
RESOURCE_EXHAUSTED would say, as everywhere else in this server, that the request itself is
too large, which retrying it unchanged never mends.

What was loaded is kept, least recently used out first, within ``--version-cache-bytes`` of
compiled tables (``nbytes``); a version larger than the whole budget is served to the calls
that waited for it and not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from bnserve.store.errors import BnServeError

if TYPE_CHECKING:  # the metrics import numpy and prometheus_client: not for `server --help`
    from bnserve.server.metrics import Metrics

DEFAULT_VERSION_CACHE_BYTES = 64 * 1024 * 1024  # --version-cache-bytes
DEFAULT_STORE_THREADS = 2  # --store-threads
DEFAULT_MAX_LOAD_WAITERS = 64  # --max-load-waiters: calls per version
LOADS_PER_STORE_THREAD = 4  # loads running or queued, per --store-threads, before new ones are refused
Key = tuple[str, int]  # (model name, version)
STOPPING = "the server is stopping"


class Busy(BnServeError):
    """Too many calls already wait for loads from the store: refused at once, retry later."""

    code = "UNAVAILABLE"


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=Sized)


class OnDemand(Generic[T]):
    """(name, version) -> a loaded version, kept within ``budget`` bytes; ``load(name, version)``
    runs on ``threads`` threads of its own. ``_lock`` guards the dicts for a few steps at a
    time, never across a load."""

    def __init__(
        self,
        load: Callable[[str, int], T],
        *,
        budget: int,
        threads: int,
        max_waiters: int,
        metrics: Metrics | None = None,
    ):
        from bnserve.server.metrics import METRICS

        self._load = load
        self._metrics = METRICS if metrics is None else metrics
        self.budget = budget
        self.max_waiters = max_waiters
        self.max_pending = threads * LOADS_PER_STORE_THREAD
        self.nbytes = 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="store-load")
        self._lock = threading.Lock()
        self._kept: OrderedDict[Key, tuple[T, int]] = OrderedDict()
        self._pending: dict[Key, set[Future[T]]] = {}  # loads running or queued -> their callers' futures

    def keys(self) -> list[Key]:
        return list(self._kept)

    def peek(self, key: Key) -> T | None:
        """The version if kept, marked as just used. No lock: the event loop calls it (each
        step is one operation on the dict, atomic under the GIL)."""
        hit = self._kept.get(key)
        if hit is None:
            return None
        try:
            self._kept.move_to_end(key)
        except KeyError:  # evicted meanwhile: this call still has it
            pass
        return hit[0]

    def request(self, key: Key) -> Future[T]:
        """A future of the version for one caller: done at once when it is kept, else when its
        load ends (one load, however many wait). The caller may cancel its own future to stop
        waiting; the load goes on for the others. ``Busy`` when the caller may not wait."""
        mine: Future[T] = Future()
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None:
                self._kept.move_to_end(key)
                mine.set_result(hit[0])
                return mine
            waiters = self._pending.get(key)
            start = waiters is None
            if waiters is None:
                if len(self._pending) >= self.max_pending:
                    self._metrics.version_calls_shed.labels("pending").inc()
                    raise Busy(
                        f"model {key[0]!r} version {key[1]} needs a load from the store, and {len(self._pending)} "
                        f"loads are pending ({LOADS_PER_STORE_THREAD} per --store-threads): retry later"
                    )
                waiters = self._pending[key] = set()
            elif len(waiters) >= self.max_waiters:
                self._metrics.version_calls_shed.labels("waiters").inc()
                raise Busy(
                    f"model {key[0]!r} version {key[1]} has {len(waiters)} calls waiting for its load from the "
                    "store (--max-load-waiters): retry later"
                )
            waiters.add(mine)
            self._metrics.version_load_waiters.inc()
        mine.add_done_callback(lambda future: self._leave(key, future))
        if start:
            try:
                job = self._pool.submit(self._run, key)
            except RuntimeError:  # the pool is shut down: the server is stopping
                self._settle(key, None, Busy(STOPPING))
            else:
                job.add_done_callback(lambda job: self._cancelled(key, job))
        return mine

    def forget(self, keep: Callable[[Key], bool]) -> None:
        """Drop every kept version for which ``keep(key)`` is false."""
        with self._lock:
            # list() copies the keys in one step: ``peek`` may reorder them meanwhile
            for key in [k for k in list(self._kept) if not keep(k)]:
                self.nbytes -= self._kept.pop(key)[1]
            self._metrics.version_cache_bytes.set(self.nbytes)

    def close(self) -> None:
        """Stop the load threads; a load still queued ends its callers' waits with ``Busy``."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _cancelled(self, key: Key, job: Future[None]) -> None:
        """A load still queued when the pool shut down ends its callers' waits."""
        if job.cancelled():
            self._settle(key, None, Busy(STOPPING))

    def _run(self, key: Key) -> None:
        try:
            value = self._load(*key)
        except BaseException as exc:
            self._settle(key, None, exc)
            return
        self._keep(key, value)
        self._settle(key, value, None)

    def _keep(self, key: Key, value: T) -> None:
        size = value.nbytes
        if size > self.budget:
            return
        with self._lock:
            self._kept[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.budget:
                _, (_, evicted) = self._kept.popitem(last=False)
                self.nbytes -= evicted
            self._metrics.version_cache_bytes.set(self.nbytes)

    def _settle(self, key: Key, value: T | None, error: BaseException | None) -> None:
        """Hand the load's outcome to every caller still waiting for it."""
        with self._lock:
            waiters = self._pending.pop(key, set())
            self._metrics.version_load_waiters.dec(len(waiters))
        for future in waiters:
            if future.set_running_or_notify_cancel():  # not cancelled by its caller
                if error is None:
                    future.set_result(value)  # type: ignore[arg-type]
                else:
                    future.set_exception(error)

    def _leave(self, key: Key, future: Future[T]) -> None:
        """A caller's future is done: settled (it left the load's set then), or cancelled."""
        if not future.cancelled():
            return
        with self._lock:
            waiters = self._pending.get(key)
            if waiters is not None and future in waiters:
                waiters.discard(future)
                self._metrics.version_load_waiters.dec()
