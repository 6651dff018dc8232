"""The package imports from the clone's root (issue 29): there the local ``bnserve/`` folder
comes first on sys.path and shadows any installed bnserve, so its subpackages must be found
through ``bnserve/store``, ``bnserve/trainer`` and ``bnserve/server``, the committed links to
the root's folders (the same links let mypy, pyright and editors resolve ``bnserve.store.x``).
The child runs without site's .pth files (``-S``), so the editable install's import hook is
absent, as in a clone whose bnserve is installed from a wheel or not at all; only the
dependencies are on its path."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_imports_from_the_clones_root():
    probe = (
        "from bnserve import Client; import bnserve.server.app, bnserve.store.db, bnserve.trainer.cli, bnserve; "
        "print(bnserve.store.db.__file__)"
    )
    env = {"PYTHONPATH": os.pathsep.join(site.getsitepackages()), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).resolve() == ROOT / "store" / "db" / "__init__.py"
