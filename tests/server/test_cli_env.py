"""`server serve` takes its flags from BNSERVE_<FLAG> environment variables too (a
Kubernetes ConfigMap sets them); a flag on the command line wins."""

import pytest

from bnserve.server.cli import build_parser


def test_environment_sets_serve_flags_and_a_flag_wins():
    env = {
        "BNSERVE_GRACE_SECONDS": "25",
        "BNSERVE_PORT": "6000",
        "BNSERVE_WORKERS": "2",
        "BNSERVE_LOG_LEVEL": "WARNING",
        "BNSERVE_METRICS_PORT": "-1",
    }
    args = build_parser(env).parse_args(["serve", "--port", "7000"])
    assert (args.grace_seconds, args.port, args.workers, args.log_level, args.metrics_port) == (
        25.0,
        7000,
        2,
        "WARNING",
        -1,
    )
    plain = build_parser({}).parse_args(["serve"])
    assert (plain.grace_seconds, plain.port, plain.workers) == (5.0, 50051, 1)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("BNSERVE_PORT", "abc", "BNSERVE_PORT='abc': expected a whole number"),
        ("BNSERVE_POLL_SECONDS", "soon", "BNSERVE_POLL_SECONDS='soon': expected a number of seconds"),
        ("BNSERVE_PLAN_CACHE_BYTES", "64MiB", "expected a whole number of bytes"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error_naming_the_variable(capsys, name, value, message):
    with pytest.raises(SystemExit) as exit_:
        build_parser({name: value})
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_plan_cache_budget_from_a_flag_or_the_environment():
    assert build_parser({}).parse_args(["serve"]).plan_cache_bytes == 64 * 1024 * 1024
    assert build_parser({"BNSERVE_PLAN_CACHE_BYTES": "0"}).parse_args(["serve"]).plan_cache_bytes == 0
    args = build_parser({"BNSERVE_PLAN_CACHE_BYTES": "0"}).parse_args(["serve", "--plan-cache-bytes", "1000"])
    assert args.plan_cache_bytes == 1000


def test_tls_and_token_files_from_the_environment():
    env = {
        "BNSERVE_TLS_CERT": "/tls/tls.crt",
        "BNSERVE_TLS_KEY": "/tls/tls.key",
        "BNSERVE_TLS_CLIENT_CA": "/tls/ca.crt",
        "BNSERVE_AUTH_TOKEN_FILE": "/auth/token",
        "BNSERVE_TOKEN_FILE": "/client/token",
    }
    args = build_parser(env).parse_args(["serve", "--auth-token-file", "/other/token"])
    assert (args.tls_cert, args.tls_key, args.tls_client_ca, args.auth_token_file) == (
        "/tls/tls.crt",
        "/tls/tls.key",
        "/tls/ca.crt",
        "/other/token",
    )
    assert build_parser(env).parse_args(["predict", "--model", "m"]).token_file == "/client/token"
    assert build_parser(env).parse_args(["predict", "--model", "m", "--token-file", "t"]).token_file == "t"
    plain = build_parser({}).parse_args(["serve"])
    assert (plain.tls_cert, plain.tls_key, plain.tls_client_ca, plain.auth_token_file) == (None, None, None, None)
    assert build_parser({}).parse_args(["predict", "--model", "m"]).token_file is None


def test_the_verify_key_from_a_flag_or_the_environment():
    assert build_parser({}).parse_args(["serve"]).verify_key is None
    env = {"BNSERVE_VERIFY_KEY": "/keys/verify-key.pem"}
    assert build_parser(env).parse_args(["serve"]).verify_key == "/keys/verify-key.pem"
    assert build_parser(env).parse_args(["serve", "--verify-key", "ring.pem"]).verify_key == "ring.pem"


def test_store_timeouts_come_from_flags_or_the_environment_and_reach_the_config():
    from bnserve.server.cli import SERVE_ENV_FLAGS
    from bnserve.server.config import ServeConfig
    from bnserve.store.timeouts import StoreTimeouts

    env = {"BNSERVE_STORE_CONNECT_TIMEOUT": "3", "BNSERVE_STORE_STATEMENT_TIMEOUT": "0"}
    args = build_parser(env).parse_args(["serve", "--store-statement-timeout", "7.5"])
    config = ServeConfig(store_url="sqlite://", **{name: getattr(args, name) for name in SERVE_ENV_FLAGS})
    assert config.store_timeouts == StoreTimeouts(connect_seconds=3, statement_seconds=7.5)
    assert ServeConfig(store_url="sqlite://").store_timeouts == StoreTimeouts()


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("BNSERVE_STORE_CONNECT_TIMEOUT", "0", "BNSERVE_STORE_CONNECT_TIMEOUT='0': must be more than 0"),
        ("BNSERVE_STORE_STATEMENT_TIMEOUT", "-1", "BNSERVE_STORE_STATEMENT_TIMEOUT='-1': must be 0 or more"),
        (
            "BNSERVE_STORE_STATEMENT_TIMEOUT",
            "nan",
            "BNSERVE_STORE_STATEMENT_TIMEOUT='nan': expected a number of seconds",
        ),
    ],
)
def test_a_bad_store_timeout_is_a_usage_error_naming_the_variable(capsys, name, value, message):
    with pytest.raises(SystemExit) as exit_:
        build_parser({name: value})
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_store_load_settings_from_flags_or_the_environment_reach_every_worker(tmp_path):
    import itertools

    from bnserve.server.config import ServeConfig
    from bnserve.server.workers import Supervisor
    from bnserve.store.db import upgrade_store

    plain = build_parser({}).parse_args(["serve"])
    assert (plain.store_threads, plain.max_load_waiters, plain.version_cache_bytes) == (2, 64, 64 * 1024 * 1024)
    env = {"BNSERVE_STORE_THREADS": "3", "BNSERVE_MAX_LOAD_WAITERS": "5", "BNSERVE_VERSION_CACHE_BYTES": "1000"}
    args = build_parser(env).parse_args(["serve", "--store-threads", "4"])
    assert (args.store_threads, args.max_load_waiters, args.version_cache_bytes) == (4, 5, 1000)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade_store(url)
    config = ServeConfig(
        store_url=url,
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        store_threads=4,
        max_load_waiters=5,
        version_cache_bytes=1000,
    )
    supervisor = Supervisor(config, 2)
    try:
        flags = dict(itertools.pairwise(supervisor._command()))
    finally:
        supervisor._close()
    assert (flags["--store-threads"], flags["--max-load-waiters"], flags["--version-cache-bytes"]) == ("4", "5", "1000")


def test_the_request_budget_and_its_limits_from_flags_or_the_environment():
    plain = build_parser({}).parse_args(["serve"])
    assert (plain.max_inflight_bytes, plain.max_connection_inflight_bytes) == (384 * 2**20, 192 * 2**20)
    assert (plain.max_connections, plain.body_seconds) == (64, 30.0)
    env = {
        "BNSERVE_MAX_INFLIGHT_BYTES": "1000000",
        "BNSERVE_MAX_CONNECTION_INFLIGHT_BYTES": "500000",
        "BNSERVE_MAX_CONNECTIONS": "16",
        "BNSERVE_BODY_SECONDS": "2.5",
    }
    args = build_parser(env).parse_args(["serve", "--max-connections", "32"])
    assert (args.max_inflight_bytes, args.max_connection_inflight_bytes, args.max_connections, args.body_seconds) == (
        1_000_000,
        500_000,
        32,
        2.5,
    )
