"""``--jobs N`` is the cores a fit may use: the parse's threads follow it, and each process
that counts a part runs on one core of its own."""

from __future__ import annotations

import os
import threading

import pytest

from bnserve.trainer import cores
from bnserve.trainer.cli.parser import main
from bnserve.trainer.data import parallel
from bnserve.trainer.io import delimited


@pytest.fixture
def many_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)


def test_outside_a_limit_every_available_core_and_inside_at_most_the_limit(many_cores):
    assert cores.cores() == cores.available() == 8
    with cores.limited(1):
        assert cores.cores() == 1
        with cores.limited(3):
            assert cores.cores() == 3
        assert cores.cores() == 1
    with cores.limited(64):  # never more than the process may run on
        assert cores.cores() == 8
    assert cores.cores() == 8


def test_the_parse_threads_follow_the_limit(many_cores):
    assert delimited._parse_workers() == delimited.PARSE_THREADS
    with cores.limited(2):
        assert delimited._parse_workers() == 2
    with cores.limited(1):
        assert delimited._parse_workers() == 1


def test_a_process_counting_a_part_runs_on_one_core(many_cores):
    """What ``--jobs N``'s processes run (``_alone``) sees one core, whatever its caller's limit."""
    assert parallel._alone(cores.cores) == 1
    with cores.limited(4):
        assert parallel._alone(cores.cores) == 1


def test_fit_jobs_1_parses_on_one_thread_and_the_default_on_every_core(tmp_path, monkeypatch, many_cores):
    """The CLI runs the fit under ``--jobs``: a file parsed in pieces (over 1 MiB, no quote)
    is parsed by one thread with --jobs 1, and by a thread per core by default."""
    monkeypatch.setattr(delimited, "PIECE_BYTES", 1 << 12)
    path = tmp_path / "rows.csv"
    path.write_text("a,b,class\n" + "".join(f"{i % 3},{i % 5},{'xy'[i % 2]}\n" for i in range(20_000)))
    seen: list[set[str]] = []
    real = delimited.pa_csv.read_csv

    def read_csv(*args, **kwargs):
        seen[-1].add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(delimited.pa_csv, "read_csv", read_csv)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    for jobs in (["--jobs", "1"], []):
        seen.append(set())
        assert main(["fit", "--algo", "nb", "--data", str(path), "--name", "m", "--store", store, *jobs]) == 0
    one, default = seen
    assert len(one) == 1 and len(default) > 1


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_ordered_map_gives_the_results_in_order_at_most_two_a_thread_ahead(threads):
    """The order is the items', whichever call ends first; what runs or waits at once is at
    most two calls a thread ahead of the one taken; one thread: the calls run here."""
    import time

    taken, started, callers = [], [], set()

    def work(i: int) -> int:
        started.append(i)
        callers.add(threading.current_thread().name)
        time.sleep(0.001 * (i % 3))  # later items may end first
        return i * i

    with cores.ordered_map(threads, "testing") as mapped:
        for i, result in enumerate(mapped(work, range(20))):
            assert result == i * i
            assert max(started) <= i + 2 * threads
            taken.append(result)
    assert taken == [i * i for i in range(20)]
    assert (callers == {threading.current_thread().name}) == (threads == 1)


def test_family_counts_on_threads_are_each_familys_own_in_order(monkeypatch):
    """Over more than ``BLOCK_ROWS`` rows the families are counted on the fit's cores, a block
    at a time: each table the one counted alone in one pass, in the order asked."""
    import numpy as np

    from bnserve.trainer.stats import counts, joint_counts
    from tests.data_helpers import make

    rng = np.random.default_rng(0)
    data = make(list(rng.integers(-1, 3, (4, 500))), [3] * 4, rng.integers(0, 2, 500), 2)  # -1: missing
    families = [[0, 1, -1], [2, -1], [3, 0, 2, -1], [1, 3, 2, 0, -1]]
    alone = [
        joint_counts([data.y if j < 0 else data.X[:, j] for j in f], [2 if j < 0 else 3 for j in f]) for f in families
    ]
    monkeypatch.setattr(counts, "BLOCK_ROWS", 100)
    with cores.limited(2):
        threaded = data.family_counts(families)
    assert all(np.array_equal(got, want) for got, want in zip(threaded, alone, strict=True))


def test_counts_go_on_the_fits_cores_over_more_than_one_block_of_rows():
    """The one rule for counts of rows held in memory (``counting_threads``): one thread up to a
    block of rows, the cores the fit may use beyond it."""
    from bnserve.trainer.stats.counts import BLOCK_ROWS, counting_threads

    with cores.limited(2):
        assert [counting_threads(BLOCK_ROWS), counting_threads(BLOCK_ROWS + 1)] == [1, 2]
        assert [counting_threads(100, block_rows=100), counting_threads(101, block_rows=100)] == [1, 2]
