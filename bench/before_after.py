"""Issue 30's rows with an earlier commit's code and with ours, alternated in one run.

    python bench/before_after.py [--before COMMIT] [--rows 1000000] [--rounds 1] [--models 1000]

The earlier commit's packages (``bench.baseline.baseline_code``: from git, bytecode compiled)
run as ``trainer`` and ``server`` commands on this interpreter and its dependencies
(``baseline_commands``). Each round, each side in turn runs ``items`` with
``bench.serving.BIN`` pointed at its commands: the streamed and in-memory fits
(``bench/out_of_core.py``), batch scoring (``bench/batch_scoring.py``) and each command line's
start-up (``bench/startup.py``). The harness, its peers (``pandas.read_csv``, in-process
``predict_proba``) and its checks are this code's on both sides; it reads a store the earlier
trainer wrote once the store is brought to this code's schema (``out_of_core.readable``). Then
servers of both sides start in turn, ``START_REPEATS`` times, on one store of ``--models`` models
and on one of a single model (``bench/many_models.py``). Dask is not here: a LocalCluster
started by this harness runs this harness's code in its workers; run each commit's own
``bench/on_dask.py`` in turn. Prints ``python -X importtime``'s summary of ``trainer fit`` on both sides, ``IMPORT_ROUNDS``
times in turn (``startup.print_imports``), then each measurement's ratio before and ours, with its goal.
Default ``--before``: ``bench.baseline.SPEED_ISSUE_COMMIT``, where issue 30 measured its table.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import batch_scoring, many_models, out_of_core, serving, startup
from bench.baseline import SPEED_ISSUE_COMMIT, available, baseline_code, baseline_commands
from bench.report import compile_bytecode
from bench.serving import Server, number, result

START_REPEATS = 3
IMPORT_ROUNDS = 3


def items(rows: int) -> list[dict]:
    """The rows of the fits, batch scoring and start-up, run by the commands ``serving.BIN`` holds now."""
    return [*out_of_core.run(rows=rows), *batch_scoring.run(rows=rows), *startup.run()]


@contextlib.contextmanager
def running(commands: pathlib.Path) -> Iterator[None]:
    """The bench's items run ``commands``' trainer and server (``serving.BIN``) meanwhile."""
    ours, serving.BIN = serving.BIN, commands
    try:
        yield
    finally:
        serving.BIN = ours


def server_starts(sides: dict[str, pathlib.Path], models: int) -> dict[str, list[dict]]:
    """Start to SERVING of each side's server on ``models`` models vs one model, started in turn."""
    with tempfile.TemporaryDirectory(prefix="bnserve-before-after-") as tmp:
        many, one = many_models.build_stores(pathlib.Path(tmp), models)
        servers = {}
        for side, commands in sides.items():
            servers[f"{side} one"] = Server(one, commands=commands)
            servers[f"{side} eager"] = Server(many, commands=commands)
        start = many_models.starts(servers, START_REPEATS)
    goal, measurement = many_models.START_GOAL, many_models.start_measurement(models, "eager")
    out: dict[str, list[dict]] = {}
    for side in sides:
        eager, single = start[f"{side} eager"][0], start[f"{side} one"][0]
        out[side] = [result(many_models.ITEM, measurement, eager, single, f"≤ {goal}", eager / single <= goal)]
    return out


def table(sides: dict[str, list[dict]]) -> str:
    """Markdown: each measurement once, with each side's figures and ratio; with more than one
    round, each round's ratio in turn after the first round's figures."""
    labels = list(sides)
    keyed: dict[str, dict[tuple[str, str], list[dict]]] = {}
    for label, rows in sides.items():
        keyed[label] = {}
        for r in rows:
            keyed[label].setdefault((r["item"], r["measurement"]), []).append(r)
    lines = [
        "| item | measurement | " + " | ".join(f"{label}: ours / peer = ratio" for label in labels) + " | goal |",
        "|---|---|" + "---|" * len(labels) + "---|",
    ]
    for key, (first, *_) in keyed[labels[-1]].items():
        cells = []
        for label in labels:
            rounds = keyed[label].get(key)
            if rounds is None:
                cells.append("—")
                continue
            r, ratios = rounds[0], ", ".join(f"{x['ratio']:.2f}×" for x in rounds)
            cells.append(f"{number(r['ours'])} / {number(r['peer'])} = {ratios}")
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {first['goal']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=SPEED_ISSUE_COMMIT, help="the earlier commit (default: %(default).7s)")
    parser.add_argument("--rows", type=int, default=out_of_core.SUITE_ROWS, help="rows of the fit and scoring files")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the items, each side in turn (default 1)")
    parser.add_argument("--models", type=int, default=many_models.MODELS, help="models of the many-model start")
    args = parser.parse_args()
    if not available(args.before):
        parser.error(f"this clone does not hold {args.before}")
    compile_bytecode()
    t0 = time.monotonic()
    with baseline_code(args.before) as code, baseline_commands(code) as before:
        commands = {f"before ({args.before[:7]})": before, "ours": serving.BIN}
        sides: dict[str, list[dict]] = {side: [] for side in commands}
        for _ in range(args.rounds):
            for side, folder in commands.items():
                with running(folder):
                    sides[side] += items(args.rows)
        for side, rows in server_starts(commands, args.models).items():
            sides[side] += rows
        for _ in range(IMPORT_ROUNDS):  # what python -X importtime counts of `trainer fit`, each side in turn
            for side, folder in commands.items():
                print(f"{side}:", flush=True)
                with running(folder):
                    startup.print_imports(only="trainer fit --algo")
    print(f"before and after, {args.rounds} round(s), {time.monotonic() - t0:.0f} s")
    print(table(sides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
