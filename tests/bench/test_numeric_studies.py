"""The numeric-column studies of issue 28 (bench/discretisations.py, bench/numeric_leaves.py):
their naive Bayes on intervals is the trainer's, so their other variants are compared with
what auto fits."""

from __future__ import annotations

from bench import discretisations, numeric_leaves
from bench.versus_forest import ordinal
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from tests.data_helpers import shared_datasets


def test_the_leaves_studys_interval_naive_bayes_is_the_trainers():
    path = shared_datasets() / "ecoli.csv"
    data = discretisations.peer_data(path, "ecoli")
    y, width = data.ours.y, data.raw.shape[1]
    fold = stratified_folds(y, 5, 0)
    ours = []
    for f in range(5):
        X_train, X_test = ordinal(data, fold != f, fold == f)
        tables = numeric_leaves.column_tables(["mdl:16", "gaussian"], data, X_train, y[fold != f], X_test)
        ours.append(numeric_leaves.hits(tables, ["mdl:16"] * width, y[fold != f], y[fold == f], data.ours.n_classes))
    read = load(str(path), preprocessing=Preprocessing(discretize=Method.parse("mdl:16")))
    (trainer,) = cross_validate_many([("nb", {})], read, folds=5, seed=0)
    assert [float(h.mean()) for h in ours] == list(trainer.fold_accuracies)


def test_the_discretisation_study_prints_each_method_and_stage_0s_choice(capsys):
    shared_datasets()
    flags = ["--datasets", "wine", "--methods", "mdl:16,wpkid", "--learners", "nb", "--no-forest", "--menu"]
    assert discretisations.main(flags) == 0
    out = capsys.readouterr().out
    assert out.startswith("wine (178 rows)") and "mdl:16  97.78 (+0.00±0.00) | wpkid" in out
    assert "stage 0 chooses mdl:16: mdl:16 97.75 (z +0.0) wpkid 97.75 (z +0.0)" in out


def test_stage_0_takes_the_proxies_it_is_given_and_keeps_its_own(capsys):
    from bnserve.trainer import binning

    shared_datasets()
    flags = ["--datasets", "wine", "--methods", "mdl:16,wpkid", "--learners", "nb", "--no-forest", "--menu"]
    assert discretisations.main([*flags, "--proxies", "tan"]) == 0
    assert "stage 0 chooses mdl:16: mdl:16 94.38 (z +0.0) wpkid 96.63 (z +1.2)" in capsys.readouterr().out
    assert binning.PROXIES == ("nb", "aode")


def test_a_blend_of_one_leaf_twice_is_that_leaf(capsys):
    shared_datasets()
    assert numeric_leaves.main(["--datasets", "wine", "--leaves", "mdl:16,mdl:16", "--blend"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("| blend  97.78 (+0.00±0.00)")


def test_a_set_scikit_learn_ships_is_read_as_its_numbers(tmp_path):
    """iris, written from scikit-learn: 150 rows, four numeric columns, three classes, the same
    rows both ways (ours typed by the file, the peers' by the schema the writer gives)."""
    data = discretisations.peer_data(discretisations.sampled("iris", 5000, tmp_path), "iris")
    assert (data.ours.n_rows, data.ours.n_classes, data.raw.shape) == (150, 3, (150, 4))
    assert not data.nominal.any() and [v.kind for v in data.ours.features] == ["numeric"] * 4
