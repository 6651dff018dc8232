"""Issue 15's lifecycle on the command line: trainer delete, list one row per version,
--description and --tag on fit and import, shown by show."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bnserve.store.db import ModelStore
from tests.trainer.conftest import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fit(capsys, store, *flags):
    code, out, err = run(
        capsys, "fit", "--algo", "nb", "--data", "builtin:chess", "--name", "chess", "--store", store, *flags
    )
    assert (code, err) == (0, ""), err
    return out


def test_delete_a_version_then_the_model(capsys, store):
    for alias in ("production", "staging", None):
        fit(capsys, store, *(["--alias", alias] if alias else []))

    code, out, err = run(capsys, "delete", "chess:3", "--store", store)
    assert (code, out, err) == (0, "deleted chess version 3\n", "")
    code, out, err = run(capsys, "delete", "chess:1", "--store", store)
    assert code == 1 and out == ""
    assert err == (
        "trainer: error: deleting model 'chess' version 1: still named by the alias production (version 1); "
        "move or remove them first (trainer alias, unalias), or force the delete, which removes them too "
        "(trainer delete --force)\n"
    )
    code, out, _ = run(capsys, "delete", "chess:1", "--force", "--store", store)
    assert (code, out) == (0, "deleted chess version 1; removed the alias production (version 1)\n")
    code, _, err = run(capsys, "delete", "chess:1", "--store", store)
    assert code == 1 and err == "trainer: error: model 'chess' has no version 1\n"

    assert "published chess version 4 " in fit(capsys, store)  # 3 was deleted: never given again
    code, _, err = run(capsys, "delete", "chess", "--store", store)
    assert code == 1 and "still named by the alias staging (version 2)" in err
    code, out, _ = run(capsys, "delete", "chess", "--force", "--store", store)
    assert (code, out) == (0, "deleted model chess (versions 2, 4); removed the alias staging (version 2)\n")
    code, out, _ = run(capsys, "list", "--store", store)
    assert (code, out) == (0, "no models\n")
    code, _, err = run(capsys, "delete", "chess", "--store", store)
    assert code == 1 and err == "trainer: error: model 'chess' not found\n"


@pytest.mark.parametrize(
    ("ref", "piece"),
    [
        ("chess@production", "not an alias"),
        ("chess:0", "bad version '0'"),
        ("bad name", "NAME[:VERSION|@ALIAS] 'bad name': model name 'bad name' is invalid"),
    ],
)
def test_delete_usage_errors_exit_2_and_delete_nothing(capsys, store, ref, piece):
    fit(capsys, store, "--alias", "production")
    code, out, err = run(capsys, "delete", ref, "--store", store)
    assert (code, out) == (2, "") and piece in err and err.count("\n") == 1
    with ModelStore(store) as opened:
        assert opened.list_models()[0].versions == (1,)


def test_description_and_tags_on_fit_and_import_are_shown(capsys, store):
    fit(
        capsys,
        store,
        "--description",
        "baseline: naive Bayes on all 36 features",
        "--tag",
        "team=risk",
        "--tag",
        "ticket=JIRA-12",
        "--tag",
        "empty=",
    )
    code, out, _ = run(
        capsys,
        "import",
        str(FIXTURES / "pgmpy-car.xml"),
        "--class",
        "class",
        "--name",
        "car",
        "--description",
        "from pgmpy",
        "--tag",
        "source=pgmpy",
        "--store",
        store,
    )
    assert code == 0

    code, out, _ = run(capsys, "show", "chess", "--store", store)
    assert code == 0
    assert "\ndescription: baseline: naive Bayes on all 36 features\n" in out
    assert "\ntags: empty=, team=risk, ticket=JIRA-12\n" in out
    code, out, _ = run(capsys, "show", "car", "--json", "--store", store)
    doc = json.loads(out)
    assert (doc["description"], doc["tags"]) == ("from pgmpy", {"source": "pgmpy"})
    fit(capsys, store)
    code, out, _ = run(capsys, "show", "chess:2", "--json", "--store", store)
    assert (json.loads(out)["description"], json.loads(out)["tags"]) == (None, {})
    code, out, _ = run(capsys, "show", "chess:2", "--store", store)
    assert "description:" not in out and "tags:" not in out


@pytest.mark.parametrize(
    ("flags", "piece"),
    [
        (["--tag", "novalue"], "expected KEY=VALUE, got 'novalue'"),
        (["--tag", "bad key=v"], "--tag: tag key 'bad key' is invalid"),
        (["--tag", "k=" + "x" * 257], "257 characters, at most 256"),
        (["--tag", "k=1", "--tag", "k=2"], "--tag: the key 'k' is given more than once"),
        (["--description", "x" * 1001], "--description: description is invalid: 1001 characters"),
    ],
)
def test_bad_description_or_tags_are_usage_errors_before_anything_is_read_or_written(
    capsys, store, tmp_path, flags, piece
):
    for command in (
        ["fit", "--algo", "nb", "--data", str(tmp_path / "absent.csv")],
        ["import", str(FIXTURES / "pgmpy-car.xml"), "--class", "class"],
    ):
        code, out, err = run(capsys, *command, "--name", "m", "--store", store, *flags)
        assert (code, out) == (2, "") and piece in err and err.count("\n") == 1
    assert not (tmp_path / "models.db").exists()


def test_list_one_row_per_version_with_the_description_cut_to_the_line(capsys, store, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    fit(capsys, store, "--alias", "production", "--alias", "canary", "--description", "first   one\non two lines")
    fit(capsys, store, "--description", "word " * 40)
    run(capsys, "import", str(FIXTURES / "pgmpy-car.xml"), "--class", "class", "--name", "car", "--store", store)
    with ModelStore(store) as opened:
        created = opened.load("chess", version=1).created_at_ms

    code, out, _ = run(capsys, "list", "--store", store)

    assert code == 0
    lines = out.splitlines()
    assert [line.split()[:2] for line in lines] == [["NAME", "VERSION"], ["car", "1"], ["chess", "1"], ["chess", "2"]]
    assert lines[2].split()[2:] == [
        datetime.fromtimestamp(created / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nb",
        "canary,production",
        "first",
        "one",
        "on",
        "two",
        "lines",
    ]
    assert lines[1].split()[-2:] == ["-", "-"]  # no aliases, no description
    assert max(map(len, lines)) <= 100 and lines[3].endswith(" word word…") and len(lines[3]) > 90

    code, out, _ = run(capsys, "list", "chess", "--json", "--store", store)
    rows = json.loads(out)
    assert [(r["name"], r["version"], r["algorithm"], r["aliases"]) for r in rows] == [
        ("chess", 1, "nb", ["canary", "production"]),
        ("chess", 2, "nb", []),
    ]
    assert rows[0]["description"] == "first   one\non two lines" and rows[0]["created_at_ms"] == created
    code, _, err = run(capsys, "list", "nothing", "--store", store)
    assert code == 1 and err == "trainer: error: model 'nothing' not found\n"
