"""Every registered learner fits, publishes into the store, and is served over gRPC with
the probabilities its CPTs give. New learners are picked up from the registry."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.predictor import compile_model
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.registry import LEARNERS
from tests.data_helpers import dataset
from tests.in_process_server import running_app


@pytest.fixture(scope="module")
def car():
    return dataset("car")  # shipped in tests/data


@pytest.fixture(scope="module")
def served(car, tmp_path_factory):
    """Every learner's model on car, published and served by one in-process server."""
    models = {algo: fit(algo, car) for algo in LEARNERS}
    with running_app(tmp_path_factory.mktemp("store"), models, ready_seconds=60) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield models, predictor_pb2_grpc.PredictorStub(channel)


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_learner_is_published_and_served(served, car, algo):
    models, stub = served
    model = models[algo]
    rows = car.X[::37]
    expected = compile_model(model).predict_proba(rows)
    names = [v.name for v in car.features]
    reply = stub.Predict(
        pb.PredictRequest(model=algo, dense=pb.DenseBatch(features=names, codes=rows.ravel().tolist()))
    )
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)
    meta = stub.GetModelMetadata(pb.GetModelMetadataRequest(model=algo))
    assert meta.algorithm == algo and meta.combination == model.combination
    accuracy = np.mean(compile_model(model).predict_proba(car.X).argmax(axis=1) == car.y)
    majority = np.bincount(car.y).max() / car.n_rows
    assert accuracy >= majority  # at worst a selective learner keeps no feature and predicts the prior
