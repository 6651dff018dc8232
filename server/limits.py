"""The limits a request must keep (``server serve --max-rows``, ``--max-message-bytes``,
``--max-metadata-bytes``), checked before any work, so an oversized request is refused
cheaply with RESOURCE_EXHAUSTED; the measure (``Work``) that decides whether the event loop
may answer a request itself; and the caller's deadline, checked again before the prediction.

grpc itself refuses a message over the byte limit, and metadata over its limit, before
either reaches a handler. The rest is counted from the request's field lengths and
tensors' declared shapes, O(inputs), without decoding (``tensors.check_inputs``,
``requests.dense_work``, ``requests.instances_work``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bnserve.store.errors import BnServeError

if TYPE_CHECKING:
    from bnserve.server.config import ServeConfig

DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_METADATA_BYTES = 16 * 1024  # a call's headers; a bearer token needs well under 1 KiB
# What calls in flight may hold (bnserve.server.admission), sized for the Deployment's 1 GiB:
# docs/operations.md, "Memory: sizing the budget".
MiB = 1024 * 1024
PARSE_FACTOR = 24  # bytes a request may take once parsed, per byte on the wire (upb, measured: at most 22)
DEFAULT_MAX_INFLIGHT_BYTES = 384 * MiB
DEFAULT_MAX_CONNECTION_INFLIGHT_BYTES = 192 * MiB
DEFAULT_MAX_CONNECTIONS = 64  # x 100 held streams x ~39 KiB each (measured): 250 MiB at most
DEFAULT_BODY_SECONDS = 30.0
BASELINE_BYTES = 90 * MiB  # an idle server process: Python, grpc, numpy, SQLAlchemy (measured)
HELD_CALL_BYTES = 39 * 1024  # a call held open with 14 KiB of headers (measured)

# What the event loop answers itself: decoding this much costs well under a millisecond,
# less than handing it to a thread; anything larger runs on the work pool (--threads).
INLINE_ROWS = 32
INLINE_ELEMENTS = 4096  # values, names and state codes the request carries
INLINE_BYTES = 64 * 1024  # bytes of text or raw tensor data


def memory_floor(config: ServeConfig) -> int:
    """The memory a pod needs for ``config`` before its models: per worker process, the
    baseline, the plan cache, the request budget and the calls its connections may hold
    (docs/operations.md, "Memory: sizing the budget")."""
    held = config.max_connections * config.max_streams_per_connection * HELD_CALL_BYTES
    return config.workers * (BASELINE_BYTES + config.plan_cache_bytes + config.max_inflight_bytes + held)


@dataclass(frozen=True)
class Work:
    """What decoding a request will walk, counted from its wire form alone, after its
    shape has been checked against the model: rows, elements (values, feature names, state
    codes) and bytes (text and raw tensor data)."""

    rows: int
    elements: int
    bytes: int = 0

    @property
    def inline(self) -> bool:
        """Small enough to answer on the event loop."""
        return self.rows <= INLINE_ROWS and self.elements <= INLINE_ELEMENTS and self.bytes <= INLINE_BYTES


class TooLarge(BnServeError):
    """A request beyond a configured limit (rows per request); refused before any work."""

    code = "RESOURCE_EXHAUSTED"


class DeadlineExceeded(BnServeError):
    """The caller's deadline passed (or it cancelled) before the work was done; it is not done."""

    code = "DEADLINE_EXCEEDED"


def check_rows(rows: int, limit: int) -> None:
    """Refuse a request of more than ``limit`` rows, naming the limit and the flag."""
    if rows > limit:
        raise TooLarge(
            f"the request has {rows} rows; this server answers at most {limit} rows per request (--max-rows): split it"
        )


def check_reply_size(reply: Any, limit: int) -> None:
    """Refuse a reply over ``limit`` bytes with RESOURCE_EXHAUSTED here, where it is counted
    as refused: grpc would refuse it only after the handler returned, and the metrics count it OK."""
    if reply is not None and reply.ByteSize() > limit:
        raise TooLarge(
            f"the reply is {reply.ByteSize()} bytes, over this server's limit of {limit} bytes "
            "(--max-message-bytes): ask for less"
        )


def check_still_wanted(context: Any) -> None:
    """Stop before predicting when the caller's deadline has passed or it cancelled: grpc has
    already answered it DEADLINE_EXCEEDED (or CANCELLED), so the work would be wasted."""
    remaining = context.time_remaining()
    if context.cancelled() or (remaining is not None and remaining <= 0):
        raise DeadlineExceeded("the call's deadline passed (or it was cancelled) before the prediction")
