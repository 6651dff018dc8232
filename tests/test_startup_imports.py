"""A command line that only prints its version or help starts at once: it imports no
database layer, no data reader, no statistics and no learner (issue 30). Each command runs
its entry point's ``main`` in a fresh interpreter, which then lists ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bnserve.trainer.learners import index

# Top-level packages a help or version line has no use for (SQLAlchemy alone took 0.2 s).
HEAVY = (
    "sqlalchemy",
    "alembic",
    "pyarrow",
    "scipy",
    "pandas",
    "dask",
    "distributed",
    "fsspec",
    "sklearn",
    "cryptography",
)
LEARNER_MODULES = {f"bnserve.trainer.learners.{m}" for m in index.MODULES.values()} | {
    "bnserve.trainer.learners.search"
}

COMMANDS = [
    ("bnserve.trainer.cli", ["--version"]),
    ("bnserve.trainer.cli", ["--help"]),
    ("bnserve.trainer.cli", ["fit", "--help"]),
    ("bnserve.server.cli", ["--help"]),
    ("bnserve.server.cli", ["predict", "--help"]),
]

CHILD = """
import contextlib, io, json, sys
from {module} import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main({argv!r})
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}}))
"""


def imported(module: str, argv: list[str]) -> dict:
    child = CHILD.format(module=module, argv=argv)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize(("module", "argv"), COMMANDS, ids=lambda c: " ".join(c) if isinstance(c, list) else c)
def test_version_and_help_import_no_database_reader_statistics_or_learner(module, argv):
    result = imported(module, argv)
    assert result["code"] in (0, None)
    heavy = sorted({m.split(".")[0] for m in result["modules"]} & set(HEAVY))
    learners = sorted(m for m in result["modules"] if m.startswith(tuple(LEARNER_MODULES)))
    assert heavy == [] and learners == []


@pytest.mark.parametrize(("module", "argv"), COMMANDS, ids=lambda c: " ".join(c) if isinstance(c, list) else c)
def test_version_and_help_import_no_numpy(module, argv):
    """trainer's flags name the missing-value and unseen-value policies, the table precisions
    and the model file formats, server's its limits and cache sizes, from modules that import
    no numpy (about 0.15 s of a start); the server's metrics (numpy, prometheus_client) load
    with the server."""
    assert "numpy" not in imported(module, argv)["modules"]


def test_the_facades_names_import_no_database_until_a_store_is_opened():
    child = "import sys; from bnserve import Client, load, load_model, publish; print('sqlalchemy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def test_fit_help_still_lists_every_algorithm_and_parameter():
    out = imported("bnserve.trainer.cli", ["fit", "--help"])["out"]
    assert all(name in out for name in index.MODULES) and "--k K" in out and "--tabu-steps" in out


FIT_NEEDS_NONE_OF = ("alembic", "mako", "pygments", "scipy", "pandas", "dask", "distributed", "fsspec", "sklearn")


def test_fit_nb_and_predict_with_a_current_store_import_only_what_they_use(tmp_path):
    """Reading a local CSV (numeric columns discretised), naive Bayes and publishing into a
    store at this code's schema: no migrations tool, no scipy, no pandas, no Dask, one learner
    and not auto's search;
    then scoring the file with it, to CSV and to Parquet, with no learner at all."""
    from bnserve.store.db import ModelStore

    data = tmp_path / "rows.csv"
    data.write_text(
        "colour,size,class\n"
        + "".join(
            f"{c},{i % 7}.5,{k}\n"
            for i, (c, k) in enumerate([("red", "a"), ("blue", "b"), ("red", "a"), ("green", "b")] * 25)
        )
    )
    url = f"sqlite:///{tmp_path / 'store.db'}"
    ModelStore(url, create=True).dispose()
    result = imported(
        "bnserve.trainer.cli", ["fit", "--algo", "nb", "--data", str(data), "--name", "m", "--store", url]
    )
    assert result["code"] == 0 and "published m version 1" in result["out"]
    heavy = sorted({m.split(".")[0] for m in result["modules"]} & set(FIT_NEEDS_NONE_OF))
    learners = sorted(m for m in result["modules"] if m.startswith(tuple(LEARNER_MODULES)))
    assert heavy == [] and learners == ["bnserve.trainer.learners.naive_bayes"]
    assert "bnserve.trainer.auto" not in result["modules"]  # auto's search: for --algo auto only

    for out in ("scores.csv", "scores.parquet"):  # batch scoring writes through Arrow, never pandas
        argv = ["predict", "m", "--data", str(data), "--keep", "colour", "--out", str(tmp_path / out), "--store", url]
        result = imported("bnserve.trainer.cli", argv)
        assert result["code"] == 0 and (tmp_path / out).stat().st_size > 0
        heavy = sorted({m.split(".")[0] for m in result["modules"]} & set(FIT_NEEDS_NONE_OF))
        assert heavy == [] and not any(m.startswith(tuple(LEARNER_MODULES)) for m in result["modules"])
