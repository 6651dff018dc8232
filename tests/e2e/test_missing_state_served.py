"""A model trained with ``--missing state`` is served with a missing value as its state,
whichever way the request says "missing": an empty text, an absent feature, code -1."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import STATE, Preprocessing, load
from bnserve.trainer.fit import fit
from tests.data_helpers import dataset_path
from tests.in_process_server import running_app


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = load(str(dataset_path("hepatitis")), preprocessing=Preprocessing(missing=STATE))
    model = fit("tan", data)
    with running_app(tmp_path_factory.mktemp("store"), {"hep": model}, ready_seconds=60) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield model, predictor_pb2_grpc.PredictorStub(channel)


def test_every_form_of_missing_is_the_state(served):
    model, stub = served
    feature = next(v for v in model.features if v.missing_state)
    j = model.features.index(feature)
    row = np.full((1, len(model.features)), -1)
    row[0, j] = feature.missing_code
    expected = compile_model(model).predict_proba(row)[0]
    names = [v.name for v in model.features]
    requests = [
        pb.PredictRequest(model="hep", instances=[pb.Instance(values={feature.name: ""})]),
        pb.PredictRequest(model="hep", instances=[pb.Instance()]),
        pb.PredictRequest(model="hep", dense=pb.DenseBatch(features=names, codes=[-1] * len(names))),
        pb.PredictRequest(model="hep", dense=pb.DenseBatch(features=names, codes=row.ravel().tolist())),
    ]
    for request in requests:
        reply = stub.Predict(request)
        np.testing.assert_allclose(reply.predictions[0].probabilities, expected, rtol=0, atol=1e-12)


def test_the_metadata_says_which_features_have_the_state(served):
    model, stub = served
    meta = stub.GetModelMetadata(pb.GetModelMetadataRequest(model="hep"))
    assert {v.name for v in meta.variables if v.missing_state} == {v.name for v in model.features if v.missing_state}
    assert all(v.states[-1] == "(missing)" for v in meta.variables if v.missing_state)
