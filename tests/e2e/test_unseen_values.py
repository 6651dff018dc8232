"""Values the training file lacks, end to end: `trainer fit` on a file, then a test file
holding values no training row had — whole-number codes (Time 72, 84), a label
(Purpose 'repairs', and one with a control character), numbers outside the training range
(Amount) — scored by `trainer predict` and by `server serve` (Predict's instances and
dense forms, ModelInfer). Every row is answered, an unseen value as if it were missing;
the counts are on trainer predict's stderr and in bnserve_unknown_values_total; the
strict policy refuses, naming the column and value. Real processes, a real store.
"""

from __future__ import annotations

import csv
import io
import json

import grpc
import numpy as np
import pytest

from bnserve.server.api import grpc_service_pb2 as infer_pb
from bnserve.server.api import grpc_service_pb2_grpc, predictor_pb2_grpc
from bnserve.server.api import predictor_pb2 as pb
from tests.e2e.serving import run_cli, sample_value, scrape, serving

HEADER = ["Time", "Purpose", "Amount", "Status"]
TIMES = [6, 12, 18, 24, 30, 36, 42, 48, 54, 60]
LONG = "a\x1bvery long value that goes on"  # a control character, and past the 20 shown
UNSEEN = {3: ("Time", "72"), 10: ("Time", "84"), 20: ("Time", "72"), 5: ("Purpose", "repairs"), 7: ("Purpose", LONG)}
OUT_OF_RANGE = {9: "-1000000", 11: "1e9"}  # Amount: numbers fall into the edge intervals


def _rows(n: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        time = int(rng.choice(TIMES))
        purpose = str(rng.choice(["car", "furniture", "tv"]))
        amount = rng.gamma(2.0, 1500.0) * (1.5 if purpose == "car" else 1.0)
        bad = (time > 30) != (rng.random() < 0.2) or amount > 6000
        out.append([str(time), purpose, f"{amount:.2f}", "bad" if bad else "good"])
    return out


def _write(path, body) -> str:
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([HEADER, *body])
    return str(path)


def _probabilities(stdout: str) -> np.ndarray:
    header, *body = list(csv.reader(io.StringIO(stdout)))
    first = header.index("predicted") + 1
    return np.array([[float(v) for v in row[first:]] for row in body])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(store URL, test file, the test file with the unseen values blanked, its rows)."""
    tmp = tmp_path_factory.mktemp("unseen")
    store = f"sqlite:///{tmp / 'store.db'}"
    train = _write(tmp / "train.csv", _rows(400, seed=1))
    fit = run_cli(
        "trainer", "fit", "--algo", "tan", "--data", train, "--nominal", "Time", "--name", "credit", "--store", store
    )
    assert fit.returncode == 0, fit.stderr
    body = _rows(60, seed=2)
    for r, (column, value) in UNSEEN.items():
        body[r][HEADER.index(column)] = value
    for r, value in OUT_OF_RANGE.items():
        body[r][HEADER.index("Amount")] = value
    blanked = [list(row) for row in body]
    for r, (column, _) in UNSEEN.items():
        blanked[r][HEADER.index(column)] = ""
    return store, _write(tmp / "test.csv", body), _write(tmp / "blanked.csv", blanked), body


def test_trainer_predict_answers_every_row_and_counts_the_unseen_values(files):
    store, test, blanked, body = files
    scored = run_cli("trainer", "predict", "credit", "--data", test, "--chunk-rows", "16", "--store", store)
    assert scored.returncode == 0, scored.stderr
    proba = _probabilities(scored.stdout)
    assert proba.shape == (len(body), 2)
    shown = repr(LONG[:20] + "…")
    assert scored.stderr.splitlines()[-1] == (
        f"trainer: 5 unknown values read as missing: Time 3 ('72', '84'), Purpose 2 ('repairs', {shown})"
    )
    # an unseen value is read exactly as a missing one
    as_missing = run_cli("trainer", "predict", "credit", "--data", blanked, "--store", store)
    assert as_missing.returncode == 0, as_missing.stderr
    assert scored.stdout == as_missing.stdout
    assert "unknown" not in as_missing.stderr


def test_trainer_predict_strict_refuses_naming_the_column_and_value_and_writes_nothing(files):
    store, test, _, _ = files
    strict = run_cli("trainer", "predict", "credit", "--data", test, "--unknown", "error", "--store", store)
    assert strict.returncode == 1
    assert strict.stdout == ""  # not even the header
    assert strict.stderr.splitlines()[-1] == (
        f"trainer: error: {test}: line 5: column 'Time': unknown value '72'; known: {', '.join(map(str, TIMES))}"
    )


@pytest.fixture(scope="module")
def server(files):
    store = files[0]
    with serving(store) as served:
        yield (
            predictor_pb2_grpc.PredictorStub(served.channel),
            grpc_service_pb2_grpc.GRPCInferenceServiceStub(served.channel),
            served.metrics_port,
            served.port,
        )


def _unseen_counts(metrics_port: int) -> dict[str, float]:
    text = scrape(metrics_port)
    features = [h for h in HEADER[:-1] if f'feature="{h}"' in text]
    return {f: sample_value(text, "bnserve_unknown_values_total", model="credit", feature=f) for f in features}


def _infer_request(body, **parameters) -> infer_pb.ModelInferRequest:
    request = infer_pb.ModelInferRequest(model_name="credit")
    for j, name in enumerate(HEADER[:-1]):
        tensor = request.inputs.add(name=name, datatype="BYTES", shape=[len(body)])
        tensor.contents.bytes_contents.extend(row[j].encode() for row in body)
    for key, value in parameters.items():
        request.parameters[key].string_param = value
    return request


def test_the_server_answers_every_row_counts_per_feature_and_refuses_when_strict(files, server):
    store, test, _, body = files
    predictor, inference, metrics_port, _ = server
    expected = _probabilities(run_cli("trainer", "predict", "credit", "--data", test, "--store", store).stdout)
    assert _unseen_counts(metrics_port) == {}  # no series before the first unseen value

    instances = [pb.Instance(values={n: v for n, v in zip(HEADER[:-1], row) if v}) for row in body]
    reply = predictor.Predict(pb.PredictRequest(model="credit", instances=instances))
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)
    assert _unseen_counts(metrics_port) == {"Time": 3.0, "Purpose": 2.0}

    result = inference.ModelInfer(_infer_request(body))
    probabilities = np.frombuffer(result.raw_output_contents[1], dtype="<f4").reshape(len(body), 2)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-6)  # FP32 on the wire
    assert _unseen_counts(metrics_port) == {"Time": 6.0, "Purpose": 4.0}

    # the dense form: numbers far outside the training range fall into the edge intervals
    amounts = [-1e6, 1e9, float(OUT_OF_RANGE[9]), float(OUT_OF_RANGE[11])]
    dense = predictor.Predict(
        pb.PredictRequest(model="credit", dense=pb.DenseBatch(features=["Amount"], values=amounts))
    )
    one_by_one = [
        predictor.Predict(pb.PredictRequest(model="credit", instances=[pb.Instance(numbers={"Amount": x})]))
        for x in amounts
    ]
    assert [list(p.probabilities) for p in dense.predictions] == [
        list(r.predictions[0].probabilities) for r in one_by_one
    ]

    # strict: refused as before, naming the feature and value, and nothing counted
    refusals = [
        lambda: predictor.Predict(pb.PredictRequest(model="credit", instances=instances, unknown="error")),
        lambda: inference.ModelInfer(_infer_request(body, unknown="error")),
    ]
    for call in refusals:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "feature 'Time' has no state '72'" in err.value.details()
    # a name no model has, or text that is no number in a numeric feature, is refused, and adds no series
    for values in ({"zz": "72"}, {"Amount": "lots"}):
        with pytest.raises(grpc.RpcError) as err:
            predictor.Predict(pb.PredictRequest(model="credit", instances=[pb.Instance(values=values)]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    text = scrape(metrics_port)
    assert [line for line in text.splitlines() if line.startswith("bnserve_unknown_values_total{")] == [
        f'bnserve_unknown_values_total{{feature="{f}",model="credit"}} {n}'
        for f, n in (("Time", 6.0), ("Purpose", 4.0))
    ]


def test_server_predict_sends_its_unknown_policy(files, server):
    """`server predict --unknown`: missing (the default) answers a row holding a value no
    training row had as if it were missing; error is refused, naming the feature and value.
    (It replaced --unseen-as-missing, which did nothing once missing became the default.)"""
    port = server[3]
    ask = ["server", "predict", "--target", f"127.0.0.1:{port}", "--model", "credit"]
    unseen = run_cli(*ask, "--instance", "Time=72,Purpose=car")
    blank = run_cli(*ask, "--instance", "Purpose=car")
    assert unseen.returncode == 0 and blank.returncode == 0, unseen.stderr + blank.stderr
    assert json.loads(unseen.stdout)["predictions"] == json.loads(blank.stdout)["predictions"]
    assert run_cli(*ask, "--unknown", "missing", "--instance", "Time=72,Purpose=car").stdout == unseen.stdout
    strict = run_cli(*ask, "--unknown", "error", "--instance", "Time=72,Purpose=car")
    assert strict.returncode == 1
    assert "INVALID_ARGUMENT" in strict.stderr and "feature 'Time' has no state '72'" in strict.stderr
    assert run_cli(*ask, "--unseen-as-missing", "--instance", "Purpose=car").returncode == 2  # gone
