"""Numeric columns end to end: `trainer fit` on an ARFF file with numeric and nominal
columns and missing values, `server serve`, and Predict with the raw values a calling
service holds.

The server must give the same probabilities as the trainer's own evaluation path
(``load_with`` + the compiled model) on the same raw rows.
"""

from __future__ import annotations

import subprocess

import grpc
import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.model import NUMERIC
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import load_with
from tests.data_helpers import dataset_rows, write_arff
from tests.e2e.serving import BIN, free_port, run_cli, wait_serving


@pytest.fixture
def hepatitis_served(store_url, tmp_path):
    path = write_arff("hepatitis", tmp_path / "hepatitis.arff")
    fit = run_cli(
        "trainer", "fit", "--algo", "kdb", "--k", "2", "--data", str(path), "--name", "hep", "--store", store_url
    )
    assert fit.returncode == 0, fit.stderr
    port = free_port()
    proc = subprocess.Popen(
        [
            str(BIN / "server"),
            "serve",
            "--store",
            store_url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            "-1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        wait_serving(channel)
        yield path, ModelStore(store_url).load("hep").model, predictor_pb2_grpc.PredictorStub(channel)
    finally:
        channel.close()
        proc.kill()
        proc.wait(timeout=10)


def test_raw_numeric_requests_match_the_trainers_evaluation(hepatitis_served):
    path, model, stub = hepatitis_served
    numeric = [v.name for v in model.features if v.kind == NUMERIC]
    assert {"AGE", "BILIRUBIN", "ALBUMIN", "PROTIME"} <= set(numeric)
    assert model.metadata["preprocessing"]["discretization"]["PROTIME"] == "mdl"

    expected = compile_model(model).predict_proba(load_with(str(path), model.variables).X)
    rows = dataset_rows("hepatitis")  # the same rows as text
    features = [v.name for v in model.features]

    # the raw text of the file, numbers and labels alike; empty = missing
    instances = [pb.Instance(values={n: r[n] for n in features if r[n] != ""}) for r in rows]
    reply = stub.Predict(pb.PredictRequest(model="hep", instances=instances))
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)

    # numbers as doubles, labels as text
    instances = [
        pb.Instance(
            values={n: r[n] for n in features if r[n] != "" and n not in numeric},
            numbers={n: float(r[n]) for n in numeric if r[n] != ""},
        )
        for r in rows
    ]
    reply = stub.Predict(pb.PredictRequest(model="hep", instances=instances))
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)

    # a dense batch of raw values: numbers, nominal state codes, NaN = missing
    variables = {v.name: v for v in model.features}
    values = [
        np.nan if r[n] == "" else float(r[n]) if n in numeric else float(variables[n].code_of(r[n]))
        for r in rows
        for n in features
    ]
    reply = stub.Predict(pb.PredictRequest(model="hep", dense=pb.DenseBatch(features=features, values=values)))
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)

    # values beyond the training range fall in the edge intervals
    low = stub.Predict(pb.PredictRequest(model="hep", instances=[pb.Instance(numbers={"PROTIME": -1e9})]))
    first = pb.Instance(values={"PROTIME": variables["PROTIME"].states[0]})
    same = stub.Predict(pb.PredictRequest(model="hep", instances=[first]))
    assert list(low.predictions[0].probabilities) == list(same.predictions[0].probabilities)

    # text that is neither a state nor a number is refused, naming the feature
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(pb.PredictRequest(model="hep", instances=[pb.Instance(values={"AGE": "old"})]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'AGE'" in err.value.details()
