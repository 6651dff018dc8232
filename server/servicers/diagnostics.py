"""The bnserve.v1.Diagnostics servicer: Echo, a call that does no work.

It goes through the same interceptor as every other service, so its latency is the
server's floor: transport, protobuf and the per-call bookkeeping, without a model.
"""

from __future__ import annotations

import grpc

from bnserve.server.api import diagnostics_pb2 as pb
from bnserve.server.api import diagnostics_pb2_grpc


class DiagnosticsServicer(diagnostics_pb2_grpc.DiagnosticsServicer):
    async def Echo(self, request: pb.EchoRequest, context: grpc.aio.ServicerContext) -> pb.EchoReply:
        return pb.EchoReply(payload=request.payload)
