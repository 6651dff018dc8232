"""Derived features (``--projections lda``) served: never sent, computed from their inputs.

The real server (in this process, on a real port) holds a model trained through the trainer
(``TrainingSpec('nb', projections='lda')`` on numeric columns a, b, c with missing values,
a nominal g, class a - b > 0: its ``ld1`` carries the class) and a model built by hand whose
derived feature sits between the others. Every form of raw values (instances as text, as
numbers, both; dense values; inference tensors of text and of numbers; the Client's frames
and dicts) must give the probabilities of the rows coded in process: by the trainer
(``encode_like``) or with the store's ``derive_codes``, and the compiled predictor. The
reference is checked to depend on the derived code, so a server that left it missing fails
every comparison. Codes are the caller's own; a derived feature sent a raw value is refused.
"""

from __future__ import annotations

import csv
import dataclasses
import math

import grpc
import numpy as np
import pandas as pd
import pytest
import tritonclient.grpc as tc
from tritonclient.grpc import service_pb2 as triton_pb
from tritonclient.grpc import service_pb2_grpc as triton_grpc

from bnserve import Client
from bnserve.server.api import grpc_service_pb2, predictor_pb2_grpc
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.limits import Work
from bnserve.server.requests import dense_work, instances_work
from bnserve.server.tensors import check_inputs
from bnserve.store.errors import InvalidInput
from bnserve.store.model.discretization import interval_codes
from bnserve.store.model.projection import Projection, derive_codes
from bnserve.store.predictor import compile_model
from bnserve.trainer.data.encoded import encode_like
from bnserve.trainer.data.preprocessing import DEFAULT_NA_VALUES
from bnserve.trainer.plan import TrainingSpec, read, train
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reference import reference_proba

MARKER = "-999"  # a missing marker of the training file that reads as a number
SPEC = TrainingSpec("nb", projections="lda", na_values=(*DEFAULT_NA_VALUES, MARKER))
ROWS = 300
INPUTS = ("a", "b", "c")
REFUSED = "feature 'ld1' is derived from 'a', 'b', 'c'; send those"


def _write_data(path) -> None:
    """a, b, c numbers (each missing in about 8 % of rows, all three in rows 0-5: an empty
    cell, or the marker in odd rows), g a label, class p where a - b > 0."""
    rng = np.random.default_rng(5)
    a, b, c = rng.normal(size=(3, ROWS))
    g = rng.choice(["x", "y"], size=ROWS)
    label = np.where(a - b + 0.2 * rng.normal(size=ROWS) > 0, "p", "q")
    blank = rng.random((3, ROWS)) < 0.08
    blank[:, :6] = True
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([*INPUTS, "g", "class"])
        for r in range(ROWS):
            missing = MARKER if r % 2 else ""
            numbers = [missing if blank[k, r] else f"{x[r]:.6f}" for k, x in enumerate((a, b, c))]
            writer.writerow([*numbers, g[r], label[r]])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(model, the file's rows as texts, their codes by the trainer, the reference P(c | row))."""
    path = tmp_path_factory.mktemp("data") / "derived.csv"
    _write_data(path)
    model = train(SPEC, str(path))
    assert [v.name for v in model.features] == [*INPUTS, "g", "ld1"]
    assert model.features[-1].projection.inputs == INPUTS
    X = encode_like(read(SPEC, str(path)).columns, model.variables).X.astype(np.int64)
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    expected = compile_model(model).predict_proba(X)
    _check_depends_on_the_derived_code(model, X, expected, column=-1)
    assert (X[:6, -1] == -1).all()  # every input missing: the derived feature is missing
    return model, rows, X, expected


def _check_depends_on_the_derived_code(model, codes, expected, column) -> None:
    """The reference of rows whose derived code is known differs from that of the same rows
    with it missing: a server that never codes it cannot give ``expected``."""
    known = codes[:, column] >= 0
    assert len(np.unique(codes[known, column])) >= 2
    without = codes.copy()
    without[:, column] = -1
    assert np.abs(compile_model(model).predict_proba(without)[known] - expected[known]).max() > 0.05


def _middle_model():
    """Numeric f0..f4 (random cut points), f1 derived from f0, f3 and f4."""
    rng = np.random.default_rng(23)
    model = random_model(rng, n_features=5, numeric=1.0, cardinalities=(3, 4), max_parents=2)
    projection = Projection(("f0", "f3", "f4"), (1.0, -2.0, 0.5), (0.8, -0.6, 1.1))
    variables = tuple(dataclasses.replace(v, projection=projection) if v.name == "f1" else v for v in model.variables)
    return dataclasses.replace(model, variables=variables).validate()


MIDDLE = _middle_model()
MIDDLE_NUMBERS = {  # rows of raw numbers for f0, f2, f3, f4; row 0 without any of f1's inputs
    "f0": np.array([np.nan, -9.0, 3.5, 12.0, np.nan, 0.25, -4.0, 7.5]),
    "f2": np.array([1.0, np.nan, -6.0, 2.5, 9.0, -11.0, 0.0, 4.0]),
    "f3": np.array([np.nan, 8.0, -3.0, np.nan, -7.5, 5.0, 10.0, -1.0]),
    "f4": np.array([np.nan, -2.0, 6.0, 1.0, 3.0, np.nan, -12.0, 8.5]),
}


def _coded(model, numbers: dict[str, np.ndarray], rows: int, given: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Rows coded in process: each numeric feature's numbers through its cut points, the
    ``given`` codes of others, then the derived features with the store's ``derive_codes``."""
    codes = np.full((rows, len(model.features)), -1, dtype=np.int64)
    for j, v in enumerate(model.features):
        if v.name in numbers:
            codes[:, j] = interval_codes(v.cuts, numbers[v.name])
        elif given and v.name in given:
            codes[:, j] = given[v.name]
    derive_codes(model.features, codes, numbers)
    return codes


@pytest.fixture(scope="module")
def server(trained, tmp_path_factory):
    model, *_ = trained
    with running_app(tmp_path_factory.mktemp("store"), {"lda": model, "middle": MIDDLE}) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield app, predictor_pb2_grpc.PredictorStub(channel), triton_grpc.GRPCInferenceServiceStub(channel)


def _numbers(rows) -> dict[str, np.ndarray]:
    return {name: np.array([float(r[name]) if _sent(r[name]) else math.nan for r in rows]) for name in INPUTS}


def _sent(text: str) -> bool:
    return text not in ("", MARKER)


def _proba(reply: pb.PredictResponse) -> np.ndarray:
    return np.array([p.probabilities for p in reply.predictions])


def _status(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code(), caught.value.details()


# ---------------------------------------------------------------- Predict


def test_instances_of_text_numbers_or_both_equal_the_trainers_coding(server, trained):
    _, stub, _ = server
    model, rows, X, expected = trained
    numbers = _numbers(rows)
    as_text = [pb.Instance(values={k: v for k, v in r.items() if k != "class"}) for r in rows]  # "" missing
    as_numbers = [
        pb.Instance(values={"g": r["g"]}, numbers={name: numbers[name][i] for name in INPUTS})  # NaN missing
        for i, r in enumerate(rows)
    ]
    mixed = [  # a as text (absent when missing), b and c as numbers (absent when missing)
        pb.Instance(
            values={"g": r["g"], **({"a": r["a"]} if _sent(r["a"]) else {})},
            numbers={name: float(r[name]) for name in ("b", "c") if _sent(r[name])},
        )
        for r in rows
    ]
    for instances in (as_text, as_numbers, mixed):
        reply = stub.Predict(pb.PredictRequest(model="lda", instances=instances))
        np.testing.assert_allclose(_proba(reply), expected, rtol=0, atol=1e-9)
    few = stub.Predict(pb.PredictRequest(model="lda", instances=as_text[:20]))  # answered on the event loop
    np.testing.assert_allclose(_proba(few), expected[:20], rtol=0, atol=1e-9)


def test_a_missing_input_adds_nothing_and_every_input_missing_is_missing(server, trained):
    _, stub, _ = server
    model, _, _, _ = trained
    cases = [  # (values, numbers) of one row; the numbers its derived feature reads
        ({"g": "x"}, {"a": 1.5}),
        ({"g": "y"}, {"b": -0.75, "c": 0.1}),
        ({"g": "x"}, {"a": -1.0, "b": 1.0}),
        ({"g": "y"}, {}),  # every input missing: ld1 missing
        ({}, {"a": math.nan, "b": 2.0}),
    ]
    numbers = {n: np.array([row[1].get(n, math.nan) for row in cases]) for n in INPUTS}
    g = np.array([model.features[3].states.index(v["g"]) if "g" in v else -1 for v, _ in cases])
    codes = _coded(model, numbers, len(cases), {"g": g})
    assert codes[3, -1] == -1 and (np.delete(codes[:, -1], 3) >= 0).all()
    expected = compile_model(model).predict_proba(codes)
    _check_depends_on_the_derived_code(model, codes, expected, column=-1)
    instances = [pb.Instance(values=v, numbers=n) for v, n in cases]
    reply = stub.Predict(pb.PredictRequest(model="lda", instances=instances))
    np.testing.assert_allclose(_proba(reply), expected, rtol=0, atol=1e-9)


def test_a_marker_or_an_interval_label_of_an_input_is_no_number_to_its_derived_feature(server, trained):
    _, stub, _ = server
    model, _, _, _ = trained
    a = model.features[0]
    texts = [MARKER, "NA", a.states[1], "", "0.5"]  # missing markers of the training file, a label, empty, a number
    instances = [pb.Instance(values={"a": t, "b": "-0.25", "g": "y"}) for t in texts]
    numbers = {"a": np.array([math.nan, math.nan, math.nan, math.nan, 0.5]), "b": np.full(5, -0.25)}
    codes = _coded(model, numbers, 5, {"g": np.full(5, model.features[3].states.index("y"))})
    codes[2, 0] = 1  # the label is a's own state, and no number for ld1
    expected = compile_model(model).predict_proba(codes)
    _check_depends_on_the_derived_code(model, codes, expected, column=-1)
    reply = stub.Predict(pb.PredictRequest(model="lda", instances=instances))
    np.testing.assert_allclose(_proba(reply), expected, rtol=0, atol=1e-9)


def test_dense_values_compute_the_derived_feature_from_their_columns(server, trained):
    _, stub, _ = server
    model, rows, X, expected = trained
    numbers = _numbers(rows)
    g = X[:, 3].astype(np.float64)
    g[g < 0] = np.nan
    listed = np.column_stack([numbers["a"], numbers["b"], numbers["c"], g])
    in_order = np.column_stack([listed, np.full(ROWS, np.nan)])  # every feature, ld1 all NaN
    for features, values in ((["a", "b", "c", "g"], listed), (["a", "b", "c", "g", "ld1"], in_order)):
        dense = pb.DenseBatch(features=features, values=values.ravel().tolist())
        reply = stub.Predict(pb.PredictRequest(model="lda", dense=dense))
        np.testing.assert_allclose(_proba(reply), expected, rtol=0, atol=1e-9)
    # some inputs only, in another order: c is missing to ld1 as to itself
    partial = _coded(model, {"b": numbers["b"], "a": numbers["a"]}, ROWS, {"g": X[:, 3]})
    want = compile_model(model).predict_proba(partial)
    _check_depends_on_the_derived_code(model, partial, want, column=-1)
    dense = pb.DenseBatch(features=["g", "b", "a"], values=np.column_stack([g, numbers["b"], numbers["a"]]).ravel())
    reply = stub.Predict(pb.PredictRequest(model="lda", dense=dense))
    np.testing.assert_allclose(_proba(reply), want, rtol=0, atol=1e-9)


def test_a_derived_feature_between_the_others_in_every_raw_form(server):
    app, stub, _ = server
    numbers = MIDDLE_NUMBERS
    rows = len(numbers["f0"])
    codes = _coded(MIDDLE, numbers, rows)
    assert codes[0, 1] == -1 and (codes[1:, 1] >= 0).all()
    expected = reference_proba(MIDDLE, codes)
    _check_depends_on_the_derived_code(MIDDLE, codes, expected, column=1)
    names = ["f0", "f2", "f3", "f4"]
    instances = [pb.Instance(numbers={n: numbers[n][r] for n in names}) for r in range(rows)]
    texts = [
        pb.Instance(values={n: str(float(numbers[n][r])) for n in names if not math.isnan(numbers[n][r])})
        for r in range(rows)
    ]
    every = np.column_stack([numbers["f0"], np.full(rows, np.nan), numbers["f2"], numbers["f3"], numbers["f4"]])
    requests = [
        pb.PredictRequest(model="middle", instances=instances),
        pb.PredictRequest(model="middle", instances=texts),
        pb.PredictRequest(
            model="middle", dense=pb.DenseBatch(features=[v.name for v in MIDDLE.features], values=every.ravel())
        ),
    ]
    for request in requests:
        np.testing.assert_allclose(_proba(stub.Predict(request)), expected, rtol=0, atol=1e-9)
    client = tc.InferenceServerClient(f"127.0.0.1:{app.port}")
    try:
        tensors = [tc.InferInput(n, [rows], "FP64").set_data_from_numpy(numbers[n]) for n in names]
        result = client.infer("middle", tensors)
        np.testing.assert_allclose(result.as_numpy("probabilities"), expected, rtol=0, atol=1e-6)
        tensor = tc.InferInput("codes", [rows, 5], "INT64").set_data_from_numpy(codes)
        np.testing.assert_allclose(client.infer("middle", [tensor]).as_numpy("probabilities"), expected, atol=1e-6)
    finally:
        client.close()


def test_dense_codes_carry_the_derived_code_as_given(server, trained):
    _, stub, _ = server
    model, _, X, expected = trained
    dense = pb.DenseBatch(features=[v.name for v in model.features], codes=X.ravel().tolist())
    reply = stub.Predict(pb.PredictRequest(model="lda", dense=dense))
    np.testing.assert_allclose(_proba(reply), expected, rtol=0, atol=1e-9)
    only_ld1 = X.copy()
    only_ld1[:, :-1] = -1
    dense = pb.DenseBatch(features=["ld1"], codes=X[:, -1].tolist())
    reply = stub.Predict(pb.PredictRequest(model="lda", dense=dense))
    np.testing.assert_allclose(_proba(reply), compile_model(model).predict_proba(only_ld1), rtol=0, atol=1e-9)


def test_a_derived_feature_sent_a_raw_value_is_refused_naming_its_inputs(server, trained):
    _, stub, infer = server
    model, *_ = trained
    every = [v.name for v in model.features]
    requests = {
        "values": pb.PredictRequest(model="lda", instances=[pb.Instance(values={"a": "1", "ld1": "0.5"})]),
        "label": pb.PredictRequest(model="lda", instances=[pb.Instance(values={"ld1": model.features[-1].states[0]})]),
        "numbers": pb.PredictRequest(model="lda", instances=[pb.Instance(numbers={"ld1": 0.5})]),
        "NaN": pb.PredictRequest(model="lda", instances=[pb.Instance(numbers={"ld1": math.nan})]),
        "many": pb.PredictRequest(model="lda", instances=[pb.Instance(values={"ld1": "0.5"})] * 40),
        "dense": pb.PredictRequest(model="lda", dense=pb.DenseBatch(features=["a", "ld1"], values=[1.0, math.nan])),
    }
    for what, request in requests.items():
        refused = _status(lambda request=request: stub.Predict(request))
        assert refused == (grpc.StatusCode.INVALID_ARGUMENT, REFUSED), what
    in_order = pb.DenseBatch(features=every, values=[0.1, 0.2, 0.3, 0.0, 0.5])
    code, message = _status(lambda: stub.Predict(pb.PredictRequest(model="lda", dense=in_order)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("dense batch: feature 'ld1' is derived from 'a', 'b', 'c'") and "row 0 has 0.5" in message
    for datatype, field, data in (("BYTES", "bytes_contents", [b"0.5"]), ("FP64", "fp64_contents", [0.5])):
        request = triton_pb.ModelInferRequest(model_name="lda")
        getattr(request.inputs.add(name="ld1", datatype=datatype, shape=[1]).contents, field).extend(data)
        refused = _status(lambda request=request: infer.ModelInfer(request))
        assert refused == (grpc.StatusCode.INVALID_ARGUMENT, REFUSED), datatype
        with pytest.raises(InvalidInput, match=REFUSED):  # by name, before any data is decoded
            check_inputs(request, compile_model(model), "class")


def test_metadata_lists_the_derivation_and_inference_inputs_leave_it_out(server, trained):
    app, stub, infer = server
    model, *_ = trained
    projection = model.features[-1].projection
    reply = stub.GetModelMetadata(pb.GetModelMetadataRequest(model="lda"))
    variables = {v.name: v for v in reply.variables}
    ld1 = variables["ld1"]
    assert (tuple(ld1.inputs), tuple(ld1.centres), tuple(ld1.weights)) == (
        projection.inputs,
        projection.centres,
        projection.weights,
    )
    assert ld1.kind == "numeric" and tuple(ld1.cuts) == model.features[-1].cuts
    assert all(not v.inputs and not v.centres and not v.weights for n, v in variables.items() if n != "ld1")
    metadata = infer.ModelMetadata(triton_pb.ModelMetadataRequest(name="middle"))
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
        *((n, "BYTES", [-1]) for n in ("f0", "f2", "f3", "f4")),
        ("codes", "INT32", [-1, 5]),
    ]
    with Client(f"127.0.0.1:{app.port}") as client:
        described = client.metadata("lda")
    assert described["features"] == ["a", "b", "c", "g", "ld1"]
    projections = {v["name"]: v["projection"] for v in described["variables"]}
    assert projections["ld1"] == projection.to_dict()
    assert all(p is None for n, p in projections.items() if n != "ld1")


# ---------------------------------------------------------------- Open Inference Protocol


def test_inference_tensors_of_text_or_numbers_equal_the_trainers_coding(server, trained):
    app, _, _ = server
    model, rows, X, expected = trained
    numbers = _numbers(rows)
    g = np.array([r["g"].encode() for r in rows], dtype=np.object_)
    text = {n: np.array([r[n].encode() for r in rows], dtype=np.object_) for n in INPUTS}
    as_fp32 = {n: numbers[n].astype(np.float32) for n in INPUTS}
    fp32_codes = _coded(model, {n: as_fp32[n].astype(np.float64) for n in INPUTS}, ROWS, {"g": X[:, 3]})
    client = tc.InferenceServerClient(f"127.0.0.1:{app.port}")
    try:
        forms = [
            ({n: ("BYTES", text[n]) for n in INPUTS}, expected),
            ({n: ("FP64", numbers[n]) for n in INPUTS}, expected),
            ({"a": ("BYTES", text["a"]), "b": ("FP64", numbers["b"]), "c": ("BYTES", text["c"])}, expected),
            ({n: ("FP32", as_fp32[n]) for n in INPUTS}, compile_model(model).predict_proba(fp32_codes)),
        ]
        for tensors, want in forms:
            inputs = [tc.InferInput("g", [ROWS], "BYTES").set_data_from_numpy(g)]
            inputs += [tc.InferInput(n, [ROWS], d).set_data_from_numpy(a) for n, (d, a) in tensors.items()]
            result = client.infer("lda", inputs)
            np.testing.assert_allclose(result.as_numpy("probabilities"), want, rtol=0, atol=1e-6)
        codes = tc.InferInput("codes", [ROWS, 5], "INT64").set_data_from_numpy(X)
        np.testing.assert_allclose(client.infer("lda", [codes]).as_numpy("probabilities"), expected, atol=1e-6)
    finally:
        client.close()


# ---------------------------------------------------------------- Client


def test_the_client_sends_frames_and_dicts_without_the_derived_column(server, trained, tmp_path):
    app, _, _ = server
    model, rows, X, expected = trained
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    frame = pd.read_csv(path, na_values=[MARKER])  # a, b, c as floats (NaN missing), g, and the class column
    with Client(f"127.0.0.1:{app.port}", batch_rows=64) as client:
        answers = [
            client.predict("lda", frame),
            client.predict("lda", frame.assign(ld1=7.5)),  # a column of the model's name, not sent
            client.predict("lda", frame.to_dict(orient="records")),
            client.predict("lda", X),  # codes: the caller's own, ld1's included
        ]
        code, message = _status(
            lambda: client.predict("lda", frame.drop(columns="class").assign(ld1=1.0), extra_columns="error")
        )
    for answer in answers:
        assert (answer.model, answer.classes) == ("lda", model.class_variable.states)
        np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=1e-9)
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, REFUSED)


# ---------------------------------------------------------------- the work a request is charged


def test_the_work_of_raw_values_counts_each_derived_features_inputs_per_row(trained):
    model, *_ = trained
    compiled = compile_model(model)
    instances = [pb.Instance(values={"g": "x"}, numbers={"a": 1.0})] * 3
    assert instances_work(compiled, instances) == Work(3, 3 * 2 + 3 * 3)
    assert instances_work(compiled, instances * 20) == Work(60, 60 + 60 * 3)
    assert dense_work(compiled, ["a", "b"], (), [0.0] * 8) == Work(4, 8 + 2 + 4 * 3)
    assert dense_work(compiled, ["a", "ld1"], [0] * 8, ()) == Work(4, 8 + 2)  # codes carry ld1's
    request = grpc_service_pb2.ModelInferRequest(model_name="lda")
    request.inputs.add(name="a", datatype="FP64", shape=[4])
    assert check_inputs(request, compiled, "class") == Work(4, 4 + 4 * 3)
    request = grpc_service_pb2.ModelInferRequest(model_name="lda")
    request.inputs.add(name="codes", datatype="INT64", shape=[4, 5])
    assert check_inputs(request, compiled, "class") == Work(4, 20)


def test_a_few_rows_of_a_wide_derivation_are_not_answered_on_the_event_loop():
    """32 rows of a feature derived from 149 others sum 4,768 terms: past the loop's 4,096."""
    rng = np.random.default_rng(2)
    model = random_model(rng, n_features=150, numeric=1.0, cardinalities=(2, 3), max_parents=1)
    names = tuple(v.name for v in model.features[1:])
    projection = Projection(names, (0.0,) * len(names), (1.0,) * len(names))
    variables = tuple(dataclasses.replace(v, projection=projection) if v.name == "f0" else v for v in model.variables)
    derived = dataclasses.replace(model, variables=variables).validate()
    instances = [pb.Instance()] * 32
    assert instances_work(compile_model(model), instances).inline
    assert not instances_work(compile_model(derived), instances).inline
