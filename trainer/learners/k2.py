"""``k2``: K2 over every variable, the class included, on a given variable order (Cooper &
Herskovits 1992; paper 002's baseline). ``Structure.order`` is the K2 order, class included,
and ``scores`` the log family scores in that order. ``MAX_PARENTS`` is shared by every
learner built on K2 (``cb``, ``k2-as``, ``info-as``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bnserve.store.errors import InvalidInput
from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import Learner, Param, non_negative_int
from bnserve.trainer.learners.search.k2 import Parents, SearchData, k2_search
from bnserve.trainer.learners.structure import Structure, ranked


def default_order(data: EncodedData) -> list[int]:
    """The class first, then the features by I(X;C) descending (ties: lower column).

    Paper 002 fixes no order for plain K2 (CB derives one); this puts the class where a
    naive-Bayes-like network has it, and the most informative features early, where they
    can become parents of the rest.
    """
    mi = stats.class_mutual_information(data.X, data.y, data.cards, data.n_classes, data.weights)
    return [len(data.features), *(int(i) for i in ranked(mi, range(len(data.features))))]


def parse_order(data: EncodedData, text: str) -> list[int]:
    """``A,B,...``: every variable (the class too) exactly once, as variable indices."""
    names = [v.name for v in data.variables]
    given = [s.strip() for s in text.split(",")] if text.strip() else []
    index = {name: i for i, name in enumerate(names)}
    unknown = [g for g in given if g not in index]
    if unknown:
        raise InvalidInput(f"order names unknown variable(s) {', '.join(map(repr, unknown))}")
    twice = sorted({g for g in given if given.count(g) > 1}, key=given.index)
    if twice:
        raise InvalidInput(f"order names {', '.join(map(repr, twice))} more than once")
    missing = [n for n in names if n not in set(given)]
    if missing:
        raise InvalidInput(f"order must name every variable; missing {', '.join(map(repr, missing))}")
    return [index[g] for g in given]


def k2_structure(v: SearchData, order: Sequence[int], parents: Parents, scores: Mapping[int, float]) -> Structure:
    return Structure(v.named(parents), tuple(v.names[i] for i in order), tuple(scores[i] for i in order))


def k2(data: EncodedData, max_parents: int | None, order: str | None) -> Structure:
    """K2 on ``order`` (default: ``default_order``) over every variable.

    ``Structure.order`` is that order, class included; ``scores`` the log family scores.
    O(n² · p · m·r²) for n variables, m rows, r states, p parents per node at most.
    """
    v = SearchData.of(data)
    seq = parse_order(data, order) if order is not None else default_order(data)
    parents, scores = k2_search(v, seq, max_parents)
    return k2_structure(v, seq, parents, scores)


MAX_PARENTS = Param(
    "max_parents",
    int,
    None,
    "maximum number of K2 parents per node (default: no bound; the Cooper-Herskovits score stops the search)",
    non_negative_int,
)


ORDER = Param(
    "order",
    str,
    None,
    "the K2 variable order, A,B,... naming every variable (the class too) once "
    "(default: the class, then the features by I(X;C) descending)",
)


LEARNERS = (
    Learner(
        "k2",
        k2,
        "K2 over every variable on a given order (Cooper & Herskovits 1992)",
        (MAX_PARENTS, ORDER),
        unweighted="",
    ),
)
