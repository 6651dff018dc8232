"""``--algo auto``: choose the learner, k and the estimator by cross-validation on the training data.

Three stages on the same stratified folds (``auto_folds``: 5, or 3 from ``LARGE_ROWS`` rows;
prepared once, so every candidate on a fold reads the statistics the first one counted),
after a stage 0 where the data have numeric columns:

0. discretisation (``binning``): the menu's methods (``DEFAULT_DISCRETIZATIONS``) scored by
   naive Bayes and AODE, each fold cut on its training rows, and whether the numeric
   columns' linear discriminants are added as derived features (``projections``); the best
   one's folds are the folds of the stages below, and the winner is fitted on the data cut by it;
   the other options' proxies, scored already on the same rows, are candidates too (``CUT``:
   a cut suits most structures or one, on glass AODE's with ``equal-frequency:10``), never
   blended, and one chosen is fitted on its own cut;
1. structures: naive Bayes first, then every candidate learner (one per k for those that
   take k; selective learners choose their own), each with Laplace estimates;
2. estimators: the best ``REFINED`` structures again with each other estimator (HDP,
   Dirichlet 0.5), since the estimator that pays depends on how deep the tables are (HDP
   on up to ``HDP_QUADRATIC_PAST_ROWS`` rows not on AODE's ensembles); and
   the discriminative ALR on the best of naive Bayes and TAN, whose networks it fits as
   they are (where the generative estimates are worst, it gains most: tic-tac-toe), and on
   ``ALR_ONLY``'s laode, one logistic regression over every pair of features (monks-2).

3. blend: from the candidates whose models are one network, the mean of the posteriors of
   up to ``MAX_BLEND`` of them, chosen greedily (Caruana et al. 2004's ensemble selection:
   start from the best, add the one that most improves the average's accuracy, ties to the
   lower log-loss, while it gets more rows right; one estimator per structure), scored on
   the same out-of-fold posteriors, so it
   costs no fit until the end. It is served as one model of their networks
   (``mean_posterior``), still a DAG plus tables.

The winner is the most accurate candidate, ties going to the lower log-loss and then to
the candidate tried first (``most-accurate``), or the blend where it beats them all on
the pooled out-of-fold posteriors; ``simplest-within-noise`` (the rule before) takes the
first candidate within one standard error of the best, and no blend.

The budget is work, not time, so the same file, flags and seed give the same model on any
machine, busy or idle: each candidate is charged ``work`` (rows x features x folds x its
cost relative to naive Bayes) before it starts, and one that would take the total past
``budget`` is not started (the first always is); those left out are recorded with the choice.
A candidate clearly behind a reference after its first folds (stage 1: naive Bayes; stage 2:
stage 1's best; ``cross_validation.clearly_behind``, paired on the same rows) is dropped
there, its remaining folds unspent: it would not be the choice. Candidates of a stage run in
``jobs`` processes at once, against a reference already scored, so the choice is the same
for any ``jobs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import MEAN_POSTERIOR, SINGLE, Model
from bnserve.trainer.binning import Alternative, Binning, choosable, choose_binning, derivable, work_of_choice
from bnserve.trainer.blas import one_blas_thread
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import (
    Evaluation,
    Split,
    cross_validate_fitters,
    describe,
    fold_splits,
)
from bnserve.trainer.evaluation.metrics import log_losses
from bnserve.trainer.evaluation.parallel import Scored, estimator_modules, score_all
from bnserve.trainer.fit import arc_cmi, fit
from bnserve.trainer.learners.parameters import ALR, HDP, Estimator
from bnserve.trainer.learners.registry import (
    AUTO,
    DEFAULT_CANDIDATES,
    DEFAULT_DISCRETIZATIONS,
    DEFAULT_ESTIMATORS,
    DEFAULT_KS,
    DEFAULT_WORK_BUDGET,
    LEARNERS,
    check_work_budget,
)
from bnserve.trainer.learners.sizing import DEFAULT_LIMITS, TrainingLimits
from bnserve.trainer.progress import note, stage

DISCRIMINATIVE = ("nb", "tan")  # alr is tried on these: fast, and their networks take it as they are
# learners tried only with alr, in stage 2, whatever stage 1 ranked: laode's Laplace model is
# about AODE's (stage 1 has it), its alr model one logistic regression over every pair of
# features, which holds the interactions no table of stage 1 does (monks-2)
ALR_ONLY = ("laode",)
CHOOSES_ITS_OWN_K = ("skdb", "eskdb")  # their k is a maximum they select under
REFINED = 2
# up to this many rows hdp smooths none of these learners' ensembles: one network per feature
# (or pair), so the sampler sweeps a number of tables quadratic in the features, a cost per
# table, not per row, that was most of a small set's search (promoters: aode's 3,306 tables,
# 10 of 16 s); eskdb's 5 networks keep it (linear in the features; dermatology's choice)
HDP_QUADRATIC = ("aode", "a2de")
HDP_QUADRATIC_PAST_ROWS = 1000
MAX_BLEND = 3
CUT = "cut"  # the param naming the other discretisation of stage 0 a candidate was scored on
BLEND = "blend"  # the algorithm name of a blended model
AUTO_FOLDS = 5
# From this many rows on, 3 folds: each row is still scored once, on models of two thirds
# of the rows, not four fifths, which changes little once the rows are many; it costs 2 fits
# of a candidate's rows, not 4 (+ the final fit), where the search's time is.
LARGE_FOLDS, LARGE_ROWS = 3, 10_000


def auto_folds(rows: int) -> int:
    """The folds auto's search scores on, for ``rows`` rows, when no ``folds`` is given."""
    return LARGE_FOLDS if rows >= LARGE_ROWS else AUTO_FOLDS


BASELINE = "nb"
SIMPLEST_WITHIN_NOISE, MOST_ACCURATE = "simplest-within-noise", "most-accurate"
RULES = (MOST_ACCURATE, SIMPLEST_WITHIN_NOISE)
# a candidate's fit time per cell relative to naive Bayes's: the medians over the ten shared
# sets of 3,000 rows or more (docs/accuracy-peers.json, fit seconds per fold); a learner not
# listed counts as ``OTHER_LEARNER_WORK``, an estimator not listed as laplace (1)
LEARNER_WORK = {"nb": 1, "tan": 5, "kdb": 5, "fkdb": 5, "aode": 12, "skdb": 40, "eskdb": 150}
OTHER_LEARNER_WORK = 20
# ... and per feature, for a learner whose cost grows with the features' square: a whole set's
# laode alr fit against nb alr's, CPU s, was 0.49 x the features on letter (17.1 / 2.16, 16),
# 0.73 on adult-train (8.9 / 0.87, 14), 0.78 on kr-vs-kp (2.05 / 0.073, 36)
LEARNER_WORK_PER_FEATURE = {"laode": 1}
ESTIMATOR_WORK = {"hdp": 40, "alr": 20}  # times the learner's

Candidate = tuple[str, dict[str, Any]]  # (algorithm, params; "estimator" among them)


@dataclass(frozen=True)
class Choice:
    algorithm: str
    params: Mapping[str, Any]  # the learner's parameters and "estimator"
    scores: tuple[Evaluation, ...]  # every candidate tried, in the order tried
    noise: float  # standard error of the best candidate's CV accuracy
    skipped: tuple[str, ...] = ()  # candidates left out by the work budget
    members: tuple[Candidate, ...] = ()  # a blend's candidates (algorithm BLEND)
    refused: tuple[str, ...] = ()  # candidates past the training limits: "candidate: why"
    dropped: tuple[str, ...] = ()  # candidates clearly behind after the first folds
    binning: Binning | None = None  # the discretisation chosen for the numeric columns, if any

    @property
    def label(self) -> str:
        if self.members:
            return f"{BLEND} of " + " + ".join(describe(*member) for member in self.members)
        return describe(self.algorithm, self.params)


def candidate_grid(candidates: Sequence[str], ks: Sequence[int], estimator: str = "laplace") -> list[Candidate]:
    """Stage 1's (algorithm, params): one per k for learners that take k (the selective
    ones keep their own default); naive Bayes first; not ``ALR_ONLY``'s (stage 2 tries them)."""
    unknown = [c for c in candidates if c not in LEARNERS]
    if unknown:
        raise InvalidInput(f"unknown candidate {', '.join(unknown)}; expected some of {', '.join(LEARNERS)}")
    grid: list[Candidate] = [(BASELINE, {"estimator": estimator})]
    for algo in dict.fromkeys(candidates):
        if algo == BASELINE or algo in ALR_ONLY:
            continue
        takes_k = algo not in CHOOSES_ITS_OWN_K and any(p.name == "k" for p in LEARNERS[algo].params)
        if takes_k:
            grid.extend((algo, {"k": k, "estimator": estimator}) for k in ks)
        else:
            grid.append((algo, {"estimator": estimator}))
    return grid


@dataclass(frozen=True)
class Search:
    """Every candidate scored on the same folds, in the order tried, and those the work budget left out."""

    tried: tuple[Candidate, ...]
    scores: tuple[Evaluation, ...]
    skipped: tuple[str, ...]
    blend: tuple[int, ...] = ()  # the blend's candidates (indices into tried), best first; () for none
    refused: tuple[str, ...] = ()  # candidates past the training limits, each "candidate: why"
    dropped: tuple[str, ...] = ()  # candidates clearly behind after the first folds, left unfinished
    binning: Binning | None = None  # stage 0's choice of discretisation; None when not made
    # per candidate tried: None for the search's cut (``binning``), or the other option of stage 0 it was scored on
    cuts: tuple[Binning | None, ...] = ()

    def binning_of(self, i: int) -> Binning | None:
        """The discretisation candidate ``i`` was scored on, to fit it again with."""
        return self.cuts[i] if i < len(self.cuts) and self.cuts[i] is not None else self.binning


def work(candidate: Candidate, data: EncodedData, folds: int) -> int:
    """What scoring ``candidate`` on ``folds`` folds of ``data`` is charged, in cell-fits: rows
    x features x folds x its cost relative to naive Bayes (``LEARNER_WORK``, ``ESTIMATOR_WORK``).
    A function of the data's shape only, so a budget of it chooses alike on every machine."""
    algo, params = candidate
    estimator = params.get("estimator")
    kind = Estimator.parse(estimator).kind if estimator else ""
    features = max(1, len(data.features))
    if algo in LEARNER_WORK_PER_FEATURE:
        learner = LEARNER_WORK_PER_FEATURE[algo] * features
    else:
        learner = LEARNER_WORK.get(algo, OTHER_LEARNER_WORK)
    return learner * ESTIMATOR_WORK.get(kind, 1) * data.n_rows * features * folds


def search(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    folds: int | None = None,
    seed: int = 0,
    budget: int | None = DEFAULT_WORK_BUDGET,
    limits: TrainingLimits = DEFAULT_LIMITS,
    jobs: int = 1,
    discretizations: Sequence[str] = DEFAULT_DISCRETIZATIONS,
) -> Search:
    """Score the candidates by stratified CV on ``data``: the stages of the module docstring,
    within ``budget`` cell-fits (None: every candidate). A candidate past ``limits`` (refused
    by its first fold's fit before it allocates) is skipped with a ``note`` saying why; when
    every candidate is, the search fails. Weighted rows are refused: the folds' accuracy
    counts every row once. ``jobs`` processes score a stage's candidates at once, with the
    same results as one. ``discretizations``: the menu of stage 0 (``binning``); () keeps the
    data's own. ``folds``: None for ``auto_folds`` of the rows. BLAS runs on one thread in
    every process of the search (``one_blas_thread``): its parallelism is ``jobs``."""
    with one_blas_thread():
        return _search(data, candidates, ks, estimators, folds, seed, budget, limits, jobs, discretizations)


def _search(
    data: EncodedData,
    candidates: Sequence[str],
    ks: Sequence[int],
    estimators: Sequence[str],
    folds: int | None,
    seed: int,
    budget: int | None,
    limits: TrainingLimits,
    jobs: int,
    discretizations: Sequence[str],
) -> Search:
    if data.weighted:
        raise InvalidInput("--algo auto does not take row weights: it chooses by cross-validation accuracy on the rows")
    if not estimators:
        raise InvalidInput("auto needs at least one estimator")
    estimators = [str(Estimator.parse(e)) for e in estimators]
    check_work_budget(budget)
    # The budget charges auto's own folds as five, so its 3-fold search on many rows admits
    # the candidates a 5-fold one would; it spends less, and no candidate's turn goes to
    # another that became cheaper (poker-hand: eskdb with hdp, in place of laode).
    charged_folds = AUTO_FOLDS if folds is None else folds
    folds = max(2, min(auto_folds(data.n_rows) if folds is None else folds, data.n_rows))
    scores: list[Evaluation] = []
    tried: list[Candidate] = []
    skipped: list[str] = []
    binning, splits, spent, alternatives = _binning(
        data, discretizations, folds, charged_folds, seed, estimators[0], budget, limits, jobs
    )
    if binning is None and len(discretizations) > 1 and choosable(data):
        skipped.append(f"discretisation choice among {', '.join(discretizations)}")
    refused: list[str] = []
    dropped: list[str] = []
    posteriors: list[np.ndarray] = []  # each scored candidate's out-of-fold posteriors
    charged = spent  # what stage 0 spent: the first candidate starts whatever it cost

    def run(what: str, grid: Sequence[Candidate], against: int | None = None, aside: Sequence[str] = ()) -> None:
        """Score ``grid`` within the budget. A candidate clearly behind a reference after the
        first folds is dropped: ``against`` (an index into tried), or else the first of the
        grid, scored before the others. ``aside``: modules a later stage needs, imported while
        this one's workers run (``score_all``)."""
        nonlocal spent
        planned = []
        for candidate in grid:  # charged before any starts: the budget needs no clock
            cost = work(candidate, data, charged_folds)
            if budget is not None and spent > charged and spent + cost > budget:
                skipped.append(describe(*candidate))
                continue
            spent += cost
            planned.append(candidate)
        with stage(f"auto: {what}", len(planned), "candidate") as bar:

            def done(candidate: Candidate) -> None:
                bar.note(describe(*candidate))
                bar.update()

            def scored(batch: Sequence[Candidate], reference: np.ndarray | None) -> list[Scored]:
                cost = lambda c: work(c, data, len(splits))  # noqa: E731
                return score_all(batch, data, splits, limits, jobs, cost, done, reference, aside)

            if against is not None:
                results = scored(planned, _hits(posteriors[against], data.y))
            else:
                results = scored(planned[:1], None)
                first = results[0].posteriors if results else None
                results += scored(planned[1:], None if first is None else _hits(first, data.y))
        for candidate, result in zip(planned, results):
            if result.dropped:
                dropped.append(describe(*candidate))
            elif result.evaluation is None or result.posteriors is None:
                refused.append(f"{describe(*candidate)}: {result.refused}")
                note(f"auto: skipped {refused[-1]}")
            else:
                scores.append(result.evaluation)
                tried.append(candidate)
                posteriors.append(result.posteriors)

    # against naive Bayes, scored first; stage 2's estimators imported meanwhile
    run("structures", candidate_grid(candidates, ks, estimators[0]), aside=estimator_modules(estimators[1:]))
    if not tried:
        raise InvalidInput(f"auto: every candidate is past the training limits; the first, {refused[0]}")
    ranked = sorted(range(len(tried)), key=lambda i: _rank_key(scores[i], i))
    refined = [
        (tried[i][0], {**tried[i][1], "estimator": e})
        for e in estimators[1:]
        for i in _refined(e, ranked, tried, data.n_rows)
    ]
    refined += [
        (algo, {"estimator": e})
        for e in estimators[1:]
        if Estimator.parse(e).kind == ALR
        for algo in dict.fromkeys(candidates)
        if algo in ALR_ONLY
    ]
    run("estimators", refined, against=ranked[0])  # against the best structure
    cuts: list[Binning | None] = [None] * len(tried)
    for alternative in alternatives:  # stage 0's other options: scored already, on these rows
        for (algo, params), result in alternative.proxies:
            if algo not in (BASELINE, *candidates):
                continue
            if result.evaluation is not None and result.posteriors is not None:
                candidate = (algo, {**params, CUT: alternative.binning.label})
                tried.append(candidate)
                scores.append(replace(result.evaluation, params=candidate[1]))
                posteriors.append(result.posteriors)
                cuts.append(alternative.binning)
    blend = _blend(scores, posteriors, data.y, tried)
    return Search(
        tuple(tried), tuple(scores), tuple(skipped), blend, tuple(refused), tuple(dropped), binning, tuple(cuts)
    )


def _binning(
    data: EncodedData,
    menu: Sequence[str],
    folds: int,
    charged_folds: int,
    seed: int,
    estimator: str,
    budget: int | None,
    limits: TrainingLimits,
    jobs: int,
) -> tuple[Binning | None, list[Split], int, list[Alternative]]:
    """Stage 0 (``binning``): the discretisation chosen from ``menu`` and whether the numeric
    columns' discriminants are added (``derivable``: with a menu of one method, or none, only
    that), the folds prepared so and the work it was charged (as on ``charged_folds``);
    (None, the data's own folds, 0) when there is nothing to choose, or when the choice and
    naive Bayes after it would take the search past ``budget``; and the options not chosen,
    with their proxies' scores (``Alternative``)."""
    derive = derivable(data) and data.n_rows < LARGE_ROWS  # see PROJECTION_Z
    if len(menu) < 2 or not choosable(data):
        if not derive:
            return None, fold_splits(data, folds, seed), 0, []
        assert data.preprocessing is not None
        menu = [str(data.preprocessing.discretize)]  # the spec's method: only the discriminants to choose
    proxy_work = lambda proxy: work((proxy, {"estimator": estimator}), data, charged_folds)  # noqa: E731
    charge = work_of_choice(menu, proxy_work, derive)
    first = work((BASELINE, {"estimator": estimator}), data, charged_folds)
    if budget is not None and charge + first > budget:
        return None, fold_splits(data, folds, seed), 0, []
    cost = lambda candidate: work(candidate, data, folds)  # noqa: E731
    binning, splits, alternatives = choose_binning(data, menu, folds, seed, estimator, limits, jobs, cost, derive)
    return binning, splits, work_of_choice([s.method for s in binning.scores], proxy_work), alternatives


def _hits(posteriors: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether each row's out-of-fold posterior puts the true class first."""
    return posteriors.argmax(axis=1) == y


def _refined(estimator: str, ranked: Sequence[int], tried: Sequence[Candidate], rows: int) -> list[int]:
    """Which of the best ``REFINED`` structures of stage 1 ``estimator`` is tried on: for alr,
    the best of ``DISCRIMINATIVE`` instead; for hdp on up to ``HDP_QUADRATIC_PAST_ROWS`` rows,
    those not of ``HDP_QUADRATIC`` (not replaced: the next structure would add the cost)."""
    kind = Estimator.parse(estimator).kind
    if kind == ALR:
        return [i for i in ranked if tried[i][0] in DISCRIMINATIVE][:REFINED]
    best = list(ranked[:REFINED])
    if kind == HDP and rows <= HDP_QUADRATIC_PAST_ROWS:
        return [i for i in best if tried[i][0] not in HDP_QUADRATIC]
    return best


def _blend(
    scores: Sequence[Evaluation], posteriors: Sequence[np.ndarray], y: np.ndarray, tried: Sequence[Candidate]
) -> tuple[int, ...]:
    """Greedy ensemble selection over the one-network candidates (stage 3), one per structure
    (the same learner with another estimator adds little); each step, and the blend against
    every candidate, must get more rows right out of fold, log-loss breaking ties between
    options. () when no blend does."""

    def quality(p: np.ndarray) -> tuple[int, float]:  # lower is better
        return (-int(np.sum(p.argmax(axis=1) == y)), round(float(np.mean(log_losses(p, y))), 12))

    def structure(i: int) -> Candidate:
        algo, params = tried[i]
        return algo, {k: v for k, v in params.items() if k != "estimator"}

    pool = [i for i, e in enumerate(scores) if e.combinations == (SINGLE,) and CUT not in tried[i][1]]
    if len(pool) < 2:
        return ()
    overall = min(quality(p)[0] for p in posteriors)
    members = [min(pool, key=lambda i: (*quality(posteriors[i]), i))]
    total, right = posteriors[members[0]].copy(), quality(posteriors[members[0]])[0]
    while len(members) < MAX_BLEND:
        taken = [structure(m) for m in members]
        options = [
            (*quality((total + posteriors[i]) / (len(members) + 1)), i)
            for i in pool
            if i not in members and structure(i) not in taken
        ]
        if not options or min(options)[0] >= right:
            break
        right, _, i = min(options)
        members.append(i)
        total += posteriors[i]
    return tuple(members) if len(members) > 1 and right < overall else ()


def pick(found: Search, rule: str = MOST_ACCURATE) -> Choice:
    """The candidate ``rule`` takes from a search (see the module docstring)."""
    _check_rule(rule)
    scores = found.scores
    if rule == MOST_ACCURATE and found.blend:
        members = tuple(found.tried[i] for i in found.blend)
        labels = [describe(*member) for member in members]
        return Choice(
            BLEND, {"members": labels}, scores, 0.0, found.skipped, members, found.refused, found.dropped, found.binning
        )
    best = min(range(len(scores)), key=lambda i: _rank_key(scores[i], i))
    noise, chosen = 0.0, best
    if rule == SIMPLEST_WITHIN_NOISE:
        top = scores[best]
        noise = top.accuracy_std / math.sqrt(len(top.fold_accuracies))
        chosen = next(i for i, e in enumerate(scores) if e.accuracy >= top.accuracy - noise)
    algo, params = found.tried[chosen]
    return Choice(
        algo,
        params,
        scores,
        noise,
        found.skipped,
        refused=found.refused,
        dropped=found.dropped,
        binning=found.binning_of(chosen),
    )


def choose(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    folds: int | None = None,
    seed: int = 0,
    rule: str = MOST_ACCURATE,
    budget: int | None = DEFAULT_WORK_BUDGET,
    limits: TrainingLimits = DEFAULT_LIMITS,
    jobs: int = 1,
    discretizations: Sequence[str] = DEFAULT_DISCRETIZATIONS,
) -> Choice:
    """Score the candidates by stratified CV on ``data`` and pick one by ``rule``."""
    _check_rule(rule)
    found = search(
        data,
        candidates,
        ks,
        estimators=estimators,
        folds=folds,
        seed=seed,
        budget=budget,
        limits=limits,
        jobs=jobs,
        discretizations=discretizations,
    )
    return pick(found, rule)


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise InvalidInput(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def _rank_key(evaluation: Evaluation, order: int) -> tuple[float, float, int]:
    """Higher accuracy first, then lower log-loss, then the candidate tried first."""
    return (-round(evaluation.accuracy, 12), round(evaluation.log_loss, 12), order)


def fit_auto(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    folds: int | None = None,
    seed: int = 0,
    rule: str = MOST_ACCURATE,
    budget: int | None = DEFAULT_WORK_BUDGET,
    limits: TrainingLimits = DEFAULT_LIMITS,
    jobs: int = 1,
    discretizations: Sequence[str] = DEFAULT_DISCRETIZATIONS,
) -> Model:
    """Choose, then fit the winner on all of ``data`` (cut by the discretisation chosen); the
    candidates' scores go into the metadata. ``limits`` bound every candidate's fit (see
    ``search``) and the winner's."""
    choice = choose(
        data,
        candidates,
        ks,
        estimators=estimators,
        folds=folds,
        seed=seed,
        rule=rule,
        budget=budget,
        limits=limits,
        jobs=jobs,
        discretizations=discretizations,
    )
    how = f"seed {seed}; rule {rule}" + (f"; work budget {budget:,} cell-fits" if budget else "")
    return fit_choice(data, choice, how, limits)


def fit_choice(data: EncodedData, choice: Choice, how: str, limits: TrainingLimits = DEFAULT_LIMITS) -> Model:
    """The chosen candidate fitted on all of ``data``, with the search in its metadata."""
    if choice.binning is not None:
        data = choice.binning.apply(data)
    with stage(f"auto: fitting {choice.label}"):
        if choice.members:
            model = _fit_blend(data, choice.members, limits)
        else:
            params = {key: value for key, value in choice.params.items() if key != CUT}
            model = fit(choice.algorithm, data, limits=limits, **params)
    selection = {
        "method": f"{len(choice.scores[0].fold_accuracies)}-fold stratified CV accuracy, {how}",
        "chosen": choice.label,
        "noise": choice.noise,
        "skipped_for_work": list(choice.skipped),
        "skipped_for_limits": list(choice.refused),
        "dropped_behind": list(choice.dropped),
        **({"discretization": choice.binning.to_dict()} if choice.binning is not None else {}),
        "candidates": [
            {
                "algorithm": e.algorithm,
                "params": dict(e.params),
                "accuracy": e.accuracy,
                "accuracy_std": e.accuracy_std,
                "log_loss": e.log_loss,
                "fit_seconds": e.fit_seconds,
            }
            for e in choice.scores
        ],
    }
    return Model(
        model.variables,
        model.networks,
        model.algorithm,
        model.combination,
        model.params,
        {**model.metadata, "selection": selection},
    ).validate()


def _fit_blend(data: EncodedData, members: Sequence[Candidate], limits: TrainingLimits) -> Model:
    """Each member fitted on ``data``; one model of their networks, posteriors averaged."""
    models = [fit(algo, data, limits=limits, **params) for algo, params in members]
    networks = tuple(net for model in models for net in model.networks)
    first = models[0].metadata
    metadata = {key: value for key, value in first.items() if key not in ("order", "order_scores", "arc_cmi")}
    metadata["estimator"] = ",".join(dict.fromkeys(str(m.metadata["estimator"]) for m in models))
    metadata["arc_cmi"] = arc_cmi(networks, data)
    params = {"members": [describe(*member) for member in members]}
    return Model(models[0].variables, networks, BLEND, MEAN_POSTERIOR, params, metadata).validate()


def cross_validate_auto(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    estimators: Sequence[str] = DEFAULT_ESTIMATORS,
    folds: int = 10,
    repeats: int = 1,
    seed: int = 0,
    rules: Sequence[str] = (MOST_ACCURATE,),
    budget: int | None = DEFAULT_WORK_BUDGET,
    inner_folds: int | None = None,
    dataset: str = "",
    limits: TrainingLimits = DEFAULT_LIMITS,
    jobs: int = 1,
    discretizations: Sequence[str] = DEFAULT_DISCRETIZATIONS,
) -> list[Evaluation]:
    """``auto`` scored by nested CV, one ``Evaluation`` per rule: on each outer training fold
    (the same folds as ``cross_validate_many`` with this ``seed``) one inner search, then each
    rule's pick fitted; the outer test fold scores those models. The choice never sees the
    test rows, so the figure is honest about the selection, and the rules are compared on the
    same searches. Here, not in ``evaluation``, because evaluation sits below auto in the
    layering; the folds themselves are evaluation's (``cross_validate_fitters``).
    ``fold_choices`` lists what was chosen on each fold."""
    candidate_grid(candidates, ks)  # unknown candidates fail before the first fold
    for rule in rules:
        _check_rule(rule)
    label: dict[str, Any] = {}  # the label says what differs from the defaults
    if tuple(candidates) != DEFAULT_CANDIDATES:
        label["candidates"] = ",".join(candidates)
    if tuple(ks) != DEFAULT_KS:
        label["ks"] = ",".join(map(str, ks))
    if tuple(estimators) != DEFAULT_ESTIMATORS:
        label["estimators"] = ",".join(estimators)
    if tuple(discretizations) != DEFAULT_DISCRETIZATIONS:
        label["discretizations"] = ",".join(discretizations) or "none"
    last: list[tuple[EncodedData, Search]] = []  # the search of the fold at hand, shared by the rules

    def searched(train: EncodedData) -> Search:
        if not last or last[0][0] is not train:
            found = search(
                train,
                candidates,
                ks,
                estimators=estimators,
                folds=inner_folds,
                seed=seed,
                budget=budget,
                limits=limits,
                jobs=jobs,
                discretizations=discretizations,
            )
            last[:] = [(train, found)]
        return last[0][1]

    def fitter(rule: str) -> Callable[[EncodedData], Model]:
        return lambda train: fit_choice(train, pick(searched(train), rule), f"seed {seed}; rule {rule}", limits)

    fitters = [(AUTO, label if rule == MOST_ACCURATE else {**label, "rule": rule}, fitter(rule)) for rule in rules]
    return cross_validate_fitters(fitters, data, dataset=dataset, folds=folds, repeats=repeats, seed=seed)
