"""Row weights from both doors: ``fit(X, y, sample_weight=w)`` and ``trainer fit --weight
COLUMN`` learn the same model, bit for bit; whole-number weights learn the model of the rows
repeated; a learner that scores on rows refuses weights, naming itself, at either door."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnserve import BayesNetClassifier
from bnserve.store.db import ModelStore
from bnserve.store.model import Model
from bnserve.trainer.cli import main as trainer

ROWS = 200


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    y = rng.integers(0, 2, ROWS)
    return pd.DataFrame(
        {
            "signal": np.round(rng.normal(y * 1.5, 1.0), 2),
            "colour": np.where(rng.random(ROWS) < 0.5 + 0.3 * (y - 0.5), "red", "blue"),
            "size": rng.choice(["s", "m", "l"], ROWS),
            "w": rng.integers(0, 4, ROWS),  # 0: the row is dropped
            "outcome": np.where(y == 1, "yes", "no"),
        }
    )


def tables(model: Model) -> list:
    """The variables (states, cuts), then every node's parents and CPT bytes."""
    return [(v.name, v.states, v.cuts) for v in model.variables] + [
        (n.name, n.parents, n.cpt.tobytes()) for net in model.networks for n in net.nodes
    ]


@pytest.mark.parametrize("algo", ["nb", "kdb", "skdb"])
def test_the_estimators_weights_are_trainer_fit_weight(frame, tmp_path: Path, algo):
    path = tmp_path / "weighted.csv"
    frame.to_csv(path, index=False)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    argv = ["fit", "--algo", algo, "--data", str(path), "--weight", "w", "--name", "m", "--store", url, "-q"]
    assert trainer(argv) == 0
    with ModelStore(url) as store:
        by_cli = store.load("m").model
    X, y = frame.drop(columns=["w", "outcome"]), frame["outcome"]
    by_estimator = BayesNetClassifier(algo).fit(X, y, sample_weight=frame["w"]).model_
    assert tables(by_estimator) == tables(by_cli)
    assert by_cli.metadata["training"]["total_weight"] == frame["w"].sum()


def test_whole_weights_learn_the_repeated_rows(frame):
    X, y, w = frame.drop(columns=["w", "outcome"]), frame["outcome"], frame["w"].to_numpy()
    weighted = BayesNetClassifier("kdb", k=2).fit(X, y, sample_weight=w)
    repeated = BayesNetClassifier("kdb", k=2).fit(X.loc[X.index.repeat(w)], y.loc[y.index.repeat(w)])
    assert tables(weighted.model_) == tables(repeated.model_)
    np.testing.assert_array_equal(weighted.predict_proba(X), repeated.predict_proba(X))


def test_a_learner_that_scores_on_rows_refuses_weights_at_both_doors(frame, tmp_path: Path):
    X, y = frame.drop(columns=["w", "outcome"]), frame["outcome"]
    with pytest.raises(ValueError, match="'rtan' does not take row weights"):
        BayesNetClassifier("rtan").fit(X, y, sample_weight=frame["w"])
    with pytest.raises(ValueError, match="(?i)negative"):
        BayesNetClassifier("nb").fit(X, y, sample_weight=-frame["w"])
    path = tmp_path / "weighted.csv"
    frame.to_csv(path, index=False)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert trainer(["fit", "--algo", "rtan", "--data", str(path), "--weight", "w", "--name", "m", "--store", url]) == 1
