"""What --max-streams-per-connection does to the calls past it, on the real server in this
process, seen from a plain HTTP/2 client written out here frame by frame (no grpc
library, which holds extra calls back itself): once the client has the server's
settings, a stream opened past the limit is reset with REFUSED_STREAM (grpc clients
report it as UNAVAILABLE), and the calls within the limit carry on. That grpc's own
clients hold extra calls until a stream frees is tests/server/test_hostile_clients.py's."""

from __future__ import annotations

import socket
import struct

import numpy as np

from tests.in_process_server import running_app
from tests.model_factory import random_model

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x7
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
MAX_CONCURRENT_STREAMS, REFUSED_STREAM = 0x3, 0x7
LIMIT = 2


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name: str, value: str) -> bytes:
    """An HPACK header field, literal and not indexed (names and values under 127 bytes)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def read_frame(conn: socket.socket) -> tuple[int, int, int, bytes]:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    head = exactly(9)
    length = int.from_bytes(head[:3], "big")
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, exactly(length)


def settings_of(payload: bytes) -> dict[int, int]:
    return dict(struct.unpack(">HI", payload[i : i + 6]) for i in range(0, len(payload), 6))


def test_a_stream_past_the_limit_is_refused_and_the_others_carry_on(tmp_path):
    model = random_model(np.random.default_rng(2), n_features=2)
    with (
        running_app(tmp_path, {"m": model}, max_streams_per_connection=LIMIT) as app,
        socket.create_connection(("127.0.0.1", app.port), timeout=10) as conn,
    ):
        conn.sendall(PREFACE + frame(SETTINGS, 0, 0))
        kind, flags, _, payload = read_frame(conn)
        while not (kind == SETTINGS and not flags & ACK):
            kind, flags, _, payload = read_frame(conn)
        assert settings_of(payload)[MAX_CONCURRENT_STREAMS] == LIMIT, "the server announces the limit"
        conn.sendall(frame(SETTINGS, ACK, 0))
        headers = b"".join(
            literal(n, v)
            for n, v in [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/grpc.health.v1.Health/Check"),
                (":authority", "localhost"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ]
        )
        streams = [1 + 2 * i for i in range(LIMIT + 1)]  # the last one past the limit
        for stream in streams:  # headers only: each call is open, waiting for its request
            conn.sendall(frame(HEADERS, END_HEADERS, stream, headers))
        reset = {}
        while streams[-1] not in reset:
            kind, _, stream, payload = read_frame(conn)
            assert kind != GOAWAY, "the server gave up the whole connection"
            if kind == RST_STREAM:
                reset[stream] = int.from_bytes(payload, "big")
        assert reset == {streams[-1]: REFUSED_STREAM}, reset
        # the streams within the limit were not touched: their calls still complete
        empty_request = b"\x00" + struct.pack(">I", 0)
        for stream in streams[:-1]:
            conn.sendall(frame(DATA, END_STREAM, stream, empty_request))
        ended: set[int] = set()
        while ended != set(streams[:-1]):
            kind, flags, stream, payload = read_frame(conn)
            assert kind not in (RST_STREAM, GOAWAY), (kind, stream, payload)
            if kind == HEADERS and flags & END_STREAM:  # the trailers: grpc-status
                ended.add(stream)


def test_the_flag_says_what_happens_past_it():
    from bnserve.server.cli import build_parser

    (flag,) = [a for a in build_parser({}).subcommands["serve"]._actions if a.dest == "max_streams_per_connection"]
    assert "REFUSED_STREAM" in flag.help and "UNAVAILABLE" in flag.help
