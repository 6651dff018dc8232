"""auto's stage 0 (``bnserve.trainer.binning``): the discretisation of the numeric columns is
chosen by the inner CV, each fold cut on its training rows only; it is skipped without numeric
columns; the choice and what every method scored are recorded, and the recorded command makes
the same model again."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bnserve.store.model import SINGLE
from bnserve.trainer.auto import CUT, _blend, cross_validate_auto, fit_choice, pick, search
from bnserve.trainer.binning import choose_binning
from bnserve.trainer.cli.learning import training_spec
from bnserve.trainer.cli.parser import build_parser
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.evaluation.cross_validation import Evaluation, cross_validate_many, describe
from bnserve.trainer.fit import fit
from bnserve.trainer.plan import TrainingSpec, command, spec_of, train, with_auto_discretization

MENU = ("mdl:16", "equal-frequency:5")
ONLY_NB = {"candidates": ("nb",), "estimator": "laplace"}  # one candidate: the test is about stage 0


def write_ramps(path: Path, rows: int = 200, columns: int = 12, seed: int = 0) -> Path:
    """Twelve numbers that each move P(class) a little, smoothly: MDL cuts each once or not at
    all (then ``mdl:16`` gives it 16 thin intervals), while five equal-frequency intervals keep
    the ramp. Naive Bayes and AODE get 10 points more right with ``equal-frequency:5``."""
    rng = np.random.default_rng(seed)
    X = rng.random((rows, columns))
    y = rng.random(rows) < 1 / (1 + np.exp(-1.5 * (X - 0.5).sum(axis=1)))
    lines = [",".join([*(f"x{j}" for j in range(columns)), "class"])]
    lines += [",".join([*(f"{v:.4f}" for v in row), "ab"[int(c)]]) for row, c in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def ramps(tmp_path_factory) -> Path:
    return write_ramps(tmp_path_factory.mktemp("binning") / "ramps.csv")


def test_equal_frequency_is_chosen_where_its_folds_score_clearly_better(ramps):
    data = with_auto_discretization(load(str(ramps)))
    binning, splits, _ = choose_binning(data, MENU, folds=5, seed=0)
    first, other = binning.scores
    assert other.accuracy > first.accuracy + 0.05 and other.lead_z > 3
    assert binning.chosen == "equal-frequency:5"
    assert all(v.cardinality <= 5 for _, train, _ in splits for v in train.features)  # its folds go on


def test_a_lead_within_the_noise_keeps_the_first_method(ramps):
    data = with_auto_discretization(load(str(ramps)))
    binning, _, _ = choose_binning(data, ("mdl:16", "mdl:16"), folds=5, seed=0)  # the same scores: no lead
    assert binning.chosen == "mdl:16" and binning.scores[1].lead_z == 0.0


def test_cut_points_are_learned_on_training_folds_only(ramps, monkeypatch):
    data = with_auto_discretization(load(str(ramps)))
    seen: list[int] = []
    cuts_from_table = Method.cuts_from_table

    def counting(self: Method, values: np.ndarray, counts: np.ndarray) -> tuple[float, ...]:
        seen.append(int(counts.sum()))
        return cuts_from_table(self, values, counts)

    monkeypatch.setattr(Method, "cuts_from_table", counting)
    choose_binning(data, MENU, folds=5, seed=0)
    assert seen and max(seen) <= data.n_rows * 4 // 5 + 1  # each a training fold's rows, never all of them


def test_the_choice_is_recorded_and_the_recorded_command_makes_the_same_model(ramps):
    model = train(TrainingSpec("auto", projections="none", **ONLY_NB), str(ramps))  # the ramps' sum is a discriminant
    recorded = model.metadata["selection"]["discretization"]
    assert recorded["chosen"] == "equal-frequency:5"
    assert [s["method"] for s in recorded["candidates"]] == ["mdl:16", "equal-frequency:5", "equal-frequency:10"]
    assert set(model.metadata["preprocessing"]["discretization"].values()) == {"equal-frequency:5"}
    assert all(v.cardinality <= 5 for v in model.variables[:-1])
    words = shlex.split(command(spec_of(model), data=str(ramps)))
    assert "--discretize" not in words  # auto chooses again, the same way
    again = train(training_spec(build_parser().parse_args(words[1:]), "auto"), str(ramps))
    assert [v.cuts for v in again.variables] == [v.cuts for v in model.variables]
    assert untimed(again.metadata["selection"]) == untimed(model.metadata["selection"])


def untimed(selection: dict) -> dict:
    return {**selection, "candidates": [{**c, "fit_seconds": 0} for c in selection["candidates"]]}


def test_a_given_discretisation_is_not_chosen_again(ramps):
    """Only the discriminants are left to choose: the given method is the one scored, with them and without."""
    model = train(TrainingSpec("auto", discretize="mdl:16", **ONLY_NB), str(ramps))
    choice = model.metadata["selection"]["discretization"]
    assert {c["method"] for c in choice["candidates"]} <= {"mdl:16", "mdl:16+lda"}
    assert choice["chosen"] == "mdl:16"
    assert set(model.metadata["preprocessing"]["discretization"].values()) == {"mdl:16"}
    alone = train(TrainingSpec("auto", discretize="mdl:16", projections="none", **ONLY_NB), str(ramps))
    assert "discretization" not in alone.metadata["selection"]


def test_data_without_numeric_columns_skip_the_choice(tmp_path, monkeypatch):
    import bnserve.trainer.auto as auto

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no numeric column: nothing to choose")

    monkeypatch.setattr(auto, "choose_binning", refuse)
    rng = np.random.default_rng(1)
    lines = ["a,b,class"] + [f"{'xyz'[i % 3]},{'pq'[int(rng.random() < 0.5)]},{'yn'[i % 2]}" for i in range(60)]
    (tmp_path / "nominal.csv").write_text("\n".join(lines) + "\n")
    model = train(TrainingSpec("auto", **ONLY_NB), str(tmp_path / "nominal.csv"))
    assert "discretization" not in model.metadata["selection"]
    assert not any("discretisation" in s for s in model.metadata["selection"]["skipped_for_work"])


def test_nested_cv_scores_the_test_rows_as_the_chosen_method_cuts_them(ramps):
    """Each outer test fold is coded with the cuts of the model auto fitted, not those the outer
    split learned (mdl:16): auto with naive Bayes alone scores on each fold what naive Bayes
    scores on data read with the method it chose there (equal-frequency:5 on two folds of five)."""
    no_lda = Preprocessing(projections="none")  # the ramps' sum is a discriminant: this test is about the intervals
    data = with_auto_discretization(load(str(ramps), preprocessing=no_lda))
    (nested,) = cross_validate_auto(data, ["nb"], [1], estimators=["laplace"], folds=5)
    nb = [("nb", {"estimator": "laplace"})]
    by_method = {}
    for method in MENU:
        read = load(str(ramps), preprocessing=Preprocessing(discretize=Method.parse(method), projections="none"))
        by_method[method] = cross_validate_many(nb, read, folds=5)[0]
    ef5, mdl16 = (by_method[m].fold_accuracies for m in ("equal-frequency:5", "mdl:16"))
    assert all(a in (b, c) for a, b, c in zip(nested.fold_accuracies, ef5, mdl16))
    assert sum(a == b != c for a, b, c in zip(nested.fold_accuracies, ef5, mdl16)) >= 2


def test_evaluate_on_a_test_file_codes_it_as_auto_cut_its_training_file(ramps, tmp_path):
    from bnserve.trainer.cli import main

    test = write_ramps(tmp_path / "test.csv", rows=150, seed=1)
    common = ["--estimator", "laplace", "--projections", "none", "--data", str(ramps), "--test", str(test), "--quiet"]
    common.append("--json")
    assert main(["evaluate", "--algo", "auto", "--candidates", "nb", *common, str(tmp_path / "auto.json")]) == 0
    cut = ["--discretize", "equal-frequency:5"]  # what auto chooses on ramps
    assert main(["evaluate", "--algo", "nb", *cut, *common, str(tmp_path / "nb.json")]) == 0
    auto, nb = (json.loads((tmp_path / f"{m}.json").read_text())["evaluations"][0] for m in ("auto", "nb"))
    assert auto["fold_choices"] == ["nb estimator=laplace"]
    assert (auto["accuracy"], auto["log_loss"]) == pytest.approx((nb["accuracy"], nb["log_loss"]))


@pytest.mark.parametrize("rows, tried", [(2_000, True), (10_000, False)])
def test_auto_tries_the_discriminants_below_large_rows_only(tmp_path, rows, tried):
    """The class is the sign of b - a: the discriminant wins clearly, on 2,000 rows; from
    ``LARGE_ROWS`` on auto does not try it (its proxies' lead did not carry to large sets)."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=rows), rng.normal(size=rows)
    lines = ["a,b,class"] + [f"{x:.6f},{z:.6f},{'pq'[int(z > x)]}" for x, z in zip(a.tolist(), b.tolist())]
    (tmp_path / "line.csv").write_text("\n".join(lines) + "\n")
    model = train(TrainingSpec("auto", **ONLY_NB), str(tmp_path / "line.csv"))
    methods = {c["method"] for c in model.metadata["selection"]["discretization"]["candidates"]}
    assert ("mdl:16+lda" in methods) is tried
    assert any(v.projection is not None for v in model.features) is tried


def test_the_other_cuts_proxies_are_candidates_fitted_on_their_own_cut(ramps):
    """Stage 0's options not chosen come back as candidates, each proxy with the option it was
    scored on (``cut``), at no fit more, a proxy only where its learner is a candidate; they are
    never blended (their variables are cut otherwise); one chosen is fitted on its own cut, as
    the learner alone on that cut."""
    data = with_auto_discretization(load(str(ramps), preprocessing=Preprocessing(projections="none")))
    only_nb = search(data, candidates=("nb",), estimators=("laplace",), discretizations=MENU)
    assert [algo for algo, params in only_nb.tried if CUT in params] == ["nb"]
    found = search(data, candidates=("nb", "aode"), estimators=("laplace",), discretizations=MENU)
    assert found.binning is not None and found.binning.chosen == "equal-frequency:5"
    others = [i for i, (_, params) in enumerate(found.tried) if CUT in params]
    assert sorted(found.tried[i][0] for i in others) == ["aode", "nb"]
    assert all(found.tried[i][1][CUT] == "mdl:16" and found.binning_of(i).chosen == "mdl:16" for i in others)
    assert all(found.binning_of(i) is found.binning for i in range(len(found.tried)) if i not in others)
    assert not set(found.blend) & set(others)
    i = others[0]
    algo, params = found.tried[i]
    choice = replace(pick(found), algorithm=algo, params=params, members=(), binning=found.binning_of(i))
    model = fit_choice(data, choice, "a test")
    alone = fit(algo, found.binning_of(i).apply(data), estimator="laplace")
    assert model.metadata["preprocessing"]["discretization"] == alone.metadata["preprocessing"]["discretization"]
    assert set(model.metadata["preprocessing"]["discretization"].values()) == {"mdl:16"}
    assert CUT not in model.params and model.metadata["selection"]["chosen"] == describe(algo, params)
    for ours, theirs in zip(model.networks, alone.networks):
        assert all(np.array_equal(a.cpt, b.cpt) for a, b in zip(ours.nodes, theirs.nodes))


def test_a_candidate_on_another_cut_is_never_blended():
    """A blend is one model over one set of variables: a candidate scored on another cut of
    the numeric columns stays out of it, even where averaging it in gets more rows right."""
    y = np.array([0, 0, 1, 1])
    first = np.array([[0.9, 0.1], [0.6, 0.4], [0.4, 0.6], [0.6, 0.4]])  # rows 0-2 right
    other = np.array([[0.45, 0.55], [0.9, 0.1], [0.1, 0.9], [0.1, 0.9]])  # rows 1-3 right; with first, all four

    def scored(params):
        return Evaluation(
            "nb", params, "d", 4, 0.75, 0.0, 0.5, float("nan"), 0, 0, float("nan"), (0.75,), combinations=(SINGLE,)
        )

    tried = [("nb", {"estimator": "laplace"}), ("aode", {"estimator": "laplace"})]
    scores = [scored(p) for _, p in tried]
    assert sorted(_blend(scores, [first, other], y, tried)) == [0, 1]
    tried[1] = ("aode", {"estimator": "laplace", CUT: "mdl:16"})
    assert _blend(scores, [first, other], y, tried) == ()
