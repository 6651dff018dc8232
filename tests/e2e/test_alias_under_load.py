"""`production` moves among new versions while 4 client threads call Predict by that alias.

Real `server serve --poll-seconds 0.2` on SQLite and PostgreSQL (the `store_url` fixture).
Versions 2..7 are published — some with `--alias production` in the publish, some aliased
afterwards (`trainer alias`), one never aliased — and production finally rolls back.

What is guaranteed, and asserted: no call fails; every answer names a version that was
production at some moment (never the one that was not); its probabilities are that
version's own, computed in process from the model as stored; while the alias only moves
forward, each thread's answers never go back to an older version; every move reaches
the clients, the rollback too.
"""

from __future__ import annotations

import numpy as np

from bench.serving import Server
from bnserve.server.api import predictor_pb2 as pb
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from tests.e2e.serving import PredictLoop, run_cli
from tests.model_factory import random_model
from tests.reliability import record

FEATURES = 6
NEVER_ALIASED = 5
ROLLBACK_TO = 3


def three_state_model(seed: int):
    return random_model(np.random.default_rng(seed), n_features=FEATURES, cardinalities=(3, 3))


def test_alias_moves_under_load_lose_nothing_and_answer_from_an_aliased_version(store_url):
    backend = "postgresql" if store_url.startswith("postgresql") else "sqlite"
    rows = np.random.default_rng(0).integers(0, 3, size=(4, FEATURES))
    request = pb.PredictRequest(
        model="m",
        alias="production",
        dense=pb.DenseBatch(features=[f"f{i}" for i in range(FEATURES)], codes=rows.ravel().tolist()),
    )
    store = ModelStore(store_url)
    try:
        store.publish("m", three_state_model(1), aliases=["production"])
        aliased = [1]
        with (
            Server(store_url, extra=("--poll-seconds", "0.2")) as server,
            PredictLoop(server.target, request, threads=4) as calls,
        ):
            calls.wait_for(lambda o: len(o) >= 20, "20 answers")

            def reaches_clients(version: int) -> None:
                mark = len(calls.snapshot())
                calls.wait_for(
                    lambda o: (
                        {x.version for x in o[mark:] if x.code == "OK"} >= {version}
                        and all(x.version == version for x in o[-4:])
                    ),
                    f"production at version {version}",
                )

            for version in range(2, 8):
                seed_model = three_state_model(version)
                if version == NEVER_ALIASED:
                    assert store.publish("m", seed_model) == version
                    continue
                if version % 2 == 0:  # aliased in the publish's own transaction
                    assert store.publish("m", seed_model, aliases=["production"]) == version
                else:  # published, then aliased by the CLI
                    assert store.publish("m", seed_model) == version
                    moved = run_cli("trainer", "alias", "m", str(version), "production", "--store", store_url)
                    assert moved.returncode == 0, moved.stderr
                aliased.append(version)
                reaches_clients(version)
            forward = len(calls.snapshot())
            store.set_alias("m", "production", ROLLBACK_TO)  # a rollback
            aliased.append(ROLLBACK_TO)
            reaches_clients(ROLLBACK_TO)
            outcomes = calls.stop()
        expected = {v: compile_model(store.load("m", version=v).model).predict_proba(rows) for v in range(1, 8)}
    finally:
        store.dispose()

    assert calls.codes() == {"OK": len(outcomes)}
    answered = {o.version for o in outcomes}
    assert answered <= set(aliased) and NEVER_ALIASED not in answered
    assert answered == set(aliased)  # every move reached the clients
    for o in outcomes:
        np.testing.assert_allclose(o.probabilities, expected[o.version], rtol=0, atol=1e-12)
    for thread in range(4):
        before_rollback = [o.version for o in outcomes[:forward] if o.thread == thread]
        assert before_rollback == sorted(before_rollback), f"thread {thread} went back while production moved forward"
    record(
        "alias moves under load (4 client threads by alias production)",
        backend,
        requests=len(outcomes),
        errors=0,
        versions=7,
        lost=0,
        alias_moves=len(aliased) - 1,
        versions_answered=sorted(answered),
    )
