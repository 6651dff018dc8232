"""Ensembles of one-dependence classifiers: AODE (Webb, Boughton & Wang 2005) and RTAN (Ma & Shi, paper 001).

``aode``: one SPODE per feature Xp as super-parent (class -> every feature, Xp -> every
other feature), each estimated on all the training rows, combined by ``mean_joint``:
P(c, x) is the mean over p of P(c) P(x_p | c) prod_{i != p} P(x_i | c, x_p). Webb et al.
smooth P(c, x_p) as one table; we keep our per-node Laplace CPTs (10-fold CV accuracy on
chess is the same, 0.911, either way).

``rtan``: ``members`` TANs, each learned (structure and CPTs) on its own bootstrap
sample of the rows, combined by ``mean_posterior`` (soft voting). Paper 001 describes
RTAN's decision as a majority vote; we average the members' posteriors instead, because
the model serves probabilities: vote fractions are coarse (multiples of 1/B, often 0 for
the true class) and the averaged posterior is the usual probabilistic form of bagging.
On chess (10-fold CV, B = 10) the two decide alike: accuracy 0.931 averaged vs 0.927
voted, log-loss 0.181 vs 1.49. Paper 001 also says RTAN "investigates the diversity of
TAN by the K statistic"; no member is selected or weighted by it here.
"""

from __future__ import annotations

import numpy as np

from bnserve.store.model import MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT
from bnserve.trainer.data import EncodedData, TrainingView
from bnserve.trainer.learners.base import Learned, Learner, Member, Param, non_negative_int, positive_int
from bnserve.trainer.learners.structure import Structure
from bnserve.trainer.learners.tan import tan


def spode(data: TrainingView, p: int) -> Structure:
    """The SPODE with feature column ``p`` as super-parent; ``order`` is p, then the other columns."""
    n = len(data.features)
    return Structure.augmented(data, [() if i == p else (p,) for i in range(n)], [p, *(i for i in range(n) if i != p)])


def aode(data: TrainingView) -> Learned:
    """Every feature is the super-parent of one member, in column order (no data needed for
    the structure: O(n^2)); the CPTs cost O(n^2 (m + c v^2)) in ``bnserve.trainer.fit``, and
    prediction O(n^2 c) per row (every node of every member is kept, for exact joints).

    Unlike Webb et al., no super-parent is dropped per row for a value seen fewer than m
    times: the ensemble is fixed at training time. A SPODE whose super-parent value was
    rare or unseen gets a small joint P(c, x_p, ...) from its Laplace estimates, so it
    weighs little in the mean of joints; a missing super-parent is summed out exactly.
    With no features the model is the class prior (one member, no feature nodes).
    """
    n = len(data.features)
    members = tuple(Member(spode(data, p), data) for p in range(n))
    if not members:
        members = (Member(Structure.augmented(data, [], []), data),)
    return Learned(members, MEAN_JOINT, {"super_parents": [v.name for v in data.features]})


def laode(data: TrainingView) -> Learned:
    """AODE's SPODEs pooled by product, not by mean (``product_joint``): their geometric
    mean, whose log-CPTs are a linear model over every pair of features with the class.
    With ``--estimator alr`` those weights are fitted as one logistic regression
    (``pooled``), which can hold any pairwise interaction (monks-2's "exactly two
    attributes are 1" is one); with a generative estimator the model is the geometric mean
    of the SPODEs' estimates. O(n^2) members' tables as AODE, prediction O(n^2 c) per row.
    """
    learned = aode(data)
    return Learned(learned.members, PRODUCT_JOINT, learned.metadata)


def bootstrap_samples(n_rows: int, members: int, seed: int) -> np.ndarray:
    """(members, n_rows) row indices drawn with replacement; deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, max(n_rows, 1), size=(members, n_rows))


def rtan(data: EncodedData, members: int, sample_seed: int) -> Learned:
    """``members`` bootstrap samples (seeded by ``sample_seed``); on each, a TAN structure
    (``tan``) and its CPTs. O(B n^2 m) for the CMI matrices."""
    samples = bootstrap_samples(data.n_rows, members, sample_seed)
    learned = []
    for rows in samples:
        sample = data.subset(rows)
        learned.append(Member(tan(sample), sample))
    return Learned(tuple(learned), MEAN_POSTERIOR, {"member_orders": [list(m.structure.order) for m in learned]})


MEMBERS = Param("members", int, 10, "number of ensemble members (default 10)", positive_int)
SAMPLE_SEED = Param("sample_seed", int, 0, "seed of the bootstrap samples (default 0)", non_negative_int)

LEARNERS = (
    Learner(
        "aode",
        aode,
        "averaged one-dependence estimators: every feature a super-parent (Webb et al. 2005)",
        unweighted="",
    ),
    Learner(
        "laode",
        laode,
        "log-linear AODE: the SPODEs pooled by product; with --estimator alr one logistic regression "
        "over every pair of features and the class (after Zaidi et al. 2016's higher-order ALR)",
        unweighted="",
    ),
    Learner(
        "rtan",
        rtan,
        "bagged TAN ensemble on bootstrap samples, posteriors averaged (Ma & Shi; paper 001)",
        (MEMBERS, SAMPLE_SEED),
        unweighted="it learns each member on a bootstrap sample of the rows, drawn without regard to weights",
    ),
)
