"""bench/startup.py's reading of python -X importtime (its timings are not a test)."""

from __future__ import annotations

import sys

from bench.startup import import_times


def test_import_times_sums_each_modules_own_time_by_package():
    total, packages, count = import_times([sys.executable, "-c", "import json.decoder"])
    by_name = dict(packages)
    assert "json" in by_name and count >= 2 and total >= sum(by_name.values()) - 1e-9 > 0
    assert [s for _, s in packages] == sorted(by_name.values(), reverse=True)
