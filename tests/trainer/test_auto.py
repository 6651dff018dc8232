"""--algo auto: structures, then estimators for the best of them, by CV on the same folds;
the choice is the CV best (or the simplest within the noise), its scores recorded, and
the work budget bounds the search, the same on any machine."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer.auto import MOST_ACCURATE, SIMPLEST_WITHIN_NOISE, candidate_grid, choose, fit_auto
from bnserve.trainer.data import load
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from bnserve.trainer.learners.sizing import DEFAULT_LIMITS
from tests.data_helpers import write_led7

LAPLACE = {"estimator": "laplace"}


def test_grid_tries_each_k_and_always_naive_bayes():
    assert candidate_grid(["kdb", "tan"], [1, 3]) == [
        ("nb", LAPLACE),
        ("kdb", {"k": 1, **LAPLACE}),
        ("kdb", {"k": 3, **LAPLACE}),
        ("tan", LAPLACE),
    ]
    with pytest.raises(InvalidInput, match="unknown candidate zz"):
        candidate_grid(["zz"], [1])


def test_the_most_accurate_rule_takes_the_cv_best_or_a_blend_that_beats_it(chess):
    from dataclasses import replace

    from bnserve.trainer.auto import pick, search

    found = search(chess, ["nb", "tan", "kdb"], [1, 2], estimators=["laplace", "dirichlet:0.5"])
    best = max(found.scores, key=lambda e: (e.accuracy, -e.log_loss))
    plain = pick(replace(found, blend=()))
    assert (plain.algorithm, dict(plain.params)) == (best.algorithm, dict(best.params))
    assert plain.algorithm == "kdb" and plain.noise == 0.0
    nb = next(e for e in found.scores if e.algorithm == "nb")
    assert best.accuracy > nb.accuracy + 0.05
    chosen = pick(found)
    assert [found.tried[i] for i in found.blend] == list(chosen.members)
    assert pick(found, SIMPLEST_WITHIN_NOISE).members == ()  # the old rule blends nothing


def test_estimators_are_tried_on_the_two_best_structures(chess):
    choice = choose(chess, ["nb", "tan", "kdb"], [1, 2], estimators=["laplace", "dirichlet:0.5"])
    labels = [e.label for e in choice.scores]
    assert labels[:4] == [
        "nb estimator=laplace",
        "tan estimator=laplace",
        "kdb k=1 estimator=laplace",
        "kdb k=2 estimator=laplace",
    ]
    stage2 = [e.label for e in choice.scores[4:]] + list(choice.dropped)  # tried, or dropped behind the best
    stage1 = sorted(choice.scores[:4], key=lambda e: (-e.accuracy, e.log_loss))
    assert sorted(stage2) == sorted(f"{e.label.rpartition(' ')[0]} estimator=dirichlet:0.5" for e in stage1[:2])


def test_alr_is_tried_on_the_better_of_naive_bayes_and_tan_only(chess):
    choice = choose(chess, ["nb", "tan", "kdb"], [1, 2], estimators=["laplace", "alr"])
    stage1 = sorted(choice.scores[:4], key=lambda e: (-e.accuracy, e.log_loss))
    discriminative = [e for e in stage1 if e.algorithm in ("nb", "tan")]
    assert [(e.algorithm, e.params["estimator"]) for e in choice.scores[4:]] == [
        (e.algorithm, "alr") for e in discriminative[:2]
    ]


def test_hdp_smooths_no_aode_up_to_its_rows_and_every_best_structure_past_them():
    """Up to ``HDP_QUADRATIC_PAST_ROWS`` rows hdp is not tried on aode (its sampling costs per
    table, features x (features + 1) of them), and no other structure takes its place; eskdb's
    ensemble keeps it; past them hdp is tried on every best structure, as every other estimator."""
    from bnserve.trainer.auto import HDP_QUADRATIC_PAST_ROWS, _refined

    tried = [("nb", LAPLACE), ("aode", LAPLACE), ("eskdb", LAPLACE), ("tan", LAPLACE)]
    small, large = HDP_QUADRATIC_PAST_ROWS, HDP_QUADRATIC_PAST_ROWS + 1
    aode_first, eskdb_first = [1, 0, 2, 3], [2, 1, 0, 3]
    assert _refined("hdp", aode_first, tried, small) == [0]
    assert _refined("hdp:10", aode_first, tried, small) == [0]
    assert _refined("hdp", eskdb_first, tried, small) == [2]
    assert _refined("hdp", aode_first, tried, large) == [1, 0]
    assert _refined("dirichlet:0.5", aode_first, tried, small) == [1, 0]
    assert _refined("alr", aode_first, tried, small) == [0, 3]


def test_cli_auto_discretises_by_mdl_keeping_columns_mdl_leaves_whole(tmp_path, capsys):
    """A rank-like column that tells nothing alone: mdl makes it one interval, auto's mdl:16 keeps it."""
    from bnserve.store.db import ModelStore
    from bnserve.trainer.cli import main

    path = _pairs(tmp_path, 300)
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(
            [
                "fit",
                "--algo",
                "auto",
                "--candidates",
                "nb,kdb",
                "--k",
                "1",
                "--projections",
                "none",  # here a-b, a discriminant, holds the class: this test is about the intervals
                "--data",
                str(path),
                "--name",
                "auto",
                "--store",
                store,
            ]
        )
        == 0
    )
    assert main(["fit", "--algo", "kdb", "--k", "1", "--data", str(path), "--name", "kdb", "--store", store]) == 0
    capsys.readouterr()
    with ModelStore(store) as models:
        auto, kdb = models.load("auto").model, models.load("kdb").model
    assert auto.metadata["preprocessing"]["discretization"] == {"a": "mdl:16", "b": "mdl:16"}
    assert all(v.cardinality >= 10 for v in auto.features)  # 16 equal-frequency intervals of 13 values
    assert [v.cardinality for v in kdb.features] == [1, 1]


def _pairs(tmp_path, rows: int, name: str = "pairs.csv", seed: int = 5):
    """Two columns of 13 whole numbers (read as numeric), the class whether they are equal."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(1, 14, rows), rng.integers(1, 14, rows)
    path = tmp_path / name
    path.write_text("\n".join(["a,b,class", *(f"{x},{z},{'yn'[int(x == z)]}" for x, z in zip(a, b))]) + "\n")
    return path


def test_cli_evaluate_scores_auto_on_the_data_as_auto_reads_it(tmp_path, capsys):
    from bnserve.trainer.cli import main
    from bnserve.trainer.plan import with_auto_discretization

    train, test = _pairs(tmp_path, 300), _pairs(tmp_path, 100, "test.csv", seed=6)
    assert [v.cardinality for v in with_auto_discretization(load(str(train))).features] != [1, 1]
    assert (
        main(
            [
                "evaluate",
                "--algo",
                "nb,auto",
                "--candidates",
                "nb,kdb",
                "--k",
                "1",
                "--data",
                str(train),
                "--test",
                str(test),
            ]
        )
        == 0
    )
    assert "auto" in capsys.readouterr().out
    assert main(["evaluate", "--algo", "auto", "--candidates", "nb", "--folds", "3", "--data", str(train)]) == 0


def test_the_scores_are_those_of_cross_validation_on_the_same_folds(chess):
    choice = choose(chess, ["nb", "tan"], [1], estimators=["laplace"], folds=5, seed=3)
    plain = cross_validate_many([("nb", {}), ("tan", {})], chess, folds=5, seed=3)
    assert [e.fold_accuracies for e in choice.scores] == [e.fold_accuracies for e in plain]


def test_the_old_rule_never_trails_naive_bayes_by_more_than_the_noise(tmp_path):
    led7 = load(write_led7(tmp_path))  # no dependencies given the class: NB is the right model (Sahami 1996)
    choice = choose(led7, ["nb", "tan", "kdb", "fkdb"], [1, 2], estimators=["laplace"], rule=SIMPLEST_WITHIN_NOISE)
    nb = next(e for e in choice.scores if e.algorithm == "nb")
    chosen = next(e for e in choice.scores if e.algorithm == choice.algorithm and dict(e.params) == dict(choice.params))
    assert chosen.accuracy >= nb.accuracy - choice.noise
    assert choice.noise > 0


def test_a_spent_budget_starts_no_new_candidate(chess):
    choice = choose(chess, ["nb", "tan", "kdb"], [1, 2, 3], budget=1)
    assert [e.algorithm for e in choice.scores] == ["nb"]  # the first is always scored
    assert choice.skipped[0] == "tan estimator=laplace" and len(choice.skipped) == 4 + 3  # stage 2: hdp, dirichlet, alr
    assert choice.algorithm == "nb"
    with pytest.raises(InvalidInput, match="budget"):
        choose(chess, ["nb"], [1], budget=0)
    with pytest.raises(InvalidInput, match="rule"):
        choose(chess, ["nb"], [1], rule="luck")


def test_the_budget_is_work_so_a_busy_machine_chooses_the_same(chess, monkeypatch):
    """Each candidate is charged rows x features x folds x its cost, known before it runs: a
    clock running a thousand times fast (a loaded machine) changes nothing."""
    import time

    from bnserve.trainer.auto import work

    grid = dict(estimators=["laplace", "dirichlet:0.5"], budget=work(("tan", {}), chess, 5) * 4)
    normal = choose(chess, ["nb", "tan", "kdb"], [1, 2], **grid)
    assert normal.skipped  # the budget binds
    real, clock = time.perf_counter, [0.0]

    def fast() -> float:
        clock[0] += 1000.0
        return real() + clock[0]

    monkeypatch.setattr(time, "perf_counter", fast)
    busy = choose(chess, ["nb", "tan", "kdb"], [1, 2], **grid)
    assert (busy.label, busy.skipped) == (normal.label, normal.skipped)
    assert [e.label for e in busy.scores] == [e.label for e in normal.scores]
    assert [e.fold_accuracies for e in busy.scores] == [e.fold_accuracies for e in normal.scores]


def test_work_grows_with_the_cells_and_the_candidates_cost(chess):
    from bnserve.trainer.auto import work

    nb = work(("nb", {"estimator": "laplace"}), chess, 5)
    assert nb == chess.n_rows * len(chess.features) * 5
    assert work(("kdb", {"k": 2, "estimator": "hdp"}), chess, 5) > work(("kdb", {"k": 2}), chess, 5) > nb
    assert work(("eskdb", {}), chess, 5) > work(("aode", {}), chess, 5) > work(("tan", {}), chess, 5)


def test_the_search_scores_on_five_folds_and_on_three_from_large_rows(chess):
    """Each row is scored once either way; from LARGE_ROWS rows a candidate costs 2 fits of its
    rows, not 4, and the work budget admits the same candidates. A ``folds`` given is kept."""
    from bnserve.trainer.auto import AUTO_FOLDS, LARGE_FOLDS, LARGE_ROWS, auto_folds

    assert (auto_folds(LARGE_ROWS - 1), auto_folds(LARGE_ROWS)) == (AUTO_FOLDS, LARGE_FOLDS) == (5, 3)
    large = chess.subset(np.arange(LARGE_ROWS) % chess.n_rows)

    def folds_of(data, **kw) -> int:
        found = choose(data, ["nb"], [1], estimators=["laplace"], **kw)
        return len(found.scores[0].fold_accuracies)

    assert (folds_of(chess), folds_of(large), folds_of(large, folds=5)) == (5, 3, 5)
    # The budget charges the 3 folds as 5: what it leaves out is what a 5-fold search would.
    # nb and tan cost 1 + 5 units of rows x features x 5 folds; charged 3 folds, 3/5 of that, kdb would fit too.
    unit = LARGE_ROWS * len(chess.features) * AUTO_FOLDS
    budget = 7 * unit
    skipped = [
        choose(large, ["nb", "tan", "kdb"], [1], estimators=["laplace"], budget=budget, **kw).skipped
        for kw in ({}, {"folds": 5})
    ]
    assert skipped[0] == skipped[1] == ("kdb k=1 estimator=laplace",)


def test_fit_auto_publishes_the_winner_with_the_candidates_scores(chess):
    model = fit_auto(chess, ["nb", "kdb"], [2], estimators=["laplace", "m:1"], rule=MOST_ACCURATE)
    assert model.algorithm == "kdb" and model.params["k"] == 2
    selection = model.metadata["selection"]
    assert selection["chosen"].startswith("kdb k=2 estimator=")
    assert len(selection["candidates"]) + len(selection["dropped_behind"]) == 4  # nb m:1 trails kdb: dropped
    assert model.metadata["estimator"] == selection["chosen"].rpartition("=")[2]
    assert selection["skipped_for_work"] == []


def test_cli_auto_publishes_and_refuses_flags_it_does_not_take(tmp_path, capsys):
    from bnserve.trainer.cli import main

    store = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(
            [
                "fit",
                "--algo",
                "auto",
                "--candidates",
                "nb,kdb",
                "--k",
                "1..2",
                "--estimator",
                "laplace",
                "--work-budget",
                "1000000000",
                "--data",
                "builtin:chess",
                "--name",
                "c",
                "--store",
                store,
            ]
        )
        == 0
    )
    assert "(kdb, k=" in capsys.readouterr().out
    assert main(["fit", "--algo", "auto", "--theta", "0.1", "--data", "builtin:chess", "--name", "c"]) == 2
    assert "--theta" in capsys.readouterr().err
    assert main(["fit", "--algo", "kdb", "--k", "0..2", "--data", "builtin:chess", "--name", "c"]) == 2
    assert main(["fit", "--algo", "nb", "--candidates", "tan", "--data", "builtin:chess", "--name", "c"]) == 2
    assert main(["fit", "--algo", "nb", "--work-budget", "5", "--data", "builtin:chess", "--name", "c"]) == 2
    assert main(["fit", "--algo", "auto", "--work-budget", "-1", "--data", "builtin:chess", "--name", "c"]) == 2
    assert "expected a positive number of cell-fits or none, got '-1'" in capsys.readouterr().err
    assert main(["fit", "--algo", "auto", "--time-budget", "60", "--data", "builtin:chess", "--name", "c"]) == 2
    err = capsys.readouterr().err
    assert "--time-budget is gone" in err and "use --work-budget" in err


def test_nested_cv_of_auto_uses_the_learners_folds_and_chooses_without_the_test_rows(monkeypatch):
    """By construction: every call of the inner choice gets exactly one outer training fold
    (the rows of ``stratified_folds`` with the same seed), and the outer test rows are then
    scored by the model fitted on it; the singles' CV on the same seed sees the same folds."""
    import numpy as np

    from bnserve.trainer import auto
    from bnserve.trainer.data.folds import stratified_folds
    from bnserve.trainer.evaluation.cross_validation import cross_validate_many
    from tests.data_helpers import dataset

    car = dataset("car")  # nominal only: the training fold's rows keep their codes, so they can be matched
    seen = []
    real_search = auto.search

    def spy(data, *args, **kwargs):
        seen.append(data)
        return real_search(data, *args, **kwargs)

    monkeypatch.setattr(auto, "search", spy)
    result, by_old_rule = auto.cross_validate_auto(
        car,
        ["nb", "kdb"],
        [1],
        estimators=["laplace"],
        folds=4,
        seed=3,
        inner_folds=3,
        rules=[auto.MOST_ACCURATE, auto.SIMPLEST_WITHIN_NOISE],
    )
    fold = stratified_folds(car.y, 4, 3)
    assert len(seen) == 4  # one inner search per outer fold, shared by the two rules
    for f, train in enumerate(seen):
        assert np.array_equal(train.X, car.X[fold != f]) and np.array_equal(train.y, car.y[fold != f])
    singles = cross_validate_many([("nb", LAPLACE), ("kdb", {"k": 1, **LAPLACE})], car, folds=4, seed=3)
    # the chosen learner, refitted on the training fold, scores exactly as that learner did on the same fold
    by_choice = {e.label: e.fold_accuracies for e in singles}
    for evaluation in (result, by_old_rule):
        for f, chosen in enumerate(evaluation.fold_choices):
            assert evaluation.fold_accuracies[f] == by_choice[chosen][f]
    assert by_old_rule.label.endswith("rule=simplest-within-noise")
    assert result.label == "auto candidates=nb,kdb ks=1 estimators=laplace" and len(result.fold_choices) == 4


def test_a_blend_is_kept_only_where_it_beats_every_candidate_out_of_fold():
    import numpy as np

    from bnserve.trainer.auto import _blend
    from bnserve.trainer.evaluation.cross_validation import Evaluation

    y = np.array([0, 0, 1, 1])
    one = Evaluation("a", {}, "d", 4, 0.5, 0, 0.7, 0.5, 0, 0, 0, (0.5,), combinations=("single",))
    ensemble = Evaluation("e", {}, "d", 4, 0.5, 0, 0.7, 0.5, 0, 0, 0, (0.5,), combinations=("mean_posterior",))
    # each single candidate is right on half the rows, with confidence; their mean is right on all
    a = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.6, 0.4]])
    b = np.array([[0.4, 0.6], [0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    tried = [("nb", {}), ("tan", {}), ("kdb", {"k": 1})]
    assert _blend([one, one], [a, b], y, tried) == (0, 1)
    assert _blend([one, ensemble], [a, b], y, tried) == ()  # only one-network candidates are blended
    same = [("tan", {"estimator": "laplace"}), ("tan", {"estimator": "hdp"})]
    assert _blend([one, one], [a, b], y, same) == ()  # one estimator per structure
    perfect = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]) * 0.98 + 0.01
    assert _blend([one, one, one], [a, b, perfect], y, tried) == ()  # the blend does not beat the best alone


def test_a_blend_is_fitted_as_one_model_of_its_members_networks(chess):
    from bnserve.store.model import MEAN_POSTERIOR
    from bnserve.store.predictor import compile_model
    from bnserve.trainer.auto import BLEND, Choice, fit_choice
    from bnserve.trainer.fit import fit

    members = (("nb", {"estimator": "laplace"}), ("kdb", {"k": 2, "estimator": "dirichlet:0.5"}))
    from bnserve.trainer.auto import search

    scores = search(chess, ["nb"], [1], estimators=["laplace"]).scores
    model = fit_choice(chess, Choice(BLEND, {}, scores, 0.0, (), members), "by hand")
    assert (model.algorithm, model.combination, len(model.networks)) == (BLEND, MEAN_POSTERIOR, 2)
    assert model.params == {"members": ["nb estimator=laplace", "kdb k=2 estimator=dirichlet:0.5"]}
    assert model.metadata["estimator"] == "laplace,dirichlet:0.5"
    parts = [compile_model(fit(a, chess, **p)).predict_proba(chess.X[:50]) for a, p in members]
    np.testing.assert_allclose(compile_model(model).predict_proba(chess.X[:50]), (parts[0] + parts[1]) / 2, atol=1e-12)


def _without_times(evaluation):
    """All but the times (and AUC and Sum_MI, NaN in a search: NaN != NaN)."""
    from dataclasses import replace

    return replace(evaluation, fit_seconds=0.0, predict_seconds=0.0, auc=0.0, sum_mi=0.0)


def test_candidates_in_two_processes_score_as_in_one(chess):
    from bnserve.trainer.auto import search
    from bnserve.trainer.learners.sizing import TrainingLimits

    grid = dict(estimators=["laplace", "dirichlet:0.5"], limits=TrainingLimits(max_cpt_cells=20))
    one = search(chess, ["nb", "tan", "kdb"], [1, 2, 3], **grid, jobs=1)
    two = search(chess, ["nb", "tan", "kdb"], [1, 2, 3], **grid, jobs=2)
    assert one.refused and two.refused == one.refused  # kdb k=3 is past the limits in both
    assert one.dropped and two.dropped == one.dropped  # tan with dirichlet, behind after two folds in both
    assert (two.tried, two.blend, two.skipped) == (one.tried, one.blend, one.skipped)
    assert [_without_times(e) for e in two.scores] == [_without_times(e) for e in one.scores]


_TASKS_SEEN: list = []  # the directory ``_task_seen`` leaves its files in and what it wraps, set before the fork


def _task_seen(candidate, work, task):
    """``parallel._folds_in_worker``, leaving a file per task named by the candidate, its
    folds and the process."""
    import os

    directory, scored = _TASKS_SEEN
    (directory / f"{candidate[0]}-{'.'.join(map(str, task))}-{os.getpid()}").touch()
    return scored(candidate, work, task)


def test_the_dearest_candidates_folds_spread_over_every_process(chess, tmp_path, monkeypatch):
    """Two processes score a dear candidate one fold at a time, the dearest candidate's first:
    a stage whose work is mostly one candidate still takes both (candidate by candidate, it
    took one). A cheap candidate's folds go as one task, whose round trip costs more than them."""
    import os

    from bnserve.trainer.evaluation import cross_validation as cv
    from bnserve.trainer.evaluation import parallel

    monkeypatch.setattr(sys.modules[__name__], "_TASKS_SEEN", [tmp_path, parallel._folds_in_worker])
    monkeypatch.setattr(parallel, "_folds_in_worker", _task_seen)  # the forked workers run it as patched here
    splits = cv.fold_splits(chess, 4, 0)
    dear, cheap = ("kdb", {"k": 2}), ("nb", {})
    cost = {"kdb": parallel.FOLD_TASK_WORK, "nb": parallel.FOLD_TASK_WORK - 1}
    results = parallel.score_all([cheap, dear], chess, splits, DEFAULT_LIMITS, 2, cost=lambda c: cost[c[0]])
    tasks = [name.rsplit("-", 1) for name in os.listdir(tmp_path)]
    assert sorted(task for task, _ in tasks) == ["kdb-0", "kdb-1", "kdb-2", "kdb-3", "nb-0.1.2.3"]
    assert len({pid for task, pid in tasks if task.startswith("kdb")}) == 2
    alone = [parallel.score(c, chess, splits, DEFAULT_LIMITS) for c in (cheap, dear)]
    assert [_without_times(r.evaluation) for r in results] == [_without_times(r.evaluation) for r in alone]
    assert all(np.array_equal(r.posteriors, a.posteriors) for r, a in zip(results, alone))


def test_folds_scored_anywhere_are_added_in_order(chess):
    from bnserve.trainer.evaluation.cross_validation import OnSplits, fold_splits

    folds = OnSplits("nb", {}, chess, fold_splits(chess, 3, 0))
    second = folds.score(1)
    with pytest.raises(ValueError, match="in order"):
        folds.add(1, second)
    folds.add(0, folds.score(0))
    folds.add(1, second)
    assert folds.added == 2


def test_the_search_reads_no_auc_nor_sum_mi(chess, monkeypatch):
    """A choice reads accuracy and log-loss: AUC (scipy's import) and Sum_MI (a pass of MI
    per fold) are left out of the inner folds, and so are the fold models' fingerprint and arc
    CMI, which only a published model's metadata holds."""
    from bnserve.trainer import fit as fit_module
    from bnserve.trainer.evaluation import metrics

    def unused(*args, **kwargs):
        raise AssertionError("not needed by the choice")

    monkeypatch.setattr(metrics, "auc", unused)
    monkeypatch.setattr(metrics, "sum_mi", unused)
    monkeypatch.setattr(fit_module, "arc_cmi", unused)
    monkeypatch.setattr(fit_module, "_fingerprint_aside", unused)
    choice = choose(chess, ["nb", "tan"], [1], estimators=["laplace"])
    assert all(np.isnan(e.auc) and np.isnan(e.sum_mi) for e in choice.scores)


def test_a_model_not_recorded_is_the_same_model_without_its_fingerprint_and_arc_cmi(chess):
    from dataclasses import replace

    from bnserve.trainer.fit import fit

    kept, scored = fit("tan", chess), fit("tan", replace(chess), record=False)
    assert kept.metadata["arc_cmi"] and kept.metadata["data_fingerprint"]
    assert "arc_cmi" not in scored.metadata and "data_fingerprint" not in scored.metadata
    assert [n.cpt.tobytes() for n in kept.networks[0].nodes] == [n.cpt.tobytes() for n in scored.networks[0].nodes]


def test_a_candidate_clearly_behind_after_two_folds_is_dropped_there(chess, monkeypatch):
    """kdb k=1 is far ahead of naive Bayes on chess (94 % against 88 %): the reverse is clearly
    behind on the rows both scored, and its last folds are never fitted."""
    from bnserve.trainer.evaluation import cross_validation as cv

    splits = cv.fold_splits(chess, 5, 0)
    kdb = np.empty((chess.n_rows, chess.n_classes))
    assert cv.evaluate_on_splits("kdb", {"k": 1}, chess, splits, probabilities=kdb) is not None
    ahead = kdb.argmax(axis=1) == chess.y
    fitted = []
    real_score = cv._Run.score
    monkeypatch.setattr(cv._Run, "score", lambda run, train, test: fitted.append(1) or real_score(run, train, test))
    assert cv.evaluate_on_splits("nb", {}, chess, splits, against=ahead) is None
    assert len(fitted) == cv.DROP_AFTER_FOLDS
    assert cv.evaluate_on_splits("kdb", {"k": 2}, chess, splits, against=ahead) is not None  # not behind: kept
    assert not cv.clearly_behind(np.array([True] * 8 + [False] * 2), np.array([True] * 10))  # 2 rows: noise


def test_the_search_records_what_it_dropped_and_never_drops_the_choice(chess):
    """Each dropped candidate, scored on all the folds, trails the best candidate."""
    from bnserve.trainer.auto import search

    found = search(chess, ["nb", "tan", "kdb"], [1, 2], estimators=["laplace", "dirichlet:0.5"])
    assert found.dropped == ("kdb k=1 estimator=dirichlet:0.5",)  # behind kdb k=2 after two folds
    best = max(e.accuracy for e in found.scores)
    full = cross_validate_many([("kdb", {"k": 1, "estimator": "dirichlet:0.5"})], chess, folds=5, seed=0)[0]
    assert full.accuracy < best - 0.01
    model = fit_auto(chess, ["nb", "kdb"], [1], estimators=["laplace", "dirichlet:0.5"])
    assert model.metadata["selection"]["dropped_behind"] == ["nb estimator=dirichlet:0.5"]  # against kdb k=1


def test_candidates_on_a_fold_read_the_pairwise_counts_the_first_counted(chess, monkeypatch):
    """auto's candidates share each prepared training fold: its pairwise statistics are counted
    once per fold, not once per candidate (fit's column-major copy used to drop them)."""
    from bnserve.trainer.evaluation.cross_validation import evaluate_on_splits, fold_splits
    from bnserve.trainer.stats.pairs import PairStatistics

    counted: list[int] = []
    of = PairStatistics.of

    def counting(*args, **kwargs):
        counted.append(1)
        return of(*args, **kwargs)

    monkeypatch.setattr(PairStatistics, "of", staticmethod(counting))
    data = chess.subset(np.arange(300))
    splits = fold_splits(data, 3, 0)
    for algo, params in [("tan", {}), ("kdb", {"k": 1}), ("kdb", {"k": 2})]:
        evaluate_on_splits(algo, params, data, splits)
    assert len(counted) == 3


def test_a_structure_is_learnt_once_on_its_rows_whatever_the_estimator(chess, monkeypatch):
    """auto fits its best structures again with other estimators on the same folds: the
    learner runs once on those rows (its structure does not depend on the estimator), and the
    model is the one a fresh fit learns."""
    from dataclasses import replace

    from bnserve.trainer.evaluation.cross_validation import fold_splits
    from bnserve.trainer.fit import fit
    from bnserve.trainer.learners.base import Learner
    from tests.trainer.test_streaming import assert_same_model

    runs: list[str] = []
    learner_run = Learner.run
    monkeypatch.setattr(Learner, "run", lambda self, *a: runs.append(self.name) or learner_run(self, *a))
    train = fold_splits(chess, 3, 0)[0][1]
    fit("eskdb", train, "laplace", members=2)
    again = fit("eskdb", train, "dirichlet:0.5", members=2)
    fit("eskdb", train, "laplace", members=3)  # other parameters: another structure
    assert runs == ["eskdb", "eskdb"]
    assert_same_model(again, fit("eskdb", replace(train), "dirichlet:0.5", members=2))  # fresh rows: learnt afresh
    assert runs == ["eskdb", "eskdb", "eskdb"]


def test_the_next_stage_reads_the_structures_the_workers_learnt(chess, monkeypatch):
    """The structures each fold's fit kept in a worker come back with its score and are kept
    on the fold here, so the next stage's workers, forked from here, do not learn them again."""
    from bnserve.trainer.evaluation import parallel
    from bnserve.trainer.evaluation.cross_validation import fold_splits
    from bnserve.trainer.learners.base import Learner

    splits = fold_splits(chess, 3, 0)
    first = [("kdb", {"k": 2, "estimator": "laplace"}), ("tan", {"estimator": "laplace"})]
    parallel.score_all(first, chess, splits, DEFAULT_LIMITS, 2)
    assert all(len(train.learnt) == 2 for _, train, _ in splits)

    def refused(self, *args):
        raise AssertionError(f"{self.name} learnt again")

    monkeypatch.setattr(Learner, "run", refused)  # in the workers forked next
    second = [("kdb", {"k": 2, "estimator": "dirichlet:0.5"}), ("tan", {"estimator": "hdp"})]
    results = parallel.score_all(second, chess, splits, DEFAULT_LIMITS, 2)
    assert all(r.evaluation is not None for r in results)


def test_groups_on_their_own_folds_share_the_processes_with_the_results_of_one(chess):
    """``score_each``: each group's candidates are scored on its own data and folds (auto's
    discretisations, a data set each), in one pool; each result is ``score``'s of its group."""
    from bnserve.trainer.evaluation import parallel
    from bnserve.trainer.evaluation.cross_validation import fold_splits

    some, other = fold_splits(chess, 3, 0), fold_splits(chess, 4, 1)
    groups = [(chess, some, [("nb", {}), ("tan", {})]), (chess, other, [("nb", {})])]
    results = parallel.score_each(groups, DEFAULT_LIMITS, 2)
    assert [len(r) for r in results] == [2, 1]
    for (data, splits, candidates), scored in zip(groups, results):
        for candidate, result in zip(candidates, scored):
            alone = parallel.score(candidate, data, splits, DEFAULT_LIMITS)
            assert _without_times(result.evaluation) == _without_times(alone.evaluation)
            assert np.array_equal(result.posteriors, alone.posteriors)
