"""Files as they come (issue 15): UCI's `?` for a missing value and a space after each comma
are read as a user means them, in memory, in chunks and for a test file alike."""

from __future__ import annotations

import numpy as np
import pytest

from bnserve.store.model import NUMERIC
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.encoded import load_with
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from tests.data_helpers import write
from tests.trainer.conftest import run
from tests.trainer.test_streaming import assert_same_model


def _uci_csv(rows: int = 200, seed: int = 0) -> str:
    """age (numeric, `?` where unknown), sex and class, each field after ", " as UCI writes it."""
    rng = np.random.default_rng(seed)
    lines = ["age, sex, class"]
    for _ in range(rows):
        c = int(rng.integers(0, 2))
        age = "?" if rng.random() < 0.1 else f"{rng.normal(40 + 10 * c, 8):.0f}"
        sex = "?" if rng.random() < 0.05 else ("Male" if rng.random() < 0.4 + 0.3 * c else "Female")
        lines.append(f"{age}, {sex}, {'<=50K' if c == 0 else '>50K'}")
    return "\n".join(lines) + "\n"


def test_question_marks_are_missing_and_spaces_are_dropped(tmp_path):
    data = load(write(tmp_path, _uci_csv()))
    age, sex, klass = data.variables
    assert (age.name, sex.name, klass.name) == ("age", "sex", "class")  # the header is trimmed too
    assert age.kind == NUMERIC  # not a nominal column with a "?" state
    assert sex.states == ("Female", "Male") and klass.states == ("<=50K", ">50K")
    assert np.count_nonzero(data.X[:, 0] < 0) > 0  # the "?" ages are missing


def test_the_old_reading_is_a_flag_away(tmp_path):
    path = write(tmp_path, _uci_csv())
    kept = load(path, preprocessing=Preprocessing(na_values=(), trim=False))
    assert kept.variables[1].name == " sex" and kept.variables[1].states == (" ?", " Female", " Male")
    # --na-values replaces the default: "?" is a state again, "Male" is missing
    assert load(path, preprocessing=Preprocessing(na_values=("Male",))).variables[1].states == ("?", "Female")


@pytest.mark.parametrize("algo", ["nb", "tan"])
def test_in_chunks_and_in_memory_read_the_same(tmp_path, algo):
    path = write(tmp_path, _uci_csv(300, seed=1))
    assert_same_model(fit(algo, load_streamed(path, None, Preprocessing(), None, 37)), fit(algo, load(path)))


def test_a_test_file_is_read_as_the_training_file(tmp_path):
    train = load(write(tmp_path, _uci_csv(seed=2), "train.csv"))
    test = load_with(write(tmp_path, _uci_csv(50, seed=3), "test.csv"), train.variables, None, Preprocessing())
    assert test.n_rows > 0 and np.all(test.X[:, 1] >= -1)


def test_the_cli_flags(capsys, store, tmp_path):
    path = write(tmp_path, _uci_csv())
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store)
    assert (code, err) == (0, "")
    code, out, _ = run(capsys, "show", "m", "--store", store)
    assert "  sex    feature  Female, Male\n" in out
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
        "--na-values",
        "",
        "--keep-whitespace",
    )
    assert code == 0 and err.startswith("trainer: warning: column 'age' is numeric but for the value(s) '?' (")
    code, out, _ = run(capsys, "show", "m:2", "--store", store, "--json")
    assert code == 0 and '" ?"' in out and '"trim_whitespace": false' in out and '"na_values": []' in out


def _regression_csv(rows: int = 300) -> str:
    rng = np.random.default_rng(4)
    return "x,price\n" + "".join(f"{'ab'[i % 2]},{rng.normal(100, 20):.2f}\n" for i in range(rows))


def test_a_numeric_class_is_refused_unless_forced(tmp_path, capsys, store):
    """Issue 15: a continuous class column trained a model with a class per value."""
    from bnserve.store.errors import InvalidInput

    path = write(tmp_path, _regression_csv())
    for reading in (lambda p: load(path, preprocessing=p), lambda p: load_streamed(path, None, p, None, 50)):
        with pytest.raises(InvalidInput, match=r"column 'price' is numeric \(\d+ distinct values.*--force-class"):
            reading(Preprocessing())
        assert reading(Preprocessing(force_class=True)).n_classes > 256
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store)
    assert code == 1 and "is numeric" in err
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store, "--force-class")
    assert (code, err) == (0, "")


def test_a_class_of_very_many_values_is_refused_but_few_whole_numbers_are_classes(tmp_path):
    from bnserve.store.errors import InvalidInput

    ids = write(tmp_path, "x,id\n" + "".join(f"{'ab'[i % 2]},u{i}\n" for i in range(300)), "ids.csv")
    with pytest.raises(InvalidInput, match="has 300 distinct values, more than 256 for a class"):
        load(ids)
    digits = write(tmp_path, "x,digit\n" + "".join(f"{'ab'[i % 2]},{i % 10}\n" for i in range(300)), "d.csv")
    assert load(digits).n_classes == 10  # whole-number codes: a nominal class, as for features
    assert load(ids, preprocessing=Preprocessing(nominal=("id",))).n_classes == 300  # --nominal says so too


def test_a_semicolon_file_reads_as_its_comma_twin(tmp_path, monkeypatch, capsys, store):
    """--delimiter (issue 15): in memory, in chunks and in parts read apart, as the comma file."""
    from bnserve.trainer.data import streaming
    from tests.trainer.test_streaming import _mixed_csv

    text = _mixed_csv(np.random.default_rng(9), rows=600)
    comma = write(tmp_path, text, "comma.csv")
    semicolon = write(tmp_path, text.replace(",", ";"), "semicolon.csv")
    by_semicolon = Preprocessing(delimiter=";")
    expected = fit("tan", load(comma))
    assert_same_model(fit("tan", load(semicolon, preprocessing=by_semicolon)), expected, same_source=False)
    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    in_parts = load_streamed(semicolon, None, by_semicolon, None, 50, jobs=2)
    assert len(in_parts.reader.parts) == 2
    assert_same_model(fit("tan", in_parts), expected, same_source=False)
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", semicolon, "--name", "m", "--store", store, "--delimiter", ";"
    )
    assert (code, err) == (0, "")
    tab = write(tmp_path, text.replace(",", "\t"), "tab.txt")
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", tab, "--name", "m", "--store", store, "--delimiter", "tab"
    )
    assert (code, err) == (0, "")
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", semicolon, "--name", "m", "--store", store, "--delimiter", ";;"
    )
    assert code == 2 and "a delimiter is one character" in err
