"""`server serve` takes its flags from BNSERVE_<FLAG> environment variables too (a
Kubernetes ConfigMap sets them); a flag on the command line wins."""

import pytest

from server.cli import build_parser


def test_environment_sets_serve_flags_and_a_flag_wins():
    env = {"BNSERVE_GRACE_SECONDS": "25", "BNSERVE_PORT": "6000", "BNSERVE_WORKERS": "2",
           "BNSERVE_LOG_LEVEL": "WARNING", "BNSERVE_METRICS_PORT": "-1"}
    args = build_parser(env).parse_args(["serve", "--port", "7000"])
    assert (args.grace_seconds, args.port, args.workers, args.log_level, args.metrics_port) == (
        25.0, 7000, 2, "WARNING", -1)
    plain = build_parser({}).parse_args(["serve"])
    assert (plain.grace_seconds, plain.port, plain.workers) == (5.0, 50051, 1)


@pytest.mark.parametrize("name, value, message", [
    ("BNSERVE_PORT", "abc", "BNSERVE_PORT='abc'"),
    ("BNSERVE_WORKERS", "0", "BNSERVE_WORKERS='0': must be at least 1"),
])
def test_a_bad_environment_value_is_a_usage_error_naming_the_variable(capsys, name, value, message):
    with pytest.raises(SystemExit) as exit_:
        build_parser({name: value})
    assert exit_.value.code == 2 and message in capsys.readouterr().err
