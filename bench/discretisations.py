"""Discretisation methods against each other and against RandomForest(300), on the same folds.

    python bench/discretisations.py [--datasets ecoli,wine] [--methods mdl:16,pkid]
                                    [--learners 'nb;aode;nb-alr=nb,estimator=alr'] [--menu [--proxies nb,aode,tan]] [--folds 5] [--seed 0] [--rows 5000]

For each shared data set with numeric columns, each method cuts each training fold on its
own rows (``EncodedData.split``) and each fixed learner is scored by stratified CV; the
forest gets the raw columns (``bench/versus_forest.py``'s reading) on the same folds. Prints
the mean accuracy, its standard error over the folds, and each method's mean paired gain
over the first method with its standard error. ``--rows`` samples the larger sets (seed 0).
``--datasets iris,wdbc,digits`` takes the numeric sets scikit-learn ships (``BUNDLED``).
``--menu`` also runs auto's stage 0 (``bnserve.trainer.binning``) with ``--methods`` as its
menu (``--proxies``: its proxies, naive Bayes and AODE by default): the method it would
choose, and each method's proxy accuracy and lead z.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import versus_forest
from bnserve.trainer import binning
from bnserve.trainer.data import EncodedData, Preprocessing, load
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from bnserve.trainer.plan import with_auto_discretization

NUMERIC_SETS = (
    "balance-scale,breast-cancer-wisconsin,dermatology,ecoli,hepatitis,lymphography,wine,zoo,adult-train,letter"
)


# numeric sets scikit-learn ships (no download): the held-out kind of data issue 28 is about
BUNDLED = {"iris": "load_iris", "wdbc": "load_breast_cancer", "digits": "load_digits"}


def sampled(name: str, rows: int, where: pathlib.Path) -> pathlib.Path:
    """The shared file, or ``rows`` of its rows drawn with seed 0 (header kept); a set of
    ``BUNDLED`` written to ``where`` from scikit-learn."""
    if name in BUNDLED:
        return bundled(name, where)
    path = versus_forest.DATASETS / f"{name}.csv"
    lines = path.read_text().splitlines()
    if len(lines) - 1 <= rows:
        return path
    keep = np.sort(np.random.default_rng(0).choice(len(lines) - 1, rows, replace=False)) + 1
    out = where / f"{name}.csv"
    out.write_text("\n".join([lines[0], *(lines[i] for i in keep)]) + "\n")
    return out


def bundled(name: str, where: pathlib.Path) -> pathlib.Path:
    """scikit-learn's set as a CSV: columns f0, f1, …, the class as c0, c1, …"""
    from sklearn import datasets

    bunch = getattr(datasets, BUNDLED[name])()
    out = where / f"{name}.csv"
    lines = [",".join([*(f"f{j}" for j in range(bunch.data.shape[1])), "class"])]
    lines += [",".join([*(repr(float(v)) for v in row), f"c{t}"]) for row, t in zip(bunch.data, bunch.target)]
    out.write_text("\n".join(lines) + "\n")
    return out


def schema_of(path: pathlib.Path, name: str) -> dict[str, Any]:
    """The set's entry of the shared schema.json; a ``BUNDLED`` set's columns are all numeric."""
    if name not in BUNDLED:
        return dict(json.loads((versus_forest.DATASETS / "schema.json").read_text())[f"{name}.csv"])
    header = path.read_text().split("\n", 1)[0].split(",")
    classes = sorted({line.rsplit(",", 1)[1] for line in path.read_text().splitlines()[1:]})
    columns = [{"name": c, "type": "numeric"} for c in header[:-1]]
    return {"class": "class", "columns": [*columns, {"name": "class", "type": "nominal", "values": classes}]}


def peer_data(path: pathlib.Path, name: str) -> versus_forest.Data:
    """``versus_forest.read`` of the file at ``path`` (the shared file, a sample of it, or a
    ``BUNDLED`` set)."""
    shared = versus_forest.DATASETS
    schema = schema_of(path, name)
    try:  # read() finds the file and its schema by name in DATASETS
        versus_forest.DATASETS = path.parent
        if path.parent != shared:
            (path.parent / "schema.json").write_text(json.dumps({f"{name}.csv": schema}))
        return versus_forest.read(name)
    finally:
        versus_forest.DATASETS = shared


def forest(path: pathlib.Path, name: str, folds: int, seed: int) -> np.ndarray:
    """RandomForest(300)'s accuracy per fold on the raw columns."""
    from sklearn.ensemble import RandomForestClassifier

    data = peer_data(path, name)
    fold = stratified_folds(data.ours.y, folds, seed)
    accuracies = []
    for f in range(folds):
        train, test = fold != f, fold == f
        X_train, X_test = versus_forest.ordinal(data, train, test)
        rf = RandomForestClassifier(n_estimators=300, random_state=0, n_jobs=1).fit(X_train, data.ours.y[train])
        accuracies.append(float(np.mean(rf.predict(X_test) == data.ours.y[test])))
    return np.array(accuracies)


def with_proxies(
    proxies: tuple[str, ...], data: EncodedData, menu: list[str], folds: int, seed: int
) -> binning.Binning:
    """Stage 0's choice on ``data`` with ``proxies`` in place of its own."""
    kept = binning.PROXIES
    try:
        binning.PROXIES = proxies
        return binning.choose_binning(data, menu, folds=folds, seed=seed)[0]
    finally:
        binning.PROXIES = kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=NUMERIC_SETS)
    parser.add_argument("--methods", default="mdl,mdl:16,equal-frequency:5,equal-frequency:10,pkid")
    parser.add_argument("--learners", default="nb;aode;tan;skdb", help="ALGO or LABEL=ALGO[,PARAM=VALUE…], ';' between")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--no-forest", action="store_true")
    parser.add_argument(
        "--menu", action="store_true", help="also auto's stage 0 on the whole set with --methods as its menu"
    )
    parser.add_argument("--proxies", default=",".join(binning.PROXIES), help="stage 0's proxies under --menu")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    given = [versus_forest.parse_learner(t if "=" in t else f"{t}={t}") for t in args.learners.split(";")]
    learners = [m.label for m in given]
    runs = [(m.algo, dict(m.params)) for m in given]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            path = sampled(name, args.rows, pathlib.Path(tmp))
            per: dict[str, list[np.ndarray]] = {}
            for text in methods:
                data = load(str(path), preprocessing=Preprocessing(discretize=Method.parse(text)))
                evaluations = cross_validate_many(runs, data, folds=args.folds, seed=args.seed)
                per[text] = [np.array(e.fold_accuracies) for e in evaluations]
            print(f"{name} ({data.n_rows} rows)")
            if args.menu:
                read = with_auto_discretization(load(str(path)))
                chosen = with_proxies(tuple(args.proxies.split(",")), read, methods, args.folds, args.seed)
                leads = " ".join(f"{s.method} {100 * s.accuracy:.2f} (z {s.lead_z:+.1f})" for s in chosen.scores)
                print(f"  stage 0 chooses {chosen.chosen}: {leads}")
            if not args.no_forest:
                rf = forest(path, name, args.folds, args.seed)
                print(f"  {'rf300':<20} {100 * rf.mean():6.2f} ± {100 * rf.std(ddof=1) / np.sqrt(rf.size):4.2f}")
            for i, learner in enumerate(learners):
                base = per[methods[0]][i]
                cells = []
                for text in methods:
                    a, d = per[text][i], per[text][i] - base
                    se = d.std(ddof=1) / np.sqrt(d.size)
                    cells.append(f"{text} {100 * a.mean():6.2f} ({100 * d.mean():+5.2f}±{100 * se:4.2f})")
                print(f"  {learner:<6} " + " | ".join(cells))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
