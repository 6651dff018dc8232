"""Several candidates scored on the same prepared folds, in ``jobs`` processes at once.

The unit of work is one fold of one candidate (a cheap candidate's folds go together), so a
stage whose dearest candidate is most of its work (laode with alr: 1.0 of promoters' 2.6 CPU
s) still spreads over every process. A
candidate's folds are added in fold order whichever process scored them (``OnSplits``), the
folds that decide a drop first, the rest only once it is kept: each candidate's figures depend
only on the data, the folds and the candidate, so the results, returned in the order given,
are those of one process (times aside). The workers are forked with the data and folds
already in memory where the platform forks; elsewhere they are sent once to each worker, not
once per fold.
"""

from __future__ import annotations

import gc
import heapq
import importlib
import multiprocessing
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from bnserve.trainer.cores import limited
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import Evaluation, FoldScore, OnSplits, Split, evaluate_on_splits
from bnserve.trainer.learners.parameters import ALR, HDP, Estimator
from bnserve.trainer.learners.registry import LEARNERS
from bnserve.trainer.learners.sizing import TooLarge, TrainingLimits, pair_tables


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
IN_FLIGHT = 2  # tasks handed to each worker process at once
# a candidate charged less (auto.work: cell-fits over all its folds) is one task a phase (its
# deciding folds, then the rest), not one a fold: on a small set each task's round trip cost
# more than the fit (hayes-roth-test's whole search was ~0.1 s slower a fold at a time)
FOLD_TASK_WORK = 100_000
C = TypeVar("C", bound=Candidate)
Work = tuple[EncodedData, Sequence[Split]]  # a data set and its prepared folds
_work: tuple[Sequence[Work], TrainingLimits] | None = None  # a worker's data sets and folds, and limits


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
    aside: Sequence[str] = (),
) -> list[Scored]:
    """``score`` of each candidate (each ``against`` the same reference), in their order; over
    ``jobs`` processes a fold at a time when there are several candidates (a cheap one's folds
    together, ``FOLD_TASK_WORK``), the costliest (by ``cost``) candidates' first so the last to
    end are cheap ones. ``done`` is called with each candidate as it ends. ``aside``: modules a
    later call will need, imported on a thread of this process while the workers run (scipy's
    optimiser and special functions, 0.25 s that the next stage's fork otherwise waits for)."""
    if jobs > 1 and len(candidates) > 1:
        _count_before_fork(candidates, splits, limits)
    tagged = [(candidate, 0) for candidate in candidates]
    return _scored([(data, splits)], tagged, limits, jobs, cost, done, against, aside)


def score_each(
    groups: Sequence[tuple[EncodedData, Sequence[Split], Sequence[C]]],
    limits: TrainingLimits,
    jobs: int = 1,
    cost: Callable[[C], float] | None = None,
) -> list[list[Scored]]:
    """Each group's candidates scored on its own data and folds (``score``), all in one pool of
    ``jobs`` processes: auto's discretisations are a data set each, and a pool for each in turn
    left a process idle at each one's end (dermatology's choice took as long on two processes
    as on one). Nothing is counted before the fork: each fold's pairwise statistics are counted
    where it is fitted, in parallel, since two of the three discretisations are not kept."""
    tagged = [(candidate, g) for g, (_, _, candidates) in enumerate(groups) for candidate in candidates]
    flat = iter(_scored([(data, splits) for data, splits, _ in groups], tagged, limits, jobs, cost))
    return [[next(flat) for _ in candidates] for _, _, candidates in groups]


def _scored(
    works: Sequence[Work],
    tagged: Sequence[tuple[C, int]],
    limits: TrainingLimits,
    jobs: int = 1,
    cost: Callable[[C], float] | None = None,
    done: Callable[[C], None] | None = None,
    against: np.ndarray | None = None,
    aside: Sequence[str] = (),
) -> list[Scored]:
    """``score`` of each candidate on the data and folds of its ``works`` index, in order (see ``score_all``)."""
    candidates = [candidate for candidate, _ in tagged]
    if jobs <= 1 or len(candidates) < 2:
        in_order = []
        for candidate, w in tagged:
            in_order.append(score(candidate, *works[w], limits, against))
            if done:
                done(candidate)
        return in_order
    _import_before_fork(candidates)
    order = sorted(range(len(candidates)), key=lambda i: -cost(candidates[i]) if cost else 0)
    rank = {i: r for r, i in enumerate(order)}
    folds = {i: OnSplits(candidates[i][0], candidates[i][1], *works[tagged[i][1]], limits) for i in order}
    cheap = {i for i in order if cost is not None and cost(candidates[i]) < FOLD_TASK_WORK}
    results: dict[int, Scored] = {}
    arrived: dict[int, dict[int, FoldScore | str]] = {i: {} for i in order}
    # a heap, dearest first: (rank, first fold, candidate, its folds in the task)
    ready = [(rank[i], t[0], i, t) for i in order for t in _tasks(range(folds[i].deciding(against)), i in cheap)]
    heapq.heapify(ready)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(
        min(jobs, len(candidates)), mp_context=context, initializer=_start, initargs=(works, limits)
    ) as pool:
        running: dict[Future, tuple[int, tuple[int, ...]]] = {}
        importing: threading.Thread | None = None
        while ready or running:
            # two tasks in flight a process: one runs while the next waits in the pool's queue, so a
            # worker does not idle while this process hands it work; the heap orders what starts
            while ready and len(running) < IN_FLIGHT * jobs:
                _, _, i, task = heapq.heappop(ready)
                if i not in results:
                    running[pool.submit(_folds_in_worker, candidates[i], tagged[i][1], task)] = (i, task)
            if importing is None and aside:  # the workers are forked at the first submit: no thread is copied
                importing = threading.Thread(target=_import_quietly, args=(aside,), name="bnserve-imports")
                importing.start()
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                i, task = running.pop(future)
                if i in results:  # refused or dropped while this task ran
                    continue
                deciding = folds[i].added < folds[i].deciding(against)
                arrived[i].update(zip(task, future.result()))
                outcome = _take(folds[i], arrived[i], against)
                if outcome is not None:
                    results[i] = outcome
                    if done:
                        done(candidates[i])
                elif deciding and folds[i].added == folds[i].deciding(against):  # kept: its other folds
                    for t in _tasks(range(folds[i].added, len(folds[i].splits)), i in cheap):
                        heapq.heappush(ready, (rank[i], t[0], i, t))
        if importing is not None:
            importing.join()
    return [results[i] for i in range(len(candidates))]


def _take(folds: OnSplits, arrived: dict[int, FoldScore | str], against: np.ndarray | None) -> Scored | None:
    """Add the folds that have arrived, in order: the candidate's result once it is refused (a
    fold past the limits; folds before it were within), dropped or complete; else None."""
    while folds.added in arrived:
        outcome = arrived.pop(folds.added)
        if isinstance(outcome, str):
            return Scored(None, None, outcome)
        folds.add(folds.added, outcome)
        if folds.behind(against):
            return Scored(None, None, dropped=True)
    if folds.added == len(folds.splits):
        return Scored(folds.result(), folds.pooled)
    return None


def _import_before_fork(candidates: Sequence[Candidate]) -> None:
    """The candidates' learner modules, and the estimators' that import scipy, imported here
    once rather than in every worker (forked workers inherit them)."""
    for algo, _ in candidates:
        LEARNERS[algo]  # the lookup imports the module that defines it
    for module in estimator_modules([params["estimator"] for _, params in candidates if params.get("estimator")]):
        importlib.import_module(module)


def estimator_modules(estimators: Sequence[str]) -> list[str]:
    """The modules ``estimators`` (texts) are fitted by that import scipy: what ``aside`` takes."""
    return [m for e in estimators if (m := ESTIMATOR_MODULES.get(Estimator.parse(e).kind))]


def _import_quietly(modules: Sequence[str]) -> None:
    """Import ``modules``; a failure is left for the import where they are needed to raise."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # raised again, with its context, where it is needed
            continue


def _count_before_fork(candidates: Sequence[Candidate], splits: Sequence[Split], limits: TrainingLimits) -> None:
    """Each training fold's pairwise statistics counted here once, when a candidate reads them,
    not by each worker on each fold it takes; forked workers inherit them, and so do the next
    stage's (the workers' CPU on promoters: 3.6 → 3.2 s). Not for the discretisation choice
    (``score_each``), which throws two of its three methods' folds away. Past the limits they
    are not counted here: the candidate's own fit refuses them, saying why."""
    if not any(LEARNERS[algo].reads_pairs for algo, _ in candidates):
        return
    for _, train, _ in splits:
        try:
            limits.check(pair_tables(train), "the pairwise statistics")
        except TooLarge:
            return
        train.statistics  # noqa: B018 -- counted now, kept on the fold


def _start(works: Sequence[Work], limits: TrainingLimits) -> None:
    """A forked worker's start. What it inherits (every module, the folds) is frozen out of
    the garbage collector's passes: a full pass would sweep it all again in each worker, for
    nothing, since the worker only adds to it (dermatology's search: about 5 % of its CPU)."""
    global _work
    gc.freeze()
    _work = (works, limits)


def _tasks(folds: range, cheap: bool) -> list[tuple[int, ...]]:
    """``folds`` as the tasks of one candidate: a fold each, or all in one for a ``cheap`` one."""
    return ([tuple(folds)] if folds else []) if cheap else [(f,) for f in folds]


def _folds_in_worker(candidate: Candidate, work: int, task: tuple[int, ...]) -> list[FoldScore | str]:
    """The folds of ``task`` on the data and folds of ``work`` learnt and scored in order, up to
    the first past the limits, for which why (``TooLarge.detail``). On one core: the process
    is one of ``jobs`` (``cores``)."""
    assert _work is not None
    works, limits = _work
    folds = OnSplits(candidate[0], candidate[1], *works[work], limits)
    scored: list[FoldScore | str] = []
    with limited(1):
        for f in task:
            try:
                scored.append(folds.score(f))
            except TooLarge as exc:
                scored.append(exc.detail)
                break
    return scored
