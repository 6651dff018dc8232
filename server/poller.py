"""The thread that keeps the repository in step with the store, and the watcher of its stalls.

Every ``interval`` seconds it calls ``ModelRepository.refresh``; a poll that fails is
counted and logged, and the loaded models keep serving. A poll still running after
``stall_seconds`` (a store that hangs) is warned about and counted once, by a second thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from bnserve.store.errors import BnServeError

if TYPE_CHECKING:
    from bnserve.server.repository import ModelRepository

log = logging.getLogger("bnserve.server.repository")  # the name operators filter the repository's lines by


class Poller:
    """Background thread calling ``repository.refresh`` every ``interval`` seconds.

    ``stall_seconds``: a poll still running after this long (a store that hangs) is warned
    about and counted in ``bnserve_store_poll_stalls_total``, once, by a watcher thread;
    the loaded models keep serving meanwhile.
    """

    def __init__(self, repository: ModelRepository, interval: float, stall_seconds: float | None = None):
        self._repository = repository
        self._metrics = repository.metrics
        self._interval = interval
        self._stall_seconds = stall_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-poller", daemon=True)
        self._watch = threading.Condition()
        self._started_at: float | None = None  # monotonic start of the poll running, if any
        self._stalled = False  # the poll running was reported stalled
        self._watcher = threading.Thread(target=self._watch_stalls, name="store-poll-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._watch:
            self._watch.notify()
        if self._thread.ident is not None:  # started: a server stopped before its first read never was
            self._thread.join(timeout=5)

    def poll_once(self) -> bool:
        self._begin()
        try:
            self._repository.refresh()
        except BnServeError as exc:
            self._metrics.store_poll_errors.inc()
            log.warning("store poll failed, still serving what is loaded: %s", exc.message)
            return False
        except Exception:  # a poll must never kill the thread
            self._metrics.store_poll_errors.inc()
            log.exception("store poll failed, still serving what is loaded")
            return False
        finally:
            self._end()
        self._metrics.store_last_success.set_to_current_time()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll_once()

    def _begin(self) -> None:
        if self._stall_seconds is None:
            return
        with self._watch:
            if self._watcher.ident is None:
                self._watcher.start()
            self._started_at, self._stalled = time.monotonic(), False
            self._watch.notify()

    def _end(self) -> None:
        if self._stall_seconds is None:
            return
        with self._watch:
            started, stalled = self._started_at, self._stalled
            self._started_at, self._stalled = None, False
            self._watch.notify()
        if stalled and started is not None:
            log.warning("the stalled store poll ended after %.1f s", time.monotonic() - started)

    def _watch_stalls(self) -> None:
        assert self._stall_seconds is not None
        with self._watch:
            while not self._stop.is_set():
                if self._started_at is None or self._stalled:
                    self._watch.wait()
                    continue
                left = self._started_at + self._stall_seconds - time.monotonic()
                if left > 0:
                    self._watch.wait(left)
                    continue
                self._stalled = True
                self._metrics.store_poll_stalls.inc()
                log.warning(
                    "store poll still running after %.0f s (--poll-stall-seconds): the store may be hanging; "
                    "still serving what is loaded",
                    self._stall_seconds,
                )
