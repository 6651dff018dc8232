"""auto's fit against RandomForest(300)'s, in CPU seconds of one process, on whole data sets:
what ``trainer fit --algo auto`` spends (the search and the winner's fit, after reading),
beside the forest's fit of the same rows (raw columns, as ``versus_forest`` gives them).

    python bench/auto_fit_cost.py OUT.json [--rf] SET [SET…]
    python bench/auto_fit_cost.py OUT.json --factors [--rows N] SET [SET…]

CPU time, not wall-clock time, so a busy machine changes the figures less; ``--jobs`` is 1
on both sides. ``--factors`` measures instead what auto's work model
(``auto.LEARNER_WORK``, ``auto.ESTIMATOR_WORK``) assumes: the CPU seconds of one fit on the
set's first ``--rows`` rows (default 10,000) of each learner with Laplace estimates relative to
naive Bayes's, and of each other estimator relative to the learner's own Laplace fit. To compare two versions of the code, run it from each checkout's root with
that checkout on PYTHONPATH (the data sets are ``versus_forest``'s), a set at a time each.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path.cwd()))

from bench import versus_forest
from bnserve.trainer.auto import DISCRIMINATIVE, auto_folds, fit_auto
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import describe
from bnserve.trainer.fit import fit
from bnserve.trainer.plan import with_auto_discretization

FOREST = versus_forest.Method(
    "rf", versus_forest.PEER, "RandomForestClassifier", {"n_estimators": 300, "random_state": 0, "n_jobs": 1}
)


def measure(name: str, forest: bool) -> dict[str, object]:
    """auto's fit of the whole set (and the forest's, with ``forest``), CPU seconds, and the wall
    seconds of each candidate's inner folds (what to make cheaper first)."""
    from threadpoolctl import threadpool_limits

    data = versus_forest.read(name)
    prepared = with_auto_discretization(data.ours)
    start = time.process_time()
    model = fit_auto(prepared, jobs=1)
    result: dict[str, object] = {"rows": data.ours.n_rows, "auto_cpu_seconds": time.process_time() - start}
    selection = model.metadata["selection"]
    result["chosen"] = selection["chosen"]
    # where the search went: each scored candidate's fits over its folds (wall seconds, as the
    # folds time them), dearest first
    spent = {
        describe(c["algorithm"], c["params"]): round(c["fit_seconds"] * auto_folds(data.ours.n_rows), 3)
        for c in selection["candidates"]
    }
    result["candidates_wall_seconds"] = dict(sorted(spent.items(), key=lambda item: -item[1]))
    if forest:
        rows = np.arange(data.ours.n_rows)
        X, _ = versus_forest.ordinal(data, rows, rows[:1])
        peer = versus_forest.peer_estimator(FOREST, data)  # scikit-learn's import is not the fit
        with threadpool_limits(1):
            start = time.process_time()
            peer.fit(X, data.ours.y)
            result["rf_cpu_seconds"] = time.process_time() - start
    return result


FACTOR_LEARNERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("nb", {}),
    ("tan", {}),
    ("kdb", {"k": 2}),
    ("fkdb", {"k": 2}),
    ("aode", {}),
    ("skdb", {}),
    ("eskdb", {}),
)
FACTOR_ESTIMATORS = ("hdp", "dirichlet:0.5", "alr")
MIN_CPU = 0.2  # a fit is repeated until this many CPU seconds pass, so a fast one is not all noise


def cpu_per_fit(algo: str, data: EncodedData, estimator: str, params: dict[str, Any]) -> float:
    fits, start = 0, time.process_time()
    while not fits or time.process_time() - start < MIN_CPU:
        fit(algo, data, estimator, **params)
        fits += 1
    return (time.process_time() - start) / fits


def factors(data: EncodedData, rows: int) -> dict[str, Any]:
    """Each learner's Laplace fit over naive Bayes's, and each estimator's fit over the learner's
    Laplace fit (alr on ``DISCRIMINATIVE`` only, as auto tries it), CPU seconds on the first
    ``rows`` rows of ``data`` (as auto reads them)."""
    data = with_auto_discretization(data)
    if data.n_rows > rows:
        data = data.subset(np.arange(data.n_rows) < rows)
    laplace = {algo: cpu_per_fit(algo, data, "laplace", params) for algo, params in FACTOR_LEARNERS}
    result: dict[str, Any] = {"rows": data.n_rows, "learner": {a: laplace[a] / laplace["nb"] for a in laplace}}
    for estimator in FACTOR_ESTIMATORS:
        learners = [(a, p) for a, p in FACTOR_LEARNERS if estimator != "alr" or a in DISCRIMINATIVE]
        result[estimator] = {a: cpu_per_fit(a, data, estimator, p) / laplace[a] for a, p in learners}
    return result


def main() -> int:
    out, *args = sys.argv[1:]
    forest, by_factors = "--rf" in args, "--factors" in args
    rows = int(args[args.index("--rows") + 1]) if "--rows" in args else 10_000
    names = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--rows")]
    results = {}
    for name in names:
        results[name] = factors(versus_forest.read(name).ours, rows) if by_factors else measure(name, forest)
        print(name, json.dumps(results[name]), flush=True)
    pathlib.Path(out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
