"""PostgreSQL (psycopg 3) under the store's timeouts: the connection arguments that carry
them to libpq and the server, and a connection that stops waiting for an answer that a
partitioned network will never bring. Imported only for a PostgreSQL store."""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from sqlalchemy import URL, Engine, event

from bnserve.store.timeouts import StoreTimeouts

RV = TypeVar("RV")
_WAIT_TIMEOUT = psycopg.errors._WaitTimeout  # what Connection.wait raises when its timeout expires


def connect_args(url: URL, timeouts: StoreTimeouts) -> dict[str, Any]:
    """``connect_timeout`` (unless the URL sets its own) and ``statement_timeout`` (before any
    ``options`` of the URL, which may override it) for every new connection."""
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = timeouts.libpq_connect_timeout
    own = url.query.get("options", "")
    own = own if isinstance(own, str) else " ".join(own)
    args["options"] = f"-c statement_timeout={round(timeouts.statement_seconds * 1000)} {own}".strip()
    return args


def bound_waits(engine: Engine, timeouts: StoreTimeouts) -> None:
    """Make ``engine``'s psycopg connections ``AnsweringConnection``s bound by ``timeouts``."""
    if timeouts.answer_seconds is None or engine.dialect.driver != "psycopg":
        return

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]) -> psycopg.Connection:
        connection = AnsweringConnection.connect(*cargs, **cparams)
        connection.answer_seconds = timeouts.answer_seconds
        return connection


class AnsweringConnection(psycopg.Connection):
    """A psycopg connection that waits ``answer_seconds`` at most for each answer (every
    statement, commit, rollback and ping waits through ``wait``). Past that, the server has
    not even sent its statement_timeout cancellation: the network lost it. The connection,
    in a state nobody knows, is closed, and the call fails with an OperationalError that the
    store turns into StoreUnavailable (and SQLAlchemy's pool discards the connection)."""

    answer_seconds: float | None = None

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        if timeout is not None or self.answer_seconds is None:  # psycopg's own bounded waits
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, self.answer_seconds)
        except _WAIT_TIMEOUT:
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the store did not answer within {self.answer_seconds:g} s (statement timeout, "
                "then connect timeout): connection closed"
            ) from None
