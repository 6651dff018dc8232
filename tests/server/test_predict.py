"""The real server (in this process, on a real port) against the slow reference P(c | x).

Random DAGs (the class may have parents), random CPTs, random missing values; every
wire form (friendly instances, dense codes) must equal the reference within 1e-9.
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.api import predictor_pb2 as pb
from server.api import predictor_pb2_grpc
from server.app import App, ServeConfig
from store.model import MEAN_JOINT, MEAN_POSTERIOR
from store.sql import ModelStore
from tests.model_factory import random_model
from tests.reference import reference_proba

N_MODELS = 12


def _models():
    rng = np.random.default_rng(7)
    out = {}
    for i in range(N_MODELS):
        if i % 4 == 3:
            combination = MEAN_JOINT if i % 8 == 3 else MEAN_POSTERIOR
            out[f"m{i}"] = random_model(rng, n_features=int(rng.integers(1, 6)), n_networks=3,
                                        combination=combination, all_features=False)
        else:
            out[f"m{i}"] = random_model(rng, n_features=int(rng.integers(1, 7)))
    return out


MODELS = _models()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    with ModelStore(url) as store:
        for name, model in MODELS.items():
            store.publish(name, model)
    app = App(ServeConfig(store_url=url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=60)).start()
    assert app.repository.wait_ready(30)
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    yield predictor_pb2_grpc.PredictorStub(channel), app
    channel.close()
    app.stop()


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

    # dense, with the feature columns in a random order
    perm = data.draw(st.permutations(range(len(model.features))))
    dense = pb.DenseBatch(features=[model.features[j].name for j in perm], codes=codes[:, perm].ravel().tolist())
    answer = stub.Predict(pb.PredictRequest(model=name, dense=dense))
    np.testing.assert_allclose([p.probabilities for p in answer.predictions], expected, rtol=0, atol=1e-9)
    assert [p.label for p in answer.predictions] == [model.class_variable.states[i] for i in expected.argmax(axis=1)]


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

    def friendly(values):
        return pb.PredictRequest(model=name, instances=[pb.Instance(values=values)])

    bad = [
        (friendly({"zz": "a"}), "'zz'"),
        (friendly({f0.name: "nope"}), "'nope'"),
        (friendly({"class": "x"}), "class"),
        (dense([f0.name, f1.name], [0, 0, 0]), "multiple"),
        (dense([f0.name], [f0.cardinality]), f0.name),
        (dense([f0.name], [-2]), f0.name),
        (dense([f0.name, f0.name], [0, 0]), f0.name),
        (dense(["zz"], [0]), "'zz'"),
        (dense([], [1]), "no features"),
        (pb.PredictRequest(model=name, instances=[pb.Instance()], dense=pb.DenseBatch(features=[f0.name], codes=[0])),
         "not both"),
        (pb.PredictRequest(model=name, version=-3), "-3"),
    ]
    for request, culprit in bad:
        code, details = _status(lambda: stub.Predict(request))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (request, code, details)
        assert culprit in details, (request, details)


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
        assert [(v.name, v.role, tuple(v.states)) for v in meta.variables] == [
            (v.name, v.role, v.states) for v in model.variables
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
