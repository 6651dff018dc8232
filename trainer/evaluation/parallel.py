"""Several candidates scored on the same prepared folds, in ``jobs`` processes at once.

Each candidate's figures depend only on the data, the folds and the candidate, so the
results, returned in the order given, are those of one process (times aside). The workers
are forked with the data and folds already in memory where the platform forks; elsewhere
they are sent once to each worker, not once per candidate.
"""

from __future__ import annotations

import importlib
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import Evaluation, Split, evaluate_on_splits
from bnserve.trainer.learners.parameters import ALR, HDP, Estimator
from bnserve.trainer.learners.registry import LEARNERS
from bnserve.trainer.learners.sizing import TooLarge, TrainingLimits


@dataclass(frozen=True)
class Scored:
    """One candidate's figures and out-of-fold posteriors (rows, classes); or none of them when
    it was ``dropped`` (clearly behind the reference) or a fold's fit was past the limits
    (``refused``: why, ``TooLarge.detail``)."""

    evaluation: Evaluation | None
    posteriors: np.ndarray | None
    refused: str = ""
    dropped: bool = False


ESTIMATOR_MODULES = {HDP: "bnserve.trainer.learners.hdp", ALR: "bnserve.trainer.learners.discriminative"}
Candidate = tuple[str, Mapping[str, Any]]
C = TypeVar("C", bound=Candidate)
_work: tuple[EncodedData, Sequence[Split], TrainingLimits] | None = None  # a worker's data, folds and limits


def score(
    candidate: Candidate,
    data: EncodedData,
    splits: Sequence[Split],
    limits: TrainingLimits,
    against: np.ndarray | None = None,
) -> Scored:
    """``evaluate_on_splits`` of one candidate (``against``: see there)."""
    algo, params = candidate
    out = np.empty((data.n_rows, data.n_classes))
    try:
        evaluation = evaluate_on_splits(algo, params, data, splits, data.source, out, limits, against)
    except TooLarge as exc:
        return Scored(None, None, exc.detail)
    return Scored(evaluation, out) if evaluation is not None else Scored(None, None, dropped=True)


def score_all(
    candidates: Sequence[C],
    data: EncodedData,
    splits: Sequence[Split],
    limits: TrainingLimits,
    jobs: int = 1,
    cost: Callable[[C], float] | None = None,
    done: Callable[[C], None] | None = None,
    against: np.ndarray | None = None,
) -> list[Scored]:
    """``score`` of each candidate (each ``against`` the same reference), in their order; over
    ``jobs`` processes when there are several candidates, the costliest (by ``cost``) started
    first so the last to end is a cheap one. ``done`` is called with each candidate as it ends."""
    if jobs <= 1 or len(candidates) < 2:
        results = []
        for candidate in candidates:
            results.append(score(candidate, data, splits, limits, against))
            if done:
                done(candidate)
        return results
    _import_before_fork(candidates)
    order = sorted(range(len(candidates)), key=lambda i: -cost(candidates[i]) if cost else 0)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(
        min(jobs, len(candidates)), mp_context=context, initializer=_start, initargs=(data, splits, limits)
    ) as pool:
        futures = {i: pool.submit(_score_in_worker, candidates[i], against) for i in order}
        results_by = {}
        for i in order:
            results_by[i] = futures[i].result()
            if done:
                done(candidates[i])
    return [results_by[i] for i in range(len(candidates))]


def _import_before_fork(candidates: Sequence[Candidate]) -> None:
    """The candidates' learner modules, and the estimators' that import scipy, imported here
    once rather than in every worker (forked workers inherit them)."""
    for algo, params in candidates:
        LEARNERS[algo]  # the lookup imports the module that defines it
        estimator = params.get("estimator")
        module = ESTIMATOR_MODULES.get(Estimator.parse(estimator).kind if estimator else "")
        if module:
            importlib.import_module(module)


def _start(data: EncodedData, splits: Sequence[Split], limits: TrainingLimits) -> None:
    global _work
    _work = (data, splits, limits)


def _score_in_worker(candidate: Candidate, against: np.ndarray | None) -> Scored:
    assert _work is not None
    return score(candidate, *_work, against)
