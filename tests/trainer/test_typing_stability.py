"""A column's kind does not flip with the sample (issue 26, item 2): on each of 10 stratified
folds' training parts every column of a file is typed as on the whole file — for every
shipped and shared data set, and for files shaped like the two that flipped: a loan
duration of months (multiples of 6, one rare 72) and an 85-column insurance file of
integer-coded levels with rare levels and rare large counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bnserve.trainer.data import Preprocessing
from bnserve.trainer.data.columns import check_columns, columns_of
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.io import RawTable, read_table
from tests.data_helpers import SHIPPED, shared_datasets

FOLDS = 10
BUILTIN = ["builtin:chess"]
SHIPPED_FILES = sorted(str(p) for p in SHIPPED.glob("*.csv.gz"))


def _kinds(table: RawTable) -> tuple[str, ...]:
    """Each feature's kind as ``columns_of`` types it (the class: the last column)."""
    return tuple("nominal" if s is not None else "numeric" for s in columns_of(table, None, Preprocessing()).states)


def _training_parts(table: RawTable):
    """The table's rows but those of fold k, for each of ``FOLDS`` stratified folds."""
    class_index, _ = check_columns(table.source, table.header, None, Preprocessing())
    folds = stratified_folds(table.columns[class_index].index, FOLDS, seed=0)
    for k in range(FOLDS):
        rows = np.flatnonzero(folds != k)
        columns = tuple(column.rows(rows) for column in table.columns)
        yield k, RawTable(table.source, table.header, columns, table.lines[rows], table.declared)


def assert_stable(source: str) -> tuple[str, ...]:
    table = Preprocessing().cleaned(read_table(source, None, None, Preprocessing().limits))
    whole = _kinds(table)
    names = [n for n in table.header if n != table.header[-1]]
    for k, part in _training_parts(table):
        flipped = [f"{n}: {a} -> {b}" for n, a, b in zip(names, whole, _kinds(part)) if a != b]
        assert not flipped, f"{source}, fold {k}: {'; '.join(flipped)}"
    return whole


@pytest.mark.parametrize("source", BUILTIN + SHIPPED_FILES, ids=lambda s: Path(s).name)
def test_shipped_data_sets_keep_their_kinds_in_every_fold(source):
    assert_stable(source)


def test_shared_data_sets_keep_their_kinds_in_every_fold():
    for path in sorted(shared_datasets().glob("*.csv")):
        assert_stable(str(path))


def test_a_duration_of_months_is_numeric_in_every_fold(tmp_path):
    """Months 6, 12, … 60 and one 72 (the loan file whose fifth fold read them as codes)."""
    rng = np.random.default_rng(0)
    months = rng.choice(np.arange(6, 66, 6), 1000)
    months[rng.integers(1000)] = 72
    amount = rng.gamma(2, 1500, 1000).round()
    status = np.where(rng.random(1000) < 0.2 + 0.01 * months / 6, "bad", "good")
    path = tmp_path / "loans.csv"
    path.write_text("Time,Amount,Status\n" + "".join(f"{m},{a:g},{s}\n" for m, a, s in zip(months, amount, status)))
    assert assert_stable(str(path)) == ("numeric", "numeric")


def test_integer_coded_levels_are_codes_in_every_fold(tmp_path):
    """85 columns as in the insurance benchmark: a customer subtype 1..41, 42 columns of levels
    0..9 or 0..10 (the high ones rare), 41 counts of policies 0..7 with a rare 12, and the class 0/1."""
    rng = np.random.default_rng(1)
    n = 2000
    levels = np.exp(-0.8 * np.arange(10))
    columns = {"subtype": rng.integers(1, 42, n)}
    for j in range(42):
        columns[f"level{j}"] = rng.choice(10, n, p=levels / levels.sum())
        columns[f"level{j}"][rng.integers(n)] = 10 if j % 2 else 9  # a rare top level: 0..10 or 0..9
    for j in range(41):
        counts = rng.choice(8, n, p=np.exp(-1.5 * np.arange(8)) / np.exp(-1.5 * np.arange(8)).sum())
        counts[rng.integers(n)] = 12
        columns[f"count{j}"] = counts
    columns["CARAVAN"] = (rng.random(n) < 0.06).astype(int)
    path = tmp_path / "insurance.csv"
    path.write_text(",".join(columns) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in zip(*columns.values())))
    kinds = assert_stable(str(path))
    assert len(kinds) == 84 and kinds == ("numeric",) + ("nominal",) * 83
