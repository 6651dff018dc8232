"""Whole-number codes (issue 15): a nominal column of codes 3, 5, 7, 10 has its states in
that order, in memory and in chunks alike, and takes "10.0" for "10" at predict time, in
the trainer's test-file path as in the server."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.errors import InvalidInput
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.columns import state_order
from bnserve.trainer.data.encoded import load_with
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from tests.data_helpers import write
from tests.in_process_server import running_app
from tests.trainer.test_streaming import assert_same_model


def _codes_csv(rows: int = 240, seed: int = 0) -> str:
    """code (whole numbers 3, 5, 7, 10, read as codes), grade (text), class (2, 10: codes too)."""
    rng = np.random.default_rng(seed)
    lines = ["code,grade,class"]
    for _ in range(rows):
        c = int(rng.integers(0, 2))
        code = [3, 5, 7, 10][int(rng.integers(0, 2) + 2 * c) if rng.random() < 0.8 else int(rng.integers(0, 4))]
        grade = "" if rng.random() < 0.1 else ["a", "b", "B10"][int(rng.integers(0, 3))]
        lines.append(f"{code},{grade},{[2, 10][c]}")
    return "\n".join(lines) + "\n"


def test_state_order_is_by_number_for_whole_numbers_only():
    assert state_order(["10", "12", "5", "7", "", "5"]) == ("5", "7", "10", "12")
    assert state_order(["-3", "10", "0", "2"]) == ("-3", "0", "2", "10")
    for text_order in (["10", "5", "x"], ["10", "5", "5.5"], ["10", "05"], ["10", "+5"]):
        assert state_order(text_order) == tuple(sorted(text_order))


def test_whole_number_states_in_numeric_order_in_memory_and_in_chunks(tmp_path):
    path = write(tmp_path, _codes_csv())
    data = load(path)
    code, grade, klass = data.variables
    assert code.states == ("3", "5", "7", "10") and klass.states == ("2", "10")
    assert grade.states == ("B10", "a", "b")  # text: as before
    rows = [line.split(",") for line in _codes_csv().splitlines()[1:]]
    assert [code.states[c] for c in data.X[:, 0]] == [r[0] for r in rows]  # each row keeps its label
    for algo in ("nb", "tan"):
        assert_same_model(fit(algo, load_streamed(path, None, Preprocessing(), None, 37)), fit(algo, load(path)))


def test_codes_written_as_floats_are_the_same_codes(tmp_path):
    """A feature of codes as pandas writes them with a missing value ("1.0", "10.0"), and the
    same codes written "1" and "010" elsewhere in the file, are the states "1", "2", "10"
    (a class is taken as written: its labels are what a prediction answers)."""
    rng = np.random.default_rng(3)
    written = {1: ["1.0", "1"], 2: ["2.0", "2.00"], 10: ["10.0", "010", "1e1"]}
    lines = ["code,class"]
    for i in range(120):
        c = int(rng.integers(0, 2))
        code = [1, 2, 10][int(rng.integers(0, 2)) + c]
        lines.append(f"{'' if i % 9 == 0 else written[code][i % len(written[code])]},{['2.0', '1'][c]}")
    path = write(tmp_path, "\n".join(lines) + "\n")
    data = load(path)
    assert data.variables[0].states == ("1", "2", "10") and data.variables[-1].states == ("1", "2.0")
    assert_same_model(fit("nb", load_streamed(path, None, Preprocessing(), None, 23)), fit("nb", data))
    test = load_with(write(tmp_path, "code,class\n010,1\n2,2.0\n", "test.csv"), data.variables)
    assert test.X[:, 0].tolist() == [2, 1]
    as_text = load(path, preprocessing=Preprocessing(nominal=("code", "class")))  # forced: taken as written
    assert as_text.variables[0].states == ("010", "1", "1.0", "10.0", "1e1", "2.0", "2.00")
    streamed = load_streamed(path, None, Preprocessing(nominal=("code", "class")), None, 23)
    assert streamed.variables == as_text.variables


def test_parts_that_see_the_codes_in_another_order_merge_to_the_same_states(tmp_path):
    """A glob's files are tallied apart and merged: the first sees only 7 and 10, the second 3 and 5."""
    lines = _codes_csv().splitlines()
    late = [line for line in lines[1:] if line.split(",")[0] in ("7", "10")]
    early = [line for line in lines[1:] if line.split(",")[0] in ("3", "5")]
    (tmp_path / "p").mkdir()
    write(tmp_path, "\n".join([lines[0], *late]) + "\n", "p/0.csv")
    write(tmp_path, "\n".join([lines[0], *early]) + "\n", "p/1.csv")
    whole = load(write(tmp_path, "\n".join([lines[0], *late, *early]) + "\n", "whole.csv"))
    in_parts = load_streamed(str(tmp_path / "p" / "*.csv"), None, Preprocessing(), None, 50)
    assert in_parts.variables[0].states == ("3", "5", "7", "10")
    assert_same_model(fit("nb", in_parts), fit("nb", whole), same_source=False)


def test_a_number_equal_to_a_whole_number_state_is_that_state_in_a_test_file(tmp_path):
    train = load(write(tmp_path, _codes_csv(), "train.csv"))
    test = load_with(
        write(tmp_path, "code,grade,class\n10.0,a,2\n1e1,b,10.0\n10,,10\n5.00,a,2\n", "test.csv"), train.variables
    )
    assert test.X[:, 0].tolist() == [3, 3, 3, 1] and test.y.tolist() == [0, 1, 1, 0]
    with pytest.raises(InvalidInput, match=r"test2.csv: line 2: column 'code': unknown value '10.5'"):
        load_with(write(tmp_path, "code,grade,class\n10.5,a,2\n", "test2.csv"), train.variables)
    with pytest.raises(InvalidInput, match=r"column 'grade': unknown value 'b.0'"):
        load_with(write(tmp_path, "code,grade,class\n10,b.0,2\n", "test3.csv"), train.variables)


def test_the_server_takes_10_0_for_10_and_refuses_10_5(tmp_path):
    model = fit("nb", load(write(tmp_path, _codes_csv())))
    with running_app(tmp_path, {"codes": model}) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)

            def predict(*codes, unknown=""):
                instances = [pb.Instance(values={"code": c, "grade": "a"}) for c in codes]
                request = pb.PredictRequest(model="codes", instances=instances, unknown=unknown)
                return [list(p.probabilities) for p in stub.Predict(request).predictions]

            as_labels = predict("10", "5", "7")
            assert predict("10.0", "5.00", "7e0") == as_labels
            assert as_labels[0] != as_labels[1]  # the code matters, so the test can tell
            assert predict("10.5") == predict("")  # unseen in training: read as missing by default
            with pytest.raises(grpc.RpcError) as refused:
                predict("10.5", unknown="error")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'10.5'" in refused.value.details()


def test_a_column_of_numbers_with_infinities_is_numeric_in_memory_and_in_chunks(tmp_path):
    """``inf`` is a number (docs/training.md), so a column of floats with a few ``inf``/``-inf``
    is numeric; it was typed nominal, one state per distinct float, and warned about as an
    identifier. A column of infinities alone stays nominal."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = np.where(x + rng.normal(scale=0.5, size=400) > 0, "p", "q")
    texts = [repr(float(v)) for v in x]
    texts[::40] = ["inf" if c == "p" else "-inf" for c in y[::40]]
    signs = ["inf" if c == "p" else "-inf" for c in y]
    path = write(tmp_path, "x,signs,class\n" + "".join(f"{t},{s},{c}\n" for t, s, c in zip(texts, signs, y)))
    data = load(path)
    assert [v.kind for v in data.features] == ["numeric", "nominal"]
    assert data.features[0].cuts and all(np.isfinite(data.features[0].cuts))
    assert data.features[0].states[-1].endswith("-inf)")
    assert_same_model(fit("nb", load_streamed(path, None, Preprocessing(), None, 37)), fit("nb", data))
