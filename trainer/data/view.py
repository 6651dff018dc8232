"""The training view: what a learner reads of its data, held in memory or counted as streamed.

Two classes provide it: ``encoded.EncodedData`` holds the coded rows; ``streaming.StreamedData``
holds only their counts (a file read in chunks or parts). A learner annotated with
``TrainingView`` learns from either (``Learner.counts_only``), and mypy checks that it reads
nothing else; one that needs the rows themselves takes ``EncodedData``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np

from bnserve.store.model import Variable
from bnserve.trainer.data.preprocessing import Preprocessing

if TYPE_CHECKING:
    from bnserve.trainer.stats import PairStatistics


class TrainingView(Protocol):
    """The variables (features in column order, then the class), the class counts, the
    pairwise statistics, the counts of any families, the rows block by block, and where the
    data came from. Its subclasses name it as their base, so mypy refuses one that lacks a member."""

    variables: tuple[Variable, ...]
    n_rows_dropped: int
    source: str
    preprocessing: Preprocessing | None

    if TYPE_CHECKING:  # a cached property of EncodedData, a field of StreamedData: no class attribute here

        @property
        def statistics(self) -> PairStatistics:
            """N(xi, c) and N(xi, xj, c) of every feature and pair (``stats.PairStatistics``)."""

    def family_counts(self, families: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Available-case N(family) per family of feature column indices (-1: the class), axes in order."""

    def class_totals(self) -> np.ndarray:
        """N(c) per class state, int64 (float64 sums of weights when ``weighted``)."""

    @property
    def weighted(self) -> bool:
        """Whether the rows have weights: every count is then a float64 sum of weights."""

    def fingerprint(self) -> str:
        """sha256 over the variables and the coded rows."""

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """The coded rows, (X (rows, features) of integer codes, y int64, weights float64 or None), in
        blocks in file order: one block in memory, a chunk at a time (one more pass through
        the file) when streamed. For learners that score rows, e.g. by leave-one-out, after counting."""

    def total_weight(self) -> float:
        """The rows' total weight: the number of rows when they have no weights."""
        return float(self.class_totals().sum())

    @property
    def chunk_rows(self) -> int | None:
        """The rows per chunk the file is read in, None when the rows are held."""
        return None

    @cached_property
    def features(self) -> tuple[Variable, ...]:
        return self.variables[:-1]

    @property
    def class_variable(self) -> Variable:
        return self.variables[-1]

    @cached_property
    def cards(self) -> tuple[int, ...]:
        """Cardinality of each feature, in column order; computed once, since callers index
        it per column (with 20,000 columns, computing it per call made counting quadratic)."""
        return tuple(v.cardinality for v in self.features)

    @property
    def n_classes(self) -> int:
        return self.class_variable.cardinality

    @property
    def n_rows(self) -> int:
        return int(self.class_totals().sum())

    def class_counts(self) -> dict[str, int]:
        return {s: n.item() for s, n in zip(self.class_variable.states, self.class_totals())}  # float if weighted
