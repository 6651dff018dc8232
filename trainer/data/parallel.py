"""Where the parts of a file trained in chunks are counted: here, one after another; by a
pool of local processes (``--jobs``); or by the workers of a Dask cluster (``--dask``).

Each part's work is a function of the reader and the part's number that returns counts;
the results come back in part order, whichever process or machine computed them, so the
caller sums them exactly as it would have counted the parts in turn. Dask reruns a part
whose worker died (up to its ``distributed.scheduler.allowed-failures``); past that, or
when the scheduler cannot be reached, the fit stops with a message saying so, before
anything is published.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from bnserve.store.errors import InvalidInput
from bnserve.trainer.progress import Bar, stage

T = TypeVar("T")

CONNECT_SECONDS = 30  # how long to wait for a Dask scheduler to answer


def map_parts(
    work: Callable[..., T],
    reader: Any,
    n_parts: int,
    *args: Any,
    jobs: int = 1,
    dask: str | None = None,
    what: str = "counting",
) -> list[T]:
    """``[work(reader, i, *args) for i in range(n_parts)]``, computed on the Dask cluster at
    ``dask``, else by ``jobs`` local processes, else here; each part done is reported as
    progress of the stage ``what``."""
    calls = [(reader, i, *args) for i in range(n_parts)]
    with stage(what, n_parts, "part") as bar:
        if dask:
            return _on_cluster(dask, work, calls, bar)
        if jobs > 1 and n_parts > 1:
            return _counted(_pool(jobs).map(work, *zip(*calls)), bar)
        return _counted((work(*call) for call in calls), bar)


def _counted(results: Iterable[T], bar: Bar) -> list[T]:
    done = []
    for result in results:  # in part order, each as soon as it and those before it are done
        done.append(result)
        bar.update()
    return done


def cluster_threads(dask: str) -> int:
    """The threads of the cluster's workers: how many parts it counts at once."""
    return max(1, sum(_client(dask).nthreads().values()))


_POOLS: dict[int, ProcessPoolExecutor] = {}


def _pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of ``jobs`` processes, kept for the next pass. Started by a fork server, not by
    forking this process, whose threads (pyarrow's) may hold locks."""
    if jobs not in _POOLS:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bnserve.trainer.data.streaming"])  # imported once, before the forks
        _POOLS[jobs] = ProcessPoolExecutor(jobs, mp_context=context)
    return _POOLS[jobs]


_CLIENTS: dict[str, Any] = {}


def _client(dask: str) -> Any:
    """A client of the scheduler at ``dask``, kept for the next pass."""
    if dask not in _CLIENTS:
        try:
            from distributed import Client
        except ImportError:
            raise InvalidInput("--dask needs Dask's distributed package: pip install 'bnserve[dask]'") from None
        try:
            _CLIENTS[dask] = Client(dask, timeout=CONNECT_SECONDS, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InvalidInput(f"--dask {dask}: cannot reach the Dask scheduler: {exc}") from None
    return _CLIENTS[dask]


def _on_cluster(dask: str, work: Callable[..., T], calls: list[tuple[Any, ...]], bar: Bar) -> list[T]:
    from distributed import KilledWorker, as_completed

    client = _client(dask)
    futures = client.map(work, *zip(*calls), pure=False)
    try:
        for _ in as_completed(futures, loop=client.loop):  # in the order they finish
            bar.update()
        return list(client.gather(futures))
    except KilledWorker as exc:
        raise InvalidInput(
            f"--dask {dask}: the workers counting a part died too often ({exc}); nothing was published"
        ) from None
    finally:
        client.cancel(futures)
