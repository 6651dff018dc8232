"""Codes in the narrowest integer type, from the reader to the counts: a column of few
states costs a byte per row (``narrowest``), and counting narrow codes gives the very
tables counting int64 codes gives."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bnserve.trainer.data import encode_with, load
from bnserve.trainer.data.missing import STATE
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.io import read_table
from bnserve.trainer.stats import joint_code, joint_counts, shifted_codes
from tests.data_helpers import write


def _file(tmp_path, states: int, rows: int = 400) -> str:
    lines = ["few,many,label"] + [f"{'abc'[r % 3]},v{r % states},{'yn'[r % 2]}" for r in range(rows)]
    return write(tmp_path, "\n".join(lines) + "\n")


def test_a_column_of_three_states_is_held_in_one_byte_per_row(tmp_path):
    data = load(_file(tmp_path, states=5))
    assert [v.cardinality for v in data.features] == [3, 5]
    assert data.X.dtype == np.int8
    table = read_table(_file(tmp_path, states=5))
    assert {c.index.dtype for c in table.columns} == {np.dtype(np.int8)}  # the reader's positions too


def test_a_column_of_300_states_widens_the_codes_to_int16(tmp_path):
    data = load(_file(tmp_path, states=300))
    assert [v.cardinality for v in data.features] == [3, 300]
    assert data.X.dtype == np.int16
    assert data.X[:, 1].max() == 299 and data.X[:, 0].max() == 2


def test_codes_against_trained_variables_are_narrow(tmp_path):
    data = load(_file(tmp_path, states=5))
    coded = encode_with(data.variables[:-1], [["a", "v3"], ["", "v0"], ["c", ""]])
    assert coded.dtype == np.int8
    assert coded.tolist() == [[0, 3], [-1, 0], [2, -1]]


def test_a_missing_state_past_127_states_widens_the_codes(tmp_path):
    """A learned variable may have more states than the nominal column it comes from: X
    widens to hold its codes (127 states and a "missing" one: code 127, int16)."""
    lines = ["x,label"] + [f"v{r % 127},{'yn'[r % 2]}" for r in range(400)] + [",y"]
    data = load(write(tmp_path, "\n".join(lines) + "\n"), preprocessing=Preprocessing(missing=STATE))
    assert data.features[0].cardinality == 128
    assert data.X.dtype == np.int16 and data.X[-1, 0] == 127
    available = load(write(tmp_path, "\n".join(lines) + "\n", "again.csv"))
    assert available.X.dtype == np.int8 and available.X[-1, 0] == -1


@st.composite
def _coded_columns(draw: st.DrawFn) -> tuple[list[np.ndarray], list[int]]:
    k = draw(st.integers(1, 4))
    rows = draw(st.integers(1, 60))
    cards = draw(st.lists(st.sampled_from([1, 2, 3, 5, 127, 128, 300, 40000]), min_size=k, max_size=k))
    cards = cards if np.prod([c + 1 for c in cards], dtype=np.float64) <= 100_000 else [2] * k  # small tables
    columns = [np.array(draw(st.lists(st.integers(-1, c - 1), min_size=rows, max_size=rows))) for c in cards]
    return columns, cards


def _narrowest(column: np.ndarray, card: int) -> np.ndarray:
    return column.astype(np.int8 if card <= 127 else np.int16 if card <= 32767 else np.int32)


@settings(max_examples=40, deadline=None)
@given(_coded_columns(), st.booleans())
@example(([np.array([0, 0, -1]), np.array([127, 3, 0])], [1, 128]), False)  # a factor as large as the table
def test_counting_narrow_codes_equals_counting_int64_codes(coded, weighted):
    columns, cards = coded
    wide = [c.astype(np.int64) for c in columns]
    narrow = [_narrowest(c, card) for c, card in zip(columns, cards)]
    weights = np.linspace(0.5, 2.0, len(columns[0])) if weighted else None
    expected = _reference_counts(wide, cards, weights)
    got = joint_counts(narrow, cards, weights=weights)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert np.array_equal(shifted_codes(narrow, cards), shifted_codes(wide, cards))
    present = np.all([c >= 0 for c in wide], axis=0)
    complete = [c[present] for c in narrow]
    assert np.array_equal(joint_counts(complete, cards, complete=True), _reference_counts(wide, cards, None, present))
    assert np.array_equal(joint_code(complete, cards), np.ravel_multi_index([c[present] for c in wide], cards))


def _reference_counts(columns, cards, weights, rows=None):
    """N(v1..vk) by a loop over the rows where all are present (``rows``: only those)."""
    table = np.zeros(cards, dtype=np.int64 if weights is None else np.float64)
    n = len(columns[0])
    for r in range(n):
        values = tuple(int(c[r]) for c in columns)
        if min(values) >= 0 and (rows is None or rows[r]):
            table[values] += 1 if weights is None else weights[r]
    return table


ONE_MATRIX_FILES = {  # file text -> whether the features are coded over the reader's positions
    "a,b,label\n" + "".join(f"{r % 3},x{r % 4},{'yn'[r % 2]}\n" for r in range(300)): True,
    "a,b,label\n"
    + "".join(f"{r % 3},x{r % 4},{'yn'[r % 2]}\n" for r in range(300))
    + "1,x1,y": True,  # no final newline
    "a,label,b\n" + "".join(f"{r % 3},{'yn'[r % 2]},x{r % 4}\n" for r in range(300)): False,  # the class between
    "a,b,label\n" + "".join(f"{r % 3},{r * 0.37:.2f},{'yn'[r % 2]}\n" for r in range(300)): False,  # numeric b
    "a,b,label\n"
    + "".join(f"{r % 3},x{r % 4},{'yn'[r % 2] if r % 9 else ''}\n" for r in range(300)): False,  # no class
    "a,b,label\n" + "".join(f"{r % 3},x{r % 4},{'yn'[r % 2]}\n\n" for r in range(300)): False,  # blank lines
    "a,b,label\n" + "".join(f"{r % 3},x{r % 200},{'yn'[r % 2]}\n" for r in range(300)): False,  # 200 texts: int16
    "a,b,label\n" + "".join(f'"{r % 3}",x{r % 4},{"yn"[r % 2]}\n' for r in range(300)): False,  # quoted
}


@pytest.mark.parametrize("text", ONE_MATRIX_FILES)
def test_a_handed_over_table_is_coded_over_its_positions_and_gives_the_same_codes(tmp_path, text):
    """A file read whole keeps one matrix: the reader writes every column's positions into
    it, and ``columns_of(consume=True)`` writes the codes over them, when the features are
    nominal, side by side, and every row is kept; the codes are those of a fresh matrix."""
    from bnserve.trainer.data.columns import columns_of

    path = write(tmp_path, text)
    expected = columns_of(read_table(path), "label", Preprocessing())
    table = read_table(path)
    positions = table.positions
    got = columns_of(Preprocessing().cleaned(table), "label", Preprocessing(), consume=True)
    assert got.codes.dtype == expected.codes.dtype and np.array_equal(got.codes, expected.codes)
    assert np.array_equal(got.y, expected.y) and got.states == expected.states
    in_place = positions is not None and np.shares_memory(got.codes, positions)
    assert in_place == ONE_MATRIX_FILES[text]
    if in_place:
        assert got.codes.flags.f_contiguous  # the learners read it as it is, with no copy


def test_the_training_plan_hands_the_file_over(tmp_path):
    from bnserve.trainer.plan import TrainingSpec, read

    path = write(tmp_path, next(iter(ONE_MATRIX_FILES)))
    data = read(TrainingSpec("nb"), path)
    assert data.X.base is not None and data.X.flags.f_contiguous  # a view of the reader's matrix
    assert np.array_equal(data.X, load(path).X)
