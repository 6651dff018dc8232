"""Structures on chess obey the papers' rules (Sahami's KDB, paper 001's FKDB, Chow-Liu TAN)."""

import itertools

import numpy as np
import pytest

from bnserve.trainer import stats
from bnserve.trainer.learners.kdb import fkdb, fkdb_structure, kdb, kdb_structure
from bnserve.trainer.learners.naive_bayes import naive_bayes
from bnserve.trainer.learners.tan import tan

TOL = 1e-12


@pytest.fixture(scope="module")
def info(chess):
    """(names, I(X;C) by name, I(Xi;Xj|C) by name pair)."""
    names = [v.name for v in chess.features]
    mi = stats.class_mutual_information(chess.X, chess.y, chess.cards, chess.n_classes)
    cmi = stats.conditional_mutual_information_matrix(chess.X, chess.y, chess.cards, chess.n_classes)
    return (
        names,
        dict(zip(names, mi)),
        {(a, b): cmi[i, j] for (i, a), (j, b) in itertools.product(enumerate(names), repeat=2)},
    )


def feature_parents(structure, cls="class"):
    out = {}
    for node, parents in structure.parents.items():
        if node == cls:
            assert parents == ()
        else:
            assert parents[0] == cls, f"{node} lacks the class as first parent"
            out[node] = list(parents[1:])
    return out


def top_values(values, q):
    return sorted(values, reverse=True)[:q]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_kdb_follows_sahami(chess, info, k):
    names, mi, cmi = info
    s = kdb(chess, k)
    fp = feature_parents(s)
    assert sorted(s.order) == sorted(names) == sorted(fp)
    for a, b in zip(s.order, s.order[1:]):  # step 5.1: by I(X;C) descending, ties by column
        assert mi[a] > mi[b] - TOL
        if abs(mi[a] - mi[b]) < TOL:
            assert names.index(a) < names.index(b)
    for pos, node in enumerate(s.order):  # step 5.4: m = min(|S|, k) parents with highest CMI in S
        earlier = s.order[:pos]
        m = min(pos, k)
        assert len(fp[node]) == m == len(set(fp[node]))
        assert set(fp[node]) <= set(earlier)
        chosen = sorted((cmi[node, p] for p in fp[node]), reverse=True)
        assert chosen == pytest.approx(top_values([cmi[node, j] for j in earlier], m), abs=TOL)
    assert list(s.scores) == pytest.approx([mi[n] for n in s.order])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fkdb_follows_algorithm_1(chess, info, k):
    names, mi, cmi = info
    s = fkdb(chess, k)
    fp = feature_parents(s)
    assert sorted(s.order) == sorted(names)
    assert s.order[0] == max(names, key=lambda n: (mi[n], -names.index(n)))  # root: argmax I(Xi;C)
    assert fp[s.order[0]] == []
    for pos in range(1, len(names)):
        chosen_set = s.order[:pos]
        q = min(pos, k)
        score = {n: mi[n] + sum(top_values([cmi[n, j] for j in chosen_set], q)) for n in names if n not in chosen_set}
        best = max(score.values())
        node = s.order[pos]
        assert score[node] == pytest.approx(best, abs=TOL)
        tied = [n for n in score if score[n] > best - TOL]
        assert node == min(tied, key=names.index)
        assert s.scores[pos] == pytest.approx(best, abs=TOL)
        assert len(fp[node]) == q == len(set(fp[node]))
        assert set(fp[node]) <= set(chosen_set)
        assert sum(cmi[node, p] for p in fp[node]) == pytest.approx(score[node] - mi[node], abs=TOL)


def test_fkdb_differs_from_kdb_on_a_crafted_matrix():
    # Equal I(X;C): KDB keeps column order and gives X1 the weak parent X0; FKDB follows
    # the strong pairs X0-X3, X3-X1, X1-X2 (paper 001, Figures 7-8).
    mi = np.full(4, 0.1)
    cmi = np.zeros((4, 4))
    for (i, j), w in {(0, 1): 0.01, (0, 2): 0.02, (0, 3): 0.9, (1, 3): 0.8, (1, 2): 0.7, (2, 3): 0.05}.items():
        cmi[i, j] = cmi[j, i] = w
    order, parents, scores = fkdb_structure(mi, cmi, 1)
    assert order == [0, 3, 1, 2]
    assert parents == [[], [3], [1], [0]]
    assert scores == pytest.approx([0.1, 1.0, 0.9, 0.8])
    order, parents, _ = kdb_structure(mi, cmi, 1)
    assert order == [0, 1, 2, 3]
    assert parents == [[], [0], [1], [0]]
    order, parents, _ = fkdb_structure(mi, cmi, 2)
    assert order == [0, 3, 1, 2] and parents == [[], [3, 0], [1, 3], [0]]


def test_k0_is_naive_bayes(chess):
    nb = naive_bayes(chess)
    assert nb.parents == kdb(chess, 0).parents == fkdb(chess, 0).parents
    assert all(p == ("class",) for n, p in nb.parents.items() if n != "class")


def kruskal_weight(names, cmi):
    parent = {n: n for n in names}

    def find(n):
        while parent[n] != n:
            n = parent[n]
        return n

    total = 0.0
    for a, b in sorted(itertools.combinations(names, 2), key=lambda e: -cmi[e]):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            total += cmi[a, b]
    return total


def test_tan_is_a_maximum_weight_spanning_tree(chess, info):
    names, mi, cmi = info
    s = tan(chess)
    fp = feature_parents(s)
    assert all(len(p) <= 1 for p in fp.values())
    arcs = [(p[0], n) for n, p in fp.items() if p]
    assert len(arcs) == len(names) - 1
    root = s.order[0]
    assert root == max(names, key=lambda n: (mi[n], -names.index(n)))
    assert fp[root] == []
    for n in names:  # every feature reaches the root by parent links: connected, acyclic, directed away
        seen = set()
        while fp[n]:
            assert n not in seen
            seen.add(n)
            n = fp[n][0]
        assert n == root
    assert sum(cmi[a] for a in arcs) == pytest.approx(kruskal_weight(names, cmi), abs=1e-9)
    assert list(s.scores[1:]) == pytest.approx([cmi[fp[n][0], n] for n in s.order[1:]])


def test_learners_are_deterministic(chess):
    assert kdb(chess, 2) == kdb(chess, 2)
    assert fkdb(chess, 2) == fkdb(chess, 2)
    assert tan(chess) == tan(chess)
