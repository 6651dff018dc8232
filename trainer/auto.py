"""``--algo auto``: choose the learner and k by cross-validation on the training data.

The KDB paper names this as future work (choose k by cross-validation). Every candidate
is scored on the same stratified folds; naive Bayes is always among them, and the winner
is the most accurate candidate, ties (and differences within the CV noise of the best)
going to the candidate listed first, i.e. the simpler one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import Evaluation, cross_validate_fitter, cross_validate_many
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.registry import LEARNERS

DEFAULT_CANDIDATES = ("nb", "tan", "kdb", "fkdb", "aode")
DEFAULT_KS = (1, 2, 3)
AUTO_FOLDS = 5
BASELINE = "nb"
SIMPLEST_WITHIN_NOISE, MOST_ACCURATE = "simplest-within-noise", "most-accurate"
RULES = (SIMPLEST_WITHIN_NOISE, MOST_ACCURATE)


@dataclass(frozen=True)
class Choice:
    algorithm: str
    params: Mapping[str, Any]
    scores: tuple[Evaluation, ...]  # every candidate, in the order tried
    noise: float  # standard error of the best candidate's CV accuracy


def candidate_grid(candidates: Sequence[str], ks: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
    """(algorithm, params) to try: one per k for learners that take k; naive Bayes first."""
    unknown = [c for c in candidates if c not in LEARNERS]
    if unknown:
        raise InvalidInput(f"unknown candidate {', '.join(unknown)}; expected some of {', '.join(LEARNERS)}")
    grid: list[tuple[str, dict[str, Any]]] = [(BASELINE, {})]
    for algo in dict.fromkeys(candidates):
        if algo == BASELINE:
            continue
        takes_k = any(p.name == "k" for p in LEARNERS[algo].params)
        grid.extend((algo, {"k": k}) for k in ks) if takes_k else grid.append((algo, {}))
    return grid


def choose(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    folds: int = AUTO_FOLDS,
    seed: int = 0,
    rule: str = SIMPLEST_WITHIN_NOISE,
) -> Choice:
    """The most accurate candidate by stratified CV; with ``simplest-within-noise``, within the
    best's standard error the earlier (simpler) candidate wins, so the choice never trails
    naive Bayes by more than the noise; ``most-accurate`` takes the best, ties to the earlier."""
    if rule not in RULES:
        raise InvalidInput(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    grid = candidate_grid(candidates, ks)
    folds = max(2, min(folds, data.n_rows))
    scores = cross_validate_many(grid, data, dataset=data.source, folds=folds, seed=seed)
    best = max(scores, key=lambda e: e.accuracy)
    noise = best.accuracy_std / math.sqrt(len(best.fold_accuracies)) if rule == SIMPLEST_WITHIN_NOISE else 0.0
    chosen = next(i for i, e in enumerate(scores) if e.accuracy >= best.accuracy - noise)
    algo, params = grid[chosen]
    return Choice(algo, params, tuple(scores), noise)


def fit_auto(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    folds: int = AUTO_FOLDS,
    seed: int = 0,
    rule: str = SIMPLEST_WITHIN_NOISE,
) -> Model:
    """Choose, then fit the winner on all of ``data``; the candidates' scores go into the metadata."""
    choice = choose(data, candidates, ks, folds=folds, seed=seed, rule=rule)
    model = fit(choice.algorithm, data, **choice.params)
    selection = {
        "method": f"{folds}-fold stratified CV accuracy, seed {seed}; rule {rule}",
        "chosen": f"{choice.algorithm} {' '.join(f'{k}={v}' for k, v in choice.params.items())}".strip(),
        "noise": choice.noise,
        "candidates": [
            {
                "algorithm": e.algorithm,
                "params": dict(e.params),
                "accuracy": e.accuracy,
                "accuracy_std": e.accuracy_std,
                "log_loss": e.log_loss,
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


AUTO = "auto"


def cross_validate_auto(
    data: EncodedData,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    folds: int = 10,
    repeats: int = 1,
    seed: int = 0,
    rule: str = SIMPLEST_WITHIN_NOISE,
    inner_folds: int = AUTO_FOLDS,
    dataset: str = "",
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """``auto`` scored by nested CV: on each outer training fold (the same folds as
    ``cross_validate_many`` with this ``seed``), ``fit_auto`` chooses by its own inner CV and
    fits; the outer test fold scores that model. The choice never sees the test rows, so the
    figure is honest about the selection. Here, not in ``evaluation``, because evaluation
    sits below auto in the layering; the folds themselves are evaluation's
    (``cross_validate_fitter``). ``fold_choices`` lists what was chosen on each fold."""
    candidate_grid(candidates, ks)  # unknown candidates fail before the first fold
    if rule not in RULES:
        raise InvalidInput(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    params: dict[str, Any] = {} if rule == SIMPLEST_WITHIN_NOISE else {"rule": rule}  # the label says what differs
    if tuple(candidates) != DEFAULT_CANDIDATES:
        params["candidates"] = ",".join(candidates)
    if tuple(ks) != DEFAULT_KS:
        params["ks"] = ",".join(map(str, ks))

    def fitter(train: EncodedData) -> Model:
        return fit_auto(train, candidates, ks, folds=inner_folds, seed=seed, rule=rule)

    return cross_validate_fitter(
        fitter, AUTO, params, data, dataset=dataset, folds=folds, repeats=repeats, seed=seed, progress=progress
    )
