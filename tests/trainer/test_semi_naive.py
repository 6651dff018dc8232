"""Semi-naive learners of paper 003: BSEJ (Pazzani 1996) and the augmented semi-naive Bayes (ASB)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from bnserve.store.model import CLASS, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import cross_validate
from bnserve.trainer.fit import fit
from bnserve.trainer.learners import sizing
from bnserve.trainer.learners.search.groups import augmenting_forest, canonical, grouped_parents
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy
from bnserve.trainer.learners.semi_naive import asb, bsej, bsej_search
from tests.data_helpers import dataset


@pytest.fixture(scope="module")
def hand() -> EncodedData:
    """800 rows, 2 classes: the class is x0 XOR x1 (x1 30% noisy), so only their join is
    informative; x2 weak; x3 half a copy of x0, half a noisy class (dependent on {x0, x1}
    given the class); x4 a noisy copy of x2; x5 noise."""
    rng = np.random.default_rng(1)
    m = 800
    y = rng.integers(0, 2, m)

    def noisy(v, p, k=2):
        return np.where(rng.random(m) < p, rng.integers(0, k, m), v)

    a = rng.integers(0, 2, m)
    x1 = noisy(a ^ y, 0.3)
    x2 = noisy(y, 0.7)
    x3 = np.where(rng.random(m) < 0.5, a, noisy(y, 0.5))
    x4 = noisy(x2, 0.3)
    x5 = rng.integers(0, 3, m)
    cards = [2, 2, 2, 2, 2, 3]
    variables = tuple(Variable(f"x{i}", tuple(map(str, range(c)))) for i, c in enumerate(cards))
    variables += (Variable("class", ("0", "1"), CLASS),)
    X = np.stack([a, x1, x2, x3, x4, x5], axis=1).astype(np.int32)
    return EncodedData(variables, X, y.astype(np.int64), 0, "hand")


def columns(data, names):
    index = {v.name: i for i, v in enumerate(data.features)}
    return tuple(index[n] for n in names)


def assert_cliques(data, parents, groups, arcs=()):
    """Each group (column order) is a clique under the class; an arc adds the parent group."""
    names = [v.name for v in data.features]
    assert parents["class"] == ()
    above = {child: parent for parent, child in arcs}
    assert sorted(n for n in parents if n != "class") == sorted(names[i] for g in groups for i in g)
    for g, members in enumerate(groups):
        assert list(members) == sorted(members)
        from_parent = [names[i] for i in groups[above[g]]] if g in above else []
        for t, i in enumerate(members):
            assert list(parents[names[i]]) == ["class", *from_parent, *(names[j] for j in members[:t])]


# ------------------------------------------------------------------ BSEJ


def candidates(groups):
    """Every BSEJ move from ``groups``: removals, then joins."""
    for g, members in enumerate(groups):
        for i in members:
            yield ("remove", i), canonical([*groups[:g], [j for j in members if j != i], *groups[g + 1 :]])
    for a, b in itertools.combinations(range(len(groups)), 2):
        yield ("join", a, b), canonical([*(x for k, x in enumerate(groups) if k not in (a, b)), groups[a] + groups[b]])


def test_bsej_takes_the_best_strictly_improving_move_until_none_improves(hand):
    result = bsej_search(hand)
    score = CrossValidatedAccuracy(hand)  # the same folds (seed 0) as the search's
    groups = canonical((i,) for i in range(len(hand.features)))
    assert result.trace[0]["score"] == score(grouped_parents(hand, groups))  # starts from the naive Bayes
    for step in result.trace[1:]:
        options = [(score(grouped_parents(hand, state)), move, state) for move, state in candidates(groups)]
        best = max(v for v, _, _ in options)
        value, move, state = next(o for o in options if o[0] == best)  # the first of the best
        previous = score(grouped_parents(hand, groups))
        assert step["score"] == best > previous
        if step["op"] == "remove":
            assert move == ("remove", columns(hand, [step["feature"]])[0])
        else:
            assert move[0] == "join" and [columns(hand, g) for g in step["groups"]] == [
                groups[move[1]],
                groups[move[2]],
            ]
        groups = state
    assert groups == result.state
    assert all(score(grouped_parents(hand, s)) <= result.score for _, s in candidates(groups))
    assert len(result.trace) > 2


def test_bsej_joins_the_xor_pair_into_a_clique(hand):
    learned = bsej(hand)
    structure = learned.members[0].structure
    groups = [columns(hand, g) for g in learned.metadata["groups"]]
    assert (0, 1) in groups or any({0, 1} <= set(g) for g in groups)
    assert groups == list(canonical(groups))  # disjoint, canonical
    assert len({i for g in groups for i in g}) == sum(map(len, groups))
    assert_cliques(hand, structure.parents, groups)


def test_a_clique_is_the_joint_conditional_at_maximum_likelihood(hand):
    """At every row, the chain P(x0|c) P(x1|c,x0) P(x3|c,x0,x1) of the group's families
    (maximum likelihood) equals N(x0, x1, x3, c) / N(c)."""
    parents = grouped_parents(hand, [(0, 1, 3)])
    cols = {"class": hand.y, **{f"x{i}": hand.X[:, i] for i in (0, 1, 3)}}
    chain = np.ones(hand.n_rows)
    for name in ("x0", "x1", "x3"):
        family = [cols[v] for v in (name, *parents[name])]
        n = stats.joint_counts(family, [2] * len(family)).astype(float)
        chain *= n[tuple(family)] / n.sum(axis=0)[tuple(family[1:])]
    assert parents["x3"] == ("class", "x0", "x1")
    joint = stats.joint_counts([cols["x0"], cols["x1"], cols["x3"], hand.y], [2, 2, 2, 2]).astype(float)
    n_c = np.bincount(hand.y)
    assert np.allclose(chain, joint[hand.X[:, 0], hand.X[:, 1], hand.X[:, 3], hand.y] / n_c[hand.y])


def test_joins_beyond_the_memory_guard_are_not_candidates(hand):
    with sizing.within(sizing.TrainingLimits(max_cpt_cells=2 * 2 * 2)):  # r_S · r_C: pairs of binary features only
        groups = bsej_search(hand).state
    assert all(math.prod(hand.cards[i] for i in g) * 2 <= 8 for g in groups)


# ------------------------------------------------------------------ ASB


def passing_pairs(data, groups, alpha=0.05):
    """Pairs of groups whose test on the joined columns is reliable and rejects, with I(X_Si; X_Sj | C)."""
    joined = [stats.joint_column([data.X[:, i] for i in g], [data.cards[i] for i in g]) for g in groups]
    out = {}
    for i, j in itertools.combinations(range(len(groups)), 2):
        (xi, ri), (xj, rj) = joined[i], joined[j]
        if data.n_rows / (ri * rj * data.n_classes) < 5:
            continue
        t = stats.conditional_independence_test(xi, xj, data.y, ri, rj, data.n_classes, alpha)
        assert t.reliable == (t.n / (ri * rj * data.n_classes) >= 5)
        if t.rejects_independence:
            out[(i, j)] = stats.conditional_mutual_information(xi, xj, data.y, ri, rj, data.n_classes)
    return out, joined


def check_forest(data, groups, forest, alpha=0.05):
    edges, joined = passing_pairs(data, groups, alpha)
    assert forest.edges == pytest.approx(edges)
    undirected = {(min(a, b), max(a, b)) for a, b in forest.arcs}
    assert undirected <= set(edges)  # only pairs whose test passed
    assert len({child for _, child in forest.arcs}) == len(forest.arcs)  # one parent group at most
    k = len(groups)
    graph = np.zeros((k, k))
    for (i, j), w in edges.items():
        graph[i, j] = 10.0 - w  # maximum weight = minimum of (10 - w); I < 10 nats here
    assert len(undirected) == k - connected_components(graph, directed=False)[0]
    best = minimum_spanning_tree(graph).toarray()
    assert sum(edges[e] for e in undirected) == pytest.approx(float(np.sum(10.0 - best[best > 0])))
    mi = [stats.mutual_information(x, data.y, r, data.n_classes) for x, r in joined]
    parent = {child: p for p, child in forest.arcs}
    for g in parent:
        root = g
        while root in parent:
            root = parent[root]
        assert root in forest.roots and mi[root] >= mi[g] - 1e-12
    return undirected


def test_augmenting_forest_over_joined_groups_of_chess(chess):
    groups = canonical((2 * i, 2 * i + 1) for i in range(18))  # 18 groups of two features
    forest = augmenting_forest(chess, groups)
    assert len(check_forest(chess, groups, forest)) > 5
    parents = grouped_parents(chess, groups, forest.arcs)
    assert_cliques(chess, parents, groups, forest.arcs)  # every member of S_i a parent of every member of S_j


def test_an_unreliable_pair_gets_no_edge_however_dependent(chess):
    groups = [(0, 1, 2, 3, 4), (5, 6, 7, 8), (9,)]  # 32 x 16 x 2 cells: 3196 rows are 3.1 per cell
    joined = [stats.joint_column([chess.X[:, i] for i in g], [chess.cards[i] for i in g]) for g in groups]
    test = stats.conditional_independence_test(joined[0][0], joined[1][0], chess.y, 32, 16, 2)
    assert not test.reliable and test.p_value < 1e-50  # strongly dependent, but the test is unreliable
    forest = augmenting_forest(chess, groups)
    assert (0, 1) not in forest.edges and forest.tested == 2
    assert set(forest.edges) <= {(0, 2), (1, 2)} and len(forest.arcs) == len(forest.edges)


def test_asb_is_bsej_plus_a_forest_over_its_groups(hand):
    learned_bsej, learned = bsej(hand), asb(hand, 0.05)
    groups = [columns(hand, g) for g in learned.metadata["groups"]]
    assert learned.metadata["groups"] == learned_bsej.metadata["groups"]
    forest = augmenting_forest(hand, groups)
    assert check_forest(hand, groups, forest)  # the data give at least one arc
    assert [[columns(hand, a), columns(hand, b)] for a, b in learned.metadata["forest"]["arcs"]] == [
        [groups[a], groups[b]] for a, b in forest.arcs
    ]
    assert any(len(groups[a]) > 1 for a, _ in forest.arcs)  # an arc out of a joined group
    assert_cliques(hand, learned.members[0].structure.parents, groups, forest.arcs)


def test_asb_adds_no_arc_at_a_tiny_alpha(hand):
    learned = asb(hand, 1e-300)
    assert learned.metadata["forest"]["arcs"] == []
    assert learned.members[0].structure.parents == bsej(hand).members[0].structure.parents


def test_grouped_parents_refuses_two_parent_groups(hand):
    with pytest.raises(ValueError, match="second or own parent"):
        grouped_parents(hand, [(0,), (1,), (2,)], [(0, 2), (1, 2)])


# ------------------------------------------------------------------ models and paper figures


@pytest.mark.parametrize("algo", ["bsej", "asb"])
def test_learners_give_valid_models(hand, algo):
    model = fit(algo, hand)
    assert model.validate() is model and model.algorithm == algo
    proba = compile_model(model).predict_proba(hand.X)
    assert proba.shape == (hand.n_rows, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert model.metadata["search"]["moves"][0]["op"] == "start"


def test_asb_paper_figure_on_car():
    # paper 003, Table 3, car: ASB 93.3 ± 1.6 (5 x 5-fold CV); one 5-fold CV here. BSEJ's
    # 90.0 ± 1.8 is not reproduced (ours: 93.6 ± 0.9 over 5 x 5 folds), so it is not asserted.
    assert cross_validate("asb", dataset("car"), folds=5, seed=0).accuracy == pytest.approx(0.933, abs=0.016)
