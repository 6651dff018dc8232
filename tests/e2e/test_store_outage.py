"""The store goes away while `server serve` runs on PostgreSQL: it keeps answering, says so, and catches up.

A real server process talks to a real PostgreSQL through ``tests.tcp_proxy.TcpProxy``, in a
database of its own (``pg_fresh_database``); client threads call Predict throughout. The
proxy is cut (every connection closed, new ones refused: the database is down), a new
version is published straight to PostgreSQL meanwhile, and the proxy is restored.
"""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import make_url

from bench.serving import Server
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from tests.e2e.serving import PredictLoop, free_port, run_cli, sample_value, scrape, wait_until
from tests.model_factory import random_model
from tests.reliability import record
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgresql

PASSWORD = "not-a-real-secret-7f3a"  # trust auth ignores it; it must never reach the log
FEATURES = 6


def three_state_model(seed: int):
    """Every variable has 3 states, so one row of codes fits every such model."""
    return random_model(np.random.default_rng(seed), n_features=FEATURES, cardinalities=(3, 3))


def poll_errors(server: Server) -> float:
    return sample_value(scrape(server.metrics_port), "bnserve_store_poll_errors_total")


def test_a_store_outage_loses_no_call_and_the_server_catches_up(pg_fresh_database):
    direct = pg_fresh_database
    v1, v2 = three_state_model(1), three_state_model(2)
    with ModelStore(direct, create=True) as store:
        assert store.publish("m", v1) == 1
    rows = np.random.default_rng(0).integers(0, 3, size=(4, FEATURES))
    request = pb.PredictRequest(
        model="m", dense=pb.DenseBatch(features=[f"f{i}" for i in range(FEATURES)], codes=rows.ravel().tolist())
    )
    expected = {1: compile_model(v1).predict_proba(rows), 2: compile_model(v2).predict_proba(rows)}

    with TcpProxy("127.0.0.1", make_url(direct).port or 5432) as proxy:
        through_proxy = make_url(direct).set(host=proxy.host, port=proxy.port, password=PASSWORD)
        url = through_proxy.render_as_string(hide_password=False)
        with (
            Server(url, metrics=True, extra=("--poll-seconds", "0.5", "--log-level", "INFO")) as server,
            PredictLoop(server.target, request, threads=2, timeout=30) as calls,
        ):
            calls.wait_for(lambda o: len(o) >= 20, "20 answers before the outage")
            errors_before = poll_errors(server)

            proxy.cut()
            cut_at = len(calls.snapshot())
            wait_until(lambda: poll_errors(server) >= errors_before + 2, "two failed polls", timeout=60)
            with ModelStore(direct) as store:  # straight to PostgreSQL, not through the proxy
                assert store.publish("m", v2) == 2
            failed_polls = poll_errors(server)
            wait_until(lambda: poll_errors(server) >= failed_polls + 2, "two more failed polls", timeout=60)
            during = calls.snapshot()[cut_at:]
            assert during, "no call was answered during the outage"

            proxy.restore()
            restored_at = len(calls.snapshot())
            calls.wait_for(
                lambda o: any(x.version == 2 for x in o[restored_at:]), "version 2 after the restore", timeout=60
            )
            calls.wait_for(lambda o: len(o) >= restored_at + 20, "more answers after the restore")
            outcomes = calls.stop()
            text = scrape(server.metrics_port)
            server.stop()
            log = server.output()

    assert {o.code for o in outcomes} == {"OK"}, calls.codes()
    assert {o.version for o in during} == {1}  # version 2 was in the store, but out of reach
    for o in outcomes:
        np.testing.assert_allclose(o.probabilities, expected[o.version], rtol=0, atol=1e-12)
    assert sample_value(text, "bnserve_store_poll_errors_total") >= failed_polls + 2
    assert sample_value(text, "bnserve_model_info", model="m", version="2") == 1
    assert "store poll failed, still serving what is loaded: listing models: the store failed:" in log
    assert "connection" in log  # the driver's reason: the connection failed or was closed
    assert "loaded m version 2" in log
    assert PASSWORD not in log
    assert "Traceback" not in log
    record(
        "store outage while serving (PostgreSQL behind a cut TCP proxy)",
        "postgresql",
        requests=len(outcomes),
        errors=0,
        faults=1,
        versions=2,
        lost=0,
        calls_during_outage=len(during),
        failed_polls=int(sample_value(text, "bnserve_store_poll_errors_total")),
        proxy_connections_refused=proxy.refused,
    )


def test_a_server_pointed_at_a_dead_store_refuses_to_start(pg_fresh_database):
    """Nothing listens at the address: `server serve` exits 1 at once, naming the store
    (password hidden) and the driver's reason; it never reports SERVING with nothing loaded."""
    dead = make_url(pg_fresh_database).set(port=free_port(), password=PASSWORD).render_as_string(hide_password=False)
    result = run_cli("server", "serve", "--store", dead, "--host", "127.0.0.1", "--port", "0", "--metrics-port", "-1")
    assert result.returncode == 1, result.stderr
    shown = make_url(dead).render_as_string(hide_password=True)
    assert f"error: opening the store at {shown}: the store failed:" in result.stderr
    assert "Connection refused" in result.stderr or "connection" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout
    record(
        "server started against a dead store address",
        "postgresql",
        faults=1,
        errors=0,
        lost=0,
        exit_code=result.returncode,
    )


def test_a_store_cut_before_the_server_starts_is_the_same_refusal(pg_fresh_database):
    """The address answers but the database is down (the proxy accepts and closes): exit 1 too."""
    with TcpProxy("127.0.0.1", make_url(pg_fresh_database).port or 5432) as proxy:
        proxy.cut()
        url = make_url(pg_fresh_database).set(host=proxy.host, port=proxy.port, password=PASSWORD)
        result = run_cli(
            "server",
            "serve",
            "--store",
            url.render_as_string(hide_password=False),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--metrics-port",
            "-1",
        )
    assert result.returncode == 1, result.stderr
    assert "error: opening the store at " in result.stderr and PASSWORD not in result.stderr


def test_a_store_that_hangs_delays_only_the_calls_that_need_it(pg_fresh_database):
    """Issue 17 item 4: a network partition (the proxy accepts and forwards nothing). A call for
    a version not in memory waits for its load, which the store timeouts end (UNAVAILABLE);
    meanwhile calls for loaded versions (one held on demand among them) and health answer as
    before, where they all waited behind that load's lock. The poll that hangs is warned
    about and counted; everything catches up after."""
    direct = pg_fresh_database
    with ModelStore(direct, create=True) as store:
        for seed in (1, 2, 3):
            store.publish("m", three_state_model(seed))
        store.publish("n", three_state_model(4))
    rows = np.random.default_rng(0).integers(0, 3, size=(2, FEATURES))
    dense = pb.DenseBatch(features=[f"f{i}" for i in range(FEATURES)], codes=rows.ravel().tolist())

    with TcpProxy("127.0.0.1", make_url(direct).port or 5432) as proxy:
        url = make_url(direct).set(host=proxy.host, port=proxy.port).render_as_string(hide_password=False)
        flags = (
            "--poll-seconds",
            "0.5",
            "--poll-stall-seconds",
            "1",
            "--log-level",
            "INFO",
            "--store-connect-timeout",
            "2",
            "--store-statement-timeout",
            "2",
        )
        with Server(url, metrics=True, extra=flags) as server, grpc.insecure_channel(server.target) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            assert stub.Predict(pb.PredictRequest(model="m", version=1, dense=dense), timeout=10).version == 1
            stalls = sample_value(scrape(server.metrics_port), "bnserve_store_poll_stalls_total")

            proxy.stall()
            stalled_at = time.monotonic()
            waiting: list = []

            def load_version_2() -> None:
                try:
                    waiting.append(stub.Predict(pb.PredictRequest(model="m", version=2, dense=dense), timeout=120))
                except grpc.RpcError as error:
                    waiting.append(error.code())

            loader = threading.Thread(target=load_version_2, daemon=True)
            loader.start()
            wait_until(
                lambda: sample_value(scrape(server.metrics_port), "bnserve_store_poll_stalls_total") > stalls,
                "the stalled poll counted",
                timeout=30,
            )
            answered = 0
            while loader.is_alive():  # its version is out of reach: the others answer meanwhile
                for selector in ({"version": 1}, {}):  # on demand, and the latest
                    reply = stub.Predict(pb.PredictRequest(model="m", dense=dense, **selector), timeout=5)
                    assert reply.version in (1, 3)
                assert stub.Predict(pb.PredictRequest(model="n", dense=dense), timeout=5).version == 1
                health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
                assert health.status == health_pb2.HealthCheckResponse.SERVING
                answered += 4
                loader.join(0.05)
            assert waiting == [grpc.StatusCode.UNAVAILABLE]  # ended by the store timeouts, not hung
            assert answered > 0

            proxy.restore()
            stall_seconds = time.monotonic() - stalled_at
            reply = stub.Predict(pb.PredictRequest(model="m", version=2, dense=dense), timeout=30)
            assert reply.version == 2
            with ModelStore(direct) as store:
                assert store.publish("n", three_state_model(5)) == 2
            wait_until(
                lambda: stub.Predict(pb.PredictRequest(model="n", dense=dense), timeout=5).version == 2,
                "n version 2 after the partition",
            )
            text = scrape(server.metrics_port)
            server.stop()
            log = server.output()

    assert sample_value(text, "bnserve_store_poll_stalls_total") >= stalls + 1
    assert "store poll still running after 1 s (--poll-stall-seconds): the store may be hanging" in log
    assert "the stalled store poll ended after " in log
    assert "Traceback" not in log
    record(
        "hostile: store hangs while serving (PostgreSQL behind a stalled TCP proxy)",
        "postgresql",
        faults=1,
        errors=0,
        lost=0,
        requests=answered,
        calls_answered_during_stall=answered,
        stall_seconds=round(stall_seconds, 1),
        stalled_polls=int(sample_value(text, "bnserve_store_poll_stalls_total")),
    )
