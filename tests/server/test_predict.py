"""The real server (in this process, on a real port) against the slow reference P(c | x).

Random DAGs (the class may have parents), random CPTs, random missing values, nominal
and numeric features; every wire form (labels, raw numbers as text or as doubles, dense
codes, dense raw values) must equal the reference within 1e-9.
"""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.model import MEAN_JOINT, MEAN_POSTERIOR, NUMERIC, PRODUCT_JOINT
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reference import reference_proba

N_MODELS = 12


def _models():
    rng = np.random.default_rng(7)
    out = {}
    for i in range(N_MODELS):
        if i % 4 == 3:
            combination = MEAN_JOINT if i % 8 == 3 else MEAN_POSTERIOR
            out[f"m{i}"] = random_model(
                rng, n_features=int(rng.integers(1, 6)), n_networks=3, combination=combination, all_features=False
            )
        else:
            out[f"m{i}"] = random_model(rng, n_features=int(rng.integers(1, 7)), numeric=0.5 * (i % 2))
    out["pooled"] = random_model(rng, n_features=4, n_networks=3, combination=PRODUCT_JOINT, all_features=False)
    return out


MODELS = _models()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store"), MODELS) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield predictor_pb2_grpc.PredictorStub(channel), app


def _rows(draw, model, n):
    return np.array(
        [[draw(st.integers(-1, v.cardinality - 1)) for v in model.features] for _ in range(n)], dtype=np.int64
    ).reshape(n, len(model.features))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_wire_form_equals_the_reference(server, data):
    stub, _ = server
    name = data.draw(st.sampled_from(sorted(MODELS)))
    model = MODELS[name]
    codes = _rows(data.draw, model, data.draw(st.integers(1, 5)))
    expected = reference_proba(model, codes)

    instances = [
        pb.Instance(values={v.name: v.states[c] for v, c in zip(model.features, row) if c >= 0}) for row in codes
    ]
    friendly = stub.Predict(pb.PredictRequest(model=name, instances=instances))
    np.testing.assert_allclose([p.probabilities for p in friendly.predictions], expected, rtol=0, atol=1e-9)
    assert list(friendly.classes) == list(model.class_variable.states)

    # raw numbers for the numeric features, as text or as doubles
    as_text = data.draw(st.booleans())
    instances = []
    for row in codes:
        values, numbers = {}, {}
        for v, c in zip(model.features, row):
            if c < 0:
                continue
            if v.kind != NUMERIC:
                values[v.name] = v.states[c]
            elif as_text:
                values[v.name] = repr(_number_in(v, c, data.draw))
            else:
                numbers[v.name] = _number_in(v, c, data.draw)
        instances.append(pb.Instance(values=values, numbers=numbers))
    raw = stub.Predict(pb.PredictRequest(model=name, instances=instances))
    np.testing.assert_allclose([p.probabilities for p in raw.predictions], expected, rtol=0, atol=1e-9)

    # dense, with the feature columns in a random order
    perm = data.draw(st.permutations(range(len(model.features))))
    dense = pb.DenseBatch(features=[model.features[j].name for j in perm], codes=codes[:, perm].ravel().tolist())
    answer = stub.Predict(pb.PredictRequest(model=name, dense=dense))
    np.testing.assert_allclose([p.probabilities for p in answer.predictions], expected, rtol=0, atol=1e-9)
    assert [p.label for p in answer.predictions] == [model.class_variable.states[i] for i in expected.argmax(axis=1)]

    # the same, answered as two flat arrays
    flat = stub.Predict(pb.PredictRequest(model=name, dense=dense, dense_response=True))
    assert len(flat.predictions) == 0 and list(flat.classes) == list(model.class_variable.states)
    np.testing.assert_allclose(np.reshape(flat.dense.probabilities, expected.shape), expected, rtol=0, atol=1e-9)
    assert [flat.classes[i] for i in flat.dense.labels] == [p.label for p in answer.predictions]

    # dense raw values: numbers for numeric features, codes for nominal ones, NaN missing
    values = [
        math.nan if c < 0 else _number_in(v, c, data.draw) if v.kind == NUMERIC else float(c)
        for row in codes[:, perm]
        for v, c in zip((model.features[j] for j in perm), row)
    ]
    dense = pb.DenseBatch(features=[model.features[j].name for j in perm], values=values)
    answer = stub.Predict(pb.PredictRequest(model=name, dense=dense))
    np.testing.assert_allclose([p.probabilities for p in answer.predictions], expected, rtol=0, atol=1e-9)


def _number_in(variable, code: int, draw) -> float:
    """A raw number that falls in interval ``code`` of a numeric variable, edges included."""
    cuts = variable.cuts
    low = cuts[code - 1] if code > 0 else -math.inf
    high = cuts[code] if code < len(cuts) else math.inf
    choices = [x for x in (high, (low + high) / 2, low + 1e-9, high - 1e-3, low + 7.0) if low < x <= high]
    return draw(st.sampled_from(choices or [high]))


def _status(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def test_bad_requests_get_invalid_argument_naming_the_culprit(server):
    stub, _ = server
    name = next(n for n, m in MODELS.items() if len(m.features) >= 2 and m.combination == "single")
    f0, f1 = MODELS[name].features[:2]

    def dense(features, codes):
        return pb.PredictRequest(model=name, dense=pb.DenseBatch(features=features, codes=codes))

    def friendly(values, unknown=""):
        return pb.PredictRequest(model=name, instances=[pb.Instance(values=values)], unknown=unknown)

    bad = [
        (friendly({"zz": "a"}), "'zz'"),
        (friendly({f0.name: "nope"}, "error"), "'nope'"),
        (friendly({"class": "x"}), "class"),
        (dense([f0.name, f1.name], [0, 0, 0]), "multiple"),
        (dense([f0.name], [f0.cardinality]), f0.name),
        (dense([f0.name], [-2]), f0.name),
        (dense([f0.name, f0.name], [0, 0]), f0.name),
        (dense(["zz"], [0]), "'zz'"),
        (dense([], [1]), "no features"),
        (
            pb.PredictRequest(
                model=name, instances=[pb.Instance()], dense=pb.DenseBatch(features=[f0.name], codes=[0])
            ),
            "not both",
        ),
        (pb.PredictRequest(model=name, version=-3), "-3"),
        (
            pb.PredictRequest(model=name, instances=[pb.Instance(numbers={f0.name: 1.0})])
            if f0.kind != NUMERIC
            else friendly({f0.name: "abc"}),
            f0.name,
        ),
        (pb.PredictRequest(model=name, dense=pb.DenseBatch(features=[f0.name], codes=[0], values=[0.0])), "both"),
    ]
    if f0.kind != NUMERIC:  # the value as the client wrote it, not numpy's repr (np.float64(inf))
        values = pb.DenseBatch(features=[f0.name], values=[float("inf")])
        bad.append((pb.PredictRequest(model=name, dense=values), "row 0 has value inf,"))
    for request, culprit in bad:
        code, details = _status(lambda: stub.Predict(request))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (request, code, details)
        assert culprit in details, (request, details)


def test_numeric_features_take_numbers_and_unseen_labels_count_as_missing_unless_refused(server):
    stub, _ = server
    name = next(
        n for n, m in MODELS.items() if any(v.kind == NUMERIC for v in m.features) and m.combination == "single"
    )
    model = MODELS[name]
    x = next(v for v in model.features if v.kind == NUMERIC)
    last = len(x.cuts)

    def proba(**instance):
        reply = stub.Predict(pb.PredictRequest(model=name, instances=[pb.Instance(**instance)]))
        return list(reply.predictions[0].probabilities)

    edge = reference_proba(model, _row(model, {x.name: last}))[0].tolist()
    assert proba(values={x.name: "1e308"}) == pytest.approx(edge, abs=1e-12)
    assert proba(numbers={x.name: math.inf}) == pytest.approx(edge, abs=1e-12)
    first = reference_proba(model, _row(model, {x.name: 0}))[0].tolist()
    assert proba(numbers={x.name: -1e308}) == pytest.approx(first, abs=1e-12)
    missing = reference_proba(model, _row(model, {}))[0].tolist()
    assert proba(numbers={x.name: math.nan}) == pytest.approx(missing, abs=1e-12)
    assert proba(values={x.name: x.states[last]}) == pytest.approx(edge, abs=1e-12)
    code, details = _status(lambda: proba(values={x.name: "nan"}))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "or a number" in details
    for text in ("١٣", "1_000", "１２", "\xa012"):  # Python's float reads each; only ASCII decimals are numbers
        code, details = _status(lambda: proba(values={x.name: text}))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and repr(text) in details, (text, details)
    assert proba(values={x.name: " 1e308 "}) == pytest.approx(edge, abs=1e-12)

    nominal = next((v for m in MODELS.values() for v in m.features if v.kind != NUMERIC), None)
    owner = next(n for n, m in MODELS.items() if nominal in m.features)
    unseen = pb.PredictRequest(model=owner, instances=[pb.Instance(values={nominal.name: "never seen"})])
    expected = reference_proba(MODELS[owner], _row(MODELS[owner], {}))[0]
    np.testing.assert_allclose(stub.Predict(unseen).predictions[0].probabilities, expected, atol=1e-9)
    unseen.unseen_as_missing = True  # deprecated: what is now the default
    np.testing.assert_allclose(stub.Predict(unseen).predictions[0].probabilities, expected, atol=1e-9)
    unseen.unknown = "error"
    code, details = _status(lambda: stub.Predict(unseen))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "contradicts unknown 'error'" in details
    unseen.unseen_as_missing = False
    code, details = _status(lambda: stub.Predict(unseen))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"feature {nominal.name!r} has no state 'never seen'; allowed: " in details
    unseen.unknown = "ignore"
    code, details = _status(lambda: stub.Predict(unseen))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "unknown must be one of missing, error, got 'ignore'" in details


def _row(model, codes_by_name: dict) -> np.ndarray:
    return np.array([[codes_by_name.get(v.name, -1) for v in model.features]], dtype=np.int64)


def test_unknown_model_version_or_alias_is_not_found(server):
    stub, _ = server
    assert _status(lambda: stub.Predict(pb.PredictRequest(model="nope")))[0] == grpc.StatusCode.NOT_FOUND
    assert _status(lambda: stub.Predict(pb.PredictRequest(model="m0", version=99)))[0] == grpc.StatusCode.NOT_FOUND
    assert _status(lambda: stub.Predict(pb.PredictRequest(model="m0", alias="staging")))[0] == grpc.StatusCode.NOT_FOUND
    meta = lambda: stub.GetModelMetadata(pb.GetModelMetadataRequest(model="nope"))  # noqa: E731
    assert _status(meta)[0] == grpc.StatusCode.NOT_FOUND


def test_empty_batch_is_an_empty_answer(server):
    stub, _ = server
    reply = stub.Predict(pb.PredictRequest(model="m1"))
    assert reply.version == 1 and len(reply.predictions) == 0


def test_metadata_carries_the_whole_model(server):
    stub, _ = server
    for name, model in MODELS.items():
        meta = stub.GetModelMetadata(pb.GetModelMetadataRequest(model=name, include_parameters=True))
        assert meta.combination == model.combination and meta.class_variable == "class"
        assert [(v.name, v.role, tuple(v.states), v.kind, tuple(v.cuts)) for v in meta.variables] == [
            (v.name, v.role, v.states, v.kind, v.cuts) for v in model.variables
        ]
        arcs = [(a.network, a.parent, a.child) for a in meta.arcs]
        assert arcs == [(i, p, c) for i, net in enumerate(model.networks) for p, c in net.arcs]
        for cpt in meta.cpts:
            node = model.networks[cpt.network].node(cpt.node)
            assert tuple(cpt.parents) == node.parents
            np.testing.assert_array_equal(np.array(cpt.values).reshape(tuple(cpt.shape)), node.cpt)
        assert len(meta.cpts) == sum(len(net.nodes) for net in model.networks)
        without = stub.GetModelMetadata(pb.GetModelMetadataRequest(model=name))
        assert len(without.cpts) == 0 and len(without.arcs) == len(meta.arcs)


def test_list_models(server):
    stub, _ = server
    reply = stub.ListModels(pb.ListModelsRequest())
    assert [m.name for m in reply.models] == sorted(MODELS)
    assert all(list(m.versions) == [1] and m.latest_version == 1 for m in reply.models)


def test_a_model_marked_float32_is_served_from_float32_tables(tmp_path):
    """The server compiles the tables in the dtype the model's metadata chose (trainer
    --precision): its answers are those tables' and within the recorded bound of float64's."""
    from bnserve.store.predictor import compile_model
    from bnserve.store.predictor.precision import with_table_precision

    model = with_table_precision(random_model(np.random.default_rng(5), n_features=6), "float32")
    rows = np.random.default_rng(6).integers(0, 2, (50, 6))
    rows = np.minimum(rows, [v.cardinality - 1 for v in model.features])
    with running_app(tmp_path, {"m": model}) as app:
        assert app.repository.get("m")[0].compiled.dtype == np.float32
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            reply = stub.Predict(
                pb.PredictRequest(
                    model="m",
                    dense=pb.DenseBatch(features=[v.name for v in model.features], codes=rows.ravel().tolist()),
                )
            )
    got = np.array([p.probabilities for p in reply.predictions])
    np.testing.assert_allclose(got, compile_model(model).predict_proba(rows), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        got, reference_proba(model, rows), rtol=0, atol=model.metadata["table_precision"]["bound"]
    )
