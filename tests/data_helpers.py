"""Data for trainer tests: the shared benchmark sets, and small hand-made ones.

Import as ``from tests.data_helpers import dataset, make, accuracy``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from bnserve.store.predictor import compile_model
from bnserve.store.model import CLASS, Variable
from bnserve.trainer.data import EncodedData, load

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def write(tmp_path: Path, text: str, name: str = "data.csv", bom: bool = False) -> str:
    """Write a hand-made data file (gzipped when ``name`` ends in .gz) and return its path."""
    path = tmp_path / name
    data = ("\ufeff" if bom else "") + text
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(data)
    else:
        path.write_text(data, encoding="utf-8", newline="")
    return str(path)


def dataset_path(name: str) -> Path:
    """``../shared/datasets/NAME.csv``; the test is skipped where the folder is absent."""
    path = DATASETS / f"{name}.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def write_arff(name: str, out: Path) -> Path:
    """The shared data set NAME as an ARFF file at ``out``, typed as ``schema.json`` declares
    (the source ARFF's types), empty fields written as ``?``."""
    import csv
    import json

    schema = json.loads((DATASETS / "schema.json").read_text())[f"{name}.csv"]
    with open(dataset_path(name), newline="") as f:
        rows = list(csv.reader(f))[1:]

    def quote(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    lines = [f"@relation {quote(name)}"]
    for j, column in enumerate(schema["columns"]):
        if column["type"] == "numeric":
            lines.append(f"@attribute {quote(column['name'])} numeric")
        else:
            labels = column.get("values") or sorted({r[j] for r in rows} - {""})
            lines.append(f"@attribute {quote(column['name'])} {{{','.join(map(quote, labels))}}}")
    lines.append("@data")
    lines += [",".join("?" if v == "" else quote(v) for v in r) for r in rows]
    out.write_text("\n".join(lines) + "\n")
    return out


def dataset(name: str, **load_options) -> EncodedData:
    """``../shared/datasets/NAME.csv``, encoded (``load_options`` go to ``trainer.data.load``)."""
    return load(str(dataset_path(name)), **load_options)


def make(columns, cards, y, n_classes) -> EncodedData:
    """Hand-made data: features x0, x1, … with states "0", "1", …, class "class"."""
    variables = tuple(Variable(f"x{i}", tuple(map(str, range(c)))) for i, c in enumerate(cards))
    variables += (Variable("class", tuple(map(str, range(n_classes))), CLASS),)
    return EncodedData(variables, np.stack(columns, axis=1).astype(np.int32), np.asarray(y, np.int64), 0, "hand")


def accuracy(model, data: EncodedData) -> float:
    """Resubstitution accuracy of ``model`` on ``data`` through the compiled predictor."""
    return float(np.mean(np.argmax(compile_model(model).predict_proba(data.X), axis=1) == data.y))
