"""Store errors by kind, from real database errors on SQLite and PostgreSQL: a value the
database refuses is INVALID_ARGUMENT, a state it refuses (its own constraint, a schema
that is not this code's) FAILED_PRECONDITION, and only a connection, a timeout or a lock
UNAVAILABLE, the one status clients retry (tests/e2e/test_store_outage.py and
test_store_timeouts.py hold those). Seen where users meet them: the trainer's exit
message, and the status code of a real server."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, event, text

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.server.interceptors import status_of
from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidInput, StoreRefused
from bnserve.trainer.cli import main as trainer
from tests.model_factory import random_model

DATA = Path(__file__).resolve().parents[1] / "data" / "car.csv.gz"


def fit(url: str, *extra: str) -> list[str]:
    return ["fit", "--algo", "kdb", "--k", "1", "--data", str(DATA), "--name", "car", "--store", url, *extra]


def run_sql(url: str, *statements: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


@contextmanager
def sqlite_length_limit(max_bytes: int) -> Iterator[None]:
    """Every SQLite connection opened meanwhile refuses strings and blobs over ``max_bytes``
    (SQLITE_LIMIT_LENGTH): its own 'string or blob too big', a real DataError."""

    def limit(dbapi_connection, _record) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_bytes)

    event.listen(Engine, "connect", limit)
    try:
        yield
    finally:
        event.remove(Engine, "connect", limit)


def test_a_blob_too_big_for_sqlite_is_a_refused_value(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with sqlite_length_limit(200):
        assert trainer(fit(url)) == 1
    err = capsys.readouterr().err
    assert "the database refused a value: string or blob too big" in err and "the store failed" not in err


@pytest.mark.postgresql
def test_a_value_too_long_for_a_postgresql_column_is_a_refused_value(store_url, capsys):
    if not store_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL column")
    run_sql(store_url, "ALTER TABLE model_versions ALTER COLUMN description TYPE varchar(10)")
    assert trainer(fit(store_url, "--description", "longer than ten characters")) == 1
    err = capsys.readouterr().err
    assert "the database refused a value: value too long for type character varying(10)" in err


@pytest.mark.postgresql
def test_a_value_past_a_postgresql_limit_is_a_refused_value_not_unavailable(store_url, capsys):
    """An index row past btree's 2,704 bytes: program_limit_exceeded (class 54), which psycopg
    raises as an OperationalError, the class of a lost connection: it was UNAVAILABLE."""
    if not store_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL limit")
    run_sql(store_url, "CREATE INDEX ix_description ON model_versions (description)")
    rng = random.Random(0)
    incompressible = "".join(chr(rng.randrange(0x10000, 0x1FFFF)) for _ in range(1000))  # 4 bytes each
    with ModelStore(store_url) as store, pytest.raises(InvalidInput) as refused:
        store.publish("m", random_model(np.random.default_rng(0)), description=incompressible)
    assert "the database refused a value: index row size" in refused.value.message
    assert status_of(refused.value) == grpc.StatusCode.INVALID_ARGUMENT


def test_a_constraint_of_the_database_is_a_refused_state(store_url, capsys):
    """A check the database makes and this code does not know: FAILED_PRECONDITION, with the
    database's reason; retrying the same write cannot help."""
    if store_url.startswith("sqlite"):
        run_sql(
            store_url,
            "CREATE TRIGGER no_drafts BEFORE INSERT ON model_versions WHEN NEW.description = 'draft' "
            "BEGIN SELECT RAISE(ABORT, 'no drafts here'); END",
        )
        reason = "no drafts here"
    else:
        run_sql(store_url, "ALTER TABLE model_versions ADD CONSTRAINT ck_no_drafts CHECK (description <> 'draft')")
        reason = 'violates check constraint "ck_no_drafts"'
    assert trainer(fit(store_url, "--description", "draft")) == 1
    err = capsys.readouterr().err
    assert "the database refused it: " in err and reason in err
    with ModelStore(store_url) as store, pytest.raises(StoreRefused) as refused:
        store.publish("m", random_model(np.random.default_rng(0)), description="draft")
    assert status_of(refused.value) == grpc.StatusCode.FAILED_PRECONDITION


def test_a_server_reading_a_store_whose_schema_broke_answers_failed_precondition(store_url):
    """A version loaded on demand from a store whose table is gone: the database's 'no such
    table' is no outage, so the client must not be told to retry (it was UNAVAILABLE)."""
    rng = np.random.default_rng(1)
    with ModelStore(store_url) as store:
        store.publish("m", random_model(rng))
        store.publish("m", random_model(rng))
    app = App(ServeConfig(store_url=store_url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=3600)).start()
    try:
        assert app.repository.wait_ready(30)
        run_sql(store_url, "ALTER TABLE arcs RENAME TO arcs_gone")
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            latest = stub.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()]), timeout=30)
            with pytest.raises(grpc.RpcError) as old:
                stub.Predict(pb.PredictRequest(model="m", version=1, instances=[pb.Instance()]), timeout=30)
            run_sql(store_url, "ALTER TABLE arcs_gone RENAME TO arcs")  # mended: the version was not refused
            mended = stub.Predict(pb.PredictRequest(model="m", version=1, instances=[pb.Instance()]), timeout=30)
    finally:
        app.stop()
    assert latest.version == 2 and mended.version == 1  # what is in memory kept answering
    assert old.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert old.value.details().startswith("loading model 'm': the database refused it: ")
    assert "arcs" in old.value.details()
