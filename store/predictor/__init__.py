"""The compiled predictor: a model turned once into flat log-probability tables, then
P(class | observed features) per batch in O(n·c·k) per row (``compiled``), one fused
gather for the observed factors (``gather``) and exact elimination of missing ones
(``elimination``), whose plans a cache bounded in bytes keeps (``plans``); float32 tables
where they suffice (``precision``). One implementation for the trainer's evaluation and
the server.

The names load on first use (``bnserve.lazy``): ``trainer``'s flags read ``precision``'s
constants without importing numpy and the compiler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bnserve import lazy

if TYPE_CHECKING:
    from bnserve.store.predictor.compiled import CompiledModel, check_codes, compile_model
    from bnserve.store.predictor.plans import DEFAULT_PLAN_CACHE_BYTES, PlanCache

__all__ = ["DEFAULT_PLAN_CACHE_BYTES", "CompiledModel", "PlanCache", "check_codes", "compile_model"]

__getattr__, __dir__ = lazy.exports(
    __name__, {name: "plans" if name in ("DEFAULT_PLAN_CACHE_BYTES", "PlanCache") else "compiled" for name in __all__}
)
