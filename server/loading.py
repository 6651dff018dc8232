"""Reading a version from the store and compiling it, or refusing it alone.

A version that fails to load or compile, for whatever reason but the store's own failure,
is refused: remembered with why (``Refusals``), counted and logged once, and every other
version goes on. The store's failure (``STORE_TROUBLE``) is raised instead and nothing is
remembered, so the version loads once the store is mended. Versions with one checksum share
their compiled tables (``SharedModel``), whichever read them first.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from bnserve.server.metrics import Metrics
from bnserve.server.served import ServedModel, SharedModel
from bnserve.store.db import ModelStore, ModelVersion
from bnserve.store.errors import BnServeError, InvalidModel, NotFound, PermissionDenied, StoreRefused, StoreUnavailable
from bnserve.store.predictor import PlanCache

log = logging.getLogger("bnserve.server.repository")  # the name operators filter the repository's lines by

STORE_TROUBLE = (StoreUnavailable, PermissionDenied, StoreRefused)
MAX_REASON_CHARS = 500  # of an unexpected error's text, in a refusal
Key = tuple[str, int]  # (model name, version)
PAUSE_COLLECTOR_VERSIONS = 100  # a rebuild that reads at least this many versions pauses the cyclic collector


def refusal(name: str, version: int, why: str) -> InvalidModel:
    """What a call for a refused version gets."""
    return InvalidModel(f"model {name!r} version {version} was refused at load: {why}")


class Refusals:
    """(name, version) -> why it was refused at load; and the models with a refusal their
    served entry does not show yet (``take_dirty``: the next refresh builds them again)."""

    def __init__(self, metrics: Metrics):
        self._metrics = metrics
        self._why: dict[Key, str] = {}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()

    def get(self, key: Key) -> str | None:
        return self._why.get(key)

    def __contains__(self, key: Key) -> bool:
        return key in self._why

    def of(self, name: str) -> dict[int, str]:
        """version -> why, of one model."""
        with self._lock:
            return {v: why for (n, v), why in self._why.items() if n == name}

    def error(self, name: str, version: int) -> InvalidModel:
        return refusal(name, version, self._why[(name, version)])

    def refuse(self, name: str, version: int, exc: Exception) -> None:
        """Remember, count and log why a version is refused (once)."""
        if isinstance(exc, BnServeError):
            why = exc.message
        else:
            why = f"{type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]
        with self._lock:
            if (name, version) in self._why:
                return
            self._why[(name, version)] = why
            self._dirty.add(name)
        self._metrics.model_load_failures.labels(name).inc()
        log.error("refused %s version %d at load: %s", name, version, why, exc_info=not isinstance(exc, BnServeError))

    def take_dirty(self) -> set[str]:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        return dirty

    def put_back_dirty(self, names: set[str]) -> None:
        """A refresh that took them failed: the next one builds them."""
        with self._lock:
            self._dirty |= names

    def forget(self, listed: Callable[[str, int], bool]) -> None:
        """Drop the refusals of versions no longer listed (deleted: their numbers are never reused)."""
        with self._lock:
            for key in [k for k in self._why if not listed(*k)]:
                del self._why[key]


@contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off while a bulk load makes its objects, then one
    collection. A start of a thousand versions makes some 250,000 objects that all live on,
    and with the collector on every full collection during the load walked all those made
    so far again: a quarter of the load's CPU. Process-wide, so only for a bulk load (the
    repository's refreshes take a lock): other threads' cycles wait for the collection at the end."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@dataclass(frozen=True)
class ReadAhead:
    """Versions read from the store in one bulk read before a rebuild: each its ModelVersion or
    why it is refused (``ModelStore.load_many``), and that read's seconds per version."""

    versions: Mapping[Key, ModelVersion | Exception] = field(default_factory=dict)
    seconds_each: float = 0.0


class Loader:
    """Reads versions from ``store`` into ``ServedModel``s, sharing compiled tables by checksum."""

    def __init__(self, store: ModelStore, plans: PlanCache, refusals: Refusals, metrics: Metrics):
        self._store = store
        self._plans = plans
        self._refusals = refusals
        self._metrics = metrics
        self._shared: weakref.WeakValueDictionary[str, SharedModel] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()  # guards _shared; never held across a store call or a compile

    def read_ahead(self, wanted: list[Key]) -> ReadAhead:
        """``wanted`` in one bulk read: at start, a thousand models in a few selects where a load each made nine."""
        if not wanted:
            return ReadAhead()
        t0 = time.perf_counter()
        versions = self._store.load_many(wanted)
        return ReadAhead(versions, (time.perf_counter() - t0) / len(wanted))

    def load(self, name: str, version: int, *, compile: bool, read: ReadAhead = ReadAhead()) -> ServedModel | None:
        """Read one version (unless ``read`` holds it), and compile it if asked (or take the
        compiled tables of a version with its checksum); None if it is refused; the store's
        failure raised (``STORE_TROUBLE``); NotFound if it was deleted since the catalogue was read."""
        ahead = read.versions.get((name, version))
        t0 = time.perf_counter() - (read.seconds_each if ahead is not None else 0.0)
        try:
            mv = self._store.load(name, version=version) if ahead is None else ahead
            if isinstance(mv, Exception):
                raise mv
            with self._lock:
                shared = self._shared.get(mv.checksum)
                if shared is None:
                    shared = self._shared[mv.checksum] = SharedModel(mv.model, self._plans)
            if compile:
                shared.compile()
            states = mv.model.class_variable.states
            served = ServedModel(
                mv.name, mv.version, mv.created_at_ms, mv.checksum, shared, self._metrics.model(name, states)
            )
        except (NotFound, *STORE_TROUBLE):
            raise
        except Exception as exc:
            self._refusals.refuse(name, version, exc)
            return None
        self._metrics.model_load_seconds.observe(time.perf_counter() - t0)
        log.info("loaded %s version %d (%s)", name, version, mv.model.algorithm)
        return served

    def compiled(self, served: ServedModel) -> ServedModel:
        """``served`` compiled: at once when it is (or a version with its checksum is); else
        compiled now (lazy), once, and refused if that fails."""
        if served.is_compiled:
            return served
        key = (served.name, served.version)
        if key not in self._refusals:
            try:
                served.shared.compile()
                return served
            except Exception as exc:
                self._refusals.refuse(*key, exc)
        raise self._refusals.error(*key)
