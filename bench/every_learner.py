"""Every learner on every shared data set: fit, publish, load back, compile, predict.

    python bench/every_learner.py [--max-rows 15000] [--learners a,b,…] [--datasets a,b,…] [--out docs/learners.md]

Rows already in --out for data sets not run this time are kept (so docs/learners-large.md
can be grown one large data set at a time).

For each data set in ../shared/datasets (numeric columns discretised by MDL) and each
registered learner: fit on all rows, publish into a
temporary SQLite store, load the version back (checksums verified), compile it, and
predict every row. Prints and writes docs/learners.md: fit seconds and resubstitution
accuracy per cell, or the error. Data sets with more rows than --max-rows are left out
(the wrapper searches cost minutes there).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import numpy as np

from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import load
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.registry import LEARNERS

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
DATASETS_BY_SIZE = [
    "corral",
    "led7",
    "led-display",
    "monks-1-train",
    "monks-2-train",
    "monks-3-train",
    "hayes-roth-train",
    "spect-train",
    "zoo",
    "lymphography",
    "promoters",
    "primary-tumor",
    "balance-scale",
    "breast-cancer-wisconsin",
    "tic-tac-toe",
    "car",
    "kr-vs-kp",
    "splice",
    "mushroom",
    "nursery",
    "wine",
    "ecoli",
    "hepatitis",
    "dermatology",
    "letter",
    "adult-train",
    "poker-hand-train",
    "connect-4",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-rows", type=int, default=15000)
    parser.add_argument("--learners", default=",".join(LEARNERS))
    parser.add_argument("--datasets", default=",".join(DATASETS_BY_SIZE))
    parser.add_argument("--out", default="docs/learners.md")
    args = parser.parse_args()
    learners = args.learners.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ModelStore(f"sqlite:///{tmp}/bench.db", create=True) as store:
        for name in args.datasets.split(","):
            path = DATASETS / f"{name}.csv"
            if not path.exists():
                continue
            data = load(str(path))
            if data.n_rows > args.max_rows:
                print(f"{name}: {data.n_rows} rows > --max-rows, left out", file=sys.stderr)
                continue
            cells = []
            for algo in learners:
                t0 = time.perf_counter()
                try:
                    model = fit(algo, data)
                    seconds = time.perf_counter() - t0
                    version = store.publish(f"{name}.{algo}", model)
                    loaded = store.load(f"{name}.{algo}", version=version).model
                    proba = compile_model(loaded).predict_proba(data.X)
                    accuracy = float(np.mean(proba.argmax(axis=1) == data.y))
                    cells.append(f"{seconds:.2f} s, {100 * accuracy:.1f} %")
                except Exception as exc:  # a bench reports every failure and goes on
                    cells.append(f"error: {type(exc).__name__}: {exc}"[:80])
                print(f"{name} {algo}: {cells[-1]}", file=sys.stderr)
            rows.append((f"{name} ({data.n_rows}×{len(data.features)})", cells))
    lines = [
        "# Every learner on every shared data set",
        "",
        "Written by `python bench/every_learner.py`: per cell the fit time on all rows, then the accuracy of "
        "the model after publishing it to a SQLite store, loading it back and compiling it, on its own "
        "training rows (resubstitution: a check that the path works, not an accuracy estimate; "
        "docs/accuracy.md has those).",
        "",
        "| data set | " + " | ".join(learners) + " |",
        "|---|" + "---|" * len(learners),
    ]
    out = ROOT / args.out
    ran = {label.split(" (")[0] for label, _ in rows}
    kept = [
        line
        for line in (out.read_text().splitlines() if out.exists() else [])
        if line.startswith("| ")
        and not line.startswith("| data set")
        and line[2:].split(" (")[0] not in ran
        and line.count("|") == len(learners) + 2
    ]
    lines += kept + [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
