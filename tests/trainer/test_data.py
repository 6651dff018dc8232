"""Reading and encoding CSVs: hand-made files, malformed ones included."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, Variable
from bnserve.trainer.data import encode_with, load, load_with
from tests.data_helpers import write

SMALL = 'colour,size,label\nred,"big, very",yes\nblue,,no\n,small,yes\nred,small,\n\n'


@pytest.mark.parametrize("name", ["data.csv", "data.csv.gz"])
def test_small_file_is_encoded(tmp_path, name):
    data = load(write(tmp_path, SMALL, name))
    names = [v.name for v in data.variables]
    assert names == ["colour", "size", "label"]
    assert [v.role for v in data.variables] == [FEATURE, FEATURE, CLASS]
    assert data.variables[0].states == ("blue", "red")
    assert data.variables[1].states == ("big, very", "small")  # quoting handled
    assert data.class_variable.states == ("no", "yes")
    assert data.n_rows_dropped == 1  # "red,small," has no class
    assert data.X.dtype == np.int8 and data.X.tolist() == [[1, 0], [0, -1], [-1, 1]]
    assert data.y.tolist() == [1, 0, 1]


def test_class_column_can_be_chosen_and_goes_last(tmp_path):
    data = load(write(tmp_path, "a,cls,b\nx,1,p\ny,2,q\nx,2,p\n"), class_column="cls")
    assert [v.name for v in data.variables] == ["a", "b", "cls"]
    assert data.class_variable.role == CLASS
    assert data.X.tolist() == [[0, 0], [1, 1], [0, 0]]
    assert data.y.tolist() == [0, 1, 1]


def test_builtin_chess(chess):
    assert chess.X.shape == (3196, 36)
    assert chess.class_variable.name == "class"
    assert chess.class_counts() == {"nowin": 1527, "won": 1669}
    assert chess.n_rows_dropped == 0
    assert (chess.X >= 0).all()


def test_fingerprint_depends_on_the_data(tmp_path):
    a = load(write(tmp_path, "f,c\nx,1\ny,2\n", "a.csv"))
    b = load(write(tmp_path, "f,c\nx,1\ny,2\n", "b.csv"))
    c = load(write(tmp_path, "f,c\nx,2\ny,1\n", "c.csv"))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


@pytest.mark.parametrize(
    "text, kwargs, pieces",
    [
        ("a,b,c\n1,2,x\n1,2\n", {}, ["line 3", "2 fields", "header has 3"]),
        ("a,b,c\n1,2,x\n\n1,2,3,4\n", {}, ["line 4", "4 fields"]),
        ("a,b\n1,x\n", {"class_column": "nope"}, ["line 1", "'nope'"]),
        ("a,b\n1,x\n2,x\n,x\n", {}, ["column 'b'", "two states", "'x'"]),
        ("", {}, ["line 1", "empty"]),
        ("\na,b\n1,2\n", {}, ["line 1", "blank"]),
        ("a,b\n", {}, ["no data rows"]),
        ("a,b,a\n1,2,3\n", {}, ["line 1", "duplicate column name 'a'", "columns 1 and 3"]),
        ("a,,c\n1,2,3\n", {}, ["line 1", "column 2"]),
        ("a,b,c\n,1,x\n,2,y\n", {}, ["column 'a'", "every value is empty"]),
        ("a,b\n1,\n2,\n", {}, ["column 'b'", "every row has an empty class"]),
        ("c\nx\ny\n", {}, ["only the class column"]),
    ],
)
def test_malformed_files_name_the_fault(tmp_path, text, kwargs, pieces):
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as info:
        load(path, **kwargs)
    message = info.value.message
    assert path in message
    for piece in pieces:
        assert piece in message


def test_missing_file_and_unknown_builtin(tmp_path):
    with pytest.raises(InvalidInput, match="nope.csv"):
        load(str(tmp_path / "nope.csv"))
    with pytest.raises(InvalidInput, match="builtin:nope"):
        load("builtin:nope")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("a,b\ncaf\u00e9,x\n".encode("latin-1"))
    with pytest.raises(InvalidInput, match="UTF-8"):
        load(str(path))


def test_encode_with_known_missing_and_unknown(tmp_path):
    data = load(write(tmp_path, SMALL))
    X = encode_with(data.features, [["red", "small"], ["", "big, very"]])
    assert X.tolist() == [[1, 1], [-1, 0]]
    assert encode_with(data.features, []).shape == (0, 2)
    with pytest.raises(InvalidInput) as info:
        encode_with(data.features, [["red", "small"], ["green", "small"]])
    assert "'colour'" in info.value.message and "'green'" in info.value.message and "row 2" in info.value.message
    with pytest.raises(InvalidInput, match="2 values"):
        encode_with(data.features, [["red"]])


def test_load_with_matches_columns_by_name(tmp_path):
    train = load(write(tmp_path, SMALL))
    test = load_with(
        write(tmp_path, "label,size,colour,extra\nno,small,red,9\n,small,blue,9\n", "t.csv"), train.variables
    )
    assert test.X.tolist() == [[1, 1]]
    assert test.y.tolist() == [0]
    assert test.n_rows_dropped == 1
    with pytest.raises(InvalidInput) as info:
        load_with(write(tmp_path, "label,size,colour\nno,huge,red\n", "u.csv"), train.variables)
    assert "line 2" in info.value.message and "'size'" in info.value.message and "'huge'" in info.value.message
    with pytest.raises(InvalidInput, match="'colour'"):
        load_with(write(tmp_path, "label,size\nno,small\n", "v.csv"), train.variables)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_fingerprint_of_rows_hashed_in_parts_is_that_of_the_whole(data):
    """Parts cut anywhere (inside blocks, a block over several parts), each fed in chunks of
    any size from its first row: ``combine`` gives the digests of the whole, so the same
    fingerprint; it moves when a row changes or two rows swap."""
    from bnserve.trainer.data import fingerprint as fp

    n_rows = data.draw(st.integers(0, 60))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    X, y = rng.integers(0, 3, (n_rows, 4)).astype(np.int32), rng.integers(0, 2, n_rows)
    variables = [Variable(f"x{j}", ("a", "b", "c")) for j in range(4)] + [Variable("c", ("p", "q"), CLASS)]
    cuts = sorted(data.draw(st.lists(st.integers(0, n_rows), max_size=6)))
    bounds = [0, *cuts, n_rows]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fp, "BLOCK_ROWS", 7)
        parts = []
        for start, end in itertools.pairwise(bounds):
            part = fp.RowDigests(start)
            at = start
            while at < end:
                step = data.draw(st.integers(1, 9))
                part.add(X[at : min(at + step, end)], y[at : min(at + step, end)])
                at += step
            parts.append(part.finish())
        whole = fp.fingerprint_of(variables, X, y)
        assert fp.fingerprint(variables, n_rows, fp.combine(parts)) == whole
        if n_rows >= 2 and not (X[0] == X[1]).all():
            assert fp.fingerprint_of(variables, X[[1, 0, *range(2, n_rows)]], y) != whole
        if n_rows:
            changed = X.copy()
            changed[-1, 0] = (changed[-1, 0] + 1) % 3
            assert fp.fingerprint_of(variables, changed, y) != whole


def test_the_fingerprint_hashes_blocks_without_a_converted_copy_and_keeps_its_value():
    """Each block is hashed ``HASH_ROWS`` rows at a time: no int32 copy of a block (13 MB for
    50 columns) is made, and the digest is that of the block's int32 and int64 bytes."""
    import hashlib
    import tracemalloc

    from bnserve.trainer.data import fingerprint as fp

    rng = np.random.default_rng(0)
    n = fp.BLOCK_ROWS + 5
    X = np.asfortranarray(rng.integers(-1, 3, (n, 50)).astype(np.int8))
    y = rng.integers(0, 2, n)
    variables = [Variable(f"x{j}", ("a", "b", "c")) for j in range(50)] + [Variable("c", ("p", "q"), CLASS)]
    blocks = [
        (
            hashlib.sha256(np.ascontiguousarray(X[s : s + fp.BLOCK_ROWS], "<i4").data).digest(),
            hashlib.sha256(np.ascontiguousarray(y[s : s + fp.BLOCK_ROWS], "<i8").data).digest(),
        )
        for s in range(0, n, fp.BLOCK_ROWS)
    ]
    tracemalloc.start()
    try:
        got = fp.fingerprint_of(variables, X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == fp.fingerprint(variables, n, blocks)
    assert peak < 4 << 20  # a block as int32 is 13 MB
