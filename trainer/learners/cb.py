"""``cb``: CB over every variable (Singh & Valtorta; paper 002): CI tests of rising order
give K2 its order, until the 5-fold CV accuracy stops rising. The class is a root (see
``search.cb.cb_search``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import CROSS_VALIDATES, Learned, Learner
from bnserve.trainer.learners.k2 import MAX_PARENTS, default_order, k2_structure
from bnserve.trainer.learners.search.cb import cb_search
from bnserve.trainer.learners.search.k2 import SearchData
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy
from bnserve.trainer.learners.structure import Structure


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


def cb_on_selection(
    data: EncodedData,
    v: SearchData,
    selected: Sequence[int],
    scores: Sequence[float],
    max_parents: int | None,
    score: CrossValidatedAccuracy,
    **metadata: Any,
) -> Learned:
    """The network of a selective learner (``k2-as``, ``info-as``; paper 002): CB over the class
    and the ``selected`` features, the class heading the order and ties going by selection
    order. ``Structure.order`` is the selection order with ``scores``; the metadata keep CB's
    K2 order, the CI-test order it stopped at and its accuracies, and ``metadata``."""
    nodes = [v.class_index, *selected]
    result = cb_search(v, nodes, nodes, max_parents, lambda ps: score(v.named(ps)))
    structure = Structure(v.named(result.parents), tuple(v.names[f] for f in selected), tuple(scores))
    return Learned.single(
        structure,
        data,
        network_order=[v.names[i] for i in result.order],
        ci_order=result.ci_order,
        cb_accuracies=result.accuracies,
        **metadata,
    )


LEARNERS = (
    Learner(
        "cb",
        cb,
        "CB: CI tests of rising order give K2 its order (Singh & Valtorta; paper 002)",
        (MAX_PARENTS,),
        unweighted=CROSS_VALIDATES,
    ),
)
