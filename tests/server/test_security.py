"""TLS, mutual TLS and the bearer token on the real server (in this process, on a real
port), with certificates the `openssl` command makes for the test (tests/certificates.py).

- TLS: a client trusting the CA gets answers; a plaintext client, or one trusting
  another CA, gets UNAVAILABLE (the handshake fails).
- Mutual TLS: only a client presenting a certificate the client CA signed gets answers.
- Token: every call but health needs ``authorization: Bearer <a listed token>``; the
  others fail with UNAUTHENTICATED and are counted as such in /metrics.
"""

from __future__ import annotations

import itertools
import os
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from tritonclient.grpc import service_pb2 as triton_pb
from tritonclient.grpc import service_pb2_grpc as triton_grpc

from bnserve.server.api import diagnostics_pb2, diagnostics_pb2_grpc, predictor_pb2_grpc
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.server.security import UNAUTHENTICATED_MESSAGE, SecurityConfigError, TokenFile, load_tls, parse_tokens
from bnserve.store.db import upgrade_store
from tests.certificates import make_pki
from tests.e2e.serving import sample_value, scrape
from tests.in_process_server import running_app
from tests.model_factory import random_model

MODEL = random_model(np.random.default_rng(3), n_features=3)
TOKENS = ("first-token-Aa0_.~+/=", "second-token-Zz9")
TOKEN_FILE_TEXT = f"\n  {TOKENS[0]}  \n\n\t{TOKENS[1]}\n\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_channel(port: int, ca, client=None, **kwargs) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.cert.read_bytes(),
        private_key=client.key.read_bytes() if client else None,
        certificate_chain=client.cert.read_bytes() if client else None,
    )
    return grpc.secure_channel(f"localhost:{port}", credentials, **kwargs)


def predict(channel: grpc.Channel, metadata=None, timeout: float = 10):
    request = pb.PredictRequest(model="m", instances=[pb.Instance()])
    return predictor_pb2_grpc.PredictorStub(channel).Predict(request, timeout=timeout, metadata=metadata)


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value.code()


# ---------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def tls_server(pki, tmp_path_factory):
    with running_app(
        tmp_path_factory.mktemp("store"), {"m": MODEL}, tls_cert=str(pki.server.cert), tls_key=str(pki.server.key)
    ) as app:
        yield app


def test_tls_client_trusting_the_ca_gets_predictions(tls_server, pki):
    with tls_channel(tls_server.port, pki.ca) as channel:
        reply = predict(channel)
        assert (reply.model, reply.version) == ("m", 1)
        assert len(reply.predictions) == 1
    # the certificate names 127.0.0.1 too
    credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert.read_bytes())
    with grpc.secure_channel(f"127.0.0.1:{tls_server.port}", credentials) as channel:
        assert predict(channel).model == "m"


def test_tls_health_and_reflection_work_over_tls(tls_server, pki):
    with tls_channel(tls_server.port, pki.ca) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        assert "bnserve.v1.Predictor" in ProtoReflectionDescriptorDatabase(channel).get_services()


def test_plaintext_client_fails_on_a_tls_port(tls_server):
    with grpc.insecure_channel(f"127.0.0.1:{tls_server.port}") as channel:
        assert code_of(lambda: predict(channel, timeout=5)) == grpc.StatusCode.UNAVAILABLE


def test_client_trusting_another_ca_fails(tls_server, pki):
    with tls_channel(tls_server.port, pki.other_ca) as channel:
        assert code_of(lambda: predict(channel, timeout=5)) == grpc.StatusCode.UNAVAILABLE


def test_tls_server_accepts_a_client_certificate_without_asking_for_one(tls_server, pki):
    with tls_channel(tls_server.port, pki.ca, client=pki.other_client) as channel:
        assert predict(channel).model == "m"  # no --tls-client-ca: client certificates are not checked


# ---------------------------------------------------------------------------- mutual TLS


@pytest.fixture(scope="module")
def mtls_server(pki, tmp_path_factory):
    with running_app(
        tmp_path_factory.mktemp("store"),
        {"m": MODEL},
        tls_cert=str(pki.server.cert),
        tls_key=str(pki.server.key),
        tls_client_ca=str(pki.ca.cert),
    ) as app:
        yield app


def test_mtls_client_with_a_ca_signed_certificate_works(mtls_server, pki):
    with tls_channel(mtls_server.port, pki.ca, client=pki.client) as channel:
        assert predict(channel).model == "m"


def test_mtls_client_without_a_certificate_fails(mtls_server, pki):
    with tls_channel(mtls_server.port, pki.ca) as channel:
        assert code_of(lambda: predict(channel, timeout=5)) == grpc.StatusCode.UNAVAILABLE


def test_mtls_client_with_a_certificate_from_another_ca_fails(mtls_server, pki):
    with tls_channel(mtls_server.port, pki.ca, client=pki.other_client) as channel:
        assert code_of(lambda: predict(channel, timeout=5)) == grpc.StatusCode.UNAVAILABLE


def test_mtls_health_needs_the_client_certificate_too(mtls_server, pki):
    """mTLS guards the whole port: probes must present a certificate (or use TCP)."""
    with tls_channel(mtls_server.port, pki.ca) as channel:
        check = lambda: health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)  # noqa
        assert code_of(check) == grpc.StatusCode.UNAVAILABLE


# ---------------------------------------------------------------------------- bearer token


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("store")
    token_file = directory / "tokens"
    token_file.write_text(TOKEN_FILE_TEXT)
    with running_app(directory, {"m": MODEL}, auth_token_file=str(token_file), metrics_port=0) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield app, channel


def bearer(token: str):
    return (("authorization", f"Bearer {token}"),)


def protected_calls(channel: grpc.Channel):
    """One call to every protected method: (service, method, call(metadata))."""
    predictor = predictor_pb2_grpc.PredictorStub(channel)
    diagnostics = diagnostics_pb2_grpc.DiagnosticsStub(channel)
    inference = triton_grpc.GRPCInferenceServiceStub(channel)
    infer = triton_pb.ModelInferRequest(model_name="m")
    for variable in MODEL.features:
        tensor = infer.inputs.add(name=variable.name, datatype="BYTES", shape=[1])
        tensor.contents.bytes_contents.append(variable.states[0].encode())
    return [
        (
            "bnserve.v1.Predictor",
            "Predict",
            lambda md: predictor.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()]), metadata=md),
        ),
        (
            "bnserve.v1.Predictor",
            "GetModelMetadata",
            lambda md: predictor.GetModelMetadata(pb.GetModelMetadataRequest(model="m"), metadata=md),
        ),
        ("bnserve.v1.Predictor", "ListModels", lambda md: predictor.ListModels(pb.ListModelsRequest(), metadata=md)),
        (
            "bnserve.v1.Diagnostics",
            "Echo",
            lambda md: diagnostics.Echo(diagnostics_pb2.EchoRequest(payload=b"x"), metadata=md),
        ),
        ("inference.GRPCInferenceService", "ModelInfer", lambda md: inference.ModelInfer(infer, metadata=md)),
        (
            "inference.GRPCInferenceService",
            "ServerReady",
            lambda md: inference.ServerReady(triton_pb.ServerReadyRequest(), metadata=md),
        ),
        (
            "inference.GRPCInferenceService",
            "ModelMetadata",
            lambda md: inference.ModelMetadata(triton_pb.ModelMetadataRequest(name="m"), metadata=md),
        ),
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        bearer("wrong-token"),
        bearer(TOKENS[0] + "x"),
        bearer(TOKENS[0][:-1]),
        (("authorization", TOKENS[0]),),  # no scheme
        (("authorization", f"Basic {TOKENS[0]}"),),
        (("x-token", TOKENS[0]),),
    ],
    ids=["none", "wrong", "longer", "shorter", "no-scheme", "basic", "other-key"],
)
def test_calls_without_the_right_token_are_unauthenticated_and_counted(token_server, metadata):
    app, channel = token_server
    before = scrape(app.metrics_port)
    for _service, method, call in protected_calls(channel):
        with pytest.raises(grpc.RpcError) as error:
            call(metadata)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED, method
        assert error.value.details() == UNAUTHENTICATED_MESSAGE
    after = scrape(app.metrics_port)
    for service, method, _ in protected_calls(channel):
        labels = dict(grpc_service=service, grpc_method=method, grpc_code="UNAUTHENTICATED")
        assert _value(after, **labels) == _value(before, **labels) + 1, method
        assert _value(after, "grpc_server_handled_total", grpc_method=method, grpc_code="OK") == _value(
            before, "grpc_server_handled_total", grpc_method=method, grpc_code="OK"
        )


def _value(text: str, name: str = "grpc_server_handled_total", **labels) -> float:
    try:
        return sample_value(text, name, **labels)
    except AssertionError:
        return 0.0


@pytest.mark.parametrize("token", TOKENS)
def test_either_listed_token_is_accepted(token_server, token):
    app, channel = token_server
    before = scrape(app.metrics_port)
    results = [call(bearer(token)) for _, _, call in protected_calls(channel)]
    assert results[0].model == "m" and len(results[0].predictions) == 1
    assert [m.name for m in results[2].models] == ["m"]
    assert results[3].payload == b"x"
    assert results[4].model_name == "m"
    after = scrape(app.metrics_port)
    assert (
        _value(after, grpc_method="Predict", grpc_code="OK")
        == _value(before, grpc_method="Predict", grpc_code="OK") + 1
    )


def test_the_scheme_is_case_insensitive(token_server):
    _, channel = token_server
    assert predict(channel, metadata=(("authorization", f"bearer {TOKENS[1]}"),)).model == "m"


def test_health_needs_no_token(token_server):
    _, channel = token_server
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "bnserve.v1.Predictor", "inference.GRPCInferenceService"):
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            == health_pb2.HealthCheckResponse.SERVING
        )


def test_reflection_needs_the_token(token_server):
    _, channel = token_server
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    with pytest.raises(grpc.RpcError) as error:
        list(stub.ServerReflectionInfo(iter([request]), timeout=10))
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    replies = list(stub.ServerReflectionInfo(iter([request]), timeout=10, metadata=bearer(TOKENS[0])))
    names = {s.name for s in replies[0].list_services_response.service}
    assert "bnserve.v1.Predictor" in names


def test_a_changed_token_file_is_read_again(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("old\n")
    tokens = TokenFile(str(path))
    assert tokens.authorized(bearer("old")) and not tokens.authorized(bearer("new"))
    path.write_text("new\nnewer\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a distinct mtime whatever the clock grain
    deadline = time.monotonic() + 5
    while not tokens.authorized(bearer("new")):
        assert time.monotonic() < deadline, "the new token was never accepted"
        time.sleep(0.1)
    assert not tokens.authorized(bearer("old")) and tokens.authorized(bearer("newer"))
    path.write_text("   \n")  # emptied: the last good tokens stay
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    time.sleep(1.2)
    assert tokens.authorized(bearer("new"))
    path.unlink()  # gone: likewise
    time.sleep(1.2)
    assert tokens.authorized(bearer("new"))


# ---------------------------------------------------------------------------- token and TLS together


def test_token_and_mutual_tls_together(pki, tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS[0] + "\n")
    with running_app(
        tmp_path,
        {"m": MODEL},
        tls_cert=str(pki.server.cert),
        tls_key=str(pki.server.key),
        tls_client_ca=str(pki.ca.cert),
        auth_token_file=str(token_file),
    ) as app:
        with tls_channel(app.port, pki.ca, client=pki.client) as channel:
            assert code_of(lambda: predict(channel)) == grpc.StatusCode.UNAUTHENTICATED
            assert predict(channel, metadata=bearer(TOKENS[0])).model == "m"
            health = health_pb2_grpc.HealthStub(channel)
            assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
        with tls_channel(app.port, pki.ca) as channel:  # the right token without a client certificate
            assert (
                code_of(lambda: predict(channel, metadata=bearer(TOKENS[0]), timeout=5)) == grpc.StatusCode.UNAVAILABLE
            )


# ---------------------------------------------------------------------------- bad files fail the start


def test_token_file_parsing():
    assert parse_tokens(b"\n a \r\n\n\tb\t\na\n", "f") == (b"a", b"b")
    for data, message in [
        (b"", "holds no token"),
        (b" \n\t\n", "holds no token"),
        (b"\nxyz zy\n", "line 2 holds a space"),
        ("xyzzé".encode(), "non-ASCII"),
    ]:
        with pytest.raises(SecurityConfigError, match=message) as error:
            parse_tokens(data, "/mnt/auth/tokens")
        assert error.value.message.startswith("--auth-token-file /mnt/auth/tokens: ")
        assert "xyz" not in error.value.message  # never the token itself


@pytest.mark.parametrize(
    "case",
    [
        "missing-cert",
        "key-is-a-cert",
        "cert-is-a-key",
        "mismatch",
        "corrupt-cert",
        "missing-client-ca",
        "client-ca-not-pem",
        "empty-token-file",
        "missing-token-file",
    ],
)
def test_an_unusable_file_fails_the_start_naming_it(pki, tmp_path, case):
    corrupt = tmp_path / "corrupt.pem"
    corrupt.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
    empty = tmp_path / "empty"
    empty.write_text("")
    cert, key, client_ca, tokens = str(pki.server.cert), str(pki.server.key), None, None
    named = {
        "missing-cert": ("--tls-cert", str(tmp_path / "nope.pem")),
        "key-is-a-cert": ("--tls-key", cert),
        "cert-is-a-key": ("--tls-cert", key),
        "mismatch": ("--tls-key", str(pki.client.key)),
        "corrupt-cert": ("--tls-cert", str(corrupt)),
        "missing-client-ca": ("--tls-client-ca", str(tmp_path / "nope-ca.pem")),
        "client-ca-not-pem": ("--tls-client-ca", str(pki.ca.key)),
        "empty-token-file": ("--auth-token-file", str(empty)),
        "missing-token-file": ("--auth-token-file", str(tmp_path / "nope-tokens")),
    }[case]
    flag, path = named
    if flag == "--tls-cert":
        cert = path
    elif flag == "--tls-key":
        key = path
    elif flag == "--tls-client-ca":
        client_ca = path
    else:
        tokens = path
    config = ServeConfig(
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        tls_cert=cert,
        tls_key=key,
        tls_client_ca=client_ca,
        auth_token_file=tokens,
    )
    with pytest.raises(SecurityConfigError) as error:
        App(config)
    assert error.value.message.startswith(f"{flag} {path}: ")
    assert "PRIVATE KEY-----\n" not in error.value.message
    assert not (tmp_path / "store.db").exists()  # checked before the store is opened


def test_an_encrypted_key_is_refused(pki, tmp_path):
    import subprocess

    encrypted = tmp_path / "encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", str(pki.server.key), "-out", str(encrypted), "-aes256", "-passout", "pass:secret"],
        check=True,
        capture_output=True,
    )
    with pytest.raises(SecurityConfigError, match="encrypted"):
        load_tls(str(pki.server.cert), str(encrypted))


def test_workers_get_the_file_paths_as_absolute_flags(pki, tmp_path, monkeypatch):
    from bnserve.server.workers import Supervisor

    token_file = tmp_path / "tokens"
    token_file.write_text("tok-9f8e7d\n")
    monkeypatch.chdir(tmp_path)
    upgrade_store(f"sqlite:///{tmp_path / 'store.db'}")
    config = ServeConfig(
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        tls_cert=str(pki.server.cert),
        tls_key=str(pki.server.key),
        tls_client_ca=str(pki.ca.cert),
        auth_token_file="tokens",
    )
    supervisor = Supervisor(config, 2)
    try:
        command = supervisor._command()
    finally:
        supervisor._close()
    flags = dict(itertools.pairwise(command))
    assert (flags["--tls-cert"], flags["--tls-key"], flags["--tls-client-ca"], flags["--auth-token-file"]) == (
        str(pki.server.cert),
        str(pki.server.key),
        str(pki.ca.cert),
        str(token_file),
    )
    assert "tok-9f8e7d" not in " ".join(command)  # the file's path, never its tokens


def test_supervisor_checks_the_files_before_starting_workers(tmp_path):
    from bnserve.server.workers import Supervisor

    config = ServeConfig(
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        auth_token_file=str(tmp_path / "missing"),
    )
    with pytest.raises(SecurityConfigError, match="--auth-token-file"):
        Supervisor(config, 2)
    assert not (tmp_path / "store.db").exists()
