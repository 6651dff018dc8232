"""The floor of a gRPC call: a bare Python gRPC server that echoes its request, in its own
process, with none of our code on its path.

    python bench/bare_echo.py PORT

It answers ``/bnserve.v1.Diagnostics/Echo`` (so the same generated client stub calls it)
with the request's bytes as they came: an ``EchoRequest`` and an ``EchoReply`` have the
same layout, so nothing is parsed or built. The server is ``grpc.server`` with the thread
pool ``server serve`` has (``--threads``, 16), no interceptors, no health, no reflection.
Prints ``ready`` on stdout once bound, then serves until killed.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import grpc

METHOD = "/bnserve.v1.Diagnostics/Echo"
THREADS = 16  # ServeConfig's default --threads


class _Echo(grpc.GenericRpcHandler):
    """Every Echo call answered with its own request bytes (no serializer: bytes in, bytes out)."""

    def __init__(self) -> None:
        self._handler: grpc.RpcMethodHandler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        return self._handler if handler_call_details.method == METHOD else None


def main(port: int) -> None:
    server = grpc.server(ThreadPoolExecutor(THREADS))
    server.add_generic_rpc_handlers((_Echo(),))
    if server.add_insecure_port(f"127.0.0.1:{port}") != port:
        raise SystemExit(f"bare_echo: cannot bind 127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main(int(sys.argv[1]))
