"""An engine for the store's database, set up per backend, under the store's timeouts.

SQLite (the embedded default) gets foreign keys, WAL and a busy timeout on every
connection, and SQLAlchemy's documented pysqlite recipe for emitting BEGIN itself, so a
transaction opened on an engine carrying ``WRITE_OPTION`` starts with BEGIN IMMEDIATE:
concurrent writers then queue on the busy timeout instead of failing on a lock upgrade.
PostgreSQL (psycopg 3) gets connect and statement timeouts and a bound on every wait for
an answer (``postgresql``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from bnserve.store.db.url import parse_store_url, redacted
from bnserve.store.errors import InvalidInput
from bnserve.store.timeouts import DEFAULT_TIMEOUTS, StoreTimeouts

log = logging.getLogger(__name__)

WRITE_OPTION = "bnserve_write"  # execution option: this connection's transaction writes

T = TypeVar("T")


def create_store_engine(url: str, timeouts: StoreTimeouts = DEFAULT_TIMEOUTS) -> Engine:
    """An engine for ``url``; raises InvalidInput for a URL or driver we cannot use."""
    parsed = parse_store_url(url)
    backend = parsed.get_backend_name()
    try:
        if backend == "sqlite":
            engine = create_engine(parsed)
            _configure_sqlite(engine, timeouts)
        elif backend == "postgresql":
            from bnserve.store.db import postgresql

            engine = create_engine(
                parsed,
                pool_pre_ping=True,
                pool_timeout=timeouts.connect_seconds,
                connect_args=postgresql.connect_args(parsed, timeouts),
            )
            postgresql.bound_waits(engine, timeouts)
        else:
            engine = create_engine(parsed, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        raise InvalidInput(f"store URL {redacted(url)} cannot be used: {redacted(url, str(exc))}") from None
    return engine


def writer(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions announce that they write."""
    return engine.execution_options(**{WRITE_OPTION: True})


def _configure_sqlite(engine: Engine, timeouts: StoreTimeouts) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # sqlite3 must not emit BEGIN; _on_begin does
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {timeouts.sqlite_busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def retry_while_locked(step: Callable[[], T]) -> T:
    """Run ``step`` again while SQLite answers "database is locked", up to the default busy
    timeout. The busy timeout covers most waits, not all: CI once saw four processes opening
    one new store file at the same moment fail so (tests/store/test_concurrency.py)."""
    deadline = time.monotonic() + DEFAULT_TIMEOUTS.sqlite_busy_ms / 1000
    while True:
        try:
            return step()
        except OperationalError as exc:
            if "locked" not in str(exc.orig) or time.monotonic() > deadline:
                raise
            log.debug("store locked while opening; trying again")
            time.sleep(0.1)
