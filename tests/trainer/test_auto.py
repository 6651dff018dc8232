"""--algo auto: the choice is the CV-best candidate (simpler within the noise), never
behind naive Bayes by more than the noise, and its scores are recorded."""

from __future__ import annotations

from bnserve.trainer.auto import candidate_grid, choose, fit_auto
from bnserve.trainer.data import load
from tests.data_helpers import write_led7


def test_grid_tries_each_k_and_always_naive_bayes():
    assert candidate_grid(["kdb", "tan"], [1, 3]) == [("nb", {}), ("kdb", {"k": 1}), ("kdb", {"k": 3}), ("tan", {})]


def test_on_chess_a_k_dependence_learner_wins(chess):
    choice = choose(chess, ["nb", "tan", "kdb"], [1, 2])
    accuracy = {(e.algorithm, e.params.get("k")): e.accuracy for e in choice.scores}
    chosen = accuracy[choice.algorithm, choice.params.get("k")]
    assert choice.algorithm == "kdb"
    assert chosen >= max(accuracy.values()) - choice.noise
    assert chosen > accuracy["nb", None] + 0.05


def test_the_choice_never_trails_naive_bayes_by_more_than_the_noise(tmp_path):
    led7 = load(write_led7(tmp_path))  # no dependencies given the class: NB is the right model (Sahami 1996)
    choice = choose(led7, ["nb", "tan", "kdb", "fkdb"], [1, 2])
    nb = next(e for e in choice.scores if e.algorithm == "nb")
    chosen = next(e for e in choice.scores if e.algorithm == choice.algorithm and dict(e.params) == dict(choice.params))
    assert chosen.accuracy >= nb.accuracy - choice.noise


def test_fit_auto_publishes_the_winner_with_the_candidates_scores(chess):
    model = fit_auto(chess, ["nb", "kdb"], [2])
    assert model.algorithm == "kdb" and model.params["k"] == 2
    selection = model.metadata["selection"]
    assert selection["chosen"].startswith("kdb") and len(selection["candidates"]) == 2


def test_cli_auto_publishes_and_refuses_flags_it_does_not_take(tmp_path, capsys):
    from bnserve.trainer.cli import main

    store = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["fit", "--algo", "auto", "--candidates", "nb,kdb", "--k", "1..2", "--data", "builtin:chess",
                 "--name", "c", "--store", store]) == 0
    assert "(kdb, k=" in capsys.readouterr().out
    assert main(["fit", "--algo", "auto", "--theta", "0.1", "--data", "builtin:chess", "--name", "c"]) == 2
    assert "--theta" in capsys.readouterr().err
    assert main(["fit", "--algo", "kdb", "--k", "0..2", "--data", "builtin:chess", "--name", "c"]) == 2
    assert main(["fit", "--algo", "nb", "--candidates", "tan", "--data", "builtin:chess", "--name", "c"]) == 2


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
    real_choose = auto.choose

    def spy(data, *args, **kwargs):
        seen.append(data)
        return real_choose(data, *args, **kwargs)

    monkeypatch.setattr(auto, "choose", spy)
    result = auto.cross_validate_auto(car, ["nb", "kdb"], [1], folds=4, seed=3, inner_folds=3)
    fold = stratified_folds(car.y, 4, 3)
    assert len(seen) == 4
    for f, train in enumerate(seen):
        assert np.array_equal(train.X, car.X[fold != f]) and np.array_equal(train.y, car.y[fold != f])
    singles = cross_validate_many([("nb", {}), ("kdb", {"k": 1})], car, folds=4, seed=3)
    # the chosen learner, refitted on the training fold, scores exactly as that learner did on the same fold
    by_choice = {e.label: e.fold_accuracies for e in singles}
    for f, chosen in enumerate(result.fold_choices):
        assert result.fold_accuracies[f] == by_choice[chosen][f]
    assert result.label == "auto candidates=nb,kdb ks=1" and len(result.fold_choices) == 4
