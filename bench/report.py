"""Shared pieces of the benchmark suite: result rows, the exponent fit, the table and the files.

Every suite module (``bench/training.py``, ``bench/prediction.py``, ``bench/memory.py``, …)
returns a ``Section``: rows of (item, measurement, our figure, the peer's figure, ratio,
goal, met?) plus, for a missed goal, a paragraph on what bounds it. ``bench/run.py``
renders them as one table and writes ``docs/performance.json`` and ``docs/performance.md``.
No third-party imports here beyond numpy, so the helpers are unit-tested without the
``bench`` extra.
"""

from __future__ import annotations

import compileall
import math
import os
import pathlib
import platform
import resource
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Row:
    """One measurement beside its peer. ``ratio`` is ours / peer unless the measurement says
    otherwise; ``met`` is None when the row has no goal."""

    item: str
    measurement: str
    ours: float | None
    peer: float | None
    unit: str
    peer_name: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Section:
    """A module's rows, paragraphs on what bounds each missed goal (by measurement), and any
    further figures for the JSON file."""

    name: str
    rows: list[Row] = field(default_factory=list)
    bounds: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def missed(self) -> list[Row]:
        return [r for r in self.rows if r.met is False]


def ratio(ours: float | None, peer: float | None) -> float | None:
    if ours is None or peer is None or peer == 0:
        return None
    return ours / peer


def fit_exponent(sizes: Sequence[float], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(size): time ~ size ** slope."""
    x = np.log(np.asarray(sizes, dtype=np.float64))
    y = np.log(np.asarray(times, dtype=np.float64))
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("the exponent needs at least two different sizes")
    return float(np.polyfit(x, y, 1)[0])


def median(values: Iterable[float]) -> float:
    return float(np.median(np.fromiter(values, dtype=np.float64)))


def fmt(value: float | None, unit: str = "") -> str:
    """A figure with 3 significant digits (thousands separated), or "—"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value == 0:
        text = "0"
    elif abs(value) >= 1000:
        text = f"{value:,.0f}"
    else:
        digits = max(0, 2 - math.floor(math.log10(abs(value))))
        text = f"{value:.{digits}f}"
    return f"{text} {unit}".rstrip() if unit else text


def _met(row: Row) -> str:
    return "" if row.met is None else ("yes" if row.met else "MISSED")


COLUMNS = ("item", "measurement", "ours", "peer", "ratio", "goal", "met?")


def _cells(row: Row) -> list[str]:
    peer = fmt(row.peer, row.unit)
    if row.peer_name and row.peer is not None:
        peer = f"{peer} ({row.peer_name})"
    return [
        row.item,
        row.measurement,
        fmt(row.ours, row.unit),
        peer,
        "—" if row.ratio is None else f"{row.ratio:.2f}×",
        row.goal,
        _met(row),
    ]


def render_table(rows: Sequence[Row]) -> str:
    """Plain-text table, columns padded to their widest cell."""
    table = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(rows: Sequence[Row]) -> str:
    """The same table in Markdown (pipes in cells escaped)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(COLUMNS), line(["---"] * len(COLUMNS))] + [line(_cells(r)) for r in rows])


PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bnserve"


def compile_bytecode() -> None:
    """Write bnserve's bytecode (``__pycache__``), as ``pip install .`` does at install and any
    first import does, so every command measured starts as an installed one does. Without it,
    where PYTHONDONTWRITEBYTECODE is set (this machine's sessions), every process of an
    editable install compiles each module it imports from source, about 0.2 s a command.
    bnserve's subpackages are symlinks, which ``compileall`` does not follow: their targets
    are compiled too."""
    for folder in {PACKAGE, *(p.resolve() for p in PACKAGE.iterdir() if p.is_symlink() and p.is_dir())}:
        compileall.compile_dir(folder, quiet=1)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
            memory = round(kb / 2**20, 1)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def peak_rss_bytes() -> int:
    """This process's peak resident set so far: ``getrusage(RUSAGE_SELF).ru_maxrss`` (Linux
    reports kilobytes), or, after ``reset_peak_rss``, the kernel's VmHWM since the reset.

    ``ru_maxrss`` alone is no use in a worker that a large process started: Linux carries
    the parent's high-water mark over the fork and exec into the child's ru_maxrss (a child
    of a 400 MB parent reports 400 MB before it allocates anything), so every fit below
    that would measure +0. Writing 5 to /proc/self/clear_refs resets VmHWM to the current
    RSS (Linux >= 4.0); both figures are kept so the JSON shows which one was used.
    """
    if _peak_was_reset:
        return _status_kb("VmHWM") * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_peak_was_reset = False


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS to its current RSS; False where the kernel does not allow it."""
    global _peak_was_reset
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _peak_was_reset = _status_kb("VmHWM") > 0
    except OSError:
        _peak_was_reset = False
    return _peak_was_reset


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def current_rss_bytes() -> int:
    """This process's resident set now, from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def section_markers(name: str) -> tuple[str, str]:
    return f"<!-- begin {name}: written by a script; edits here are overwritten -->", f"<!-- end {name} -->"


def replace_section(document: str, name: str, body: str) -> str:
    """``document`` with the text between ``name``'s markers replaced by ``body`` (markers
    kept), or with the marked section appended when it has none: several scripts write one
    page (docs/accuracy.md), each only its own part."""
    begin, end = section_markers(name)
    section = f"{begin}\n{body.strip()}\n{end}"
    start = document.find(begin)
    if start < 0:
        return (document.rstrip() + "\n\n" if document.strip() else "") + section + "\n"
    stop = document.find(end, start)
    if stop < 0:
        raise ValueError(f"the section {name!r} has a begin marker but no end marker")
    return document[:start] + section + document[stop + len(end) :]


def write_section(path: os.PathLike[str] | str, name: str, body: str) -> None:
    """Replace (or add) ``name``'s section of the file at ``path``, keeping the rest."""
    file = os.fspath(path)
    document = open(file, encoding="utf-8").read() if os.path.exists(file) else ""
    with open(file, "w", encoding="utf-8") as out:
        out.write(replace_section(document, name, body))
