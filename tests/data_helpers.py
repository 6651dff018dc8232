"""Data for trainer tests: the benchmark data sets (a few shipped in ``tests/data``, the rest
in ``../shared/datasets``), a generated one, and small hand-made ones.

Import as ``from tests.data_helpers import dataset, make, accuracy``.

``dataset_path`` is the one place that locates a data set and decides what happens when it
is not there: ``tests/data/NAME.csv.gz`` (byte for byte the shared file, gzipped; see
tests/data/README.md) when shipped, else ``../shared/datasets/NAME.csv``. Only tests that
compare with a paper's table or another tool's recorded figures on an unshipped data set
reach the shared folder; where it is absent they are skipped, all with one reason naming
it, unless ``BNSERVE_REQUIRE_SHARED=1`` (CI), which makes them fail.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from bnserve.store.model import CLASS, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData, load

SHIPPED = Path(__file__).resolve().parent / "data"
DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
REQUIRE_SHARED_ENV = "BNSERVE_REQUIRE_SHARED"


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


def shared_datasets() -> Path:
    """``../shared/datasets``; where it is absent the test is skipped (one reason for every
    such test), or failed under ``BNSERVE_REQUIRE_SHARED=1``."""
    if not DATASETS.is_dir():
        if os.environ.get(REQUIRE_SHARED_ENV) == "1":
            pytest.fail(f"{DATASETS} is absent, and {REQUIRE_SHARED_ENV}=1 requires it", pytrace=False)
        pytest.skip(f"{DATASETS} is absent (the shared benchmark data sets, for comparisons with published figures)")
    return DATASETS


def dataset_path(name: str) -> Path:
    """The data set NAME: ``tests/data/NAME.csv.gz`` when shipped, else
    ``../shared/datasets/NAME.csv`` (see ``shared_datasets`` for when that folder is absent)."""
    shipped = SHIPPED / f"{name}.csv.gz"
    if shipped.exists():
        return shipped
    path = shared_datasets() / f"{name}.csv"
    if not path.exists():
        pytest.fail(f"{path} is absent, though its folder is there", pytrace=False)
    return path


def dataset_text(name: str) -> str:
    """The CSV text of the data set NAME (gunzipped when shipped)."""
    path = dataset_path(name)
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")


def dataset_rows(name: str) -> list[dict[str, str]]:
    """The rows of the data set NAME as text, by column name; an empty field is missing."""
    return list(csv.DictReader(io.StringIO(dataset_text(name), newline="")))


def _schema(name: str) -> dict:
    """NAME's entry of ``schema.json`` (column types and declared domains): from the shipped
    copy (tests/data/schema.json, the entries the tests need), else from the shared one."""
    shipped = json.loads((SHIPPED / "schema.json").read_text())
    if f"{name}.csv" in shipped:
        return shipped[f"{name}.csv"]
    return json.loads((shared_datasets() / "schema.json").read_text())[f"{name}.csv"]


def write_arff(name: str, out: Path) -> Path:
    """The data set NAME as an ARFF file at ``out``, typed as ``schema.json`` declares
    (the source ARFF's types), empty fields written as ``?``."""
    rows = list(csv.reader(io.StringIO(dataset_text(name), newline="")))[1:]
    schema = _schema(name)

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
    """The data set NAME (``dataset_path``), encoded (``load_options`` go to ``trainer.data.load``)."""
    return load(str(dataset_path(name)), **load_options)


# Seven-segment codes of the digits, segments s1..s7 in UCI LED-display order (top,
# upper-left, upper-right, middle, lower-left, lower-right, bottom).
LED_SEGMENTS = {
    0: (1, 1, 1, 0, 1, 1, 1),
    1: (0, 0, 1, 0, 0, 1, 0),
    2: (1, 0, 1, 1, 1, 0, 1),
    3: (1, 0, 1, 1, 0, 1, 1),
    4: (0, 1, 1, 1, 0, 1, 0),
    5: (1, 1, 0, 1, 0, 1, 1),
    6: (1, 1, 0, 1, 1, 1, 1),
    7: (1, 0, 1, 0, 0, 1, 0),
    8: (1, 1, 1, 1, 1, 1, 1),
    9: (1, 1, 1, 1, 0, 1, 1),
}


def write_led7(tmp_path: Path, rows: int = 3200, noise: float = 0.1, seed: int = 1) -> str:
    """The synthetic led7 data set as a CSV file in ``tmp_path``; its path. A digit drawn
    uniformly, its seven segments each flipped with probability ``noise``: the segments are
    independent given the class, so naive Bayes is the right model. The same draws as
    ``../shared/datasets/generate_synthetic.py`` (the defaults give its ``led7.csv`` byte
    for byte): ``random.Random(seed).random()`` only, stable across Python versions."""
    rnd = random.Random(seed)
    lines = [",".join([f"s{i}" for i in range(1, 8)] + ["class"])]
    for _ in range(rows):
        digit = min(int(rnd.random() * 10), 9)
        segments = [s ^ 1 if rnd.random() < noise else s for s in LED_SEGMENTS[digit]]
        lines.append(",".join(map(str, segments + [digit])))
    return write(tmp_path, "\n".join(lines) + "\n", "led7.csv")


def make(columns, cards, y, n_classes) -> EncodedData:
    """Hand-made data: features x0, x1, … with states "0", "1", …, class "class"."""
    variables = tuple(Variable(f"x{i}", tuple(map(str, range(c)))) for i, c in enumerate(cards))
    variables += (Variable("class", tuple(map(str, range(n_classes))), CLASS),)
    return EncodedData(variables, np.stack(columns, axis=1).astype(np.int32), np.asarray(y, np.int64), 0, "hand")


def accuracy(model, data: EncodedData) -> float:
    """Resubstitution accuracy of ``model`` on ``data`` through the compiled predictor."""
    return float(np.mean(np.argmax(compile_model(model).predict_proba(data.X), axis=1) == data.y))
