"""`server serve` with TLS and a bearer token as real processes: flags and BNSERVE_*
environment, `--workers 2` (each worker enforces both), `server predict` against the
secured server, bad flag combinations and files, and no token in the server's log.

Certificates are made by the `openssl` command (tests/certificates.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time

import grpc
import numpy as np
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from tests.certificates import make_pki
from tests.e2e.serving import BIN, children, environment, free_port, run_cli, sample_value, scrape, wait_serving
from tests.model_factory import random_model

TOKEN = "e2e-token-7f3a9c1d5b"
OLD_TOKEN = "e2e-old-token-0b1c"
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
CONNECTIONS = 16


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def store_file(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("m", random_model(np.random.default_rng(5), n_features=3))
    return url


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "token"
    path.write_text(f"{OLD_TOKEN}\n\n  {TOKEN}  \n")
    return path


def tls_credentials(pki, client=None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=pki.ca.cert.read_bytes(),
        private_key=client.key.read_bytes() if client else None,
        certificate_chain=client.cert.read_bytes() if client else None,
    )


def predict_codes_of(metrics_dir: str, pid: int) -> dict[str, float]:
    """grpc_code -> Predict calls one worker handled, from its own multiprocess file."""
    path = os.path.join(metrics_dir, f"counter_{pid}.db")
    codes: dict[str, float] = {}
    if os.path.exists(path):
        for metric in MultiProcessCollector.merge([path]):
            for s in metric.samples:
                if s.name == "grpc_server_handled_total" and s.labels.get("grpc_method") == "Predict":
                    codes[s.labels["grpc_code"]] = codes.get(s.labels["grpc_code"], 0) + s.value
    return codes


class Server:
    """A `server serve` process; ``output()`` stops it (SIGTERM) and returns its log."""

    def __init__(self, store_url: str, *flags: str, env: dict | None = None, workers: int = 1):
        self.port, self.metrics_port = free_port(), free_port()
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [
                str(BIN / "server"),
                "serve",
                "--store",
                store_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--metrics-port",
                str(self.metrics_port),
                "--poll-seconds",
                "60",
                "--grace-seconds",
                "1",
                "--workers",
                str(workers),
                "--log-level",
                "DEBUG",
                *flags,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, **(env or {})),
        )

    def output(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.seek(0)
        return self.log.read()

    def fail(self, why: str):
        return AssertionError(f"{why}; the server's output:\n{self.output()}")


def bearer(token: str):
    return (("authorization", f"Bearer {token}"),)


# ---------------------------------------------------------------------------- two workers


@pytest.fixture(scope="module")
def secured_workers(pki, store_file, token_file):
    """Two workers, TLS and the token from BNSERVE_* environment variables (which the
    workers then get as flags)."""
    server = Server(
        store_file,
        workers=2,
        env={
            "BNSERVE_TLS_CERT": str(pki.server.cert),
            "BNSERVE_TLS_KEY": str(pki.server.key),
            "BNSERVE_AUTH_TOKEN_FILE": str(token_file),
        },
    )
    try:
        with grpc.secure_channel(f"localhost:{server.port}", tls_credentials(pki)) as channel:
            try:
                wait_serving(channel)
                deadline = time.monotonic() + 60
                while len(children(server.process.pid)) != 2:
                    assert time.monotonic() < deadline, "two workers never ran"
                    time.sleep(0.1)
            except AssertionError as exc:
                raise server.fail(str(exc)) from None
        yield server
    finally:
        server.output()


def test_both_workers_enforce_the_token_over_tls(secured_workers, pki):
    server = secured_workers
    pids = children(server.process.pid)
    metrics_dir = environment(pids[0])["PROMETHEUS_MULTIPROC_DIR"]
    before = scrape(server.metrics_port)
    request = pb.PredictRequest(model="m", instances=[pb.Instance()])
    for _ in range(CONNECTIONS):  # each channel its own connection: the kernel spreads them over the workers
        with grpc.secure_channel(f"localhost:{server.port}", tls_credentials(pki), options=OWN_CONNECTION) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            with pytest.raises(grpc.RpcError) as error:
                stub.Predict(request, timeout=10)
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as error:
                stub.Predict(request, timeout=10, metadata=bearer("not-" + TOKEN))
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert stub.Predict(request, timeout=10, metadata=bearer(TOKEN)).model == "m"
            assert stub.Predict(request, timeout=10, metadata=bearer(OLD_TOKEN)).model == "m"
    per_worker = [predict_codes_of(metrics_dir, pid) for pid in pids]
    for codes in per_worker:  # each worker refused some calls and answered others
        assert codes.get("UNAUTHENTICATED", 0) > 0 and codes.get("OK", 0) > 0, per_worker
        assert codes["UNAUTHENTICATED"] == codes["OK"], per_worker  # two of each per connection
    after = scrape(server.metrics_port)

    def count(text, code):
        try:
            return sample_value(text, "grpc_server_handled_total", grpc_method="Predict", grpc_code=code)
        except AssertionError:
            return 0.0

    assert count(after, "UNAUTHENTICATED") - count(before, "UNAUTHENTICATED") == 2 * CONNECTIONS
    assert count(after, "OK") - count(before, "OK") == 2 * CONNECTIONS


def test_a_plaintext_client_cannot_reach_the_workers(secured_workers):
    with grpc.insecure_channel(f"127.0.0.1:{secured_workers.port}") as channel:
        with pytest.raises(grpc.RpcError) as error:
            predictor_pb2_grpc.PredictorStub(channel).Predict(
                pb.PredictRequest(model="m"), timeout=5, metadata=bearer(TOKEN)
            )
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE


def test_predict_cli_against_the_secured_workers(secured_workers, pki, token_file):
    target = f"localhost:{secured_workers.port}"
    ok = run_cli(
        "server",
        "predict",
        "--target",
        target,
        "--model",
        "m",
        "--tls-ca",
        str(pki.ca.cert),
        "--token-file",
        str(token_file),
        "--wait",
        "30",
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["model"] == "m"
    # the token file from the environment; the first token in it (the old one) is still accepted
    env = dict(os.environ, BNSERVE_TOKEN_FILE=str(token_file))
    ok = run_cli("server", "predict", "--target", target, "--model", "m", "--tls-ca", str(pki.ca.cert), env=env)
    assert ok.returncode == 0, ok.stderr
    no_token = run_cli("server", "predict", "--target", target, "--model", "m", "--tls-ca", str(pki.ca.cert))
    assert no_token.returncode == 1 and "UNAUTHENTICATED" in no_token.stderr
    plaintext = run_cli("server", "predict", "--target", target, "--model", "m", "--token-file", str(token_file))
    assert plaintext.returncode == 1 and "UNAVAILABLE" in plaintext.stderr
    # by IP, checked against the name the certificate holds
    other_name = run_cli(
        "server",
        "predict",
        "--target",
        f"127.0.0.1:{secured_workers.port}",
        "--model",
        "m",
        "--tls-ca",
        str(pki.ca.cert),
        "--tls-server-name",
        "localhost",
        "--token-file",
        str(token_file),
    )
    assert other_name.returncode == 0, other_name.stderr


# ---------------------------------------------------------------------------- one process, mutual TLS


def test_predict_cli_waits_for_a_mutual_tls_server_and_the_log_holds_no_token(pki, store_file, token_file):
    server = Server(
        store_file,
        "--tls-cert",
        str(pki.server.cert),
        "--tls-key",
        str(pki.server.key),
        "--tls-client-ca",
        str(pki.ca.cert),
        "--auth-token-file",
        str(token_file),
    )
    try:
        client = ["--tls-ca", str(pki.ca.cert), "--tls-cert", str(pki.client.cert), "--tls-key", str(pki.client.key)]
        # started at once: --wait polls health over mutual TLS until the server is SERVING
        ok = run_cli(
            "server",
            "predict",
            "--target",
            f"localhost:{server.port}",
            "--model",
            "m",
            *client,
            "--token-file",
            str(token_file),
            "--wait",
            "30",
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["version"] == "1"  # int64 in JSON is a string
        bad = run_cli(
            "server",
            "predict",
            "--target",
            f"localhost:{server.port}",
            "--model",
            "m",
            "--tls-ca",
            str(pki.ca.cert),
            "--tls-cert",
            str(pki.other_client.cert),
            "--tls-key",
            str(pki.other_client.key),
            "--token-file",
            str(token_file),
        )
        assert bad.returncode == 1 and "UNAVAILABLE" in bad.stderr
        unauthenticated = run_cli("server", "predict", "--target", f"localhost:{server.port}", "--model", "m", *client)
        assert unauthenticated.returncode == 1 and "UNAUTHENTICATED" in unauthenticated.stderr
    finally:
        output = server.output()
    assert server.process.returncode == 0, output
    assert "mutual TLS" in output and "bearer token required" in output, output
    assert TOKEN not in output and OLD_TOKEN not in output
    assert "PRIVATE KEY" not in output and "Traceback" not in output


# ---------------------------------------------------------------------------- bad flags and files


@pytest.mark.parametrize(
    "args, flag",
    [
        (["serve", "--tls-cert", "c.pem"], "--tls-cert needs --tls-key"),
        (["serve", "--tls-key", "k.pem"], "--tls-key needs --tls-cert"),
        (["serve", "--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert"),
        (["serve", "--auth-token-file", ""], "--auth-token-file"),
        (["predict", "--model", "m", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "--tls-cert needs --tls-ca"),
        (["predict", "--model", "m", "--tls-ca", "ca.pem", "--tls-key", "k.pem"], "--tls-key needs --tls-cert"),
        (["predict", "--model", "m", "--tls-server-name", "x"], "--tls-server-name needs --tls-ca"),
    ],
    ids=[
        "cert-alone",
        "key-alone",
        "client-ca-alone",
        "empty-token-path",
        "predict-cert-no-ca",
        "predict-key-alone",
        "predict-name-no-ca",
    ],
)
def test_bad_flag_combinations_are_usage_errors(args, flag):
    result = run_cli("server", *args)
    assert result.returncode == 2 and flag in result.stderr, result.stderr


def test_bad_environment_combination_is_a_usage_error(pki):
    env = dict(os.environ, BNSERVE_TLS_KEY=str(pki.server.key))
    result = run_cli("server", "serve", env=env)
    assert result.returncode == 2 and "--tls-key needs --tls-cert" in result.stderr
    assert "BNSERVE_TLS_CERT" in result.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_missing_certificate_file_fails_the_start_naming_it(pki, tmp_path, workers):
    missing = tmp_path / "missing.pem"
    result = run_cli(
        "server",
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--metrics-port",
        "-1",
        "--workers",
        workers,
        "--tls-cert",
        str(missing),
        "--tls-key",
        str(pki.server.key),
    )
    assert result.returncode == 1
    assert f"error: --tls-cert {missing}: cannot read it" in result.stderr, result.stderr


def test_an_empty_token_file_fails_the_start(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("\n  \n")
    result = run_cli(
        "server",
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--metrics-port",
        "-1",
        "--auth-token-file",
        str(empty),
    )
    assert result.returncode == 1 and f"error: --auth-token-file {empty}: holds no token" in result.stderr


def test_predict_cli_names_a_missing_file(tmp_path, pki):
    result = run_cli("server", "predict", "--model", "m", "--tls-ca", str(tmp_path / "ca.pem"))
    assert result.returncode == 1 and f"--tls-ca {tmp_path / 'ca.pem'}: cannot read it" in result.stderr
    result = run_cli("server", "predict", "--model", "m", "--tls-ca", str(pki.ca.key))
    assert result.returncode == 1 and f"--tls-ca {pki.ca.key}: no PEM certificate" in result.stderr
    result = run_cli("server", "predict", "--model", "m", "--token-file", str(tmp_path / "token"))
    assert result.returncode == 1 and f"--token-file {tmp_path / 'token'}: cannot read it" in result.stderr
