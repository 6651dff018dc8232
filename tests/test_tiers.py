"""The tiers (tests/tiers.py): the README's command runs a default set that still covers
every package and one real end-to-end path; ``-m slow`` runs the rest; a listed name that
no longer matches a test is caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import tiers

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tests/facade/", "tests/store/", "tests/trainer/", "tests/server/", "tests/deploy/")
END_TO_END = "tests/e2e/test_quick_start.py"  # trainer fit and publish, server serve, Predict


def _collected(*args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode in (0, 5), result.stdout[-3000:] + result.stderr[-3000:]  # 5: none selected
    return {line for line in result.stdout.splitlines() if "::" in line}


def test_the_default_set_covers_every_package_and_an_end_to_end_path_and_leaves_the_rest():
    default, rest = _collected(), _collected("-m", "slow")
    for package in PACKAGES:
        assert any(n.startswith(package) for n in default), f"the default set runs nothing in {package}"
    assert any(n.startswith(END_TO_END + "::") for n in default)
    assert rest and not default & rest
    assert all(tiers.is_slow(n) for n in rest) and not any(tiers.is_slow(n) for n in default)


def test_every_listed_file_and_name_is_slow_with_any_parameters():
    for path in tiers.SLOW_FILES:
        assert tiers.is_slow(f"{path}::test_anything[sqlite]")
    for name in tiers.SLOW_TESTS:
        assert tiers.is_slow(name) and tiers.is_slow(f"{name}[postgresql-3]")
        assert not tiers.is_slow(f"{name}_other")
    assert not tiers.is_slow(f"{END_TO_END}::test_anything")


def test_a_listed_name_that_matches_no_test_is_reported():
    listed = sorted(tiers.SLOW_FILES | tiers.SLOW_TESTS)
    assert listed, "the rest is empty"
    everything_but_the_first = [n if "::" in n else f"{n}::test_x" for n in listed[1:]]
    assert tiers.unmatched(everything_but_the_first) == listed[:1]
    assert tiers.unmatched([n if "::" in n else f"{n}::test_x[1]" for n in listed]) == []
