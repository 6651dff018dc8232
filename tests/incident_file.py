"""A file shaped like issue 26's R export: 4,454 rows of credit scoring, a few numeric
columns, and three numeric columns whose missing values are written ``NA``. Read with
``--na-values ''`` (only the empty text missing) those three are nominal with 352, 160 and
183 states, as the real file was before its markers were declared."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROWS = 4454
WIDE = {"Income": 352, "Assets": 160, "Debt": 183}  # states once 'NA' is a text (one of them)
CLASS = "Status"


def write_incident_file(path: Path, seed: int = 0) -> str:
    """The file at ``path`` (CSV); returns its path as text."""
    rng = np.random.default_rng(seed)
    status = rng.random(ROWS) < 0.28  # bad
    columns: dict[str, list[str]] = {
        "Seniority": [str(v) for v in np.clip(rng.poisson(8 - 4 * status), 0, 48)],
        "Time": [str(6 * int(v)) for v in rng.integers(1, 11, ROWS)],
        "Age": [str(v) for v in rng.integers(18, 69, ROWS)],
        "Expenses": [str(v) for v in rng.integers(35, 181, ROWS)],
        "Amount": [str(v) for v in np.round(rng.normal(1000 + 150 * status, 300), -1).astype(int)],
        "Home": list(rng.choice(["owner", "rent", "parents", "priv", "other"], ROWS)),
        "Records": ["yes" if r else "no" for r in rng.random(ROWS) < 0.1 + 0.25 * status],
    }
    for name, states in WIDE.items():
        numbers = states - 1  # and 'NA'
        drawn = np.minimum(rng.integers(0, numbers, ROWS) + (rng.integers(0, numbers // 4, ROWS) * status), numbers - 1)
        order = rng.permutation(ROWS)
        drawn[order[:numbers]] = np.arange(numbers)  # every number seen at least once
        texts = [str(10 * int(v)) for v in drawn]
        for i in order[numbers : numbers + ROWS // 50]:  # 2 % missing, written NA
            texts[i] = "NA"
        columns[name] = texts
    columns[CLASS] = ["bad" if s else "good" for s in status]
    names = list(columns)
    lines = [",".join(names)] + [",".join(columns[n][i] for n in names) for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)
