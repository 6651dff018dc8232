"""`trainer import`, `trainer export` and `show --dot` against a real SQLite store file."""

from pathlib import Path

import numpy as np
import pytest

from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from tests.trainer.conftest import run

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_import_export_reimport_and_show_dot(capsys, tmp_path, store):
    code, out, err = run(
        capsys,
        "import",
        str(FIXTURES / "pgmpy-car.xml"),
        "--class",
        "class",
        "--name",
        "car",
        "--store",
        store,
        "--alias",
        "production",
    )
    assert (code, err) == (0, "")
    assert out == "published car version 1 (imported-xmlbif); aliases: production\n"

    for fmt in ("bif", "xmlbif"):
        target = tmp_path / f"car.{fmt}"
        code, out, err = run(
            capsys, "export", "car@production", "--format", fmt, "--out", str(target), "--store", store
        )
        assert (code, err) == (0, "") and out == f"wrote car version 1 as {fmt} to {target}\n"
        # no --class: our export marks the class; the format comes from the extension
        code, out, _ = run(capsys, "import", str(target), "--name", "car", "--store", store)
        assert code == 0 and f"(imported-{fmt})" in out
    code, text, _ = run(capsys, "export", "car:3", "--format", "xmlbif", "--store", store)
    assert code == 0 and text == (tmp_path / "car.xmlbif").read_text()  # stdout holds the same bytes

    with ModelStore(store) as opened:
        models = [opened.load("car", version=v).model for v in (1, 2, 3)]
    rows = np.array([[-1] * 6, [0, 1, 2, 0, 1, 2], [1, -1, 0, -1, 2, -1]])
    expected = compile_model(models[0]).predict_proba(rows)
    for model in models[1:]:
        assert model.variables == models[0].variables
        assert np.array_equal(compile_model(model).predict_proba(rows), expected)

    code, out, _ = run(capsys, "show", "car", "--dot", "--store", store)
    assert code == 0 and out.startswith('digraph "car" {') and '"buying" -> "class";' in out
    assert '"class" [style="filled"' in out


def test_export_of_an_ensemble(capsys, tmp_path, store):
    assert run(capsys, "fit", "--algo", "aode", "--data", "builtin:chess", "--name", "chess", "--store", store)[0] == 0
    out_file = tmp_path / "chess.bif"
    code, out, err = run(capsys, "export", "chess", "--out", str(out_file), "--store", store)
    assert code == 1 and out == "" and not out_file.exists()
    assert err == (
        "trainer: error: the model has 36 networks (mean_joint of aode); bif holds one network: "
        "export one with --network I (0..35), or draw them all with --format dot\n"
    )
    code, _, err = run(capsys, "export", "chess", "--out", str(out_file), "--network", "36", "--store", store)
    assert code == 1 and "--network 36: the model has 36 networks (0..35)" in err and not out_file.exists()
    code, _, _ = run(capsys, "export", "chess", "--out", str(out_file), "--network", "4", "--store", store)
    assert code == 0 and out_file.read_text().startswith("network chess {")
    code, out, _ = run(capsys, "export", "chess", "--format", "dot", "--store", store)
    assert code == 0 and out.count('subgraph "cluster_') == 36


@pytest.mark.parametrize(
    "argv, code, pieces",
    [
        (["import", "{fix}/pgmpy-car.xml", "--name", "car"], 1, ["pgmpy-car.xml", "--class", "buying, class, doors"]),
        (["import", "{fix}/pgmpy-car.xml", "--class", "klass", "--name", "car"], 1, ["'klass'", "the variables are"]),
        (["import", "{fix}/pgmpy-car.json", "--class", "class", "--name", "car"], 2, ["--format", "pgmpy-car.json"]),
        (["import", "{fix}/pgmpy-car.xml", "--format", "dot", "--class", "class", "--name", "car"], 2, ["--format"]),
        (["import", "{fix}/pgmpy-car.xml", "--class", "class", "--name", "bad name"], 2, ["--name"]),
        (["import", "{tmp}/absent.bif", "--class", "class", "--name", "car"], 1, ["absent.bif", "cannot read"]),
        (
            ["import", "{tmp}/bad.bif", "--class", "C", "--name", "car"],
            1,
            ["/bad.bif: line 2: variable 'C'", "unknown parent 'B'"],
        ),
        (["export", "car", "--store", "{store}"], 2, ["--format"]),
        (["export", "car", "--out", "{tmp}/car.txt", "--store", "{store}"], 2, ["car.txt"]),
        (["export", "car:x", "--format", "bif"], 2, ["'x'"]),
        (["export", "car", "--format", "bif", "--network", "-1"], 2, ["--network"]),
        (["export", "nothing", "--format", "bif", "--out", "{tmp}/n.bif", "--store", "{store}"], 1, ["does not exist"]),
        (["show", "car", "--dot", "--json"], 2, ["--json"]),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(capsys, tmp_path, store, argv, code, pieces):
    (tmp_path / "bad.bif").write_text(
        "variable C { type discrete [ 2 ] { a, b }; }\nprobability ( C | B ) { table 0.5, 0.5; }\n"
    )
    before = set(tmp_path.iterdir())
    argv = [a.replace("{fix}", str(FIXTURES)).replace("{tmp}", str(tmp_path)).replace("{store}", store) for a in argv]
    if argv[0] == "import":
        argv += ["--store", store]
    got, out, err = run(capsys, *argv)
    assert (got, out) == (code, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    for piece in pieces:
        assert piece in err
    assert set(tmp_path.iterdir()) - before <= {tmp_path / "models.db"}  # no output file
    if argv[0] == "import":
        assert not (tmp_path / "models.db").exists()  # refused before the store is opened
    elif (tmp_path / "models.db").exists():
        with ModelStore(store) as opened:
            assert opened.list_models() == []
