"""Info-AS (paper 002, §4): select features by a conditional information metric, then learn
a Bayesian network on the class and the selected features with CB (K2 on CI-test orders).

Node selection: start with Δ = ∅; add the feature A that maximises the metric of A given
Δ, conditioning on the instantiations of Δ that occur in the data; stop when no feature
has a positive value (CIG, CGR and CDC are positive exactly when the conditional gain is).
The metrics (Definitions 4.1–4.3) are ``stats.conditional_information_metrics``:

- ``cig``: I(C;A|Δ), conditional information gain;
- ``cgr``: I(C;A|Δ) / H(A|Δ), conditional gain ratio;
- ``cdc``: I(C;A|Δ) / H(C,A|Δ), the complement 1 − d_N of the conditional distance.

Each table counts the rows where the class, A and all of Δ are present. Network
construction, as in the paper: CB (``cb_search``) over the class and Δ, the class a root
heading the order, ties in the order broken by selection order; CB's CI-test order
stops rising with the 5-fold CV accuracy on the training data.
"""

from __future__ import annotations

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import CROSS_VALIDATES, Learned, Learner, Param, one_of
from bnserve.trainer.learners.cb import cb_on_selection
from bnserve.trainer.learners.k2 import MAX_PARENTS
from bnserve.trainer.learners.search.k2 import SearchData
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy
from bnserve.trainer.learners.structure import ranked

METRICS = ("cig", "cgr", "cdc")


def select(
    X: np.ndarray, y: np.ndarray, cards: tuple[int, ...], n_classes: int, metric: str
) -> tuple[list[int], list[float]]:
    """The node-selection phase: (selected columns in order, the winning metric value at each step).

    Each step builds one (class, A, layer) table per remaining feature with a bincount over
    the m rows, the layers being the s ≤ m occurring instantiations of Δ: O(n² m) for the
    tables plus O(n · |Δ| m log m) for the layer codes (paper 002 §4.3 bounds its index-tree
    version by O(m r n² (r + n))). Ties go to the lower column.
    """
    which = METRICS.index(metric)
    m, n = X.shape
    layer, s = np.zeros(m, dtype=np.int64), 1
    chosen = np.zeros(n, dtype=bool)
    selected: list[int] = []
    values: list[float] = []
    while not chosen.all():
        rest = np.flatnonzero(~chosen)
        im = np.full(n, -np.inf)
        for a in rest:
            ok = (X[:, a] >= 0) & (layer >= 0) & (y >= 0)
            card = int(cards[a])
            codes = (y[ok].astype(np.int64) * card + X[ok, a]) * s + layer[ok]
            counts = np.bincount(codes, minlength=n_classes * card * s).reshape(n_classes, card, s)
            im[a] = stats.conditional_information_metrics(counts)[which]
        best = int(ranked(im, rest)[0])
        if not im[best] > 0:
            break
        chosen[best] = True
        selected.append(best)
        values.append(float(im[best]))
        layer, s = stats.occurring_instantiations([X[:, j] for j in selected])
    return selected, values


def info_as(data: EncodedData, metric: str, max_parents: int | None) -> Learned:
    """Info-AS: ``select``, then CB on the class and the selected features.

    ``Structure.order`` is the selection order and ``scores`` the metric values; the
    metadata keep CB's K2 order, the CI-test order it stopped at and its accuracies.
    """
    selected, values = select(data.X, data.y, data.cards, data.n_classes, metric)
    return cb_on_selection(data, SearchData.of(data), selected, values, max_parents, CrossValidatedAccuracy(data))


METRIC = Param("metric", str, "cgr", "the selection metric, cig, cgr or cdc (default cgr)", one_of(*METRICS))

LEARNERS = (
    Learner(
        "info-as",
        info_as,
        "Info-AS: features selected by conditional information metrics, then CB (paper 002)",
        (METRIC, MAX_PARENTS),
        unweighted=CROSS_VALIDATES,
    ),
)
