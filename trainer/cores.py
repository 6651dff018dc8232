"""The cores a fit may use: ``trainer fit --jobs N`` (``limited``), else every core this
process may run on (``available``). Read where the trainer sizes a pool of threads (the
parse's pieces), so that ``--jobs 1`` keeps a fit on one core, and each of the ``--jobs N``
processes that count a file's parts (``parallel``) on one core of its own, as a user who
sets ``--jobs`` on a shared machine expects."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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
