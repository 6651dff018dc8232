"""``trainer predict --out``, the real command in a subprocess: it never overwrites its input
(same inode, through a link too), keeps an existing file's mode, refuses a read-only file,
a dangling link and special files, writes through a symbolic link, and leaves no partial
file behind on an error, SIGTERM or SIGINT."""

from __future__ import annotations

import gzip
import os
import signal
import stat
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

TRAINER = str(Path(sys.executable).parent / "trainer")


def trainer(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAINER, *argv], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, str, Path]:
    """(a directory, a store holding model m fitted on chess, chess as a CSV file)."""
    root = tmp_path_factory.mktemp("out")
    store = f"sqlite:///{root}/models.db"
    done = trainer(
        "fit", "--algo", "nb", "--data", "builtin:chess", "--class", "class", "--name", "m", "--store", store
    )
    assert done.returncode == 0, done.stderr
    data = root / "chess.csv"
    data.write_bytes(
        gzip.decompress(resources.files("bnserve.trainer.io.datasets").joinpath("chess.csv.gz").read_bytes())
    )
    return root, store, data


def predict(store: str, data: Path, out: Path | str, *flags: str) -> subprocess.CompletedProcess:
    return trainer("predict", "m", "--data", str(data), "--out", str(out), "--store", store, "-q", *flags)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".part" in p.name)


@pytest.mark.parametrize("how", ["same path", "symbolic link", "hard link"])
def test_the_input_is_never_the_output(setup, how, tmp_path):
    _, store, chess = setup
    data = tmp_path / "data.csv"
    data.write_bytes(chess.read_bytes())
    out = {"same path": data, "symbolic link": tmp_path / "link.csv", "hard link": tmp_path / "hard.csv"}[how]
    if how == "symbolic link":
        out.symlink_to(data)
    elif how == "hard link":
        os.link(data, out)
    done = predict(store, data, out)
    assert done.returncode == 1 and "it is the input file" in done.stderr, done.stderr
    assert data.read_bytes() == chess.read_bytes() and leftovers(tmp_path) == []


def test_a_read_only_file_is_refused_and_a_private_one_stays_private(setup, tmp_path):
    _, store, chess = setup
    read_only, private = tmp_path / "ro.csv", tmp_path / "private.csv"
    for path, mode in ((read_only, 0o444), (private, 0o600)):
        path.write_text("old\n")
        path.chmod(mode)
    done = predict(store, chess, read_only)
    assert done.returncode == 1 and "read-only" in done.stderr, done.stderr
    assert read_only.read_text() == "old\n" and stat.S_IMODE(read_only.stat().st_mode) == 0o444
    done = predict(store, chess, private)
    assert done.returncode == 0, done.stderr
    assert private.read_text().startswith('"predicted"') and stat.S_IMODE(private.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_special_files_are_refused(setup, tmp_path):
    _, store, chess = setup
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    (tmp_path / "dir.csv").mkdir()
    for out, kind in ((fifo, "a FIFO"), (tmp_path / "dir.csv", "a directory")):
        done = predict(store, chess, out)
        assert done.returncode == 1 and f"not a regular file ({kind})" in done.stderr, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and leftovers(tmp_path) == []


def test_a_symbolic_link_is_written_through_and_stays_a_link(setup, tmp_path):
    _, store, chess = setup
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    link.symlink_to(target)
    done = predict(store, chess, link)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and target.read_text().startswith('"predicted"')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere" / "x.csv")
    done = predict(store, chess, dangling)
    assert done.returncode == 1 and "does not exist" in done.stderr, done.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_way_removes_the_partial_file(setup, tmp_path, signum):
    _, store, chess = setup
    header, *rows = chess.read_text().splitlines(keepends=True)
    big = tmp_path / "big.csv"
    with open(big, "w") as f:
        f.write(header)
        for _ in range(100):  # 320k rows: seconds of scoring, 500 rows a chunk
            f.writelines(rows)
    out = tmp_path / "scores.csv"
    out.write_text("old\n")
    command = [TRAINER, "predict", "m", "--data", str(big), "--out", str(out), "--store", store, "-q"]
    proc = subprocess.Popen([*command, "--chunk-rows", "500"], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # the partial file appears once the first chunk is scored
            if leftovers(tmp_path) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert leftovers(tmp_path) == [f".scores.csv.part-{proc.pid}"], "the partial file never appeared"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    assert leftovers(tmp_path) == [] and out.read_text() == "old\n"
