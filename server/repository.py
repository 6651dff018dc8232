"""Which compiled models the server holds, kept in step with the store: the rooms, put together.

A refresh reads only the models written since the last one (``ModelStore.catalogue_changes``)
and builds again only their entries; every ``FULL_READ_EVERY``-th refresh reads the whole
catalogue, which also sees writers that do not count their writes (a trainer of a release
before schema 0005 in a rolling upgrade). A version or model deleted from the store is
dropped from all of it on the next refresh. With ``lazy`` a version is compiled on its
first request instead of at load, until its model has answered one (its later versions
are then compiled at load, off the request path, where a bad one can be refused and its
alias held back).

The rooms, each read in one sitting:

- ``catalogue``: what changed between two catalogues (pure);
- ``aliases``: which versions to hold, and where an alias points when its version is refused (pure);
- ``loading``: reading and compiling a version, compiled tables shared by checksum, refusals;
- ``snapshot``: what is served, and the lookups (``get_resident``, ``locate``) over it and
  the versions loaded on demand (``on_demand``);
- ``poller``: the thread that calls ``refresh``, and the watcher of its stalls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future

from bnserve.server import catalogue
from bnserve.server.aliases import Outcome, choose
from bnserve.server.loading import PAUSE_COLLECTOR_VERSIONS, Loader, ReadAhead, Refusals, collector_paused
from bnserve.server.metrics import METRICS, Metrics
from bnserve.server.on_demand import DEFAULT_MAX_LOAD_WAITERS, DEFAULT_STORE_THREADS, DEFAULT_VERSION_CACHE_BYTES
from bnserve.server.served import ServedModel
from bnserve.server.snapshot import ModelEntry, Resident, Snapshot
from bnserve.store.db import CatalogueMark, ModelStore, ModelSummary
from bnserve.store.errors import NotFound
from bnserve.store.predictor import DEFAULT_PLAN_CACHE_BYTES, PlanCache

log = logging.getLogger(__name__)

FULL_READ_EVERY = 10  # refreshes: one in this many reads the whole catalogue


class ModelRepository:
    """Name/version/alias -> compiled model, refreshed from a ``ModelStore``.

    ``plan_cache_bytes``: the budget of the missing-value plans of every version together;
    ``lazy``: compile each version on its first request rather than when it is loaded;
    ``version_cache_bytes``, ``store_threads``, ``max_load_waiters``: the versions loaded on
    demand (``OnDemand``); ``metrics``: where it counts (a test passes its own registry's).
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
        metrics: Metrics = METRICS,
    ):
        self._store = store
        self._lazy = lazy
        self.metrics = metrics
        self.plans = PlanCache(plan_cache_bytes, on_change=metrics.plan_cache_bytes.set)  # shared by every version
        self._refusals = Refusals(metrics)
        self._loader = Loader(store, self.plans, self._refusals, metrics)
        self._resident = Resident(
            self._loader,
            self._refusals,
            metrics,
            budget=version_cache_bytes,
            threads=store_threads,
            max_waiters=max_load_waiters,
        )
        self._ready = threading.Event()
        self._refresh_lock = threading.Lock()
        self._held: dict[tuple[str, str], int] = {}  # (name, alias) -> the refused version it names
        self._summaries: dict[str, ModelSummary] = {}  # the catalogue as last read
        self._mark: CatalogueMark | None = None
        self._refreshes_since_full = 0

    def close(self) -> None:
        self._resident.close()

    @property
    def ready(self) -> bool:
        """True once the store has been read successfully at least once."""
        return self._ready.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    @property
    def snapshot(self) -> Snapshot:
        return self._resident.snapshot

    # ------------------------------------------------------------------ lookup

    def entry(self, name: str) -> ModelEntry:
        return self._resident.entry(name)

    def get(self, name: str, version: int | None = None, alias: str | None = None) -> tuple[ServedModel, ModelEntry]:
        """The compiled model for a selector: version, alias, or neither for the default.
        Blocks for a load or a compile: for a thread, never the event loop (``locate``)."""
        future, entry = self.locate(name, version, alias)
        return self.compiled(future.result()), entry

    def get_resident(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[ServedModel, ModelEntry] | None:
        return self._resident.get_resident(name, version, alias)

    def locate(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[Future[ServedModel], ModelEntry]:
        return self._resident.locate(name, version, alias)

    def compiled(self, served: ServedModel) -> ServedModel:
        return self._loader.compiled(served)

    # ------------------------------------------------------------------ refresh

    def refresh(self) -> None:
        """Read what was written to the store's catalogue, load what is new, swap the snapshot.

        Raises the store's error if the catalogue (or a version) cannot be read; the
        previous snapshot keeps serving in that case, and the next refresh reads again.
        """
        with self._refresh_lock:
            full = self._mark is None or self._refreshes_since_full + 1 >= FULL_READ_EVERY
            changes = self._store.catalogue_changes(None if full else self._mark)
            summaries = catalogue.updated({} if full else self._summaries, changes.models)
            dirty = self._refusals.take_dirty()  # models with a version refused since their entry was built
            try:
                self._rebuild(summaries, dirty)
            except BaseException:
                self._refusals.put_back_dirty(dirty)
                raise
            self._summaries, self._mark = summaries, changes.mark
            self._refreshes_since_full = 0 if full else self._refreshes_since_full + 1
            self._ready.set()

    def _rebuild(self, summaries: Mapping[str, ModelSummary], dirty: set[str]) -> None:
        """Swap in a snapshot whose entries of the models that changed (or had a version
        refused since) are built again; every other entry is kept as it was."""
        old = self.snapshot.models
        changed = catalogue.changed(self._summaries, summaries) | (dirty & summaries.keys())
        if not changed:
            return
        models = {n: e for n, e in old.items() if n not in changed}
        rebuilt = sorted(changed & summaries.keys())
        wanted = [
            (name, version)
            for name in rebuilt
            for version in sorted({*summaries[name].aliases.values(), summaries[name].latest_version})
            if (name, version) not in self._refusals and (name not in old or version not in old[name].loaded)
        ]  # what the entries are built from first; what comes later (a fallback) is read alone
        with collector_paused(len(wanted) >= PAUSE_COLLECTOR_VERSIONS):
            read = self._loader.read_ahead(wanted)
            for name in rebuilt:
                models[name] = self._build_entry(summaries[name], old.get(name), read)
        before = {n: old[n] for n in changed if n in old}
        after = {n: models[n] for n in changed if n in models}
        self._resident.snapshot = snapshot = Snapshot(models)
        if self._ready.is_set():  # the first read loads everything; later ones say what changed
            for change in catalogue.diff(before, after):
                if not isinstance(change, catalogue.VersionAdded):  # a new version says so as it loads
                    log.info("%s", change)
        self._resident.forget_deleted()
        self._refusals.forget(snapshot.listed)
        self._held = {k: v for k, v in self._held.items() if snapshot.listed(k[0], v)}
        self._publish_info(list(before.values()), list(after.values()))

    def _build_entry(self, summary: ModelSummary, old: ModelEntry | None, read: ReadAhead) -> ModelEntry:
        """The versions and aliases ``aliases.choose`` picks, each version loaded at most once."""
        name = summary.name
        loaded: dict[int, ServedModel] = {}
        # lazy: a model that has answered a request has its new versions compiled here, off the
        # request path, as eager does (and so refused here, where an alias can fall back)
        compile = not self._lazy or (old is not None and any(s.is_compiled for s in old.loaded.values()))

        def outcome(version: int) -> Outcome:
            if (name, version) in self._refusals:
                return Outcome.REFUSED
            served = old.loaded.get(version) if old is not None else None
            if served is None:
                try:
                    served = self._loader.load(name, version, compile=compile, read=read)
                except NotFound:
                    log.info("%s version %d was deleted before it loaded", name, version)
                    return Outcome.GONE
            if served is None:
                return Outcome.REFUSED
            loaded[version] = served
            return Outcome.LOADED

        choice = choose(summary.versions, summary.aliases, old.aliases if old is not None else {}, outcome)
        for alias, version in summary.aliases.items():
            if alias not in choice.held:
                self._held.pop((name, alias), None)
            elif self._held.get((name, alias)) != version:
                self._held[(name, alias)] = version
                log.warning(
                    "alias %s of %s stays at version %d: version %d was refused at load",
                    alias,
                    name,
                    choice.aliases[alias],
                    version,
                )
        kept = {v: loaded[v] for v in choice.loaded}
        return ModelEntry(name, choice.versions, choice.aliases, kept, self._refusals.of(name))

    def _publish_info(self, old: list[ModelEntry], new: list[ModelEntry]) -> None:
        """The bnserve_model_info series of the entries that were built again."""

        def series(entries: list[ModelEntry]) -> set[tuple[str, str, str, str]]:
            return {
                (e.name, str(v), s.model.algorithm, ",".join(e.aliases_of(v)))
                for e in entries
                for v, s in e.loaded.items()
            }

        before, after = series(old), series(new)
        for labels in before - after:
            self.metrics.drop_model_info(*labels)
        for labels in after:
            self.metrics.model_info.labels(*labels).set(1)
