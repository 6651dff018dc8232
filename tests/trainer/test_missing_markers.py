"""Missing markers users expect (issue 26, item 1): files exported from R (``NA``, ``NaN``)
and pandas (the empty text) train with default flags into numeric columns, not nominal
ones of hundreds of states; the model records its markers, and batch scoring and a real
server read ``NA`` as the training file was read (a missing value, marginalised). Models
without the record keep the old marker, ``?``."""

from __future__ import annotations

import csv
import dataclasses
import io

import grpc
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidInput
from bnserve.store.model import MISSING, NOMINAL, NUMERIC, UNKNOWN
from bnserve.store.model.markers import DEFAULT_MISSING_MARKERS, recorded_markers
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.encoded import load_with
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from bnserve.trainer.scoring import as_trained
from tests.in_process_server import running_app
from tests.trainer.conftest import run
from tests.trainer.test_streaming import assert_same_model

NUMERIC_COLUMNS = ("Seniority", "Time", "Income", "Assets")


def _credit(n: int, seed: int) -> pd.DataFrame:
    """A credit-scoring frame: numeric columns with missing values (NaN), a nominal one with
    None, and the class; Income and Home tell the classes apart."""
    rng = np.random.default_rng(seed)
    bad = rng.random(n) < 0.3
    income = np.round(rng.normal(np.where(bad, 90, 160), 30), 1)
    frame = pd.DataFrame(
        {
            "Seniority": rng.integers(0, 40, n).astype(float),
            "Home": np.where(
                rng.random(n) < np.where(bad, 0.7, 0.2), "rent", rng.choice(["owner", "parents", "other"], n)
            ),
            "Time": rng.choice(np.arange(6, 66, 6), n).astype(float),
            "Income": income,
            "Assets": np.round(rng.gamma(2, 3000, n)),
            "Status": np.where(bad, "bad", "good"),
        }
    )
    for column, share in (("Seniority", 0.02), ("Income", 0.08), ("Assets", 0.05)):
        frame.loc[rng.random(n) < share, column] = np.nan
    frame["Home"] = frame["Home"].astype(object)
    frame.loc[rng.random(n) < 0.03, "Home"] = None
    return frame


def _r_csv(frame: pd.DataFrame) -> str:
    """The frame as R's ``write.csv(df, row.names = FALSE)`` writes it: a quoted header, quoted
    texts, numbers as R prints them (30, not 30.0), missing as ``NA``, a numeric NaN as ``NaN``."""
    out = io.StringIO()
    out.write(",".join(f'"{c}"' for c in frame.columns) + "\n")
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for value in row:
            if value is None or (isinstance(value, float) and np.isnan(value)):
                cells.append("NaN" if i % 17 == 0 and isinstance(value, float) else "NA")
            elif isinstance(value, str):
                cells.append(f'"{value}"')
            else:
                cells.append(format(value, "g") if value != int(value) else str(int(value)))
        out.write(",".join(cells) + "\n")
    return out.getvalue()


@pytest.fixture
def exported(tmp_path):
    """(R export, pandas export, an R-style file to score), all of the same kind of rows."""
    train, test = _credit(800, 0), _credit(120, 1)
    r_path, pandas_path, test_path = tmp_path / "credit_r.csv", tmp_path / "credit_pandas.csv", tmp_path / "new.csv"
    r_path.write_text(_r_csv(train))
    train.to_csv(pandas_path, index=False)  # NaN and None as "", 30.0 for 30
    test_path.write_text(_r_csv(test))
    assert "NA" in r_path.read_text() and "NaN" in r_path.read_text()
    return r_path, pandas_path, test_path


def _kinds(store: str, name: str) -> dict[str, tuple[str, int]]:
    with ModelStore(store) as s:
        model = s.load(name).model
    return {v.name: (v.kind, v.cardinality) for v in model.variables}


@pytest.mark.parametrize("export", [0, 1], ids=["R", "pandas"])
def test_exports_train_with_numeric_columns_by_default(capsys, store, exported, export):
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", str(exported[export]), "--name", "credit", "--store", store, "--quiet"
    )
    assert code == 0, err
    kinds = _kinds(store, "credit")
    assert all(kinds[c][0] == NUMERIC for c in NUMERIC_COLUMNS), kinds
    assert kinds["Home"] == (NOMINAL, 4)  # rent, owner, parents, other: no state "NA"


def test_r_export_scores_and_serves_na_as_missing(capsys, store, exported, tmp_path):
    r_path, _, test_path = exported
    assert (
        run(capsys, "fit", "--algo", "tan", "--data", str(r_path), "--name", "credit", "--store", store, "--quiet")[0]
        == 0
    )
    out = tmp_path / "scored.csv"
    code, _, err = run(capsys, "predict", "credit", "--data", str(test_path), "--out", str(out), "--store", store)
    assert code == 0, err
    assert len(list(csv.DictReader(out.open()))) == 120

    with ModelStore(store) as s:
        model = s.load("credit").model
    assert recorded_markers(model.metadata) == DEFAULT_MISSING_MARKERS
    with running_app(tmp_path, {"credit": model}) as app, grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = predictor_pb2_grpc.PredictorStub(channel)

        def predict(values):
            reply = stub.Predict(pb.PredictRequest(model="credit", instances=[pb.Instance(values=values)]))
            return list(reply.predictions[0].probabilities)

        known = {"Seniority": "3", "Time": "48", "Assets": "5000"}
        absent = predict({**known})
        assert predict({**known, "Home": "NA", "Income": "NA"}) == absent
        assert predict({**known, "Home": "<NA>", "Income": "NaN"}) == absent
        assert predict({**known, "Home": "rent", "Income": "80"}) != absent  # the features matter


def test_old_models_keep_their_marker(tmp_path):
    """A model trained before the markers were recorded read "?" only; an imported model none."""
    model = fit("nb", load(_write(tmp_path, _r_csv(_credit(300, 2)))))
    legacy_record = {k: v for k, v in model.metadata["preprocessing"].items() if k != "na_values"}
    legacy = dataclasses.replace(model, metadata={**model.metadata, "preprocessing": legacy_record})
    imported = dataclasses.replace(model, metadata={})
    home = next(v for v in compile_model(legacy).features if v.name == "Home")
    assert (home.code_of("?"), home.code_of("NA"), home.code_of("")) == (MISSING, UNKNOWN, MISSING)
    assert as_trained(legacy, None, False, None).na_values == ("?",)
    assert recorded_markers(imported.metadata) == ()
    assert next(v for v in compile_model(imported).features if v.name == "Home").code_of("NA") == UNKNOWN
    assert next(v for v in compile_model(model).features if v.name == "Home").code_of("NA") == MISSING
    assert as_trained(model, None, False, None).na_values == DEFAULT_MISSING_MARKERS
    assert as_trained(model, (), False, None).na_values == ()  # --na-values '' at predict time


def _write(tmp_path, text: str, name: str = "credit.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_an_unknown_na_suggests_na_values(tmp_path):
    path = _write(tmp_path, _r_csv(_credit(300, 3)))
    old = load(path, preprocessing=Preprocessing(na_values=("?",)))  # read as before: "NA" is a state
    assert "NA" in old.variables[1].states
    trained = load(path)
    header = '"Seniority","Home","Time","Income","Assets","Status"\n'
    test = _write(tmp_path, header + '3,"NA",12,100,5,"bad"\n', "t.csv")
    with pytest.raises(
        InvalidInput, match=r"t.csv: line 2: column 'Home': unknown value 'NA'; .*name it in --na-values"
    ):
        load_with(test, trained.variables, preprocessing=Preprocessing(na_values=()))
    with pytest.raises(InvalidInput) as refused:  # a value no one writes for missing: no such advice
        load_with(_write(tmp_path, header + '3,"flat",12,100,5,"bad"\n', "u.csv"), trained.variables)
    assert "unknown value 'flat'" in refused.value.message and "--na-values" not in refused.value.message


def test_every_reader_takes_the_same_markers(tmp_path):
    """In memory, in chunks, in parts counted by --jobs processes, and Parquet string columns."""
    text = _r_csv(_credit(400, 4))
    path = _write(tmp_path, text)
    in_memory = load(path)
    assert in_memory.variables[2].kind == NUMERIC
    assert_same_model(fit("nb", load_streamed(path, None, Preprocessing(), None, 64)), fit("nb", in_memory))
    lines = text.splitlines(keepends=True)
    (tmp_path / "parts").mkdir()
    _write(tmp_path, "".join(lines[:200]), "parts/0.csv")
    _write(tmp_path, "".join([lines[0], *lines[200:]]), "parts/1.csv")
    in_parts = load_streamed(str(tmp_path / "parts" / "*.csv"), None, Preprocessing(), None, 64, jobs=2)
    assert in_parts.variables == in_memory.variables
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)  # every cell a text, "NA" kept
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "credit.parquet")
    from_parquet = load(str(tmp_path / "credit.parquet")).variables  # string columns: declared nominal
    assert from_parquet[1] == in_memory.variables[1] and not any("NA" in v.states for v in from_parquet)


def test_the_estimator_reads_na_in_text_columns_as_missing():
    """A frame read with keep_default_na=False (every cell a text, "NA" kept) fits the model
    the file gives, and "NA" at predict time is missing, as None is."""
    from bnserve import BayesNetClassifier

    text = _r_csv(_credit(300, 5))
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)
    X, y = frame.drop(columns="Status"), frame["Status"]
    model = BayesNetClassifier("nb").fit(X, y).model_
    kinds = {v.name: v.kind for v in model.features}
    assert all(kinds[c] == NUMERIC for c in NUMERIC_COLUMNS) and "NA" not in model.features[1].states
    row = X.iloc[:1].copy()
    row.loc[:, ["Home", "Income"]] = "NA"
    as_none = row.copy()
    as_none.loc[:, ["Home", "Income"]] = None
    estimator = BayesNetClassifier("nb").fit(X, y)
    assert estimator.predict_proba(row).tolist() == estimator.predict_proba(as_none).tolist()
