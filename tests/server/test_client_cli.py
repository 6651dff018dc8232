"""`server predict` is bnserve's Client on the command line: a token does not go in plaintext
beyond loopback unless --insecure-token says so, and a reply is bounded and checked before
anything is printed. The CLI runs as a process; the server is the real one (in this
process) or, for replies no real server sends, the hostile Predictor of the Client's tests."""

from __future__ import annotations

import json
import socket
import subprocess

import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from tests.e2e.serving import BIN, run_cli
from tests.facade.test_client_hostile import MIB, _predict, hostile
from tests.in_process_server import running_app
from tests.model_factory import random_model

TOKEN = "predict-cli-token-5d1e"
BEYOND_LOOPBACK = "203.0.113.7:50051"  # TEST-NET-3: never reached, the CLI refuses first


def own_address() -> str:
    """This machine's address on its default route (no packet is sent), or skip."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("203.0.113.7", 9))
        except OSError:
            pytest.skip("no network interface beyond loopback")
        address = s.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("no network interface beyond loopback")
    return address


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_a_token_in_plaintext_beyond_loopback_is_a_usage_error_naming_the_flags(token_file):
    result = run_cli("server", "predict", "--target", BEYOND_LOOPBACK, "--model", "m", "--token-file", str(token_file))
    assert result.returncode == 2, result.stderr
    assert "refusing to send the token in plaintext to 203.0.113.7:50051" in result.stderr
    assert "--tls-ca" in result.stderr and "--insecure-token" in result.stderr
    assert TOKEN not in result.stderr + result.stdout


def test_insecure_token_sends_it_in_plaintext_beyond_loopback(tmp_path, token_file):
    """A real server on this machine's own address, asking for the token: the CLI reaches it
    by that address only with --insecure-token, and the token is what lets the call in."""
    address = own_address()
    model = random_model(np.random.default_rng(3), n_features=2)
    with running_app(tmp_path, {"m": model}, host="0.0.0.0", auth_token_file=str(token_file)) as app:
        target = f"{address}:{app.port}"
        ok = run_cli(
            "server", "predict", "--target", target, "--model", "m", "--token-file", str(token_file), "--insecure-token"
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["model"] == "m"
        refused = run_cli("server", "predict", "--target", target, "--model", "m", "--token-file", str(token_file))
        assert refused.returncode == 2 and "--insecure-token" in refused.stderr
        no_token = run_cli("server", "predict", "--target", target, "--model", "m", "--insecure-token")
        assert no_token.returncode == 1 and "UNAUTHENTICATED" in no_token.stderr


def test_a_reader_that_leaves_early_ends_the_output_quietly(tmp_path):
    """`server predict … | head -c 100`: the reply is larger than the pipe holds and the reader
    closes it after 100 bytes, so printing it breaks the pipe; the command ends with status 0
    and no traceback, as trainer's commands do."""
    model = random_model(np.random.default_rng(5), n_features=2)
    with running_app(tmp_path, {"m": model}) as app:
        instances = " ".join(["--instance '{}'"] * 2000)  # each row prints ~120 bytes: ~240 KB in all
        command = f"{BIN / 'server'} predict --target 127.0.0.1:{app.port} --model m {instances}"
        piped = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {command} 2>{tmp_path / 'err'} | head -c 100 >/dev/null"], timeout=300
        )
    assert piped.returncode == 0
    assert (tmp_path / "err").read_text() == ""


def test_a_good_reply_prints_as_before():
    """One row per instance, as the PredictResponse's JSON (int64 as a string)."""
    with hostile() as target:
        result = run_cli(
            "server", "predict", "--target", target, "--model", "m", "--instance", "a=x", "--instance", '{"a": "y"}'
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "model": "m",
        "version": "1",
        "classes": ["A", "B"],
        "predictions": [{"label": "A", "probabilities": [0.75, 0.25]}, {"label": "B", "probabilities": [0.5, 0.5]}],
    }


@pytest.mark.parametrize(
    "reply, problem",
    [
        (_predict(labels=[0]), "invalid Predict reply: 1 labels for 2 rows"),
        (_predict(proba=[1.5, -0.5, 0.5, 0.5]), "invalid Predict reply: a probability is not in [0, 1]"),
        (_predict(model="n"), "invalid Predict reply: names model 'n', not 'm'"),
        (pb.PredictResponse(model="m", version=1, classes=["A", "B"]), "invalid Predict reply: 0 labels for 2 rows"),
        (
            b"\x1a" + bytes([0x80, 0x80, 0x80, 0x80, 0x01]) + b"\x00" * 16,
            "invalid PredictResponse reply: a field runs past the end",
        ),
    ],
    ids=["too-few-labels", "probability-out-of-range", "other-model", "not-dense", "truncated"],
)
def test_a_malformed_reply_is_an_error_and_nothing_is_printed(reply, problem):
    with hostile(Predict=reply) as target:
        result = run_cli(
            "server", "predict", "--target", target, "--model", "m", "--instance", "a=x", "--instance", "a=y"
        )
    assert result.returncode == 1 and result.stdout == "", result.stdout
    assert f"server: error: {problem}" in result.stderr, result.stderr


def test_a_reply_past_the_receive_bound_is_refused():
    """80 MiB of class names, past the 64 MiB a reply may take: refused, not parsed."""
    big = _predict(classes=["A", "B", *(f"{i:0>1000}" for i in range(80 * MIB // 1000))])
    with hostile(Predict=big) as target:
        result = run_cli(
            "server", "predict", "--target", target, "--model", "m", "--instance", "a=x", "--instance", "a=y"
        )
    assert result.returncode == 1 and result.stdout == ""
    assert "server: error: the Predict reply is larger than max_receive_bytes" in result.stderr, result.stderr


def test_health_exits_0_only_when_serving(tmp_path):
    """`server health` over TLS: SERVING (exit 0) for the server and the Predictor; a service
    the server does not know, a plaintext call to the TLS port, no server: exit 1, one line."""
    from tests.certificates import make_pki

    pki = make_pki(tmp_path / "pki")
    model = random_model(np.random.default_rng(4), n_features=2)
    with running_app(tmp_path, {"m": model}, tls_cert=str(pki.server.cert), tls_key=str(pki.server.key)) as app:
        tls = ["--target", f"localhost:{app.port}", "--tls-ca", str(pki.ca.cert)]
        for service in ([], ["--service", "bnserve.v1.Predictor"]):
            ok = run_cli("server", "health", *tls, *service)
            assert ok.returncode == 0 and ok.stdout == "SERVING\n", ok.stderr
        unknown = run_cli("server", "health", *tls, "--service", "no.such.Service")
        assert unknown.returncode == 1 and unknown.stderr.startswith("server: error: NOT_FOUND"), unknown.stderr
        plaintext = run_cli("server", "health", "--target", f"localhost:{app.port}", "--timeout", "2")
        assert plaintext.returncode == 1 and "UNAVAILABLE" in plaintext.stderr, plaintext.stderr
        port = app.port
    gone = run_cli("server", "health", "--target", f"127.0.0.1:{port}")
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1 and "UNAVAILABLE" in gone.stderr
