"""The console scripts end their process without the garbage collector's last passes over
every object left (``bnserve.process_exit``: a quarter of a small ``trainer fit``), and
nothing else about the exit changes: main's exit status, its output flushed, ``atexit``
handlers run. Each command runs the entry point in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, file=sys.stderr))
sys.argv = {argv!r}
from {module} import run
run()
"""


def ended(module: str, argv: list[str]) -> subprocess.CompletedProcess:
    child = CHILD.format(module=module, argv=argv)
    return subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("module", ["bnserve.trainer.cli", "bnserve.server.cli"])
def test_a_command_ends_with_its_status_and_output_and_the_collector_frozen(module):
    done = ended(module, ["prog", "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the version line was not flushed"
    assert "frozen at exit: True" in done.stderr  # the atexit handler ran, after the freeze


def test_a_failing_command_keeps_its_exit_status():
    done = ended("bnserve.trainer.cli", ["trainer", "fit", "--algo", "nb"])  # no --data, no --name
    assert done.returncode == 2
    assert "usage" in done.stderr
    assert "frozen at exit: True" in done.stderr


def test_the_installed_commands_are_the_entry_points_that_end_so():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"trainer": "bnserve.trainer.cli:run", "server": "bnserve.server.cli:run"}
