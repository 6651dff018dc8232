"""The server as an earlier commit shipped it, to measure a change against in the same run.

    with baseline_code(SYNC_SERVER_COMMIT) as path:
        Server(store_url, pythonpath=path).start()

``git archive`` writes that commit's packages into a temporary folder laid out as the
installed package is (``bnserve/`` with ``server/``, ``store/`` and ``trainer/`` inside);
``PYTHONPATH`` puts it ahead of the editable install, so ``python -m bnserve.server.cli``
runs the old code with today's dependencies. Needs the repository's history (a clone).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The last commit whose server ran on grpc's thread pool (grpc.server), before grpc.aio.
SYNC_SERVER_COMMIT = "865b2a2ba3e41d8cd9526735f2d66bb65b464fbd"
# The last commit whose server read the whole catalogue and rebuilt every entry on each poll.
MANY_MODELS_BASE_COMMIT = "e4d1850e691133260d2cbbcfc6e415a00e59f709"
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
        yield pathlib.Path(folder)
