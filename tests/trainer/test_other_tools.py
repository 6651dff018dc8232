"""Other tools read the files we write: pgmpy 1.1.2 and pyAgrum 3.3.1 (pinned in the test
extra) load our XMLBIF and BIF exports, and their exact inference (pgmpy's variable
elimination, pyAgrum's LazyPropagation) gives P(class | evidence) equal to our compiled
predictor's, for evidence with some features observed and the others missing.

What is proved, per reader, on a nominal model fitted on car (KDB, k = 2), a random DAG
whose class has parents, a numeric model fitted on hepatitis (KDB, k = 2, MDL intervals,
some columns a single interval) and a random model with numeric features:

- XMLBIF: both tools read every model, posteriors within 3e-15 of ours.
- BIF, pgmpy: nominal models within 3e-15; interval labels (they contain parentheses)
  are misread: the reader fails, or returns a network whose rows for those labels are
  zero, which only its ``check_model`` notices.
- BIF, pyAgrum: only plain identifiers as labels (car's); it rounds the probabilities
  it reads, so posteriors agree to 1e-7, not to 1e-10. Interval labels, labels with
  ``:`` (the random models') and a variable with a single state are refused.

So XMLBIF is the portable format for models with numeric variables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bnserve.store.model import CLASS, FEATURE, NUMERIC, Model, Network, Node, Variable
from bnserve.store.model.discretization import interval_labels
from bnserve.store.predictor import compile_model
from bnserve.trainer.fit import fit
from bnserve.trainer.formats import write_model
from tests.data_helpers import dataset
from tests.model_factory import random_model
from tests.tools import require_module

pgmpy_readwrite = require_module("pgmpy.readwrite")
pgmpy_inference = require_module("pgmpy.inference")
gum = require_module("pyagrum")

EXACT = 3e-15  # measured: at most 6.7e-16 on these rows (1.2e-15 on other random evidence)
PYAGRUM_BIF = 1e-7  # measured: 3.8e-8 on car
NOMINAL = ("car-kdb", "random-dag")
WITH_NUMERIC = ("hepatitis-kdb", "random-numeric")


@pytest.fixture(scope="module")
def models() -> dict[str, Model]:
    return {
        "car-kdb": fit("kdb", dataset("car"), k=2),
        "random-dag": random_model(np.random.default_rng(3), n_features=6, cardinalities=(2, 4)),
        "hepatitis-kdb": fit("kdb", dataset("hepatitis"), k=2),
        "random-numeric": random_model(np.random.default_rng(9), n_features=6, numeric=0.5),
    }


def export(tmp_path: Path, model: Model, fmt: str) -> Path:
    """Our export of ``model``; pyAgrum knows XMLBIF by the extension .bifxml only."""
    path = tmp_path / f"model.{'bifxml' if fmt == 'xmlbif' else fmt}"
    path.write_text(write_model(model, fmt, "bnserve"))
    return path


def evidence_codes(model: Model, rows: int = 150) -> np.ndarray:
    """Codes (rows × features), -1 = missing: nothing observed, everything observed, and
    random rows with about 40 % missing."""
    rng = np.random.default_rng(11)
    cards = np.array([v.cardinality for v in model.features])
    codes = (rng.random((rows, len(cards))) * cards).astype(np.int32)
    codes[rng.random(codes.shape) < 0.4] = -1
    codes[0] = -1
    codes[1] = (rng.random(len(cards)) * cards).astype(np.int32)
    return codes


def evidence(model: Model, row: np.ndarray) -> dict[str, str]:
    return {v.name: v.states[k] for v, k in zip(model.features, row) if k >= 0}


def pgmpy_posteriors(network, model: Model, codes: np.ndarray) -> np.ndarray:
    engine = pgmpy_inference.VariableElimination(network)
    cls = model.class_variable
    out = []
    for row in codes:
        factor = engine.query([cls.name], evidence=evidence(model, row), show_progress=False)
        names = list(factor.state_names[cls.name])
        out.append([factor.values[names.index(s)] for s in cls.states])
    return np.array(out)


def pyagrum_posteriors(path: Path, model: Model, codes: np.ndarray) -> np.ndarray:
    network = gum.loadBN(str(path))
    engine = gum.LazyPropagation(network)
    cls = model.class_variable
    labels = list(network.variable(cls.name).labels())
    out = []
    for row in codes:
        engine.eraseAllEvidence()
        engine.setEvidence(evidence(model, row))
        engine.makeInference()
        values = engine.posterior(cls.name).tolist()
        out.append([values[labels.index(s)] for s in cls.states])
    return np.array(out)


def largest_difference(theirs: np.ndarray, model: Model, codes: np.ndarray) -> float:
    ours = compile_model(model).predict_proba(codes)
    assert theirs.shape == ours.shape
    return float(np.abs(theirs - ours).max())


@pytest.mark.parametrize("name", NOMINAL + WITH_NUMERIC)
def test_pgmpy_reads_our_xmlbif_with_our_posteriors(tmp_path, models, name):
    model = models[name]
    network = pgmpy_readwrite.XMLBIFReader(str(export(tmp_path, model, "xmlbif"))).get_model()
    assert network.check_model()
    codes = evidence_codes(model)
    assert largest_difference(pgmpy_posteriors(network, model, codes), model, codes) <= EXACT


@pytest.mark.parametrize("name", NOMINAL + WITH_NUMERIC)
def test_pyagrum_reads_our_xmlbif_with_our_posteriors(tmp_path, models, name):
    model = models[name]
    codes = evidence_codes(model)
    theirs = pyagrum_posteriors(export(tmp_path, model, "xmlbif"), model, codes)
    assert largest_difference(theirs, model, codes) <= EXACT


@pytest.mark.parametrize("name", NOMINAL)
def test_pgmpy_reads_our_bif_of_a_nominal_model_with_our_posteriors(tmp_path, models, name):
    model = models[name]
    network = pgmpy_readwrite.BIFReader(str(export(tmp_path, model, "bif"))).get_model()
    assert network.check_model()
    codes = evidence_codes(model)
    assert largest_difference(pgmpy_posteriors(network, model, codes), model, codes) <= EXACT


@pytest.mark.parametrize("name", WITH_NUMERIC)
def test_pgmpy_cannot_read_interval_labels_in_bif(tmp_path, models, name):
    path = export(tmp_path, models[name], "bif")
    with pytest.raises(ValueError):
        pgmpy_readwrite.BIFReader(str(path)).get_model().check_model()


def test_pgmpy_drops_the_bif_rows_of_interval_labels_without_a_word(tmp_path):
    """The smallest case: class | x, x numeric. pgmpy's BIF reader returns the class's
    table with the row for "(1.5-inf)" all zero; its XMLBIF reader gets it right."""
    x = Variable("x", interval_labels((1.5,)), FEATURE, NUMERIC, (1.5,))
    cls = Variable("class", ("no", "yes"), CLASS)
    table = np.array([[0.9, 0.2], [0.1, 0.8]])
    model = Model(
        variables=(cls, x),
        networks=(Network((Node("x", (), np.array([0.3, 0.7])), Node("class", ("x",), table))),),
        algorithm="hand",
        combination="single",
        params={},
        metadata={},
    ).validate()
    assert x.states == ("(-inf-1.5]", "(1.5-inf)")
    read = pgmpy_readwrite.BIFReader(str(export(tmp_path, model, "bif"))).get_model()
    assert read.get_cpds("class").values.tolist() == [[0.9, 0.0], [0.1, 0.0]]
    with pytest.raises(ValueError, match="not equal to 1"):
        read.check_model()
    read = pgmpy_readwrite.XMLBIFReader(str(export(tmp_path, model, "xmlbif"))).get_model()
    assert read.get_cpds("class").values.tolist() == table.tolist()


def test_pyagrum_reads_our_bif_of_plain_identifiers_rounded(tmp_path, models):
    model = models["car-kdb"]  # labels such as vhigh, 5more, 2
    codes = evidence_codes(model)
    difference = largest_difference(pyagrum_posteriors(export(tmp_path, model, "bif"), model, codes), model, codes)
    assert 1e-10 < difference <= PYAGRUM_BIF, difference


@pytest.mark.parametrize(
    "name, refusal",
    [
        ("random-dag", "Syntax error"),  # labels such as f0:s1
        ("random-numeric", "Syntax error"),  # interval labels, quoted
        ("hepatitis-kdb", "Not enough modalities"),  # a column MDL left as one interval
    ],
)
def test_pyagrum_refuses_our_bif_unless_every_label_is_a_plain_identifier(tmp_path, models, name, refusal):
    with pytest.raises(gum.GumException, match=refusal):
        gum.loadBN(str(export(tmp_path, models[name], "bif")))
