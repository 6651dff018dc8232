"""Evaluation protocols: stratified (repeated) k-fold cross-validation and hold-out,
for one learner or for several learners over several data sets.

Every algorithm sees the same folds on a data set, and preprocessing that learns from
data (discretisation, imputation) is fitted on each training fold. Predictions come from
``bnserve.store.predictor``, the same compiled path the server uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Model, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.data.columns import Columns
from bnserve.trainer.data.encoded import encode_like
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation import metrics
from bnserve.trainer.fit import column_major, fit
from bnserve.trainer.io import redacted_url
from bnserve.trainer.learners.sizing import DEFAULT_LIMITS, TrainingLimits
from bnserve.trainer.progress import stage


@dataclass(frozen=True)
class Evaluation:
    """One algorithm on one data set. Accuracy: mean and sd over folds (sd 0 for a
    hold-out); log-loss over all scored rows; AUC pooled over each repeat's predictions,
    averaged over repeats; times and Sum_MI: means per fold."""

    algorithm: str
    params: Mapping[str, Any]
    dataset: str
    n_rows: int
    accuracy: float
    accuracy_std: float
    log_loss: float
    auc: float
    fit_seconds: float
    predict_seconds: float
    sum_mi: float
    fold_accuracies: tuple[float, ...]
    fold_choices: tuple[str, ...] = ()  # per fold, what a selecting fitter (auto) chose on the training rows
    combinations: tuple[str, ...] = ()  # the combination rule of its models, each fold's once
    classes: tuple[str, ...] = ()
    confusion: tuple[tuple[int, ...], ...] = ()  # [true][predicted] over every scored row (of every repeat)

    @property
    def zero_one_loss(self) -> float:
        return 1.0 - self.accuracy

    def per_class(self) -> dict[str, dict[str, float]]:
        """Precision, recall and F1 of each class (one-vs-rest, from ``confusion``; NaN where a
        ratio has no rows), and its support (the rows of that class scored)."""
        matrix = np.asarray(self.confusion, dtype=np.float64)
        hits, predicted, actual = np.diag(matrix), matrix.sum(axis=0), matrix.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision, recall = hits / predicted, hits / actual
            f1 = 2 * precision * recall / (precision + recall)
        return {
            c: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(n)}
            for c, p, r, f, n in zip(self.classes, precision, recall, f1, actual)
        }

    @property
    def label(self) -> str:
        return describe(self.algorithm, self.params)

    def to_dict(self) -> dict:
        return {**asdict(self), "zero_one_loss": self.zero_one_loss, "per_class": self.per_class()}


def describe(algo: str, params: Mapping[str, Any]) -> str:
    return " ".join([algo, *(f"{k}={v}" for k, v in params.items() if v is not None)])


Fitter = Callable[[EncodedData], Model]  # training rows -> model; for procedures above ``fit`` (auto)
Recoder = Callable[[Sequence[Variable]], EncodedData]  # the test rows coded against other variables


@dataclass(frozen=True)
class FoldScore:
    """One fold learnt and scored: its test rows' posteriors and labels, and what the model
    says of itself (``_Run.add`` makes the figures of it)."""

    proba: np.ndarray
    y: np.ndarray
    fit_seconds: float
    predict_seconds: float
    sum_mi: float
    choice: str | None  # what a selecting fitter chose; None for a learner
    used_params: Mapping[str, Any]
    combination: str
    learnt: Mapping[Hashable, Any] = field(default_factory=dict)  # what the fit kept on the fold (``fit.learn``)


class _Run:
    """Accumulates one algorithm's folds on one data set. ``fitter``, when given, learns
    the model instead of ``fit(algo, …, **params)``; ``params`` then only label the run.
    ``structure_scores`` False leaves out Sum_MI (NaN), a pass of MI and CMI per fold."""

    def __init__(
        self,
        algo: str,
        params: Mapping[str, Any],
        data: EncodedData,
        fitter: Fitter | None = None,
        limits: TrainingLimits = DEFAULT_LIMITS,
        structure_scores: bool = True,
    ):
        self.algo, self.params, self.data, self.fitter, self.limits = algo, dict(params), data, fitter, limits
        self.structure_scores = structure_scores
        self.recode: Recoder | None = None  # holdout's test rows, read again; else their columns
        self.choices: list[str] = []
        self.accuracies: list[float] = []
        self.losses: list[np.ndarray] = []
        self.aucs: list[float] = []
        self.fit_seconds: list[float] = []
        self.predict_seconds: list[float] = []
        self.sum_mis: list[float] = []
        self.used_params: Mapping[str, Any] = {}
        self.combinations: tuple[str, ...] = ()
        self.confusion = np.zeros((data.n_classes, data.n_classes), dtype=np.int64)

    def fold(self, train: EncodedData, test: EncodedData) -> np.ndarray:
        """Learn on ``train``, score ``test``, add the fold; its posteriors."""
        return self.add(self.score(train, test))

    def score(self, train: EncodedData, test: EncodedData) -> FoldScore:
        """Learn on ``train`` and score ``test``, adding nothing: what ``add`` takes, in this
        process or from a worker's."""
        known = set(train.learnt)
        t0 = time.perf_counter()
        model = (
            self.fitter(train)
            if self.fitter
            else fit(self.algo, train, limits=self.limits, record=False, **self.params)
        )
        if model.variables != test.variables:  # a fitter that cut the numbers its own way (auto's stage 0)
            test = self.recode(model.variables) if self.recode else encode_like(_columns(test), model.variables)
        t1 = time.perf_counter()
        proba = compile_model(model).predict_proba(test.X)
        t2 = time.perf_counter()
        if self.fitter:
            used_params = self.params
            choice: str | None = model.metadata.get("selection", {}).get("chosen", f"{model.algorithm}")
        else:
            given_estimator = {"estimator": model.metadata["estimator"]} if "estimator" in self.params else {}
            used_params, choice = {**model.params, **given_estimator}, None
        sum_mi = metrics.sum_mi(model, train) if self.structure_scores else float("nan")
        learnt = {key: kept for key, kept in train.learnt.items() if key not in known}
        return FoldScore(proba, test.y, t1 - t0, t2 - t1, sum_mi, choice, used_params, model.combination, learnt)

    def add(self, score: FoldScore) -> np.ndarray:
        """Add a scored fold (folds in order: the figures are the same wherever they were scored)."""
        self.used_params = score.used_params
        if score.choice is not None:
            self.choices.append(score.choice)
        self.fit_seconds.append(score.fit_seconds)
        self.predict_seconds.append(score.predict_seconds)
        predicted = np.argmax(score.proba, axis=1)
        self.accuracies.append(float(np.mean(predicted == score.y)))
        np.add.at(self.confusion, (score.y, predicted), 1)
        self.losses.append(metrics.log_losses(score.proba, score.y))
        self.sum_mis.append(score.sum_mi)
        self.combinations = tuple(dict.fromkeys((*self.combinations, score.combination)))
        return score.proba

    def result(self, dataset: str) -> Evaluation:
        return Evaluation(
            algorithm=self.algo,
            params=self.used_params,
            dataset=dataset,
            n_rows=self.data.n_rows,
            accuracy=float(np.mean(self.accuracies)),
            accuracy_std=float(np.std(self.accuracies, ddof=1)) if len(self.accuracies) > 1 else 0.0,
            log_loss=float(np.concatenate(self.losses).mean()),
            auc=float(np.nanmean(self.aucs)) if not all(np.isnan(self.aucs)) else float("nan"),
            fit_seconds=float(np.mean(self.fit_seconds)),
            predict_seconds=float(np.mean(self.predict_seconds)),
            sum_mi=float(np.mean(self.sum_mis)),
            fold_accuracies=tuple(self.accuracies),
            fold_choices=tuple(self.choices),
            combinations=self.combinations,
            classes=self.data.class_variable.states,
            confusion=tuple(tuple(int(n) for n in row) for row in self.confusion),
        )


def _columns(test: EncodedData) -> Columns:
    if test.columns is None:
        raise InvalidInput("the model's variables differ from the test rows', and their raw columns are not kept")
    return test.columns


def _check_folds(folds: int, repeats: int, data: EncodedData) -> None:
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= data.n_rows:
        raise InvalidInput(f"folds must be an integer from 2 to the number of rows ({data.n_rows}), got {folds!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InvalidInput(f"repeats must be a positive integer, got {repeats!r}")


def cross_validate_many(
    candidates: Sequence[tuple[str, Mapping[str, Any]]],
    data: EncodedData,
    *,
    dataset: str = "",
    folds: int = 10,
    repeats: int = 1,
    seed: int = 0,
    limits: TrainingLimits = DEFAULT_LIMITS,
) -> list[Evaluation]:
    """Stratified ``folds``-fold CV repeated ``repeats`` times (repeat r shuffles with seed + r);
    every candidate (algorithm, params) sees the same folds; each fit within ``limits``."""
    _check_folds(folds, repeats, data)
    runs = [_Run(algo, params, data, limits=limits) for algo, params in candidates]
    return _cross_validate(runs, data, dataset, folds, repeats, seed)


def cross_validate_fitters(
    fitters: Sequence[tuple[str, Mapping[str, Any], Fitter]],
    data: EncodedData,
    *,
    dataset: str = "",
    folds: int = 10,
    repeats: int = 1,
    seed: int = 0,
) -> list[Evaluation]:
    """``cross_validate_many``'s folds (the same for the same ``seed``) for procedures that are
    not one learner, e.g. ones that themselves choose by CV: each ``(algo, params, fitter)``'s
    fitter sees only each outer training fold (the same object for every fitter of a fold), so
    any choice it makes is scored on rows it never saw (nested CV). ``algo`` and ``params``
    name the result."""
    _check_folds(folds, repeats, data)
    runs = [_Run(algo, params, data, fitter) for algo, params, fitter in fitters]
    return _cross_validate(runs, data, dataset, folds, repeats, seed)


def _cross_validate(
    runs: Sequence[_Run],
    data: EncodedData,
    dataset: str,
    folds: int,
    repeats: int,
    seed: int,
) -> list[Evaluation]:
    with stage(f"cross-validating {dataset or redacted_url(data.source)}", repeats * folds * len(runs), "fold") as bar:
        for r in range(repeats):
            fold = stratified_folds(data.y, folds, seed + r)
            pooled = [np.empty((data.n_rows, data.n_classes)) for _ in runs]
            for f in range(folds):
                train, test = _column_major_training(*data.split(fold != f, fold == f))  # cut points etc. learned on it
                for run, proba in zip(runs, pooled):
                    bar.note(describe(run.algo, run.params))
                    proba[fold == f] = run.fold(train, test)
                    bar.update()
            for run, proba in zip(runs, pooled):
                run.aucs.append(metrics.auc(proba, data.y))
    return [run.result(dataset or data.source) for run in runs]


Split = tuple[np.ndarray, EncodedData, EncodedData]  # (test rows mask, training fold, test fold)


def fold_splits(data: EncodedData, folds: int, seed: int) -> list[Split]:
    """The stratified folds of ``cross_validate_many`` (one repeat) prepared once, so several
    candidates can be scored on them one after another: each training fold keeps the
    statistics the first candidate counted on it."""
    _check_folds(folds, 1, data)
    fold = stratified_folds(data.y, folds, seed)
    return [(fold == f, *_column_major_training(*data.split(fold != f, fold == f))) for f in range(folds)]


def _column_major_training(train: EncodedData, test: EncodedData) -> tuple[EncodedData, EncodedData]:
    """The training fold in the column-major order ``fit`` reads, made once here: ``fit`` would
    otherwise copy it into a new object on every call, and each candidate would count the
    fold's pairwise statistics again instead of reading the first one's."""
    prepared = column_major(train)
    assert isinstance(prepared, EncodedData)
    return prepared, test


DROP_AFTER_FOLDS = 2  # a candidate may be dropped once this many folds are scored
DROP_Z = 3.0  # ... when it is this many standard errors behind the reference on those rows


def clearly_behind(hits: np.ndarray, reference: np.ndarray) -> bool:
    """Whether a candidate right on ``hits`` (bool per row scored) is clearly behind one right on
    ``reference`` (the same rows): McNemar's z on the rows where they disagree, at least
    ``DROP_Z``. Paired on the rows, so the noise the folds share cancels."""
    behind = int(np.count_nonzero(reference & ~hits))
    ahead = int(np.count_nonzero(hits & ~reference))
    return behind - ahead > DROP_Z * np.sqrt(behind + ahead)


def evaluate_on_splits(
    algo: str,
    params: Mapping[str, Any],
    data: EncodedData,
    splits: Sequence[Split],
    dataset: str = "",
    probabilities: np.ndarray | None = None,
    limits: TrainingLimits = DEFAULT_LIMITS,
    against: np.ndarray | None = None,
) -> Evaluation | None:
    """One candidate on prepared ``fold_splits``: the figures of ``cross_validate_many`` that a
    choice reads (accuracy, log-loss, times); AUC and Sum_MI, which cost scipy's import and a
    pass of MI per fold, are NaN. ``probabilities`` (rows, classes), when given, receives each
    row's test-fold posterior. With ``against`` (bool per row: a reference candidate's
    out-of-fold hits on the same splits), None when after ``DROP_AFTER_FOLDS`` folds the
    candidate is ``clearly_behind`` it: the rest of its folds would not make it the choice.
    Each fold's fit is within ``limits`` (past them: ``sizing.TooLarge``, before allocating)."""
    folds = OnSplits(algo, params, data, splits, limits, probabilities)
    with stage(describe(algo, params), len(splits), "fold") as bar:
        for f in range(len(splits)):
            folds.add(f, folds.score(f))
            bar.update()
            if folds.behind(against):
                return None
    return folds.result(dataset)


class OnSplits:
    """One candidate's folds on prepared ``fold_splits``, scored here (``score``) or anywhere
    else, added in fold order (``add``): the figures are ``evaluate_on_splits``' whichever
    process scored each fold. ``probabilities`` (rows, classes), when given, receives each
    row's test-fold posterior."""

    def __init__(
        self,
        algo: str,
        params: Mapping[str, Any],
        data: EncodedData,
        splits: Sequence[Split],
        limits: TrainingLimits = DEFAULT_LIMITS,
        probabilities: np.ndarray | None = None,
    ):
        self.run = _Run(algo, params, data, limits=limits, structure_scores=False)
        self.data, self.splits = data, splits
        self.pooled = np.empty((data.n_rows, data.n_classes)) if probabilities is None else probabilities
        self.scored = np.zeros(data.n_rows, dtype=bool)
        self.added = 0  # folds added, which are the first ones

    def score(self, f: int) -> FoldScore:
        """Fold ``f`` learnt and scored in this process (past ``limits``: ``sizing.TooLarge``)."""
        _, train, test = self.splits[f]
        return self.run.score(train, test)

    def add(self, f: int, score: FoldScore) -> None:
        if f != self.added:
            raise ValueError(f"fold {f} added after {self.added} of them: folds are added in order")
        test_rows, train, _ = self.splits[f]
        train.learnt.update(score.learnt)  # from a worker: for the next stage's, forked from here
        self.pooled[test_rows] = self.run.add(score)
        self.scored |= test_rows
        self.added += 1

    def deciding(self, against: np.ndarray | None) -> int:
        """How many first folds decide whether the candidate is dropped (all of them without
        ``against``, or when there are no more)."""
        return DROP_AFTER_FOLDS if against is not None and DROP_AFTER_FOLDS < len(self.splits) else len(self.splits)

    def behind(self, against: np.ndarray | None) -> bool:
        """Whether, its deciding folds just added, the candidate is ``clearly_behind`` the
        reference's hits ``against`` on the same rows (never without ``against``)."""
        if against is None or self.added != self.deciding(against) or self.added == len(self.splits):
            return False
        hits = self.pooled[self.scored].argmax(axis=1) == self.data.y[self.scored]
        return clearly_behind(hits, against[self.scored])

    def result(self, dataset: str = "") -> Evaluation:
        self.run.aucs.append(float("nan"))
        return self.run.result(dataset or self.data.source)


def cross_validate(
    algo: str, data: EncodedData, *, folds: int = 10, seed: int = 0, repeats: int = 1, **params: Any
) -> Evaluation:
    """One algorithm by stratified (repeated) k-fold CV; deterministic for a given seed."""
    return cross_validate_many([(algo, params)], data, folds=folds, repeats=repeats, seed=seed)[0]


def holdout(
    algo: str,
    train: EncodedData,
    test: EncodedData,
    *,
    fitter: Fitter | None = None,
    limits: TrainingLimits = DEFAULT_LIMITS,
    recode: Recoder | None = None,
    **params: Any,
) -> Evaluation:
    """Learn on ``train`` (with ``fitter`` when given, as in ``cross_validate_fitters``),
    score on ``test`` (coded against the same variables; ``recode`` codes them against a
    fitter's model cut otherwise)."""
    if test.variables != train.variables:
        raise InvalidInput("the test data must be coded against the training variables")
    if test.n_rows == 0:
        raise InvalidInput(f"{redacted_url(test.source)}: no rows to score")
    run = _Run(algo, params, train, fitter, limits)
    run.recode = recode
    proba = run.fold(train, test)
    run.aucs.append(metrics.auc(proba, test.y))
    result = run.result(f"{redacted_url(train.source)} -> {redacted_url(test.source)}")
    return replace(result, n_rows=test.n_rows)
