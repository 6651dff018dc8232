"""Opening the store's database: which URL, engine set-up per backend, schema upgrade.

SQLite (the embedded default) gets foreign keys, WAL and a busy timeout on every
connection, and SQLAlchemy's documented pysqlite recipe for emitting BEGIN itself, so a
transaction opened on an engine carrying ``WRITE_OPTION`` starts with BEGIN IMMEDIATE:
concurrent writers then queue on the busy timeout instead of failing on a lock upgrade.
PostgreSQL (psycopg 3) needs none of that.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from store.errors import InvalidInput, StoreUnavailable

log = logging.getLogger(__name__)

DEFAULT_STORE_URL = "sqlite:///bnserve.db"  # a file in the working directory
STORE_URL_ENV = "BNSERVE_STORE_URL"

WRITE_OPTION = "bnserve_write"  # execution option: this connection's transaction writes
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")
_PG_MIGRATION_LOCK = 0x626E7365727665  # advisory lock key ("bnserve"), held while migrating


def resolve_store_url(cli_value: str | None) -> str:
    """--store if given, else $BNSERVE_STORE_URL, else DEFAULT_STORE_URL."""
    if cli_value:
        return cli_value
    return os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL


def redacted(url: str) -> str:
    """The URL with its password hidden, fit for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def create_store_engine(url: str) -> Engine:
    """An engine for ``url``; raises InvalidInput for a URL or driver we cannot use."""
    try:
        parsed = make_url(url)
        is_sqlite = parsed.get_backend_name() == "sqlite"
        engine = create_engine(parsed, pool_pre_ping=not is_sqlite)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise InvalidInput(f"store URL {redacted(url)} cannot be used: {exc}") from None
    if is_sqlite:
        _configure_sqlite(engine)
    return engine


def writer(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions announce that they write."""
    return engine.execution_options(**{WRITE_OPTION: True})


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # sqlite3 must not emit BEGIN; _on_begin does
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def upgrade_to_head(engine: Engine) -> None:
    """Run the alembic migrations up to head in one write transaction.

    Concurrent callers serialise: on SQLite through BEGIN IMMEDIATE, on PostgreSQL
    through an advisory lock, so the second finds the schema already at head.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    with writer(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        config.attributes["connection"] = connection
        try:
            command.upgrade(config, "head")
        except CommandError as exc:
            raise StoreUnavailable(f"the store schema cannot be brought to this code's head: {exc}") from None
    log.debug("store schema at head on %s", engine.url.render_as_string(hide_password=True))
