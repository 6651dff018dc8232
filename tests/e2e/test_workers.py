"""`server serve --workers 2`: two worker processes on one port, one /metrics for both.

Real processes and ports, on SQLite and PostgreSQL (the `store_url` fixture). Each
client channel below has a TCP connection of its own, so the kernel spreads them over
the workers (SO_REUSEPORT hashes per connection).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import socket
import subprocess
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.multiprocess import MultiProcessCollector

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore, upgrade_store
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import load
from tests.e2e.serving import (
    BIN,
    children,
    environment,
    free_port,
    run_cli,
    sample_value,
    scrape,
    wait_serving,
    wait_until,
)

CHANNELS = 24
CALLS_PER_CHANNEL = 5
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def predicts_served_by(metrics_dir: str, pid: int) -> float:
    """Predict calls one worker counted, read from its own multiprocess file."""
    path = os.path.join(metrics_dir, f"counter_{pid}.db")
    if not os.path.exists(path):
        return 0.0
    for metric in MultiProcessCollector.merge([path]):
        for s in metric.samples:
            if s.name == "grpc_server_handled_total" and s.labels.get("grpc_method") == "Predict":
                return s.value
    return 0.0


@pytest.fixture
def workers(store_url):
    fit = run_cli(
        "trainer",
        "fit",
        "--algo",
        "nb",
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
            "--workers",
            "2",
            "--grace-seconds",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        try:
            wait_serving(channel)
            wait_until(lambda: len(children(proc.pid)) == 2, "two workers")
        except AssertionError:
            proc.kill()
            raise AssertionError("server did not start; its output:\n" + proc.communicate()[0]) from None
        yield store_url, port, metrics_port, proc
    finally:  # workers whose parent is killed here shut themselves down
        channel.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_two_workers_answer_and_count_into_one_metrics_endpoint(workers):
    store_url, port, metrics_port, proc = workers
    pids = children(proc.pid)
    metrics_dir = environment(pids[0])["PROMETHEUS_MULTIPROC_DIR"]
    assert environment(pids[1])["PROMETHEUS_MULTIPROC_DIR"] == metrics_dir

    data = load("builtin:chess")
    names = [v.name for v in data.features]
    expected = compile_model(ModelStore(store_url).load("chess").model).predict_proba(data.X[:CHANNELS])
    calls = 0
    for i in range(CHANNELS):
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            assert (
                health.Check(health_pb2.HealthCheckRequest(service="bnserve.v1.Predictor")).status
                == health_pb2.HealthCheckResponse.SERVING
            )
            request = pb.PredictRequest(model="chess", dense=pb.DenseBatch(features=names, codes=data.X[i].tolist()))
            for _ in range(CALLS_PER_CHANNEL):
                reply = stub.Predict(request)
                calls += 1
                assert (reply.model, reply.version) == ("chess", 1)
                np.testing.assert_allclose(reply.predictions[0].probabilities, expected[i], rtol=0, atol=1e-12)

    served = [predicts_served_by(metrics_dir, pid) for pid in pids]
    assert all(n > 0 for n in served), f"one worker served every connection: {served}"
    assert sum(served) == calls
    text = scrape(metrics_port)
    assert sample_value(text, "grpc_server_handled_total", grpc_method="Predict", grpc_code="OK") == calls
    assert sample_value(text, "grpc_server_started_total", grpc_method="Predict") == calls
    latency_observations = sample_value(text, "grpc_server_handling_seconds_count", grpc_method="Predict")
    assert latency_observations == calls  # one histogram observation per call, summed over the workers
    assert sample_value(text, "bnserve_prediction_rows_total", model="chess") == calls
    assert sample_value(text, "bnserve_model_info", model="chess", version="1", algorithm="nb") == 1
    assert 'pid="' not in text  # every gauge merges across workers, none is per process

    # a worker that dies is replaced; what it counted stays in the sums
    os.kill(pids[0], signal.SIGKILL)
    wait_until(lambda: len(children(proc.pid)) == 2 and pids[0] not in children(proc.pid), "the replacement worker")
    replacement = next(pid for pid in children(proc.pid) if pid not in pids)
    # it has loaded the model once it has set its model-info gauge
    wait_until(
        lambda: os.path.exists(os.path.join(metrics_dir, f"gauge_livemax_{replacement}.db")),
        "the replacement worker's model load",
    )
    assert not os.path.exists(os.path.join(metrics_dir, f"gauge_livemax_{pids[0]}.db"))  # the dead one's is gone
    pids = children(proc.pid)
    text = scrape(metrics_port)
    assert sample_value(text, "grpc_server_handled_total", grpc_method="Predict", grpc_code="OK") == calls
    assert sample_value(text, "bnserve_model_info", model="chess", version="1") == 1

    # SIGTERM to the parent drains both workers; it exits 0 and cleans up
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    output = proc.stdout.read()
    assert "exited (killed by SIGKILL)" in output
    assert output.count("received SIGTERM, shutting down") == 3  # the parent and both workers
    assert "Traceback" not in output
    assert still_running(pids) == [], "workers outlived the parent"
    assert not os.path.exists(metrics_dir)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def still_running(pids: list[int]) -> list[int]:
    """The pids among ``pids`` that still run (zombies count as gone)."""
    alive = []
    for pid in pids:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_new_versions_reach_every_worker(workers):
    store_url, port, metrics_port, proc = workers
    assert (
        run_cli(
            "trainer",
            "fit",
            "--algo",
            "nb",
            "--data",
            "builtin:chess",
            "--name",
            "chess",
            "--store",
            store_url,
            "--alias",
            "production",
        ).returncode
        == 0
    )

    def every_connection_sees_version_2() -> bool:
        for _ in range(12):
            with grpc.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) as channel:
                if predictor_pb2_grpc.PredictorStub(channel).Predict(pb.PredictRequest(model="chess")).version != 2:
                    return False
        return True

    wait_until(every_connection_sees_version_2, "version 2 on every worker")
    text = scrape(metrics_port)
    assert sample_value(text, "bnserve_model_info", model="chess", version="2", aliases="production") == 1
    # version 1 is no longer held: a multiprocess gauge cannot drop it, so it reads 0
    wait_until(
        lambda: sample_value(scrape(metrics_port), "bnserve_model_info", model="chess", version="1") == 0,
        "version 1 released by both workers",
    )


@contextlib.contextmanager
def _held_port(tmp_path) -> Iterator[int]:
    """A port another process's socket listens on (without SO_REUSEPORT), and a new store."""
    upgrade_store(f"sqlite:///{tmp_path / 's.db'}")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_workers_refuse_a_port_held_by_another_process(tmp_path):
    with _held_port(tmp_path) as port:
        result = run_cli(
            "server",
            "serve",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            "-1",
            "--workers",
            "2",
        )
        assert result.returncode == 1
        assert re.search(rf"error: cannot bind gRPC port 127\.0\.0\.1:{port}", result.stderr), result.stderr


@pytest.mark.parametrize("which", ["--port", "--metrics-port"])
def test_one_server_names_a_port_held_by_another_process(tmp_path, which):
    """Issue 15: a busy gRPC port gave a RuntimeError traceback (grpc raises where it returned
    0), a busy metrics port "Address already in use" without the port."""
    with _held_port(tmp_path) as port:
        ports = {"--port": "0", "--metrics-port": "0", which: str(port)}
        result = run_cli(
            "server",
            "serve",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--host",
            "127.0.0.1",
            *[a for flag, value in ports.items() for a in (flag, value)],
        )
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        what = "gRPC port" if which == "--port" else "the metrics port"
        assert re.search(rf"server: error: cannot bind {what} 127\.0\.0\.1:{port}", result.stderr), result.stderr


def test_a_mistyped_sqlite_path_is_refused_not_served_empty(tmp_path):
    """Issue 15: a mistyped SQLite path created an empty store and served nothing."""
    typo = tmp_path / "modles.db"
    result = run_cli("server", "serve", "--store", f"sqlite:///{typo}", "--port", "0", "--metrics-port", "-1")
    assert result.returncode == 1 and not typo.exists()
    assert f"server: error: no store at sqlite:///{typo}: the file {typo} does not exist" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_workers_must_be_a_positive_number(value, tmp_path):
    result = run_cli("server", "serve", "--store", f"sqlite:///{tmp_path / 's.db'}", "--workers", value)
    assert result.returncode == 2 and "--workers" in result.stderr
