"""Suite item 3: in-process prediction of the compiled model against CategoricalNB.predict_proba.

A kdb k = 2 model fitted on training rows of the workload (n = 50, c = 3) is compiled
once (``bnserve.store.predictor.compile_model``, as the server does); CategoricalNB is fitted on
the same rows. Both predict the same held-out rows, interleaved: batch rows/s of
``predict_proba`` on 100k rows (median of repeats), and single-row compute time, the
median over many calls of ``predict_proba`` on a (1, n) array, timed one call at a time
in alternating blocks of ``SINGLE_BLOCK`` calls of ours and theirs. Their NB does less work
than our KDB (one lookup per feature and class; ours reads a k = 2 family per feature).
"""

from __future__ import annotations

import cProfile
import io
import pathlib
import pstats
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.report import Row, Section, median, ratio

if TYPE_CHECKING:
    from bench.workload import Workload
    from bnserve.store.predictor import CompiledModel


PEER = "CategoricalNB"
K = 2
FIT_ROWS, QUICK_FIT_ROWS = 100_000, 20_000
BATCH_REPEATS, QUICK_BATCH_REPEATS = 7, 3
SINGLE_CALLS, QUICK_SINGLE_CALLS = 3000, 500
SINGLE_BLOCK = 50  # one-row calls are timed in alternating blocks of this many: drift hits both alike,
# and each side's calls follow its own, as a server's predictions follow each other
BATCH_RATIO_GOAL = 1.0  # our rows/s over theirs
SINGLE_ROW_GOAL_US = 20.0


def run(work: Workload, quick: bool = False, log: Callable[..., None] = print) -> Section:
    from sklearn.naive_bayes import CategoricalNB

    from bnserve.store.predictor import compile_model
    from bnserve.trainer.fit import fit

    train = work.train(QUICK_FIT_ROWS if quick else FIT_ROWS)
    test = work.test()
    X = test.X
    model = fit("kdb", train, k=K)
    compiled = compile_model(model)
    peer = CategoricalNB().fit(train.X, train.y)
    ours_proba, peer_proba = compiled.predict_proba(X), peer.predict_proba(X)  # also warms both up
    agree = float(np.mean(ours_proba.argmax(axis=1) == peer_proba.argmax(axis=1)))

    repeats = QUICK_BATCH_REPEATS if quick else BATCH_REPEATS
    ours_s, peer_s = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        compiled.predict_proba(X)
        t1 = time.perf_counter()
        peer.predict_proba(X)
        t2 = time.perf_counter()
        ours_s.append(t1 - t0)
        peer_s.append(t2 - t1)
    rows = X.shape[0]
    ours_rate, peer_rate = rows / median(ours_s), rows / median(peer_s)
    log(f"  batch of {rows:,}: ours {median(ours_s) * 1e3:.1f} ms, {PEER} {median(peer_s) * 1e3:.1f} ms")

    calls = QUICK_SINGLE_CALLS if quick else SINGLE_CALLS
    singles = [X[i % rows][None, :] for i in range(calls)]
    for one in singles[:200]:
        compiled.predict_proba(one)
        peer.predict_proba(one)
    ours_1, peer_1 = np.empty(calls), np.empty(calls)
    for start in range(0, calls, SINGLE_BLOCK):  # blocks of calls, alternating between the two
        for predict, times in ((compiled.predict_proba, ours_1), (peer.predict_proba, peer_1)):
            for i in range(start, min(calls, start + SINGLE_BLOCK)):
                t0 = time.perf_counter()
                predict(singles[i])
                times[i] = time.perf_counter() - t0
    ours_us, peer_us = median(ours_1) * 1e6, median(peer_1) * 1e6
    log(f"  single row: ours {ours_us:.1f} µs, {PEER} {peer_us:.1f} µs (medians of {calls})")

    item = "3 prediction"
    name = f"kdb k={K}, n={X.shape[1]}, c={len(compiled.classes)}"
    section = Section("prediction")
    batch_ratio = ratio(ours_rate, peer_rate)
    single_ratio = ratio(ours_us, peer_us)
    section.rows += [
        Row(
            item,
            f"{name}: predict_proba rows/s, batch of {rows // 1000}k",
            ours_rate,
            peer_rate,
            "rows/s",
            f"{PEER}.predict_proba",
            batch_ratio,
            f"ratio ≥ {BATCH_RATIO_GOAL:g}",
            batch_ratio is not None and batch_ratio >= BATCH_RATIO_GOAL,
        ),
        Row(
            item,
            f"{name}: predict_proba of one row, median of {calls}",
            ours_us,
            peer_us,
            "µs",
            f"{PEER}.predict_proba",
            single_ratio,
            f"≤ {SINGLE_ROW_GOAL_US:g} µs",
            ours_us <= SINGLE_ROW_GOAL_US,
        ),
    ]
    section.details = {
        "batch_rows": rows,
        "fit_rows": train.n_rows,
        "batch_seconds": {"ours": ours_s, "peer": peer_s},
        "single_row_median_us": {"ours": ours_us, "peer": peer_us},
        "single_row_p90_us": {
            "ours": float(np.percentile(ours_1, 90) * 1e6),
            "peer": float(np.percentile(peer_1, 90) * 1e6),
        },
        "argmax_agreement_with_peer": agree,
    }
    for row in section.missed:
        section.bounds[row.measurement] = profile_paragraph(compiled, X, single="one row" in row.measurement)
    return section


def profile_paragraph(compiled: CompiledModel, X: np.ndarray, single: bool) -> str:
    profile = cProfile.Profile()
    profile.enable()
    if single:
        for i in range(2000):
            compiled.predict_proba(X[i : i + 1])
    else:
        compiled.predict_proba(X)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(8)
    top = "\n".join(line for line in text.getvalue().splitlines() if line.strip())
    what = "2000 one-row calls" if single else f"one batch of {X.shape[0]:,} rows"
    return f"Profile of `predict_proba`, {what} (cProfile):\n\n```\n{top}\n```\n"
