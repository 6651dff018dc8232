"""A one-line progress indicator on stderr for long runs, shown only on a terminal."""

from __future__ import annotations

import sys


def show_progress(message: str) -> None:
    """A one-line progress indicator on stderr, only when it is a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + message[:150])
        sys.stderr.flush()


def end_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
