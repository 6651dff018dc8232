"""Accuracy against scikit-learn's forests: our single learners, ``auto`` scored by nested
CV, RandomForest (300 trees), HistGradientBoosting (with its defaults and with early stopping
off) and logistic regression, on every data set, on the same 10 stratified folds.

    python bench/versus_forest.py [--datasets corral,zoo] [--methods nb,auto,rf] [--jobs N] [--fresh]
                                  [--learner LABEL=ALGO[,PARAM=VALUE…]]…
    python bench/versus_forest.py --rerender    # the report again from docs/accuracy-peers.json

Each CSV in ../shared/datasets is one data set (the train and test halves of adult,
monks-1..3, spect and hayes-roth are two sets each). The folds are
``stratified_folds(y, 10, 0)`` on our coded class, given to every method. Ours learn their
preprocessing (MDL cut points) on each training fold (``EncodedData.split``); the
scikit-learn peers get the raw columns typed by schema.json: numbers as floats, nominal
values ordinal-coded on the training fold (a value unseen there is missing), missing as
NaN. Each (data set, method) result is cached in bench/.cache/versus_forest/, so a killed
run resumes; the tables go to their section of docs/accuracy.md and every figure to
docs/accuracy-peers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.report import machine, write_section
from bnserve.trainer.auto import (
    AUTO_FOLDS,
    LARGE_FOLDS,
    LARGE_ROWS,
    MOST_ACCURATE,
    SIMPLEST_WITHIN_NOISE,
    cross_validate_auto,
)
from bnserve.trainer.data import EncodedData, Preprocessing, load
from bnserve.trainer.data.columns import columns_of
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation import metrics
from bnserve.trainer.evaluation.comparison import friedman
from bnserve.trainer.evaluation.cross_validation import Evaluation, cross_validate_many
from bnserve.trainer.io import read_table
from bnserve.trainer.learners.registry import DEFAULT_CANDIDATES, DEFAULT_DISCRETIZATIONS, DEFAULT_WORK_BUDGET, LEARNERS
from bnserve.trainer.plan import AUTO_DISCRETIZATION, with_auto_discretization
from bnserve.trainer.progress import reporting, terminal_bars

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
DOCS = ROOT / "docs"
CACHE = ROOT / "bench" / ".cache" / "versus_forest"
SECTION = "versus-forest"
FOLDS, SEED = 10, 0
DRAW_POINTS = 0.1  # |difference in mean accuracy| <= 0.1 point is a draw
SLACK_POINTS = 1.0  # goal: auto never more than 1 point under the best single learner on a set
FIT_RATIO_GOAL = 5.0  # goal: auto's fit time at most this many times RandomForest's, summed over the sets
LEAD_GOAL_POINTS = 1.0  # goal: auto's mean accuracy at least the best peer's plus this many points
NEAR_POINTS = 0.5  # goal: auto wins or draws within this many points against RandomForest ...
NEAR_SHARE_GOAL = 24 / 34  # ... on at least this share of the sets (issue 28: 24 of the 34)
SINGLE, AUTO, PEER = "single", "auto", "scikit-learn"
HGB, HGB_DEFAULT, HGB_NO_STOP = "hgb", "hgb-default", "hgb-no-stop"  # hgb: the better of the two on each set
PEERS = ("rf", HGB, "logreg")  # scikit-learn's, as the report shows them
# what auto's cached results depend on beside the rule (a result cached under another search is redone)
AUTO_PROTOCOL = {
    "discretize": str(AUTO_DISCRETIZATION),
    "discretizations": list(DEFAULT_DISCRETIZATIONS),
    "work_budget": DEFAULT_WORK_BUDGET,
    "candidates": list(DEFAULT_CANDIDATES),
    "drop": "after 2 folds, z 3",
    "inner_folds": f"{AUTO_FOLDS}, {LARGE_FOLDS} from {LARGE_ROWS:,} rows",
}


@dataclass(frozen=True)
class Method:
    label: str
    kind: str  # SINGLE, AUTO or PEER
    algo: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """What the cached result depends on: the method and the protocol."""
        return json.dumps([self.kind, self.algo, dict(self.params), FOLDS, SEED], sort_keys=True)


def default_singles() -> list[Method]:
    """Paper 001's learners and AODE, the selective and ensemble KDBs, KDB with HDP estimates.
    Not A2DE: on wide data it is hundreds of networks (861 on connect-4), too slow to
    cross-validate here and to serve, and on ten small sets it trailed ESKDB."""
    singles = [
        Method("nb", SINGLE, "nb"),
        Method("tan", SINGLE, "tan"),
        *(Method(f"kdb{k}", SINGLE, "kdb", {"k": k}) for k in (1, 2, 3)),
        Method("fkdb2", SINGLE, "fkdb", {"k": 2}),
        Method("aode", SINGLE, "aode"),
    ]
    singles += [Method(name, SINGLE, name) for name in ("skdb", "eskdb") if name in LEARNERS]
    singles.append(Method("kdb2-hdp", SINGLE, "kdb", {"k": 2, "estimator": "hdp"}))
    if "eskdb" in LEARNERS:  # the paper's setting (Zhang, Petitjean & Buntine 2020)
        singles.append(Method("eskdb-hdp", SINGLE, "eskdb", {"estimator": "hdp"}))
    singles += [Method(f"{algo}-alr", SINGLE, algo, {"estimator": "alr"}) for algo in ("nb", "tan")]
    return singles


def others() -> list[Method]:
    return [
        Method("auto", AUTO, "auto", {"rule": MOST_ACCURATE, **AUTO_PROTOCOL}),
        Method("auto-se", AUTO, "auto", {"rule": SIMPLEST_WITHIN_NOISE, **AUTO_PROTOCOL}),
        Method("rf", PEER, "RandomForestClassifier", {"n_estimators": 300, "random_state": 0, "n_jobs": 1}),
        Method(HGB_DEFAULT, PEER, "HistGradientBoostingClassifier", {"random_state": 0}),
        Method(HGB_NO_STOP, PEER, "HistGradientBoostingClassifier", {"random_state": 0, "early_stopping": False}),
        Method("logreg", PEER, "LogisticRegression", {"max_iter": 2000}),
    ]


def with_best_hgb(result: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """One set's results with ``hgb``: the better (by accuracy, then log-loss) of HistGradientBoosting
    with its defaults and with early stopping off, ``variant`` saying which; as given without both."""
    out = dict(result)
    if HGB_DEFAULT in result and HGB_NO_STOP in result:
        label = min((HGB_DEFAULT, HGB_NO_STOP), key=lambda m: (-result[m]["accuracy"], result[m]["log_loss"]))
        out[HGB] = {**result[label], "variant": label}
    return out


def parse_learner(text: str) -> Method:
    """``LABEL=ALGO[,PARAM=VALUE…]``, e.g. ``kdb2-d05=kdb,k=2,estimator=dirichlet:0.5``."""
    label, _, spec = text.partition("=")
    algo, *pairs = spec.split(",")
    if not label or algo not in LEARNERS:
        raise argparse.ArgumentTypeError(f"expected LABEL=ALGO[,PARAM=VALUE…] with ALGO one of {', '.join(LEARNERS)}")
    params: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        params[name] = json.loads(value) if value.lstrip("-").replace(".", "", 1).isdigit() else value
    return Method(label, SINGLE, algo, params)


# ---------------------------------------------------------------- the data, both ways


@dataclass(frozen=True)
class Data:
    """One data set coded for us (``ours``) and as raw columns for scikit-learn (``raw``:
    float, nominal columns as their codes with NaN for missing), the same rows and class codes."""

    name: str
    ours: EncodedData
    raw: np.ndarray
    nominal: np.ndarray  # bool per column
    cards: tuple[int, ...]  # per column: the number of nominal labels (0 for a numeric column)

    @property
    def folds(self) -> np.ndarray:
        return stratified_folds(self.ours.y, FOLDS, SEED)


def read(name: str) -> Data:
    path = str(DATASETS / f"{name}.csv")
    ours = load(path)
    schema = json.loads((DATASETS / "schema.json").read_text())[f"{name}.csv"]
    kinds = {c["name"]: c["type"] for c in schema["columns"]}
    names = [c["name"] for c in schema["columns"] if c["name"] != schema["class"]]
    typed = Preprocessing(
        nominal=tuple(n for n in names if kinds[n] == "nominal"),
        numeric=tuple(n for n in names if kinds[n] == "numeric"),
    )
    columns = columns_of(read_table(path), None, typed)
    if not np.array_equal(columns.y, ours.y):
        raise AssertionError(f"{name}: the two readings disagree on the rows or the class codes")
    raw = np.empty(columns.codes.shape, dtype=np.float64)
    for j, states in enumerate(columns.states):
        if states is None:
            raw[:, j] = columns.values(j)
        else:
            raw[:, j] = np.where(columns.codes[:, j] >= 0, columns.codes[:, j], np.nan)
    nominal = np.array([s is not None for s in columns.states])
    return Data(name, ours, raw, nominal, tuple(len(s) if s is not None else 0 for s in columns.states))


def ordinal(data: Data, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The raw columns of the training and test rows, each nominal column's values coded
    0..m-1 in label order over the values the training fold has; others become NaN
    (OrdinalEncoder with handle_unknown='use_encoded_value', unknown_value=NaN)."""
    X_train, X_test = data.raw[train].copy(), data.raw[test].copy()
    for j in np.flatnonzero(data.nominal):
        seen = np.unique(X_train[:, j][~np.isnan(X_train[:, j])]).astype(np.int64)
        code = np.full(data.cards[j] + 1, np.nan)  # the last slot takes NaN's lookup
        code[seen] = np.arange(seen.size)
        for X in (X_train, X_test):
            column = X[:, j]
            X[:, j] = code[np.where(np.isnan(column), data.cards[j], column).astype(np.int64)]
    return X_train, X_test


# ---------------------------------------------------------------- running


def from_evaluation(e: Evaluation, seconds: float) -> dict[str, Any]:
    return {
        "n_rows": e.n_rows,
        "accuracy": e.accuracy,
        "fold_accuracies": list(e.fold_accuracies),
        "log_loss": e.log_loss,
        "fit_seconds": e.fit_seconds,
        "predict_seconds": e.predict_seconds,
        "fold_choices": list(e.fold_choices),
        "params": {k: str(v) for k, v in e.params.items()},
        "wall_seconds": seconds,
    }


def peer_estimator(method: Method, data: Data) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

    if method.algo == "RandomForestClassifier":
        return RandomForestClassifier(**method.params)
    if method.algo == "LogisticRegression":
        return logistic_regression(method, data)
    categorical = data.nominal if data.nominal.any() else None
    return HistGradientBoostingClassifier(**method.params, categorical_features=categorical)


def logistic_regression(method: Method, data: Data) -> Any:
    """Logistic regression as its users set it up: nominal columns imputed by their mode and
    one-hot coded (a value unseen in training: all zeros), numeric ones imputed by their mean
    and scaled to unit variance."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    nominal = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore"))
    numeric = make_pipeline(SimpleImputer(strategy="mean", keep_empty_features=True), StandardScaler())
    columns = ColumnTransformer(
        [("nominal", nominal, np.flatnonzero(data.nominal)), ("numeric", numeric, np.flatnonzero(~data.nominal))]
    )
    return make_pipeline(columns, LogisticRegression(**method.params))


def run_peer(method: Method, data: Data) -> dict[str, Any]:
    """10-fold CV of a scikit-learn estimator on our folds; log-loss as ours
    (``metrics.log_losses``: P(true class) floored at 1e-15, pooled over the folds). One
    thread, as ours and RF's n_jobs=1: HGB's OpenMP threads otherwise spin against each
    other on a shared machine (zoo: 8 s a fold instead of under 1)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _run_peer(method, data)


def _early_stopping_cannot_stratify(estimator: Any, y: np.ndarray) -> bool:
    """HistGradientBoosting stops early by default above 10,000 rows, on a validation split
    stratified by class, which a class with one training row makes impossible (nursery's
    "recommend": 2 rows): there, and only there, it is fitted without early stopping."""
    counts = np.bincount(y)
    return (
        estimator.get_params().get("early_stopping") == "auto" and y.shape[0] > 10_000 and counts[counts > 0].min() < 2
    )


def _run_peer(method: Method, data: Data) -> dict[str, Any]:
    y, n_classes, fold = data.ours.y, data.ours.n_classes, data.folds
    accuracies, losses, fit_s, predict_s = [], [], [], []
    t_start = time.perf_counter()
    for f in range(FOLDS):
        train, test = fold != f, fold == f
        # logistic regression one-hot codes the labels themselves (its encoder ignores unseen ones)
        X_train, X_test = (
            (data.raw[train], data.raw[test]) if method.algo == "LogisticRegression" else ordinal(data, train, test)
        )
        estimator = peer_estimator(method, data)
        if _early_stopping_cannot_stratify(estimator, y[train]):
            estimator.set_params(early_stopping=False)
        t0 = time.perf_counter()
        estimator.fit(X_train, y[train])
        t1 = time.perf_counter()
        given = estimator.predict_proba(X_test)
        t2 = time.perf_counter()
        proba = np.zeros((given.shape[0], n_classes))
        proba[:, estimator.classes_] = given  # a class absent from the training fold has probability 0
        accuracies.append(float(np.mean(np.argmax(proba, axis=1) == y[test])))
        losses.append(metrics.log_losses(proba, y[test]))
        fit_s.append(t1 - t0)
        predict_s.append(t2 - t1)
    return {
        "n_rows": data.ours.n_rows,
        "accuracy": float(np.mean(accuracies)),
        "fold_accuracies": accuracies,
        "log_loss": float(np.concatenate(losses).mean()),
        "fit_seconds": float(np.mean(fit_s)),
        "predict_seconds": float(np.mean(predict_s)),
        "fold_choices": [],
        "params": {k: str(v) for k, v in method.params.items()},
        "wall_seconds": time.perf_counter() - t_start,
    }


def cache_file(name: str, method: Method) -> pathlib.Path:
    return CACHE / name / f"{method.label}.json"


def cached(name: str, method: Method) -> dict[str, Any] | None:
    path = cache_file(name, method)
    if not path.exists():
        return None
    entry = json.loads(path.read_text())
    return entry["result"] if entry.get("key") == method.key() else None


def store(name: str, method: Method, result: dict[str, Any]) -> None:
    path = cache_file(name, method)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": method.key(), "result": result}, indent=1) + "\n")
    os.replace(tmp, path)  # a killed run leaves either the old file or the new one


def run_dataset(name: str, methods: Sequence[Method], fresh: bool, live: bool) -> dict[str, dict[str, Any]]:
    """Every method on one data set, each result cached as soon as it is known."""
    results = {m.label: r for m in methods if not fresh and (r := cached(name, m)) is not None}
    todo = [m for m in methods if m.label not in results]
    if not todo:
        return results
    data = read(name)
    bars = terminal_bars() if live else None

    def done(method: Method, result: dict[str, Any]) -> None:
        store(name, method, result)
        results[method.label] = result
        print(
            f"  {name}: {method.label:<10} accuracy {100 * result['accuracy']:5.1f} %  "
            f"fit {result['fit_seconds']:.3g} s/fold  ({result['wall_seconds']:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    singles = [m for m in todo if m.kind == SINGLE]
    if singles:  # one pass over the folds: each training fold discretised once for all of them
        t0 = time.perf_counter()
        with reporting(bars):
            evaluations = cross_validate_many(
                [(m.algo, dict(m.params)) for m in singles], data.ours, dataset=name, folds=FOLDS, seed=SEED
            )
        seconds = (time.perf_counter() - t0) / len(singles)
        for m, e in zip(singles, evaluations):
            done(m, from_evaluation(e, seconds))
    autos = [m for m in todo if m.kind == AUTO]
    if autos:  # one inner search per outer fold, each rule's pick fitted from it
        t0 = time.perf_counter()
        rules = [m.params["rule"] for m in autos]
        with reporting(bars):
            evaluations = cross_validate_auto(
                with_auto_discretization(data.ours), folds=FOLDS, seed=SEED, rules=rules, dataset=name
            )
        seconds = (time.perf_counter() - t0) / len(autos)
        for m, e in zip(autos, evaluations):
            done(m, from_evaluation(e, seconds))
    for m in todo:
        if m.kind == PEER:
            done(m, run_peer(m, data))
    return results


# ---------------------------------------------------------------- summary and report


def wdl(a: Sequence[float], b: Sequence[float]) -> dict[str, int]:
    diff = 100 * (np.asarray(a) - np.asarray(b))
    return {
        "wins": int(np.sum(diff > DRAW_POINTS)),
        "draws": int(np.sum(np.abs(diff) <= DRAW_POINTS)),
        "losses": int(np.sum(diff < -DRAW_POINTS)),
    }


def summarise(results: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[Method]) -> dict[str, Any]:
    """Over the data sets where every method has a result."""
    labels = [m.label for m in methods]
    sets = [s for s in results if all(label in results[s] for label in labels)]
    if not sets:
        return {"datasets": []}
    acc = {label: [results[s][label]["accuracy"] for s in sets] for label in labels}
    singles = [m.label for m in methods if m.kind == SINGLE]
    summary: dict[str, Any] = {
        "datasets": sets,
        "mean_accuracy": {label: float(np.mean(acc[label])) for label in labels},
        "mean_log_loss": {label: float(np.mean([results[s][label]["log_loss"] for s in sets])) for label in labels},
        "total_fit_seconds_per_fold": {
            label: float(np.sum([results[s][label]["fit_seconds"] for s in sets])) for label in labels
        },
        "total_predict_seconds_per_fold": {
            label: float(np.sum([results[s][label]["predict_seconds"] for s in sets])) for label in labels
        },
    }
    if len(sets) > 1 and len(labels) > 1:
        summary["friedman"] = friedman({label: [1 - a for a in acc[label]] for label in labels}).to_dict()
    if singles:
        best = [max(acc[label][i] for label in singles) for i in range(len(sets))]
        summary["best_single_per_set"] = {
            s: max(singles, key=lambda label, i=i: acc[label][i]) for i, s in enumerate(sets)
        }
        acc["best single"] = best
    autos = [m.label for m in methods if m.kind == AUTO]
    opponents = [label for label in ("rf", HGB, "logreg", "best single") if label in acc]
    summary["wins_draws_losses"] = {a: {o: wdl(acc[a], acc[o]) for o in opponents} for a in autos}
    goals = []
    peers = [label for label in PEERS if label in acc]
    if "auto" in acc and peers:
        mean_auto = float(np.mean(acc["auto"]))
        best_peer = max(peers, key=lambda label: float(np.mean(acc[label])))
        mean_peer = float(np.mean(acc[best_peer]))
        goals.append(
            {
                "goal": f"auto's mean accuracy ≥ the best peer's + {LEAD_GOAL_POINTS:g} point",
                "figure": f"{100 * mean_auto:.2f} % vs {100 * mean_peer:.2f} % ({best_peer}): "
                f"{100 * (mean_auto - mean_peer):+.2f} points",
                "met": bool(100 * (mean_auto - mean_peer) >= LEAD_GOAL_POINTS),
            }
        )
    if "auto" in acc and "rf" in acc:
        near = int(np.sum(100 * (np.asarray(acc["auto"]) - np.asarray(acc["rf"])) >= -NEAR_POINTS))
        goals.append(
            {
                "goal": f"auto wins or draws (within {NEAR_POINTS:g} point) against RandomForest on at least "
                f"{NEAR_SHARE_GOAL:.0%} of the sets (24 of 34)",
                "figure": f"{near} of {len(sets)}",
                "met": bool(near >= NEAR_SHARE_GOAL * len(sets) - 1e-9),
            }
        )
    if "auto" in acc and singles:
        gaps = {s: 100 * (acc["best single"][i] - acc["auto"][i]) for i, s in enumerate(sets)}
        worst = max(gaps, key=lambda s: gaps[s])
        under = [s for s, g in gaps.items() if g > SLACK_POINTS]
        picked = [picked_on_other_folds(results[s], singles) for s in sets]
        summary["single_picked_on_other_folds"] = dict(zip(sets, picked))
        picked_under = [s for i, s in enumerate(sets) if 100 * (acc["best single"][i] - picked[i]) > SLACK_POINTS]
        goals.append(
            {
                "goal": f"on no set is auto more than {SLACK_POINTS:g} point under our best single learner there",
                "figure": f"largest gap {gaps[worst]:.2f} points ({worst})"
                + (f"; over on {', '.join(under)}" if under else "")
                + f". For scale, the single learner picked on each outer fold by its accuracy on the other "
                f"{FOLDS - 1} is over on {len(picked_under)} sets and averages {100 * np.mean(picked):.2f} %",
                "met": not under,
            }
        )
    fit = summary["total_fit_seconds_per_fold"]
    if "auto" in fit and "rf" in fit:
        goals.append(
            {
                "goal": f"auto's fit time ≤ {FIT_RATIO_GOAL:g}× RandomForest's (300 trees), summed over the sets",
                "figure": f"{fit['auto']:.3g} s vs {fit['rf']:.3g} s per fold: {fit['auto'] / fit['rf']:.1f}×",
                "met": bool(fit["auto"] <= FIT_RATIO_GOAL * fit["rf"]),
            }
        )
    summary["goals"] = goals
    return summary


def picked_on_other_folds(result: Mapping[str, Mapping[str, Any]], singles: Sequence[str]) -> float:
    """The accuracy of choosing, for each outer fold, the single learner most accurate on the
    other folds (ties to the first listed): a selection that sees more held-out rows than auto's
    inner CV, unlike the best single chosen after the fact, which sees the fold it is scored on."""
    folds = np.array([result[label]["fold_accuracies"] for label in singles])
    chosen = [int(np.argmax(np.delete(folds, f, axis=1).mean(axis=1))) for f in range(folds.shape[1])]
    return float(np.mean([folds[c, f] for f, c in enumerate(chosen)]))


def render(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    methods: Sequence[Method],
    summary: Mapping[str, Any],
    n_files: int,
) -> str:
    labels = [m.label for m in methods]
    sets = summary["datasets"]
    lines = [
        "## Against scikit-learn's forests",
        "",
        "Written by `python bench/versus_forest.py --jobs 2` (results cached in bench/.cache/versus_forest; "
        "`--fresh` recomputes; every figure in docs/accuracy-peers.json). Each CSV in ../shared/datasets is one "
        "data set: the train and test halves of adult, monks-1..3, spect and hayes-roth are two sets each. "
        f"10-fold stratified CV, the same folds (`stratified_folds(y, {FOLDS}, {SEED})` on our coded class) for "
        "every method. Ours learn their MDL cut points on each training fold (`nb-alr`, `tan-alr`: with "
        "`--estimator alr`); `auto` reads the data as `trainer fit --algo auto` does (`--discretize "
        f"{AUTO_DISCRETIZATION}`: a column MDL leaves whole keeps up to {AUTO_DISCRETIZATION.bins} "
        "equal-frequency intervals, then chooses among "
        f"{', '.join(DEFAULT_DISCRETIZATIONS)} by its inner CV) and is scored by nested CV "
        f"(`cross_validate_auto`: `fit_auto` chooses by its own {AUTO_FOLDS}-fold CV, {LARGE_FOLDS}-fold from "
        f"{LARGE_ROWS:,} rows, on each outer training fold), "
        "`auto-se` the same with the rule `simplest-within-noise` (the rule before: within one standard error "
        "of the best, the candidate tried first wins). The peers are at their honest best: RandomForest "
        "(300 trees, random_state 0) and HistGradientBoosting (random_state 0, the nominal columns as "
        "categorical) get the raw columns typed by schema.json: numbers as floats, nominal values ordinal-coded "
        "on the training fold (unseen ones missing), missing as NaN. HistGradientBoosting is run twice, with its "
        "defaults (early stopping above 10,000 rows, except on a training fold with a class of one row, where "
        "its stratified validation split cannot be drawn: nursery) and with early stopping off; `hgb` shows the "
        "better of the two on each set by accuracy, marked ⁿ where it is the one without early stopping (both "
        "are in docs/accuracy-peers.json). Logistic regression (`logreg`, lbfgs, C 1, up to 2,000 iterations) "
        "gets nominal columns imputed by their mode and one-hot coded (a label unseen in training: all zeros), "
        "numeric ones imputed by their mean and standardised. Accuracy: mean over the folds, in %; log-loss: "
        "-ln P(true class), P floored at 1e-15 for every method, pooled over the folds. Fit and predict times: "
        "seconds per fold, one core; `auto` and `auto-se` share each fold's inner search, whose time is counted "
        "in `auto`'s fit time only.",
        "",
    ]
    if not sets:
        return "\n".join([*lines, "*Not run yet: `python bench/versus_forest.py --jobs 2` writes the tables here.*"])
    if len(sets) < n_files:
        lines += [f"**Partial run: {len(sets)} of {n_files} data sets.**", ""]
    lines += [
        "### Per data set: accuracy % (log-loss)",
        "",
        "| data set | rows | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    for s in sets:
        cells = []
        best = max(results[s][label]["accuracy"] for label in labels)
        for label in labels:
            r = results[s][label]
            text = f"{100 * r['accuracy']:.1f} ({r['log_loss']:.3f})"
            text = f"**{text}**" if r["accuracy"] == best else text
            cells.append(text + (" ⁿ" if r.get("variant") == HGB_NO_STOP else ""))
        lines.append(f"| {s} | {results[s][labels[0]].get('n_rows', '')} | " + " | ".join(cells) + " |")
    ranks = summary.get("friedman", {}).get("average_ranks", {})
    lines += [
        "",
        "### Summary",
        "",
        "| method | mean accuracy % | Friedman mean rank | mean log-loss | fit s/fold, sum over sets | "
        "predict s/fold, sum over sets |",
        "|---|---|---|---|---|---|",
    ]
    for label in labels:
        rank = f"{ranks[label]:.2f}" if label in ranks else "—"
        lines.append(
            f"| {label} | {100 * summary['mean_accuracy'][label]:.2f} | {rank} | "
            f"{summary['mean_log_loss'][label]:.3f} | {summary['total_fit_seconds_per_fold'][label]:.3g} | "
            f"{summary['total_predict_seconds_per_fold'][label]:.3g} |"
        )
    if "friedman" in summary:
        fr = summary["friedman"]
        lines += ["", f"Friedman over {fr['n_datasets']} sets: χ²_F = {fr['statistic']:.1f}, p = {fr['p_value']:.2g}."]
    if summary["wins_draws_losses"]:
        lines += [
            "",
            f"Wins / draws / losses on accuracy (a draw: within {DRAW_POINTS:g} point; best single = the best of "
            "our single learners on each set, chosen after the fact):",
            "",
            "| | " + " | ".join(f"vs {o}" for o in next(iter(summary["wins_draws_losses"].values()))) + " |",
            "|---|" + "---|" * len(next(iter(summary["wins_draws_losses"].values()))),
        ]
        for a, row in summary["wins_draws_losses"].items():
            lines.append(
                f"| {a} | " + " | ".join(f"{w['wins']}/{w['draws']}/{w['losses']}" for w in row.values()) + " |"
            )
    if summary["goals"]:
        lines += ["", "### Goals", "", "| goal | figure | met? |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {g['figure']} | {'yes' if g['met'] else 'no'} |" for g in summary["goals"]]
    fit = summary["total_fit_seconds_per_fold"]
    if "auto" in fit and "rf" in fit:
        lines += [
            "",
            f"Fit time, seconds per fold summed over the sets: auto {fit['auto']:.3g} (its inner CV included), "
            f"RandomForest {fit['rf']:.3g}"
            + (f", HistGradientBoosting {fit[HGB]:.3g} (the setting shown on each set)" if HGB in fit else "")
            + (f", logistic regression {fit['logreg']:.3g}" if "logreg" in fit else "")
            + ".",
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", help="comma-separated names without .csv (default: every CSV)")
    parser.add_argument("--methods", help="comma-separated labels (default: all)")
    parser.add_argument("--learner", action="append", type=parse_learner, default=[], metavar="LABEL=ALGO[,P=V…]",
                        help="our single learners instead of the default list (repeat)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1, help="processes, one data set each (default 1)")
    parser.add_argument("--fresh", action="store_true", help="ignore the cache")
    parser.add_argument("--rerender", action="store_true",
                        help="rewrite the report from docs/accuracy-peers.json, running nothing")  # fmt: skip
    args = parser.parse_args()
    if args.rerender:
        return rerender()
    if not DATASETS.exists():
        print(f"{DATASETS} is not there", file=sys.stderr)
        return 1
    every = sorted(p.stem for p in DATASETS.glob("*.csv"))
    names = [n.strip().removesuffix(".csv") for n in args.datasets.split(",")] if args.datasets else every
    unknown = [n for n in names if n not in every]
    methods = (args.learner or default_singles()) + others()
    if args.methods:
        wanted = [m.strip() for m in args.methods.split(",")]
        unknown += [w for w in wanted if w not in {m.label for m in methods}]
        methods = [m for m in methods if m.label in wanted]
    if unknown:
        print(f"unknown: {', '.join(unknown)}", file=sys.stderr)
        return 2
    by_size = sorted(names, key=lambda n: -(DATASETS / f"{n}.csv").stat().st_size)  # the longest first
    results: dict[str, dict[str, dict[str, Any]]] = {}
    t0 = time.perf_counter()
    if args.jobs <= 1:
        for i, name in enumerate(names):
            print(f"[{i + 1}/{len(names)}] {name}", file=sys.stderr, flush=True)
            results[name] = run_dataset(name, methods, args.fresh, live=True)
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(run_dataset, n, methods, args.fresh, False): n for n in by_size}
            for i, future in enumerate(as_completed(futures)):
                results[futures[future]] = future.result()
                print(f"[{i + 1}/{len(names)}] {futures[future]} done", file=sys.stderr, flush=True)
    print(f"{len(names)} data sets in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    write_report({n: results[n] for n in names}, methods, len(every), machine())
    return 0


def report_view(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[Method]
) -> tuple[dict[str, dict[str, Mapping[str, Any]]], list[Method]]:
    """The results and methods the report shows: HistGradientBoosting's two settings as one
    column, ``hgb``, the better on each set (``with_best_hgb``)."""
    labels = {m.label for m in methods}
    if not {HGB_DEFAULT, HGB_NO_STOP} <= labels:
        return {s: dict(r) for s, r in results.items()}, list(methods)
    shown: list[Method] = []
    for m in methods:
        if m.label == HGB_DEFAULT:
            shown.append(Method(HGB, PEER, m.algo, {"early_stopping": "the better of its default and off"}))
        elif m.label != HGB_NO_STOP:
            shown.append(m)
    return {s: with_best_hgb(r) for s, r in results.items()}, shown


def write_report(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[Method], n_files: int, host: Any
) -> None:
    shown_results, shown = report_view(results, methods)
    summary = summarise(shown_results, shown)
    DOCS.mkdir(exist_ok=True)
    write_section(DOCS / "accuracy.md", SECTION, render(shown_results, shown, summary, n_files))
    document = {
        "protocol": {"folds": FOLDS, "seed": SEED, "draw_points": DRAW_POINTS, "slack_points": SLACK_POINTS},
        "machine": host,
        "methods": [{"label": m.label, "kind": m.kind, "algo": m.algo, "params": dict(m.params)} for m in methods],
        "results": results,
        "summary": summary,
    }
    (DOCS / "accuracy-peers.json").write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {DOCS / 'accuracy.md'} and {DOCS / 'accuracy-peers.json'}")


def rerender() -> int:
    """The report again from the figures of the last run (after a change to the report alone)."""
    document = json.loads((DOCS / "accuracy-peers.json").read_text())
    methods = [Method(m["label"], m["kind"], m["algo"], m["params"]) for m in document["methods"]]
    n_files = len(list(DATASETS.glob("*.csv"))) or len(document["results"])
    write_report(document["results"], methods, n_files, document["machine"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
