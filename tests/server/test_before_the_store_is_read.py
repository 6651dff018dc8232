"""A server whose store cannot be read yet (here: another process holds it locked) is
listening but knows no model: every call that names or lists models is UNAVAILABLE, which
clients retry, never NOT_FOUND, which they do not (a client that retried through a start
under load was told 'model not found'); once the store is read the same calls answer."""

from __future__ import annotations

import sqlite3

import grpc
import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.store.db import ModelStore
from tests.model_factory import random_model


def test_calls_before_the_first_read_are_unavailable_then_answered(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("m", random_model(np.random.default_rng(0), n_features=2))
    lock = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # no reader gets in until it ends
    app = App(ServeConfig(store_url=url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=0.2)).start()
    try:
        assert not app.repository.ready
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            calls = {
                "Predict": lambda: stub.Predict(pb.PredictRequest(model="m", instances=[]), timeout=10),
                "GetModelMetadata": lambda: stub.GetModelMetadata(pb.GetModelMetadataRequest(model="m"), timeout=10),
                "ListModels": lambda: stub.ListModels(pb.ListModelsRequest(), timeout=10),
            }
            for name, call in calls.items():
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, (name, refused.value.details())
            lock.execute("COMMIT")
            assert app.repository.wait_ready(60)
            assert [m.name for m in calls["ListModels"]().models] == ["m"]
            assert calls["GetModelMetadata"]().name == "m"
    finally:
        lock.close()
        app.stop()
