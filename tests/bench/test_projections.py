"""The linear-discriminant study of issue 28 (bench/projections.py): what it adds to a frame is
learned from the training rows alone, and its proxies' lead sees a class that is a linear
combination of numeric columns, which no interval of one column holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench import projections


def _frame(rows: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Two numeric columns whose difference is the class, a third that is noise with a few
    missing values, a flag of two values and a nominal column."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=rows), rng.normal(size=rows)
    noise = rng.normal(size=rows)
    noise[::17] = np.nan
    X = pd.DataFrame(
        {
            "a": a,
            "b": b,
            "noise": noise,
            "flag": rng.integers(0, 2, rows).astype(float),
            "colour": rng.choice(["r", "g"], rows),
        }
    )
    return X, pd.Series(np.where(a - b > 0, "up", "down"))


def test_the_projections_are_learned_on_the_training_rows_alone():
    X, y = _frame(300)
    train, test = slice(0, 200), slice(200, 300)
    projection = projections.Discriminants(["a", "b", "noise", "flag"]).fit(X[train], y[train])
    assert projection.used == ["a", "b", "noise"]  # a column of two values is not projected
    added = projection.added(X[test])
    assert list(added.columns) == [*X.columns, "ld1"]  # two classes: one direction
    changed = X[test].copy()
    changed["a"] = 0.0
    again = projections.Discriminants(["a", "b", "noise", "flag"]).fit(X[train], y[train]).added(changed)
    assert np.allclose(again["b"], added["b"]) and not np.allclose(again["ld1"], added["ld1"])
    # a missing value reads as the training rows' mean: its term is zero, as the mean's is
    row = X[test].iloc[[0]].copy()
    row["noise"] = np.nan
    at_mean = row.copy()
    at_mean["noise"] = float(X[train]["noise"].mean())
    assert np.isclose(projection.added(row)["ld1"].iloc[0], projection.added(at_mean)["ld1"].iloc[0])


def test_the_lead_sees_a_linear_combination_and_not_noise():
    X, y = _frame(400)
    assert projections.lead_z(X, y, ["a", "b", "noise"], seed=0) > 3
    X, y = _frame(400, seed=1)
    y = X["colour"].where(np.random.default_rng(2).random(400) > 0.1, "g")  # the class is a nominal column
    assert projections.lead_z(X, y, ["a", "b", "noise"], seed=0) < 2
