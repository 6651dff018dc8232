"""bench/auto_fit_cost.py --factors: what auto's work model assumes, measured."""

from __future__ import annotations

from bench import auto_fit_cost
from bnserve.trainer.data import load


def test_factors_are_cpu_per_fit_relative_to_naive_bayes_and_to_the_learners_laplace_fit(monkeypatch):
    monkeypatch.setattr(auto_fit_cost, "MIN_CPU", 0.0)  # one fit each
    monkeypatch.setattr(auto_fit_cost, "FACTOR_LEARNERS", (("nb", {}), ("tan", {}), ("kdb", {"k": 1})))
    measured = auto_fit_cost.factors(load("builtin:chess"), rows=200)
    assert measured["rows"] == 200
    assert measured["learner"]["nb"] == 1.0
    assert set(measured["learner"]) == set(measured["hdp"]) == set(measured["dirichlet:0.5"]) == {"nb", "tan", "kdb"}
    assert set(measured["alr"]) == {"nb", "tan"}  # auto tries alr on these only
    assert all(f > 0 for kind in ("learner", "hdp", "alr") for f in measured[kind].values())
