"""Shared fixtures: a model-store URL on each backend, a store, and a seeded rng.

PostgreSQL: one fresh database ``bnserve_test_<hex>`` per test session on
``$BNSERVE_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``),
and inside it one empty schema per URL handed out (selected through ``search_path`` in
the URL), dropped after the test. When PostgreSQL is unreachable its tests are skipped,
unless ``BNSERVE_REQUIRE_POSTGRES=1`` (CI), which makes them fail.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator

import numpy as np
import psycopg
import pytest
from hypothesis import settings
from sqlalchemy import make_url

from tests import tiers

PG_SERVER_URL = os.environ.get("BNSERVE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG_ENV = "BNSERVE_REQUIRE_POSTGRES"
BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql))

# Hypothesis: "ci" draws the same examples on every run (derandomised, so a red CI is
# reproduced by rerunning it), "dev" new ones each time; both print the blob that replays a
# failure (@reproduce_failure). BNSERVE_HYPOTHESIS_PROFILE picks one; .ci/run sets "ci".
HYPOTHESIS_PROFILE_ENV = "BNSERVE_HYPOTHESIS_PROFILE"
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get(HYPOTHESIS_PROFILE_ENV, "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgresql: needs the PostgreSQL server (deselect with -m 'not postgresql')")
    config.addinivalue_line(
        "markers", f"{tiers.SLOW}: in the rest, not the default set (tests/tiers.py; run with -m slow)"
    )


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the rest ``slow`` by tests/tiers.py's rule; on a whole-suite collection, a listed
    name that matches no test is an error."""
    for item in items:
        if tiers.is_slow(item.nodeid):
            item.add_marker(tiers.SLOW)
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS and (stale := tiers.unmatched(i.nodeid for i in items)):
        raise pytest.UsageError(f"tests/tiers.py lists tests that do not exist: {', '.join(stale)}")


def _libpq(sqlalchemy_url: str) -> str:
    """The psycopg conninfo for a ``postgresql+psycopg://`` URL."""
    return make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(hide_password=False)


class PgTestDatabase:
    """A database created for this test session; hands out empty schemas as store URLs."""

    def __init__(self, server_url: str):
        self.name = f"bnserve_test_{secrets.token_hex(6)}"
        self._server_url = server_url
        self.url = make_url(server_url).set(database=self.name)
        with psycopg.connect(_libpq(server_url), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{self.name}"')
        self._conn = psycopg.connect(_libpq(self.url.render_as_string(hide_password=False)), autocommit=True)

    def new_schema(self) -> tuple[str, str]:
        """(schema, SQLAlchemy URL whose connections use only that schema)."""
        schema = f"t_{secrets.token_hex(6)}"
        self._conn.execute(f'CREATE SCHEMA "{schema}"')
        url = self.url.update_query_dict({"options": f"-csearch_path={schema} -csynchronous_commit=off"})
        return schema, url.render_as_string(hide_password=False)

    def drop_schema(self, schema: str) -> None:
        """Drop it unless a leaked connection still holds locks (then it goes with the database)."""
        try:
            self._conn.execute("SET lock_timeout = '2s'")
            self._conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        except psycopg.errors.LockNotAvailable:
            pass

    def drop(self) -> None:
        self._conn.close()
        with psycopg.connect(_libpq(self._server_url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database() -> Iterator[PgTestDatabase]:
    """This session's PostgreSQL database; skip (or fail when required) if there is no server."""
    try:
        database = PgTestDatabase(PG_SERVER_URL)
    except psycopg.OperationalError as exc:
        where = make_url(PG_SERVER_URL).render_as_string(hide_password=True)
        if os.environ.get(REQUIRE_PG_ENV) == "1":
            pytest.fail(f"PostgreSQL is required ({REQUIRE_PG_ENV}=1) but unreachable at {where}: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {where}: {exc}")
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture
def pg_url_factory(pg_database: PgTestDatabase) -> Iterator[Callable[[], str]]:
    """Call it for a fresh, empty PostgreSQL store URL; each is dropped after the test."""
    schemas: list[str] = []

    def make() -> str:
        schema, url = pg_database.new_schema()
        schemas.append(schema)
        return url

    yield make
    for schema in schemas:
        pg_database.drop_schema(schema)


@pytest.fixture
def pg_fresh_database(pg_database: PgTestDatabase) -> Iterator[str]:
    """A whole database ``bnserve_fault_<hex>`` of its own (not a schema), for tests that put
    something between a server and PostgreSQL; its SQLAlchemy URL. Dropped after the test,
    with any connection a killed process left behind."""
    name = f"bnserve_fault_{secrets.token_hex(6)}"
    with psycopg.connect(_libpq(PG_SERVER_URL), autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(PG_SERVER_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(PG_SERVER_URL), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """The URL of an empty database: a SQLite file in tmp_path, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url_factory")()


@pytest.fixture
def store_url(empty_url: str) -> str:
    """The URL of an empty store, its schema created (``trainer db upgrade``)."""
    from bnserve.store.db import upgrade_store

    upgrade_store(empty_url)
    return empty_url


@pytest.fixture
def model_store(store_url: str):
    """A ModelStore on ``store_url``, disposed after the test."""
    from bnserve.store.db import ModelStore

    with ModelStore(store_url) as opened:
        yield opened


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240607)
