"""Naive Bayes: the class is the only parent of every feature (a 0-dependence classifier)."""

from __future__ import annotations

from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.base import Learner
from bnserve.trainer.learners.structure import Structure


def naive_bayes(data: TrainingView) -> Structure:
    """NB structure. O(n); no statistics needed. ``order`` is the column order, no scores."""
    n = len(data.features)
    return Structure.augmented(data, [()] * n, range(n))


LEARNERS = (
    Learner(
        "nb",
        naive_bayes,
        "naive Bayes: the class is the only parent of every feature",
        reads_pairs=False,
        unweighted="",
    ),
)
