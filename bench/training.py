"""Suite item 1: training time, peak memory and accuracy, against scikit-learn's CategoricalNB.fit.

For nb, tan, kdb and fkdb (k = 2) at m = 10k, 100k and 1M rows of the workload
(``bench/workload.py``: n = 50, v = 4, c = 3), each fit runs in a fresh worker process
(``--worker``): it loads the rows, imports what it needs, takes its peak RSS as the
baseline, fits, and reports the fit's seconds and its peak RSS above that baseline
(``bench.report.peak_rss_bytes``: the kernel's VmHWM reset to the current RSS first, since
a child's ru_maxrss starts at its parent's high-water mark).
Workers for our learners and for CategoricalNB on the same array are interleaved, so
machine load falls on both alike; at the small sizes each worker fits several times and
two rounds of workers run (median of all fits), at 1M one fit each. The exponent is the
least-squares slope of log(median seconds) on log(m). The 1M-row fits of our learners
are also scored on the held-out test rows against the true network's Bayes-optimal
accuracy, with ``hc`` (``SEARCH_ALGOS``: k = 2 too, but no feature order imposed), which
is fitted at that size only.
"""

from __future__ import annotations

import cProfile
import io
import json
import pathlib
import pstats
import sys
import time

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.report import Row, Section, fit_exponent, median, ratio
from bench.workload import worker_result

if TYPE_CHECKING:
    from bench.workload import Workload
    from bnserve.trainer.data import EncodedData


ALGOS = ("nb", "tan", "kdb", "fkdb")
SEARCH_ALGOS = ("hc",)  # k <= 2 learners fitted at the largest size only: their accuracy, and seconds for reference
PEER = "CategoricalNB"
K = 2
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000, 5_000, 20_000)
FITS_PER_WORKER = 3  # at the sizes below the largest
ROUNDS = 2  # rounds of workers at the sizes below the largest
EXPONENT_GOAL = 1.1
PEER_RATIO_GOAL = 5.0  # fkdb at the largest size, seconds / CategoricalNB's
ACCURACY_GOAL_POINTS = 2.0  # best of our k <= 2 learners within this of Bayes-optimal


def label(m: int) -> str:
    return (
        f"{m // 1_000_000}M"
        if m >= 1_000_000 and m % 1_000_000 == 0
        else (f"{m // 1000}k" if m % 1000 == 0 else str(m))
    )


def params(algo: str) -> dict:
    return {"k": K} if algo in ("kdb", "fkdb", "hc") else {}


def run_worker(directory: pathlib.Path, rows: int, algo: str, fits: int, score: bool) -> dict:
    args = [str(directory), str(rows), algo, str(fits), "1" if score else "0"]
    return worker_result(__file__, args, f"training worker {algo} m={rows}")


def worker(directory: pathlib.Path, rows: int, algo: str, fits: int, score: bool) -> dict:
    """One process: load, baseline, fit ``fits`` times (peak RSS of the first), optionally score."""
    import gc

    import numpy as np

    from bench import workload
    from bench.report import peak_rss_bytes, reset_peak_rss

    if algo == PEER:
        from sklearn.naive_bayes import CategoricalNB

        def one_fit(data: EncodedData) -> Any:
            return CategoricalNB().fit(data.X, data.y)
    else:
        from bnserve.store.predictor import compile_model
        from bnserve.trainer.fit import fit

        def one_fit(data: EncodedData) -> Any:
            return fit(algo, data, **params(algo))

    data = workload.load(directory, "train", rows)
    gc.collect()
    inherited = peak_rss_bytes()  # ru_maxrss: includes the parent's high-water mark
    reset = reset_peak_rss()
    baseline = peak_rss_bytes()
    seconds = []
    peak: int | None = None
    for _ in range(fits):
        t0 = time.perf_counter()
        model = one_fit(data)
        seconds.append(time.perf_counter() - t0)
        if peak is None:
            peak = peak_rss_bytes()
    result = {
        "seconds": seconds,
        "peak_rss_above_baseline": (peak or baseline) - baseline,  # fits >= 1: peak is set
        "baseline_rss": baseline,
        "peak_measure": "VmHWM after clear_refs" if reset else "ru_maxrss",
        "ru_maxrss_at_start": inherited,
    }
    if score:
        test = workload.load(directory, "test", 10**12)
        if algo == PEER:
            predicted = model.predict(test.X)
        else:
            predicted = compile_model(model).predict_proba(test.X).argmax(axis=1)
        result["accuracy"] = float(np.mean(predicted == test.y))
    return result


def run(work: Workload, quick: bool = False, log: Callable[..., None] = print) -> Section:
    """Measure and return the rows of item 1."""
    sizes = QUICK_SIZES if quick else SIZES
    largest = sizes[-1]
    everyone = (PEER, *ALGOS)
    seconds: dict[tuple[str, int], list[float]] = {(a, m): [] for a in everyone for m in sizes}
    rss: dict[tuple[str, int], list[int]] = {(a, m): [] for a in everyone for m in sizes}
    accuracy: dict[str, float] = {}
    rounds = 1 if quick else ROUNDS
    plan = [(m, r) for r in range(rounds) for m in sizes[:-1]] + [(largest, 0)]
    for step, (m, _round) in enumerate(plan):
        # rotate the order so that no learner always runs first (or right after the peer)
        order = everyone[step % len(everyone) :] + everyone[: step % len(everyone)]
        for algo in order:
            fits = 1 if m == largest else (1 if quick else FITS_PER_WORKER)
            got = run_worker(work.directory, m, algo, fits, score=m == largest)
            seconds[algo, m] += got["seconds"]
            rss[algo, m].append(got["peak_rss_above_baseline"])
            if "accuracy" in got:
                accuracy[algo] = got["accuracy"]
            log(
                f"  fit {algo:13} m={label(m):>4}: {', '.join(f'{s:.3f}' for s in got['seconds'])} s, "
                f"peak +{got['peak_rss_above_baseline'] / 2**20:.0f} MB"
            )
    for algo in SEARCH_ALGOS:
        got = run_worker(work.directory, largest, algo, 1, score=True)
        seconds[algo, largest] = got["seconds"]
        accuracy[algo] = got["accuracy"]
        log(f"  fit {algo:13} m={label(largest):>4}: {got['seconds'][0]:.3f} s, accuracy {got['accuracy']:.4f}")

    section = Section("training")
    item = "1 training"
    t = {key: median(v) for key, v in seconds.items()}
    exponent = {a: fit_exponent(sizes, [t[a, m] for m in sizes]) for a in everyone}
    for algo in ALGOS:
        name = f"{algo} k={K}" if params(algo) else algo
        for m in sizes:
            r = ratio(t[algo, m], t[PEER, m])
            goal = met = None
            if algo == "fkdb" and m == largest:
                goal, met = f"ratio ≤ {PEER_RATIO_GOAL:g}", r is not None and r <= PEER_RATIO_GOAL
            section.rows.append(
                Row(item, f"{name} fit, m={label(m)}", t[algo, m], t[PEER, m], "s", f"{PEER}.fit", r, goal or "", met)
            )
    for algo in ALGOS:
        name = f"{algo} k={K}" if params(algo) else algo
        for m in sizes:
            ours, peer = median(rss[algo, m]) / 2**20, median(rss[PEER, m]) / 2**20
            section.rows.append(
                Row(
                    item,
                    f"{name} fit peak RSS above data, m={label(m)}",
                    ours,
                    peer,
                    "MB",
                    f"{PEER}.fit",
                    ratio(ours, peer),
                )
            )
    for algo in ALGOS:
        name = f"{algo} k={K}" if params(algo) else algo
        e = exponent[algo]
        section.rows.append(
            Row(
                item,
                f"{name} fit time exponent in m ({label(sizes[0])}..{label(largest)})",
                e,
                exponent[PEER],
                "",
                f"{PEER}.fit",
                ratio(e, exponent[PEER]),
                f"≤ {EXPONENT_GOAL}",
                e <= EXPONENT_GOAL,
            )
        )
    for algo in SEARCH_ALGOS:
        s = seconds[algo, largest][0]
        section.rows.append(
            Row(
                item,
                f"{algo} k={K} fit, m={label(largest)} (for reference)",
                s,
                t[PEER, largest],
                "s",
                f"{PEER}.fit",
                ratio(s, t[PEER, largest]),
            )
        )
    best_algo = max((*ALGOS, *SEARCH_ALGOS), key=lambda a: accuracy[a])
    gap = 100 * (work.bayes_accuracy - accuracy[best_algo])
    for algo in (*ALGOS, *SEARCH_ALGOS):
        name = f"{algo} k={K}" if params(algo) else algo
        section.rows.append(
            Row(
                item,
                f"{name} test accuracy, trained on m={label(largest)}",
                100 * accuracy[algo],
                100 * work.bayes_accuracy,
                "%",
                "Bayes-optimal",
                ratio(accuracy[algo], work.bayes_accuracy),
            )
        )
    section.rows.append(
        Row(
            item,
            f"best of ours (k ≤ 2: {best_algo}) − Bayes-optimal, points",
            -gap,
            None,
            "",
            "",
            None,
            f"≥ −{ACCURACY_GOAL_POINTS:g}",
            gap <= ACCURACY_GOAL_POINTS,
        )
    )
    section.rows.append(
        Row(
            item,
            f"{PEER} test accuracy, trained on m={label(largest)} (for reference)",
            100 * accuracy[PEER],
            100 * work.bayes_accuracy,
            "%",
            "Bayes-optimal",
            ratio(accuracy[PEER], work.bayes_accuracy),
        )
    )
    section.details = {
        "sizes": list(sizes),
        "seconds": {f"{a} m={m}": v for (a, m), v in seconds.items()},
        "peak_rss_above_baseline_bytes": {f"{a} m={m}": v for (a, m), v in rss.items()},
        "exponents": exponent,
        "accuracy": accuracy,
        "bayes_optimal_accuracy": work.bayes_accuracy,
        "bayes_optimal_expected_accuracy": work.bayes_expected_accuracy,
        "test_rows": work.test_rows,
        "fits_per_worker": 1 if quick else FITS_PER_WORKER,
        "rounds": rounds,
    }
    for row in section.missed:
        if row.measurement.startswith("best of ours"):
            section.bounds[row.measurement] = accuracy_paragraph(work, largest, accuracy)
        else:
            section.bounds[row.measurement] = bounds_paragraph(row, work, largest)
    return section


def accuracy_paragraph(work: Workload, largest: int, accuracy: dict[str, float]) -> str:
    """For a missed accuracy goal: is it the estimation or the structure? Our estimate on the
    true structure from the same rows, and how many true arcs each learner found."""
    import numpy as np

    from bnserve.store.model import Model
    from bnserve.store.predictor import compile_model
    from bnserve.trainer.fit import fit
    from bnserve.trainer.learners.parameters import estimate
    from bnserve.trainer.learners.structure import Structure

    net, train, test = work.network, work.train(largest), work.test()
    names = [v.name for v in train.features]
    parents = {names[i]: (train.class_variable.name, *(names[j] for j in net.parents[i])) for i in range(len(names))}
    parents[train.class_variable.name] = ()
    oracle = Model(
        train.variables, (estimate(Structure(parents, tuple(names[i] for i in net.order)), train),), "true-structure"
    ).validate()
    oracle_accuracy = float(np.mean(compile_model(oracle).predict_proba(test.X).argmax(axis=1) == test.y))
    true_arcs = {frozenset((names[i], names[j])) for i in range(len(names)) for j in net.parents[i]}
    lines = []
    for algo in ("tan", "kdb", "fkdb", *SEARCH_ALGOS):
        model = fit(algo, train, **params(algo))
        arcs = {frozenset(a) for a in model.networks[0].arcs if train.class_variable.name not in a}
        lines.append(
            f"| {algo}{' k=2' if params(algo) else ''} | {100 * accuracy[algo]:.2f} % | "
            f"{len(arcs & true_arcs)} of {len(true_arcs)} | {len(arcs)} |"
        )
    return (
        f"Not the estimation: the true network's structure with our Laplace CPTs "
        f"(`trainer.estimate`) estimated from the same {label(largest)} rows scores "
        f"**{100 * oracle_accuracy:.2f} %** on the test rows, against {100 * work.bayes_accuracy:.2f} % for the "
        f"true CPTs. The gap is the structure search. The generating network adds its features in a random "
        f"order, each with two parents among the earlier ones; KDB orders the features by I(X;C) and FKDB "
        f"greedily by I(X;C) plus the CMI to the chosen ones, and a feature may only take parents that come "
        f"before it. Where a true child comes before one of its parents in that order the arc is reversed or "
        f"replaced, and a reversed arc into a node with two parents (a v-structure) is not the same "
        f"distribution. True arcs found (as pairs, either direction) at {label(largest)} rows:\n\n"
        "| learner | test accuracy | true arcs found | arcs learned |\n|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
        "What limits KDB and FKDB is the order they impose, not the precision of the statistics; `hc` "
        "searches without one, and what is left is its search stopping at a local maximum of the BIC. "
        "The goal stays as stated.\n"
    )


def bounds_paragraph(row: Row, work: Workload, largest: int) -> str:
    """For a missed goal: the profile of the fit at the largest size, top lines by own time."""
    algo = row.measurement.split()[0]
    if algo not in ALGOS:
        algo = "fkdb"
    from bnserve.trainer.fit import fit

    data = work.train(largest)
    profile = cProfile.Profile()
    profile.enable()
    fit(algo, data, **params(algo))
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(8)
    top = "\n".join(line for line in text.getvalue().splitlines() if line.strip())
    return f"Profile of `fit('{algo}')` at m={label(largest)} (cProfile, in the suite's process):\n\n```\n{top}\n```\n"


def main() -> int:
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        _, _, directory, rows, algo, fits, score = sys.argv
        print(json.dumps(worker(pathlib.Path(directory), int(rows), algo, int(fits), score == "1")))
        return 0
    print("run the suite with: python bench/run.py [--quick]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
