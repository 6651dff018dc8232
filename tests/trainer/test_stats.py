"""stats against slow, obvious dict-based references (available-case counting, nats)."""

import math
from collections import Counter
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.trainer import stats
from bnserve.trainer.cores import limited
from bnserve.trainer.learners.parameters import laplace_cpt
from bnserve.trainer.stats import pairs


def ref_mi(x, c):
    rows = [(a, b) for a, b in zip(x, c) if a >= 0 and b >= 0]
    n = len(rows)
    if n == 0:
        return 0.0
    n_ab, n_a, n_b = Counter(rows), Counter(a for a, _ in rows), Counter(b for _, b in rows)
    return sum(k / n * math.log(k * n / (n_a[a] * n_b[b])) for (a, b), k in n_ab.items())


def ref_cmi(x, y, c):
    rows = [(a, b, d) for a, b, d in zip(x, y, c) if a >= 0 and b >= 0 and d >= 0]
    n = len(rows)
    if n == 0:
        return 0.0
    n_xyc = Counter(rows)
    n_xc = Counter((a, d) for a, _, d in rows)
    n_yc = Counter((b, d) for _, b, d in rows)
    n_c = Counter(d for _, _, d in rows)
    return sum(k / n * math.log(k * n_c[d] / (n_xc[(a, d)] * n_yc[(b, d)])) for (a, b, d), k in n_xyc.items())


@st.composite
def coded_table(draw, max_features=4):
    """(X with -1 for missing, y complete, feature cards, n_classes)."""
    m = draw(st.integers(0, 40))
    n = draw(st.integers(2, max_features))
    cards = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    n_classes = draw(st.integers(2, 3))
    p_missing = draw(st.sampled_from([0.0, 0.2, 0.6]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, c, m) for c in cards]).astype(np.int32).reshape(m, n)
    X[rng.random((m, n)) < p_missing] = -1
    y = rng.integers(0, n_classes, m)
    return X, y, cards, n_classes


@settings(max_examples=60, deadline=None)
@given(coded_table())
def test_mutual_information_matches_reference(table):
    X, y, cards, n_classes = table
    got = stats.class_mutual_information(X, y, cards, n_classes)
    for i in range(X.shape[1]):
        assert got[i] == pytest.approx(ref_mi(X[:, i].tolist(), y.tolist()), abs=1e-12)
        assert got[i] >= 0


@settings(max_examples=60, deadline=None)
@given(coded_table(max_features=5))
def test_conditional_mutual_information_matrix_matches_reference(table):
    X, y, cards, n_classes = table
    matrix = stats.conditional_mutual_information_matrix(X, y, cards, n_classes)
    n = X.shape[1]
    assert matrix.shape == (n, n)
    assert np.array_equal(matrix, matrix.T)
    assert np.all(np.diag(matrix) == 0)
    for i in range(n):
        for j in range(i + 1, n):
            expected = ref_cmi(X[:, i].tolist(), X[:, j].tolist(), y.tolist())
            assert matrix[i, j] == pytest.approx(expected, abs=1e-12)
            single = stats.conditional_mutual_information(X[:, i], X[:, j], y, cards[i], cards[j], n_classes)
            assert single == pytest.approx(expected, abs=1e-12)


def test_missing_class_is_excluded_available_case():
    x = np.array([0, 1, 0, 1, 1, 0])
    c = np.array([0, 1, -1, -1, 1, 0])
    assert stats.mutual_information(x, c, 2, 2) == pytest.approx(ref_mi(x.tolist(), c.tolist()))
    assert stats.mutual_information(x, c, 2, 2) == pytest.approx(math.log(2))


def test_independent_and_identical_columns():
    x = np.array([0, 1] * 50)
    assert stats.mutual_information(x, x, 2, 2) == pytest.approx(math.log(2))
    assert stats.mutual_information(x, np.repeat([0, 1], 50), 2, 2) == pytest.approx(0.0, abs=1e-15)


def test_joint_counts_uses_rows_where_all_present():
    a = np.array([0, 1, 1, -1, 2])
    b = np.array([1, 1, -1, 0, 0])
    counts = stats.joint_counts([a, b], [3, 2])
    assert counts.tolist() == [[0, 1], [0, 1], [1, 0]]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_joint_counts_by_blocks_of_rows_are_one_count_of_every_row(data):
    """Over more rows than ``BLOCK_ROWS`` a small table is counted a block at a time: the same
    integers as one bincount of every row, missing values and ``complete`` alike; a block
    dropped, or counted twice, changes them."""
    from bnserve.trainer.stats import counts

    m = data.draw(st.integers(2, 400))
    k = data.draw(st.integers(1, 3))
    cards = data.draw(st.lists(st.integers(1, 3), min_size=k, max_size=k))
    complete = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cols = [rng.integers(0 if complete else -1, c, m).astype(np.int8) for c in cards]
    ext = [c if complete else c + 1 for c in cards]
    flat = np.ravel_multi_index([c if complete else c + 1 for c in cols], ext)
    want = np.bincount(flat, minlength=math.prod(ext)).reshape(ext)
    want = want if complete else want[(slice(1, None),) * k]
    block = data.draw(st.integers(max(1, math.prod(ext)), max(m - 1, math.prod(ext))), label="BLOCK_ROWS")
    with patch.object(counts, "BLOCK_ROWS", block):
        got = stats.joint_counts(cols, cards, complete=complete)
    assert got.dtype == np.int64 and got.flags.c_contiguous and np.array_equal(got, want)


def test_entropy():
    assert stats.entropy(np.array([5, 5])) == pytest.approx(math.log(2))
    assert stats.entropy(np.array([[1, 1], [1, 1]])) == pytest.approx(math.log(4))
    assert stats.entropy(np.array([7, 0])) == 0.0
    assert stats.entropy(np.zeros(3)) == 0.0


def test_laplace_cpt_by_hand():
    x = np.array([0, 0, 1, -1, 1, 0])
    pa = np.array([0, 1, 1, 1, -1, 0])
    # available-case rows: (0,0) (0,1) (1,1) (0,0): N(x=0|pa=0)=2, N(1|0)=0, N(0|1)=1, N(1|1)=1
    cpt = laplace_cpt([x, pa], [2, 2])
    assert cpt.shape == (2, 2)  # (node, parent)
    assert cpt.dtype == np.float64
    assert cpt[:, 0].tolist() == [3 / 4, 1 / 4]
    assert cpt[:, 1].tolist() == [2 / 4, 2 / 4]


def test_laplace_class_prior_and_two_parents_sum_to_one():
    y = np.array([0, 0, 0, 1, 2])
    prior = laplace_cpt([y], [3])
    assert prior.tolist() == pytest.approx([4 / 8, 2 / 8, 2 / 8])  # (N(c)+1)/(M+|C|)
    rng = np.random.default_rng(1)
    cols = [rng.integers(-1, c, 50) for c in (3, 2, 4)]
    cpt = laplace_cpt(cols, [3, 2, 4])
    assert cpt.shape == (3, 2, 4)
    assert np.allclose(cpt.sum(axis=0), 1.0)
    assert np.all(cpt > 0)


def _per_pair_counts(X, y, cards, n_classes):
    """The plain way: one available-case joint_counts per pair (i < j)."""
    n = X.shape[1]
    return {
        (i, j): stats.joint_counts([X[:, i], X[:, j], y], [cards[i], cards[j], n_classes])
        for j in range(n)
        for i in range(j)
    }


@pytest.mark.parametrize(
    "table_cells, row_chunk, product_rows", [(1 << 16, 1 << 15, 0), (64, 7, 0), (1, 1 << 15, 0), (1, 7, 4096)]
)
@pytest.mark.parametrize("order", ["C", "F"])
def test_pairwise_class_counts_equal_one_count_per_pair(monkeypatch, table_cells, row_chunk, product_rows, order):
    """Grouped counting (several columns per bincount, rows in chunks) gives every pair's table
    exactly, for groups of one and of several columns, missing features and classes included;
    so do the products of one-hot matrices that count few rows (``product_rows``)."""
    monkeypatch.setattr(pairs, "PAIR_TABLE_CELLS", table_cells)  # where they are read (not the package's copies)
    monkeypatch.setattr(pairs, "PRODUCT_ROWS", product_rows)
    monkeypatch.setattr(pairs, "TABLE_ROWS_PER_CELL", 1)  # else 500 rows allow no group of several columns
    rng = np.random.default_rng(7)
    cards = [2, 3, 2, 4, 1, 9, 2, 3, 2, 2, 5]
    m, n_classes = 500, 3
    X = np.column_stack([rng.integers(0, c, m) for c in cards]).astype(np.int32)
    X[rng.random(X.shape) < 0.15] = -1
    y = rng.integers(0, n_classes, m)
    y[:5] = -1
    X = np.asarray(X, order=order)
    want = _per_pair_counts(X, y, cards, n_classes)
    got = {(i, j): table for i, j, table in stats.pairwise_class_counts(X, y, cards, n_classes, None, row_chunk)}
    assert got.keys() == want.keys()
    for pair, table in got.items():
        assert table.shape == (cards[pair[0]] + 1, cards[pair[1]] + 1, n_classes + 1)
        assert np.array_equal(table[1:, 1:, 1:], want[pair]), pair


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_pair_counts_by_blocks_of_rows_equal_one_count_of_all_rows(data):
    """Counted a block of rows at a time (``block_rows`` fewer than the rows, in groups of one
    and of several columns), every pair's table, missing states included, is one count over
    all the rows; so is N(xi, c), summed out of the pairs. A block dropped or counted twice
    changes them. Whole-number weights: the same sums. Without weights, few rows are counted
    as products of one-hot matrices (``PRODUCT_ROWS``): the same integers, of the same type.
    Counted on threads (``cores``), each table is its own, in its place."""
    m = data.draw(st.integers(2, 1500))
    products = data.draw(st.sampled_from([0, 4096]), label="PRODUCT_ROWS")
    n = data.draw(st.integers(2, 8))
    cards = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    n_classes = data.draw(st.integers(2, 3))
    block_rows = data.draw(st.integers(max(1, m // 8), m - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    X = np.asfortranarray(np.column_stack([rng.integers(-1, c, m) for c in cards]).astype(np.int8))
    y = rng.integers(0, n_classes, m)
    weights = data.draw(st.sampled_from([None, rng.integers(0, 4, m).astype(np.float64)]))
    threads = data.draw(st.sampled_from([1, 3]), label="cores")  # 3: a group's tables on threads (rows > block_rows)
    with patch.object(pairs, "PRODUCT_ROWS", products), limited(threads):
        got = {(i, j): t for i, j, t in stats.pairwise_class_counts(X, y, cards, n_classes, weights, block_rows)}
        counted = stats.PairStatistics.of(X, y, cards, n_classes, weights)
    for j in range(n):
        for i in range(j):
            shape = (cards[i] + 1, cards[j] + 1, n_classes + 1)
            codes = stats.shifted_codes([X[:, i], X[:, j], y], [cards[i], cards[j], n_classes])
            want = np.bincount(codes, weights, minlength=math.prod(shape)).reshape(shape)
            assert got[(i, j)].dtype == want.dtype and np.array_equal(got[(i, j)], want), (i, j)
    for i in range(n):
        want = stats.joint_counts([X[:, i], y], [cards[i], n_classes], weights=weights)
        assert counted.class_feature[i].dtype == want.dtype and np.array_equal(counted.class_feature[i], want), i


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_pairwise_class_counts_few_columns(n):
    rng = np.random.default_rng(n)
    X = rng.integers(-1, 3, (40, n)).astype(np.int32)
    y = rng.integers(0, 2, 40)
    got = {(i, j): t[1:, 1:, 1:] for i, j, t in stats.pairwise_class_counts(X, y, [3] * n, 2)}
    want = _per_pair_counts(X, y, [3] * n, 2)
    assert got.keys() == want.keys()
    assert all(np.array_equal(got[p], want[p]) for p in want)


def test_feature_columns_is_the_transpose():
    X = np.random.default_rng(3).integers(-1, 5, (stats.TRANSPOSE_ROWS * 2 + 3, 6)).astype(np.int32)
    for arr in (X, np.asfortranarray(X)):
        cols = stats.feature_columns(arr)
        assert cols.flags.c_contiguous
        assert np.array_equal(cols, X.T)


@settings(max_examples=60, deadline=None)
@given(coded_table(max_features=7), st.sampled_from([1, 4, 16, 128]), st.integers(1, 6))
def test_column_groups_count_a_context_against_every_column(table, group_cells, size):
    """N(context, x_j) per column from grouped bincounts equals a direct count, missing as state 0,
    for groups of one and of several columns; skipped columns are not yielded."""
    X, y, cards, _ = table
    m = X.shape[0]
    context = np.random.default_rng(m).integers(0, size, m).astype(np.int64)
    groups = stats.ColumnGroups(X, cards, group_cells)
    skip = [0] if X.shape[1] > 2 else []
    got = dict(groups.counts(context, size, skip))
    assert sorted(got) == [j for j in range(X.shape[1]) if j not in skip]
    for j, table_j in got.items():
        want = np.zeros((size, cards[j] + 1), dtype=np.int64)
        for u, x in zip(context, X[:, j]):
            want[u, x + 1] += 1
        assert np.array_equal(table_j, want), j


def test_family_log_likelihood_and_bic_penalty_by_hand():
    counts = np.array([[3, 1], [0, 4]])  # parent configuration on axis 0, child on the last axis
    assert stats.family_log_likelihood(counts) == pytest.approx(3 * math.log(3 / 4) + math.log(1 / 4))
    assert stats.bic_penalty(100, 3, 6) == pytest.approx(0.5 * math.log(100) * 2 * 6)


def test_a_pair_matrix_is_computed_once_per_statistic_until_counts_are_added() -> None:
    """auto's candidates on a fold share one PairStatistics: each statistic's matrix is
    computed once, served as a copy (a caller's edit does not reach the next), and computed
    again from the new counts after ``add``."""
    from bnserve.trainer.stats.pairs import PairStatistics

    rng = np.random.default_rng(3)
    X, y = rng.integers(0, 3, size=(60, 4)).astype(np.int32), rng.integers(0, 2, 60)
    stats = PairStatistics.of(X, y, [3, 3, 3, 3], 2)
    calls: list[int] = []

    def statistic(table: np.ndarray) -> float:
        calls.append(1)
        return float(table.sum())

    first = stats.pair_matrix(statistic)
    first[0, 1] = -1.0
    second = stats.pair_matrix(statistic)
    assert len(calls) == 6 and second[0, 1] == 60
    stats.add(PairStatistics.of(X, y, [3, 3, 3, 3], 2))
    assert stats.pair_matrix(statistic)[0, 1] == 120 and len(calls) == 12


@settings(max_examples=60, deadline=None)
@given(coded_table(max_features=5), st.data())
def test_a_family_read_from_the_pair_statistics_is_its_count_from_the_rows(table, data) -> None:
    """``PairStatistics.family`` (what ``EncodedData.family_counts`` reads once the statistics
    are counted) equals the available-case count of the rows, in the family's own axis order,
    for the class with one or two features; any other family it declines (None)."""
    X, y, cards, n_classes = table
    counted = stats.PairStatistics.of(X, y, cards, n_classes)
    n = len(cards)
    size = data.draw(st.integers(1, min(3, n)))
    family = data.draw(
        st.permutations([-1, *data.draw(st.lists(st.integers(0, n - 1), min_size=size, max_size=size, unique=True))])
    )
    columns = [y if j < 0 else X[:, j] for j in family]
    states = [n_classes if j < 0 else cards[j] for j in family]
    read = counted.family(family)
    if len(family) > 3:
        assert read is None
        return
    expected = stats.joint_counts(columns, states)
    assert read is not None and read.dtype == expected.dtype
    np.testing.assert_array_equal(read, expected)
    read[...] = -1  # a copy: the statistics keep their counts
    np.testing.assert_array_equal(counted.family(family), expected)
    assert counted.family([0]) is None and counted.family([0, 0, -1]) is None


@given(
    st.integers(1, 2 * stats.COMPARED_VALUES),
    st.lists(st.integers(-1, 2 * stats.COMPARED_VALUES - 1), max_size=300),
    st.sampled_from([np.int8, np.uint8, np.int16, np.int64]),
)
def test_value_counts_are_bincounts_of_the_codes_present(size, values, dtype):
    """Both ways of counting (by comparisons up to COMPARED_VALUES values, by bincount past it)
    count each value 0..size-1 of the codes, and never a missing (negative) code."""
    codes = np.array(
        [v for v in values if v < size and (v >= 0 or np.issubdtype(dtype, np.signedinteger))], dtype=dtype
    )
    expected = np.array([int(np.count_nonzero(codes.astype(np.int64) == k)) for k in range(size)], dtype=np.int64)
    counted = stats.value_counts(codes, size)
    assert counted.dtype == np.int64
    np.testing.assert_array_equal(counted, expected)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_pair_statistics_pickle_as_one_array_and_add_up_after(n, weighted):
    """A part's counts travel (``--jobs`` processes, Dask workers) as one array of every
    table, unpickled as views of it: the same tables, of the same type, that add up as the
    counts they were; an empty one too."""
    import pickle

    rng = np.random.default_rng(n)
    cards = list(rng.integers(1, 4, n))
    X = np.column_stack([rng.integers(-1, c, 300) for c in cards]).astype(np.int8)
    y = rng.integers(0, 3, 300)
    weights = rng.integers(0, 3, 300).astype(np.float64) if weighted else None
    counted = stats.PairStatistics.of(X, y, cards, 3, weights)
    back = pickle.loads(pickle.dumps(counted))
    assert back.cards == counted.cards and back.n_classes == counted.n_classes
    assert list(back.pairs) == list(counted.pairs)
    for got, want in zip(
        [*back.class_feature, *back.pairs.values()], [*counted.class_feature, *counted.pairs.values()]
    ):
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    total = stats.PairStatistics.empty(cards, 3, weighted)
    total = pickle.loads(pickle.dumps(total))
    total.add(back)
    total.add(pickle.loads(pickle.dumps(counted)))
    assert all(np.array_equal(total.pairs[k], 2 * t) for k, t in counted.pairs.items())
    assert all(np.array_equal(a, 2 * b) for a, b in zip(total.class_feature, counted.class_feature))
    assert np.array_equal(
        total.cmi_matrix(),
        stats.PairStatistics.of(
            np.vstack([X, X]),
            np.concatenate([y, y]),
            cards,
            3,
            None if weights is None else np.concatenate([weights, weights]),
        ).cmi_matrix(),
    )
