"""A store that hangs fails the call with StoreUnavailable instead of holding it for good.

PostgreSQL runs behind ``tests.tcp_proxy.TcpProxy``, stalled: connections stay open, nothing
is forwarded (a network partition). Without the timeouts each call below waits forever (psycopg
waits 130 s to connect, and for an answer without end); each runs in a thread joined after a
minute, the sign of a hang rather than a speed limit. Also: the server's statement_timeout
cancels a statement stuck on a lock, and SQLite waits for a lock no longer than the setting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import psycopg
import pytest
from sqlalchemy import make_url, text

from bnserve.store.db import ModelStore
from bnserve.store.db.engine import create_store_engine, writer
from bnserve.store.errors import StoreUnavailable
from bnserve.store.timeouts import StoreTimeouts
from tests.model_factory import random_model
from tests.tcp_proxy import TcpProxy

HANG = 60.0  # seconds: a call still waiting then would wait for ever
TIMEOUTS = StoreTimeouts(connect_seconds=2, statement_seconds=1)


def outcome(call: Callable[[], object]) -> BaseException | None:
    """What ``call`` raised, or None; fails the test if it hangs."""
    result: dict = {}

    def run() -> None:
        try:
            call()
            result["error"] = None
        except BaseException as exc:  # handed to the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"the store call still waits after {HANG:g} s"
    return result["error"]


def through(proxy: TcpProxy, url: str) -> str:
    return make_url(url).set(host=proxy.host, port=proxy.port).render_as_string(hide_password=False)


def small_model(seed: int = 0):
    return random_model(np.random.default_rng(seed), n_features=3, cardinalities=(2, 2))


@pytest.mark.postgresql
def test_a_partitioned_store_fails_each_call_and_recovers_after(pg_fresh_database):
    with ModelStore(pg_fresh_database, create=True) as direct:
        direct.publish("m", small_model())
    with TcpProxy("127.0.0.1", make_url(pg_fresh_database).port or 5432) as proxy:
        with ModelStore(through(proxy, pg_fresh_database), timeouts=TIMEOUTS) as store:
            assert store.load("m").version == 1  # a pooled connection is open
            proxy.stall()
            error = outcome(lambda: store.load("m"))
            assert isinstance(error, StoreUnavailable), error
            assert error.message.startswith("loading model 'm': the store failed:")
            error = outcome(lambda: store.list_models())
            assert isinstance(error, StoreUnavailable), error
            proxy.restore()
            assert store.load("m").version == 1  # the broken connections were discarded


@pytest.mark.postgresql
def test_opening_a_partitioned_store_fails_within_the_connect_timeout(pg_fresh_database):
    with ModelStore(pg_fresh_database, create=True):
        pass
    with TcpProxy("127.0.0.1", make_url(pg_fresh_database).port or 5432) as proxy:
        proxy.stall()
        error = outcome(lambda: ModelStore(through(proxy, pg_fresh_database), timeouts=TIMEOUTS))
    assert isinstance(error, StoreUnavailable), error
    assert "opening the store at" in error.message and "timeout" in error.message


@pytest.mark.postgresql
def test_a_connection_that_gets_no_answer_gives_up_and_closes(pg_fresh_database):
    """Past the ping: a statement sent on an open connection whose answer never comes."""
    with TcpProxy("127.0.0.1", make_url(pg_fresh_database).port or 5432) as proxy:
        engine = create_store_engine(through(proxy, pg_fresh_database), TIMEOUTS)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
                proxy.stall()
                error = outcome(lambda: connection.execute(text("SELECT 1")))
                assert isinstance(error.__cause__ if error else None, psycopg.OperationalError), error
                assert "the store did not answer within 3 s" in str(error)
                assert connection.invalidated  # the pool will not hand it out again
        finally:
            engine.dispose()


@pytest.mark.postgresql
def test_the_server_cancels_a_statement_past_the_statement_timeout(pg_fresh_database):
    """A publish stuck behind another transaction's lock on the model's row."""
    with ModelStore(pg_fresh_database, create=True) as direct:
        direct.publish("m", small_model())
    blocker = psycopg.connect(make_url(pg_fresh_database).set(drivername="postgresql").render_as_string(False))
    try:
        blocker.execute("SELECT id FROM models WHERE name = 'm' FOR UPDATE")
        with ModelStore(pg_fresh_database, timeouts=TIMEOUTS) as store:
            error = outcome(lambda: store.publish("m", small_model(1)))
        assert isinstance(error, StoreUnavailable), error
        assert "statement timeout" in error.message
    finally:
        blocker.close()


def test_sqlite_waits_for_a_lock_no_longer_than_the_statement_timeout(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as direct:
        direct.publish("m", small_model())
    engine = create_store_engine(url)
    try:
        with ModelStore(url, timeouts=StoreTimeouts(connect_seconds=1, statement_seconds=0.2)) as store:
            with store.engine.connect() as connection:
                assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 200
            with writer(engine).begin() as holder:  # another writer holds the lock (BEGIN IMMEDIATE)
                error = outcome(lambda: store.publish("m", small_model(1)))
                holder.rollback()
    finally:
        engine.dispose()
    assert isinstance(error, StoreUnavailable), error
    assert "locked" in error.message
