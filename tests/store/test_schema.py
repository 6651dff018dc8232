"""The schema: migrations agree with the mapped tables; SQLite is set up for concurrent writers."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, inspect

from bnserve.store.engine import MIGRATIONS_DIR
from bnserve.store.sql import ModelStore
from bnserve.store.tables import Base
from tests.model_factory import random_model


def test_migrations_build_exactly_the_mapped_tables(model_store):
    with model_store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        tables = set(inspect(conn).get_table_names())
        head = MigrationContext.configure(conn).get_current_revision()
    assert diff == []
    assert tables == set(Base.metadata.tables) | {"alembic_version"}
    assert head == "0002"


def test_migration_scripts_sit_in_the_package():
    assert {p.name for p in MIGRATIONS_DIR.iterdir()} >= {"env.py", "script.py.mako", "versions"}
    assert (MIGRATIONS_DIR / "versions" / "0001_initial.py").is_file()
    assert not (MIGRATIONS_DIR / "alembic.ini").exists()  # configured in code


@pytest.fixture
def sqlite_store(tmp_path):
    with ModelStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        yield store


def test_sqlite_connections_enforce_foreign_keys_in_wal_mode(sqlite_store):
    with sqlite_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0


def test_sqlite_writes_begin_immediate_and_reads_begin_deferred(sqlite_store, rng):
    statements: list[str] = []
    event.listen(sqlite_store.engine, "before_cursor_execute", lambda c, cur, stmt, *a: statements.append(stmt))

    sqlite_store.publish("m", random_model(rng, n_features=1))
    writes, statements[:] = list(statements), []
    sqlite_store.load("m")

    assert writes[0] == "BEGIN IMMEDIATE"
    assert statements[0] == "BEGIN" and "BEGIN IMMEDIATE" not in statements
