"""Which compiled models the server holds, kept in step with the store by polling.

The served state is one immutable ``Snapshot``; a refresh builds a new one and swaps
the reference, so a request always sees a consistent set of versions and aliases and
never waits for a load. Per model the snapshot holds its latest version and every
aliased version; other versions are loaded on demand into a small LRU. A version or model
deleted from the store is dropped from all of it on the next refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnserve.server import metrics
from bnserve.store.db import ModelStore, ModelSummary
from bnserve.store.errors import BnServeError, IntegrityError, InvalidModel, NotFound
from bnserve.store.model import Model
from bnserve.store.model.names import resolve_version
from bnserve.store.predictor import DEFAULT_PLAN_CACHE_BYTES, CompiledModel, PlanCache, compile_model

log = logging.getLogger(__name__)

ON_DEMAND_CAPACITY = 16


@dataclass(frozen=True)
class ServedModel:
    """One compiled model version, ready to answer.

    ``class_name`` and this model's children of the prediction metrics are looked up once
    here rather than per request (``record``).
    """

    name: str
    version: int
    created_at_ms: int
    checksum: str
    model: Model
    compiled: CompiledModel
    class_name: str = field(init=False)
    _rows: Any = field(init=False, repr=False, compare=False)
    _per_class: tuple = field(init=False, repr=False, compare=False)
    _batch: Any = field(init=False, repr=False, compare=False)
    _seconds: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "class_name", self.model.class_variable.name)
        object.__setattr__(self, "_rows", metrics.PREDICTION_ROWS.labels(self.name))
        object.__setattr__(
            self, "_per_class", tuple(metrics.PREDICTED_CLASS_ROWS.labels(self.name, c) for c in self.compiled.classes)
        )
        object.__setattr__(self, "_batch", metrics.REQUEST_ROWS.labels(self.name))
        object.__setattr__(self, "_seconds", metrics.REQUEST_SECONDS.labels(self.name))

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
    loaded: Mapping[int, ServedModel]  # compiled versions held in the snapshot
    refused: Mapping[int, str] = field(default_factory=dict)  # version -> why it was refused

    def aliases_of(self, version: int) -> tuple[str, ...]:
        return tuple(sorted(a for a, v in self.aliases.items() if v == version))


@dataclass(frozen=True)
class Snapshot:
    models: Mapping[str, ModelEntry]


class ModelRepository:
    """Name/version/alias -> compiled model, refreshed from a ``ModelStore``."""

    def __init__(self, store: ModelStore, plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES):
        self._store = store
        self.plans = PlanCache(plan_cache_bytes, on_change=metrics.PLAN_CACHE_BYTES.set)  # shared by every version
        self._snapshot = Snapshot({})
        self._ready = threading.Event()
        self._refresh_lock = threading.Lock()
        self._on_demand: OrderedDict[tuple[str, int, str], ServedModel] = OrderedDict()
        self._on_demand_lock = threading.Lock()
        self._refused: dict[tuple[str, int], str] = {}
        self._held: dict[tuple[str, str], int] = {}  # (name, alias) -> the refused version it names

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
        """Read the store's catalogue, load what is new, swap the snapshot.

        Raises the store's error if the catalogue cannot be read; the previous
        snapshot keeps serving in that case.
        """
        with self._refresh_lock:
            summaries = self._store.list_models()
            old = self._snapshot.models
            models = {s.name: self._refresh_one(s, old.get(s.name)) for s in summaries}
            self._snapshot = Snapshot(models)
            self._forget_deleted(models)
            self._publish_info(old, models)
            self._ready.set()

    def _forget_deleted(self, models: Mapping[str, ModelEntry]) -> None:
        """Drop what is kept of versions no longer in the store (deleted): on-demand loads,
        refusals, held aliases. Their numbers are never reused, so this only frees memory."""

        def listed(name: str, version: int) -> bool:
            return name in models and version in models[name].versions

        with self._on_demand_lock:
            for loaded in [k for k in self._on_demand if not listed(k[0], k[1])]:
                del self._on_demand[loaded]
        for refused in [k for k in self._refused if not listed(*k)]:
            del self._refused[refused]
        for held in [k for k, v in self._held.items() if not listed(k[0], v)]:
            del self._held[held]

    def _refresh_one(self, summary: ModelSummary, old: ModelEntry | None) -> ModelEntry:
        """Keep every aliased version and the newest version that loads. An alias moved to a
        version that is refused stays at the version it named before, when that one is held."""
        name = summary.name
        loaded: dict[int, ServedModel] = {}
        gone: set[int] = set()  # deleted between the listing and the load: left out of the entry

        def take(version: int) -> bool:
            if old is not None and version in old.loaded:
                loaded[version] = old.loaded[version]
                return True
            if (name, version) in self._refused or version in gone:
                return False
            try:
                served = self._load(name, version)
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
        refused = {v: why for (n, v), why in self._refused.items() if n == name}
        versions = tuple(v for v in summary.versions if v not in gone)
        aliases = {a: v for a, v in aliases.items() if v not in gone}
        return ModelEntry(name, versions, aliases, loaded, refused)

    def _load(self, name: str, version: int) -> ServedModel | None:
        """Read and compile one version; None (and remembered) if it is refused; NotFound if
        it was deleted since the catalogue was read."""
        t0 = time.perf_counter()
        try:
            mv = self._store.load(name, version=version)
            served = ServedModel(
                mv.name, mv.version, mv.created_at_ms, mv.checksum, mv.model, compile_model(mv.model, plans=self.plans)
            )
        except (IntegrityError, InvalidModel) as exc:
            metrics.MODEL_LOAD_FAILURES.labels(name).inc()
            log.error("refused %s version %d at load: %s", name, version, exc.message)
            self._refused[(name, version)] = exc.message
            return None
        metrics.MODEL_LOAD_SECONDS.observe(time.perf_counter() - t0)
        log.info("loaded %s version %d (%s)", name, version, mv.model.algorithm)
        return served

    @staticmethod
    def _publish_info(old: Mapping[str, ModelEntry], new: Mapping[str, ModelEntry]) -> None:
        def series(models: Mapping[str, ModelEntry]) -> set[tuple[str, str, str, str]]:
            return {
                (e.name, str(v), s.model.algorithm, ",".join(e.aliases_of(v)))
                for e in models.values()
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
            raise InvalidModel(f"model {name!r} version {version} was refused at load: {entry.refused[version]}")
        return entry, version

    def get(self, name: str, version: int | None = None, alias: str | None = None) -> tuple[ServedModel, ModelEntry]:
        """The compiled model for a selector: version, alias, or neither for the default."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version) or self._get_on_demand(name, version)
        return served, entry

    def get_resident(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[ServedModel, ModelEntry] | None:
        """``get`` from memory alone: None where answering needs a store read (a version not
        loaded yet). It never calls the store nor waits for a lock, so the event loop may call it."""
        entry, version = self._resolve(name, version, alias)
        served = entry.loaded.get(version) or self._on_demand_hit(name, version)
        return None if served is None else (served, entry)

    def _on_demand_hit(self, name: str, version: int) -> ServedModel | None:
        for key, served in list(self._on_demand.items()):
            if key[:2] == (name, version):
                return served
        return None

    def _get_on_demand(self, name: str, version: int) -> ServedModel:
        """A version outside the snapshot (neither latest nor aliased): load once, keep a few."""
        with self._on_demand_lock:
            for key in list(self._on_demand):
                if key[:2] == (name, version):
                    self._on_demand.move_to_end(key)
                    return self._on_demand[key]
            served = self._load(name, version)  # NotFound if deleted since the last refresh
            if served is None:
                raise InvalidModel(
                    f"model {name!r} version {version} was refused at load: {self._refused[(name, version)]}"
                )
            self._on_demand[(name, version, served.checksum)] = served
            while len(self._on_demand) > ON_DEMAND_CAPACITY:
                self._on_demand.popitem(last=False)
            return served


class Poller:
    """Background thread calling ``repository.refresh`` every ``interval`` seconds."""

    def __init__(self, repository: ModelRepository, interval: float):
        self._repository = repository
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started: a server stopped before its first read never was
            self._thread.join(timeout=5)

    def poll_once(self) -> bool:
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
        metrics.STORE_LAST_SUCCESS.set_to_current_time()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll_once()
