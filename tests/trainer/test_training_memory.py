"""Issue 26, item 1 on the command line: a file shaped like the R export whose 'NA' texts
made three number columns nominal (352, 160 and 183 states in 4,454 rows). Before the
training limits, ``fit --algo kdb --k 3`` held 6.2 GB and failed at publish, and ``--algo
auto`` peaked at 15 GB. Now kdb is refused before it allocates, and auto skips what does
not fit, a line each, and publishes within a GiB. Each run is the real CLI in a child
process whose peak RSS is read from ``getrusage`` (a memory bound, not a time bound), under
an address-space cap so that a regression fails the test instead of taking the machine."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from bnserve.store.db import ModelStore
from tests.incident_file import write_incident_file

GIB = 1 << 30
CAP = 3 * GIB  # address space of the child: numpy's and the libraries' mappings fit well under
# runs its arguments as a child and prints that child's peak RSS in bytes, last, on stderr
PEAK = (
    "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr); sys.exit(rc)"
)


def trainer_fit(tmp_path: Path, *flags: str) -> tuple[int, list[str], int]:
    """(exit code, stderr lines, peak RSS of the trainer in bytes)."""
    data = write_incident_file(tmp_path / "credit.csv")
    store = f"sqlite:///{tmp_path / 'models.db'}"
    command = [sys.executable, "-m", "bnserve.trainer.cli", "fit", "--data", data, "--class", "Status"]
    command += ["--na-values", "", "--name", "credit", "--store", store, *flags]

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    result = subprocess.run(
        [sys.executable, "-c", PEAK, *command], capture_output=True, text=True, preexec_fn=cap, timeout=600
    )
    lines = result.stderr.splitlines()
    return result.returncode, lines[:-1], int(lines[-1])


def published(tmp_path: Path) -> list[int]:
    with ModelStore(f"sqlite:///{tmp_path / 'models.db'}") as store:
        return [v.version for v in store.list_versions()]


def test_kdb_k3_is_refused_before_it_allocates(tmp_path):
    code, err, peak = trainer_fit(tmp_path, "--algo", "kdb", "--k", "3")
    assert code == 1 and peak < GIB / 2, (code, err, peak)
    [error] = [line for line in err if line.startswith("trainer: error:")]
    assert error.startswith("trainer: error: kdb: the CPT of ")
    assert all(f"'{name}' {states} states" in error for name, states in (("Income", 352), ("Debt", 183)))
    assert "past --max-cpt-cells 4,194,304" in error and "--na-values" in error
    assert not (tmp_path / "models.db").exists()  # nothing published: the store is made by the first publish


def test_auto_skips_what_does_not_fit_a_line_each_and_publishes_within_a_gib(tmp_path):
    flags = ("--algo", "auto", "--candidates", "kdb,tan", "--k", "1..3", "--estimator", "laplace")
    code, err, peak = trainer_fit(tmp_path, *flags, "--work-budget", "none")
    assert code == 0 and peak < GIB, (code, err[-3:], peak)
    skipped = [line.partition("auto: skipped ")[2] for line in err if "auto: skipped " in line]  # any prefix
    assert [line.split(":")[0] for line in skipped] == ["kdb k=2 estimator=laplace", "kdb k=3 estimator=laplace"]
    assert all("past --max-cpt-cells" in line for line in skipped)
    assert published(tmp_path) == [1]
