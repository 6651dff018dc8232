"""The training limits reach every fit the command line makes (issue 26): ``--max-cpt-cells``
on ``trainer fit`` and ``trainer evaluate``, ``--memory-budget`` on ``trainer fit`` (``none``:
no limit), and auto's skip notes on stderr, silenced by ``--quiet``. Through the real CLI.

The file: two identifier-like columns of 1,500 states each, so kdb k=1's CPT of one with
the other as parent holds 1,500 × 2 × 1,500 = 4,500,000 cells, past the default
``--max-cpt-cells`` (4,194,304) yet small enough (108 MB) to build with ``none``; for auto,
the same with 100 states a column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bnserve.store.db import ModelStore
from bnserve.trainer.cli import main as trainer
from bnserve.trainer.learners.sizing import CPT_CELLS_FLAG, DEFAULT_MAX_CPT_CELLS, MEMORY_BUDGET_FLAG
from bnserve.trainer.plan import spec_of

STATES, ROWS = 1500, 3000


def write_file(path: Path, states: int) -> str:
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, states, ROWS), rng.integers(0, states, ROWS)
    a[:states] = b[:states] = np.arange(states)  # every state seen
    cls = rng.integers(0, 2, ROWS)
    lines = ["a,b,colour,cls"] + [
        f"id{a[i]},id{b[i]},{'red' if rng.random() < 0.5 + 0.2 * cls[i] else 'blue'},{'yes' if cls[i] else 'no'}"
        for i in range(ROWS)
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> str:
    assert STATES * 2 * STATES > DEFAULT_MAX_CPT_CELLS
    return write_file(tmp_path_factory.mktemp("limits") / "wide.csv", STATES)


def fit(tmp_path: Path, data: str, *flags: str) -> int:
    store = f"sqlite:///{tmp_path / 'models.db'}"
    return trainer(["fit", "--data", data, "--name", "m", "--store", store, *flags])


def test_fit_refuses_past_max_cpt_cells_naming_the_flag_and_none_lifts_it(wide, tmp_path, capsys):
    assert fit(tmp_path, wide, "--algo", "kdb", "--k", "1", "--quiet") == 1
    err = capsys.readouterr().err
    assert f"past {CPT_CELLS_FLAG} {DEFAULT_MAX_CPT_CELLS:,}" in err
    assert fit(tmp_path, wide, "--algo", "kdb", "--k", "1", "--max-cpt-cells", "100", "--quiet") == 1
    assert f"past {CPT_CELLS_FLAG} 100;" in capsys.readouterr().err
    assert fit(tmp_path, wide, "--algo", "kdb", "--k", "1", "--max-cpt-cells", "none", "--quiet") == 0
    with ModelStore(f"sqlite:///{tmp_path / 'models.db'}") as store:
        model = store.load("m").model
    assert max(node.cpt.size for node in model.networks[0].nodes) == STATES * 2 * STATES
    spec = spec_of(model)
    assert spec is not None and spec.max_cpt_cells is None


def test_fit_honours_memory_budget_for_its_tables(wide, tmp_path, capsys):
    flags = ("--algo", "kdb", "--k", "1", "--max-cpt-cells", "none", "--quiet")
    assert fit(tmp_path, wide, *flags, "--memory-budget", "1MiB") == 1
    err = capsys.readouterr().err
    assert f"past {MEMORY_BUDGET_FLAG} 1.0 MiB" in err
    assert fit(tmp_path, wide, *flags, "--memory-budget", "none") == 0


def test_evaluate_honours_max_cpt_cells(wide, tmp_path, capsys):
    evaluate = ["evaluate", "--algo", "kdb", "--k", "1", "--data", wide, "--folds", "2", "--quiet"]
    assert trainer([*evaluate, "--max-cpt-cells", "100"]) == 1
    assert f"past {CPT_CELLS_FLAG} 100;" in capsys.readouterr().err
    assert trainer(evaluate) == 1  # the default refuses this file's kdb
    assert f"past {CPT_CELLS_FLAG} {DEFAULT_MAX_CPT_CELLS:,}" in capsys.readouterr().err
    assert trainer([*evaluate, "--max-cpt-cells", "none"]) == 0
    assert "kdb" in capsys.readouterr().out


def test_evaluate_test_file_honours_max_cpt_cells(wide, tmp_path, capsys):
    evaluate = ["evaluate", "--algo", "kdb", "--k", "1", "--data", wide, "--test", wide, "--quiet"]
    assert trainer([*evaluate, "--max-cpt-cells", "100"]) == 1
    assert f"past {CPT_CELLS_FLAG} 100;" in capsys.readouterr().err


@pytest.fixture(scope="module")
def narrow(tmp_path_factory) -> str:
    """The same shape with 100 states a column: kdb k=1's largest CPT 100 × 2 × 100 = 20,000
    cells, naive Bayes' 200: auto is quick, and --max-cpt-cells 1000 refuses kdb alone."""
    return write_file(tmp_path_factory.mktemp("narrow") / "narrow.csv", 100)


AUTO = ("--algo", "auto", "--candidates", "kdb", "--k", "1", "--work-budget", "none")


def test_auto_notes_its_skips_on_stderr_and_quiet_silences_them(narrow, tmp_path, capsys):
    assert fit(tmp_path, narrow, *AUTO) == 0  # within the default: nothing skipped
    assert "skipped" not in capsys.readouterr().err
    assert fit(tmp_path, narrow, *AUTO, "--max-cpt-cells", "1000") == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("trainer: note: auto: skipped kdb")]
    assert len(notes) == 1 and f"past {CPT_CELLS_FLAG} 1,000;" in notes[0]
    with ModelStore(f"sqlite:///{tmp_path / 'models.db'}") as store:
        assert store.load("m").model.metadata["selection"]["skipped_for_limits"]
    assert fit(tmp_path, narrow, *AUTO, "--max-cpt-cells", "1000", "--quiet") == 0
    assert "skipped" not in capsys.readouterr().err


def test_evaluate_auto_honours_max_cpt_cells_and_quiet(narrow, capsys):
    evaluate = ["evaluate", "--algo", "auto", "--candidates", "kdb", "--k", "1", "--data", narrow, "--folds", "2"]
    assert trainer(evaluate) == 0
    assert "skipped" not in capsys.readouterr().err
    assert trainer([*evaluate, "--max-cpt-cells", "1000"]) == 0
    assert "trainer: note: auto: skipped kdb k=1 estimator=laplace: " in capsys.readouterr().err
    assert trainer([*evaluate, "--max-cpt-cells", "1000", "--quiet"]) == 0
    assert "skipped" not in capsys.readouterr().err
