"""Info-AS (paper 002 §4): the CIG, CGR and CDC metrics against Definitions 4.1-4.3 computed
slowly, the selection rule and its stop, the network on the selection, and Table 2 on chess."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer import stats
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.info_as import METRICS, select
from tests.data_helpers import accuracy, dataset, make


def slow_metrics(c, a, delta_rows):
    """Definitions 4.1-4.3 with eqs. (3)-(5), one dict of counts per instantiation l of Δ."""

    def h(counter, total):
        return -sum(n / total * math.log(n / total) for n in counter.values() if n)

    rows = [(ci, ai, tuple(d)) for ci, ai, d in zip(c, a, delta_rows) if ai >= 0 and min(d, default=0) >= 0]
    total = len(rows)
    gain = h_a = h_cell = 0.0
    for layer in {d for _, _, d in rows}:
        inside = [(ci, ai) for ci, ai, d in rows if d == layer]
        n_l = len(inside)
        p_l = n_l / total
        hc = h(Counter(ci for ci, _ in inside), n_l)
        ha = h(Counter(ai for _, ai in inside), n_l)
        hcell = h(Counter(inside), n_l)
        gain += p_l * (hc + ha - hcell)
        h_a += p_l * ha
        h_cell += p_l * hcell
    if gain <= stats.GAIN_FLOOR:
        return 0.0, 0.0, 0.0
    return gain, gain / h_a if h_a else 0.0, gain / h_cell if h_cell else 0.0


def table(c, a, delta, k, r):
    layer, s = stats.occurring_instantiations(delta) if delta else (np.zeros(len(c), np.int64), 1)
    ok = (a >= 0) & (layer >= 0)
    return np.bincount((c[ok] * r + a[ok]) * s + layer[ok], minlength=k * r * s).reshape(k, r, s)


@pytest.mark.parametrize("n_delta", [0, 1, 3])
def test_metrics_are_definitions_4_1_to_4_3(rng, n_delta):
    m = 120
    c = rng.integers(0, 3, m)
    a = np.where(rng.random(m) < 0.6, c % 2, rng.integers(0, 4, m))
    a[::11] = -1  # missing: the row leaves this table
    delta = [rng.integers(0, 3, m) for _ in range(n_delta)]
    got = stats.conditional_information_metrics(table(c, a, delta, 3, 4))
    want = slow_metrics(c, a, np.stack(delta, axis=1) if delta else np.zeros((m, 0), int))
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)
    assert got[0] > 0 and 0 < got[2] <= got[1] <= 1  # H(C,A|Δ) >= H(A|Δ) >= gain


def test_a_zero_denominator_gives_zero_and_a_determined_class_no_gain():
    c = np.array([0, 1, 0, 1, 0, 1])
    a = np.array([2, 2, 2, 2, 2, 2])  # constant: H(A|Δ) = 0
    assert stats.conditional_information_metrics(table(c, a, [], 2, 3)) == (0.0, 0.0, 0.0)
    delta = [c.copy()]  # Δ determines the class: nothing more to gain
    assert stats.conditional_information_metrics(table(c, np.array([0, 1, 2, 0, 1, 2]), delta, 2, 3)) == (0, 0, 0)


@pytest.fixture(scope="module")
def small():
    """300 rows: the class is x0 AND x1 up to 10% noise; x2 is pure noise; x3 copies x0."""
    rng = np.random.default_rng(3)
    m = 300
    x0, x1, x2 = rng.integers(0, 2, m), rng.integers(0, 3, m), rng.integers(0, 2, m)
    y = np.where(rng.random(m) < 0.9, (x0 == 1) & (x1 > 0), rng.integers(0, 2, m)).astype(int)
    x3 = np.where(rng.random(m) < 0.95, x0, 1 - x0)
    return make([x0, x1, x2, x3], [2, 3, 2, 2], y, 2)


@pytest.mark.parametrize("metric", METRICS)
def test_selection_takes_the_best_metric_until_none_is_positive(small, metric):
    which = METRICS.index(metric)
    selected, values = select(small.X, small.y, small.cards, small.n_classes, metric)
    n = small.X.shape[1]
    chosen: list[int] = []
    for step in range(len(selected) + 1):
        delta = small.X[:, chosen]
        slow = {a: slow_metrics(small.y, small.X[:, a], delta)[which] for a in range(n) if a not in chosen}
        if step == len(selected):  # stopped: nothing positive is left (or nothing is left)
            assert all(value <= 0 for value in slow.values())
            break
        assert values[step] == pytest.approx(max(slow.values()), rel=1e-10)
        assert slow[selected[step]] == pytest.approx(values[step], rel=1e-10)
        assert values[step] > 0
        chosen.append(selected[step])


def test_selection_stops_once_the_class_is_determined():
    rng = np.random.default_rng(0)
    x0, x1 = rng.integers(0, 3, 200), rng.integers(0, 2, 200)
    selected, values = select(np.stack([x1, x0], axis=1), x0 % 2, (2, 3), 2, "cgr")
    assert selected == [1] and values[0] > 0  # x1 adds nothing once x0 determines the class


@pytest.mark.parametrize("metric", METRICS)
def test_info_as_builds_a_network_on_the_selection(small, metric):
    model = fit("info-as", small, metric=metric)
    order = model.metadata["order"]
    assert {n.name for n in model.networks[0].nodes} == {"class", *order}
    assert "x2" not in order[:2] and "x0" in order
    assert sorted(model.metadata["network_order"]) == sorted(["class", *order])
    assert accuracy(model, small) > 0.85


def test_metric_is_checked(small):
    with pytest.raises(InvalidInput, match="metric must be one of cig, cgr, cdc"):
        fit("info-as", small, metric="gain")


@pytest.mark.parametrize(
    "name, train_rows, metric, mean, sd",
    [
        ("kr-vs-kp", 1000, "cgr", 96.08, 0.89),
        ("splice", 2000, "cgr", 95.03, 0.54),
        ("mushroom", 500, "cig", 99.33, 0.39),
    ],
)
def test_info_as_matches_paper_002(name, train_rows, metric, mean, sd):
    """Paper 002, Tables 1-3: train on a random ``train_rows`` rows, test on the rest; the
    paper averages 30 splits. One split here (seed 0), within two of the paper's standard
    deviations. Ten splits (seeds 0-9): chess CGR 96.71 ± 0.62, splice CGR 94.76 ± 0.65,
    mushroom CIG 99.23 ± 0.32. Splice is where CB's class-as-root orientation matters: with
    the class left to the CI tests, seed 0 gave 87.8."""
    data = dataset(name)
    perm = np.random.default_rng(0).permutation(data.n_rows)
    train, test = data.subset(perm[:train_rows]), data.subset(perm[train_rows:])
    model = fit("info-as", train, metric=metric)
    assert mean - 2 * sd <= 100 * accuracy(model, test) <= mean + 2 * sd
