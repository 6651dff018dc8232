"""Naive Bayes with numeric leaves against naive Bayes on intervals, on the same folds.

    python bench/numeric_leaves.py [--datasets ecoli,wine] [--leaves mdl:16,gaussian,kde] [--choose] [--blend]
                                   [--folds 5] [--rows 5000]

A study, not a learner: each numeric column's P(x | class) is estimated one of these ways,
every nominal column by Laplace counts, on ``bench/discretisations.py``'s folds and samples:

- ``mdl:16`` (and any other ``--discretize`` method): the intervals the learners see today;
- ``gaussian``: a normal density per class (mean and sd of the training rows);
- ``kde``: a Gaussian kernel density per class (Silverman's bandwidth);
- ``gaussian@N``: a normal density per class integrated over N equal-frequency intervals, so
  a table over intervals as the compiled predictor serves today;
- ``ndd`` / ``ndd-wpkid``: non-disjoint discretisation (Yang & Webb 2002), atomic
  equal-frequency intervals three times as many as ``pkid`` (``wpkid``) gives, a value's
  counts those of its atom and both neighbours.

A column of at most two distinct training values (ecoli's lip and chg) is read as
``mdl:16`` intervals by every variant: a density of a class whose rows share one value is a
spike, which cost Gaussian leaves 9 points on ecoli.

With ``--choose``, naive Bayes with the first leaf for every column against the leaf chosen
by inner CV on each training fold, one for all numeric columns (``per-set``, as auto's stage 0
chooses) and one per column (``per-column``). With ``--blend``, also an ensemble over the
leaves: the mean of their naive Bayes posteriors. Prints each variant's mean accuracy and its mean paired gain over the first with its
standard error over the folds.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import discretisations, versus_forest
from bench.versus_forest import ordinal
from bnserve.trainer.data.discretize import PKID, WPKID, Method, equal_frequency_cuts, proportional_bins
from bnserve.trainer.data.folds import stratified_folds


def counts_log_table(codes: np.ndarray, y: np.ndarray, states: int, n_classes: int, window: int = 0) -> np.ndarray:
    """log P(state | class), Laplace, from each state's counts and its ``window`` neighbours each side."""
    table = np.zeros((states, n_classes))
    np.add.at(table, (codes, y), 1.0)
    summed = table.copy()
    for shift in range(1, window + 1):
        summed[shift:] += table[:-shift]
        summed[:-shift] += table[shift:]
    return np.log((summed + 1.0) / (summed.sum(axis=0) + states))


def numeric_log_density(leaf: str, x: np.ndarray, y: np.ndarray, n_classes: int, at: np.ndarray) -> np.ndarray:
    """log P(x | class) at the values ``at`` (rows, classes), learned from present ``x``."""
    from scipy.special import logsumexp
    from scipy.stats import norm

    out = np.zeros((at.size, n_classes))
    floor = 1e-3 * (float(np.std(x)) + 1e-9)
    if leaf.startswith("ndd"):
        atoms = 3 * proportional_bins(float(x.size), WPKID if leaf == "ndd-wpkid" else PKID)
        cuts = np.array(equal_frequency_cuts(x, atoms))
        table = counts_log_table(np.searchsorted(cuts, x), y, cuts.size + 1, n_classes, window=1)
        return table[np.searchsorted(cuts, at)]
    if leaf.startswith("gaussian@"):
        cuts = np.array(equal_frequency_cuts(x, int(leaf.partition("@")[2])))
        edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    for c in range(n_classes):
        v = x[y == c]
        if v.size == 0:
            continue
        sd = max(float(v.std()), floor)
        if leaf == "gaussian":
            out[:, c] = norm.logpdf(at, float(v.mean()), sd)
        elif leaf == "kde":
            h = max(1.06 * sd * v.size**-0.2, floor)
            out[:, c] = logsumexp(norm.logpdf(at[:, None], v[None, :], h), axis=1) - np.log(v.size)
        else:
            mass = np.diff(norm.cdf(edges, float(v.mean()), sd)) + 1e-9
            out[:, c] = np.log(mass / mass.sum())[np.searchsorted(cuts, at)]
    return out


Tables = list[dict[str, np.ndarray]]  # per column, per leaf: log P(x | class) of the scored rows (rows, classes)


def column_tables(
    leaves: list[str], data: versus_forest.Data, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray
) -> Tables:
    """Each column's log P(x | class) at the rows of ``X_test``, one table per leaf (a nominal
    column: Laplace counts under every leaf; a missing value: 0)."""
    n_classes = data.ours.n_classes
    tables: Tables = []
    for j in range(X_train.shape[1]):
        seen, asked = ~np.isnan(X_train[:, j]), ~np.isnan(X_test[:, j])
        x, y, at = X_train[seen, j], y_train[seen], X_test[asked, j]
        by_leaf = {}
        for leaf in leaves:
            out = np.zeros((X_test.shape[0], n_classes))
            if data.nominal[j]:
                out[asked] = counts_log_table(x.astype(np.int64), y, data.cards[j], n_classes)[at.astype(np.int64)]
            elif np.unique(x).size > 2 and (leaf in ("gaussian", "kde") or leaf.startswith(("gaussian@", "ndd"))):
                out[asked] = numeric_log_density(leaf, x, y, n_classes, at)
            else:  # intervals; a column of two values has one density per value, whatever the leaf
                cuts = np.array(
                    Method.parse(leaf if ":" in leaf and "@" not in leaf else "mdl:16").cuts(x, y, n_classes)
                )
                out[asked] = counts_log_table(np.searchsorted(cuts, x), y, cuts.size + 1, n_classes)[
                    np.searchsorted(cuts, at)
                ]
            by_leaf[leaf] = out
        tables.append(by_leaf)
    return tables


def posteriors(tables: Tables, choice: list[str], y_train: np.ndarray, n_classes: int) -> np.ndarray:
    """Naive Bayes's P(class | x) of the scored rows, with column j's leaf ``choice[j]``."""
    from scipy.special import softmax

    prior = np.log((np.bincount(y_train, minlength=n_classes) + 1.0) / (y_train.size + n_classes))
    return np.asarray(softmax(prior + sum(t[leaf] for t, leaf in zip(tables, choice)), axis=1))


def hits(tables: Tables, choice: list[str], y_train: np.ndarray, y_test: np.ndarray, n_classes: int) -> np.ndarray:
    """Whether naive Bayes with column j's leaf ``choice[j]`` puts each scored row's class first."""
    return np.asarray(posteriors(tables, choice, y_train, n_classes).argmax(axis=1) == y_test)


def inner_choices(
    leaves: list[str], data: versus_forest.Data, X: np.ndarray, y: np.ndarray, folds: int
) -> tuple[list[str], list[str]]:
    """The leaf of ``leaves`` whose naive Bayes gets most rows right by inner CV of the training
    rows (one for every numeric column, ties to the first), and one per column (two greedy passes
    over the columns from the first leaf, a change kept only when it gets more right)."""
    inner = stratified_folds(y, folds, 1)
    parts = [(column_tables(leaves, data, X[inner != f], y[inner != f], X[inner == f]), f) for f in range(folds)]

    def right(choice: list[str]) -> int:
        n_classes = data.ours.n_classes
        return sum(int(hits(t, choice, y[inner != f], y[inner == f], n_classes).sum()) for t, f in parts)

    numeric = np.flatnonzero(~data.nominal)
    whole = {leaf: right([leaf] * X.shape[1]) for leaf in leaves}
    per_set = [max(leaves, key=lambda leaf: (whole[leaf], -leaves.index(leaf)))] * X.shape[1]
    choice, best = [leaves[0]] * X.shape[1], whole[leaves[0]]
    for _ in range(2):
        for j in numeric:
            for leaf in leaves:
                tried = [*choice[:j], leaf, *choice[j + 1 :]]
                if (score := right(tried)) > best:
                    choice, best = tried, score
    return per_set, choice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--datasets", default="dermatology,ecoli,hepatitis,wine,adult-train,letter")
    parser.add_argument("--leaves", default="mdl:16,gaussian,kde,gaussian@64,ndd,ndd-wpkid")
    parser.add_argument(
        "--choose", action="store_true", help="the first leaf against inner CV's choice per set and per column"
    )
    parser.add_argument("--blend", action="store_true", help="also the mean posterior of the leaves' naive Bayes")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=5000)
    args = parser.parse_args(argv)
    leaves = args.leaves.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            data = discretisations.peer_data(discretisations.sampled(name, args.rows, pathlib.Path(tmp)), name)
            y, n_classes, width = data.ours.y, data.ours.n_classes, data.raw.shape[1]
            fold = stratified_folds(y, args.folds, args.seed)
            accuracies: dict[str, list[float]] = {}
            for f in range(args.folds):
                X_train, X_test = ordinal(data, fold != f, fold == f)
                tables = column_tables(leaves, data, X_train, y[fold != f], X_test)
                choices = {leaf: [leaf] * width for leaf in leaves}
                if args.choose:
                    per_set, per_column = inner_choices(leaves, data, X_train, y[fold != f], args.folds)
                    choices = {leaves[0]: choices[leaves[0]], "per-set": per_set, "per-column": per_column}
                for label, choice in choices.items():
                    right = hits(tables, choice, y[fold != f], y[fold == f], n_classes)
                    accuracies.setdefault(label, []).append(float(right.mean()))
                if args.blend:
                    mean = np.mean(
                        [posteriors(tables, [leaf] * width, y[fold != f], n_classes) for leaf in leaves], axis=0
                    )
                    accuracies.setdefault("blend", []).append(float(np.mean(mean.argmax(axis=1) == y[fold == f])))
            base = np.array(accuracies[leaves[0]])
            cells = []
            for label, a in accuracies.items():
                d = np.array(a) - base
                cells.append(
                    f"{label} {100 * np.mean(a):6.2f} ({100 * d.mean():+5.2f}±{100 * d.std(ddof=1) / np.sqrt(d.size):4.2f})"
                )
            print(f"{name:<12} " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
