"""Which compiled models the server holds, kept in step with the store by polling.

The served state is one immutable ``Snapshot``; a refresh builds a new one and swaps
the reference, so a request always sees a consistent set of versions and aliases and
never waits for a load. Per model the snapshot holds its latest version and every
aliased version; other versions are loaded on demand and kept within a budget of bytes. A version or model
deleted from the store is dropped from all of it on the next refresh.

A poll reads only the models written since the last one (``ModelStore.catalogue_changes``)
and rebuilds only their entries; every ``FULL_READ_EVERY``-th poll reads the whole
catalogue, which also sees writers that do not count their writes (a trainer of a release
before schema 0005 in a rolling upgrade). A version that fails to load or compile, for
whatever reason, is refused alone: every other model keeps updating. Versions with the
same checksum share one compiled model; with ``lazy`` a version is compiled on its first
request instead of at load, until its model has answered one (its later versions are then
compiled at load, off the request path). Versions loaded on demand are read on threads of
their own, within bounds, and kept within a budget of bytes (``bnserve.server.on_demand``).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnserve.server import metrics
from bnserve.server.on_demand import (
    DEFAULT_MAX_LOAD_WAITERS,
    DEFAULT_STORE_THREADS,
    DEFAULT_VERSION_CACHE_BYTES,
    OnDemand,
)
from bnserve.store.db import CatalogueMark, ModelStore, ModelSummary, ModelVersion
from bnserve.store.errors import BnServeError, InvalidModel, NotFound, PermissionDenied, StoreRefused, StoreUnavailable
from bnserve.store.model import Model
from bnserve.store.model.names import resolve_version
from bnserve.store.predictor import DEFAULT_PLAN_CACHE_BYTES, CompiledModel, PlanCache, compile_model

log = logging.getLogger(__name__)

FULL_READ_EVERY = 10  # polls: one in this many reads the whole catalogue
# the store's failure, not a version's: the poll fails, a load on demand fails its call, and
# nothing is remembered as refused (the version loads once the store is mended)
STORE_TROUBLE = (StoreUnavailable, PermissionDenied, StoreRefused)
MAX_REASON_CHARS = 500  # of an unexpected error's text, in a refusal


class SharedModel:
    """A model and its compiled tables, one per checksum however many versions (of any name)
    have it. Compiled once, by the first caller that needs it; a model that fails to compile
    fails every later caller the same way, without compiling again."""

    def __init__(self, model: Model, plans: PlanCache):
        self.model = model
        self._plans = plans
        self.compiled: CompiledModel | None = None
        self._failure: Exception | None = None
        self._lock = threading.Lock()  # held across one compile, never across a store call

    def compile(self) -> CompiledModel:
        with self._lock:
            if self.compiled is None:
                if self._failure is not None:
                    raise self._failure
                try:
                    self.compiled = compile_model(self.model, plans=self._plans)
                except Exception as exc:
                    self._failure = exc
                    raise
            return self.compiled


@dataclass(frozen=True)
class ServedModel:
    """One model version, ready to answer once compiled (the repository hands out only those).

    ``class_name`` and this model's children of the prediction metrics are looked up once
    here rather than per request (``record``).
    """

    name: str
    version: int
    created_at_ms: int
    checksum: str
    shared: SharedModel = field(repr=False)
    class_name: str = field(init=False)
    _rows: Any = field(init=False, repr=False, compare=False)
    _per_class: tuple = field(init=False, repr=False, compare=False)
    _batch: Any = field(init=False, repr=False, compare=False)
    _seconds: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        class_variable = self.model.class_variable
        object.__setattr__(self, "class_name", class_variable.name)
        object.__setattr__(self, "_rows", metrics.PREDICTION_ROWS.labels(self.name))
        object.__setattr__(
            self, "_per_class", tuple(metrics.PREDICTED_CLASS_ROWS.labels(self.name, c) for c in class_variable.states)
        )
        object.__setattr__(self, "_batch", metrics.REQUEST_ROWS.labels(self.name))
        object.__setattr__(self, "_seconds", metrics.REQUEST_SECONDS.labels(self.name))

    @property
    def model(self) -> Model:
        return self.shared.model

    @property
    def is_compiled(self) -> bool:
        return self.shared.compiled is not None

    @property
    def compiled(self) -> CompiledModel:
        compiled = self.shared.compiled
        assert compiled is not None, "the repository hands out compiled versions only"
        return compiled

    @property
    def nbytes(self) -> int:
        """What it costs to keep it loaded on demand: its compiled tables (shared with the
        versions of its checksum, so counted once per version)."""
        return self.compiled.nbytes

    def record_unseen(self, unseen: Mapping[int, int]) -> None:
        """Count values unseen in training read as missing: feature column -> how many.
        The series are this model's features only, made at their first count, so what a
        client sends cannot add series."""
        for j, n in unseen.items():
            metrics.UNKNOWN_VALUES.labels(self.name, self.compiled.features[j].name).inc(n)

    def record(self, winners: np.ndarray, started: float) -> None:
        """Count one answered request: its rows, their most probable classes, its batch size,
        and its time since ``started`` (``time.perf_counter()`` when the handler began)."""
        rows = len(winners)
        self._rows.inc(rows)
        self._batch.observe(rows)
        self._seconds.observe(time.perf_counter() - started)
        if rows == 1:
            self._per_class[int(winners[0])].inc()
        elif rows:
            for c, n in enumerate(np.bincount(winners, minlength=len(self._per_class)).tolist()):
                if n:
                    self._per_class[c].inc(n)


@dataclass(frozen=True)
class ModelEntry:
    """What the server knows of one model name: its versions, aliases and loaded versions."""

    name: str
    versions: tuple[int, ...]  # every version in the store
    aliases: Mapping[str, int]  # alias -> version
    loaded: Mapping[int, ServedModel]  # versions held in the snapshot (lazy: compiled at first use)
    refused: Mapping[int, str] = field(default_factory=dict)  # version -> why it was refused

    def aliases_of(self, version: int) -> tuple[str, ...]:
        return tuple(sorted(a for a, v in self.aliases.items() if v == version))


@dataclass(frozen=True)
class Snapshot:
    models: Mapping[str, ModelEntry]


@dataclass(frozen=True)
class ReadAhead:
    """Versions read from the store in one bulk read before a rebuild: each its ModelVersion or
    why it is refused (``ModelStore.load_many``), and that read's seconds per version."""

    versions: Mapping[tuple[str, int], ModelVersion | Exception] = field(default_factory=dict)
    seconds_each: float = 0.0


class ModelRepository:
    """Name/version/alias -> compiled model, refreshed from a ``ModelStore``.

    ``plan_cache_bytes``: the budget of the missing-value plans of every version together;
    ``lazy``: compile each version on its first request rather than when it is loaded;
    ``version_cache_bytes``, ``store_threads``, ``max_load_waiters``: the versions loaded on
    demand (``OnDemand``). No lock is held across a store call on the request path: ``_lock``
    guards the shared dicts for a few steps at a time, and an on-demand load runs on a thread
    of its own, so a slow load delays only the requests for that version. ``close`` stops
    those threads.
    """

    def __init__(
        self,
        store: ModelStore,
        plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES,
        *,
        lazy: bool = False,
        version_cache_bytes: int = DEFAULT_VERSION_CACHE_BYTES,
        store_threads: int = DEFAULT_STORE_THREADS,
        max_load_waiters: int = DEFAULT_MAX_LOAD_WAITERS,
    ):
        self._store = store
        self._lazy = lazy
        self.plans = PlanCache(plan_cache_bytes, on_change=metrics.PLAN_CACHE_BYTES.set)  # shared by every version
        self._snapshot = Snapshot({})
        self._ready = threading.Event()
        self._refresh_lock = threading.Lock()
        self._lock = threading.Lock()  # guards the state below; never held across a store call or a compile
        self._on_demand: OnDemand[ServedModel] = OnDemand(
            self._load_on_demand, budget=version_cache_bytes, threads=store_threads, max_waiters=max_load_waiters
        )
        self._refused: dict[tuple[str, int], str] = {}
        self._dirty: set[str] = set()  # models with a version refused since their entry was built
        self._shared: weakref.WeakValueDictionary[str, SharedModel] = weakref.WeakValueDictionary()
        self._held: dict[tuple[str, str], int] = {}  # (name, alias) -> the refused version it names
        self._summaries: dict[str, ModelSummary] = {}  # the catalogue as last read
        self._mark: CatalogueMark | None = None
        self._polls_since_full = 0

    def close(self) -> None:
        self._on_demand.close()

    @property
    def ready(self) -> bool:
        """True once the store has been read successfully at least once."""
        return self._ready.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    # ------------------------------------------------------------------ refresh

    def refresh(self) -> None:
        """Read what was written to the store's catalogue, load what is new, swap the snapshot.

        Raises the store's error if the catalogue (or a version) cannot be read; the
        previous snapshot keeps serving in that case, and the next refresh reads again.
        """
        with self._refresh_lock:
            full = self._mark is None or self._polls_since_full + 1 >= FULL_READ_EVERY
            changes = self._store.catalogue_changes(None if full else self._mark)
            summaries = {} if full else dict(self._summaries)
            for name, summary in changes.models.items():
                if summary is not None:
                    summaries[name] = summary
                else:
                    summaries.pop(name, None)
            with self._lock:
                dirty, self._dirty = self._dirty, set()
            try:
                self._rebuild(summaries, dirty)
            except BaseException:
                with self._lock:
                    self._dirty |= dirty
                raise
            self._summaries, self._mark = summaries, changes.mark
            self._polls_since_full = 0 if full else self._polls_since_full + 1
            self._ready.set()

    def _rebuild(self, summaries: Mapping[str, ModelSummary], dirty: set[str]) -> None:
        """Swap in a snapshot whose entries of the models that changed (or had a version
        refused since) are built again; every other entry is kept as it was."""
        old = self._snapshot.models
        changed = {n for n in summaries.keys() | old.keys() if summaries.get(n) != self._summaries.get(n)}
        changed |= dirty & summaries.keys()
        if not changed:
            return
        models = {n: e for n, e in old.items() if n not in changed}
        rebuilt = sorted(changed & summaries.keys())
        read = self._read_ahead([(summaries[n], old.get(n)) for n in rebuilt])
        for name in rebuilt:
            models[name] = self._refresh_one(summaries[name], old.get(name), read)
        self._snapshot = Snapshot(models)
        if self._ready.is_set():  # the first read loads everything; later ones say what changed
            _log_changes({n: old[n] for n in changed if n in old}, {n: models[n] for n in changed if n in models})
        self._forget_deleted(models)
        self._publish_info([old[n] for n in changed if n in old], [models[n] for n in changed if n in models])

    def _forget_deleted(self, models: Mapping[str, ModelEntry]) -> None:
        """Drop what is kept of versions no longer in the store (deleted): on-demand loads,
        refusals, held aliases. Their numbers are never reused, so this only frees memory."""

        def listed(name: str, version: int) -> bool:
            return name in models and version in models[name].versions

        self._on_demand.forget(lambda key: listed(*key))
        with self._lock:
            for refused in [k for k in self._refused if not listed(*k)]:
                del self._refused[refused]
        for held in [k for k, v in self._held.items() if not listed(k[0], v)]:
            del self._held[held]

    def _read_ahead(self, entries: list[tuple[ModelSummary, ModelEntry | None]]) -> ReadAhead:
        """The versions the entries are built from first (every aliased version and the newest,
        unless held or refused), read in one bulk read: at start, a thousand models in a few
        selects where a load each made nine. What comes later (an alias held back, an older
        version when the newest is refused) is read alone when it comes to it."""
        wanted = [
            (summary.name, version)
            for summary, old in entries
            for version in sorted({*summary.aliases.values(), summary.latest_version})
            if (summary.name, version) not in self._refused and (old is None or version not in old.loaded)
        ]
        if not wanted:
            return ReadAhead()
        t0 = time.perf_counter()
        versions = self._store.load_many(wanted)
        return ReadAhead(versions, (time.perf_counter() - t0) / len(wanted))

    def _refresh_one(self, summary: ModelSummary, old: ModelEntry | None, read: ReadAhead) -> ModelEntry:
        """Keep every aliased version and the newest version that loads. An alias moved to a
        version that is refused stays at the version it named before, when that one is held."""
        name = summary.name
        loaded: dict[int, ServedModel] = {}
        gone: set[int] = set()  # deleted between the listing and the load: left out of the entry
        # lazy: a model that has answered a request has its new versions compiled here, off the
        # request path, as eager does (and so refused here, where an alias can fall back)
        compile = not self._lazy or (old is not None and any(s.is_compiled for s in old.loaded.values()))

        def take(version: int) -> bool:
            if (name, version) in self._refused or version in gone:
                return False
            if old is not None and version in old.loaded:
                loaded[version] = old.loaded[version]
                return True
            try:
                served = self._load(name, version, compile=compile, read=read)
            except NotFound:
                log.info("%s version %d was deleted before it loaded", name, version)
                gone.add(version)
                return False
            if served is not None:
                loaded[version] = served
            return served is not None

        aliases = dict(summary.aliases)
        for alias, version in sorted(summary.aliases.items()):
            if take(version):
                self._held.pop((name, alias), None)
                continue
            if version in gone:
                continue  # deleted with its version (forced): the alias goes too
            # Refused: an alias this server already served stays where it was, so the
            # previous good version keeps answering for it until the alias moves again.
            previous = old.aliases.get(alias) if old is not None else None
            if previous in summary.versions and previous != version and take(previous):
                aliases[alias] = previous
                if self._held.get((name, alias)) != version:
                    self._held[(name, alias)] = version
                    log.warning(
                        "alias %s of %s stays at version %d: version %d was refused at load",
                        alias,
                        name,
                        previous,
                        version,
                    )
        for version in sorted(summary.versions, reverse=True):
            if version in loaded or take(version):
                break
        with self._lock:
            refused = {v: why for (n, v), why in self._refused.items() if n == name}
        versions = tuple(v for v in summary.versions if v not in gone)
        aliases = {a: v for a, v in aliases.items() if v not in gone}
        return ModelEntry(name, versions, aliases, loaded, refused)

    def _load(self, name: str, version: int, *, compile: bool, read: ReadAhead = ReadAhead()) -> ServedModel | None:
        """Read one version (unless ``read`` holds it), and compile it if asked (or take the
        compiled tables of a version with its checksum); None if it is refused, for any reason
        but the store's own failure (raised: ``STORE_TROUBLE``); NotFound if it was deleted
        since the catalogue was read."""
        ahead = read.versions.get((name, version))
        t0 = time.perf_counter() - (read.seconds_each if ahead is not None else 0.0)
        try:
            mv = self._store.load(name, version=version) if ahead is None else ahead
            if isinstance(mv, Exception):
                raise mv
            with self._lock:
                shared = self._shared.get(mv.checksum)
                if shared is None:
                    shared = self._shared[mv.checksum] = SharedModel(mv.model, self.plans)
            if compile:
                shared.compile()
            served = ServedModel(mv.name, mv.version, mv.created_at_ms, mv.checksum, shared)
        except (NotFound, *STORE_TROUBLE):
            raise
        except Exception as exc:
            self._refuse(name, version, exc)
            return None
        metrics.MODEL_LOAD_SECONDS.observe(time.perf_counter() - t0)
        log.info("loaded %s version %d (%s)", name, version, mv.model.algorithm)
        return served

    def _refuse(self, name: str, version: int, exc: Exception) -> None:
        """Remember, count and log why a version is refused (once); its model's entry is built
        again on the next refresh."""
        if isinstance(exc, BnServeError):
            why = exc.message
        else:
            why = f"{type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]
        with self._lock:
            if (name, version) in self._refused:
                return
            self._refused[(name, version)] = why
            self._dirty.add(name)
        metrics.MODEL_LOAD_FAILURES.labels(name).inc()
        log.error("refused %s version %d at load: %s", name, version, why, exc_info=not isinstance(exc, BnServeError))

    @staticmethod
    def _refusal(name: str, version: int, why: str) -> InvalidModel:
        return InvalidModel(f"model {name!r} version {version} was refused at load: {why}")

    @staticmethod
    def _publish_info(old: list[ModelEntry], new: list[ModelEntry]) -> None:
        """The bnserve_model_info series of the entries that were built again."""

        def series(entries: list[ModelEntry]) -> set[tuple[str, str, str, str]]:
            return {
                (e.name, str(v), s.model.algorithm, ",".join(e.aliases_of(v)))
                for e in entries
                for v, s in e.loaded.items()
            }

        before, after = series(old), series(new)
        for labels in before - after:
            metrics.drop_model_info(*labels)
        for labels in after:
            metrics.MODEL_INFO.labels(*labels).set(1)

    # ------------------------------------------------------------------ lookup

    def entry(self, name: str) -> ModelEntry:
        entry = self._snapshot.models.get(name)
        if entry is None:
            raise NotFound(f"model {name!r} not found")
        return entry

    def _resolve(self, name: str, version: int | None, alias: str | None) -> tuple[ModelEntry, int]:
        """The entry and the version a selector names (``resolve_version``: the production
        alias, else the newest version not refused); a refused version is an error."""
        entry = self.entry(name)
        version = resolve_version(name, entry.versions, entry.aliases, version or None, alias or None, entry.refused)
        if version in entry.refused:
            raise self._refusal(name, version, entry.refused[version])
        return entry, version

    def get(self, name: str, version: int | None = None, alias: str | None = None) -> tuple[ServedModel, ModelEntry]:
        """The compiled model for a selector: version, alias, or neither for the default.
        Blocks for a load or a compile: for a thread, never the event loop (``locate``)."""
        future, entry = self.locate(name, version, alias)
        return self.compiled(future.result()), entry

    def get_resident(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[ServedModel, ModelEntry] | None:
        """``get`` from memory alone: None where answering needs a store read (a version not
        loaded yet) or a compile (lazy). It never calls the store nor waits for a lock, so the
        event loop may call it."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version) or self._on_demand.peek((name, version))
        return None if served is None or not served.is_compiled else (served, entry)

    def locate(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[Future[ServedModel], ModelEntry]:
        """The version a selector names, as a future for this caller alone (it may cancel it
        to stop waiting): done at once when the version is in memory, else when its load from
        the store ends, on the load threads. Not compiled yet under lazy (``compiled``). Busy
        (UNAVAILABLE) at once when too many calls wait for loads. Never blocks."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version)
        if served is not None:
            done: Future[ServedModel] = Future()
            done.set_result(served)
            return done, entry
        why = self._refused.get((name, version))
        if why is not None:
            raise self._refusal(name, version, why)
        return self._on_demand.request((name, version)), entry

    def compiled(self, served: ServedModel) -> ServedModel:
        """``served`` compiled: at once when it is (or a version with its checksum is); else
        compiled now (lazy), once, and refused if that fails."""
        if served.is_compiled:
            return served
        key = (served.name, served.version)
        why = self._refused.get(key)
        if why is None:
            try:
                served.shared.compile()
                return served
            except Exception as exc:
                self._refuse(*key, exc)
                why = self._refused[key]
        raise self._refusal(*key, why)

    def _load_on_demand(self, name: str, version: int) -> ServedModel:
        """A version outside the snapshot (neither latest nor aliased), read and compiled on
        a load thread, and counted; NotFound if deleted since the last refresh."""
        try:
            served = self._load(name, version, compile=True)
        except BaseException:
            metrics.VERSION_LOADS.labels("failed").inc()
            raise
        if served is None:
            metrics.VERSION_LOADS.labels("refused").inc()
            raise self._refusal(name, version, self._refused[(name, version)])
        metrics.VERSION_LOADS.labels("loaded").inc()
        return served


def _log_changes(old: Mapping[str, ModelEntry], new: Mapping[str, ModelEntry]) -> None:
    """One INFO line per version dropped because it was deleted from the store, and per
    alias set, moved or removed (as served: an alias held back at load says so in a warning)."""
    for name in sorted(old.keys() | new.keys()):
        before, after = old.get(name), new.get(name)
        kept = set(after.versions) if after is not None else set()
        for version in sorted(set(before.versions if before is not None else ()) - kept):
            log.info("dropped %s version %d: deleted from the store", name, version)
        was = dict(before.aliases) if before is not None else {}
        now = dict(after.aliases) if after is not None else {}
        for alias in sorted(was.keys() | now.keys()):
            if alias not in now:
                log.info("alias %s of %s removed (it named version %d)", alias, name, was[alias])
            elif alias not in was:
                log.info("alias %s of %s set to version %d", alias, name, now[alias])
            elif was[alias] != now[alias]:
                log.info("alias %s of %s moved from version %d to version %d", alias, name, was[alias], now[alias])


class Poller:
    """Background thread calling ``repository.refresh`` every ``interval`` seconds.

    ``stall_seconds``: a poll still running after this long (a store that hangs) is warned
    about and counted in ``bnserve_store_poll_stalls_total``, once, by a watcher thread;
    the loaded models keep serving meanwhile.
    """

    def __init__(self, repository: ModelRepository, interval: float, stall_seconds: float | None = None):
        self._repository = repository
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
            metrics.STORE_POLL_ERRORS.inc()
            log.warning("store poll failed, still serving what is loaded: %s", exc.message)
            return False
        except Exception:  # a poll must never kill the thread
            metrics.STORE_POLL_ERRORS.inc()
            log.exception("store poll failed, still serving what is loaded")
            return False
        finally:
            self._end()
        metrics.STORE_LAST_SUCCESS.set_to_current_time()
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
                metrics.STORE_POLL_STALLS.inc()
                log.warning(
                    "store poll still running after %.0f s (--poll-stall-seconds): the store may be hanging; "
                    "still serving what is loaded",
                    self._stall_seconds,
                )
