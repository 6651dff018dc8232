"""The benchmark suite: one table of our figures beside peers measured in the same run.

    python bench/run.py [--quick] [--json docs/performance.json] [--md docs/performance.md]

Prepares the workload (``bench/workload.py``: a calibrated synthetic k = 2 network and
its samples, in a temporary directory), then runs each module of ``MODULES`` in turn
(``run(workload, quick, log)`` returning a ``bench.report.Section``): training (item 1),
in-process prediction (item 3), memory (item 6); then the modules of
``SERVING_MODULES`` (``run(quick)`` returning result dicts, each runnable alone, with
their own data): out-of-core training (item 2, at 1M rows; `python bench/out_of_core.py
--rows 10000000 --no-peer` for the 10M-row figure), training on Dask (item 2, 2M rows;
`python bench/on_dask.py` for 10M), over the wire (item 4), worker
processes (item 5), the KServe peer (item 7), batch scoring with `trainer predict` (item 8,
1M rows), the asyncio server against the thread-pool server it replaced (item 9), a
thousand models in one server (item 10), each command line's start-up (item 11). Prints the table, and writes the JSON and the Markdown report with the machine, the date, the command, the
workload, and for each missed goal what bounds it. Every ratio compares figures taken
in this run, interleaved, since the machine's other load moves absolute times. First it
writes bnserve's bytecode (``report.compile_bytecode``), as an install has it.
``--quick`` runs small sizes in under a minute, as a smoke check; its figures are not
the report's (it writes under /tmp unless --json/--md are given).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import workload
from bench.report import Row, Section, compile_bytecode, fmt, machine, render_markdown, render_table

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULES = ("bench.training", "bench.prediction", "bench.memory")
SERVING_MODULES = (
    "bench.out_of_core",
    "bench.on_dask",
    "bench.over_the_wire",
    "bench.workers",
    "bench.peer_kserve",
    "bench.batch_scoring",
    "bench.event_loop",
    "bench.many_models",
    "bench.startup",
)
# Under a missed goal whose module's BOUNDS has no entry of that measurement's exact name
# (tests/bench/test_report.py keeps the committed report free of it).
NO_BOUND = "(no analysis recorded)"
TRAIN_ROWS, QUICK_TRAIN_ROWS = 1_000_000, 40_000
TEST_ROWS, QUICK_TEST_ROWS = 100_000, 10_000


def git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for package in ("numpy", "scipy", "scikit-learn"):
        try:
            out[package] = md.version(package)
        except md.PackageNotFoundError:
            out[package] = "absent"
    return out


def markdown(report: dict, sections: list[Section]) -> str:
    rows = [r for s in sections for r in s.rows]
    m = report["machine"]
    lines = [
        "# Performance",
        "",
        f"Written by `{report['command']}` on {report['date']} (commit {report['commit']}), "
        f"in {report['seconds']:.0f} s. Do not edit by hand: run the command again.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['system']}, Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items())
        + f". Load average {m['load_average']} at the start and {report['load_average_end']} at the end: "
        "other processes share the cores, so absolute times drift; every ratio compares figures taken in the "
        "same run, interleaved (medians of repeats).",
        "",
        f"Workload: {report['workload']}.",
        "",
        "Ratios are ours / peer's (for rows/s too: above 1 is faster); `met?` is empty where there is no goal.",
        "",
        render_markdown(rows),
        "",
        "## How each figure is taken",
        "",
    ]
    for s in sections:
        doc = importlib.import_module(f"bench.{s.name}").__doc__ or ""
        lines += [f"- `bench/{s.name}.py`: " + " ".join(doc.split("\n\n")[0].split()), ""]
        body = " ".join(" ".join(doc.split("\n\n")[1:]).split())
        if body:
            lines += [f"  {body}", ""]
    missed = [(s, r) for s in sections for r in s.rows if r.met is False]
    lines += ["## Missed goals: what bounds them", ""]
    if not missed:
        lines += ["Every goal was met in this run.", ""]
    for s, r in missed:
        lines += [
            f"### {r.item}: {r.measurement}",
            "",
            f"Goal {r.goal}; measured {fmt(r.ours, r.unit)}.",
            "",
            s.bounds.get(r.measurement, NO_BOUND),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def serving_section(name: str, quick: bool) -> Section:
    """A serving module's result dicts as a Section (its ``BOUNDS`` explain missed goals); a
    module that cannot run here (e.g. the peer cannot be installed) becomes a row saying why."""
    module = importlib.import_module(name)
    short = name.removeprefix("bench.")
    try:
        results = module.run(quick=quick)
    except Exception as exc:  # a bench reports what it could not measure and goes on
        return Section(
            short,
            [
                Row(
                    getattr(module, "ITEM", short),
                    "could not run",
                    None,
                    None,
                    "",
                    goal=f"{type(exc).__name__}: {exc}"[:200],
                )
            ],
        )
    rows = [
        Row(
            r["item"],
            r["measurement"],
            r["ours"],
            r["peer"],
            _unit(r["measurement"]),
            ratio=r["ratio"],
            goal="" if r["goal"] == "—" else r["goal"],
            met=r["met"],
        )
        for r in results
    ]
    return Section(short, rows, dict(getattr(module, "BOUNDS", {})))


def _unit(measurement: str) -> str:
    for unit in ("µs", "rows/s", "calls/s"):
        if unit in measurement:
            return unit
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke check in under a minute")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="default docs/performance.json")
    parser.add_argument("--md", type=pathlib.Path, default=None, help="default docs/performance.md")
    args = parser.parse_args()
    out_dir = pathlib.Path(tempfile.gettempdir()) / "bnserve-bench-quick" if args.quick else ROOT / "docs"
    json_path = args.json or out_dir / "performance.json"
    md_path = args.md or out_dir / "performance.md"
    command = "python bench/run.py" + (" --quick" if args.quick else "")
    if args.json or args.md:
        command = "python " + " ".join(shlex.quote(a) for a in ["bench/run.py", *sys.argv[1:]])
    t0 = time.perf_counter()
    compile_bytecode()  # every command starts as an installed one does
    start = machine()
    sections: list[Section] = []
    with tempfile.TemporaryDirectory(prefix="bnserve-bench-") as tmp:
        work = workload.prepare(
            pathlib.Path(tmp),
            QUICK_TRAIN_ROWS if args.quick else TRAIN_ROWS,
            QUICK_TEST_ROWS if args.quick else TEST_ROWS,
        )
        print(f"workload ({work.seconds:.1f} s): {work.describe()}", flush=True)
        for name in MODULES:
            module = importlib.import_module(name)
            t = time.perf_counter()
            print(f"{name} …", flush=True)
            section = module.run(work, quick=args.quick, log=lambda *a: print(*a, flush=True))
            print(f"{name}: {time.perf_counter() - t:.0f} s", flush=True)
            sections.append(section)
    for name in SERVING_MODULES:
        t = time.perf_counter()
        print(f"{name} …", flush=True)
        sections.append(serving_section(name, args.quick))
        print(f"{name}: {time.perf_counter() - t:.0f} s", flush=True)
    seconds = time.perf_counter() - t0
    rows = [r for s in sections for r in s.rows]
    print()
    print(render_table(rows))
    report = {
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "seconds": seconds,
        "machine": start,
        "load_average_end": machine()["load_average"],
        "versions": versions(),
        "workload": work.describe(),
        "quick": args.quick,
        "rows": [r.to_dict() for r in rows],
        "bounds": {
            f"{r.item}: {m}": text
            for s in sections
            for m, text in s.bounds.items()
            for r in s.rows
            if r.measurement == m
        },
        "details": {s.name: s.details for s in sections},
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    md_path.write_text(markdown(report, sections))
    missed = [r for r in rows if r.met is False]
    print(f"\n{len(missed)} goal(s) missed; wrote {json_path} and {md_path} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
