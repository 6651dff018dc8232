"""Suite item 6: bytes of the compiled tables, RSS of a process holding 100 compiled models,
and the float32 tables' error.

``CompiledModel.nbytes`` of the kdb k = 2 model of the prediction item (n = 50, c = 3)
is set beside the bytes of CategoricalNB's fitted arrays on the same rows. For the RSS, a
fresh worker process (``--worker``) imports, takes its RSS (from /proc/self/statm) as the
baseline, builds 100 models of n = 50, k = 2 (the synthetic generator's true networks,
seeds 0..99: the shape of a fitted kdb k = 2) and compiles them, keeping both as the
server does; the peer worker fits 100 CategoricalNB models on 2,000 rows each. The
float32 tables (``trainer fit --precision float32|auto``, recorded in the model's metadata)
are measured for their bytes, the largest difference of a posterior from float64's on the
test rows, how often the argmax changes, and their speed; and what ``--precision auto``
chooses for the model, by its own check on random instances.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.report import Row, Section, median, ratio
from bench.workload import worker_result

if TYPE_CHECKING:
    from bench.workload import Workload


PEER = "CategoricalNB"
MODELS, QUICK_MODELS = 100, 20
PEER_ROWS = 2000
FIT_ROWS, QUICK_FIT_ROWS = 100_000, 20_000
STRENGTH = 0.3


def peer_nbytes(estimator: Any) -> int:  # a fitted scikit-learn estimator
    """Bytes of the fitted numpy arrays of a scikit-learn estimator (attributes ending in _)."""
    total = 0
    for name, value in vars(estimator).items():
        if not name.endswith("_"):
            continue
        arrays = value if isinstance(value, list) else [value]
        total += sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
    return total


def worker(kind: str, count: int, directory: pathlib.Path) -> dict:
    import gc

    from bench import workload
    from bench.report import current_rss_bytes

    if kind == "ours":
        from bench.synthetic import random_network
        from bnserve.store.predictor import compile_model

        gc.collect()
        baseline = current_rss_bytes()
        models = [random_network(seed, **workload.SHAPE, strength=STRENGTH).model for seed in range(count)]
        gc.collect()
        with_models = current_rss_bytes()
        compiled = [compile_model(m) for m in models]
        gc.collect()
        held = current_rss_bytes()
        return {
            "baseline": baseline,
            "models": with_models - baseline,
            "held": held - baseline,
            "compiled": held - with_models,
            "nbytes": sum(c.nbytes for c in compiled),
            "count": len(compiled),
        }
    from sklearn.naive_bayes import CategoricalNB

    data = workload.load(directory, "train", PEER_ROWS * count)
    gc.collect()
    baseline = current_rss_bytes()
    fitted = [
        CategoricalNB().fit(data.X[i * PEER_ROWS : (i + 1) * PEER_ROWS], data.y[i * PEER_ROWS : (i + 1) * PEER_ROWS])
        for i in range(count)
    ]
    gc.collect()
    held = current_rss_bytes()
    return {
        "baseline": baseline,
        "held": held - baseline,
        "nbytes": sum(peer_nbytes(f) for f in fitted),
        "count": len(fitted),
    }


def run_worker(kind: str, count: int, directory: pathlib.Path) -> dict:
    return worker_result(__file__, [kind, str(count), str(directory)], f"memory worker {kind}")


def run(work: Workload, quick: bool = False, log: Callable[..., None] = print) -> Section:
    from sklearn.naive_bayes import CategoricalNB

    from bnserve.store.predictor import compile_model
    from bnserve.store.predictor.compiled import TABLE_PRECISION
    from bnserve.store.predictor.precision import FLOAT32_ERROR_BOUND, with_table_precision
    from bnserve.trainer.fit import fit

    train = work.train(QUICK_FIT_ROWS if quick else FIT_ROWS)
    test = work.test()
    model = fit("kdb", train, k=2)
    chosen = with_table_precision(model, "auto").metadata[TABLE_PRECISION]
    double, single = compile_model(model), compile_model(model, dtype=np.float32)
    peer = CategoricalNB().fit(train.X, train.y)

    p64, p32 = double.predict_proba(test.X), single.predict_proba(test.X)
    error = float(np.max(np.abs(p64 - p32)))
    flips = float(np.mean(p64.argmax(axis=1) != p32.argmax(axis=1)))
    t64, t32 = [], []
    for _ in range(3 if quick else 5):
        t0 = time.perf_counter()
        double.predict_proba(test.X)
        t1 = time.perf_counter()
        single.predict_proba(test.X)
        t2 = time.perf_counter()
        t64.append(t1 - t0)
        t32.append(t2 - t1)
    log(f"  compiled bytes: float64 {double.nbytes:,}, float32 {single.nbytes:,}; {PEER} {peer_nbytes(peer):,}")
    log(f"  float32: max |ΔP| {error:.2e}, argmax changed on {flips:.4%} of {test.n_rows:,} rows")

    count = QUICK_MODELS if quick else MODELS
    ours = run_worker("ours", count, work.directory)
    theirs = run_worker("peer", count, work.directory)
    log(f"  {count} models held: ours +{ours['held'] / 2**20:.1f} MB, {PEER} +{theirs['held'] / 2**20:.1f} MB")

    item = "6 memory"
    name = "kdb k=2, n=50, c=3"
    mb = 2**20
    rows = test.n_rows
    section = Section("memory")
    section.rows += [
        Row(
            item,
            f"{name}: compiled tables (nbytes), float64",
            double.nbytes / 1024,
            peer_nbytes(peer) / 1024,
            "KiB",
            f"{PEER} fitted arrays",
            ratio(double.nbytes, peer_nbytes(peer)),
        ),
        Row(
            item,
            f"{name}: compiled tables (nbytes), float32 (--precision float32|auto)",
            single.nbytes / 1024,
            double.nbytes / 1024,
            "KiB",
            "float64",
            ratio(single.nbytes, double.nbytes),
        ),
        Row(
            item,
            f"{count} compiled models (n=50, k=2) held: RSS above baseline",
            ours["held"] / mb,
            theirs["held"] / mb,
            "MB",
            f"{count} {PEER}",
            ratio(ours["held"], theirs["held"]),
        ),
        Row(
            item,
            f"{count} compiled models: RSS of the compiling alone, per model",
            ours["compiled"] / count / 1024,
            ours["nbytes"] / count / 1024,
            "KiB",
            "nbytes",
            ratio(ours["compiled"], ours["nbytes"]),
        ),
        Row(
            item,
            f"float32 tables: max |P32 − P64| over {rows // 1000}k test rows",
            error,
            None,
            "",
            "",
            None,
            f"≤ {FLOAT32_ERROR_BOUND:g}",
            error <= FLOAT32_ERROR_BOUND,
        ),
        Row(
            item,
            f"trainer --precision auto: max |P32 − P64| over {chosen['random_instances_checked']:,} random "
            f"instances → serves {chosen['dtype']} (metadata table_precision)",
            chosen["float32_max_abs_error"],
            None,
            "",
            "",
            None,
            f"float32 where ≤ {FLOAT32_ERROR_BOUND:g}",
            chosen["dtype"] == "float32",
        ),
        Row(item, f"float32 tables: argmax changed, share of {rows // 1000}k test rows", 100 * flips, None, "%"),
        Row(
            item,
            f"float32 tables: predict_proba rows/s, batch of {rows // 1000}k",
            rows / median(t32),
            rows / median(t64),
            "rows/s",
            "float64",
            ratio(median(t64), median(t32)),
        ),
    ]
    section.details = {
        "nbytes": {"float64": double.nbytes, "float32": single.nbytes, "peer": peer_nbytes(peer)},
        "held_models": {"ours": ours, "peer": theirs},
        "float32_max_abs_error": error,
        "float32_argmax_changed": flips,
        "precision_auto": chosen,
        "batch_seconds": {"float64": t64, "float32": t32},
    }
    for row in section.missed:
        section.bounds[row.measurement] = (
            "float32 log tables round every entry to about 6e-8 relative; over 50 nodes the log-joint "
            "moves by up to about 1e-5, and a posterior by as much. The default stays float64."
        )
    return section


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4]))))
        return 0
    print("run the suite with: python bench/run.py [--quick]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
