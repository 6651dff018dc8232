"""``k2-as`` and ``k2-as-le`` (paper 002, §3; Singh & Provan 1995): forward selection of
features by the cross-validated accuracy of K2 networks, then CB on the selected ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import CROSS_VALIDATES, Learned, Learner
from bnserve.trainer.learners.cb import cb_on_selection
from bnserve.trainer.learners.k2 import MAX_PARENTS
from bnserve.trainer.learners.search.greedy import greedy_search
from bnserve.trainer.learners.search.k2 import Parents, SearchData, k2_family
from bnserve.trainer.learners.search.wrapper import WRAPPER_FOLDS, CrossValidatedAccuracy


def forward_selection(data: EncodedData, max_parents: int | None, keep_ties: bool) -> Learned:
    """K2-AS (paper 002 §3; Singh & Provan 1995): forward selection of features by the
    cross-validated accuracy (``CrossValidatedAccuracy``, 5-fold on the training data, in
    place of the paper's subset-learn/subset-eval halves) of the K2 network over the class
    and the selected features plus the candidate, in the order class, selection order,
    candidate. ``greedy_search`` adds the best candidate while the accuracy rises
    (candidates in column order, so ties go to the lower column); then CB learns the final
    network on the class and the selected features, as in the paper. ``keep_ties``: the
    paper's K2-AS≤, which adds the best candidate while the accuracy does not fall; it
    searches on (accuracy, size) lexicographically, as accuracy + size / (2 m (n + 1)),
    since distinct accuracies differ by at least 1/m.

    ``Structure.order`` is the selection order, ``scores`` the accuracy after each addition.
    O(n² · (K2 family + CV)) for the selection: a candidate's family is the only new one,
    since the earlier nodes' K2 parents do not depend on later nodes (families are memoised).
    """
    v = SearchData.of(data)
    cls = v.class_index
    n = len(data.features)
    score = CrossValidatedAccuracy(data)
    families: dict[tuple[int, ...], list[int]] = {}  # (*predecessors, node) -> K2 parents
    per_feature = 1.0 / (2 * data.n_rows * (n + 1)) if keep_ties else 0.0

    def network(selected: tuple[int, ...]) -> Parents:
        parents: Parents = {cls: []}
        for pos, f in enumerate(selected):
            key = (*selected[:pos], f)
            if key not in families:
                families[key], _ = k2_family(v, f, [cls, *selected[:pos]], max_parents)
            parents[f] = families[key]
        return parents

    def plain(selected: tuple[int, ...]) -> float:
        parents = network(selected)
        if selected and not parents[selected[-1]]:  # a parentless last node is cut off from the class
            return plain(selected[:-1])
        return score(v.named(parents))

    def accuracy(selected: tuple[int, ...]) -> float:
        return plain(selected) + per_feature * len(selected)

    def add_one(selected: tuple[int, ...]) -> Iterator[tuple[dict[str, Any], tuple[int, ...]]]:
        for f in range(n):
            if f not in selected:
                yield {"op": "add", "feature": v.names[f]}, (*selected, f)

    nothing: tuple[int, ...] = ()
    found = greedy_search(nothing, add_one, accuracy)
    gains = [plain(found.state[:k]) for k in range(1, len(found.state) + 1)]
    return cb_on_selection(
        data,
        v,
        found.state,
        gains,
        max_parents,
        score,
        wrapper={
            "folds": WRAPPER_FOLDS,
            "accuracy": plain(found.state),
            "evaluated": found.evaluated,
            "start_accuracy": found.trace[0]["score"],
        },
    )


def k2_as(data: EncodedData, max_parents: int | None) -> Learned:
    """K2-AS: ``forward_selection`` while the CV accuracy rises."""
    return forward_selection(data, max_parents, keep_ties=False)


def k2_as_le(data: EncodedData, max_parents: int | None) -> Learned:
    """K2-AS≤: ``forward_selection`` while the CV accuracy does not fall."""
    return forward_selection(data, max_parents, keep_ties=True)


LEARNERS = (
    Learner(
        "k2-as",
        k2_as,
        "K2-AS: features selected by CV accuracy of K2 networks, then CB (paper 002)",
        (MAX_PARENTS,),
        unweighted=CROSS_VALIDATES,
    ),
    Learner(
        "k2-as-le",
        k2_as_le,
        "K2-AS≤: K2-AS adding features while the CV accuracy does not fall (paper 002)",
        (MAX_PARENTS,),
        unweighted=CROSS_VALIDATES,
    ),
)
