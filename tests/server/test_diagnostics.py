"""bnserve.v1.Diagnostics: Echo answers its payload, on the same port, through the same
interceptor as the other services (it is counted), with health and reflection."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from prometheus_client import REGISTRY

from bnserve.server.api import diagnostics_pb2 as pb
from bnserve.server.api import diagnostics_pb2_grpc
from tests.in_process_server import running_app

SERVICE = "bnserve.v1.Diagnostics"


@pytest.fixture(scope="module")
def channel(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store")) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield channel


def _handled(code: str) -> float:
    labels = {"grpc_type": "UNARY", "grpc_service": SERVICE, "grpc_method": "Echo", "grpc_code": code}
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


@pytest.mark.parametrize("payload", [b"", b"x", bytes(range(256)) * 64])
def test_echo_returns_the_payload_and_is_counted(channel, payload):
    before = _handled("OK")
    reply = diagnostics_pb2_grpc.DiagnosticsStub(channel).Echo(pb.EchoRequest(payload=payload))
    assert reply.payload == payload
    assert _handled("OK") == before + 1


def test_diagnostics_has_health_and_reflection(channel):
    health = health_pb2_grpc.HealthStub(channel)
    status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status
    assert status == health_pb2.HealthCheckResponse.SERVING
    database = ProtoReflectionDescriptorDatabase(channel)
    assert SERVICE in database.get_services()
    assert database.FindFileContainingSymbol(SERVICE).name == "bnserve/v1/diagnostics.proto"
