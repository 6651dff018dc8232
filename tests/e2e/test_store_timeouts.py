"""`server serve` and `trainer` against a PostgreSQL that hangs (behind a stalled
``tests.tcp_proxy.TcpProxy``: connections accepted, nothing ever answered) exit 1 naming
the store, within their store timeouts, instead of waiting. psycopg alone waits 130 s to
connect; the subprocess is given 60."""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import make_url

from bnserve.store.db import ModelStore
from tests.e2e.serving import BIN
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgresql

PASSWORD = "not-a-real-secret-5e1b"


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def stalled_store(pg_fresh_database):
    """The URL (with a password) of a real store reached through a stalled proxy."""
    with ModelStore(pg_fresh_database, create=True):
        pass
    with TcpProxy("127.0.0.1", make_url(pg_fresh_database).port or 5432) as proxy:
        proxy.stall()
        yield (
            make_url(pg_fresh_database)
            .set(host=proxy.host, port=proxy.port, password=PASSWORD)
            .render_as_string(hide_password=False)
        )


def test_server_serve_exits_when_the_store_does_not_answer(stalled_store):
    env = {**os.environ, "BNSERVE_STORE_URL": stalled_store, "BNSERVE_STORE_CONNECT_TIMEOUT": "2"}
    result = run("server", "serve", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "-1", env=env)
    assert result.returncode == 1, result.stderr
    assert "server: error: opening the store at " in result.stderr and "timeout" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


@pytest.mark.parametrize("command", [("list",), ("db", "upgrade")])
def test_trainer_exits_when_the_store_does_not_answer(stalled_store, command):
    env = {**os.environ, "BNSERVE_STORE_URL": stalled_store}
    result = run("trainer", *command, "--store-connect-timeout", "2", env=env)
    assert result.returncode == 1, result.stderr
    assert "trainer: error: " in result.stderr and "timeout" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout
