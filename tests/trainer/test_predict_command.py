"""`trainer predict`: batch scoring of a file with a model version from a real SQLite store,
checked against the compiled model the server uses and against a real server."""

from __future__ import annotations

import csv
import io
import os

import grpc
import numpy as np
import pyarrow.parquet as pq
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import Preprocessing, encode_table
from bnserve.trainer.io import read_table
from tests.in_process_server import running_app
from tests.trainer.conftest import run

HEADER = ["id", "colour", "size", "weight", "label"]


def rows(n: int, seed: int, missing: str = "?") -> list[list[str]]:
    """Rows whose label depends on colour and weight; some values missing (``missing`` or
    empty), some with spaces around them (trimmed, as in training)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        colour = rng.choice(["red", "green", "blue"])
        weight = rng.normal(10 if colour == "red" else 14, 2)
        label = "yes" if (weight > 12) != (rng.random() < 0.1) else "no"
        cells = [f"r{i}", str(colour), str(rng.choice(["S", "M", "L"])), f"{weight:.3f}", label]
        if rng.random() < 0.15:
            cells[1 + int(rng.integers(3))] = missing if rng.random() < 0.5 else ""
        if rng.random() < 0.1:
            cells[2] = f" {cells[2]} "
        out.append(cells)
    return out


def write_csv(path, header, body) -> str:
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, *body])
    return str(path)


@pytest.fixture
def trained(capsys, tmp_path, store):
    """A kdb model (a numeric column discretised) trained through the CLI, and the data to score."""
    train = write_csv(tmp_path / "train.csv", HEADER, rows(400, seed=1))
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "kdb",
        "--k",
        "1",
        "--data",
        train,
        "--class",
        "label",
        "--ignore",
        "id",
        "--name",
        "m",
        "--store",
        store,
    )
    assert code == 0, err
    with ModelStore(store) as models:
        model = models.load("m").model
    scored = write_csv(tmp_path / "new.csv", HEADER, rows(250, seed=2))
    return model, scored


def expected_of(model, source: str, preprocessing: Preprocessing | None = None):
    """The compiled model's probabilities of every row of the file, its class codes and its codes."""
    table = (preprocessing or Preprocessing()).cleaned(read_table(source))
    X, y = encode_table(table, model.variables, class_optional=True)
    return compile_model(model).predict_proba(X), y, X


def read_output(text: str) -> tuple[list[str], list[list[str]], np.ndarray]:
    header, *body = list(csv.reader(io.StringIO(text)))
    first = header.index("predicted") + 1
    return header, body, np.array([[float(v) for v in row[first:]] for row in body])


def test_the_output_is_the_compiled_models_probabilities_with_the_kept_columns(capsys, trained, store, tmp_path):
    model, scored = trained
    expected, y, X = expected_of(model, scored)
    assert (X < 0).any(axis=1).sum() > 10  # missing values, marginalised
    code, out, err = run(capsys, "predict", "m", "--data", scored, "--keep", "id", "label", "--store", store)
    assert code == 0, err
    header, body, proba = read_output(out)
    assert header == ["id", "label", "predicted", "p_no", "p_yes"]
    assert np.array_equal(proba, expected)  # the same floats, through their CSV text
    assert [r[0] for r in body] == [f"r{i}" for i in range(250)]
    assert [r[2] for r in body] == [("no", "yes")[i] for i in expected.argmax(axis=1)]
    correct = int(np.sum(expected.argmax(axis=1) == y))
    with_missing = int((X < 0).any(axis=1).sum())
    assert err.splitlines() == [
        f"trainer: scored 250 rows ({with_missing} with missing values) with m version 1",
        f"trainer: accuracy {correct / 250:.4f} ({correct} of the 250 rows with a class)",
    ]


def test_a_file_without_the_class_column_is_scored_alike(capsys, trained, store, tmp_path):
    model, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    unlabelled = write_csv(tmp_path / "unlabelled.csv", HEADER[:-1], [r[:-1] for r in body])
    code, out, err = run(capsys, "predict", "m:1", "--data", unlabelled, "--keep", "id", "--store", store)
    assert code == 0, err
    header, _, proba = read_output(out)
    assert header == ["id", "predicted", "p_no", "p_yes"]
    assert np.array_equal(proba, expected_of(model, scored)[0])
    assert "accuracy" not in err and "scored 250 rows" in err


def test_rows_with_an_empty_class_are_scored_but_not_counted_in_the_accuracy(capsys, trained, store, tmp_path):
    model, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    for r in body[:50]:
        r[-1] = ""
    partly = write_csv(tmp_path / "partly.csv", HEADER, body)
    expected, y, _ = expected_of(model, partly)
    correct = int(np.sum(expected.argmax(axis=1)[50:] == y[50:]))
    code, out, err = run(capsys, "predict", "m", "--data", partly, "--store", store)
    assert code == 0 and len(read_output(out)[1]) == 250
    assert f"accuracy {correct / 200:.4f} ({correct} of the 200 rows with a class)" in err


def test_csv_and_parquet_outputs_hold_the_same_figures_in_chunks_or_whole(capsys, trained, store, tmp_path):
    model, scored = trained
    outputs = {}
    for name, chunk in (("whole", "100000"), ("chunked", "7")):
        for ext in ("csv", "parquet"):
            path = tmp_path / f"{name}.{ext}"
            code, out, err = run(
                capsys,
                "predict",
                "m",
                "--data",
                scored,
                "--out",
                str(path),
                "--keep",
                "id",
                "--chunk-rows",
                chunk,
                "--store",
                store,
            )
            assert (code, out) == (0, ""), err
            assert f"into {path}" in err
            outputs[name, ext] = path
    assert outputs["whole", "csv"].read_bytes() == outputs["chunked", "csv"].read_bytes()
    expected = expected_of(model, scored)[0]
    assert np.array_equal(read_output(outputs["whole", "csv"].read_text())[2], expected)
    for name in ("whole", "chunked"):
        table = pq.read_table(outputs[name, "parquet"])
        assert table.column_names == ["id", "predicted", "p_no", "p_yes"]
        assert str(table.schema.field("p_yes").type) == "double"
        assert np.array_equal(np.column_stack([table["p_no"].to_numpy(), table["p_yes"].to_numpy()]), expected)
        assert table["id"].to_pylist() == [f"r{i}" for i in range(250)]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_a_parquet_input_is_read_in_chunks_like_the_csv(capsys, trained, store, tmp_path):
    import pyarrow as pa

    model, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    weights = [float(r[3]) if r[3] not in ("", "?") else None for r in body]
    columns = {h: [r[i].strip() if r[i].strip() not in ("?",) else "" for r in body] for i, h in enumerate(HEADER)}
    columns["weight"] = weights
    path = tmp_path / "new.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=60)
    code, out, err = run(capsys, "predict", "m", "--data", str(path), "--chunk-rows", "25", "--store", store)
    assert code == 0, err
    # weights of 3 decimals are the same numbers in both files
    assert np.array_equal(read_output(out)[2], expected_of(model, scored)[0])


def test_a_parquet_column_the_model_does_not_use_is_ignored_whatever_its_type(capsys, trained, store, tmp_path):
    """Other columns are ignored (docs/training.md): one of a type bnserve does not read (a
    list, a struct) is not decoded, unless kept; a feature of such a type is still refused by name."""
    import pyarrow as pa

    model, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    columns = {h: [r[i].strip() if r[i].strip() != "?" else "" for r in body] for i, h in enumerate(HEADER)}
    columns["weight"] = [float(w) if w else None for w in columns["weight"]]
    extra = {
        " tags": pa.array([[i, i + 1] for i in range(len(body))], pa.list_(pa.int64())),
        "where": pa.array([{"x": i} for i in range(len(body))]),
    }
    path = tmp_path / "new.parquet"
    pq.write_table(pa.table({**columns, **extra}), path, row_group_size=60)
    code, out, err = run(capsys, "predict", "m", "--data", str(path), "--chunk-rows", "25", "--store", store)
    assert code == 0, err
    assert np.array_equal(read_output(out)[2], expected_of(model, scored)[0])
    code, out, err = run(capsys, "predict", "m", "--data", str(path), "--keep", "tags", "--store", store)
    assert (code, out) == (1, "")
    assert f"{path}: column ' tags': Arrow type list<element: int64> is not read" in err
    columns["colour"] = [[len(c)] for c in columns["colour"]]
    pq.write_table(pa.table({**columns, **extra}), path)
    code, out, err = run(capsys, "predict", "m", "--data", str(path), "--store", store)
    assert (code, out) == (1, "")
    assert f"{path}: column 'colour': Arrow type list<element: int64> is not read" in err


def test_texts_are_read_as_the_model_was_trained_unless_told(capsys, tmp_path, store):
    train = write_csv(tmp_path / "train.csv", HEADER, rows(300, seed=3, missing="NA"))
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        train,
        "--class",
        "label",
        "--ignore",
        "id",
        "--na-values",
        "NA",
        "--name",
        "na",
        "--store",
        store,
    )
    assert code == 0, err
    with ModelStore(store) as models:
        model = models.load("na").model
    scored = write_csv(tmp_path / "new.csv", HEADER, rows(100, seed=4, missing="NA"))
    code, out, err = run(capsys, "predict", "na", "--data", scored, "--store", store)
    assert code == 0, err  # "NA" is missing, as in training: the metadata says so
    assert np.array_equal(read_output(out)[2], expected_of(model, scored, Preprocessing(na_values=("NA",)))[0])
    code, _, err = run(capsys, "predict", "na", "--data", scored, "--na-values", "", "--store", store)
    assert code == 1 and "unknown value 'NA'" in err


def test_an_unknown_value_is_an_error_naming_it_and_nothing_is_left_behind(capsys, trained, store, tmp_path):
    """With --unknown error an unseen label is refused; a text that is no number in a numeric
    column is refused under either policy."""
    _, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    body[200][1] = "purple"
    bad = write_csv(tmp_path / "bad.csv", HEADER, body)
    out = tmp_path / "out" / "scores.csv"
    out.parent.mkdir()
    code, stdout, err = run(
        capsys,
        "predict",
        "m",
        "--data",
        bad,
        "--out",
        str(out),
        "--chunk-rows",
        "50",
        "--unknown",
        "error",
        "--store",
        store,
    )
    assert code == 1 and stdout == ""
    assert err == f"trainer: error: {bad}: line 202: column 'colour': unknown value 'purple'; known: blue, green, red\n"
    assert list(out.parent.iterdir()) == []
    body[200][1] = "red"
    body[100][3] = "heavy"
    bad = write_csv(tmp_path / "bad.csv", HEADER, body)
    code, _, err = run(capsys, "predict", "m", "--data", bad, "--out", str(out), "--store", store)
    assert code == 1 and "line 102: column 'weight': unknown value 'heavy'; a number" in err
    assert list(out.parent.iterdir()) == []


def test_an_existing_output_stays_as_it_was_when_scoring_fails(capsys, trained, store, tmp_path):
    _, scored = trained
    out = tmp_path / "scores.parquet"
    out.write_bytes(b"before")
    body = list(csv.reader(open(scored)))[1:]
    body[-1][2] = "XL"
    bad = write_csv(tmp_path / "bad.csv", HEADER, body)
    code, _, err = run(
        capsys,
        "predict",
        "m",
        "--data",
        bad,
        "--out",
        str(out),
        "--chunk-rows",
        "10",
        "--unknown",
        "error",
        "--store",
        store,
    )
    assert code == 1 and "'XL'" in err
    assert out.read_bytes() == b"before"
    assert sorted(os.listdir(tmp_path)) == sorted(["bad.csv", "new.csv", "scores.parquet", "train.csv", "models.db"])


def test_refusals(capsys, trained, store, tmp_path):
    _, scored = trained
    code, _, err = run(capsys, "predict", "m", "--data", scored, "--out", str(tmp_path / "x.json"), "--store", store)
    assert code == 2 and "--out" in err and ".csv or .parquet" in err
    assert not (tmp_path / "x.json").exists()
    code, _, err = run(capsys, "predict", "m", "--data", scored, "--keep", "ident", "--store", store)
    assert code == 1 and "no column(s) 'ident' to keep" in err
    body = list(csv.reader(open(scored)))[1:]
    no_size = write_csv(tmp_path / "no_size.csv", ["id", "colour", "weight"], [[r[0], r[1], r[3]] for r in body])
    code, _, err = run(capsys, "predict", "m", "--data", no_size, "--store", store)
    assert code == 1 and "missing column(s) 'size'" in err
    clash = write_csv(tmp_path / "clash.csv", [*HEADER, "predicted"], [[*r, "x"] for r in body])
    code, _, err = run(capsys, "predict", "m", "--data", clash, "--keep", "predicted", "--store", store)
    assert code == 1 and "'predicted' named twice" in err
    code, _, err = run(capsys, "predict", "m@production", "--data", scored, "--store", store)
    assert code == 1 and "production" in err
    unseen = write_csv(tmp_path / "unseen.csv", HEADER, [*body[:3], [*body[3][:-1], "maybe"]])
    code, _, err = run(capsys, "predict", "m", "--data", unseen, "--unknown", "error", "--store", store)
    assert code == 1 and "line 5: column 'label': unknown value 'maybe'; known: no, yes" in err
    code, _, err = run(capsys, "predict", "m", "--data", unseen, "--unknown", "never", "--store", store)
    assert code == 2 and "--unknown: invalid choice: 'never'" in err
    (tmp_path / "a_folder.csv").mkdir()
    code, _, err = run(
        capsys, "predict", "m", "--data", scored, "--out", str(tmp_path / "a_folder.csv"), "--store", store
    )
    assert code == 1 and f"--out {tmp_path / 'a_folder.csv'}: not a regular file (a directory)" in err
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_the_output_equals_what_the_server_answers(capsys, trained, store, tmp_path):
    model, scored = trained
    code, out, err = run(capsys, "predict", "m", "--data", scored, "--store", store)
    assert code == 0, err
    _, body, proba = read_output(out)
    table = Preprocessing().cleaned(read_table(scored))
    features = [v.name for v in model.features]
    texts = {name: table.columns[table.header.index(name)].texts() for name in features}
    instances = [pb.Instance(values={n: texts[n][r] for n in features if texts[n][r]}) for r in range(table.n_rows)]
    (tmp_path / "served").mkdir()
    with (
        running_app(tmp_path / "served", {"m": model}) as app,
        grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        reply = predictor_pb2_grpc.PredictorStub(channel).Predict(pb.PredictRequest(model="m", instances=instances))
    assert np.array_equal(np.array([p.probabilities for p in reply.predictions]), proba)
    assert [p.label for p in reply.predictions] == [r[0] for r in body]


def test_delimiter_and_format_flags(capsys, trained, store, tmp_path):
    model, scored = trained
    body = list(csv.reader(open(scored)))[1:]
    semicolons = tmp_path / "new.txt"
    with open(semicolons, "w", newline="") as f:
        csv.writer(f, delimiter=";").writerows([HEADER, *body])
    code, out, err = run(
        capsys,
        "predict",
        "m",
        "--data",
        str(semicolons),
        "--format",
        "csv",
        "--delimiter",
        ";",
        "--chunk-rows",
        "40",
        "--store",
        store,
    )
    assert code == 0, err
    assert np.array_equal(read_output(out)[2], expected_of(model, scored)[0])
    path = tmp_path / "scores.parquet"
    assert run(capsys, "predict", "m", "--data", scored, "--out", str(path), "--store", store)[0] == 0
    code, _, err = run(capsys, "predict", "m", "--data", str(path), "--delimiter", ";", "--store", store)
    assert code == 1 and "a delimiter applies to CSV and TSV files, not parquet" in err


def test_a_malformed_row_in_the_middle_of_the_file_is_an_error_naming_its_line(capsys, trained, store, tmp_path):
    """The file is read a chunk ahead on a thread (read_ahead): a row the reader refuses after
    chunks already scored stops the command with the reader's error, and no output is left."""
    _, scored = trained
    lines = open(scored).read().splitlines()
    lines[181] += ",extra"  # data row 181, on line 182
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out" / "scores.csv"
    out.parent.mkdir()
    code, stdout, err = run(
        capsys, "predict", "m", "--data", str(bad), "--out", str(out), "--chunk-rows", "20", "--store", store
    )
    assert code == 1 and stdout == ""
    assert err == f"trainer: error: {bad}: line 182: row has 6 fields, the header has 5\n"
    assert list(out.parent.iterdir()) == []


def test_reading_ahead_yields_every_item_in_order_and_raises_an_error_in_its_place():
    """Items in their order; an error raised producing one is raised where it would have been,
    after the items before it; the producer is closed when the consumer stops early (leaving
    the ``with``), and its thread ends."""
    import threading

    from bnserve.trainer.scoring import ReadAhead

    assert list(ReadAhead(iter(range(50)))) == list(range(50))
    closed = threading.Event()

    def failing():
        try:
            yield from range(5)
            raise ValueError("line 7: column 'c': bad")
        finally:
            closed.set()

    got = []
    with pytest.raises(ValueError, match="line 7: column 'c': bad"):
        for item in ReadAhead(failing()):
            got.append(item)
    assert got == list(range(5)) and closed.is_set()

    closed.clear()

    def endless():
        try:
            yield from iter(int, 1)  # zeros, forever
        finally:
            closed.set()

    with pytest.raises(KeyError), ReadAhead(endless()) as items:
        for _ in items:
            raise KeyError("the consumer's own error")
    assert closed.is_set() and not any(t.name == "reading" for t in threading.enumerate())
