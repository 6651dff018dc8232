"""The server as an earlier commit shipped it, to measure a change against in the same run.

    with baseline_code(SYNC_SERVER_COMMIT) as code, baseline_commands(code) as commands:
        Server(store_url, commands=commands).start()

``git archive`` writes that commit's packages into a temporary folder laid out as the
installed package is (``bnserve/`` with ``server/``, ``store/`` and ``trainer/`` inside);
on ``PYTHONPATH`` (or at the head of ``sys.path``, as ``baseline_commands``' scripts put it)
it comes ahead of the editable install, so the old code runs with today's dependencies.
Needs the repository's history (a clone).
"""

from __future__ import annotations

import compileall
import contextlib
import io
import pathlib
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The last commit whose server ran on grpc's thread pool (grpc.server), before grpc.aio.
SYNC_SERVER_COMMIT = "865b2a2ba3e41d8cd9526735f2d66bb65b464fbd"
# The last commit whose server read the whole catalogue and rebuilt every entry on each poll.
MANY_MODELS_BASE_COMMIT = "e4d1850e691133260d2cbbcfc6e415a00e59f709"
# The commit docs/performance.md was written on when issue 30 set its goals (its "now" column).
SPEED_ISSUE_COMMIT = "bf87761ae29bbe5798d770ae1f119e15c9f04578"
PACKAGES = {"bnserve": "bnserve", "server": "bnserve/server", "store": "bnserve/store", "trainer": "bnserve/trainer"}


def available(commit: str) -> bool:
    """Whether this checkout holds ``commit`` (a shallow clone may not)."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, check=False
    )
    return found.returncode == 0


@contextlib.contextmanager
def baseline_code(commit: str) -> Iterator[pathlib.Path]:
    """A folder to put on PYTHONPATH that imports ``bnserve`` as ``commit`` had it."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, *PACKAGES], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bnserve-baseline-") as folder:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                top, _, rest = member.name.partition("/")
                member.name = f"{PACKAGES[top]}/{rest}" if rest else PACKAGES[top]
                tar.extract(member, folder, filter="data")
        compileall.compile_dir(folder, quiet=1)  # its commands start as an installed one does (report.compile_bytecode)
        yield pathlib.Path(folder)


SHIM = """#!{python}
import os, sys
sys.path.insert(0, {code!r})  # ahead of the editable install, as PYTHONPATH puts it
os.environ["PYTHONPATH"] = {code!r}  # and in the processes it starts (--jobs)
if __name__ == "__main__":  # not in the processes multiprocessing spawns, which import this file
    from bnserve.{package} import cli

    sys.exit((getattr(cli, "run", None) or cli.main)())
"""


@contextlib.contextmanager
def baseline_commands(code: pathlib.Path) -> Iterator[pathlib.Path]:
    """A folder holding ``trainer`` and ``server`` commands that run the code in ``code``
    (``baseline_code``'s folder) on this interpreter: the ``bench.serving.BIN`` of a run of
    that commit's commands. An entry point is ``cli.run`` where the commit has it, else ``cli.main``."""
    with tempfile.TemporaryDirectory(prefix="bnserve-baseline-bin-") as folder:
        for package in ("trainer", "server"):
            script = pathlib.Path(folder) / package
            script.write_text(SHIM.format(python=sys.executable, code=str(code), package=package))
            script.chmod(0o755)
        yield pathlib.Path(folder)
