"""Progress of the long parts of training — reading, counting, searching, folds — reported
to whoever asked for it, and to no one else.

The trainer opens a ``stage`` around each long loop and ``update``\\ s it per part, chunk,
candidate or fold (never per row). Nothing is shown unless the caller installs a reporter
with ``reporting``: the CLI installs ``terminal_bars`` (tqdm, on stderr, when it is a
terminal) unless ``--quiet``; library use (``fit`` in a notebook, the benchmarks) stays
silent. The reporter is a context variable, not a global: it holds for the ``with`` block
that set it, and threads and worker processes the trainer starts report nothing.

A ``note`` is different: one line the user should read even in a log (auto skipping a
candidate that does not fit). It goes to the sink installed with ``noting`` (the CLI: stderr,
nothing under --quiet), else to the ``bnserve.trainer`` logger as a warning, which Python
prints on stderr when nothing configured logging.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TextIO

SCALED = ("B", "row")  # units counted in thousands and more: shown as 1.2M rows, 3.4MB
NESTED_DELAY = 0.5  # seconds before a stage inside another shows: short inner loops do not flash


class Bar(Protocol):
    """One stage's progress: ``update(n)`` adds ``n`` units done; ``note`` says what is at hand."""

    def update(self, n: float = 1) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


class Reporter(Protocol):
    """Makes the ``Bar`` of a stage that starts: (description, total or None, unit)."""

    def __call__(self, description: str, total: float | None, unit: str) -> Bar: ...


class _Silent:
    def update(self, n: float = 1) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


SILENT: Bar = _Silent()
_REPORTER: ContextVar[Reporter | None] = ContextVar("bnserve_trainer_progress", default=None)


@contextmanager
def stage(description: str, total: float | None = None, unit: str = "it") -> Iterator[Bar]:
    """A long loop's ``Bar`` (``SILENT`` when no reporter is installed), closed at the end."""
    reporter = _REPORTER.get()
    if reporter is None:
        yield SILENT
        return
    bar = reporter(description, total, unit)
    try:
        yield bar
    finally:
        bar.close()


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Report the stages started inside the block to ``reporter`` (None: to no one)."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


_NOTES: ContextVar[Callable[[str], None] | None] = ContextVar("bnserve_trainer_notes", default=None)
LOGGER = logging.getLogger("bnserve.trainer")


def note(text: str) -> None:
    """Tell the user one line (see the module docstring)."""
    sink = _NOTES.get()
    if sink is None:
        LOGGER.warning(text)
    else:
        sink(text)


@contextmanager
def noting(sink: Callable[[str], None]) -> Iterator[None]:
    """Send the notes of the block to ``sink`` (``lambda text: None`` to drop them)."""
    token = _NOTES.set(sink)
    try:
        yield
    finally:
        _NOTES.reset(token)


def terminal_bars(stream: TextIO | None = None) -> Reporter | None:
    """tqdm bars on ``stream`` (stderr) when it is a terminal; None (silence) otherwise, so a
    log file or a pipe gets only the command's own output."""
    stream = sys.stderr if stream is None else stream
    return _TqdmBars(stream) if stream.isatty() else None


class _TqdmBars:
    """tqdm bars, nested ones below the outer ones and only once they have lasted
    ``NESTED_DELAY``; every bar is cleared when its stage ends (the command's output stays
    what it is without them)."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.open = 0

    def __call__(self, description: str, total: float | None, unit: str) -> Bar:
        from tqdm import tqdm  # imported only when bars are shown

        bar = tqdm(
            desc=description,
            total=total,
            unit=unit,
            unit_scale=unit in SCALED,
            unit_divisor=1024 if unit == "B" else 1000,
            file=self.stream,
            leave=False,
            disable=None,  # off a terminal tqdm stays silent by itself too
            delay=NESTED_DELAY if self.open else 0,
            dynamic_ncols=True,
        )
        self.open += 1
        return _TqdmBar(bar, self)


class _TqdmBar:
    def __init__(self, bar: Any, owner: _TqdmBars):
        self.bar, self.owner = bar, owner

    def update(self, n: float = 1) -> None:
        self.bar.update(n)

    def note(self, text: str) -> None:
        self.bar.set_postfix_str(text)

    def close(self) -> None:
        self.bar.close()
        self.owner.open -= 1
