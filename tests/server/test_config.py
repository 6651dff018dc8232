"""``ServeConfig`` checks every setting itself, so a flag, a ``BNSERVE_*`` variable and a
Python caller meet one rule: out of bounds is a ``ConfigError`` whose one line names the
setting, its flag and its variable; ``server serve`` prints it as a usage error (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from bnserve.server.cli import main
from bnserve.server.config import BOUNDS, ConfigError, ServeConfig

ROOT = Path(__file__).resolve().parents[2]

OUT_OF_BOUNDS = [
    ("port", -3, "port must be from 0 to 65535, got -3 (--port, BNSERVE_PORT)"),
    ("port", 70000, "port must be from 0 to 65535, got 70000"),
    ("metrics_port", -2, "metrics_port must be from -1 to 65535, got -2 (--metrics-port, BNSERVE_METRICS_PORT)"),
    ("poll_seconds", -1, "poll_seconds must be more than 0 seconds, got -1 (--poll-seconds, BNSERVE_POLL_SECONDS)"),
    ("poll_seconds", 0, "poll_seconds must be more than 0 seconds, got 0"),
    ("poll_stall_seconds", float("inf"), "poll_stall_seconds must be a number of seconds, got inf"),
    ("grace_seconds", -5, "grace_seconds must be 0 or more seconds, got -5 (--grace-seconds, BNSERVE_GRACE_SECONDS)"),
    ("idle_seconds", 0.0, "idle_seconds must be more than 0 seconds, got 0.0"),
    ("threads", 0, "threads must be at least 1, got 0 (--threads, BNSERVE_THREADS)"),
    ("threads", 2.5, "threads must be a whole number, got 2.5"),
    ("threads", True, "threads must be a whole number, got True"),
    ("workers", 0, "workers must be at least 1, got 0 (--workers, BNSERVE_WORKERS)"),
    ("max_rows", 0, "max_rows must be at least 1, got 0 (--max-rows, BNSERVE_MAX_ROWS)"),
    ("max_message_bytes", 2**31, "max_message_bytes must be from 1 to 2147483647, got 2147483648"),
    ("max_streams_per_connection", 0, "max_streams_per_connection must be at least 1, got 0"),
    ("max_inflight_bytes", 0, "max_inflight_bytes must be at least 1, got 0 (--max-inflight-bytes"),
    (
        "max_connection_inflight_bytes",
        0,
        "max_connection_inflight_bytes must be at least 1, got 0 (--max-connection-inflight-bytes, "
        "BNSERVE_MAX_CONNECTION_INFLIGHT_BYTES)",
    ),
    ("max_connections", 0, "max_connections must be at least 1, got 0 (--max-connections, BNSERVE_MAX_CONNECTIONS)"),
    ("body_seconds", 0, "body_seconds must be more than 0 seconds, got 0 (--body-seconds, BNSERVE_BODY_SECONDS)"),
    (
        "plan_cache_bytes",
        -1,
        "plan_cache_bytes must be 0 or more, got -1 (--plan-cache-bytes, BNSERVE_PLAN_CACHE_BYTES)",
    ),
    ("store_threads", 0, "store_threads must be at least 1, got 0 (--store-threads, BNSERVE_STORE_THREADS)"),
    (
        "max_load_waiters",
        0,
        "max_load_waiters must be at least 1, got 0 (--max-load-waiters, BNSERVE_MAX_LOAD_WAITERS)",
    ),
    (
        "version_cache_bytes",
        -1,
        "version_cache_bytes must be 0 or more, got -1 (--version-cache-bytes, BNSERVE_VERSION_CACHE_BYTES)",
    ),
    ("compile", "soon", "compile must be one of eager, lazy, got 'soon' (--compile, BNSERVE_COMPILE)"),
    ("log_level", "LOUD", "log_level must be one of DEBUG, INFO, WARNING, ERROR, got 'LOUD'"),
    ("host", " ", "host must be a non-empty string, got ' ' (--host, BNSERVE_HOST)"),
    ("tls_cert", "", "tls_cert must be a non-empty string, got '' (--tls-cert, BNSERVE_TLS_CERT)"),
    ("store_connect_timeout", 0, "store_connect_timeout must be more than 0 seconds, got 0 (--store-connect-timeout"),
    ("store_statement_timeout", -1, "store_statement_timeout must be 0 or more seconds, got -1"),
]


@pytest.mark.parametrize("name, value, message", OUT_OF_BOUNDS)
def test_a_python_caller_meets_the_bounds(name, value, message):
    with pytest.raises(ConfigError) as error:
        ServeConfig(store_url="sqlite://", **{name: value})
    assert message in error.value.message and "\n" not in error.value.message
    assert error.value.code == "INVALID_ARGUMENT"


def test_the_edges_that_mean_something_are_taken():
    config = ServeConfig(
        store_url="sqlite://",
        port=0,
        metrics_port=-1,
        grace_seconds=0,
        plan_cache_bytes=0,
        version_cache_bytes=0,
        store_statement_timeout=0,
        log_level="debug",
        compile="lazy",
        poll_seconds=0.05,
    )
    assert (config.port, config.metrics_port, config.grace_seconds) == (0, -1, 0)


def test_every_setting_has_a_bound():
    assert set(BOUNDS) == {f.name for f in fields(ServeConfig)} - {"worker"}  # worker: set by a parent only


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--threads", "0"], "threads must be at least 1, got 0 (--threads, BNSERVE_THREADS)"),
        (["--poll-seconds", "-1"], "poll_seconds must be more than 0 seconds, got -1.0 (--poll-seconds"),
        (["--grace-seconds", "-5"], "grace_seconds must be 0 or more seconds, got -5.0 (--grace-seconds"),
        (["--port", "-3"], "port must be from 0 to 65535, got -3 (--port, BNSERVE_PORT)"),
        (["--compile", "soon"], "compile must be one of eager, lazy, got 'soon'"),
    ],
)
def test_a_flag_out_of_bounds_is_a_usage_error(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--store", f"sqlite:///{tmp_path / 'store.db'}", *flags])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"server serve: error: {message}" in err


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "BNSERVE_POLL_SECONDS",
            "-1",
            "poll_seconds must be more than 0 seconds, got -1.0 (--poll-seconds, BNSERVE_POLL_SECONDS)",
        ),
        ("BNSERVE_PORT", "-3", "port must be from 0 to 65535, got -3"),
        ("BNSERVE_WORKERS", "0", "workers must be at least 1, got 0 (--workers, BNSERVE_WORKERS)"),
        ("BNSERVE_PLAN_CACHE_BYTES", "-1", "plan_cache_bytes must be 0 or more, got -1"),
        ("BNSERVE_LOG_LEVEL", "chatty", "log_level must be one of DEBUG, INFO, WARNING, ERROR, got 'chatty'"),
    ],
)
def test_a_variable_out_of_bounds_is_a_usage_error(tmp_path, capsys, monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--store", f"sqlite:///{tmp_path / 'store.db'}"])
    assert exit_.value.code == 2 and f"server serve: error: {message}" in capsys.readouterr().err


def test_the_real_command_prints_one_line_and_no_traceback(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bnserve.server.cli",
            "serve",
            "--store",
            f"sqlite:///{tmp_path / 'store.db'}",
            "--threads",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "server serve: error: threads must be at least 1, got 0 (--threads, BNSERVE_THREADS)"
    )
