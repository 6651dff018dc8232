"""The figures of the fault and load tests, for ``docs/reliability.md``.

Import as ``from tests.reliability import record``. When ``BNSERVE_RELIABILITY_JSON`` names
a file, ``record`` appends one JSON object per call to it (JSON Lines: one line per test
and backend); otherwise it does nothing, so a plain ``pytest`` run writes nothing.
``bench/reliability.py`` sets the variable, runs the tests, and renders the lines.

Keys every record may carry (all counts; absent means not applicable):
``requests`` (calls sent), ``errors`` (calls that failed, by status name in
``errors_by_status``), ``faults`` (faults injected), ``versions`` (versions published),
``lost`` (answers or versions lost or corrupted: every test asserts it is zero).
"""

from __future__ import annotations

import json
import os
import time

RELIABILITY_JSON_ENV = "BNSERVE_RELIABILITY_JSON"


def record(test: str, backend: str, **figures) -> None:
    path = os.environ.get(RELIABILITY_JSON_ENV)
    if not path:
        return
    line = {"test": test, "backend": backend, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **figures}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
