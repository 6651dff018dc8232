"""The schema: migrations agree with the mapped tables, run only as an explicit step, and are checked\nat every open; SQLite is set up for concurrent writers."""

from __future__ import annotations

import logging
import secrets
import subprocess
import sys

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, inspect, make_url, text

from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.store.db import ModelStore, upgrade_store
from bnserve.store.db.engine import create_store_engine
from bnserve.store.db.schema import HEAD_REVISION, MIGRATIONS_DIR, head_revision
from bnserve.store.db.tables import Base
from bnserve.store.errors import PermissionDenied, SchemaMismatch
from tests.model_factory import random_model


def test_migrations_build_exactly_the_mapped_tables(model_store):
    with model_store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        tables = set(inspect(conn).get_table_names())
        head = MigrationContext.configure(conn).get_current_revision()
    assert diff == []
    assert tables == set(Base.metadata.tables) | {"alembic_version"}
    assert head == "0007"


def test_migration_scripts_sit_in_the_package():
    assert {p.name for p in MIGRATIONS_DIR.iterdir()} >= {"env.py", "script.py.mako", "versions"}
    assert (MIGRATIONS_DIR / "versions" / "0001_initial.py").is_file()
    assert not (MIGRATIONS_DIR / "alembic.ini").exists()  # configured in code


@pytest.fixture
def sqlite_store(tmp_path):
    with ModelStore(f"sqlite:///{tmp_path / 'store.db'}", create=True) as store:
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


# ------------------------------------------------------------------ migrations are an explicit step


def _revision(url: str) -> str | None:
    from bnserve.store.db.engine import create_store_engine
    from bnserve.store.db.schema import current_revision

    engine = create_store_engine(url)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def test_opening_never_migrates_a_new_store_only_a_writer_creates_it(empty_url):
    with pytest.raises(SchemaMismatch, match="(no bnserve schema|does not exist).*`trainer db upgrade"):
        ModelStore(empty_url)
    assert _revision(empty_url) is None  # refused, and left as it was
    with ModelStore(empty_url, create=True) as store:  # the first publish into a new store
        assert store.list_models() == []
    assert _revision(empty_url) == head_revision()
    ModelStore(empty_url).dispose()


def test_head_revision_names_the_last_migration():
    """Bump HEAD_REVISION with each new migration: a store at it is opened without alembic."""
    assert HEAD_REVISION == head_revision()


OPEN_AND_LIST_IMPORTED = """
import sys
from bnserve.store.db import ModelStore
with ModelStore(sys.argv[1]) as store:
    store.list_versions()
print(sorted({m.split(".")[0] for m in sys.modules} & {"alembic", "mako", "pygments"}))
"""


def test_a_store_at_this_codes_schema_opens_without_importing_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    ModelStore(url, create=True).dispose()
    child = subprocess.run(
        [sys.executable, "-c", OPEN_AND_LIST_IMPORTED, url], capture_output=True, text=True, check=True
    )
    assert child.stdout.strip() == "[]"


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path):
    path = tmp_path / "mistyped.db"
    with pytest.raises(SchemaMismatch, match="mistyped.db does not exist"):
        ModelStore(f"sqlite:///{path}")
    assert not path.exists()


def test_a_store_behind_is_refused_naming_the_command_until_upgraded(empty_url, rng):
    engine = create_store_engine(empty_url)
    with engine.begin() as connection:  # the store as the first release left it
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
    engine.dispose()
    for create in (False, True):  # a writer does not migrate either
        with pytest.raises(SchemaMismatch, match="revision 0001, behind this bnserve's 0007.*`trainer db upgrade"):
            ModelStore(empty_url, create=create)
    assert upgrade_store(empty_url) == ("0001", head_revision())
    assert upgrade_store(empty_url) == (head_revision(), head_revision())  # again: nothing to do
    with ModelStore(empty_url) as store:
        store.publish("m", random_model(rng, n_features=2))


def test_a_newer_schema_is_read_with_a_warning_and_never_written(store_url, rng, caplog):
    with ModelStore(store_url) as store:
        store.publish("m", random_model(rng, n_features=2))
    engine = create_store_engine(store_url)
    with engine.begin() as connection:  # as a later bnserve's migration would leave it
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    engine.dispose()
    with pytest.raises(SchemaMismatch, match="revision f00d, newer than this bnserve's"):
        ModelStore(store_url, create=True)
    with caplog.at_level(logging.WARNING), ModelStore(store_url) as store:  # a server of the last release
        assert store.load("m").version == 1
    assert "newer than this bnserve's" in caplog.text


@pytest.mark.postgresql
def test_a_role_that_may_only_read_serves(pg_url_factory, rng):
    """The server writes nothing to the store, so a role granted SELECT alone runs it."""
    from tests.conftest import _libpq

    owner_url = pg_url_factory()
    model = random_model(rng, n_features=3)
    with ModelStore(owner_url, create=True) as store:
        store.publish("m", model, aliases=["production"])
    url = make_url(owner_url)
    schema = url.query["options"].split("search_path=")[1].split()[0]
    role = f"reader_{secrets.token_hex(4)}"
    with psycopg.connect(_libpq(owner_url), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    reader_url = url.set(username=role, password=None).render_as_string(hide_password=False)
    try:
        with ModelStore(reader_url) as store:
            with pytest.raises(PermissionDenied, match="may not do this: permission denied"):
                store.publish("m", model)
        app = App(ServeConfig(store_url=reader_url, host="127.0.0.1", port=0, metrics_port=-1)).start()
        try:
            assert app.repository.wait_ready(30)
            served, _ = app.repository.get("m")
            assert served.checksum == model.checksum()
        finally:
            app.stop()
    finally:
        with psycopg.connect(_libpq(owner_url), autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
