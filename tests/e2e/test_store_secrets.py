"""A store string's secrets never reach the output of `trainer` or `server serve`, whatever
its shape: a libpq keyword/value string, ``user:password@host`` without a scheme, a password
holding an unencoded '@' (whose tail SQLAlchemy would take for the host and the driver
would print), a password in the query. Each is given on the command line and in
BNSERVE_STORE_URL; the real commands run and fail, naming the store with *** in place.
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.serving import free_port, run_cli

SECRET = "s3cr3t-Vx9q"
AT_SECRET = "s3cr@t-Vx9q"  # an unencoded '@': its tail "t-Vx9q" must not show either
NOWHERE = f"127.0.0.1:{free_port()}"  # nothing listens: a connection is refused at once

STORE_STRINGS = {
    "libpq keyword/value": f"host=127.0.0.1 port=1 user=bnserve password={SECRET} dbname=models",
    "quoted libpq value": f"host=127.0.0.1 password='{SECRET} x' dbname=models",
    "user:password@host, no scheme": f"bnserve:{SECRET}@127.0.0.1/models",
    "'@' in the password": f"postgresql+psycopg://bnserve:{AT_SECRET}@{NOWHERE}/models",
    "password in the query": f"postgresql+psycopg://bnserve@{NOWHERE}/models?password={SECRET}&sslmode=disable",
    "well formed, unreachable": f"postgresql+psycopg://bnserve:{SECRET}@{NOWHERE}/models",
}
COMMANDS = {
    "trainer list": ("trainer", "list"),
    "trainer db upgrade": ("trainer", "db", "upgrade"),
    "server serve": ("server", "serve", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "-1"),
}


def shown(result) -> str:
    return result.stdout + result.stderr


def assert_no_secret(text: str) -> None:
    for fragment in (SECRET, AT_SECRET, "t-Vx9q", "s3cr"):
        assert fragment not in text, text


@pytest.mark.parametrize("store", STORE_STRINGS.values(), ids=STORE_STRINGS.keys())
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_store_string_given_on_the_command_line_never_shows_its_secret(command, store):
    result = run_cli(*command, "--store", store)
    assert result.returncode == 1, shown(result)
    assert f"{command[0]}: error:" in result.stderr and "***" in result.stderr, shown(result)
    assert "Traceback" not in result.stderr
    assert_no_secret(shown(result))


@pytest.mark.parametrize("store", STORE_STRINGS.values(), ids=STORE_STRINGS.keys())
def test_a_store_string_from_the_environment_never_shows_its_secret_even_in_debug_logs(store):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BNSERVE_")}
    result = run_cli(*COMMANDS["server serve"], "--log-level", "DEBUG", env={**env, "BNSERVE_STORE_URL": store})
    assert result.returncode == 1, shown(result)
    assert "***" in result.stderr, shown(result)
    assert_no_secret(shown(result))
