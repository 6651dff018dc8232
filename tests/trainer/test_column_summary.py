"""What ``trainer fit`` says of the typed columns (issue 15): a one-screen table, and
warnings on files read wrong — numeric but for a few tokens, an identifier, one value
written two ways — that no clean data set sets off."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from bnserve.trainer.cli.fit import _summarize
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.preprocessing import DEFAULT_NA_VALUES
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.data.summary import MAX_LINES, summary_text
from tests.data_helpers import SHIPPED, shared_datasets, write
from tests.incident_file import WIDE, write_incident_file
from tests.trainer.conftest import run


def _messy_csv(rows: int = 200, seed: int = 0) -> str:
    """id (one per row), age (numbers but "unknown" and "?"), sex ("Male" and "male"),
    code (whole numbers), score (numbers, some empty) and class."""
    rng = np.random.default_rng(seed)
    lines = ["id,age,sex,code,score,class"]
    for i in range(rows):
        c = int(rng.integers(0, 2))
        age = "unknown" if rng.random() < 0.06 else "?" if rng.random() < 0.05 else str(int(rng.normal(40 + 9 * c, 9)))
        sex = ["Male", "male", "Female"][int(rng.integers(0, 3))]
        score = "" if i % 4 == 0 else f"{rng.normal(c, 1):.2f}"
        lines.append(f"u{i},{age},{sex},{[3, 5, 7, 10][int(rng.integers(0, 4))]},{score},{'ny'[c]}")
    return "\n".join(lines) + "\n"


def test_the_table_and_the_warnings(tmp_path):
    text, warnings = summary_text(load(write(tmp_path, _messy_csv())))
    lines = text.splitlines()
    assert lines[0].endswith("data.csv: 200 rows, 5 features, class 'class'")
    row = {line.split()[0]: line for line in lines[2:]}
    assert (
        row["code"].split("  ")[-1].strip() == "0.0%" and "nominal, whole-number codes  4: 3, 5, 7, 10" in row["code"]
    )
    assert row["score"].endswith("25.0%") and "numeric" in row["score"]  # a quarter of the scores is empty
    assert "200: u0, u1, u10, u100, …" in row["id"] and row["class"].endswith("-")
    assert [w.split("'")[1] for w in warnings] == ["id", "age", "sex"]
    assert all(f"{name} (!)" in text for name in ("id", "age", "sex")) and "code (!)" not in text
    identifier, numeric, lookalike = warnings
    assert "about one per row" in identifier and "pass --ignore id" in identifier
    assert (
        "numeric but for the value(s) 'unknown' (" in numeric
        and f"pass --na-values '{','.join(DEFAULT_NA_VALUES)},unknown'" in numeric
    )
    assert "'Male' and 'male'" in lookalike
    _, warnings = summary_text(load(write(tmp_path, "x,class\n" + "a,Yes\nb,yes\nc,no\n" * 9, "yes.csv")))
    assert warnings == [
        "column 'class' has states that differ only in case or in how a number is written: "
        "'Yes' and 'yes'; they are learned as different values"
    ]


def test_the_warnings_advice_is_right(tmp_path):
    path = write(tmp_path, _messy_csv())
    _, warnings = summary_text(load(path, preprocessing=Preprocessing(na_values=("?", "unknown"), ignore=("id",))))
    assert [w.split("'")[1] for w in warnings] == ["sex"]  # age is numeric now; id is gone
    assert load(path, preprocessing=Preprocessing(na_values=("?", "unknown"))).variables[1].kind == "numeric"
    _, warnings = summary_text(load(path, preprocessing=Preprocessing(nominal=("age", "sex", "id"))))
    assert warnings == []  # what the user forced nominal is taken as meant


def test_in_chunks_the_same_summary(tmp_path):
    path = write(tmp_path, _messy_csv(seed=1))
    assert summary_text(load_streamed(path, None, Preprocessing(), None, 37)) == summary_text(load(path))
    state = Preprocessing(missing="state")
    assert summary_text(load_streamed(path, None, state, None, 37)) == summary_text(load(path, preprocessing=state))
    in_memory, _ = summary_text(load(path, preprocessing=Preprocessing(missing="impute")))
    assert "25.0%" in in_memory  # the share read, not what imputation left


def test_many_columns_fit_one_screen_but_a_warned_one_shows(tmp_path):
    rng = np.random.default_rng(2)
    n = MAX_LINES + 20
    header = [f"x{j}" for j in range(n)] + ["late_id", "class"]
    rows = [[str(v) for v in rng.integers(0, 3, n)] + [f"r{i}", "ab"[i % 2]] for i in range(60)]
    text, warnings = summary_text(load(write(tmp_path, "\n".join(",".join(r) for r in [header, *rows]) + "\n")))
    assert f"x{MAX_LINES - 1} " in text and f"x{MAX_LINES} " not in text
    assert "late_id (!)" in text and text.splitlines()[-1] == "  … and 20 more columns"
    assert len(text.splitlines()) == 2 + MAX_LINES + 2 + 1 and len(warnings) == 1


def test_a_declared_domain_is_judged_by_the_values_seen(tmp_path):
    """An ARFF domain of 100 values of which the rows use 2 is no identifier."""
    domain = ",".join(f"v{i}" for i in range(100))
    rows = "".join(f"v{i % 2},{'ab'[i % 3 == 0]}\n" for i in range(40))
    path = tmp_path / "d.arff"
    path.write_text(f"@relation d\n@attribute x {{{domain}}}\n@attribute class {{a,b}}\n@data\n{rows}")
    data = load(str(path))
    assert data.variables[0].cardinality == 100 and summary_text(data)[1] == []


def _clean_sets() -> list[Path]:
    return sorted(SHIPPED.glob("*.csv.gz"))


@pytest.mark.parametrize("path", _clean_sets(), ids=lambda p: p.name)
def test_no_warning_on_a_clean_data_set(path):
    assert summary_text(load(str(path)))[1] == []


def test_no_warning_on_the_shared_data_sets():
    paths = sorted(shared_datasets().glob("*.csv"))
    assert len(paths) >= 30
    assert {p.name: w for p in paths if (w := summary_text(load(str(p)))[1])} == {}


def test_the_cli_prints_the_table_on_a_terminal_and_the_warnings_always(tmp_path, capsys, store, monkeypatch):
    path = write(tmp_path, _messy_csv())
    code, out, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store)
    assert code == 0 and "published m version 1" in out
    assert err.splitlines() == [f"trainer: warning: {w}" for w in summary_text(load(path))[1]]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store)
    summary = err[err.index(f"trainer: {path}: 200 rows") :]  # after the progress bars, drawn on a terminal too
    assert code == 0 and "  code " in summary
    assert err.splitlines()[-3].startswith("trainer: warning: column 'id'")
    clean = write(tmp_path, "a,b,class\n" + "x,1.5,y\nz,2.5,n\n" * 20, "clean.csv")
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", clean, "--name", "m", "--store", store, "--chunk-rows", "7"
    )
    assert code == 0 and "trainer: warning" not in err and re.search(r"\n  b +feature +numeric, cut at 2 ", err)
    _summarize(argparse.Namespace(quiet=True), load(path))  # --quiet, as the progress flags give it
    assert capsys.readouterr().err.splitlines() == [f"trainer: warning: {w}" for w in summary_text(load(path))[1]]


def test_a_nominal_column_with_more_states_than_its_rows_support_is_flagged(tmp_path):
    """Issue 26's file: three columns of numbers with an 'NA' text; and codes that are no
    numbers. Each is named with its states and rows, and the three ways out."""
    data = load(write_incident_file(tmp_path / "incident.csv"), preprocessing=Preprocessing(na_values=()))
    _, warnings = summary_text(data)
    assert [w.split("'")[1] for w in warnings] == list(WIDE)
    for warning, (name, states) in zip(warnings, WIDE.items()):
        assert f"read as nominal with {states:,} states, more than its 4,454 rows support (√rows = 66)" in warning
        assert all(flag in warning for flag in ("--na-values NA", f"--numeric {name}", f"--ignore {name}"))
    rows = [f"c{i % 100},z{i % 30},{'ny'[i % 2]}" for i in range(1000)]  # 100 and 30 states, 10 and 33 rows each
    _, warnings = summary_text(load(write(tmp_path, "code,zone,class\n" + "\n".join(rows) + "\n", "codes.csv")))
    assert len(warnings) == 1 and warnings[0].startswith("column 'code' is nominal with 100 states for 1,000 rows")
    assert "probably numeric or an identifier" in warnings[0] and "--ignore code" in warnings[0]
    assert "--numeric code if it holds numbers (and --na-values" in warnings[0]
