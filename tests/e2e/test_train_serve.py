"""The path a user walks: `trainer fit` into a store, `server serve`, Predict over the wire.

Real processes, real ports, real SQLite file and real PostgreSQL (the `store_url`
fixture runs this module once per backend).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import grpc
import numpy as np
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import load
from tests.e2e.serving import BIN, free_port, run_cli, sample_value, scrape, wait_serving


@pytest.fixture
def chess_rows():
    data = load("builtin:chess")
    names = [v.name for v in data.variables if v.role == "feature"]
    states = {v.name: v.states for v in data.variables}
    return data, names, states


@pytest.fixture
def served(store_url, tmp_path):
    """Train FKDB k=2 on chess into the store, start `server serve`, yield (url, channel, metrics port)."""
    fit = run_cli(
        "trainer",
        "fit",
        "--algo",
        "fkdb",
        "--k",
        "2",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store_url,
        "--alias",
        "production",
    )
    assert fit.returncode == 0, fit.stderr
    assert re.search(r"\bversion 1\b", fit.stdout), fit.stdout
    port, metrics_port = free_port(), free_port()
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
            str(metrics_port),
            "--poll-seconds",
            "0.3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        try:
            wait_serving(channel)
        except AssertionError:
            proc.kill()
            raise AssertionError("server did not report SERVING; its output:\n" + proc.communicate()[0]) from None
        yield store_url, channel, metrics_port, proc, port
    finally:
        channel.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_fkdb_on_chess_over_the_wire(served, chess_rows):
    store_url, channel, metrics_port, proc, port = served
    data, names, states = chess_rows
    stub = predictor_pb2_grpc.PredictorStub(channel)
    model = ModelStore(store_url).load("chess").model
    assert model.algorithm == "fkdb"
    expected = compile_model(model).predict_proba(data.X[:200])

    # friendly form: the answer equals the CPT arithmetic, and is a distribution
    rows = [{n: states[n][c] for n, c in zip(names, row)} for row in data.X[:200]]
    reply = stub.Predict(pb.PredictRequest(model="chess", instances=[pb.Instance(values=r) for r in rows]))
    assert (reply.model, reply.version) == ("chess", 1)
    got = np.array([p.probabilities for p in reply.predictions])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
    assert [p.label for p in reply.predictions] == [reply.classes[i] for i in got.argmax(axis=1)]
    accuracy = np.mean(got.argmax(axis=1) == data.y[:200])
    assert accuracy > 0.9

    # dense form: the same numbers
    dense = pb.DenseBatch(features=names, codes=data.X[:200].ravel().tolist())
    reply_dense = stub.Predict(pb.PredictRequest(model="chess", dense=dense))
    np.testing.assert_allclose([p.probabilities for p in reply_dense.predictions], expected, rtol=0, atol=1e-12)

    # missing features are marginalised: the same as the compiled model with -1 there
    partial = {"bkblk": "f", "wknck": "t", "rimmx": "f"}
    reply_missing = stub.Predict(pb.PredictRequest(model="chess", instances=[pb.Instance(values=partial)]))
    codes = np.full((1, len(names)), -1)
    for n, label in partial.items():
        codes[0, names.index(n)] = states[n].index(label)
    np.testing.assert_allclose(
        reply_missing.predictions[0].probabilities, compile_model(model).predict_proba(codes)[0], atol=1e-12
    )

    # errors carry the right status and name the culprit
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(pb.PredictRequest(model="chess", instances=[pb.Instance(values={"nosuch": "f"})]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nosuch" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(
            pb.PredictRequest(model="chess", instances=[pb.Instance(values={"bkblk": "maybe"})], unknown="error")
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "maybe" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(pb.PredictRequest(model="no-such-model"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(pb.PredictRequest(model="chess", version=7))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    # metadata and listing
    meta = stub.GetModelMetadata(pb.GetModelMetadataRequest(model="chess", include_parameters=True))
    assert meta.algorithm == "fkdb" and json.loads(meta.parameters_json)["k"] == 2
    assert list(meta.aliases) == ["production"]
    for cpt in meta.cpts:
        np.testing.assert_array_equal(np.array(cpt.values).reshape(cpt.shape), model.networks[0].node(cpt.node).cpt)
    listing = stub.ListModels(pb.ListModelsRequest())
    assert [(m.name, list(m.versions), dict(m.aliases)) for m in listing.models] == [("chess", [1], {"production": 1})]

    # reflection is on
    services = ProtoReflectionDescriptorDatabase(channel).get_services()
    assert {"bnserve.v1.Predictor", "bnserve.v1.Diagnostics", "grpc.health.v1.Health"} <= set(services)

    # metrics moved
    text = scrape(metrics_port)
    assert (
        sample_value(
            text,
            "grpc_server_handled_total",
            grpc_method="Predict",
            grpc_code="OK",
            grpc_service="bnserve.v1.Predictor",
            grpc_type="UNARY",
        )
        >= 3
    )
    assert sample_value(text, "grpc_server_handled_total", grpc_method="Predict", grpc_code="INVALID_ARGUMENT") >= 2
    assert sample_value(text, "grpc_server_handled_total", grpc_method="Predict", grpc_code="NOT_FOUND") >= 2
    assert sample_value(text, "grpc_server_started_total", grpc_method="Predict") >= 7
    latency_observations = sample_value(text, "grpc_server_handling_seconds_count", grpc_method="Predict")
    assert latency_observations >= 7  # one histogram observation per call
    predicted = sample_value(text, "bnserve_prediction_rows_total", model="chess")
    assert predicted >= 401
    assert (
        sum(
            sample_value(text, "bnserve_predicted_class_rows_total", model="chess", **{"class": c})
            for c in ("nowin", "won")
        )
        == predicted
    )
    assert sample_value(text, "bnserve_request_rows_sum", model="chess") == predicted
    assert sample_value(text, "bnserve_request_seconds_count", model="chess") == sample_value(
        text, "bnserve_request_rows_count", model="chess"
    )
    assert sample_value(text, "bnserve_model_info", model="chess", version="1", algorithm="fkdb") == 1

    # the CLI client says the same
    cli = run_cli(
        "server",
        "predict",
        "--target",
        f"127.0.0.1:{port}",
        "--model",
        "chess",
        "--instance",
        ",".join(f"{k}={v}" for k, v in rows[0].items()),
    )
    assert cli.returncode == 0, cli.stderr
    answer = json.loads(cli.stdout)
    np.testing.assert_allclose(answer["predictions"][0]["probabilities"], expected[0], atol=1e-12)


def test_server_predict_takes_several_instances_as_pairs_or_json(served, chess_rows):
    """The CLI client: one row per --instance, key=value pairs or a JSON object, answered in
    order with the compiled model's own probabilities."""
    store_url, _, _, _, port = served
    data, names, states = chess_rows
    first = dict(zip(names[:2], (states[names[0]][0], states[names[1]][1])))
    second = {names[2]: states[names[2]][0]}
    done = run_cli(
        "server",
        "predict",
        "--target",
        f"127.0.0.1:{port}",
        "--model",
        "chess",
        "--instance",
        ",".join(f"{k}={v}" for k, v in first.items()),
        "--instance",
        json.dumps(second),
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    model = ModelStore(store_url).load("chess").model
    codes = np.full((2, len(names)), -1)
    for r, row in enumerate((first, second)):
        for name, label in row.items():
            codes[r, names.index(name)] = states[name].index(label)
    expected = compile_model(model).predict_proba(codes)
    assert np.allclose([p["probabilities"] for p in reply["predictions"]], expected, rtol=0, atol=1e-12)
    assert [p["label"] for p in reply["predictions"]] == [reply["classes"][i] for i in expected.argmax(axis=1)]


def test_new_versions_and_alias_moves_are_picked_up(served):
    store_url, channel, metrics_port, proc, port = served
    stub = predictor_pb2_grpc.PredictorStub(channel)
    fit = run_cli("trainer", "fit", "--algo", "nb", "--data", "builtin:chess", "--name", "chess", "--store", store_url)
    assert fit.returncode == 0, fit.stderr

    def wait_for(predicate, what: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        raise AssertionError(f"server never saw {what}")

    # version 2 exists and is servable, but production still points at 1
    wait_for(lambda: 2 in stub.ListModels(pb.ListModelsRequest()).models[0].versions, "version 2")
    assert stub.Predict(pb.PredictRequest(model="chess")).version == 1
    assert stub.Predict(pb.PredictRequest(model="chess", version=2)).version == 2
    # moving the alias moves the default
    assert run_cli("trainer", "alias", "chess", "2", "production", "--store", store_url).returncode == 0
    wait_for(lambda: stub.Predict(pb.PredictRequest(model="chess")).version == 2, "the alias move")
    assert stub.GetModelMetadata(pb.GetModelMetadataRequest(model="chess")).algorithm == "nb"


def test_sigterm_drains_and_exits(served):
    store_url, channel, metrics_port, proc, port = served
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    output = proc.stdout.read()
    assert "shutting down" in output and "Traceback" not in output
