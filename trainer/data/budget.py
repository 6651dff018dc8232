"""In memory or streamed: a file whose rows would take more than the memory budget held
in memory is read in chunks (``streaming``), by the learners that need only counts.

The estimate is the file's size times what an in-memory fit was measured to take per byte
of CSV (``IN_MEMORY_PER_FILE_BYTE``); a gzipped file counts ``GZIP_RATIO`` times its size.
The chunks are sized from the bytes per row of the file's first block, so that the chunks
the processes hold at once (one each, ``--jobs``) take about a quarter of the budget.
"""

from __future__ import annotations

import os
import re

from bnserve.store.errors import InvalidInput
from bnserve.trainer.io.sources import BUILTIN_PREFIX, open_binary

DEFAULT_MEMORY_BUDGET = 1 << 30  # 1 GiB
IN_MEMORY_PER_FILE_BYTE = 10  # fkdb k=2 on a 1M x 50 CSV of 102 MB: 0.98 GB peak RSS (bench/out_of_core.py)
GZIP_RATIO = 5  # a CSV of small codes gzips about five-fold
SAMPLE_BYTES = 1 << 20
MIN_CHUNK_ROWS = 1000
DEFAULT_CHUNK_ROWS = 100_000  # a set of files, or one a Dask cluster reads, when nothing else sets it
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20}
_UNITS |= {"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(text: str) -> int | None:
    """Bytes of a size such as ``1.5GiB``, ``800M`` or ``1048576`` (powers of 1024);
    ``none`` for no budget (always in memory)."""
    if text.strip().lower() == "none":
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 1GiB, 512M, or none)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size <= 0:
        raise ValueError(f"a memory budget must be positive: {text!r}")
    return size


def chunk_rows_within(source: str, budget: int | None, jobs: int = 1) -> int | None:
    """Rows per chunk to stream ``source`` within ``budget`` bytes by ``jobs`` processes; None
    when it fits in memory (or is not a local file whose size can be known)."""
    if budget is None or source.startswith(BUILTIN_PREFIX):
        return None
    try:
        size = os.path.getsize(source)
    except OSError:
        return None  # the reader says what is wrong with the path
    if source.endswith(".gz"):
        size *= GZIP_RATIO
    if size * IN_MEMORY_PER_FILE_BYTE <= budget:
        return None
    return max(MIN_CHUNK_ROWS, budget // (4 * jobs * IN_MEMORY_PER_FILE_BYTE * _bytes_per_row(source)))


def _bytes_per_row(source: str) -> int:
    try:
        with open_binary(source) as raw:
            sample = raw.read(SAMPLE_BYTES)
    except (OSError, EOFError, InvalidInput):
        return SAMPLE_BYTES
    return max(1, len(sample) // max(1, sample.count(b"\n")))
