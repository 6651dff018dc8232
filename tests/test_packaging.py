"""What a non-editable install holds: every module and data file of the three folders and
the facade (bnserve/), so
that `pip install .` (the README's quick start, the Docker image) runs what the tests ran
through the editable install, which reads the folders themselves."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"store": "bnserve/store", "trainer": "bnserve/trainer", "server": "bnserve/server", "bnserve": "bnserve"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("bnserve-*.whl")
    return built


def test_the_wheel_holds_every_module_and_data_file(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = {n for n in archive.namelist() if n.startswith("bnserve/")}
    expected = {
        f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, prefix in FOLDERS.items()
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix != ".pyc"
        and (folder != "bnserve" or path.parent == ROOT / "bnserve")
    }
    assert expected - names == set(), "pip install . would leave these out"
    assert names - expected == set()
    assert not any(n.split("/")[0] in ("store", "trainer", "server") for n in zipfile.ZipFile(wheel).namelist())


def test_the_installed_copy_imports_and_runs_its_commands(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import bnserve.trainer, bnserve.trainer.cli, bnserve.server.app, bnserve.store.db.schema as s; "
        "from bnserve.trainer.learners.registry import LEARNERS; from bnserve import Client, BayesNetClassifier; "
        "print(bnserve.trainer.__file__); print(len(LEARNERS)); print(s.head_revision()); print(bnserve.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    where, learners, head, facade = result.stdout.split()
    assert where.startswith(str(target)) and facade.startswith(str(target))  # the installed copy, not the checkout
    assert int(learners) >= 18 and head
