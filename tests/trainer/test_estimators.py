"""The CPT estimators (``--estimator``) against hand computations on tiny tables."""

from __future__ import annotations

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.parameters import Estimator, laplace_cpt
from tests.data_helpers import dataset_path, make
from tests.trainer.conftest import run

# N(x, pa): x has 3 states (rows), the parent 2 (columns)
COUNTS = np.array([[4.0, 0.0], [1.0, 2.0], [0.0, 0.0]])


def test_laplace_is_add_one():
    cpt = Estimator.parse("laplace").cpt(COUNTS)
    np.testing.assert_array_equal(cpt[:, 0], [5 / 8, 2 / 8, 1 / 8])
    np.testing.assert_array_equal(cpt[:, 1], [1 / 5, 3 / 5, 1 / 5])


def test_laplace_is_dirichlet_one_bit_for_bit():
    assert Estimator.parse("dirichlet:1").cpt(COUNTS).tobytes() == Estimator().cpt(COUNTS).tobytes()


def test_dirichlet_adds_alpha_per_cell():
    cpt = Estimator.parse("dirichlet:0.5").cpt(COUNTS)
    np.testing.assert_allclose(cpt[:, 0], [4.5 / 6.5, 1.5 / 6.5, 0.5 / 6.5], rtol=1e-15)
    np.testing.assert_allclose(cpt[:, 1], [0.5 / 3.5, 2.5 / 3.5, 0.5 / 3.5], rtol=1e-15)


def test_m_estimate_shrinks_towards_the_laplace_marginal():
    # marginal N(x) = 4, 3, 0 of 7 rows: p(x) = 5/10, 4/10, 1/10
    cpt = Estimator.parse("m:2").cpt(COUNTS)
    np.testing.assert_allclose(cpt[:, 0], [(4 + 1.0) / 7, (1 + 0.8) / 7, (0 + 0.2) / 7], rtol=1e-15)
    np.testing.assert_allclose(cpt[:, 1], [(0 + 1.0) / 4, (2 + 0.8) / 4, (0 + 0.2) / 4], rtol=1e-15)


def test_m_estimate_of_a_root_shrinks_towards_uniform():
    cpt = Estimator.parse("m:3").cpt(np.array([5.0, 1.0, 0.0]))
    np.testing.assert_allclose(cpt, [6 / 9, 2 / 9, 1 / 9], rtol=1e-15)


@pytest.mark.parametrize("text", ["laplace", "dirichlet:0.5", "m:2", "dirichlet:3"])
def test_every_estimate_is_a_distribution_per_parent_configuration(text):
    counts = np.random.default_rng(0).integers(0, 5, size=(4, 3, 2)).astype(float)
    cpt = Estimator.parse(text).cpt(counts)
    assert cpt.shape == counts.shape and (cpt > 0).all()
    np.testing.assert_allclose(cpt.sum(axis=0), 1.0, rtol=1e-12)


@pytest.mark.parametrize("text", ["laplace", "dirichlet:0.5", "m:2.5", "hdp", "hdp:50"])
def test_the_text_form_round_trips(text):
    assert str(Estimator.parse(text)) == text


@pytest.mark.parametrize(
    "text, message",
    [
        ("bayes", "must be one of"),
        ("laplace:2", "takes no value"),
        ("dirichlet", "needs a value"),
        ("dirichlet:x", "is not a number"),
        ("dirichlet:0", "finite positive"),
        ("m:-1", "finite positive"),
        ("m:inf", "finite positive"),
        ("hdp:0", "must be positive"),
        ("hdp:1.5", "is not a number"),
    ],
)
def test_bad_estimators_are_refused_by_name(text, message):
    with pytest.raises(InvalidInput, match=message):
        Estimator.parse(text)


def test_the_old_laplace_helper_agrees():
    x, pa = np.array([0, 0, 1, 2, 1]), np.array([1, 0, 0, 1, 1])
    counts = np.zeros((3, 2))
    np.add.at(counts, (x, pa), 1)
    np.testing.assert_array_equal(laplace_cpt([x, pa], [3, 2]), Estimator().cpt(counts))


def test_a_fit_records_its_estimator_and_uses_it_for_every_node():
    data = make([np.array([0, 1, 1, 0, 1]), np.array([1, 1, 0, 0, 0])], [2, 2], [0, 1, 1, 0, 1], 2)
    model = fit("nb", data, "dirichlet:0.5")
    assert model.metadata["estimator"] == "dirichlet:0.5"
    prior = next(n for n in model.networks[0].nodes if n.name == "class")
    np.testing.assert_allclose(prior.cpt, [2.5 / 6, 3.5 / 6])
    assert fit("nb", data).metadata["estimator"] == "laplace"


def test_the_cli_takes_an_estimator_for_fit_and_evaluate(capsys, store):
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "tan",
        "--estimator",
        "dirichlet:0.5",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store,
    )
    assert code == 0, err
    code, out, _ = run(capsys, "show", "chess", "--store", store, "--json")
    assert '"estimator": "dirichlet:0.5"' in out
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "tan",
        "--estimator",
        "dirichlet:-2",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store,
    )
    assert code == 2 and "finite positive" in err
    code, out, err = run(
        capsys, "evaluate", "--algo", "nb", "--estimator", "m:2", "--folds", "3", "--data", str(dataset_path("car"))
    )
    assert code == 0 and "estimator=m:2" in out
