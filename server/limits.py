"""The limits a request must keep (``server serve --max-rows``, ``--max-message-bytes``),
checked before any work, so an oversized request is refused cheaply with RESOURCE_EXHAUSTED;
and the caller's deadline, checked again before the prediction itself.

grpc itself refuses a message over the byte limit before it reaches a handler; the row
limit is counted from the request's field lengths and tensors' whole shapes, without decoding.
"""

from __future__ import annotations

import math
from typing import Any

from bnserve.store.errors import BnServeError

DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


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


def predict_rows(request: Any) -> int:
    """Rows of a PredictRequest from its field lengths alone."""
    if request.HasField("dense"):
        dense = request.dense
        return max(len(dense.codes), len(dense.values)) // max(len(dense.features), 1)
    return len(request.instances)


def infer_rows(request: Any) -> int:
    """Rows of a ModelInferRequest, the most any input holds, counted from its whole shape:
    a 2-D tensor of numbers (the ``codes`` form, one row of state codes per line) holds
    ``shape[0]``; any other tensor one row per element, as a feature's ``[batch]`` or
    ``[batch, 1]`` does. So a BYTES tensor of shape [1, N], which decoding would turn into N
    strings, counts N rows. A shape with a negative dimension counts none: it is refused
    before its data is read."""
    rows = 0
    for tensor in request.inputs:
        shape = tuple(tensor.shape)
        if any(d < 0 for d in shape):
            continue
        rows = max(rows, shape[0] if len(shape) == 2 and tensor.datatype != "BYTES" else math.prod(shape))
    return rows


def check_still_wanted(context: Any) -> None:
    """Stop before predicting when the caller's deadline has passed or it cancelled: grpc has
    already answered it DEADLINE_EXCEEDED (or CANCELLED), so the work would be wasted."""
    remaining = context.time_remaining()
    if context.cancelled() or (remaining is not None and remaining <= 0):
        raise DeadlineExceeded("the call's deadline passed (or it was cancelled) before the prediction")
