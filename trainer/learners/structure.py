"""What a structure learner returns, and the deterministic ranking every learner shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bnserve.trainer.data import TrainingView

# Scores equal to this many decimals (nats) count as tied; ties go to the lower column index.
TIE_DECIMALS = 12


@dataclass(frozen=True)
class Structure:
    """A classifier's DAG by variable name, and how the learner built it.

    ``parents`` maps every node of the network (the class too) to its ordered parents;
    a feature left out is not in the network. In augmented naive Bayes structures the
    class comes first, then feature parents in the order they were chosen; general
    networks (k2, cb) may give the class parents. ``order`` lists the nodes in the order
    the learner added them (features only, except for k2-style learners, whose order
    holds the class too); ``scores[i]`` is the value that selected ``order[i]`` (see each
    learner's docstring).
    """

    parents: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]
    scores: tuple[float, ...] = ()

    @staticmethod
    def augmented(
        data: TrainingView,
        feature_parents: Sequence[Sequence[int]],
        order: Sequence[int],
        scores: Sequence[float] = (),
    ) -> Structure:
        """Class -> every feature, plus feature arcs given by column index per feature column."""
        names = [v.name for v in data.features]
        cls = data.class_variable.name
        parents: dict[str, tuple[str, ...]] = {
            names[i]: (cls, *(names[int(p)] for p in feature_parents[i])) for i in range(len(names))
        }
        parents[cls] = ()
        return Structure(parents, tuple(names[int(i)] for i in order), tuple(float(s) for s in scores))


def ranked(values: np.ndarray, candidates: Sequence[int] | np.ndarray) -> np.ndarray:
    """``candidates`` (column indices) sorted by ``values[candidate]`` descending, ties by index."""
    cand = np.sort(np.asarray(candidates, dtype=np.intp))
    key = np.round(np.asarray(values, dtype=np.float64)[cand], TIE_DECIMALS)
    return cand[np.argsort(-key, kind="stable")]
