"""What the server serves: one immutable ``Snapshot``, and the versions loaded on demand beside it.

A refresh builds a new snapshot and swaps the reference, so a call always sees a
consistent set of versions and aliases and never waits for a refresh. Per model the
snapshot holds its latest version and every aliased version; any other version a call
names is loaded on demand, on threads of their own, and kept within a budget of bytes
(``bnserve.server.on_demand``). ``Resident`` answers the lookups over both.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from bnserve.server.loading import Loader, Refusals, refusal
from bnserve.server.metrics import Metrics
from bnserve.server.on_demand import OnDemand
from bnserve.server.served import ServedModel
from bnserve.store.errors import NotFound
from bnserve.store.model.names import resolve_version


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

    def listed(self, name: str, version: int) -> bool:
        """Whether the store listed this version at the last refresh."""
        return name in self.models and version in self.models[name].versions


class Resident:
    """The snapshot and the versions loaded on demand, and the lookups over them. No lock is
    held across a store call on the request path: an on-demand load runs on a thread of its
    own, so a slow load delays only the calls for that version. ``close`` stops those threads."""

    def __init__(
        self,
        loader: Loader,
        refusals: Refusals,
        metrics: Metrics,
        *,
        budget: int,
        threads: int,
        max_waiters: int,
    ):
        self.snapshot = Snapshot({})
        self._loader = loader
        self._refusals = refusals
        self._metrics = metrics
        self.on_demand: OnDemand[ServedModel] = OnDemand(
            self._load_on_demand, budget=budget, threads=threads, max_waiters=max_waiters, metrics=metrics
        )

    def close(self) -> None:
        self.on_demand.close()

    def forget_deleted(self) -> None:
        """Let go of the versions loaded on demand the snapshot no longer lists (deleted)."""
        snapshot = self.snapshot
        self.on_demand.forget(lambda key: snapshot.listed(*key))

    def entry(self, name: str) -> ModelEntry:
        entry = self.snapshot.models.get(name)
        if entry is None:
            raise NotFound(f"model {name!r} not found")
        return entry

    def _resolve(self, name: str, version: int | None, alias: str | None) -> tuple[ModelEntry, int]:
        """The entry and the version a selector names (``resolve_version``: the production
        alias, else the newest version not refused); a refused version is an error."""
        entry = self.entry(name)
        version = resolve_version(name, entry.versions, entry.aliases, version or None, alias or None, entry.refused)
        if version in entry.refused:
            raise refusal(name, version, entry.refused[version])
        return entry, version

    def get_resident(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[ServedModel, ModelEntry] | None:
        """The compiled model from memory alone: None where answering needs a store read (a
        version not loaded yet) or a compile (lazy). It never calls the store nor waits for a
        lock, so the event loop may call it."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version) or self.on_demand.peek((name, version))
        return None if served is None or not served.is_compiled else (served, entry)

    def locate(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[Future[ServedModel], ModelEntry]:
        """The version a selector names, as a future for this caller alone (it may cancel it
        to stop waiting): done at once when the version is in memory, else when its load from
        the store ends, on the load threads. Not compiled yet under lazy (``Loader.compiled``).
        Busy (UNAVAILABLE) at once when too many calls wait for loads. Never blocks."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version)
        if served is not None:
            done: Future[ServedModel] = Future()
            done.set_result(served)
            return done, entry
        if (name, version) in self._refusals:
            raise self._refusals.error(name, version)
        return self.on_demand.request((name, version)), entry

    def _load_on_demand(self, name: str, version: int) -> ServedModel:
        """A version outside the snapshot (neither latest nor aliased), read and compiled on
        a load thread, and counted; NotFound if deleted since the last refresh."""
        try:
            served = self._loader.load(name, version, compile=True)
        except BaseException:
            self._metrics.version_loads.labels("failed").inc()
            raise
        if served is None:
            self._metrics.version_loads.labels("refused").inc()
            raise self._refusals.error(name, version)
        self._metrics.version_loads.labels("loaded").inc()
        return served
