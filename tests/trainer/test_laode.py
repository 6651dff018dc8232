"""laode: AODE's SPODEs pooled by product. With a generative estimator it is their geometric
mean; with alr one logistic regression over every pair of features, which learns monks-2's
concept ("exactly two attributes take their first value") that no mean of SPODEs holds."""

import itertools

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, PRODUCT_JOINT, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.fit import fit
from bnserve.trainer.learners import pooled
from tests.reference import reference_proba

MONKS_CARDS = (3, 3, 2, 3, 4, 2)  # the six attributes of the MONK's problems


def monks_2() -> EncodedData:
    """All 432 attribute combinations; class 1 where exactly two attributes are 0."""
    X = np.array(list(itertools.product(*(range(k) for k in MONKS_CARDS))), dtype=np.int32)
    y = ((X == 0).sum(axis=1) == 2).astype(np.int64)
    variables = (
        *(Variable(f"a{i}", tuple(str(s) for s in range(k))) for i, k in enumerate(MONKS_CARDS)),
        Variable("class", ("no", "yes"), CLASS),
    )
    return EncodedData(variables, X, y, source="monks-2")


def halves(data: EncodedData) -> tuple[EncodedData, EncodedData]:
    train = np.random.default_rng(0).permutation(data.n_rows) % 2 == 0
    return data.subset(train), data.subset(~train)


def accuracy(model, test: EncodedData) -> float:
    return float((compile_model(model).predict_proba(test.X).argmax(axis=1) == test.y).mean())


def test_alr_learns_the_pairwise_concept_that_aode_misses():
    """Trained on half of the 432 rows, tested on the other half: the pooled logistic
    regression over feature pairs gets 94 % right (100 % with a weaker pull to the start,
    alr:0.1); AODE with each SPODE's weights fitted alone (60 %) and laode's generative
    geometric mean (64 %) stay below the majority class (72 %)."""
    train, test = halves(monks_2())
    majority = max(test.y.mean(), 1 - test.y.mean())
    assert accuracy(fit("laode", train, "alr"), test) >= 0.9
    assert accuracy(fit("laode", train, "alr:0.1"), test) == 1.0
    assert accuracy(fit("aode", train, "alr"), test) < majority
    assert accuracy(fit("laode", train), test) < majority


def test_generative_laode_is_the_geometric_mean_of_the_spodes():
    """On complete rows, P(c | x) of laode (Laplace) is the softmax of the mean over SPODEs of
    log P_m(c, x): the 1/m scaling and the return to CPTs (``to_cpts``) change no posterior.
    (A missing value is summed out of each rescaled member, which is not the geometric mean
    of the sums: there the served model is the product of its members, as the reference.)"""
    data = monks_2()
    rows = data.X[::7]
    joints = compile_model(fit("aode", data)).network_log_joints(rows)  # exact, for mean_joint
    mean = joints.mean(axis=1)
    want = np.exp(mean - mean.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    model = fit("laode", data)
    assert model.combination == PRODUCT_JOINT and len(model.networks) == len(MONKS_CARDS)
    np.testing.assert_allclose(compile_model(model).predict_proba(rows), want, rtol=0, atol=1e-12)
    missing = rows[:12].copy()
    missing[::2, 1] = -1
    missing[1::3, 4] = -1
    np.testing.assert_allclose(
        compile_model(model).predict_proba(missing), reference_proba(model, missing), rtol=0, atol=1e-12
    )


def test_the_joint_fit_is_refused_past_its_size_with_the_figures(monkeypatch):
    monkeypatch.setattr(pooled, "MAX_DESIGN_ENTRIES", 1000)
    with pytest.raises(InvalidInput, match=r"432 rows x 42 tables is 18,144 entries"):
        fit("laode", monks_2(), "alr")
