"""Run the papers' protocols on the data sets we have and write their section of docs/accuracy.md.

    python bench/reproduce_papers.py [--only sahami,mihaljevic,singh,ours] [--fresh]

For every cell where a paper reports an accuracy on a data set in ../shared/datasets,
the paper's figure stands beside ours, measured with the paper's protocol; a cell more
than two of the paper's standard deviations away is flagged and explained in NOTES.
`ours` adds our figures for the learners of paper 001 (and AODE) on the data sets.
Results are cached in docs/accuracy.json, so a rerun only computes missing cells
(--fresh recomputes everything).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.trainer.data import EncodedData, Preprocessing, prepare
from bnserve.trainer.data.columns import columns_of
from bnserve.trainer.evaluation.cross_validation import cross_validate_many, holdout
from bnserve.trainer.io import read_table
from bnserve.trainer.progress import reporting, stage, terminal_bars

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.report import write_section

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
DOCS = ROOT / "docs"
CACHE = DOCS / "accuracy.json"
SECTION = "reproduce-papers"  # our part of docs/accuracy.md; bench/versus_forest.py writes another


@dataclass(frozen=True)
class Protocol:
    name: str
    folds: int = 10
    repeats: int = 1
    complete_rows: bool = False  # drop rows with a missing value first (paper 003)
    train_size: int | None = None  # random train/test splits of fixed size (paper 002)
    test_size: int | None = None
    splits: int = 30
    discretize_first: bool = False  # MDL on all rows before the CV, as papers 003 and 004 did (else per fold)

    def describe(self) -> str:
        if self.train_size:
            return f"{self.splits} random splits, {self.train_size} training / {self.test_size} test rows"
        rows = ", complete rows only" if self.complete_rows else ""
        cuts = (
            "; numeric columns (as the source ARFF declares them) discretised by MDL on all rows first"
            if self.discretize_first
            else ""
        )
        return f"{self.repeats}× {self.folds}-fold stratified CV{rows}{cuts}"


@dataclass(frozen=True)
class Cell:
    paper: str
    table: str
    dataset: str  # file name in ../shared/datasets
    label: str  # the paper's name for the algorithm
    algo: str
    params: tuple[tuple[str, Any], ...]
    mean: float | None  # the paper's accuracy in %, None where it reports none
    sd: float | None
    protocol: Protocol


SAHAMI = Protocol("Sahami 1996, 10-fold CV", folds=10)
MIHALJEVIC = Protocol(
    "Mihaljevic et al. 2013, 5×5-fold CV", folds=5, repeats=5, complete_rows=True, discretize_first=True
)
ZHANG = Protocol("Zhang 2005, 20×5-fold CV", folds=5, repeats=20, discretize_first=True)
SINGH_CHESS = Protocol("Singh & Provan 1995", train_size=1000, test_size=2196)
SINGH_SPLICE = Protocol("Singh & Provan 1995", train_size=2000, test_size=1175)
SINGH_MUSHROOM = Protocol("Singh & Provan 1995", train_size=500, test_size=7624)
OURS = Protocol("10-fold CV", folds=10)

# Sahami's θ = 0.03, in nats as our CMI is (the paper names no log base; see trainer/learners/kdb.py)
THETA = 0.03


def _sahami() -> list[Cell]:
    table = {  # Table 2: (KDB-orig, KDB-θ) accuracy ± sd per k = 0..3
        "corral.csv": [
            ((88.4, 10.5), (83.4, 10.5)),
            ((100.0, 0.0), (100.0, 0.0)),
            ((96.7, 5.8), (96.7, 5.8)),
            ((88.4, 17.2), (100.0, 0.0)),
        ],
        "led7.csv": [
            ((72.9, 2.1), (72.9, 2.1)),
            ((73.1, 3.9), (73.0, 2.9)),
            ((73.5, 2.3), (72.9, 2.4)),
            ((73.2, 2.3), (73.4, 1.3)),
        ],
        "kr-vs-kp.csv": [
            ((86.2, 1.9), (86.2, 1.9)),
            ((93.9, 1.3), (93.8, 1.4)),
            ((95.1, 1.2), (95.5, 1.6)),
            ((94.9, 1.1), (95.3, 1.2)),
        ],
        "splice.csv": [
            ((94.0, 0.9), (94.0, 0.9)),
            ((94.0, 1.6), (94.1, 1.1)),
            ((95.3, 1.2), (95.6, 1.1)),
            ((93.3, 0.9), (95.5, 1.8)),
        ],
    }
    cells = []
    for dataset, rows in table.items():
        for k, ((m0, s0), (m1, s1)) in enumerate(rows):
            cells.append(Cell("000", "Table 2", dataset, f"KDB-orig k={k}", "kdb", (("k", k),), m0, s0, SAHAMI))
            cells.append(
                Cell("000", "Table 2", dataset, f"KDB-θ k={k}", "kdb", (("k", k), ("theta", THETA)), m1, s1, SAHAMI)
            )
    return cells


def _mihaljevic() -> list[Cell]:
    names = ("ASB", "STAN", "FSS", "BSEJ", "FFSS", "NB", "TAN")
    algos = ("asb", "stan", "fss", "bsej", "ffss", "nb", "tan")
    table = {  # Table 3, the data sets we have
        "balance-scale.csv": "72.9±2.5 73.2±2.9 73.6±2.2 72.8±2.3 73.3±2.3 73.3±2.3 73.2±2.9",
        "car.csv": "93.3±1.6 93.5±1.5 70.0±0.1 90.0±1.8 85.1±1.7 85.3±1.4 94.1±1.6",
        "kr-vs-kp.csv": "94.1±1.1 92.6±0.8 94.1±1.0 92.2±1.1 87.8±1.4 87.8±1.4 92.4±0.9",
        "lymphography.csv": "85.4±6.1 82.7±5.6 78.4±7.3 85.0±6.5 82.7±7.1 84.6±6.2 83.4±6.0",
        "promoters.csv": "89.8±6.4 90.5±5.0 84±11.2 89.8±6.4 90.5±5.0 91.7±6.2 48.7±1.2",
        "splice.csv": "94.9±0.7 95.0±0.8 93.5±0.8 95.5±0.8 95.4±0.9 95.5±0.8 52.5±0.3",
        "primary-tumor.csv": "46.5±9.4 21.3±2.0 42.5±7.7 46.5±9.4 21.3±2.0 48.3±9.3 41.6±8.0",
        "tic-tac-toe.csv": "75.3±3.2 74.8±2.9 69.6±3.4 71.7±3.7 70.4±3.9 70.4±3.8 75.8±2.9",
        "breast-cancer-wisconsin.csv": "97.1±1.1 97.1±1.1 96.9±1.4 97.5±1.0 97.5±1.0 97.5±1.0 97.1±1.1",
        "dermatology.csv": "98.2±1.5 98.0±1.6 95.1±3.4 98.2±1.5 98.0±1.6 98.0±1.6 97.1±1.7",
        "ecoli.csv": "85.7±3.4 85.7±3.4 83.4±2.8 85.7±3.4 85.7±3.4 85.7±3.4 84.5±3.2",
        "wine.csv": "98.7±1.6 98.7±1.6 95.4±2.9 98.9±1.4 98.9±1.4 98.9±1.4 96.9±2.6",
    }
    cells = []
    for dataset, text in table.items():
        for name, algo, figure in zip(names, algos, text.split()):
            mean, sd = (float(v) for v in figure.split("±"))
            cells.append(Cell("003", "Table 3", dataset, name, algo, (), mean, sd, MIHALJEVIC))
    return cells


def _singh() -> list[Cell]:
    rows = [  # Tables 2 and 3
        ("Naive-ALL", "nb", (), {"chess": (86.71, 1.65), "splice": (95.41, 0.69), "mushroom": (92.87, 0.51)}),
        ("Naive-AS", "fss", (), {"chess": (93.19, 1.42), "splice": (94.56, 0.63), "mushroom": (98.30, 0.36)}),
        ("K2-AS", "k2-as", (), {"chess": (94.09, 0.34), "splice": (94.94, 0.60), "mushroom": (98.51, 0.23)}),
        ("CB", "cb", (), {"chess": (94.66, 1.07), "splice": (96.35, 0.52), "mushroom": (99.64, 0.31)}),
        (
            "CIG-AS",
            "info-as",
            (("metric", "cig"),),
            {"chess": (96.13, 1.00), "splice": (94.58, 0.63), "mushroom": (99.33, 0.39)},
        ),
        (
            "CGR-AS",
            "info-as",
            (("metric", "cgr"),),
            {"chess": (96.08, 0.89), "splice": (95.03, 0.54), "mushroom": (99.16, 0.53)},
        ),
        (
            "CDC-AS",
            "info-as",
            (("metric", "cdc"),),
            {"chess": (96.26, 0.84), "splice": (95.02, 0.56), "mushroom": (99.20, 0.55)},
        ),
    ]
    files = {
        "chess": ("kr-vs-kp.csv", SINGH_CHESS),
        "splice": ("splice.csv", SINGH_SPLICE),
        "mushroom": ("mushroom.csv", SINGH_MUSHROOM),
    }
    cells = []
    for label, algo, params, figures in rows:
        for key, (mean, sd) in figures.items():
            dataset, protocol = files[key]
            cells.append(Cell("002", "Tables 2–3", dataset, label, algo, params, mean, sd, protocol))
    return cells


def _zhang() -> list[Cell]:
    """Table 2: of Zhang's twelve data sets only dermatology is ours (his ecoli and hepatitis
    figures, 96 % and 70 %, are other versions of those sets: see the notes)."""
    return [
        Cell("004", "Table 2", "dermatology.csv", label, algo, (), 97.7, 0.17, ZHANG)
        for label, algo in (("ChowLiu", "tan"), ("ddr-ChowLiu", "tan-ddr"))
    ]


def _ours() -> list[Cell]:
    nominal = [
        "kr-vs-kp.csv",
        "splice.csv",
        "mushroom.csv",
        "car.csv",
        "tic-tac-toe.csv",
        "nursery.csv",
        "promoters.csv",
        "primary-tumor.csv",
        "lymphography.csv",
        "zoo.csv",
        "led-display.csv",
        "led7.csv",
        "corral.csv",
        "balance-scale.csv",
        "breast-cancer-wisconsin.csv",
        "hayes-roth-train.csv",
        "wine.csv",
        "ecoli.csv",
        "hepatitis.csv",
        "dermatology.csv",
        "letter.csv",
        "adult-train.csv",
    ]
    learners = [
        ("NB", "nb", ()),
        ("TAN", "tan", ()),
        ("RTAN", "rtan", ()),
        ("KDB k=2", "kdb", (("k", 2),)),
        ("FKDB k=2", "fkdb", (("k", 2),)),
        ("AODE", "aode", ()),
    ]
    return [
        Cell("001", "—", d, label, algo, params, None, None, OURS) for d in nominal for label, algo, params in learners
    ]


PAPERS = {"sahami": _sahami, "mihaljevic": _mihaljevic, "singh": _singh, "zhang": _zhang, "ours": _ours}
TITLES = {
    "000": "Sahami (1996), Learning Limited Dependence Bayesian Classifiers — KDB and KDB-θ",
    "003": "Mihaljevic, Larrañaga & Bielza (2013), Augmented Semi-naive Bayes Classifier",
    "002": "Singh & Provan (1995), Efficient Learning of Selective Bayesian Network Classifiers",
    "004": "Zhang (2005), Exploring Conditions for the Optimality of Naive Bayes — ChowLiu and ddr-ChowLiu",
    "001": "Our figures for the learners paper 001 compares (NB, TAN, RTAN, KDB, FKDB) and AODE",
}
_BSEJ = (
    "ours joins far more than the paper's BSEJ, which it says stayed close to NB here. Not explained: "
    "requiring a 1-point improvement per step (bnclassify's epsilon) or Laplace-estimating each group's joint "
    "table instead of the clique's chain both leave ours high (tests/trainer/test_semi_naive.py replays every "
    "step as the best strict improvement); the paper's implementation (bayesClass) may differ in the CV it "
    "scores candidates with. ASB builds on BSEJ, so it inherits the gap."
)
NOTES: dict[tuple[str, str, str], str] = {  # (paper, dataset, label) -> why ours differs
    ("000", "corral.csv", "KDB-orig k=1"): "our corral is regenerated by generate_synthetic.py (see MANIFEST.md), "
    "not Sahami's sample; one fold of ten misses a few rows (sd 5.2), well inside the spread of the other k.",
    ("000", "splice.csv", "KDB-orig k=2"): "Sahami's DNA is the 180-Boolean encoding of the same sequences; ours "
    "has 60 nominal positions of 4-8 letters, so a k=2 family has up to 8^3·3 configurations over 2,900 rows: "
    "the sparse CPTs hurt plain KDB (KDB-θ, which drops weak arcs, stays within the spread), as the paper "
    "itself observes when k grows.",
    ("000", "splice.csv", "KDB-orig k=3"): "as for k=2, more so.",
    ("003", "kr-vs-kp.csv", "BSEJ"): _BSEJ,
    ("003", "kr-vs-kp.csv", "ASB"): _BSEJ,
    ("003", "car.csv", "BSEJ"): _BSEJ,
    ("003", "tic-tac-toe.csv", "BSEJ"): _BSEJ,
    ("003", "tic-tac-toe.csv", "ASB"): _BSEJ,
    ("003", "splice.csv", "ASB"): "ASB adds 51 forest arcs between BSEJ's 53 groups here, 28 touching a joined "
    "group, whose CPTs then have up to about N/5 cells: our guess is that these sparse tables cost the two "
    "points; not confirmed.",
    ("003", "promoters.csv", "TAN"): "the paper's TAN is at the majority-class rate (promoters 50 %, splice 52 %): "
    "that run evidently predicted one class. Ours, and every other algorithm in the row, learn normally.",
    ("003", "splice.csv", "TAN"): "see promoters, TAN.",
}
NOTES["004", "dermatology.csv", "ChowLiu"] = (
    "Zhang's ± is the spread of twenty repeated 5-fold means (ours: 96.6 ± 0.5 that way), far narrower than the "
    "fold spread shown here; ours is 1.1 points under his ChowLiu and equal to his ddr-ChowLiu (97.6 ± 0.5). He "
    "does not say how ties among equal-weight edges or the root are broken, which moves a TAN on 34 features with "
    "few values each."
)


# ------------------------------------------------------------------ running


def _load(dataset: str, protocol: Protocol) -> EncodedData:
    """The data set as the protocol wants it: typed as the source ARFF declared it when the
    paper discretised first (so balance-scale's 1-5 scales are numeric, as in paper 003),
    complete rows only if asked, and then discretised on all rows or on each training fold."""
    path = str(DATASETS / dataset)
    preprocessing = Preprocessing(numeric=_declared_numeric(dataset)) if protocol.discretize_first else Preprocessing()
    columns = columns_of(read_table(path), None, preprocessing)
    if protocol.complete_rows:
        columns = columns.subset(columns.complete())
    data = prepare(columns, preprocessing)
    return replace(data, columns=None) if protocol.discretize_first else data  # no columns: folds keep these cuts


def _declared_numeric(dataset: str) -> tuple[str, ...]:
    schema = json.loads((DATASETS / "schema.json").read_text())[dataset]
    return tuple(c["name"] for c in schema["columns"][:-1] if c["type"] == "numeric")


def _random_splits(data: EncodedData, protocol: Protocol, cells: list[Cell]) -> dict[Cell, list[float]]:
    """Paper 002: fixed-size random train/test splits, the same splits for every algorithm."""
    rng = np.random.default_rng(0)
    train_size, test_size = protocol.train_size, protocol.test_size
    assert train_size is not None and test_size is not None, "not a random-splits protocol"
    scores: dict[Cell, list[float]] = {c: [] for c in cells}
    with stage(f"{cells[0].dataset}: random splits", protocol.splits * len(cells), "split") as bar:
        for _ in range(protocol.splits):
            perm = rng.permutation(data.n_rows)
            train = data.subset(perm[:train_size])
            test = data.subset(perm[train_size : train_size + test_size])
            for cell in cells:
                bar.note(cell.label)
                scores[cell].append(holdout(cell.algo, train, test, **dict(cell.params)).accuracy)
                bar.update()
    return scores


def run_cells(cells: list[Cell]) -> dict[Cell, list[float]]:
    """Accuracy (0..1) per fold or split for each cell; cells sharing a data set and protocol share folds."""
    groups: dict[tuple[str, Protocol], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.dataset, cell.protocol), []).append(cell)
    out: dict[Cell, list[float]] = {}
    for (dataset, protocol), group in groups.items():
        data = _load(dataset, protocol)
        t0 = time.perf_counter()
        try:
            if protocol.train_size:
                out.update(_random_splits(data, protocol, group))
            else:
                results = cross_validate_many(
                    [(c.algo, dict(c.params)) for c in group],
                    data,
                    dataset=dataset,
                    folds=protocol.folds,
                    repeats=protocol.repeats,
                    seed=0,
                )
                out.update({c: list(r.fold_accuracies) for c, r in zip(group, results)})
        except InvalidInput as exc:
            print(f"{dataset}: skipped: {exc.message}", file=sys.stderr)
        print(
            f"{dataset} ({protocol.describe()}): {len(group)} cells in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
    return out


def _key(cell: Cell) -> str:
    return json.dumps([cell.paper, cell.dataset, cell.label, cell.algo, cell.params, cell.protocol.describe()])


# ------------------------------------------------------------------ report


def _flag(cell: Cell, ours: float) -> str:
    if cell.mean is None:
        return ""
    spread = max(cell.sd or 0.0, 0.5)
    return "**differs**" if abs(ours - cell.mean) > 2 * spread else "ok"


def write_report(cells: list[Cell], cache: dict[str, list[float]]) -> str:
    lines = [
        "# Accuracy: the papers' figures beside ours",
        "",
        "Written by `python bench/reproduce_papers.py`; accuracies in %, mean ± sd over the folds or splits of "
        "the paper's protocol (ours on the same protocol, seed 0). A cell is flagged **differs** when ours is more "
        "than two of the paper's standard deviations (at least 0.5 points) away; NOTES below each table say why.",
        "Numeric columns are discretised by MDL (Fayyad & Irani), on each training fold unless the protocol "
        "says the paper discretised all rows first (papers 003 and 004 did; there the columns the source ARFF "
        "declares numeric are the numeric ones, e.g. balance-scale's 1-5 scales; elsewhere our typing rule "
        "reads whole numbers with at most 10 values as nominal codes).",
        'Of paper 004\'s twelve data sets only dermatology is ours: its "ecoli" (96 % for ChowLiu) and '
        '"hepatitis" (70 %) are other versions than the UCI sets here (ours: about 82 % and 85 %), and its '
        '"breast" and "cars" have 10 and 2 classes.',
        "",
    ]
    compared = [c for c in cells if c.mean is not None and _key(c) in cache]
    flagged = [c for c in compared if _flag(c, 100 * float(np.mean(cache[_key(c)]))) != "ok"]
    lines += [
        f"**{len(compared)} paper figures compared: {len(compared) - len(flagged)} within two standard "
        f"deviations, {len(flagged)} flagged, each explained in the notes.**",
        "",
    ]
    for paper in ("000", "003", "002", "004", "001"):
        chosen = [c for c in cells if c.paper == paper and _key(c) in cache]
        if not chosen:
            continue
        lines += [f"## {TITLES[paper]}", "", f"Protocol: {chosen[0].protocol.describe()}.", ""]
        if paper == "001":
            lines += [
                "| data set | " + " | ".join(dict.fromkeys(c.label for c in chosen)) + " |",
                "|---|" + "---|" * len(dict.fromkeys(c.label for c in chosen)),
            ]
            for dataset in dict.fromkeys(c.dataset for c in chosen):
                row = [
                    f"{100 * np.mean(cache[_key(c)]):.1f} ± {100 * np.std(cache[_key(c)], ddof=1):.1f}"
                    for c in chosen
                    if c.dataset == dataset
                ]
                lines.append(f"| {dataset.removesuffix('.csv')} | " + " | ".join(row) + " |")
            lines.append("")
            continue
        lines += ["| data set | algorithm | paper | ours | |", "|---|---|---|---|---|"]
        notes: dict[str, list[str]] = {}
        for c in chosen:
            scores = np.array(cache[_key(c)]) * 100
            ours, sd = float(scores.mean()), float(scores.std(ddof=1)) if scores.size > 1 else 0.0
            flag = _flag(c, ours)
            lines.append(
                f"| {c.dataset.removesuffix('.csv')} | {c.label} | {c.mean:.1f} ± {c.sd:.1f} | "
                f"{ours:.1f} ± {sd:.1f} | {flag} |"
            )
            note = NOTES.get((c.paper, c.dataset, c.label))
            if note:
                notes.setdefault(note, []).append(f"{c.dataset.removesuffix('.csv')} {c.label}")
        lines += [""] + (
            ["Notes:", ""] + [f"- {', '.join(cells)}: {note}" for note, cells in notes.items()] + [""] if notes else []
        )
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PAPERS), help="comma-separated: " + ", ".join(PAPERS))
    parser.add_argument("--fresh", action="store_true", help="ignore docs/accuracy.json")
    args = parser.parse_args()
    if not DATASETS.exists():
        print(f"{DATASETS} is not there", file=sys.stderr)
        return 1
    cells = [c for name in PAPERS for c in PAPERS[name]()]
    wanted = [c for name in args.only.split(",") for c in PAPERS[name.strip()]()]
    cache = {} if args.fresh or not CACHE.exists() else json.loads(CACHE.read_text())
    todo = [c for c in wanted if _key(c) not in cache]
    DOCS.mkdir(exist_ok=True)
    by_dataset: dict[str, list[Cell]] = {}
    for c in todo:
        by_dataset.setdefault(c.dataset, []).append(c)
    for group in by_dataset.values():  # write after each data set: a long run keeps what it did
        with reporting(terminal_bars()):
            done = run_cells(group)
        for cell, scores in done.items():
            cache[_key(cell)] = scores
        CACHE.write_text(json.dumps(cache, indent=1) + "\n")
        write_section(DOCS / "accuracy.md", SECTION, write_report(cells, cache))
    write_section(DOCS / "accuracy.md", SECTION, write_report(cells, cache))
    print(f"wrote {DOCS / 'accuracy.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
