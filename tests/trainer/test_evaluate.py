"""Cross-validation on chess through store.inference; the accuracies the papers report."""

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation.cross_validation import cross_validate, holdout

# Sahami (1996) Table 2, chess, 10-fold CV: NB (k=0) 86.2%, KDB k=2 95.1%.
FLOORS = {("nb", None): 0.85, ("tan", None): 0.90, ("kdb", 2): 0.93, ("fkdb", 2): 0.93}


@pytest.mark.parametrize("algo, k", list(FLOORS))
def test_chess_ten_fold_accuracy(chess, algo, k):
    result = cross_validate(algo, chess, k=k, folds=10, seed=0)
    print(f"\n{algo} k={k}: accuracy {result.accuracy:.4f} ± {result.accuracy_std:.4f}, log-loss {result.log_loss:.4f}")
    assert result.accuracy >= FLOORS[algo, k]
    assert len(result.fold_accuracies) == 10
    assert 0 < result.log_loss < 1
    assert result.n_rows == 3196


def test_folds_are_stratified_and_seeded():
    y = np.array([0] * 53 + [1] * 30 + [2] * 7)
    folds = stratified_folds(y, 5, seed=3)
    assert np.array_equal(folds, stratified_folds(y, 5, seed=3))
    assert not np.array_equal(folds, stratified_folds(y, 5, seed=4))
    for c in range(3):
        per_fold = np.bincount(folds[y == c], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
    assert np.bincount(folds, minlength=5).min() >= 17


def test_cross_validation_is_deterministic(chess):
    a = cross_validate("nb", chess, folds=3, seed=1)
    b = cross_validate("nb", chess, folds=3, seed=1)
    timing = {"fit_seconds", "predict_seconds"}
    assert {k: v for k, v in a.to_dict().items() if k not in timing} == {
        k: v for k, v in b.to_dict().items() if k not in timing
    }


def test_holdout_scores_the_test_rows(chess):
    fold = stratified_folds(chess.y, 3, seed=0)
    result = holdout("fkdb", chess.subset(fold != 0), chess.subset(fold == 0), k=2)
    assert result.n_rows == int(np.sum(fold == 0))
    assert result.accuracy >= 0.93
    assert result.accuracy_std == 0.0


def test_bad_fold_count(chess):
    with pytest.raises(InvalidInput, match="folds"):
        cross_validate("nb", chess, folds=1)


def test_confusion_matrix_and_per_class_figures_match_scikit_learn():
    """Issue 15: the confusion matrix and per-class precision/recall/F1, against scikit-learn's
    own on the same predictions (car: four classes, one of them rare)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    from bnserve.store.predictor import compile_model
    from bnserve.trainer.fit import fit
    from tests.data_helpers import dataset

    car = dataset("car")
    fold = stratified_folds(car.y, 3, seed=0)
    train, test = car.subset(fold != 0), car.subset(fold == 0)
    result = holdout("nb", train, test)
    predicted = np.argmax(compile_model(fit("nb", train)).predict_proba(test.X), axis=1)
    labels = list(range(car.n_classes))
    assert result.classes == car.class_variable.states
    assert np.array_equal(np.array(result.confusion), confusion_matrix(test.y, predicted, labels=labels))
    precision, recall, f1, support = precision_recall_fscore_support(
        test.y, predicted, labels=labels, zero_division=np.nan
    )
    figures = result.per_class()
    for i, c in enumerate(result.classes):
        np.testing.assert_allclose(
            [figures[c]["precision"], figures[c]["recall"], figures[c]["f1"]], [precision[i], recall[i], f1[i]]
        )
        assert figures[c]["support"] == support[i]


def test_cross_validation_confuses_every_row_once_per_repeat(chess):
    result = cross_validate("nb", chess, folds=3, repeats=2, seed=0)
    matrix = np.array(result.confusion)
    assert matrix.sum() == 2 * chess.n_rows
    assert np.array_equal(matrix.sum(axis=1), 2 * np.bincount(chess.y))


def test_the_cli_prints_per_class_figures_and_writes_them_to_json(capsys, tmp_path):
    import json

    from tests.trainer.conftest import run

    out_json = tmp_path / "e.json"
    code, out, err = run(
        capsys,
        "evaluate",
        "--algo",
        "nb",
        "--data",
        "builtin:chess",
        "--folds",
        "3",
        "--per-class",
        "--json",
        str(out_json),
    )
    assert (code, err) == (0, "")
    assert "true \\ predicted  nowin   won  precision  recall      F1  support" in out
    (evaluation,) = json.loads(out_json.read_text())["evaluations"]
    assert evaluation["classes"] == ["nowin", "won"] and len(evaluation["confusion"]) == 2
    assert set(evaluation["per_class"]["won"]) == {"precision", "recall", "f1", "support"}
