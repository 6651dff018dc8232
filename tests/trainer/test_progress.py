"""Progress: bars on a terminal from the CLI, silence everywhere else.

The CLI is run in a real pseudo-terminal (its stderr the pty's slave end, with a window
size, as a terminal has), beside a pipe and ``--quiet``; library calls are checked to
report nothing even on a terminal. Each place that reports is checked with a recording
reporter: what stages it opens, their totals, and that the updates add up to them.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios

import numpy as np
import pytest

from bnserve.trainer import progress
from bnserve.trainer.auto import search
from bnserve.trainer.data import Preprocessing, load
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from bnserve.trainer.fit import fit
from bnserve.trainer.io import read_table
from bnserve.trainer.progress import reporting, stage
from tests.data_helpers import dataset_path, write
from tests.trainer.conftest import Recorder

CAR = str(dataset_path("car"))
# auto on car, kept short: stage 1 of nb and tan, Laplace only
AUTO_FIT = ["fit", "--algo", "auto", "--candidates", "tan", "--estimator", "laplace", "--data", CAR, "--name", "car"]
PUBLISHED = "published car version 1 (tan); aliases: none\n"


def _trainer(argv: list[str], cwd, stderr_terminal: bool) -> tuple[int, str, bytes]:
    """``trainer ARGV`` in a subprocess: see ``_python``."""
    return _python(
        "import sys; from bnserve.trainer.cli import main; sys.exit(main(sys.argv[1:]))", argv, cwd, stderr_terminal
    )


def _python(script: str, argv: list[str], cwd, stderr_terminal: bool) -> tuple[int, str, bytes]:
    """``python -c SCRIPT ARGV`` in a subprocess, stdout a pipe, stderr a pty's slave end (a
    terminal of 100 columns) or a pipe: (exit code, stdout, every byte written to stderr)."""
    command = [sys.executable, "-c", script, *argv]
    env = {**os.environ, "TERM": "xterm"}
    if not stderr_terminal:
        done = subprocess.run(command, cwd=cwd, capture_output=True, env=env)
        return done.returncode, done.stdout.decode(), done.stderr
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty has 0 columns
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    out = child.stdout.read().decode()
    child.stdout.close()
    return child.wait(), out, err


def test_fit_auto_shows_bars_on_a_terminal(tmp_path):
    code, out, err = _trainer([*AUTO_FIT, "--store", f"sqlite:///{tmp_path / 'm.db'}"], tmp_path, True)
    assert (code, out) == (0, PUBLISHED)
    text = err.decode()
    assert f"reading {CAR}" in text
    assert "auto: structures" in text and "/2 [" in text  # nb and tan
    assert "candidate" in text and "%|" in text
    assert "\r" in text  # drawn over itself, and cleared at the end (tqdm leave=False)
    assert "Traceback" not in text


def test_fit_auto_writes_nothing_else_to_a_pipe(tmp_path):
    code, out, err = _trainer([*AUTO_FIT, "--store", f"sqlite:///{tmp_path / 'm.db'}"], tmp_path, False)
    assert (code, out, err) == (0, PUBLISHED, b"")


def test_quiet_silences_the_bars_on_a_terminal(tmp_path):
    code, out, err = _trainer([*AUTO_FIT, "--quiet", "--store", f"sqlite:///{tmp_path / 'm.db'}"], tmp_path, True)
    assert (code, out, err) == (0, PUBLISHED, b"")


def test_evaluate_shows_its_folds_on_a_terminal_and_quiet_silences_them(tmp_path):
    argv = ["evaluate", "--algo", "nb,tan", "--folds", "3", "--data", CAR]
    code, out, err = _trainer(argv, tmp_path, True)
    assert code == 0 and "nb " in out and "tan " in out
    assert f"cross-validating {CAR}" in err.decode() and "/6 [" in err.decode()  # 2 learners x 3 folds
    code, quiet_out, err = _trainer([*argv, "-q"], tmp_path, True)
    assert (code, err) == (0, b"")

    def figures(text):  # all but the timings
        return [line.split()[:5] for line in text.splitlines()]

    assert figures(quiet_out) == figures(out)


def test_library_use_is_silent_even_on_a_terminal(tmp_path):
    """``fit`` and auto called from Python (a notebook's kernel may have a terminal) show nothing."""
    script = (
        "from bnserve.trainer.data import load; from bnserve.trainer.fit import fit; "
        "from bnserve.trainer.auto import fit_auto; "
        f"data = load({CAR!r}); fit('hc', data); fit('fss', data); "
        "print(fit_auto(data, ['tan'], estimators=['laplace']).algorithm)"
    )
    code, out, err = _python(script, [], tmp_path, True)
    assert (code, err) == (0, b"") and out.strip() in ("nb", "tan", "blend")


def test_no_reporter_no_bar_and_reporting_holds_for_its_block_only():
    recorder = Recorder()
    with stage("outside") as bar:
        assert bar is progress.SILENT
    with reporting(recorder):
        with stage("inside", 3, "step") as bar:
            bar.update(2)
        with reporting(None), stage("silenced") as bar:
            assert bar is progress.SILENT
    with stage("after") as bar:
        assert bar is progress.SILENT
    assert recorder.stages == [["inside", 3, "step", 2, True]]


def test_terminal_bars_only_on_a_terminal(tmp_path):
    with open(tmp_path / "log", "w") as log:
        assert progress.terminal_bars(log) is None
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as terminal:
            assert progress.terminal_bars(terminal) is not None
    finally:
        os.close(master)


def test_reading_reports_the_bytes_of_the_file(tmp_path):
    recorder = Recorder()
    csv = write(tmp_path, "a,b,class\n" + "x,1,p\ny,2,q\n" * 5000)
    pq = tmp_path / "d.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq_io

    pq_io.write_table(pa.table({"a": ["x", "y"] * 100, "class": ["p", "q"] * 100}), pq)
    arff = write(tmp_path, "@relation r\n@attribute a {x,y}\n@attribute class {p,q}\n@data\n" + "x,p\n" * 100, "d.arff")
    with reporting(recorder):
        for source in (CAR, csv, str(pq), arff):
            read_table(source)
    sizes = [os.path.getsize(s) for s in (CAR, csv, pq, arff)]  # car: the gzipped bytes
    assert recorder.stages == [[f"reading {s}", n, "B", n, True] for s, n in zip((CAR, csv, str(pq), arff), sizes)]


def test_the_streaming_passes_report_each_part_and_the_rows_of_each(tmp_path):
    for name in ("a.csv", "b.csv"):
        write(tmp_path, "a,b,class\n" + "x,1,p\ny,2,q\nx,3,q\n" * 40, name)
    pattern = str(tmp_path / "*.csv")
    recorder = Recorder()
    with reporting(recorder):
        streamed = load_streamed(pattern, None, Preprocessing(), None, 50)
        fit("kdb", streamed, k=1)
    passes = [(d, total, unit, done) for d, total, unit, done, _ in recorder.stages if unit == "part"]
    assert passes == [
        (f"reading {pattern}", 2, "part", 2),
        (f"counting pairs of {pattern}", 2, "part", 2),
        (f"counting families of {pattern}", 2, "part", 2),
    ]
    rows = [s for s in recorder.stages if s[2] == "row"]
    assert [s[0] for s in rows] == [str(tmp_path / n) for n in ("a.csv", "b.csv")] * 3
    assert all(s[3] == 120 and s[4] for s in rows)  # 120 rows a file, counted chunk by chunk


def test_parts_counted_by_processes_are_reported_here_and_the_workers_report_nothing(tmp_path, monkeypatch):
    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    rng = np.random.default_rng(3)
    lines = [
        f"{a},{b},{c}"
        for a, b, c in zip(rng.choice(list("xyz"), 900), rng.integers(0, 5, 900), rng.choice(["p", "q"], 900))
    ]
    path = write(tmp_path, "a,b,class\n" + "\n".join(lines) + "\n")
    recorder = Recorder()
    with reporting(recorder):
        load_streamed(path, None, Preprocessing(), None, 64, jobs=2)
    assert [(s[1], s[2], s[3]) for s in recorder.stages] == [(2, "part", 2)] * 2
    assert not [s for s in recorder.stages if s[2] == "row"]


@pytest.mark.parametrize(
    ("algo", "prefix", "unit"),
    [
        ("fss", "greedy search", "candidate"),
        ("bsej", "greedy search", "candidate"),
        ("k2-as", "greedy search", "candidate"),
        ("hc", "hill climbing", "move"),
        ("k2", "k2: parents", "node"),
        ("skdb", "skdb: leave-one-out", "row"),
    ],
)
def test_structure_searches_report_their_steps(algo, prefix, unit):
    data = load(CAR)
    recorder = Recorder()
    with reporting(recorder):
        fit(algo, data)
    found = recorder.named(prefix)
    assert found and all(s[2] == unit and s[3] > 0 and s[4] for s in found)
    if algo == "k2":
        assert [(s[1], s[3]) for s in found] == [(7, 7)]  # every node of car, the class too
    if algo == "skdb":
        assert [(s[1], s[3]) for s in found] == [(1728, 1728)]


def test_auto_reports_its_candidates_and_their_folds():
    data = load(CAR)
    recorder = Recorder()
    with reporting(recorder):
        found = search(data, ["tan"], estimators=["laplace", "dirichlet:0.5"], folds=3)
    assert [s[:4] for s in recorder.named("auto: ")] == [
        ["auto: structures", 2, "candidate", 2],
        ["auto: estimators", 2, "candidate", 2],
    ]
    folds = [s for s in recorder.stages if s[2] == "fold"]
    assert sorted(s[0] for s in folds) == [
        "nb estimator=dirichlet:0.5",
        "nb estimator=laplace",
        "tan estimator=dirichlet:0.5",
        "tan estimator=laplace",
    ]
    assert len(folds) == len(found.tried) + len(found.dropped) == 4
    assert found.dropped == ("nb estimator=dirichlet:0.5",)  # behind tan: its last fold is not fitted
    assert all(s[1] == 3 and s[3] == (2 if s[0] in found.dropped else 3) for s in folds)


def test_cross_validation_reports_every_fold_of_every_learner():
    data = load(CAR)
    recorder = Recorder()
    with reporting(recorder):
        cross_validate_many([("nb", {}), ("tan", {})], data, dataset="car", folds=4, repeats=2)
    assert [s[:5] for s in recorder.named("cross-validating")] == [["cross-validating car", 16, "fold", 16, True]]


def test_batch_scoring_reports_the_rows_of_each_chunk(tmp_path):
    from bnserve.trainer.scoring import score_file

    model = fit("nb", load(CAR))
    recorder = Recorder()
    with reporting(recorder):
        scored = score_file(model, CAR, str(tmp_path / "out.csv"), chunk_rows=500)
    assert recorder.named("scoring") == [["scoring", None, "rows", 1728, True]]
    assert scored.rows == 1728


def test_predict_quiet_silences_its_bars(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        _trainer(["fit", "--algo", "nb", "--data", CAR, "--name", "car", "--store", url, "-q"], tmp_path, False)[0] == 0
    )
    code, out, err = _trainer(
        ["predict", "car", "--data", CAR, "--out", str(tmp_path / "o.csv"), "--store", url, "--quiet"], tmp_path, True
    )
    assert code == 0 and b"scoring" not in err and b"%|" not in err
