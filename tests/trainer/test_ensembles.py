"""AODE is the mean joint of the n SPODEs; RTAN is B TANs on seeded bootstrap samples."""

import itertools

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, MEAN_JOINT, MEAN_POSTERIOR, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import cross_validate
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.ensembles import aode, bootstrap_samples, rtan
from bnserve.trainer.learners.tan import tan


@pytest.fixture(scope="module")
def small() -> EncodedData:
    """60 rows, features of 2, 3 and 2 states that depend on each other and on a 3-state
    class, with a few missing values (available-case counts must match the reference)."""
    rng = np.random.default_rng(7)
    m = 60
    y = rng.integers(0, 3, m)
    a = (y + rng.integers(0, 2, m)) % 2
    b = (a + y + rng.integers(0, 2, m)) % 3
    c = (b + rng.integers(0, 2, m)) % 2
    X = np.stack([a, b, c], axis=1).astype(np.int32)
    X[[3, 17, 40], [0, 1, 2]] = -1
    X[25, [0, 2]] = -1
    variables = (
        Variable("a", ("a0", "a1")),
        Variable("b", ("b0", "b1", "b2")),
        Variable("c", ("c0", "c1")),
        Variable("class", ("x", "y", "z"), CLASS),
    )
    return EncodedData(variables, X, y.astype(np.int64), source="small")


def all_rows(data: EncodedData) -> np.ndarray:
    """Every combination of codes, -1 (missing) included: (prod(card + 1), n)."""
    return np.array(list(itertools.product(*(range(-1, k) for k in data.cards))), dtype=np.intp)


def direct_aode_joint(data: EncodedData, row: np.ndarray) -> np.ndarray:
    """(classes,) mean over super-parents p of P(c) P(x_p | c) prod_{i != p, observed} P(x_i | c, x_p),
    from counts, Laplace-smoothed over the rows where the counted variables are present;
    a missing x_p is summed over its values."""
    X, y, cards = data.X, data.y, data.cards

    def prior(c):
        return (np.sum(y == c) + 1) / (len(y) + data.n_classes)

    def given_class(p, v, c):  # P(x_p = v | c)
        known = (y == c) & (X[:, p] >= 0)
        return (np.sum(known & (X[:, p] == v)) + 1) / (np.sum(known) + cards[p])

    def given_parent(i, u, c, p, v):  # P(x_i = u | c, x_p = v)
        known = (y == c) & (X[:, p] == v) & (X[:, i] >= 0)
        return (np.sum(known & (X[:, i] == u)) + 1) / (np.sum(known) + cards[i])

    joint = np.zeros(data.n_classes)
    for c in range(data.n_classes):
        for p in range(len(cards)):
            values = [row[p]] if row[p] >= 0 else range(cards[p])
            for v in values:
                term = prior(c) * given_class(p, v, c)
                for i in range(len(cards)):
                    if i != p and row[i] >= 0:
                        term *= given_parent(i, row[i], c, p, v)
                joint[c] += term
    return joint / len(cards)


# ------------------------------------------------------------------ AODE


def test_aode_members_are_the_n_spodes(small):
    learned = aode(small)
    assert learned.combination == MEAN_JOINT
    names = [v.name for v in small.features]
    assert len(learned.members) == len(names)
    for p, member in enumerate(learned.members):
        assert member.data is small  # every member's CPTs come from all the rows
        parents = member.structure.parents
        assert parents["class"] == ()
        assert parents[names[p]] == ("class",)
        others = [n for n in names if n != names[p]]
        assert {n: parents[n] for n in others} == dict.fromkeys(others, ("class", names[p]))
        assert member.structure.order[0] == names[p]
    assert learned.metadata["super_parents"] == names


def test_aode_predicts_the_direct_formula(small):
    model = fit("aode", small)
    rows = all_rows(small)  # every value combination, with every missing pattern
    joints = np.array([direct_aode_joint(small, r) for r in rows])
    compiled = compile_model(model)
    # mean_joint keeps exact joints: the log score is the log of the mean joint itself
    assert np.allclose(compiled.predict_log_joint(rows), np.log(joints), rtol=0, atol=1e-12)
    assert np.allclose(compiled.predict_proba(rows), joints / joints.sum(axis=1, keepdims=True), rtol=0, atol=1e-12)


def test_aode_without_features_is_the_class_prior(small):
    data = EncodedData(small.variables[-1:], np.zeros((small.n_rows, 0), np.int32), small.y, source="small")
    model = fit("aode", data)
    counts = np.bincount(small.y, minlength=3)
    expected = (counts + 1) / (counts.sum() + 3)
    assert np.allclose(compile_model(model).predict_proba(np.zeros((2, 0), np.intp)), expected)


# ------------------------------------------------------------------ RTAN


def test_bootstrap_samples_are_seeded_draws_with_replacement():
    a = bootstrap_samples(100, 4, seed=3)
    assert a.shape == (4, 100) and a.min() >= 0 and a.max() < 100
    assert np.array_equal(a, bootstrap_samples(100, 4, seed=3))
    assert not np.array_equal(a, bootstrap_samples(100, 4, seed=4))
    assert all(len(np.unique(s)) < 100 for s in a)  # with replacement: ~63% distinct rows
    assert len({s.tobytes() for s in a}) == 4
    assert bootstrap_samples(0, 3, seed=0).shape == (3, 0)


def test_rtan_members_are_tans_on_their_bootstrap_samples(chess):
    learned = rtan(chess, members=4, sample_seed=5)
    assert learned.combination == MEAN_POSTERIOR
    assert len(learned.members) == 4
    samples = bootstrap_samples(chess.n_rows, 4, 5)
    for rows, member in zip(samples, learned.members):
        assert np.array_equal(member.data.X, chess.X[rows]) and np.array_equal(member.data.y, chess.y[rows])
        assert member.data.variables == chess.variables
        assert member.structure == tan(member.data)  # structure learned on the sample, not the whole data
    distinct = {tuple(sorted(m.structure.parents.items())) for m in learned.members}
    assert len(distinct) > 1, "bootstrap samples of chess should give different trees"
    assert learned.metadata["member_orders"] == [list(m.structure.order) for m in learned.members]


def test_rtan_is_deterministic_for_a_seed(small):
    one, two, other = rtan(small, 3, 1), rtan(small, 3, 1), rtan(small, 3, 2)
    for a, b in zip(one.members, two.members):
        assert a.structure == b.structure and np.array_equal(a.data.X, b.data.X)
    assert any(not np.array_equal(a.data.X, b.data.X) for a, b in zip(one.members, other.members))


def test_rtan_averages_its_members_posteriors(small):
    model = fit("rtan", small, members=3, sample_seed=2)
    rows = all_rows(small)
    singles = [
        compile_model(fit("tan", small.subset(s))).predict_proba(rows) for s in bootstrap_samples(small.n_rows, 3, 2)
    ]
    assert np.allclose(compile_model(model).predict_proba(rows), np.mean(singles, axis=0), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"members": 0}, "members must be a positive integer"),
        ({"members": 2.5}, "members must be a positive integer"),
        ({"sample_seed": -1}, "sample_seed must be a non-negative integer"),
        ({"k": 2}, "takes no k"),
    ],
)
def test_rtan_refuses_bad_parameters(small, params, match):
    with pytest.raises(InvalidInput, match=match):
        fit("rtan", small, **params)


# ------------------------------------------------------------------ both


@pytest.mark.parametrize(
    "algo, params, networks",
    [
        ("aode", {}, 36),
        ("rtan", {"members": 3, "sample_seed": 0}, 3),
        ("rtan", {}, 10),
    ],
)
def test_fit_gives_valid_models_that_predict_distributions(chess, algo, params, networks):
    model = fit(algo, chess, **params)
    assert model.validate() is model
    assert model.algorithm == algo and len(model.networks) == networks
    assert dict(model.params) == ({} if algo == "aode" else {"members": 10, "sample_seed": 0, **params})
    rows = chess.X[::50].astype(np.intp)
    rows[::3, ::5] = -1
    proba = compile_model(model).predict_proba(rows)
    assert proba.shape == (rows.shape[0], 2)
    assert np.all(proba >= 0) and np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_chess_accuracy_aode_beats_nb_and_rtan_matches_tan(chess):
    """5-fold CV, seed 0, to keep the test short (measured: nb 0.878, aode 0.911, tan 0.922,
    rtan 0.930; 10-fold: 0.880, 0.911, 0.925, 0.931). Paper 001 ranks RTAN above TAN on
    average over its data sets (Table 2's per-set figures are not in our text copy); AODE
    is a strong baseline well above NB."""
    score = {algo: cross_validate(algo, chess, folds=5, seed=0) for algo in ("nb", "aode", "tan", "rtan")}
    assert score["aode"].accuracy > score["nb"].accuracy + 0.02
    assert score["aode"].log_loss < score["nb"].log_loss
    assert 0.90 < score["aode"].accuracy < 0.93
    assert score["rtan"].accuracy >= score["tan"].accuracy - score["tan"].accuracy_std / 2
    assert score["rtan"].log_loss <= score["tan"].log_loss
