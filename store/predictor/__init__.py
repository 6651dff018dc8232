"""The compiled predictor: a model turned once into flat log-probability tables, then
P(class | observed features) per batch in O(n·c·k) per row (``compiled``), one fused
gather for the observed factors (``gather``) and exact elimination of missing ones
(``elimination``); float32 tables where they suffice (``precision``). One implementation
for the trainer's evaluation and the server."""

from bnserve.store.predictor.compiled import CompiledModel, check_codes, compile_model

__all__ = ["CompiledModel", "check_codes", "compile_model"]
