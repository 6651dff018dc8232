"""The training plan: a spec that checks itself (one check for flags and Python callers),
travels in the model's metadata as versioned JSON, and gives back the ``trainer fit`` line
that makes the same model; auto's column summary as auto reads the data."""

from __future__ import annotations

import json
import shlex
import sys

import numpy as np
import pandas as pd
import pytest

from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidInput
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.plan import TRAINING_SPEC, TrainingSpec, data_path, spec_of, train
from tests.trainer.conftest import run


@pytest.fixture
def csv_file(tmp_path):
    """A class-driven numeric column, a noise column MDL leaves whole, a nominal one."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200)
    frame = pd.DataFrame(
        {
            "signal": np.round(rng.normal(y * 2.0, 1.0), 3),
            "noise": np.round(rng.uniform(0, 10, 200), 3),
            "colour": np.where(rng.random(200) < 0.3 + 0.4 * y, "red", "blue"),
            "outcome": np.where(y == 1, "yes", "no"),
        }
    )
    frame.loc[rng.random(200) < 0.1, "signal"] = None
    path = tmp_path / "small.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "fields, flag",
    [
        ({"algo": "kbd"}, "unknown algo 'kbd'"),
        ({"algo": "kdb", "params": {"k": -1}}, "--k -1"),
        ({"algo": "nb", "params": {"k": 2}}, "--k does not apply to --algo nb"),
        ({"algo": "auto", "params": {"theta": 0.1}}, "--theta does not apply to --algo auto"),
        ({"algo": "auto", "ks": (2, -1)}, "--k: expected non-negative values"),
        ({"algo": "auto", "work_budget": 0}, "--work-budget"),
        ({"algo": "nb", "work_budget": None}, "--candidates and --work-budget apply to --algo auto only"),
        ({"algo": "nb", "candidates": ("tan",)}, "--candidates and --work-budget apply to --algo auto only"),
        ({"algo": "auto", "candidates": ("tna",)}, "--candidates: unknown algorithm tna"),
        ({"algo": "nb", "estimator": "dirichlet:-1"}, "--estimator"),
        ({"algo": "nb", "discretize": "sometimes"}, "--discretize"),
        ({"algo": "nb", "per_column": {"a": "equal-width:0"}}, "--discretize"),
        ({"algo": "nb", "missing": "drop"}, "--missing"),
        ({"algo": "nb", "unknown": "ignore"}, "handle_unknown"),  # no flag of fit: the estimator's
        ({"algo": "nb", "precision": "float16"}, "--precision"),
        ({"algo": "nb", "delimiter": ";;"}, "--delimiter"),
        ({"algo": "nb", "weight": ""}, "--weight"),
        ({"algo": "nb", "seed": -1}, "--seed"),
        ({"algo": "nb", "max_cpt_cells": 0}, "--max-cpt-cells"),
        ({"algo": "nb", "memory_budget": -5}, "--memory-budget"),
        ({"algo": "nb", "jobs": 0}, "--jobs"),
        ({"algo": "k2", "chunk_rows": 100}, "--chunk-rows trains"),
        ({"algo": "nb", "estimator": "alr", "dask": "tcp://x:8786"}, "--dask counts the rows; --estimator alr"),
    ],
)
def test_a_spec_refuses_a_bad_field_in_one_line_naming_its_flag(fields, flag):
    with pytest.raises(InvalidInput) as caught:
        TrainingSpec(**fields)
    assert flag in caught.value.message and "\n" not in caught.value.message


def test_the_command_line_refuses_what_the_spec_refuses_as_a_usage_error(capsys, csv_file):
    code, _, err = run(capsys, "fit", "--algo", "nb", "--work-budget", "none", "--data", str(csv_file), "--name", "m")
    assert code == 2 and "--candidates and --work-budget apply to --algo auto only" in err
    code, _, err = run(capsys, "fit", "--algo", "kdb", "--k", "0..2", "--data", str(csv_file), "--name", "m")
    assert code == 2 and "--k [0, 1, 2]" in err


def test_a_spec_is_versioned_json_and_reads_back_equal():
    spec = TrainingSpec(
        "kdb",
        {"k": 1, "theta": 0.03},
        "dirichlet:0.5",
        class_column="outcome",
        na_values=("?", "NA"),
        trim=False,
        nominal=("colour",),
        per_column={"noise": "equal-width:4"},
        missing="state",
        weight="w",
        max_cpt_cells=10_000,
        unknown="error",
        precision="float32",
        jobs=3,
        dask="tcp://internal:8786",
    )
    doc = json.loads(json.dumps(spec.to_dict()))
    assert doc["version"] == 1 and "dask" not in doc and "jobs" not in doc  # where, not what
    assert TrainingSpec.from_dict(doc) == replace_machine(spec)
    with pytest.raises(InvalidInput, match="training spec version 99"):
        TrainingSpec.from_dict({**doc, "version": 99})


def test_a_spec_stored_with_a_time_budget_reads_back_with_a_work_budget():
    """auto's budget was seconds; a model published then still shows its spec and command."""
    from bnserve.trainer.plan import DEFAULT_WORK_BUDGET, command

    old = {k: v for k, v in TrainingSpec("auto").to_dict().items() if k != "work_budget"}
    assert TrainingSpec.from_dict({**old, "time_budget": None}).work_budget is None  # no limit stays no limit
    timed = TrainingSpec.from_dict({**old, "time_budget": 90.0})
    assert timed.work_budget == DEFAULT_WORK_BUDGET and "budget" not in command(timed)
    assert "--work-budget none" in command(TrainingSpec.from_dict({**old, "time_budget": None}))


def replace_machine(spec: TrainingSpec) -> TrainingSpec:
    from dataclasses import replace

    return replace(spec, jobs=1, dask=None)


def test_show_prints_the_command_that_makes_the_same_model(capsys, csv_file, tmp_path, monkeypatch):
    monkeypatch.chdir(csv_file.parent)
    store = f"sqlite:///{tmp_path / 'models.db'}"
    argv = ["fit", "--algo", "kdb", "--k", "1", "--estimator", "dirichlet:0.5", "--discretize", "noise=equal-width:3"]
    argv += ["--nominal", "colour", "--na-values", "?,NA", "--data", "small.csv", "--name", "a", "--store", store]
    assert run(capsys, *argv)[0] == 0
    code, out, _ = run(capsys, "show", "a", "--store", store)
    (line,) = [line for line in out.splitlines() if line.startswith("reproduce: ")]
    command = line.removeprefix("reproduce: ")
    assert command == (
        "trainer fit --algo kdb --k 1 --estimator dirichlet:0.5 --data small.csv --nominal colour "
        "--discretize noise=equal-width:3 --na-values '?,NA' --name a"
    )
    words = shlex.split(command)
    assert run(capsys, *words[1:-1], "b", "--store", store)[0] == 0
    with ModelStore(store) as opened:
        a, b = opened.load("a").model, opened.load("b").model
    assert spec_of(a) == spec_of(b)
    for x, y in zip(a.networks[0].nodes, b.networks[0].nodes, strict=True):
        assert (x.parents, x.cpt.tobytes()) == (y.parents, y.cpt.tobytes())
    shown = json.loads(run(capsys, "show", "a", "--store", store, "--json")[1])
    assert shown["reproduce"] == command


def test_show_of_a_model_without_a_spec_prints_no_command(capsys, csv_file, tmp_path):
    from dataclasses import replace

    store = f"sqlite:///{tmp_path / 'models.db'}"
    model = train(TrainingSpec("nb"), str(csv_file))
    assert model.metadata[TRAINING_SPEC]["algo"] == "nb"
    with ModelStore(store, create=True) as opened:
        opened.publish("old", replace(model, metadata={k: v for k, v in model.metadata.items() if k != TRAINING_SPEC}))
    code, out, _ = run(capsys, "show", "old", "--store", store)
    assert code == 0 and "reproduce:" not in out


def test_auto_without_a_time_limit_chooses_the_same_model_every_run(csv_file):
    spec = TrainingSpec("auto", candidates=("nb", "tan", "kdb"), work_budget=None)
    first, second = train(spec, str(csv_file)), train(spec, str(csv_file))
    assert (first.algorithm, first.params, first.networks[0].arcs) == (
        second.algorithm,
        second.params,
        second.networks[0].arcs,
    )
    assert first.metadata[TRAINING_SPEC]["work_budget"] is None


def test_under_auto_the_summary_shows_the_cuts_auto_reads_with(capsys, csv_file, tmp_path, monkeypatch):
    """The column summary reads the data as auto does before its choice: its mdl:16 cuts the
    noise column MDL leaves whole, and the summary says so (not ``numeric, not cut``)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    store = f"sqlite:///{tmp_path / 'models.db'}"
    argv = ["fit", "--algo", "auto", "--candidates", "nb", "--work-budget", "none", "--data", str(csv_file)]
    code, _, err = run(capsys, *argv, "--name", "m", "--store", store)
    assert code == 0
    read = load(str(csv_file), preprocessing=Preprocessing(discretize=Method.parse("mdl:16")))
    noise = next(v for v in read.variables if v.name == "noise")
    assert len(noise.cuts) > 1
    (line,) = [line for line in err.splitlines() if line.lstrip().startswith("noise")]
    assert "not cut" not in line and f"numeric, {len(noise.cuts)} cuts" in line


def test_the_plan_chooses_the_data_path(csv_file, tmp_path):
    assert data_path(TrainingSpec("nb"), str(csv_file)).chunk_rows is None
    assert data_path(TrainingSpec("nb", chunk_rows=50), str(csv_file)).chunk_rows == 50
    assert data_path(TrainingSpec("nb", memory_budget=1000), str(csv_file)).chunk_rows  # over the budget: chunks
    over = data_path(TrainingSpec("k2", memory_budget=1000), str(csv_file))  # k2 needs the rows: whole, said why
    assert over.chunk_rows is None and "read whole" in (over.note or "")
    with pytest.raises(InvalidInput, match="a set of files trains"):
        data_path(TrainingSpec("k2"), str(tmp_path / "*.csv"))


def test_auto_reads_numbers_with_mdl16_unless_a_method_for_every_column_is_given():
    assert str(TrainingSpec("auto").method()) == "mdl:16"
    assert str(TrainingSpec("kdb").method()) == "mdl"
    assert str(TrainingSpec("auto", discretize="mdl").method()) == "mdl"
    per_column = TrainingSpec("auto", per_column={"noise": "equal-width:3"}).preprocessing()
    assert (str(per_column.method("noise")), str(per_column.method("signal"))) == ("equal-width:3", "mdl:16")


def test_every_flag_the_command_prints_is_one_of_trainer_fits():
    """A spec with every field away from its default gives a line ``trainer fit``'s parser
    takes, each field read back as it was; ``unknown`` prints nothing, since fit
    has no such flag (the policy is the scorer's: ``trainer predict --unknown``)."""
    from bnserve.trainer.cli import build_parser
    from bnserve.trainer.plan import command

    learner = TrainingSpec(
        "kdb",
        {"k": 2},
        "dirichlet:0.5",
        class_column="outcome",
        fmt="csv",
        delimiter=";",
        na_values=("?",),
        trim=False,
        nominal=("a",),
        numeric=("b",),
        ignore=("c",),
        force_class=True,
        discretize="equal-width:3",
        per_column={"d": "mdl"},
        missing="state",
        weight="w",
        unknown="error",
        precision="float32",
        max_columns=5,
        max_decompressed=1024,
        max_cpt_cells=None,
    )
    auto = TrainingSpec("auto", candidates=("nb", "tan"), ks=(1, 2), work_budget=None, seed=3)
    for spec in (learner, auto):
        words = shlex.split(command(spec))
        assert words[:2] == ["trainer", "fit"] and "--unknown" not in words
        args = build_parser().parse_args(words[1:])  # a flag fit does not have: a usage error
        assert args.command == "fit"
    assert "--max-cpt-cells none" in command(learner)
    assert build_parser().parse_args(shlex.split(command(learner))[1:]).weight == "w"
