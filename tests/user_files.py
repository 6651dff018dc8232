"""Files as users' tools write them, for the tests that try the product as a new user would.

``credit_frame`` is a credit-scoring table shaped like the real one that broke the first
steps (issue 26): numeric columns with missing values, nominal columns, integer-coded
levels, and a loan duration in months (6, 12, … 60) whose rare 72 is left to the test rows.
``write_r_csv`` writes it as R's ``write.csv`` does by default (row names in a first column
with an empty name, texts and names quoted, missing written ``NA``); pandas' own ``to_csv``
writes it as pandas does (the index in an unnamed first column, missing empty, whole-number
columns with missing values as ``12.0``).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd

HOMES = ("rent", "owner", "parents", "priv", "other")
JOBS = ("fixed", "freelance", "partime", "others")
MARITAL = ("single", "married", "widow", "separated", "divorced")


def credit_frame(rows: int, seed: int, unseen: bool = False) -> pd.DataFrame:
    """``rows`` applicants; ``unseen``: the rows hold values a training frame drawn with
    ``unseen=False`` never has (a Time of 72 and 84, a Home 'caravan', a Region code 12,
    an Income far above any other)."""
    rng = np.random.default_rng(seed)
    seniority = rng.integers(0, 40, rows).astype(float)
    time = rng.choice(np.arange(6, 61, 6), rows, p=_weights(10, rng))
    age = rng.integers(18, 70, rows)
    income = np.round(rng.gamma(3.0, 45.0, rows))
    assets = np.round(rng.gamma(1.2, 4000.0, rows), -2)
    debt = np.where(rng.random(rows) < 0.8, 0, np.round(rng.gamma(1.5, 1200.0, rows)))
    amount = np.round(rng.normal(1000, 450, rows).clip(100, 5000), -1)
    home = rng.choice(HOMES, rows, p=[0.3, 0.4, 0.2, 0.05, 0.05]).astype(object)
    job = rng.choice(JOBS, rows, p=[0.6, 0.2, 0.1, 0.1]).astype(object)
    marital = rng.choice(MARITAL, rows, p=[0.25, 0.6, 0.05, 0.05, 0.05]).astype(object)
    records = rng.choice(["no", "yes"], rows, p=[0.83, 0.17]).astype(object)
    region = rng.choice(np.arange(1, 11), rows, p=_weights(10, rng))  # integer-coded levels 1..10
    score = (
        0.04 * seniority
        - 0.9 * (records == "yes")
        + 0.006 * (income - 130)
        - 0.0006 * (amount - 1000)
        - 0.5 * (job != "fixed")
        + 0.3 * (home == "owner")
        - 0.02 * (time - 36)
        + 0.15 * (region % 3 == 0)
    )
    status = np.where(score + rng.logistic(0, 0.6, rows) > 0, "good", "bad").astype(object)
    if unseen:
        pick = rng.choice(rows, max(rows // 10, 4), replace=False)
        time[pick[0::4]] = 72
        time[pick[1::4]] = 84
        home[pick[2::4]] = "caravan"
        region[pick[3::4]] = 12
        income[pick[0]] = 99_999
    frame = pd.DataFrame(
        {
            "Seniority": seniority,
            "Home": home,
            "Time": time,
            "Age": age,
            "Marital": marital,
            "Records": records,
            "Job": job,
            "Region": region,
            "Income": income,
            "Assets": assets,
            "Debt": debt,
            "Amount": amount,
            "Status": status,
        }
    )
    for column, share in (("Income", 0.08), ("Assets", 0.02), ("Debt", 0.02), ("Home", 0.01), ("Seniority", 0.03)):
        frame.loc[rng.random(rows) < share, column] = np.nan  # Seniority: floats, as pandas writes them
    return frame


def write_r_csv(frame: pd.DataFrame, path: Path) -> Path:
    """As R's ``write.csv(frame, path)``: a first column of row names "1", "2", … under an
    empty quoted name, names and texts quoted, numbers bare (whole numbers without ``.0``),
    missing ``NA``."""

    def cell(value: object) -> object:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return _Bare("NA")
        if isinstance(value, str):
            return value
        number = float(value)  # type: ignore[arg-type]
        return _Bare(str(int(number)) if number.is_integer() else repr(number))

    with open(path, "w", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        writer.writerow(["", *frame.columns])
        for i, row in enumerate(frame.itertuples(index=False), start=1):
            writer.writerow([str(i), *(cell(v) for v in row)])
    return path


class _Bare(float):
    """A text ``csv.QUOTE_NONNUMERIC`` writes without quotes (it leaves numbers bare)."""

    def __new__(cls, text: str) -> _Bare:
        obj = super().__new__(cls, 0.0)
        obj.text = text  # type: ignore[attr-defined]
        return obj

    def __repr__(self) -> str:
        return self.text  # type: ignore[attr-defined]

    __str__ = __repr__


def _weights(n: int, rng: np.random.Generator) -> np.ndarray:
    w = rng.random(n) + 0.2
    return w / w.sum()
