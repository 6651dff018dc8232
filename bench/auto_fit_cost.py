"""auto's fit against RandomForest(300)'s, in CPU seconds of one process, on whole data sets:
what ``trainer fit --algo auto`` spends (the search and the winner's fit, after reading),
beside the forest's fit of the same rows (raw columns, as ``versus_forest`` gives them).

    python bench/auto_fit_cost.py OUT.json [--rf] SET [SET…]

CPU time, not wall-clock time, so a busy machine changes the figures less; ``--jobs`` is 1
on both sides. To compare two versions of the code, run it from each checkout's root with
that checkout on PYTHONPATH (the data sets are ``versus_forest``'s), a set at a time each.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path.cwd()))

from bench import versus_forest
from bnserve.trainer.auto import fit_auto
from bnserve.trainer.plan import with_auto_discretization

FOREST = versus_forest.Method(
    "rf", versus_forest.PEER, "RandomForestClassifier", {"n_estimators": 300, "random_state": 0, "n_jobs": 1}
)


def measure(name: str, forest: bool) -> dict[str, object]:
    """auto's fit of the whole set (and the forest's, with ``forest``), CPU seconds."""
    from threadpoolctl import threadpool_limits

    data = versus_forest.read(name)
    prepared = with_auto_discretization(data.ours)
    start = time.process_time()
    model = fit_auto(prepared, jobs=1)
    result: dict[str, object] = {"rows": data.ours.n_rows, "auto_cpu_seconds": time.process_time() - start}
    result["chosen"] = model.metadata["selection"]["chosen"]
    if forest:
        rows = np.arange(data.ours.n_rows)
        X, _ = versus_forest.ordinal(data, rows, rows[:1])
        peer = versus_forest.peer_estimator(FOREST, data)  # scikit-learn's import is not the fit
        with threadpool_limits(1):
            start = time.process_time()
            peer.fit(X, data.ours.y)
            result["rf_cpu_seconds"] = time.process_time() - start
    return result


def main() -> int:
    out, *args = sys.argv[1:]
    forest = "--rf" in args
    results = {}
    for name in (a for a in args if a != "--rf"):
        results[name] = measure(name, forest)
        print(name, json.dumps(results[name]), flush=True)
    pathlib.Path(out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
