"""Shared fixtures for the trainer tests."""

import pytest

from bnserve.trainer.data import EncodedData, load


@pytest.fixture(scope="session")
def chess() -> EncodedData:
    return load("builtin:chess")


@pytest.fixture
def store(tmp_path) -> str:
    """URL of a fresh SQLite store file for a CLI test."""
    return f"sqlite:///{tmp_path / 'models.db'}"


def run(capsys, *argv) -> tuple[int, str, str]:
    """``trainer ARGV`` in this process: (exit code, stdout, stderr)."""
    from bnserve.trainer.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
