"""The README's quick start, as written, after its install: train into the default SQLite
store in the working directory, serve on the default ports, Predict, stop. The install
itself (`pip install .`) is what tests/test_packaging.py checks."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.serving import BIN

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q . && . .venv/bin/activate && "


def quick_start() -> str:
    """The first command of the README's quick start: the install, then the run."""
    section = ROOT.joinpath("README.md").read_text().split("## Quick start", 1)[1]
    return re.search(r"```sh\n(.+?)\n```", section, re.S).group(1)


def test_the_quick_start_trains_serves_and_answers(tmp_path):
    command = quick_start()
    assert command.startswith(INSTALL)
    for port in (50051, 9464):  # the defaults it relies on
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"port {port} is in use on this machine")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("BNSERVE_")}
    done = subprocess.run(
        ["bash", "-c", command[len(INSTALL) :]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    published, answer = done.stdout.split("\n", 1)
    assert published == "published chess version 1 (fkdb, k=2); aliases: production"
    assert (tmp_path / "bnserve.db").is_file()  # the embedded default store, in the working directory
    reply = json.loads(answer)
    assert (reply["model"], reply["version"], reply["classes"]) == ("chess", "1", ["nowin", "won"])
    (prediction,) = reply["predictions"]  # the classes, and per row the winning label and a probability per class
    assert prediction["label"] == "nowin" and len(prediction["probabilities"]) == 2
    assert sum(prediction["probabilities"]) == pytest.approx(1.0)
    assert "received SIGTERM" in done.stderr and "stopped" in done.stderr  # the trap stopped the server
