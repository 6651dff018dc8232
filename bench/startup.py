"""Start-up: each command line's seconds from launch to exit, beside a bare Python.

    python bench/startup.py [--quick] [--imports]

Each command runs as a user runs it, the installed console script in a fresh process:
``trainer --version``, ``trainer --help``, ``trainer fit --help``, ``trainer fit --algo nb``
on a CSV of 1,000 rows (50 features and the class of the suite's synthetic network,
``bench.out_of_core.write_csv``) into a new SQLite store each time (which creates its
schema) and into one that exists (as a harness running folds does), ``trainer predict`` of
the same file with that model, ``trainer list``, ``server --help`` and ``server predict
--help``. The peer is the floor every command pays: the same Python starting and exiting
(``python -c pass``, with the site packages the scripts load). Rounds run every command
once, interleaved; a command's figure is its least of the rounds, since other processes'
load only adds to a fixed cost. ``--imports`` prints, per command, what ``python -X
importtime`` counts: the total and the packages that take the most of it.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.out_of_core import write_csv
from bench.serving import print_table, program, result

ITEM = "11 start-up"
ROWS = 1_000
ROUNDS, QUICK_ROUNDS = 5, 2
FLOOR = "python -c pass"


def commands(directory: pathlib.Path) -> dict[str, list[str]]:
    """Each measured command line by its label; ``{store}`` is filled in per run."""
    data, store = str(directory / "rows.csv"), str(directory / "{store}")
    trainer, server = program("trainer"), program("server")
    fit = [trainer, "fit", "--algo", "nb", "--data", data, "--name", "nb", "--store", f"sqlite:///{store}"]
    again = [trainer, "fit", "--algo", "nb", "--data", data, "--name", "again", "--store", ""]
    scored = str(directory / "scores.csv")
    return {
        FLOOR: [sys.executable, "-c", "pass"],
        "trainer --version": [trainer, "--version"],
        "trainer --help": [trainer, "--help"],
        "trainer fit --help": [trainer, "fit", "--help"],
        f"trainer fit --algo nb, {ROWS:,} rows, new SQLite store": fit,
        f"trainer fit --algo nb, {ROWS:,} rows, existing store": again,
        f"trainer predict, {ROWS:,} rows": [trainer, "predict", "nb", "--data", data, "--out", scored, "--store", ""],
        "trainer list": [trainer, "list", "--store", ""],
        "server --help": [server, "--help"],
        "server predict --help": [server, "predict", "--help"],
    }


def prepare(directory: pathlib.Path) -> dict[str, list[str]]:
    """The data file, a store holding its nb model, and the command lines over them."""
    write_csv(directory / "rows.csv", ROWS)
    lines = commands(directory)
    model_store = f"sqlite:///{directory / 'model.db'}"
    fit = [a.replace("{store}", "model.db") for a in lines[f"trainer fit --algo nb, {ROWS:,} rows, new SQLite store"]]
    subprocess.run(fit, check=True, capture_output=True)
    for label, argv in lines.items():
        if argv[-2:] == ["--store", ""]:
            lines[label] = [*argv[:-1], model_store]
    return lines


def seconds(argv: list[str], run: int) -> float:
    """One run's wall time; a fresh store file each run where the command creates one."""
    argv = [a.replace("{store}", f"store-{run}.db") for a in argv]
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def measure(lines: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Each command's least seconds over ``rounds`` interleaved rounds."""
    best = dict.fromkeys(lines, float("inf"))
    for r in range(rounds):
        for label, argv in lines.items():
            best[label] = min(best[label], seconds(argv, r))
    return best


def import_times(argv: list[str]) -> tuple[float, list[tuple[str, float]], int]:
    """(total seconds, [(top-level package, seconds)] largest first, modules imported) of one
    run of ``argv`` under ``python -X importtime``: each module's own time, summed by package."""
    script = argv[0]
    if script != sys.executable:
        argv = [sys.executable, "-X", "importtime", *argv]
    else:
        argv = [sys.executable, "-X", "importtime", *argv[1:]]
    err = subprocess.run(
        [a.replace("{store}", "store-imports.db") for a in argv], check=True, capture_output=True, text=True
    ).stderr
    by_package: collections.Counter[str] = collections.Counter()
    count = 0
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        by_package[name.strip().split(".")[0]] += int(own)  # microseconds
        count += 1
    return sum(by_package.values()) / 1e6, [(n, us / 1e6) for n, us in by_package.most_common()], count


def run(quick: bool = False) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bnserve-startup-") as tmp:
        lines = prepare(pathlib.Path(tmp))
        best = measure(lines, QUICK_ROUNDS if quick else ROUNDS)
    floor = best.pop(FLOOR)
    return [
        result(ITEM, f"{label}: seconds from launch to exit vs {FLOOR}", value, floor, "—", None)
        for label, value in best.items()
    ]


def print_imports(top: int = 8, only: str = "") -> None:
    """``import_times`` of each command whose label starts with ``only``, a line each."""
    with tempfile.TemporaryDirectory(prefix="bnserve-startup-") as tmp:
        lines = prepare(pathlib.Path(tmp))
        for label, argv in lines.items():
            if not label.startswith(only) or label == FLOOR:
                continue
            total, packages, count = import_times(argv)
            heaviest = ", ".join(f"{name} {s:.3f}" for name, s in packages[:top])
            print(f"{label}: {total:.3f} s importing {count} modules; {heaviest}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds instead of {ROUNDS}")
    parser.add_argument("--imports", action="store_true", help="print python -X importtime's summary per command")
    args = parser.parse_args()
    if args.imports:
        print_imports()
    print_table(run(quick=args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
