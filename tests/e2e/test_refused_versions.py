"""A running `server serve` refuses a version whose bytes fail their checksum or whose model
fails validation, keeps answering from the previous one, counts it and logs why.

Real server process, client threads calling Predict throughout, on SQLite and PostgreSQL
(the `store_url` fixture). The bad versions are written straight into the tables, each in
one transaction with its alias move, as a publish would (``write_version``).
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
from bnserve.store.model import Model
from bnserve.store.predictor import compile_model
from tests.e2e.serving import PredictLoop, sample_value, scrape, wait_until, write_version
from tests.model_factory import random_model
from tests.reliability import record

FEATURES = 6


def three_state_model(seed: int) -> Model:
    return random_model(np.random.default_rng(seed), n_features=FEATURES, cardinalities=(3, 3))


def unnormalised(model: Model) -> Model:
    """The model with its first node's CPT scaled by 1.5: it fails validation, not its checksum."""
    net = model.networks[0]
    first = net.nodes[0]
    nodes = (dataclasses.replace(first, cpt=first.cpt * 1.5), *net.nodes[1:])
    return dataclasses.replace(model, networks=(dataclasses.replace(net, nodes=nodes), *model.networks[1:]))


def test_bad_versions_are_refused_and_the_previous_keeps_serving(store_url, request):
    backend = "postgresql" if store_url.startswith("postgresql") else "sqlite"
    v1, v4 = three_state_model(1), three_state_model(4)
    with ModelStore(store_url) as store:
        store.publish("m", v1, aliases=["production"])
    rows = np.random.default_rng(0).integers(0, 3, size=(4, FEATURES))
    features = [f"f{i}" for i in range(FEATURES)]
    by_alias = pb.PredictRequest(
        model="m", alias="production", dense=pb.DenseBatch(features=features, codes=rows.ravel().tolist())
    )
    expected = {1: compile_model(v1).predict_proba(rows), 4: compile_model(v4).predict_proba(rows)}

    with (
        Server(store_url, metrics=True, extra=("--poll-seconds", "0.3", "--log-level", "INFO")) as server,
        PredictLoop(server.target, by_alias, threads=2) as calls,
        grpc.insecure_channel(server.target) as channel,
    ):
        stub = predictor_pb2_grpc.PredictorStub(channel)
        calls.wait_for(lambda o: len(o) >= 10, "10 answers")

        def failures() -> float:
            return (
                sample_value(scrape(server.metrics_port), "bnserve_model_load_failures_total", model="m")
                if "bnserve_model_load_failures_total{" in scrape(server.metrics_port)
                else 0.0
            )

        # version 2: a CPT byte flipped, published with the production alias moved to it
        write_version(store_url, "m", 2, three_state_model(2), flip_a_cpt_byte=True, alias="production")
        wait_until(lambda: failures() == 1, "version 2 refused")
        # version 3: checksums right, but a CPT that does not sum to 1
        write_version(store_url, "m", 3, unnormalised(three_state_model(3)))
        wait_until(lambda: failures() == 2, "version 3 refused")
        mark = len(calls.snapshot())
        calls.wait_for(lambda o: len(o) >= mark + 10, "10 answers after both refusals")
        while_refused = calls.snapshot()[mark:]

        for version in (2, 3):  # asked for by number: refused, saying why
            with pytest.raises(grpc.RpcError) as err:
                stub.Predict(pb.PredictRequest(model="m", version=version, dense=by_alias.dense))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert f"version {version} was refused at load" in err.value.details()
        default = stub.Predict(pb.PredictRequest(model="m", dense=by_alias.dense))
        assert default.version == 1  # no selector: production, held at the last good version
        listing = stub.ListModels(pb.ListModelsRequest()).models[0]
        assert list(listing.versions) == [1, 2, 3] and dict(listing.aliases) == {"production": 1}

        # a good version 4 moves production again, and is served
        with ModelStore(store_url) as store:
            assert store.publish("m", v4, aliases=["production"]) == 4
        calls.wait_for(lambda o: o[-1].version == 4, "version 4")
        outcomes = calls.stop()
        text = scrape(server.metrics_port)
        server.stop()
        log = server.output()

    assert calls.codes() == {"OK": len(outcomes)}
    assert {o.version for o in while_refused} == {1}
    assert {o.version for o in outcomes} == {1, 4}
    for o in outcomes:
        np.testing.assert_allclose(o.probabilities, expected[o.version], rtol=0, atol=1e-12)
    assert sample_value(text, "bnserve_model_load_failures_total", model="m") == 2
    assert sample_value(text, "bnserve_model_info", model="m", version="4", aliases="production") == 1
    assert "refused m version 2 at load: model 'm' version 2: CPT of node" in log
    assert "refused m version 3 at load: " in log and "sum" in log.split("refused m version 3 at load: ")[1]
    assert "alias production of m stays at version 1: version 2 was refused at load" in log
    assert "Traceback" not in log
    record(
        "versions refused at load (checksum, validation) while serving",
        backend,
        requests=len(outcomes),
        errors=0,
        faults=2,
        versions=4,
        lost=0,
        refused=2,
    )
