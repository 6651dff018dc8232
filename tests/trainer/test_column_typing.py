"""Whole-number codes (issue 15): a nominal column of codes 5, 7, 10, 12 has its states in
that order, in memory and in chunks alike."""

from __future__ import annotations

import numpy as np

from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.columns import state_order
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from tests.data_helpers import write
from tests.trainer.test_streaming import assert_same_model


def _codes_csv(rows: int = 240, seed: int = 0) -> str:
    """code (whole numbers 5, 7, 10, 14, read as codes), grade (text), class (2, 10: codes too)."""
    rng = np.random.default_rng(seed)
    lines = ["code,grade,class"]
    for _ in range(rows):
        c = int(rng.integers(0, 2))
        code = [5, 7, 10, 14][int(rng.integers(0, 2) + 2 * c) if rng.random() < 0.8 else int(rng.integers(0, 4))]
        grade = "" if rng.random() < 0.1 else ["a", "b", "B10"][int(rng.integers(0, 3))]
        lines.append(f"{code},{grade},{[2, 10][c]}")
    return "\n".join(lines) + "\n"


def test_state_order_is_by_number_for_whole_numbers_only():
    assert state_order(["10", "12", "5", "7", "", "5"]) == ("5", "7", "10", "12")
    assert state_order(["-3", "10", "0", "2"]) == ("-3", "0", "2", "10")
    for text_order in (["10", "5", "x"], ["10", "5", "5.5"], ["10", "05"], ["10", "+5"]):
        assert state_order(text_order) == tuple(sorted(text_order))


def test_whole_number_states_in_numeric_order_in_memory_and_in_chunks(tmp_path):
    path = write(tmp_path, _codes_csv())
    data = load(path)
    code, grade, klass = data.variables
    assert code.states == ("5", "7", "10", "14") and klass.states == ("2", "10")
    assert grade.states == ("B10", "a", "b")  # text: as before
    rows = [line.split(",") for line in _codes_csv().splitlines()[1:]]
    assert [code.states[c] for c in data.X[:, 0]] == [r[0] for r in rows]  # each row keeps its label
    for algo in ("nb", "tan"):
        assert_same_model(fit(algo, load_streamed(path, None, Preprocessing(), None, 37)), fit(algo, load(path)))
