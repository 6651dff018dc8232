"""The cores a fit may use: ``trainer fit --jobs N`` (``limited``), else every core this
process may run on (``available``). Read where the trainer sizes a pool of threads (the
parse's pieces, the counts of many rows held in memory), so that ``--jobs 1`` keeps a fit on
one core, and each of the ``--jobs N`` processes that count a file's parts (``parallel``) on
one core of its own, as a user who sets ``--jobs`` on a shared machine expects."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_LIMIT: ContextVar[int | None] = ContextVar("bnserve_trainer_cores", default=None)


def available() -> int:
    """The cores this process may run on (its CPU affinity, where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cores() -> int:
    """The cores the work in this context may keep busy: the limit it runs under, at most
    those available; every available core outside ``limited``."""
    limit = _LIMIT.get()
    return available() if limit is None else max(1, min(limit, available()))


@contextmanager
def limited(n: int) -> Iterator[None]:
    """Run the block (and the threads that copy its context) on at most ``n`` cores."""
    token = _LIMIT.set(n)
    try:
        yield
    finally:
        _LIMIT.reset(token)


Mapper = Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]


@contextmanager
def ordered_map(threads: int, name: str) -> Iterator[Mapper]:
    """A ``map`` whose calls run on a pool of ``threads`` threads (named ``name``), results in
    the items' order, at most two calls a thread ahead of the one taken, so that what is held
    stays a few results; with one thread, the calls run here, in turn. For work that lets go
    of the GIL (numpy's passes over rows, pyarrow's parse); leaving the block cancels what
    has not started."""
    if threads <= 1:
        yield map
        return

    def mapped(work: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        ahead: list[Future[R]] = []
        pending = iter(items)
        while True:
            while len(ahead) < 2 * threads and (item := next(pending, _NONE)) is not _NONE:
                ahead.append(pool.submit(work, item))  # type: ignore[arg-type]
            if not ahead:
                return
            yield ahead.pop(0).result()

    with ThreadPoolExecutor(threads, thread_name_prefix=name) as pool:
        try:
            yield mapped
        finally:
            pool.shutdown(cancel_futures=True)


_NONE = object()  # ordered_map: no item left
