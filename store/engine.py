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
import time
from pathlib import Path
from typing import Callable

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from bnserve.store.errors import InvalidInput, StoreUnavailable

log = logging.getLogger(__name__)

DEFAULT_STORE_URL = "sqlite:///bnserve.db"  # a file in the working directory
STORE_URL_ENV = "BNSERVE_STORE_URL"
STORE_URL_FILE_ENV = "BNSERVE_STORE_URL_FILE"  # a file holding the URL (a mounted Secret)

WRITE_OPTION = "bnserve_write"  # execution option: this connection's transaction writes
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")
_PG_MIGRATION_LOCK = 0x626E7365727665  # advisory lock key ("bnserve"), held while migrating


def resolve_store_url(cli_value: str | None) -> str:
    """--store if given, else $BNSERVE_STORE_URL, else the file named by
    $BNSERVE_STORE_URL_FILE (a mounted Secret: its text, surrounding whitespace dropped),
    else DEFAULT_STORE_URL. A password belongs in the environment or a file, where ``ps``
    does not show it: one on the command line is used, with a warning."""
    if cli_value:
        if has_password(cli_value):
            log.warning("the --store URL holds a password, which the process list shows to every user; "
                        "pass it in %s or %s instead", STORE_URL_ENV, STORE_URL_FILE_ENV)
        return cli_value
    if os.environ.get(STORE_URL_ENV):
        return os.environ[STORE_URL_ENV]
    path = os.environ.get(STORE_URL_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{STORE_URL_FILE_ENV}={path}: cannot read the store URL: "
                               f"{exc.strerror if isinstance(exc, OSError) else 'not UTF-8 text'}") from None
        if not text:
            raise InvalidInput(f"{STORE_URL_FILE_ENV}={path}: the file is empty")
        return text
    return DEFAULT_STORE_URL


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password."""
    try:
        return bool(make_url(url).password)
    except ArgumentError:
        return False


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
    if engine.dialect.name == "sqlite":
        _retry_while_locked(lambda: _upgrade(engine, config))
    else:
        _upgrade(engine, config)
    log.debug("store schema at head on %s", engine.url.render_as_string(hide_password=True))


def _retry_while_locked(step: Callable[[], None]) -> None:
    """Run ``step`` again while SQLite answers "database is locked", up to the busy timeout.
    The busy timeout covers most waits, not all: CI once saw four processes opening one new
    store file at the same moment fail so (tests/store/test_concurrency.py)."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            step()
            return
        except OperationalError as exc:
            if "locked" not in str(exc.orig) or time.monotonic() > deadline:
                raise
            log.debug("store locked while opening; trying again")
            time.sleep(0.1)


def _upgrade(engine: Engine, config: Config) -> None:
    with writer(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        config.attributes["connection"] = connection
        try:
            command.upgrade(config, "head")
        except CommandError as exc:
            raise StoreUnavailable(f"the store schema cannot be brought to this code's head: {exc}") from None
