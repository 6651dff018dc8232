"""The real server (in this process, on a real port) keeps its missing-value plans within
``--plan-cache-bytes``, shows the bytes held in ``bnserve_plan_cache_bytes``, and answers
every row with the reference P(c | x) whether its plan fits, is evicted, or never fits; a
row too large to sum out is RESOURCE_EXHAUSTED naming it, and the server goes on (issue 17)."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from prometheus_client import REGISTRY

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.predictor import elimination
from tests.in_process_server import running_app
from tests.model_factory import kdb_model
from tests.reference import reference_proba

MODEL = kdb_model(np.random.default_rng(17), n_features=7, states=3)  # small enough for the reference
TABLES = sum(n.cpt.size * 8 for n in MODEL.networks[0].nodes)  # the log tables every plan shares


def _rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, size=(n, len(MODEL.features)))
    codes[rng.random(codes.shape) < 0.5] = -1
    return codes


def _predict(stub, codes: np.ndarray) -> np.ndarray:
    dense = pb.DenseBatch(features=[v.name for v in MODEL.features], codes=codes.ravel().tolist())
    answer = stub.Predict(pb.PredictRequest(model="kdb", dense=dense, dense_response=True))
    return np.reshape(answer.dense.probabilities, (codes.shape[0], -1))


def _held() -> float:
    return REGISTRY.get_sample_value("bnserve_plan_cache_bytes")


@pytest.mark.parametrize("budget", [TABLES + 40_000, 0], ids=["tables and a few plans", "nothing kept"])
def test_plans_stay_within_the_budget_and_every_answer_is_the_reference(tmp_path, budget):
    with running_app(tmp_path, {"kdb": MODEL}, plan_cache_bytes=budget) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            single = _rows(150, seed=1)
            got = []
            for row in single:  # 150 single-row calls, each with its own random missing features
                got.append(_predict(stub, row[None])[0])
                assert app.repository.plans.nbytes <= budget
            np.testing.assert_allclose(got, reference_proba(MODEL, single), rtol=0, atol=1e-9)
            dense = _rows(1000, seed=2)  # one request of 1,000 such rows
            np.testing.assert_allclose(_predict(stub, dense), reference_proba(MODEL, dense), rtol=0, atol=1e-9)
            assert app.repository.plans.nbytes <= budget
            if budget:
                assert 0 < _held() == app.repository.plans.nbytes
                assert len(app.repository.plans) > 1  # the tables and some plans
            else:
                assert len(app.repository.plans) == 0


def test_a_row_too_large_to_sum_out_is_refused_naming_it_and_the_server_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(elimination, "MAX_ROW_WORK", 100)
    with running_app(tmp_path, {"kdb": MODEL}) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            rows = np.zeros((3, len(MODEL.features)), dtype=np.int64)
            rows[2, :5] = -1
            with pytest.raises(grpc.RpcError) as refused:
                _predict(stub, rows)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused.value.details().startswith("row 2: the missing values of f")
            assert "send values for some of them" in refused.value.details()
            np.testing.assert_allclose(_predict(stub, rows[:2]), reference_proba(MODEL, rows[:2]), rtol=0, atol=1e-9)
