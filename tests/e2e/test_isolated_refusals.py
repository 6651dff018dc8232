"""One bad version harms no other model (issue 17 item 3), on a running `server serve`.

Before: the repository caught only checksum and validation errors at load, so a version
whose params_json is nested 200,000 deep (a RecursionError) or whose metadata passes
validation but fails to compile stopped every model from following the store, on every
poll, and a server started on that store never became SERVING. `trainer show` printed a
traceback. A 20,000-feature naive Bayes took minutes and gigabytes to compile (a
features x features Python list). SQLite and PostgreSQL; eager and lazy compilation.
"""

from __future__ import annotations

import dataclasses

import grpc
import numpy as np
import pytest

from bench.serving import Server
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.model import CLASS, Model, Network, Node, Variable
from bnserve.store.predictor import compile_model
from bnserve.store.predictor.compiled import TABLE_PRECISION
from tests.e2e.serving import run_cli, sample_value, scrape, wait_until, write_version
from tests.model_factory import random_model
from tests.reliability import record

FEATURES = 6
BAD_VERSIONS = (
    "hostile: one bad version among good ones (JSON nested 200,000 deep; passes validation, fails to compile)"
)
DEEP_JSON = "[" * 200_000 + "]" * 200_000


def three_state_model(seed: int) -> Model:
    return random_model(np.random.default_rng(seed), n_features=FEATURES, cardinalities=(3, 3))


def uncompilable(seed: int) -> Model:
    """Passes validate(), fails compile: its metadata asks for a table dtype there is not."""
    model = three_state_model(seed)
    return dataclasses.replace(model, metadata={**model.metadata, TABLE_PRECISION: {"dtype": "float16"}}).validate()


def dense(model: str, **selector) -> pb.PredictRequest:
    codes = np.random.default_rng(0).integers(0, 3, size=(2, FEATURES))
    return pb.PredictRequest(
        model=model,
        dense=pb.DenseBatch(features=[f"f{i}" for i in range(FEATURES)], codes=codes.ravel().tolist()),
        **selector,
    )


def refusal(stub, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, err.value.details()
    return err.value


@pytest.mark.parametrize("compile_mode", ["eager", "lazy"])
def test_a_bad_version_is_refused_alone_and_every_other_model_keeps_updating(store_url, compile_mode):
    with ModelStore(store_url) as store:
        store.publish("a", three_state_model(1), aliases=["production"])
        store.publish("b", three_state_model(2))
    flags = ("--poll-seconds", "0.3", "--log-level", "INFO", "--compile", compile_mode)
    with Server(store_url, metrics=True, extra=flags) as server, grpc.insecure_channel(server.target) as channel:
        stub = predictor_pb2_grpc.PredictorStub(channel)
        assert stub.Predict(dense("a"), timeout=10).version == 1  # in use: later versions compile at load
        # a:2 nested too deeply to decode, production moved to it, by a writer that does not count;
        # a:3 passes validation and fails to compile; b:2 is good
        write_version(store_url, "a", 2, three_state_model(3), alias="production", params_json=DEEP_JSON)
        with ModelStore(store_url) as store:
            assert store.publish("a", uncompilable(4)) == 3
            assert store.publish("b", three_state_model(5)) == 2
        wait_until(lambda: stub.Predict(dense("b"), timeout=10).version == 2, "b version 2")
        wait_until(
            lambda: sample_value(scrape(server.metrics_port), "bnserve_model_load_failures_total", model="a") == 2,
            "a's versions 2 and 3 refused",
        )
        assert stub.Predict(dense("a"), timeout=10).version == 1  # production stays at the last good one
        assert "version 2 was refused at load" in refusal(stub, dense("a", version=2)).details()
        assert "version 3 was refused at load" in refusal(stub, dense("a", version=3)).details()
        listing = {m.name: m for m in stub.ListModels(pb.ListModelsRequest(), timeout=10).models}
        assert list(listing["a"].versions) == [1, 2, 3] and dict(listing["a"].aliases) == {"production": 1}

        with (
            Server(store_url, extra=("--compile", compile_mode)) as fresh,
            grpc.insecure_channel(fresh.target) as fresh_channel,
        ):  # SERVING: Server waits for it
            fresh_stub = predictor_pb2_grpc.PredictorStub(fresh_channel)
            assert fresh_stub.Predict(dense("b"), timeout=10).version == 2
            assert "version 2 was refused at load" in refusal(fresh_stub, dense("a")).details()  # production
        server.stop()
        log = server.output()

    assert (
        "refused a version 2 at load: model 'a' version 2: stored rows cannot be decoded: JSON nested too deeply" in log
    )
    assert "refused a version 3 at load: metadata table_precision.dtype must be one of float64, float32" in log
    assert "alias production of a stays at version 1: version 2 was refused at load" in log
    assert "store poll failed" not in log and "Traceback" not in log

    shown = run_cli("trainer", "show", "a:2", "--store", store_url)
    assert (shown.returncode, shown.stdout) == (1, "")
    assert shown.stderr == (
        "trainer: error: model 'a' version 2: stored rows cannot be decoded: JSON nested too deeply\n"
    )
    record(
        BAD_VERSIONS,
        store_url.split(":", 1)[0].split("+", 1)[0],
        faults=2,
        versions=5,
        errors=0,
        lost=0,
        compile=compile_mode,
        refused_versions=2,
    )


def test_lazy_refuses_a_version_that_fails_to_compile_at_its_first_request(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("a", three_state_model(1))
        store.publish("b", uncompilable(2))
    with (
        Server(url, metrics=True, extra=("--compile", "lazy", "--log-level", "INFO")) as server,
        grpc.insecure_channel(server.target) as channel,
    ):
        stub = predictor_pb2_grpc.PredictorStub(channel)
        assert "version 1 was refused at load: metadata table_precision.dtype" in refusal(stub, dense("b")).details()
        refusal(stub, dense("b"))
        assert stub.Predict(dense("a"), timeout=10).version == 1
        assert sample_value(scrape(server.metrics_port), "bnserve_model_load_failures_total", model="b") == 1


def naive_bayes(n_features: int, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(n_features)]
    variables = (Variable("c", ("no", "yes"), CLASS), *(Variable(v, ("0", "1", "2")) for v in names))
    nodes = [Node("c", (), np.array([0.3, 0.7]))] + [Node(v, ("c",), rng.dirichlet([1.0] * 3, size=2).T) for v in names]
    return Model(variables, (Network(tuple(nodes)),), "nb").validate()


def test_a_20000_feature_naive_bayes_is_served(tmp_path):
    """Its compile built a 20,000 x 20,000 Python list: gigabytes, and minutes before a MemoryError."""
    model = naive_bayes(20_000)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("wide", model)
    codes = np.random.default_rng(1).integers(0, 3, size=(2, 20_000))
    codes[1, ::7] = -1
    request = pb.PredictRequest(
        model="wide", dense=pb.DenseBatch(features=[f"f{i}" for i in range(20_000)], codes=codes.ravel().tolist())
    )
    with Server(url) as server, grpc.insecure_channel(server.target) as channel:
        reply = predictor_pb2_grpc.PredictorStub(channel).Predict(request, timeout=60)
    got = np.array([p.probabilities for p in reply.predictions])
    np.testing.assert_allclose(got, compile_model(model).predict_proba(codes), rtol=0, atol=1e-12)
