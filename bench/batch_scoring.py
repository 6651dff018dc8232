"""Batch scoring: `trainer predict` of a CSV of 1M rows, beside in-process predict_proba of the same rows.

    python bench/batch_scoring.py [--rows 1000000] [--quick]

Writes a CSV of ``rows`` rows sampled from the suite's synthetic network (n = 50 features
with 2..4 states, c = 3; ``bench.out_of_core.write_csv``) and fits kdb k = 2 on its first
100k rows (`trainer fit`, into a temporary SQLite store). Then `trainer predict` scores the
whole file in a child process, once writing CSV and once Parquet: rows/s end to end
(starting Python, reading the model from the store, reading the file in chunks of 100k
rows, coding, scoring, writing), and its peak RSS beside the file's size. The peers, in
this process, on the same file: ``CompiledModel.predict_proba`` of the rows already coded
(the arithmetic alone, median of 3), and ``pandas.read_csv`` of the file, each column coded
(``Variable.codes_of`` of its distinct values) and ``predict_proba`` (reading and scoring,
no writing). The CSV run and the pandas peer alternate ``REPEATS`` times, medians (one alone
is within ±15 % on a shared machine). Goals (issue 30): the CSV run at least 2× as fast as the pandas peer, and its
peak RSS within 2× the file's size. The Parquet output's probabilities must equal
``predict_proba``'s of the coded rows, bit for bit.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.out_of_core import measure_child, readable, write_csv
from bench.report import median
from bench.serving import print_table, program, result

ITEM = "8 batch scoring"
SUITE_ROWS, QUICK_ROWS = 1_000_000, 50_000
FIT_ROWS, QUICK_FIT_ROWS = 100_000, 20_000
REPEATS = 3
PANDAS_GOAL = 2.0  # trainer predict --out .csv, end to end, at least 2× the rows/s of the pandas peer
RSS_PER_FILE_GOAL = 2.0  # its peak RSS within 2× the file's size


def _name(n: int, c: int, rows: int) -> str:
    return f"kdb k=2, n={n}, c={c}, {rows:,} rows"


def _versus_pandas(name: str) -> str:
    return f"{name}: trainer predict --out .csv rows/s end to end vs pandas.read_csv, coding and predict_proba"


def _versus_size(name: str) -> str:
    return f"{name}: trainer predict --out .csv peak RSS MiB vs the file's size"


SUITE_NAME = _name(50, 3, SUITE_ROWS)  # the shape of ``write_csv``'s network
BOUNDS = {  # what bounds a missed goal, by measurement (bench/run.py puts it in docs/performance.md)
    _versus_pandas(SUITE_NAME): (
        "The sum of the work on two shared cores. On 2026-11-29 (a fast hour) trainer predict took 1.2-1.3 s "
        "and about 1.9 CPU-s against the peer's 2.2-2.3 s (1.72-1.8x; bf87761's took 2.8 s, "
        "bench/before_after.py). Its CPU, a stage at a time in one process: the parse 0.53 (pyarrow's plain "
        "strings in 1 MiB pieces on a thread per core, numpy coding their one-byte texts), coding the chunk "
        "0.13 (a gather per column into int8), predict_proba 0.45-0.5 (its index arithmetic in int32 since "
        "then), the CSV writer 0.23 (pyarrow's float formatting), each on a thread of its own; and before the "
        "first chunk is scored, starting Python, importing (SQLAlchemy 0.14 s of it) and loading the model, "
        "about 0.35 s, during which the reader parses the first chunks and then waits, one chunk ahead. "
        "Reading six chunks ahead took 1.15 s instead of 1.25 with a peak RSS of 191-200 MB instead of 179 "
        "(2.0x the file, the RSS goal's edge): not taken. 2x needs about 1.1 s: the CPU over two cores is "
        "0.95 s, so the start-up would have to overlap almost all of the rest."
    ),
    _versus_size(SUITE_NAME): (
        "About 175 MiB against a 97 MiB file (was about 170 with one chunk held), reading 100,000 rows at a time:"
        " about 90 MiB are the interpreter, its imports and the model, the rest three chunks in flight (one "
        "parsed, one coded and scored, one written: their positions, codes and probabilities), the pieces being "
        "parsed, and the predictor's gathers."
    ),
}


def run(quick: bool = False, rows: int | None = None) -> list[dict]:
    import pandas
    import pyarrow.parquet as pq

    from bnserve.store.db import ModelStore
    from bnserve.store.predictor import compile_model

    rows = rows or (QUICK_ROWS if quick else SUITE_ROWS)
    with tempfile.TemporaryDirectory(prefix="bnserve-scoring-") as tmp:
        directory = pathlib.Path(tmp)
        train, data = directory / "train.csv", directory / "rows.csv"
        write_csv(train, QUICK_FIT_ROWS if quick else FIT_ROWS)  # the file's first rows
        write_csv(data, rows)
        size = os.path.getsize(data)
        store = f"sqlite:///{directory / 'store.db'}"
        fit = [program("trainer"), "fit", "--algo", "kdb", "--k", "2", "--data", str(train), "--name", "kdb"]
        measure_child([*fit, "--store", store])
        readable(store)
        with ModelStore(store) as models:
            model = models.load("kdb").model
        compiled = compile_model(model)

        def predict(out: pathlib.Path) -> tuple[float, float]:
            command = [program("trainer"), "predict", "kdb", "--data", str(data), "--out", str(out)]
            return measure_child([*command, "--store", store])

        def pandas_read_and_score() -> tuple[float, np.ndarray]:
            t = time.perf_counter()
            frame = pandas.read_csv(data)
            X = np.empty((len(frame), len(model.features)), dtype=np.int32)
            for j, variable in enumerate(model.features):
                values, index = np.unique(frame[variable.name].to_numpy(), return_inverse=True)
                X[:, j] = variable.codes_of([str(v) for v in values.tolist()])[index]
            compiled.predict_proba(X)
            return time.perf_counter() - t, X

        csvs, pandas_times = [], []
        for _ in range(1 if quick else REPEATS):  # interleaved: the machine's other load moves both alike
            csvs.append(predict(directory / "scores.csv"))
            seconds, X = pandas_read_and_score()
            pandas_times.append(seconds)
        csv_seconds, csv_rss = median(t for t, _ in csvs), max(r for _, r in csvs)
        pandas_seconds = median(pandas_times)
        parquet_seconds, _ = predict(directory / "scores.parquet")
        in_process = []
        for _ in range(REPEATS):
            t = time.perf_counter()
            expected = compiled.predict_proba(X)
            in_process.append(time.perf_counter() - t)
        scores = pq.read_table(directory / "scores.parquet")
        got = np.column_stack([scores[f"p_{label}"].to_numpy() for label in compiled.classes])
        equal = bool(np.array_equal(got, expected))

    per_second = {
        "csv": rows / csv_seconds,
        "parquet": rows / parquet_seconds,
        "in_process": rows / median(in_process),
        "pandas": rows / pandas_seconds,
    }
    name = _name(len(model.features), len(compiled.classes), rows)
    return [
        result(
            ITEM,
            f"{name}: trainer predict --out .csv rows/s end to end vs in-process predict_proba of the coded rows",
            per_second["csv"],
            per_second["in_process"],
            "—",
            None,
        ),
        result(
            ITEM,
            f"{name}: trainer predict --out .parquet rows/s end to end vs in-process predict_proba of the coded rows",
            per_second["parquet"],
            per_second["in_process"],
            "—",
            None,
        ),
        result(
            ITEM,
            _versus_pandas(name),
            per_second["csv"],
            per_second["pandas"],
            f"≥ {PANDAS_GOAL:g}×",
            per_second["csv"] >= PANDAS_GOAL * per_second["pandas"],
        ),
        result(
            ITEM,
            _versus_size(name),
            csv_rss / 2**20,
            size / 2**20,
            f"≤ {RSS_PER_FILE_GOAL:g}×",
            csv_rss <= RSS_PER_FILE_GOAL * size,
        ),
        result(ITEM, f"{name}: the output's probabilities equal predict_proba's", float(equal), 1.0, "equal", equal),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help=f"rows to score (default {SUITE_ROWS:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows, a smoke check")
    args = parser.parse_args()
    t0 = time.monotonic()
    results = run(args.quick, args.rows)
    print(f"{time.monotonic() - t0:.0f} s")
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
