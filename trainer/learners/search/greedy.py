"""Greedy hill climbing over candidate structures: the one search loop of every wrapper
learner. A ``step`` function generates the candidates of a state (FSS adds a feature, BSEJ
removes one or joins two groups, K2-AS adds a feature), as bnclassify's
``greedy_search(step = fssj_step | bsej_step)`` does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bnserve.trainer.progress import stage

State = TypeVar("State")


@dataclass(frozen=True)
class SearchResult(Generic[State]):
    """The final state and its score; ``trace``: the start and each accepted move with the
    score it reached (JSON-able); ``evaluated``: candidates scored (memoised ones included)."""

    state: State
    score: float
    trace: tuple[dict[str, Any], ...]
    evaluated: int


def greedy_search(
    init: State,
    step: Callable[[State], Iterable[tuple[Mapping[str, Any], State]]],
    score: Callable[[State], float],
) -> SearchResult[State]:
    """Hill climbing: score every ``(move, candidate)`` that ``step(current)`` yields and
    move to the best one if it scores strictly higher than the current state; stop when
    none does (paper 003: "if no operation improves the accuracy ... the search stops"),
    when there is no candidate, or at a perfect score of 1. Ties go to the candidate
    yielded first, so each step function fixes the tie-break by its generation order.

    O(steps · candidates per step · cost of ``score``).
    """
    with stage("greedy search", unit="candidate") as bar:
        current, best = init, score(init)
        trace: list[dict[str, Any]] = [{"op": "start", "score": best}]
        evaluated = 1
        while best < 1.0:
            winner: tuple[float, Mapping[str, Any], State] | None = None
            for move, candidate in step(current):
                value = score(candidate)
                evaluated += 1
                bar.update()
                if winner is None or value > winner[0]:
                    winner = (value, move, candidate)
            if winner is None or not winner[0] > best:
                break
            best, move, current = winner
            trace.append({**move, "score": best})
            bar.note(f"step {len(trace) - 1}, score {best:.4f}")
    return SearchResult(current, best, tuple(trace), evaluated)
