"""What calls in flight may hold, and for how long a call may wait for its body.

A call is admitted in three steps, all on the event loop, before its request is parsed:

1. its connection (the peer address) is counted: calls from more than ``--max-connections``
   connections at once are refused at their headers (``TooManyConnections``); health calls
   are neither counted nor refused, so probes answer whoever holds the connections;
2. its request message is awaited for at most ``--body-seconds``: a call whose body never
   comes, or trickles, ends (``NoBody``) instead of being held for as long as the client likes;
3. its bytes are charged against ``--max-inflight-bytes`` (all calls) and
   ``--max-connection-inflight-bytes`` (the calls of its connection): past either it is
   refused at once, not queued (``OverBudget``), and its message is never parsed.

A request is charged ``PARSE_FACTOR`` times its wire size: parsing it is what takes the
memory, and protobuf's worst case is that many times the wire (measured with upb: 10.5x for
``sint32`` varints of one byte, 21x for ``int64``, 22x for a million empty ``Instance``
messages; eight dense Predicts of 3.8 MiB of one-byte codes, parsed, decoded, predicted and
answered at once, took 62 MiB each, 16 times their size). The charge is
released when the call ends, however it ends (answered, refused, cancelled). After a large
release the C allocator is asked to give its free memory back to the system
(``malloc_trim``), so the process's RSS comes back down after a burst.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import threading
from typing import Any

import grpc

from bnserve.server.limits import (
    DEFAULT_BODY_SECONDS,
    DEFAULT_MAX_CONNECTION_INFLIGHT_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_INFLIGHT_BYTES,
    PARSE_FACTOR,
    MiB,
)
from bnserve.server.metrics import METRICS
from bnserve.store.errors import BnServeError, InvalidInput

TRIM_BYTES = 8 * MiB  # a charge this large, released, has the allocator return free memory
TRIM_DELAY_SECONDS = 0.2  # after the release: the call's objects are dropped once it has ended
TRIM_AGAIN_SECONDS = 2.0  # and once more after: on busy cores a worker thread drops them later


class OverBudget(BnServeError):
    """A request whose bytes would take the calls in flight past their budget."""

    code = "RESOURCE_EXHAUSTED"


class TooManyConnections(BnServeError):
    """A call from one connection more than ``--max-connections`` allow at once."""

    code = "RESOURCE_EXHAUSTED"


class NoBody(BnServeError):
    """A call whose request message did not arrive within ``--body-seconds``."""

    code = "DEADLINE_EXCEEDED"


class _Connection:
    __slots__ = ("calls", "charged")

    def __init__(self) -> None:
        self.calls = 0
        self.charged = 0


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class Admission:
    """The connections with calls open and the bytes their calls hold; used from the
    event loop only, so it needs no lock."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES,
        max_connection_bytes: int = DEFAULT_MAX_CONNECTION_INFLIGHT_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        body_seconds: float = DEFAULT_BODY_SECONDS,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_connection_bytes = max_connection_bytes
        self.max_connections = max_connections
        self.body_seconds = body_seconds
        self.charged = 0
        self._connections: dict[str, _Connection] = {}
        self._trim = _malloc_trim()
        self._trim_due = False

    def open(self, context: grpc.aio.ServicerContext, capped: bool = True) -> _Call:
        """A call, at its headers: its connection counted (TooManyConnections past the cap),
        unless it is not ``capped`` (health: probes must answer whoever holds the connections).
        Every call opened is closed (``close``), however it ends."""
        peer = context.peer()
        connection = self._connections.get(peer)
        if connection is None and not capped:
            connection = _Connection()  # not counted among the connections
        elif connection is None:
            if len(self._connections) >= self.max_connections:
                raise TooManyConnections(
                    f"this server takes calls from at most {self.max_connections} connections at once "
                    "(--max-connections): retry later"
                )
            connection = self._connections[peer] = _Connection()
        connection.calls += 1
        return _Call(self, peer, connection, context)

    def close(self, call: _Call) -> None:
        """The call has ended: its charge released, its connection uncounted once it has no call open."""
        connection = call.connection
        connection.calls -= 1
        self.release(call)
        if connection.calls == 0 and self._connections.get(call.peer) is connection:
            del self._connections[call.peer]

    def release(self, call: _Call) -> None:
        """The call's charge released (its request is done with), the call still open: a
        streaming call is charged for each of its messages in turn."""
        if call.charged:
            call.connection.charged -= call.charged
            self.charged -= call.charged
            METRICS.inflight_bytes.set(self.charged)
            if call.charged >= TRIM_BYTES:
                self._trim_soon()
            call.charged = 0

    def charge(self, call: _Call, size: int) -> None:
        """Charge ``call`` for a request of ``size`` bytes, or refuse it (OverBudget) and charge nothing."""
        cost = size * PARSE_FACTOR
        for limit, held, flag in (
            (self.max_bytes, self.charged, "--max-inflight-bytes"),
            (self.max_connection_bytes, call.connection.charged, "--max-connection-inflight-bytes"),
        ):
            if cost > limit:
                raise OverBudget(
                    f"a request of {size:,} bytes may take {cost:,} bytes once parsed ({PARSE_FACTOR} per byte), "
                    f"more than this server's {flag} of {limit:,}: send it in smaller requests"
                )
            if held + cost > limit:
                raise OverBudget(
                    f"a request of {size:,} bytes may take {cost:,} bytes once parsed; calls in flight hold "
                    f"{held:,} of this server's {flag} of {limit:,}: retry later"
                )
        call.charged = cost
        call.connection.charged += cost
        self.charged += cost
        METRICS.inflight_bytes.set(self.charged)

    def _trim_soon(self) -> None:
        """Have the allocator return its free memory shortly, on a thread: the call's
        objects are dropped once it has ended, and trimming a large heap takes a while."""
        if self._trim is None or self._trim_due:
            return
        self._trim_due = True
        loop = asyncio.get_running_loop()

        def trim(again: float | None) -> None:
            self._trim_due = False
            threading.Thread(target=self._trim, args=(0,), name="malloc-trim", daemon=True).start()
            if again is not None:
                loop.call_later(again, trim, None)

        loop.call_later(TRIM_DELAY_SECONDS, trim, TRIM_AGAIN_SECONDS)


class _Call:
    """A call opened by ``Admission.open``: ``receive`` awaits its request message."""

    __slots__ = ("admission", "charged", "connection", "context", "peer")

    def __init__(
        self, admission: Admission, peer: str, connection: _Connection, context: grpc.aio.ServicerContext
    ) -> None:
        self.admission, self.peer, self.connection, self.context = admission, peer, connection, context
        self.charged = 0

    async def receive(self) -> bytes:
        """The call's request message, as bytes, charged against the budgets; NoBody when it
        has not arrived within ``--body-seconds``."""
        admission = self.admission
        try:
            async with asyncio.timeout(admission.body_seconds):
                raw = await self.context.read()
        except TimeoutError:
            raise NoBody(
                f"no request message within {admission.body_seconds:g} s of the call's headers "
                "(--body-seconds): send the request with the call"
            ) from None
        if raw is grpc.aio.EOF:
            raise InvalidInput("the call carries no request message")
        admission.charge(self, len(raw))
        return raw
