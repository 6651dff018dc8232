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


class Recorder:
    """A reporter that keeps every stage: [description, total, unit, units done, closed]."""

    def __init__(self):
        self.stages: list[list] = []

    def __call__(self, description, total, unit):
        record = [description, total, unit, 0, False]
        self.stages.append(record)

        class Bar:
            def update(self, n=1):
                assert not record[4], "updated after its stage closed"
                record[3] += n

            def note(self, text):
                pass

            def close(self):
                record[4] = True

        return Bar()

    def named(self, prefix: str) -> list[list]:
        return [s for s in self.stages if s[0].startswith(prefix)]
