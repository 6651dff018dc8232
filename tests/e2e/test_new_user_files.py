"""A new user's files, as their tools write them (issue 26's "done when").

A credit table exported by R's ``write.csv`` (row names in an unnamed first column, missing
written ``NA``) and by pandas' ``to_csv`` (the index likewise, missing empty, whole numbers
with missing values written ``12.0``), with integer-coded levels and a test file holding
values the training file lacks. With default flags:

- every learner, and auto, trains on each export, the trainer's peak RSS under 1 GiB;
- the numeric columns are numeric (``NA`` is missing, not a state);
- ``trainer predict`` and a real ``server serve`` answer every row of the test file, the
  unseen values read as missing and counted (stderr, ``bnserve_unknown_values_total``),
  and agree with each other and with the model loaded back in Python.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bnserve import load
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.model import NUMERIC
from bnserve.trainer.learners.registry import LEARNERS
from tests.e2e.serving import run_cli, sample_value, scrape, serving
from tests.user_files import credit_frame, write_r_csv

GIB = 1 << 30
NUMBERS = ("Seniority", "Age", "Income", "Assets", "Debt", "Amount")  # numeric in the user's eyes
# runs the trainer CLI in this process for each argv of its stdin, and prints each exit code
# and then its own peak RSS, the peak of every fit it ran: VmHWM, not getrusage's ru_maxrss,
# which Linux carries over from the forking parent (this test process, which other tests may
# have grown past a gigabyte)
FITS = (
    "import json, sys\n"
    "from bnserve.trainer.cli import main\n"
    "codes = [main(argv) for argv in json.load(sys.stdin)]\n"
    "peak = int(next(line for line in open('/proc/self/status') if line.startswith('VmHWM:')).split()[1]) * 1024\n"
    "print(json.dumps({'codes': codes, 'rss': peak}))\n"
)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    where = tmp_path_factory.mktemp("exports")
    train, test = credit_frame(600, seed=21), credit_frame(150, seed=22, unseen=True)
    train.to_csv(where / "pandas.csv")
    test.to_csv(where / "pandas-test.csv")
    write_r_csv(train, where / "r.csv")
    write_r_csv(test, where / "r-test.csv")
    return where


def _fit_all(argvs: list[list[str]]) -> dict:
    import json

    done = subprocess.run(
        [sys.executable, "-c", FITS], input=json.dumps(argvs), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tool", ["r", "pandas"])
def test_every_learner_trains_the_export_with_default_flags_within_1_gib(exports, tool):
    store = f"sqlite:///{exports / f'every-{tool}.db'}"
    data = str(exports / f"{tool}.csv")
    ran = _fit_all(
        [["fit", "--algo", algo, "--data", data, "--name", algo, "--store", store, "-q"] for algo in LEARNERS]
    )
    assert ran["codes"] == [0] * len(LEARNERS), dict(zip(LEARNERS, ran["codes"]))
    assert ran["rss"] < GIB
    with ModelStore(store) as opened:
        model = opened.load("kdb").model
    kinds = {v.name: v.kind for v in model.features}
    assert all(kinds[name] == NUMERIC for name in NUMBERS), kinds
    assert "" not in kinds and len(kinds) == 12  # the row index is not a feature


@pytest.mark.parametrize("tool", ["r", "pandas"])
def test_auto_trains_the_export_with_default_flags_within_1_gib(exports, tool):
    store = f"sqlite:///{exports / f'auto-{tool}.db'}"
    ran = _fit_all(
        [["fit", "--algo", "auto", "--data", str(exports / f"{tool}.csv"), "--name", "auto", "--store", store]]
    )
    assert ran["codes"] == [0] and ran["rss"] < GIB


@pytest.fixture(scope="module")
def served(exports):
    """A kdb model of the R export in a store, and a real server on it."""
    store = f"sqlite:///{exports / 'served.db'}"
    fit = run_cli(
        "trainer",
        "fit",
        "--algo",
        "kdb",
        "--k",
        "2",
        "--data",
        str(exports / "r.csv"),
        "--name",
        "credit",
        "--store",
        store,
    )
    assert fit.returncode == 0, fit.stderr
    with serving(store) as served:
        yield store, predictor_pb2_grpc.PredictorStub(served.channel), served.metrics_port


def _scored(stdout: str) -> np.ndarray:
    header, *body = list(csv.reader(io.StringIO(stdout)))
    first = header.index("predicted") + 1
    return np.array([[float(v) for v in row[first:]] for row in body])


@pytest.mark.parametrize("tool", ["r", "pandas"])
def test_the_test_file_is_scored_whole_in_batch_by_the_server_and_in_python(exports, served, tool):
    store, stub, metrics_port = served
    test = exports / f"{tool}-test.csv"
    frame = pd.read_csv(test, index_col=0)  # as the user reads it back
    unseen_home = int((frame["Home"] == "caravan").sum())
    unseen_region = int((frame["Region"] == 12).sum())
    assert unseen_home and unseen_region

    batch = run_cli("trainer", "predict", "credit", "--data", str(test), "--store", store)
    assert batch.returncode == 0, batch.stderr
    expected = _scored(batch.stdout)
    assert expected.shape == (len(frame), 2)
    assert f"trainer: scored {len(frame)} rows" in batch.stderr
    counts = batch.stderr.splitlines()[-1]
    assert counts.startswith(f"trainer: {unseen_home + unseen_region} unknown values read as missing: ")
    assert f"Home {unseen_home} ('caravan')" in counts and f"Region {unseen_region} ('12')" in counts

    # the server, sent the raw texts of the file as a calling service holds them
    features = [c for c in frame.columns if c != "Status"]
    with open(test, newline="") as f:
        rows = list(csv.DictReader(f))
    before = _unknown_count(metrics_port, "Home")
    reply = stub.Predict(
        pb.PredictRequest(
            model="credit", instances=[pb.Instance(values={n: r[n] for n in features if r[n] != ""}) for r in rows]
        )
    )
    np.testing.assert_allclose([p.probabilities for p in reply.predictions], expected, rtol=0, atol=1e-12)
    assert _unknown_count(metrics_port, "Home") - before == unseen_home

    # and the model loaded back in a notebook
    classifier = load("credit", store)
    proba = classifier.predict_proba(frame[features])
    order = [list(classifier.classes_).index(c) for c in ("bad", "good")]
    np.testing.assert_allclose(proba[:, order], expected, rtol=0, atol=1e-12)


def _unknown_count(metrics_port: int, feature: str) -> float:
    try:
        return sample_value(scrape(metrics_port), "bnserve_unknown_values_total", model="credit", feature=feature)
    except AssertionError:  # no such series yet: none counted
        return 0.0
