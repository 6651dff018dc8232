"""One interceptor for every RPC of the asyncio server: check its bearer token, admit it
(``bnserve.server.admission``), parse it, count it, time it, and map our errors to status codes.

Servicers raise ``bnserve.store.errors.BnServeError`` subclasses; this is the one place that
turns them into gRPC status codes. Anything else becomes INTERNAL with a fixed
message, and its traceback is logged.

With a token file (``server serve --auth-token-file``), a call to a protected method
(every service but grpc.health.v1.Health) without ``authorization: Bearer <token>``
gets that method's denying handler instead, built once like the others: it fails the
call with UNAUTHENTICATED and a fixed message, counted as any call is, at the call's
headers: its body is never waited for, read or decoded.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from bnserve.server.admission import Admission
from bnserve.server.limits import DEFAULT_MAX_MESSAGE_BYTES, check_reply_size
from bnserve.server.metrics import METRICS
from bnserve.server.security import UNAUTHENTICATED_MESSAGE, TokenFile, is_protected
from bnserve.store.errors import BnServeError, InvalidInput

log = logging.getLogger(__name__)

INTERNAL_MESSAGE = "internal server error"
# A status message travels in the grpc-message trailer, percent-encoded (up to 3 bytes per
# byte); a client refuses trailers past its metadata limit (grpc's default: 8 KiB soft,
# 16 KiB hard) and reports RESOURCE_EXHAUSTED instead of our status. Messages that echo what
# the client sent (a model, feature or value name of a megabyte) are cut to this many bytes.
MAX_STATUS_MESSAGE_BYTES = 1024


def bounded(message: str, limit: int = MAX_STATUS_MESSAGE_BYTES) -> str:
    """``message``, or when its UTF-8 is over ``limit`` bytes its start and end with the
    middle cut and counted: the status and what it names stay readable, whatever was echoed."""
    raw = message.encode("utf-8", "replace")
    if len(raw) <= limit:
        return message
    head = raw[: limit * 2 // 3].decode("utf-8", "ignore")
    tail = raw[len(raw) - limit // 4 :].decode("utf-8", "ignore")
    cut = len(message) - len(head) - len(tail)
    return f"{head}… ({cut:,} characters cut) …{tail}"


def status_of(error: BnServeError) -> grpc.StatusCode:
    """The gRPC status for one of our errors (its ``code`` is a StatusCode name)."""
    return getattr(grpc.StatusCode, error.code, grpc.StatusCode.INTERNAL)


def _split(method: str) -> tuple[str, str]:
    """'/pkg.Service/Method' -> ('pkg.Service', 'Method')."""
    _, _, rest = method.partition("/")
    service, _, name = rest.partition("/")
    return service, name


def _context_code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "OK"


class _HandledCounters(dict):
    """status code name -> the grpc_server_handled_total child of one method, looked up once."""

    def __init__(self, labels: tuple[str, str, str]):
        super().__init__()
        self._labels = labels

    def __missing__(self, code: str) -> Any:
        child = self[code] = METRICS.grpc_handled.labels(*self._labels, code)
        return child


def _method_metrics(labels: tuple[str, str, str]) -> tuple[Any, Callable[[float, str], None]]:
    """One method's grpc_server_* children, looked up once: its started counter, and
    ``done(t0, code)``, which observes the handling seconds since ``t0`` and counts the code."""
    seconds, handled = METRICS.grpc_handling_seconds.labels(*labels), _HandledCounters(labels)

    def done(t0: float, code: str) -> None:
        seconds.observe(time.perf_counter() - t0)
        handled[code].inc()

    return METRICS.grpc_started.labels(*labels), done


class Unauthenticated(BnServeError):
    """A call to a protected method without a valid bearer token."""

    code = "UNAUTHENTICATED"


async def _deny(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> Any:
    raise Unauthenticated(UNAUTHENTICATED_MESSAGE)


ARENA_FAILED = "Arena alloc failed"  # upb's text for a parse that ran out of memory
OUT_OF_MEMORY_MESSAGE = "the server is out of memory for this request now; retry later or send less"


def _out_of_memory(exc: BaseException) -> bool:
    """A MemoryError, or protobuf's (upb's) DecodeError for an arena it could not allocate:
    the server's memory ran short, the bytes may well be a valid message."""
    return isinstance(exc, MemoryError) or (isinstance(exc, DecodeError) and str(exc).endswith(ARENA_FAILED))


class OutOfMemory(BnServeError):
    """The server's state, not the client's request: memory ran short while parsing it."""

    code = "RESOURCE_EXHAUSTED"


def _parser(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    """``deserialize`` such that bytes that are not a valid message are INVALID_ARGUMENT,
    where grpc's own parsing would answer INTERNAL; running out of memory while parsing is
    the server's state, not the client's fault: RESOURCE_EXHAUSTED, logged."""
    if deserialize is None:
        return lambda raw: raw
    message = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)
    kind = f"{message.full_name} message" if message is not None else "request message"

    def parse(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:
            if not _out_of_memory(exc):
                raise InvalidInput(f"the request is not a valid {kind}") from None
            log.error("out of memory parsing a %d-byte %s: answered RESOURCE_EXHAUSTED", len(raw), kind)
            raise OutOfMemory(OUT_OF_MEMORY_MESSAGE) from None

    return parse


async def _relayed(result: Any) -> AsyncIterator[Any]:
    """The messages of a streaming behaviour's ``result``: an async generator's, or none
    from a coroutine (which writes its own with ``context.write``) once it is done."""
    if inspect.isasyncgen(result):
        async for message in result:
            yield message
    else:
        await result


def _admitted(
    admission: Admission, deserialize: Callable | None, behavior: Callable, streaming: bool, capped: bool
) -> Callable:
    """A unary-request ``behavior`` as one that grpc calls at the call's headers, with the
    request stream: it awaits the request itself, within the admission's limits, and parses
    it only once its bytes are charged (``bnserve.server.admission``); ``capped``: its
    connection counts toward ``--max-connections``."""
    parse = _parser(deserialize)

    async def unary_reply(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        call = admission.open(context, capped)
        try:
            result = behavior(parse(await call.receive()), context)
            return await result if inspect.isawaitable(result) else result
        finally:
            admission.close(call)

    async def streamed_reply(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        call = admission.open(context, capped)
        try:
            async for message in _relayed(behavior(parse(await call.receive()), context)):
                yield message
        finally:
            admission.close(call)

    return streamed_reply if streaming else unary_reply


def _held(admission: Admission, deserialize: Callable | None, behavior: Callable) -> Callable:
    """A request-streaming ``behavior`` (reflection) counted as a call of its connection; each
    request message, as bytes, is charged against the admission's budgets (for as long as it
    is the stream's latest) before it is parsed, as a unary request is, and parsed so that
    bytes that are not a valid message are INVALID_ARGUMENT, not grpc's UNKNOWN naming the
    parser's exception."""
    parse = _parser(deserialize)

    async def counted(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        call = admission.open(context)

        async def parsed() -> AsyncIterator[Any]:
            async for raw in requests:
                admission.release(call)
                admission.charge(call, len(raw))
                yield parse(raw)

        try:
            async for message in _relayed(behavior(parsed(), context)):
                yield message
        finally:
            admission.close(call)

    return counted


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """Bearer-token check, Prometheus grpc_server_* metrics and error-to-status mapping.

    grpc calls ``intercept_service`` for every RPC; the wrapped handler of a method (with
    its metric children looked up), and its denying handler when the method needs a
    token, are built once and reused while grpc hands out the same handler for that method.
    """

    def __init__(
        self,
        tokens: TokenFile | None = None,
        max_reply_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        admission: Admission | None = None,
    ) -> None:
        self._tokens = tokens
        self._max_reply_bytes = max_reply_bytes
        self._admission = admission if admission is not None else Admission()
        # method -> (grpc's handler, ours, ours denying the call or None when it is open)
        self._wrapped: dict[str, tuple[Any, Any, Any]] = {}

    async def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is None or cached[0] is not handler:
            deny = None
            if self._tokens is not None and is_protected(_split(method)[0]):
                deny = self._wrap(handler, method, deny=True)
            cached = self._wrapped[method] = (handler, self._wrap(handler, method), deny)
        if (
            cached[2] is not None
            and self._tokens is not None
            and not self._tokens.authorized(handler_call_details.invocation_metadata)
        ):
            return cached[2]
        return cached[1]

    def _wrap(self, handler: Any, full_method: str, deny: bool = False) -> Any:
        """Our handler for grpc's ``handler``. A unary request is taken as a stream of one,
        so the handler runs at the call's headers: a call without a token is refused then,
        never waiting for its body, and the others await it within the admission's limits."""
        service, method = _split(full_method)
        if handler.unary_unary or handler.unary_stream:
            streaming = handler.unary_stream is not None
            labels = ("SERVER_STREAM" if streaming else "UNARY", service, method)
            behavior = _deny
            if not deny:
                original = handler.unary_stream if streaming else handler.unary_unary
                capped = is_protected(service)
                behavior = _admitted(self._admission, handler.request_deserializer, original, streaming, capped)
            as_stream = handler._replace(request_streaming=True, request_deserializer=None, unary_unary=None)
            if streaming:
                return as_stream._replace(unary_stream=None, stream_stream=self._wrap_stream(behavior, labels))
            return as_stream._replace(stream_unary=self._wrap_unary(behavior, labels, self._max_reply_bytes))
        if handler.stream_stream:
            labels = ("BIDI_STREAM", service, method)
            behavior = _deny if deny else _held(self._admission, handler.request_deserializer, handler.stream_stream)
            return handler._replace(request_deserializer=None, stream_stream=self._wrap_stream(behavior, labels))
        return handler

    @staticmethod
    def _wrap_unary(behavior: Callable, labels: tuple[str, str, str], max_reply_bytes: int) -> Callable:
        async def reply(request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = behavior(request, context)
            if inspect.isawaitable(response):
                response = await response
            check_reply_size(response, max_reply_bytes)
            return response

        return _counted(reply, labels, unknown_is_internal=True)

    @staticmethod
    def _wrap_stream(behavior: Callable, labels: tuple[str, str, str]) -> Callable:
        """A streaming behaviour, whether it yields its messages (an async generator) or
        writes them (a coroutine calling ``context.write``), as one that writes them."""

        async def write(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> None:
            result = behavior(request_or_iterator, context)
            if inspect.isasyncgen(result):
                async for message in result:
                    await context.write(message)
            else:
                await result

        return _counted(write, labels, unknown_is_internal=False)


def _counted(run: Callable, labels: tuple[str, str, str], *, unknown_is_internal: bool) -> Callable:
    """``run`` counted in the method's grpc_server_* series, our errors aborting the call with
    their status. An unknown error is logged and answered INTERNAL with a fixed message
    (``unknown_is_internal``: a unary call) or raised, which grpc ends as UNKNOWN (a stream,
    which may have written already); one the behaviour aborted with is counted as its code."""
    started, done = _method_metrics(labels)

    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        # An error is counted before its status is sent (aio's abort sends it at once):
        # a caller that has its answer may read the metrics next.
        started.inc()
        t0 = time.perf_counter()
        try:
            response = await run(request, context)
        except BnServeError as exc:
            status, message = status_of(exc), bounded(exc.message)
        except asyncio.CancelledError:  # the caller cancelled, went away, or its deadline passed
            done(t0, "CANCELLED")
            raise
        except Exception:
            code = _context_code(context)
            if code != "OK" or not unknown_is_internal:  # the behaviour's own abort, sent already
                done(t0, code if code != "OK" else "UNKNOWN")
                raise
            log.exception("unhandled error in %s/%s", labels[1], labels[2])
            status, message = grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE
        else:
            done(t0, _context_code(context))
            return response
        done(t0, status.name)
        await context.abort(status, message)

    return wrapped
