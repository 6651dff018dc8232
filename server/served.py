"""A model version as the server hands it out: its compiled tables, shared by checksum, and its metrics.

Versions with the same checksum (of any name) share one ``SharedModel``, so one compile and
one set of tables however many versions have it. A ``ServedModel`` is one version over it,
with its model's children of the prediction metrics looked up once (``ModelMetrics``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from bnserve.server.metrics import ModelMetrics
from bnserve.store.model import Model
from bnserve.store.predictor import CompiledModel, PlanCache, compile_model


class SharedModel:
    """A model and its compiled tables, one per checksum. Compiled once, by the first caller
    that needs it; a model that fails to compile fails every later caller the same way,
    without compiling again."""

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
    """One model version, ready to answer once compiled (the repository hands out only those)."""

    name: str
    version: int
    created_at_ms: int
    checksum: str
    shared: SharedModel = field(repr=False)
    metrics: ModelMetrics = field(repr=False, compare=False)

    @property
    def model(self) -> Model:
        return self.shared.model

    @cached_property
    def class_name(self) -> str:
        return self.model.class_variable.name

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
        """Count values unseen in training read as missing: feature column -> how many."""
        self.metrics.record_unseen({self.compiled.features[j].name: n for j, n in unseen.items()})
