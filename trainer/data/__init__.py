"""Data as the learners see it: columns typed (``columns``), preprocessing the user asks for
(``preprocessing``) and what it learns from the rows (cut points by ``discretize``, imputed
values), the rows coded against the model's variables (``encoded``), or only their counts
when a file is too large for memory (``streaming``), and what a learner reads of either
(``view``); stratified folds (``folds``).

The names load on first use (``bnserve.lazy``): ``budget`` or ``preprocessing``'s constants
are read by a command line's parser without importing the readers (pyarrow) or the statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bnserve import lazy

if TYPE_CHECKING:
    from bnserve.trainer.data.encoded import (
        EncodedData,
        encode_like,
        encode_table,
        encode_with,
        load,
        load_with,
        prepare,
    )
    from bnserve.trainer.data.preprocessing import AVAILABLE_CASE, IMPUTE, MISSING_POLICIES, STATE, Preprocessing
    from bnserve.trainer.data.view import TrainingView

__all__ = [
    "AVAILABLE_CASE",
    "IMPUTE",
    "MISSING_POLICIES",
    "STATE",
    "EncodedData",
    "Preprocessing",
    "TrainingView",
    "encode_like",
    "encode_table",
    "encode_with",
    "load",
    "load_with",
    "prepare",
]
_PREPROCESSING = ("AVAILABLE_CASE", "IMPUTE", "MISSING_POLICIES", "STATE", "Preprocessing")

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        name: "preprocessing" if name in _PREPROCESSING else "view" if name == "TrainingView" else "encoded"
        for name in __all__
    },
)
