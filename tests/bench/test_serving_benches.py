"""The serving benchmarks run end to end and report in the suite's shape.

Only the shape and the sanity of the figures are checked, never their size: timings
on a shared machine are not a test.
"""

from __future__ import annotations

import math

from bench import over_the_wire
from bench.serving import kdb_on_random_data, result

KEYS = {"item", "measurement", "ours", "peer", "ratio", "goal", "met"}


def test_the_benchmark_model_has_the_asked_shape():
    data, model = kdb_on_random_data(rows=500)
    assert len(data.features) == 50 and data.n_classes == 3
    assert model.algorithm == "kdb" and model.params["k"] == 2
    assert max(len(n.parents) for n in model.networks[0].nodes) == 3  # the class and 2 features


def test_result_is_ours_over_peer():
    r = result("x", "y", 3.0, 2.0, "≤ 2", True)
    assert set(r) == KEYS and r["ratio"] == 1.5


def test_over_the_wire_quick_run_reports_every_figure():
    results = over_the_wire.run(quick=True)
    assert results and all(set(r) == KEYS for r in results)
    for r in results:
        assert r["ours"] > 0 and r["peer"] > 0 and math.isclose(r["ratio"], r["ours"] / r["peer"])
        assert (r["met"] is None) == (r["goal"] == "—")


def test_h2load_calls_predict_through_grpc_framing_and_counts_the_calls():
    """The cheap load generator of bench/workers.py against a real `server serve`: its request
    body is a gRPC Predict the server answers (checked through a real gRPC client first), and
    a short run completes calls with none failed. CI installs h2load (.ci/run)."""
    from bench.serving import Server, temporary_store
    from bench.workers import H2Load
    from tests.tools import require_tool

    require_tool("h2load")  # Debian: nghttp2-client
    data, model = kdb_on_random_data(rows=500)
    load = H2Load([v.name for v in data.features], data.X[0].tolist(), callers=2)
    try:
        with temporary_store(model) as url, Server(url) as server:
            load.check(server)
            figures = load.run(server, 1.0)
    finally:
        load.close()
    assert figures["rate"] > 0 and figures["server_cores"] > 0 and figures["server_cpu_per_call"] > 0


def test_on_dask_quick_run_reports_every_figure():
    """bench/on_dask.py end to end on a small data set: real LocalClusters, the same model each time."""
    from bench import on_dask

    results = on_dask.run(quick=True, rows=20_000, files=4)
    assert len(results) == 10
    assert [r["measurement"].split(":")[0] for r in results[2:6]] == [
        "the speed-up the split allows",
        "worker CPU s",
        "worker CPU s",
        "trainer CPU s",
    ]
    assert all(r["ours"] > 0 and r["peer"] > 0 for r in results)
    assert results[-1]["met"] is True, "the fits on and off the cluster learned different models"


def test_batch_scoring_quick_run_reports_every_figure():
    """bench/batch_scoring.py end to end on a small file: real `trainer fit` and `trainer
    predict` processes, whose Parquet output must hold predict_proba's figures."""
    from bench import batch_scoring

    results = batch_scoring.run(quick=True, rows=5_000)
    assert len(results) == 5 and all(set(r) == KEYS for r in results)
    assert all(r["ours"] > 0 and r["peer"] > 0 for r in results)
    assert results[-1]["met"] is True, "trainer predict's probabilities differ from predict_proba's"


def test_wire_codec_quick_run_reports_every_figure():
    """bench/wire_codec.py in process: one figure per request size, each with its floor."""
    from bench import wire_codec

    results = wire_codec.run(quick=True)
    assert len(results) == len(wire_codec.SIZES) and all(set(r) == KEYS for r in results)
    assert all(r["ours"] > 0 and r["peer"] > 0 and r["met"] is None for r in results)


def test_the_baseline_server_runs_the_code_of_its_commit():
    """bench/baseline.py: a folder on PYTHONPATH imports bnserve as SYNC_SERVER_COMMIT had it
    (the thread-pool server), not the installed code (the asyncio server)."""
    import os
    import subprocess
    import sys

    import pytest

    from bench.baseline import SYNC_SERVER_COMMIT, available, baseline_code

    if not available(SYNC_SERVER_COMMIT):
        pytest.skip("this clone does not hold the baseline commit")
    probe = "import bnserve.server.app as app; print(app.__file__); print('grpc.aio' in open(app.__file__).read())"
    with baseline_code(SYNC_SERVER_COMMIT) as path:
        out = subprocess.run(
            [sys.executable, "-c", probe],
            env={**os.environ, "PYTHONPATH": str(path)},
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert out == [str(path / "bnserve" / "server" / "app.py"), "False"]


def test_the_baseline_commands_run_the_code_of_their_commit():
    """bench/baseline.py's ``trainer`` of SPEED_ISSUE_COMMIT runs that commit's code (its CLI had
    ``main``, not ``run``); imported as multiprocessing's spawn imports a parent's main file
    (``--jobs`` workers), it does not run the command line again."""
    import subprocess
    import sys

    import pytest

    from bench.baseline import SPEED_ISSUE_COMMIT, available, baseline_code, baseline_commands

    if not available(SPEED_ISSUE_COMMIT):
        pytest.skip("this clone does not hold the baseline commit")
    with baseline_code(SPEED_ISSUE_COMMIT) as code, baseline_commands(code) as commands:
        trainer = str(commands / "trainer")
        assert subprocess.run([trainer, "--version"], capture_output=True, text=True, check=True).stdout.startswith(
            "trainer "
        )
        probe = (
            f"import runpy; runpy.run_path({trainer!r}, run_name='__mp_main__'); "
            "import bnserve.trainer.cli as cli; print(cli.__file__)"
        )
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        assert out.split() == [str(code / "bnserve" / "trainer" / "cli.py")]


def test_many_models_tiny_run_reports_every_figure():
    """bench/many_models.py end to end with 6 models besides the target: real servers (eager,
    lazy, one model), the poll probe on our code and, when the clone holds it, the earlier commit's."""
    from bench import many_models
    from bench.baseline import MANY_MODELS_BASE_COMMIT, available

    results = many_models.run(quick=True, models=6)
    assert len(results) == (9 if available(MANY_MODELS_BASE_COMMIT) else 7)
    assert all(set(r) == KEYS for r in results)
    assert all(r["ours"] > 0 and r["peer"] > 0 for r in results)
    # goals: the two starts (eager, lazy) against one model's, and the single-row p50; the rest are figures
    with_goal = [r["met"] is not None for r in results]
    assert with_goal == [True, True] + [False] * (len(results) - 3) + [True]
    assert "6 models" in results[0]["measurement"]
    # the servers' CPU seconds at SERVING beside the wall seconds: a loaded machine moves them less
    assert [r["measurement"] for r in results[2:4]] == [
        f"server CPU s at SERVING, 6 models ({how}) vs 1 model" for how in ("eager", "--compile lazy")
    ]


def test_the_mix_of_many_models_spans_the_sizes():
    from bench.many_models import mixed_model

    mix = [mixed_model(i) for i in range(12)]
    features = [len(m.features) for m in mix]
    parents = [max(len(n.parents) for n in m.networks[0].nodes) for m in mix]
    assert min(features) >= 5 and max(features) <= 60 and len(set(features)) > 6
    assert set(parents) == {1, 2, 3}  # NB (the class), TAN (+1 feature), KDB k = 2 (+2)
