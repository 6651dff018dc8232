"""Every registered learner fits, publishes into the store, and is served over gRPC with
the probabilities its CPTs give. New learners are picked up from the registry."""

from __future__ import annotations

import pathlib

import grpc
import numpy as np
import pytest

from server.api import predictor_pb2 as pb
from server.api import predictor_pb2_grpc
from server.app import App, ServeConfig
from store.inference import compile_model
from store.sql import ModelStore
from trainer.data import load
from trainer.fit import fit
from trainer.learners.registry import LEARNERS

DATASETS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "datasets"


@pytest.fixture(scope="module")
def car():
    path = DATASETS / "car.csv"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    return load(str(path))


@pytest.fixture(scope="module")
def served(car, tmp_path_factory):
    """Every learner's model on car, published and served by one in-process server."""
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    models = {}
    with ModelStore(url) as store:
        for algo in LEARNERS:
            models[algo] = fit(algo, car)
            assert store.publish(algo, models[algo]) == 1
    app = App(ServeConfig(store_url=url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=60)).start()
    assert app.repository.wait_ready(60)
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    yield models, predictor_pb2_grpc.PredictorStub(channel)
    channel.close()
    app.stop()


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_learner_is_published_and_served(served, car, algo):
    models, stub = served
    model = models[algo]
    rows = car.X[::37]
    expected = compile_model(model).predict_proba(rows)
    names = [v.name for v in car.features]
    reply = stub.Predict(pb.PredictRequest(model=algo, dense=pb.DenseBatch(features=names, codes=rows.ravel().tolist())))
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)
    meta = stub.GetModelMetadata(pb.GetModelMetadataRequest(model=algo))
    assert meta.algorithm == algo and meta.combination == model.combination
    accuracy = np.mean(compile_model(model).predict_proba(car.X).argmax(axis=1) == car.y)
    majority = np.bincount(car.y).max() / car.n_rows
    assert accuracy >= majority  # at worst a selective learner keeps no feature and predicts the prior
