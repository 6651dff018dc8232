"""Where the parts of a file trained in chunks are counted: here, one after another; by a
pool of local processes (``--jobs``); or by the workers of a Dask cluster (``--dask``).

Each part's work is a function of the reader and the part's number that returns counts;
the results come back in part order, whichever process or machine computed them, so the
caller sums them exactly as it would have counted the parts in turn. Dask reruns a part
whose worker died (up to its ``distributed.scheduler.allowed-failures``); past that, or
when the scheduler cannot be reached, the fit stops with a message saying so, before
anything is published.

Every call to the cluster is given at most ``timeout()`` seconds (``$BNSERVE_DASK_TIMEOUT``):
Dask's own connect timeout does not bound the handshake, so a scheduler that accepts and
never answers would hold the trainer for ever. While the parts are counted (for as long as
that takes) the scheduler is asked each such interval whether it is still there, with workers.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import math
import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from bnserve.store.errors import BnServeError, ClusterUnavailable, InvalidInput
from bnserve.trainer.cores import limited
from bnserve.trainer.progress import SILENT, Bar, stage

T = TypeVar("T")

TIMEOUT_ENV = "BNSERVE_DASK_TIMEOUT"
DEFAULT_TIMEOUT = 30.0  # seconds a Dask scheduler is given to answer each call
GRACE = 2.0  # seconds more, for a call given the timeout itself (Dask's connect) to say why it failed


def timeout() -> float:
    """Seconds a call to the Dask scheduler may take: ``$BNSERVE_DASK_TIMEOUT``, else 30."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds < math.inf):
        raise InvalidInput(f"${TIMEOUT_ENV}: {text!r} is not a number of seconds above 0")
    return seconds


def map_parts(
    work: Callable[..., T],
    reader: Any,
    n_parts: int,
    *args: Any,
    jobs: int = 1,
    dask: str | None = None,
    what: str = "counting",
    held: Held | None = None,
) -> list[T]:
    """``[work(reader, i, *args) for i in range(n_parts)]``, computed on the Dask cluster at
    ``dask``, else by ``jobs`` local processes, else here; each part done is reported as
    progress of the stage ``what``. With ``held`` (the cluster's, from ``hold_parts``):
    ``work(reader, i, *args, data of part i)``, run on the worker holding that data."""
    calls = [(reader, i, *args) for i in range(n_parts)]
    with stage(what, n_parts, "part") as bar:
        if dask:
            if held is not None:
                calls = [(*call, data) for call, data in zip(calls, held.futures)]
            return _on_cluster(dask, work, calls, bar)[0]
        if jobs > 1 and n_parts > 1:
            return _in_processes(jobs, work, calls, bar)
        return _counted((work(*call) for call in calls), bar)


def _in_processes(jobs: int, work: Callable[..., T], calls: list[tuple[Any, ...]], bar: Bar) -> list[T]:
    """``work(*call)`` of each call in the pool of ``jobs`` processes, in order; a process that
    died (killed, out of memory) stops the fit with a message saying so, and the pool is
    dropped, so that a next fit starts another."""
    try:
        return _counted(_pool(jobs).map(partial(_alone, work), *zip(*calls)), bar)
    except BrokenProcessPool:
        _POOLS.pop(jobs).shutdown(wait=False, cancel_futures=True)
        raise ClusterUnavailable(
            f"--jobs {jobs}: a process counting a part of the data ended abruptly (killed, or out of "
            "memory?); nothing was published"
        ) from None


def _alone(work: Callable[..., T], *call: Any) -> T:
    """``work(*call)`` in a context of its own, on one core: a process forked from the trainer
    reports no progress and no notes of its own, as a fork server's does not (``progress``),
    and is one of the ``--jobs`` cores (``cores``: its parse on one thread)."""
    return contextvars.Context().run(_on_one_core, work, *call)


def _on_one_core(work: Callable[..., T], *call: Any) -> T:
    with limited(1):
        return work(*call)


@dataclass(eq=False)
class Held:
    """Each part's data, held in the memory of the Dask worker that made it (futures): a
    pass given it (``map_parts``) runs there and is handed the data, with no file read and
    nothing sent. A part whose worker is lost is made again, by Dask, from the task that
    made it. The workers drop the data once this is dropped."""

    futures: list[Any]


def hold_parts(
    work: Callable[..., tuple[T, Any]],
    reader: Any,
    n_parts: int,
    *args: Any,
    dask: str,
    what: str,
    held: Held | None = None,
) -> tuple[list[T], Held]:
    """``work(reader, i, *args)`` of every part on the Dask cluster at ``dask`` (given the
    part's ``held`` data last, where it is), each returning (a result, data): the results,
    in part order, and the data, held where they were made."""
    calls = [(reader, i, *args) for i in range(n_parts)]
    if held is not None:
        calls = [(*call, data) for call, data in zip(calls, held.futures)]
    with stage(what, n_parts, "part") as bar:
        results, futures = _on_cluster(dask, work, calls, bar, hold=True)
    return results, Held(futures)


def map_held(dask: str, work: Callable[..., T], calls: list[tuple[Any, ...]]) -> list[T]:
    """``work(*call)`` for each call on the Dask cluster at ``dask``, a held part's future in
    a call handed its data (fetched from the worker holding it); not reported as a stage."""
    return _on_cluster(dask, work, calls, SILENT)[0]


def balance(dask: str, held: Held, rows: Sequence[int]) -> Held:
    """``held`` with parts moved between workers until each holds about its share of the
    ``rows`` (per part), by its threads: the later passes are counting, and run where the
    parts are, so a worker that read more parts in pass 1 (its files came sooner) would
    count longer. Each move sends one part once, to a worker chosen, not required; a part
    not yet in memory stays where Dask puts it."""
    client = _client(dask)
    where = _bounded(dask, "asking where the parts are", lambda: client.who_has(held.futures))
    threads = _bounded(dask, "asking for its workers", client.nthreads)
    holders = {i: where[f.key][0] for i, f in enumerate(held.futures) if where.get(f.key)}
    moves = _moves(holders, rows, threads)
    if not moves:
        return held
    futures = list(held.futures)

    def move() -> None:
        for i, w in moves.items():
            futures[i] = client.submit(_moved, futures[i], workers=[w], allow_other_workers=True, pure=False)

    _bounded(dask, "moving parts", move)
    return Held(futures)


def _moves(holders: dict[int, str], rows: Sequence[int], threads: dict[str, int]) -> dict[int, str]:
    """Which parts to move where (part: worker) so that the workers of ``threads`` hold about
    as many ``rows`` a thread, each part held by ``holders[part]`` (a worker gone since, or a
    part not listed, is left as it is). Each move takes the part that levels the most loaded
    and the least loaded workers best, while one is smaller than their gap."""
    holder = {i: w for i, w in holders.items() if w in threads}
    share = sum(rows[i] for i in holder) / max(sum(threads.values()), 1)
    load = {w: -share * n for w, n in threads.items()}  # rows past its share
    for i, w in holder.items():
        load[w] += rows[i]
    moves: dict[int, str] = {}
    while load:
        most, least = max(load, key=load.__getitem__), min(load, key=load.__getitem__)
        gap = load[most] - load[least]
        mine = [i for i, w in holder.items() if w == most and rows[i] < gap]
        if not mine:
            break
        i = min(mine, key=lambda i: abs(gap / 2 - rows[i]))
        holder[i], moves[i] = least, least
        load[most] -= rows[i]
        load[least] += rows[i]
    return moves


def _moved(data: Any) -> Any:
    return data


def _result(made: tuple[T, Any]) -> T:
    return made[0]


def _data(made: tuple[Any, Any]) -> Any:
    return made[1]


def _counted(results: Iterable[T], bar: Bar) -> list[T]:
    done = []
    for result in results:  # in part order, each as soon as it and those before it are done
        done.append(result)
        bar.update()
    return done


def connect(dask: str) -> None:
    """Connect to the Dask scheduler at ``dask`` now (importing ``distributed``: about half a
    second of one core), for the passes to come."""
    _client(dask)


def cluster_threads(dask: str) -> int:
    """The threads of the cluster's workers: how many parts it counts at once."""
    return _workers(dask, _client(dask), "asking for its workers")


_POOLS: dict[int, ProcessPoolExecutor] = {}


def _pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of ``jobs`` processes, kept for the next pass. Started by a fork server, not by
    forking this process, whose threads (pyarrow's) may hold locks; ``start_pool`` forks it
    while that cannot be."""
    if jobs not in _POOLS:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([WORK_MODULE])  # imported once, before the forks
        _POOLS[jobs] = ProcessPoolExecutor(jobs, mp_context=context)
    return _POOLS[jobs]


WORK_MODULE = "bnserve.trainer.data.streaming"  # the work the processes are given, imported before they start


def start_pool(jobs: int, fork: bool = False) -> None:
    """Start the ``jobs`` processes of the pool now, so that they are ready for the first pass.
    ``fork``: the caller has only imported modules, so this process runs no thread that may
    hold a lock but numpy's BLAS and pyarrow's allocator threads, which fork safely (at-fork
    handlers): the processes are forked from it here, with its imports, in a few milliseconds,
    as the standard library's own fork does (on Linux). Otherwise (or when another Python thread runs)
    they are started in the background by a fork server (importing numpy, pyarrow and the
    trainer: about a second of one core), which overlaps with this process's own reading; a
    caller that may end before using the pool calls ``settle`` first."""
    if jobs < 2 or jobs in _POOLS:
        return
    if fork and threading.active_count() == 1 and sys.platform == "linux":  # not macOS: its libraries run threads
        importlib.import_module(WORK_MODULE)  # once, here, rather than in each process
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"), initializer=_forked)
        _POOLS[jobs] = pool
        pool.submit(int).result()  # the first call forks them all, before the pool's own thread starts
        return
    pool = _pool(jobs)

    def start() -> None:  # each submit starts one process, waiting for the fork server to fork it
        with contextlib.suppress(Exception):  # shut already (``close``); the first pass says what failed
            for future in [pool.submit(int) for _ in range(jobs)]:
                future.result()

    thread = threading.Thread(target=start, name="starting the --jobs processes", daemon=True)
    _STARTING.append(thread)
    thread.start()


def _forked() -> None:
    """A process forked from the trainer ends on SIGTERM, as a fork server's does, rather than
    by the command's handler (``cli.parser``)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_STARTING: list[threading.Thread] = []


def settle() -> None:
    """Wait until the pool processes being started are running: a process that exits while
    one is still being forked leaves it to fail with a traceback on stderr."""
    while _STARTING:
        _STARTING.pop().join()


_CLIENTS: dict[str, Any] = {}


def close() -> None:
    """Shut the kept process pools and Dask clients. They are kept between passes of one fit
    and between fits of one session (a notebook, a harness), and end with the process; this
    ends them sooner. (A client whose scheduler stopped answering was dropped already.)"""
    settle()
    while _POOLS:
        _POOLS.popitem()[1].shutdown(cancel_futures=True)
    while _CLIENTS:
        _let_go(*_CLIENTS.popitem())


def _let_go(address: str, client: Any) -> None:
    """Close a client that is no longer kept, whatever its state. Closing one whose scheduler
    went away can fail inside Dask (its reconnection racing the close: a ValueError over TLS
    has been seen), or stall; it is dropped all the same, and nothing waits on it."""
    with contextlib.suppress(Exception):
        _bounded(address, "closing the client", client.close)


def _shown(dask: str, message: str | None = None) -> str:
    """The scheduler's address as printed (or ``message`` about it): any password in it hidden,
    by the store's rule."""
    from bnserve.store.db.url import redacted

    return redacted(dask, message)


class _Stalled(ClusterUnavailable):
    """The scheduler did not answer a call in time: it is asked nothing more."""


def _bounded(dask: str, doing: str, call: Callable[[], T]) -> T:
    """``call()``, a call to the scheduler at ``dask``, given at most ``timeout()`` seconds: run
    in a daemon thread, left behind if it stalls (Dask's calls cannot all be cancelled), so
    that the trainer can say so and exit."""
    seconds = timeout()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"dask: {doing}", daemon=True)
    thread.start()
    thread.join(seconds + GRACE)
    if not outcome:
        _CLIENTS.pop(dask, None)  # asked nothing more, not even to close
        raise _Stalled(
            f"--dask {_shown(dask)}: the Dask scheduler did not answer {doing} within {seconds:g} s "
            f"(${TIMEOUT_ENV}); nothing was published"
        )
    done, value = outcome[0]
    if done:
        return cast(T, value)
    if isinstance(value, (OSError, TimeoutError)):
        raise ClusterUnavailable(
            f"--dask {_shown(dask)}: cannot reach the Dask scheduler ({doing}): {_shown(dask, str(value))}"
        ) from None
    raise value


def _security(dask: str) -> Any:
    """Dask's security options from its configuration (``DASK_DISTRIBUTED__COMM__TLS__*``); for
    a ``tls://`` scheduler, refused up front unless they hold the client's certificate."""
    from distributed.security import Security

    try:
        security = Security()
        context = security.get_connection_args("client").get("ssl_context")
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise InvalidInput(f"--dask {_shown(dask)}: Dask's TLS configuration: {exc}") from None
    if dask.startswith("tls://") and context is None:
        raise InvalidInput(
            f"--dask {_shown(dask)}: tls:// needs the client's certificate, key and CA: set "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (docs/scaling.md)"
        )
    return security


def _client(dask: str) -> Any:
    """A client of the scheduler at ``dask``, kept for the next pass while it runs: one closed
    since (by its caller, or its scheduler gone past Dask's reconnection) is replaced."""
    kept = _CLIENTS.get(dask)
    if kept is not None and kept.status != "running":
        _let_go(dask, _CLIENTS.pop(dask))
    if dask not in _CLIENTS:
        try:
            from distributed import Client
        except ImportError:
            raise InvalidInput("--dask needs Dask's distributed package: pip install 'bnserve[dask]'") from None
        from distributed.comm import get_address_host_port

        try:  # before a Client is half made (whose clean-up at exit prints a traceback)
            get_address_host_port(dask)
        except ValueError as exc:
            raise InvalidInput(f"--dask {_shown(dask)}: not a Dask address: {_shown(dask, str(exc))}") from None
        except NotImplementedError:
            pass  # a transport without host and port (inproc://)
        security, seconds = _security(dask), timeout()
        _CLIENTS[dask] = _bounded(
            dask, "the handshake", lambda: Client(dask, timeout=seconds, security=security, set_as_default=False)
        )
    return _CLIENTS[dask]


def _workers(dask: str, client: Any, doing: str) -> int:
    """The threads of the cluster's workers (asked of the scheduler); refused if it has none."""
    threads = sum(_bounded(dask, doing, client.nthreads).values())
    if not threads:
        raise ClusterUnavailable(f"--dask {_shown(dask)}: the Dask scheduler has no workers; nothing was published")
    return int(threads)


def _on_cluster(
    dask: str, work: Callable[..., Any], calls: list[tuple[Any, ...]], bar: Bar, hold: bool = False
) -> tuple[list[Any], list[Any]]:
    """The results of ``work(*call)`` for each call, and (``hold``: ``work`` returns (result,
    data)) the futures of the data, left on the workers."""
    from distributed import KilledWorker

    client = _client(dask)

    def submit() -> tuple[list[Any], list[Any]]:
        made = client.map(work, *zip(*calls), pure=False)
        if not hold:
            return made, []
        return client.map(_result, made, pure=False), client.map(_data, made, pure=False)

    futures, held = _bounded(dask, "taking the parts", submit)
    stalled, done = False, False
    try:
        finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for future in futures:
            future.add_done_callback(finished.put)
        for _ in futures:  # in the order they finish
            while True:
                try:
                    future = finished.get(timeout=timeout())
                    break
                except queue.Empty:  # counting still: is the scheduler still there, with workers?
                    _workers(dask, client, "while the parts were counted")
            if future.status == "error":
                break  # gathering raises it
            bar.update()
        results = list(_bounded(dask, "sending the counts", lambda: client.gather(futures)))
        done = True
        return results, held
    except _Stalled:
        stalled = True
        raise
    except KilledWorker as exc:
        raise ClusterUnavailable(
            f"--dask {_shown(dask)}: the workers counting a part died too often ({exc}); nothing was published"
        ) from None
    finally:
        if not stalled:  # the parts left are dropped; a scheduler that stopped answering is not asked
            dropped = futures if done else futures + held  # the data held go only with the job
            with contextlib.suppress(BnServeError):  # the error that ended the job is the one to report
                _bounded(dask, "cancelling the parts", lambda: client.cancel(dropped))
