"""The store's schema: created and upgraded by the alembic migrations in ``migrations/``,
as an explicit step (``trainer db upgrade``), and checked by everything that opens a store.

Opening never migrates: a server, or a database role that may only read, must be able to
open a store without altering it. A store whose schema is behind this code's is refused
with a message naming the command that upgrades it. Only an empty database is set up on
the spot, and only by a writer (the first ``trainer fit`` into a new store), as MLflow does.

A store at ``HEAD_REVISION`` is told by one read of alembic's version table, without
importing alembic (0.15 s with mako and pygments): it is imported to create, migrate, or
explain a mismatch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from bnserve.store.db.engine import create_store_engine, retry_while_locked, writer
from bnserve.store.db.failures import translate
from bnserve.store.db.url import redacted
from bnserve.store.errors import SchemaMismatch, StoreUnavailable
from bnserve.store.timeouts import DEFAULT_TIMEOUTS, StoreTimeouts

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")
UPGRADE_COMMAND = "trainer db upgrade"
_PG_MIGRATION_LOCK = 0x626E7365727665  # advisory lock key ("bnserve"), held while migrating
HEAD_REVISION = "0007"  # the last migration's; tests/store/test_schema.py fails when it is not
VERSION_TABLE = "alembic_version"  # alembic's default, which migrations/env.py keeps


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    return config


def head_revision() -> str:
    """The schema revision this code reads and writes, from the migrations themselves."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "the migrations have a head"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database's schema is at; None for a database without our schema."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def check_schema(engine: Engine, where: str, *, create: bool = False) -> None:
    """Refuse a store whose schema this code cannot use (SchemaMismatch naming the fix).

    ``create``: a database without our schema gets it now (a writer's first publish into a
    new store). A schema newer than this code's is refused for writers and tolerated, with
    a warning, for readers: a rolling upgrade migrates before the new servers replace the old.
    """
    if retry_while_locked(lambda: _recorded(engine)) == [HEAD_REVISION]:
        return
    from alembic.script import ScriptDirectory

    current, head = retry_while_locked(lambda: current_revision(engine)), head_revision()
    if current == head:
        return
    if current is None:
        if create:
            upgrade_to_head(engine)
            return
        raise SchemaMismatch(
            f"the store at {where} has no bnserve schema (a new or mistyped store?); "
            f"create it with `{UPGRADE_COMMAND} --store URL`"
        )
    known = {script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()}
    if current in known:
        raise SchemaMismatch(
            f"the store at {where} has schema revision {current}, behind this bnserve's {head}; "
            f"upgrade it with `{UPGRADE_COMMAND} --store URL` (one process, before the others)"
        )
    if create:
        raise SchemaMismatch(
            f"the store at {where} has schema revision {current}, newer than this bnserve's "
            f"{head}; upgrade bnserve to write to it"
        )
    log.warning(
        "the store at %s has schema revision %s, newer than this bnserve's %s; reading it anyway (upgrade bnserve)",
        where,
        current,
        head,
    )


def _recorded(engine: Engine) -> list[str]:
    """The revisions alembic's version table holds ([] without the table): a plain read."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return []
        return list(connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())


def upgrade_store(url: str, timeouts: StoreTimeouts = DEFAULT_TIMEOUTS) -> tuple[str | None, str]:
    """``trainer db upgrade``: bring the store at ``url`` to this code's schema; (revision
    before, after). Errors leave as ``bnserve.store.errors`` kinds naming the store."""
    engine = create_store_engine(url, timeouts)
    try:
        return upgrade_to_head(engine)
    except SQLAlchemyError as exc:
        raise translate(exc, f"upgrading the store at {redacted(url)}", url) from None
    finally:
        engine.dispose()


def upgrade_to_head(engine: Engine) -> tuple[str | None, str]:
    """Run the alembic migrations up to head in one write transaction; (revision before, after).

    Concurrent callers serialise: on SQLite through BEGIN IMMEDIATE, on PostgreSQL
    through an advisory lock, so the second finds the schema already at head.
    """
    config = _config()
    before = retry_while_locked(lambda: current_revision(engine))
    retry_while_locked(lambda: _upgrade(engine, config))
    head = head_revision()
    shown = redacted(engine.url.render_as_string(hide_password=False))
    log.info("store schema at %s (was %s) on %s", head, before or "none", shown)
    return before, head


def _upgrade(engine: Engine, config: Config) -> None:
    from alembic import command
    from alembic.util import CommandError

    with writer(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        config.attributes["connection"] = connection
        try:
            command.upgrade(config, "head")
        except CommandError as exc:
            raise StoreUnavailable(f"the store schema cannot be brought to this code's head: {exc}") from None
