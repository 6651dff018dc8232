"""The load test, CI-sized: a real `server serve`, 8 streams for 10 s from a client process.

Asserted: no call failed or came back wrong, and the server's RSS grew by less than
``bench.load.RSS_BOUND_MIB`` after the warm-up. Never a timing: rates and latencies on
a shared machine are reported by ``bench/load.py``, not tested.
"""

from __future__ import annotations

from bench import load
from tests.reliability import record


def test_eight_streams_for_ten_seconds_lose_nothing_and_do_not_grow_the_server():
    result = load.run(streams=(8,), seconds=10.0, warmup=3.0)
    [phase] = result["phases"]
    assert phase["errors_by_status"] == {} and phase["wrong_answers"] == 0
    assert phase["answered"] > 0 and phase["versions"] == [1]
    assert result["errors"] == 0
    assert not result["traceback_in_log"]
    assert result["rss_growth_mib"] < load.RSS_BOUND_MIB, result
    record(
        "load, CI size (8 streams x 10 s)",
        "sqlite",
        requests=result["requests"],
        errors=0,
        lost=0,
        rss_growth_mib=round(result["rss_growth_mib"], 1),
        p50_ms=round(phase["p50_ms"], 2),
        p99_ms=round(phase["p99_ms"], 2),
    )
