"""Comparing algorithms the way paper 001 does: W/D/L with a one-tailed binomial sign
test over data sets, a paired t-test per data set over the same folds, and Friedman's
average ranks, statistic and p-value."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import binomtest, chi2, rankdata, ttest_rel
from scipy.stats import f as f_dist

from bnserve.trainer.evaluation.cross_validation import Evaluation

DRAW_TOLERANCE = 1e-12  # mean zero-one losses closer than this are a draw


@dataclass(frozen=True)
class WinDrawLoss:
    a: str
    b: str
    wins: int
    draws: int
    losses: int
    p_a_better: float  # one-tailed sign test: P(at least `wins` of wins+losses | no difference)
    p_b_better: float  # the same for `losses`

    def to_dict(self) -> dict:
        return asdict(self)


def win_draw_loss(a: str, b: str, loss_a: Sequence[float], loss_b: Sequence[float]) -> WinDrawLoss:
    """A against B over data sets on a loss (lower is better)."""
    diff = np.asarray(loss_a, dtype=float) - np.asarray(loss_b, dtype=float)
    wins = int(np.count_nonzero(diff < -DRAW_TOLERANCE))
    losses = int(np.count_nonzero(diff > DRAW_TOLERANCE))
    draws = diff.shape[0] - wins - losses
    return WinDrawLoss(a, b, wins, draws, losses, _sign_test(wins, losses), _sign_test(losses, wins))


def _sign_test(wins: int, losses: int) -> float:
    return float(binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue) if wins + losses else 1.0


def paired_t_test(scores_a: Sequence[float], scores_b: Sequence[float]) -> tuple[float, float]:
    """(t, two-sided p) of the per-fold differences on the same folds; (0, 1) when they never differ."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    diff = a - b
    if np.allclose(diff, 0):
        return 0.0, 1.0
    if a.shape[0] < 2 or np.allclose(diff, diff[0]):  # no variance: the t statistic is unbounded
        return float(np.sign(diff[0]) * np.inf), 0.0
    result = ttest_rel(a, b)
    return float(result.statistic), float(result.pvalue)


@dataclass(frozen=True)
class Friedman:
    average_ranks: Mapping[str, float]  # 1 = best
    statistic: float  # χ²_F with k-1 degrees of freedom
    p_value: float
    iman_davenport: float  # F_F with (k-1, (k-1)(N-1)) degrees of freedom
    iman_davenport_p: float
    n_datasets: int

    def to_dict(self) -> dict:
        return asdict(self)


def friedman(losses: Mapping[str, Sequence[float]]) -> Friedman:
    """Friedman test on a loss per algorithm per data set (lower is better; ties share ranks)."""
    names = list(losses)
    table = np.array([losses[n] for n in names], dtype=float).T  # (datasets, algorithms)
    n, k = table.shape
    ranks = np.apply_along_axis(rankdata, 1, table)
    mean_ranks = ranks.mean(axis=0)
    statistic = 12 * n / (k * (k + 1)) * (np.sum(mean_ranks**2) - k * (k + 1) ** 2 / 4)
    p = float(chi2.sf(statistic, k - 1)) if k > 1 else 1.0
    if k < 2 or n < 2:
        f_value, f_p = float("nan"), 1.0
    else:
        denominator = n * (k - 1) - statistic
        f_value = (n - 1) * statistic / denominator if denominator > 0 else float("inf")
        f_p = float(f_dist.sf(f_value, k - 1, (k - 1) * (n - 1)))
    return Friedman(dict(zip(names, map(float, mean_ranks))), float(statistic), p, float(f_value), f_p, n)


@dataclass(frozen=True)
class Comparison:
    """Several algorithms over several data sets, with the papers' statistics."""

    evaluations: tuple[Evaluation, ...]
    win_draw_loss: tuple[WinDrawLoss, ...]
    paired_t: Mapping[str, Mapping[str, tuple[float, float]]]  # dataset -> "A vs B" -> (t, p)
    friedman: Friedman | None = None
    protocol: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "protocol": dict(self.protocol),
            "evaluations": [e.to_dict() for e in self.evaluations],
            "win_draw_loss": [w.to_dict() for w in self.win_draw_loss],
            "paired_t": {d: {pair: {"t": t, "p": p} for pair, (t, p) in v.items()} for d, v in self.paired_t.items()},
            "friedman": self.friedman.to_dict() if self.friedman else None,
        }


def compare(evaluations: Sequence[Evaluation], protocol: Mapping[str, Any] | None = None) -> Comparison:
    """W/D/L and sign tests on zero-one loss for every pair of algorithms; a paired
    t-test per data set on fold accuracies; Friedman ranks when there are several data sets."""
    labels = list(dict.fromkeys(e.label for e in evaluations))
    datasets = list(dict.fromkeys(e.dataset for e in evaluations))
    by = {(e.label, e.dataset): e for e in evaluations}
    loss = {label: [by[label, d].zero_one_loss for d in datasets] for label in labels}
    wdl = tuple(win_draw_loss(a, b, loss[a], loss[b]) for a, b in itertools.combinations(labels, 2))
    paired = {
        d: {
            f"{a} vs {b}": paired_t_test(by[a, d].fold_accuracies, by[b, d].fold_accuracies)
            for a, b in itertools.combinations(labels, 2)
        }
        for d in datasets
    }
    fr = friedman(loss) if len(datasets) > 1 and len(labels) > 1 else None
    return Comparison(tuple(evaluations), wdl, paired, fr, dict(protocol or {}))
