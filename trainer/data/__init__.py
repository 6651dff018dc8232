"""Data as the learners see it: columns typed (``columns``), preprocessing the user asks for
(``preprocessing``) and what it learns from the rows (cut points by ``discretize``, imputed
values), the rows coded against the model's variables (``encoded``), or only their counts
when a file is too large for memory (``streaming``), and what a learner reads of either
(``view``); stratified folds (``folds``).

The names load on first use (``bnserve.lazy``): ``budget`` or the policies of ``missing``
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
    from bnserve.trainer.data.missing import AVAILABLE_CASE, IMPUTE, MISSING_POLICIES, STATE
    from bnserve.trainer.data.preprocessing import Preprocessing
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
_MISSING = ("AVAILABLE_CASE", "IMPUTE", "MISSING_POLICIES", "STATE")
_ELSEWHERE = {"Preprocessing": "preprocessing", "TrainingView": "view"}

__getattr__, __dir__ = lazy.exports(
    __name__,
    {name: "missing" if name in _MISSING else _ELSEWHERE.get(name, "encoded") for name in __all__},
)
