"""bench/before_after.py's table: every measurement of ours once, each side's figures beside it."""

from __future__ import annotations

from bench.before_after import table
from bench.serving import result


def test_the_table_sets_each_sides_figures_of_a_measurement_in_one_row():
    before = [result("2", "fit vs read", 8.0, 1.0, "≤ 2×", False), result("2", "only before", 1.0, 1.0, "—", None)]
    ours = [result("2", "fit vs read", 3.0, 1.5, "≤ 2×", False), result("11", "start", 0.3, 0.03, "—", None)]
    lines = table({"before (abc1234)": before, "ours": ours}).splitlines()
    assert (
        lines[0] == "| item | measurement | before (abc1234): ours / peer = ratio | ours: ours / peer = ratio | goal |"
    )
    assert lines[2] == "| 2 | fit vs read | 8 / 1 = 8.00× | 3 / 1.5 = 2.00× | ≤ 2× |"
    # a measurement the earlier code lacks is a dash on its side; ours lists the rows
    assert lines[3] == "| 11 | start | — | 0.3 / 0.03 = 10.00× | — |"
    assert len(lines) == 4


def test_with_more_rounds_each_rounds_ratio_is_shown_in_turn():
    ours = [result("2", "fit vs read", 3.0, 1.5, "≤ 2×", False), result("2", "fit vs read", 3.3, 1.5, "≤ 2×", False)]
    lines = table({"before": [], "ours": ours}).splitlines()
    assert lines[2] == "| 2 | fit vs read | — | 3 / 1.5 = 2.00×, 2.20× | ≤ 2× |"
