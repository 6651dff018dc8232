"""The trainer command line against a real SQLite store file."""

import gzip
import json
from importlib import resources

import pytest

from bnserve.trainer.data.preprocessing import DEFAULT_NA_VALUES
from tests.trainer.conftest import run


def test_fit_list_show_alias_round_trip(capsys, store):
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "fkdb",
        "--k",
        "2",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store,
        "--alias",
        "production",
        "--alias",
        "staging",
    )
    assert (code, err) == (0, "")
    assert out.strip() == "published chess version 1 (fkdb, k=2); aliases: production, staging"
    code, out, _ = run(capsys, "fit", "--algo", "nb", "--data", "builtin:chess", "--name", "chess", "--store", store)
    assert code == 0 and "version 2 (nb)" in out

    code, out, _ = run(capsys, "list", "--store", store)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "CREATED", "ALGORITHM", "ALIASES", "DESCRIPTION"]
    assert [line.split()[:2] + line.split()[3:] for line in lines[1:]] == [
        ["chess", "1", "fkdb", "production,staging", "-"],
        ["chess", "2", "nb", "-", "-"],
    ]

    code, out, _ = run(capsys, "alias", "chess", "2", "staging", "--store", store)
    assert code == 0 and "staging -> version 2" in out
    code, out, _ = run(capsys, "alias", "chess", "1", "canary", "--store", store)
    code, out, _ = run(capsys, "unalias", "chess", "canary", "--store", store)
    assert code == 0 and out == "chess: alias canary removed (it named version 1)\n"
    code, _, err = run(capsys, "unalias", "chess", "canary", "--store", store)
    assert code == 1 and "model 'chess' has no alias 'canary'" in err

    code, out, _ = run(capsys, "show", "chess@production", "--store", store, "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["name"], doc["version"], doc["algorithm"], doc["params"]) == ("chess", 1, "fkdb", {"k": 2})
    assert doc["aliases"] == ["production"]
    assert doc["metadata"]["training"]["rows"] == 3196
    arcs = doc["arcs"][0]
    assert len(arcs) == 36 + 1 + 2 * 34  # class -> each feature; root 0, second 1, the rest 2 feature parents
    assert all(["class", v["name"]] in arcs for v in doc["variables"] if v["role"] == "feature")

    code, out, _ = run(capsys, "show", "chess@staging", "--store", store)
    assert code == 0
    assert out.startswith("chess version 2 ")
    assert "algorithm: nb" in out and "  class -> wtoeg" in out and "  katri  feature  b, n, w" in out
    code, out, _ = run(capsys, "show", "chess:1", "--store", store)
    assert code == 0 and "aliases: production" in out and 'parameters: {"k": 2}' in out
    code, out, _ = run(capsys, "show", "chess", "--store", store)
    assert code == 0


def test_show_of_a_version_that_cannot_be_decoded_is_an_error_not_a_traceback(capsys, store):
    """Issue 17: a params_json nested 200,000 deep (written by hand; no publish writes one)."""
    from sqlalchemy import create_engine, text

    assert run(capsys, "fit", "--algo", "nb", "--data", "builtin:chess", "--name", "chess", "--store", store)[0] == 0
    engine = create_engine(store)
    with engine.begin() as conn:
        conn.execute(text("UPDATE model_versions SET params_json = :deep"), {"deep": "[" * 200_000 + "]" * 200_000})
    engine.dispose()
    code, out, err = run(capsys, "show", "chess:1", "--store", store)
    assert (code, out) == (1, "")
    assert err == "trainer: error: model 'chess' version 1: stored rows cannot be decoded: JSON nested too deeply\n"


def test_store_url_from_the_environment(capsys, store, monkeypatch):
    monkeypatch.setenv("BNSERVE_STORE_URL", store)
    assert run(capsys, "fit", "--algo", "tan", "--data", "builtin:chess", "--name", "t")[0] == 0
    code, out, _ = run(capsys, "list", "--store", store)
    assert code == 0 and out.split("\n")[1].split()[:2] == ["t", "1"]


def chess_lines():
    with resources.files("bnserve.trainer.io.datasets").joinpath("chess.csv.gz").open("rb") as f:
        return gzip.decompress(f.read()).decode().splitlines()


def accuracy_of(report: str, label: str) -> float:
    """The accuracy column of an algorithm's row in `trainer evaluate`'s table."""
    row = next(line for line in report.splitlines() if line.strip().startswith(label + " "))
    return float(row.strip()[len(label) :].split()[0])


def test_evaluate_cross_validation_and_hold_out(capsys, tmp_path):
    code, out, err = run(capsys, "evaluate", "--algo", "kdb", "--data", "builtin:chess", "--folds", "3", "--seed", "1")
    assert (code, err) == (0, "")
    assert "3-fold stratified CV" in out and "±" in out and "log-loss" in out
    assert accuracy_of(out, "kdb k=2") > 0.9
    header, rows = chess_lines()[0], chess_lines()[1:]
    (tmp_path / "train.csv").write_text("\n".join([header] + [r for i, r in enumerate(rows) if i % 3]) + "\n")
    (tmp_path / "test.csv").write_text("\n".join([header] + rows[::3]) + "\n")
    code, out, err = run(
        capsys,
        "evaluate",
        "--algo",
        "fkdb",
        "--data",
        str(tmp_path / "train.csv"),
        "--test",
        str(tmp_path / "test.csv"),
    )
    assert (code, err) == (0, "")
    assert "tested on" in out and "(1066 rows)" in out
    assert accuracy_of(out, "fkdb k=2") >= 0.93
    # hdchk=t first occurs on line 2772 of chess; with --unknown error a model trained on the first 1000 rows refuses it
    (tmp_path / "small.csv").write_text("\n".join([header] + rows[:1000]) + "\n")
    code, out, err = run(
        capsys,
        "evaluate",
        "--algo",
        "nb",
        "--data",
        str(tmp_path / "small.csv"),
        "--test",
        "builtin:chess",
        "--unknown",
        "error",
    )
    assert code == 1 and out == ""
    assert err == "trainer: error: builtin:chess: line 2772: column 'hdchk': unknown value 't'; known: f\n"


def test_evaluate_test_file_reads_unseen_values_as_missing_as_predict_does(capsys, tmp_path):
    """The one policy for values unseen in training (--unknown, default missing) holds for
    evaluate --test too: scored as if the value were empty, and counted on stderr."""
    header, rows = chess_lines()[0], chess_lines()[1:]
    (tmp_path / "small.csv").write_text("\n".join([header] + rows[:1000]) + "\n")  # hdchk is always f there
    seen = [set(values) for values in zip(*(r.split(",") for r in rows[:1000]))]
    cells = [r.split(",") for r in rows]
    blanked = [",".join(v if v in seen[j] else "" for j, v in enumerate(r)) for r in cells]
    n_unseen = sum(v not in seen[j] for r in cells for j, v in enumerate(r))
    (tmp_path / "unseen.csv").write_text("\n".join([header] + rows) + "\n")
    (tmp_path / "empty.csv").write_text("\n".join([header] + blanked) + "\n")
    common = ["evaluate", "--algo", "nb", "--data", str(tmp_path / "small.csv"), "--quiet", "--json"]

    def figures(test: str) -> dict:
        (figures,) = json.loads((tmp_path / f"{test}.json").read_text())["evaluations"]
        return {k: figures[k] for k in ("n_rows", "accuracy", "log_loss", "auc", "confusion")}

    code, _, err = run(capsys, *common, str(tmp_path / "unseen.json"), "--test", str(tmp_path / "unseen.csv"))
    assert code == 0
    assert err.startswith(f"trainer: {n_unseen:,} unknown values read as missing: hdchk 15 ('t'), ")
    assert err.count("\n") == 1
    code, _, err = run(capsys, *common, str(tmp_path / "empty.json"), "--test", str(tmp_path / "empty.csv"))
    assert (code, err) == (0, "")
    assert figures("unseen") == figures("empty")


def test_evaluate_gives_k_to_the_learners_that_take_it(capsys):
    """A comma list of learners where only some take --k: each gets what it declares."""
    code, out, err = run(
        capsys, "evaluate", "--algo", "nb,tan,kdb,fkdb,aode,rtan", "--k", "2", "--data", "builtin:chess", "--folds", "2"
    )
    assert (code, err) == (0, "")
    labels = [
        line.split()[0] + (" " + line.split()[1] if "k=" in line else "")
        for line in out.splitlines()
        if line.strip().split(" ")[0] in ("nb", "tan", "kdb", "fkdb", "aode", "rtan")
    ]
    assert "kdb k=2" in labels and "fkdb k=2" in labels and "nb" in labels and "aode" in labels
    code, _, err = run(capsys, "evaluate", "--algo", "nb,tan", "--k", "2", "--data", "builtin:chess")
    assert code == 2 and "--k does not apply to --algo nb,tan" in err


@pytest.mark.parametrize(
    "argv, code, pieces",
    [
        (["fit", "--algo", "kdb", "--k", "-1", "--data", "builtin:chess", "--name", "m"], 2, ["--k", "-1"]),
        (["fit", "--algo", "nb", "--k", "1", "--data", "builtin:chess", "--name", "m"], 2, ["--k", "nb"]),
        (["fit", "--algo", "xyz", "--data", "builtin:chess", "--name", "m"], 2, ["--algo", "xyz"]),
        (["fit", "--algo", "nb", "--data", "builtin:chess", "--name", "bad name"], 2, ["--name", "'bad name'"]),
        (["fit", "--algo", "nb", "--data", "builtin:chess", "--name", "m", "--alias", "7"], 2, ["--alias", "'7'"]),
        (["fit", "--algo", "nb", "--data", "{tmp}/absent.csv", "--name", "m"], 1, ["absent.csv"]),
        (["fit", "--algo", "nb", "--data", "{tmp}/ragged.csv", "--name", "m"], 1, ["ragged.csv", "line 3"]),
        (["fit", "--algo", "nb", "--data", "{tmp}/good.csv", "--class", "zz", "--name", "m"], 1, ["'zz'"]),
        (["evaluate", "--algo", "nb", "--data", "builtin:chess", "--folds", "0"], 2, ["--folds"]),
        (["evaluate", "--algo", "nb", "--data", "builtin:chess", "--folds", "3", "--test", "x.csv"], 2, ["--test"]),
        (["show", "m:x"], 2, ["'x'"]),
        (["show", "m@"], 2, ["ALIAS"]),
        (["alias", "m", "0", "production"], 2, ["version"]),
        ([], 2, ["COMMAND"]),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(capsys, tmp_path, store, argv, code, pieces):
    (tmp_path / "ragged.csv").write_text("a,b,c\n1,2,x\n1,2\n")
    (tmp_path / "good.csv").write_text("a,b,c\n1,2,x\n1,3,y\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv and argv[0] in ("fit", "show", "alias"):
        argv += ["--store", store]
    got, out, err = run(capsys, *argv)
    assert got == code
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    for piece in pieces:
        assert piece in err
    assert not (tmp_path / "models.db").exists()


def test_store_errors_exit_1(capsys, store, tmp_path):
    for argv in (
        ["show", "nothing"],
        ["alias", "nothing", "1", "production"],
        ["list"],
        ["export", "nothing", "--format", "bif"],
    ):
        code, _, err = run(capsys, *argv, "--store", store)  # a store that does not exist is not made one
        assert code == 1 and "models.db does not exist" in err and "trainer fit" in err and err.count("\n") == 1
    assert not (tmp_path / "models.db").exists()

    code, out, _ = run(capsys, "db", "upgrade", "--store", store)
    assert code == 0 and "from schema revision none to" in out
    code, _, err = run(capsys, "show", "nothing", "--store", store)
    assert code == 1 and "'nothing'" in err and err.count("\n") == 1
    code, _, err = run(capsys, "alias", "nothing", "1", "production", "--store", store)
    assert code == 1 and "'nothing'" in err
    code, out, _ = run(capsys, "list", "--store", store)
    assert (code, out) == (0, "no models\n")
    code, out, _ = run(capsys, "db", "upgrade", "--store", store)
    assert code == 0 and "nothing to do" in out


MIXED = "size,colour,class\n" + "".join(f"{s},{'rg'[i % 2]},{'ab'[s > 20]}\n" for i, s in enumerate(range(0, 40, 1)))


def test_preprocessing_flags_reach_the_model(capsys, store, tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text(MIXED)
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        str(path),
        "--name",
        "m",
        "--store",
        store,
        "--discretize",
        "equal-frequency:4",
        "--discretize",
        "size=equal-width:2",
        "--missing",
        "impute",
    )
    assert (code, err) == (0, ""), err
    code, out, _ = run(capsys, "show", "m", "--store", store, "--json")
    doc = json.loads(out)
    size = doc["variables"][0]
    assert (size["kind"], size["cuts"]) == ("numeric", [19.5])
    assert doc["metadata"]["preprocessing"] == {
        "missing": "impute",
        "discretization": {"size": "equal-width:2"},
        "na_values": list(DEFAULT_NA_VALUES),
    }

    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        str(path),
        "--name",
        "m",
        "--store",
        store,
        "--nominal",
        "size",
        "--ignore",
        "colour",
    )
    assert code == 0, err
    code, out, _ = run(capsys, "show", "m:2", "--store", store, "--json")
    assert [(v["name"], v["kind"], len(v["states"])) for v in json.loads(out)["variables"]] == [
        ("size", "nominal", 40),
        ("class", "nominal", 2),
    ]


@pytest.mark.parametrize(
    "flags, code, message",
    [
        (["--discretize", "size=kmeans"], 2, "expected mdl, mdl:N, pkid, wpkid, equal-frequency:N or equal-width:N"),
        (["--numeric", "nope"], 1, "--numeric: no column 'nope'"),
        (["--numeric", "colour"], 1, "column 'colour' is numeric, but has the value 'r'"),
        (["--missing", "guess"], 2, "invalid choice"),
    ],
)
def test_bad_preprocessing_flags_write_nothing(capsys, store, tmp_path, flags, code, message):
    path = tmp_path / "mixed.csv"
    path.write_text(MIXED)
    got, _, err = run(capsys, "fit", "--algo", "nb", "--data", str(path), "--name", "m", "--store", store, *flags)
    assert got == code and message in err
    assert not (tmp_path / "models.db").exists()  # the store was never opened


def test_precision_flag_records_the_table_dtype_and_the_check_behind_it(capsys, store):
    for precision in ("auto", "float64", "float32"):
        code, _, err = run(
            capsys,
            "fit",
            "--algo",
            "kdb",
            "--data",
            "builtin:chess",
            "--name",
            precision,
            "--store",
            store,
            "--precision",
            precision,
        )
        assert (code, err) == (0, "")
    docs = {}
    for name in ("auto", "float64", "float32"):
        code, out, _ = run(capsys, "show", name, "--store", store, "--json")
        docs[name] = json.loads(out)["metadata"]
    assert "table_precision" not in docs["float64"]
    auto, forced = docs["auto"]["table_precision"], docs["float32"]["table_precision"]
    assert auto["dtype"] == forced["dtype"] == "float32" and auto["requested"] == "auto"
    assert 0 < auto["float32_max_abs_error"] <= auto["bound"] == 1e-5
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "kdb",
        "--data",
        "builtin:chess",
        "--name",
        "x",
        "--store",
        store,
        "--precision",
        "float16",
    )
    assert code == 2 and "--precision" in err and "float16" in err


@pytest.mark.parametrize(
    "content, piece",
    [
        (b"", "empty.csv"),
        (b"a,b,class\n", "empty.csv"),
        (b"\x00\x01\xff\xfe\x00garbage", "empty.csv"),
        (b"a,b,class\n1,2,\n3,4,\n", "empty.csv"),
    ],
)
def test_bad_data_into_an_existing_store_changes_nothing(capsys, tmp_path, store, content, piece):
    """A failed fit leaves a store that already holds a model exactly as it was."""
    code, _, _ = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        "builtin:chess",
        "--name",
        "m",
        "--store",
        store,
        "--alias",
        "production",
    )
    assert code == 0
    before = run(capsys, "list", "--store", store)[1]
    (tmp_path / "empty.csv").write_bytes(content)
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        str(tmp_path / "empty.csv"),
        "--name",
        "m",
        "--store",
        store,
        "--alias",
        "production",
    )
    assert code == 1 and out == "" and piece in err and err.count("\n") == 1 and "Traceback" not in err
    assert run(capsys, "list", "--store", store)[1] == before


def test_evaluate_auto_by_nested_cross_validation(capsys):
    code, out, err = run(
        capsys,
        "evaluate",
        "--algo",
        "nb,auto",
        "--candidates",
        "kdb",
        "--k",
        "1",
        "--data",
        "builtin:chess",
        "--folds",
        "3",
    )
    assert code == 0, err
    assert "auto candidates=kdb ks=1" in out and accuracy_of(out, "auto candidates=kdb ks=1") > accuracy_of(out, "nb")
    code, _, err = run(capsys, "evaluate", "--algo", "auto", "--theta", "0.1", "--data", "builtin:chess")
    assert code == 2 and "--theta" in err
    code, _, err = run(capsys, "evaluate", "--algo", "nb", "--candidates", "kdb", "--data", "builtin:chess")
    assert code == 2 and "--candidates" in err


def test_alias_takes_one_name_so_a_file_after_it_stays_the_file(capsys, store):
    """Issue 15: `trainer import --alias production FILE` took FILE for a second alias."""
    from tests.trainer.test_cli_formats import FIXTURES

    code, out, err = run(
        capsys,
        "import",
        "--alias",
        "production",
        str(FIXTURES / "pgmpy-car.xml"),
        "--class",
        "class",
        "--name",
        "car",
        "--store",
        store,
    )
    assert (code, err) == (0, "") and out.endswith("aliases: production\n")


def test_a_numeric_column_without_cuts_is_shown_as_such(capsys, store, tmp_path):
    """Issue 15: `trainer show` printed `cut at : (-inf-inf)` for a numeric column MDL left whole."""
    from tests.data_helpers import write

    rows = "\n".join(f"{i * 0.37 % 5:.2f},{'ab'[i % 2]},{'xy'[i % 2]}" for i in range(60))
    path = write(tmp_path, "noise,signal,class\n" + rows + "\n")
    assert run(capsys, "fit", "--algo", "nb", "--data", path, "--name", "m", "--store", store)[0] == 0
    code, out, _ = run(capsys, "show", "m", "--store", store)
    assert code == 0 and "numeric, not cut: (-inf-inf)" in out and "cut at :" not in out


def test_a_bad_store_url_is_refused_before_the_data_are_read(capsys, tmp_path):
    """Issue 15: a bad --store was found only after training (minutes on a large file)."""
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--data",
        str(tmp_path / "absent.csv"),
        "--name",
        "m",
        "--store",
        "nosuchdb://host/x",
    )
    assert code == 1 and "store URL nosuchdb://host/x cannot be used" in err and "absent.csv" not in err


def test_the_store_is_checked_beside_the_reading_and_refused_before_anything_else(capsys, tmp_path):
    """The --store check (importing SQLAlchemy) runs in a thread while the data are read; its
    refusal is the one reported, over a refusal of the data, and a good URL lets the
    reading's own error through."""
    from bnserve.store.errors import InvalidInput
    from bnserve.trainer.cli.publishing import check_store_meanwhile
    from tests.data_helpers import write

    with pytest.raises(InvalidInput, match="nosuchdb://host/x cannot be used"):
        check_store_meanwhile("nosuchdb://host/x")()
    check_store_meanwhile(f"sqlite:///{tmp_path / 'm.db'}")()
    bad = write(tmp_path, "a,b\n1\n")
    code, _, err = run(capsys, "fit", "--algo", "nb", "--data", bad, "--name", "m", "--store", "nosuchdb://host/x")
    assert code == 1 and "nosuchdb://host/x cannot be used" in err
    code, _, err = run(
        capsys, "fit", "--algo", "nb", "--data", bad, "--name", "m", "--store", f"sqlite:///{tmp_path}/m.db"
    )
    assert code == 1 and "line 2" in err and not (tmp_path / "m.db").exists()


def test_every_flag_has_help(capsys):
    """Issue 15: --alias and --store had no help; fit's --data said it was a CSV file."""
    from bnserve.trainer.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    for name, parser in commands.choices.items():
        for action in parser._actions:
            if action.option_strings:
                assert action.help, f"trainer {name} {action.option_strings[0]}"
    (data,) = [a for a in commands.choices["fit"]._actions if a.dest == "data"]
    assert "Parquet" in data.help and "CSV file (.gz ok)" not in data.help


def test_both_command_lines_print_their_version():
    """Issue 15: neither CLI had --version."""
    import subprocess
    import sys
    from importlib.metadata import version
    from pathlib import Path

    for prog in ("trainer", "server"):
        done = subprocess.run([str(Path(sys.executable).parent / prog), "--version"], capture_output=True, text=True)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{prog} {version('bnserve')}\n", "")
