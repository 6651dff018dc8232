"""How the command lines end their process: without the garbage collector's last passes.

As Python shuts down it collects garbage over every object still alive, then again as it
clears each module. After a ``trainer fit`` that is the objects of numpy, pyarrow,
SQLAlchemy and the learners, and it took 0.15-0.25 s of a 0.6-0.9 s small fit (a quarter of
it; py-spy: ``gc_collect_main``), after the command's work was done and its output written.
``gc.freeze()`` first moves every object to the collector's permanent generation, which
those passes skip. Everything else about the exit stays: non-daemon threads are joined,
``atexit`` handlers run, the standard streams are flushed, and objects go as their last
reference does. Only garbage in reference cycles is left to the operating system, and the
commands close what they write (files, store connections) before they return.

Standard library only: both command lines import it (tests/test_architecture.py's BASE).
For a console script, not for ``main`` itself, which tests call many times in one process.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import NoReturn


def exit_with(main: Callable[[], int | None]) -> NoReturn:
    """Run ``main`` and end the process with its exit status (or its ``SystemExit``'s, or its
    exception's traceback), skipping the collector's passes over what is left."""
    try:
        sys.exit(main())
    finally:
        gc.freeze()
