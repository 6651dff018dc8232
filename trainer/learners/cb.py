"""``cb``: CB over every variable (Singh & Valtorta; paper 002): CI tests of rising order
give K2 its order, until the 5-fold CV accuracy stops rising. The class is a root (see
``search.cb.cb_search``)."""

from __future__ import annotations

from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import Learned, Learner
from bnserve.trainer.learners.k2 import MAX_PARENTS, default_order, k2_structure
from bnserve.trainer.learners.search.cb import cb_search
from bnserve.trainer.learners.search.k2 import SearchData
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy


def cb(data: EncodedData, max_parents: int | None) -> Learned:
    """CB over every variable; ties in the order go to ``default_order`` (the class first).

    The stopping accuracy is ``CrossValidatedAccuracy`` (5-fold) on the training data.
    ``Structure.order`` is the K2 order kept, ``scores`` its log family scores.
    O(levels · (CI tests + K2 + 5-fold CV)); see ``cb_search``.
    """
    v = SearchData.of(data)
    priority = default_order(data)
    score = CrossValidatedAccuracy(data)
    result = cb_search(v, priority, priority, max_parents, lambda ps: score(v.named(ps)))
    structure = k2_structure(v, result.order, result.parents, result.scores)
    return Learned.single(structure, data, ci_order=result.ci_order, cb_accuracies=result.accuracies)


LEARNERS = (
    Learner("cb", cb, "CB: CI tests of rising order give K2 its order (Singh & Valtorta; paper 002)", (MAX_PARENTS,)),
)
