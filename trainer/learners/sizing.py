"""How large a fit's tables will be, known from the variables' state counts before numpy
allocates them, and the limits a fit must stay within (``TrainingLimits``).

Every table a fit builds is a product of state counts: a CPT's counts and probabilities
have (node's states × its parents' states) cells, a pair statistic (states + 1)² × (classes
+ 1). A nominal column read from numbers or identifiers may have hundreds of states, and
one family of four such columns asks for billions of cells (tens of GB). So ``fit`` sizes
the tables first (``cpt_tables``, ``pair_tables``; the searches ask ``allows`` before
counting a candidate family) and refuses, with one line naming the columns, their states
and the flag, what is past ``--max-cpt-cells`` (one table) or ``--memory-budget`` (all the
tables a fit holds at once). The same cell limit bounds the CPTs ``trainer import`` reads.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from bnserve.store.errors import InvalidInput
from bnserve.trainer.data.budget import DEFAULT_MEMORY_BUDGET

if TYPE_CHECKING:
    from bnserve.store.model import Variable
    from bnserve.trainer.data import TrainingView
    from bnserve.trainer.learners.structure import Structure

DEFAULT_MAX_CPT_CELLS = 1 << 22  # 4,194,304 probabilities, 32 MiB as float64: one CPT a fit or an import may build
CPT_CELLS_FLAG = "--max-cpt-cells"
MEMORY_BUDGET_FLAG = "--memory-budget"
CELL_BYTES = 8  # int64 counts, float64 probabilities
# Arrays of a family's size a fit holds at once: the counts (int64), their float64 copy and
# the CPT. hdp adds its tree's counts and tables at every level (at most twice the leaves'
# cells each) and the sampled probabilities; alr its weights, gradient and L-BFGS's ten pairs
# of vectors over every cell.
ESTIMATE_COPIES = {"laplace": 3, "dirichlet": 3, "m": 3, "hdp": 8, "alr": 25}
FIX = "declare the missing markers (--na-values), read the column as numbers (--numeric) or leave it out (--ignore)"


@dataclass(frozen=True)
class TrainingLimits:
    """What a fit may build: ``max_cpt_cells`` cells in one table (None: no limit) and
    ``memory_budget`` bytes in all the tables it holds at once (None: no budget). The
    defaults are the command line's (``--max-cpt-cells``, ``--memory-budget``)."""

    max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET

    def __post_init__(self) -> None:
        for name, value in (("max_cpt_cells", self.max_cpt_cells), ("memory_budget", self.memory_budget)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidInput(f"{name} must be a positive integer or None (no limit), got {value!r}")

    def check(self, tables: Sequence[Table], what: str) -> None:
        """Refuse (``TooLarge``) a table past the cell limit, or tables past the budget together."""
        total = 0
        for table in tables:
            cells = table.cells
            if self.max_cpt_cells is not None and table.bounded and cells > self.max_cpt_cells:
                raise TooLarge(
                    what,
                    f"{table.what} would hold {cells:,} cells ({table.columns()}), "
                    f"past {CPT_CELLS_FLAG} {self.max_cpt_cells:,}; {FIX}, or raise {CPT_CELLS_FLAG}",
                )
            total += cells * CELL_BYTES * table.copies
        if self.memory_budget is not None and total > self.memory_budget:
            largest = max(tables, key=lambda t: t.bytes)
            raise TooLarge(
                what,
                f"its {len(tables):,} tables would take {_size(total)}, past {MEMORY_BUDGET_FLAG} "
                f"{_size(self.memory_budget)}; the largest, {table_label(largest)}, {_size(largest.bytes)}; "
                f"{FIX}, or raise {MEMORY_BUDGET_FLAG}",
            )

    def allows(self, cells: int) -> bool:
        """Whether one table of ``cells`` cells is within the cell limit."""
        return self.max_cpt_cells is None or cells <= self.max_cpt_cells


DEFAULT_LIMITS = TrainingLimits()


class TooLarge(InvalidInput):
    """A fit refused before allocating: a table past the cell limit, or past the memory budget.
    ``detail``: why, without the name of the fit (``message`` is "WHAT: DETAIL")."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}")
        self.what, self.detail = what, detail

    def __reduce__(self) -> tuple[type[TooLarge], tuple[str, str]]:
        # pickled by its two arguments: a refusal raised in a worker process (--jobs, Dask)
        # reaches the caller as itself, not as a broken process pool
        return TooLarge, (self.what, self.detail)


class Table(NamedTuple):
    """One table a fit will allocate: ``axes`` (column, states) whose product is ``cells``,
    held ``copies`` times (8 bytes a cell). ``bounded``: the cell limit applies (a CPT); the
    pair statistics, at most two features' states by the class's, count against the memory
    budget only. A named tuple: every fit sizes each of its tables (an AODE's family each,
    every pair of features), and a frozen dataclass took three times as long to make."""

    what: str
    axes: tuple[tuple[str, int], ...]
    copies: int = 1
    bounded: bool = True

    @property
    def cells(self) -> int:
        return math.prod([states for _, states in self.axes])

    @property
    def bytes(self) -> int:
        return self.cells * CELL_BYTES * self.copies

    def columns(self) -> str:
        return " × ".join(f"{name!r} {states:,} states" for name, states in self.axes)


def table_label(table: Table) -> str:
    return f"{table.what} ({table.columns()})"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def cpt_tables(structure: Structure, data: TrainingView, estimator: str = "laplace") -> list[Table]:
    """The CPT of every node of ``structure``, axes (node, *parents), as ``estimate`` builds it
    (``estimator``: the estimator's kind, which sets how many copies a family costs)."""
    states = {v.name: v.cardinality for v in data.variables}
    copies = ESTIMATE_COPIES.get(estimator, ESTIMATE_COPIES["hdp"])
    return [
        Table(f"the CPT of {node!r}", tuple([(v, states[v]) for v in (node, *parents)]), copies)
        for node, parents in structure.parents.items()
    ]


def pair_tables(data: TrainingView) -> list[Table]:
    """N(xi, xj, c) for every pair of features, each axis with its missing state
    (``stats.PairStatistics``): what the pairwise learners and ``arc_cmi`` count. Made once
    for the same variables: auto sizes them for every candidate on every fold."""
    return list(_pair_tables(tuple(data.variables)))


@functools.lru_cache(maxsize=16)
def _pair_tables(variables: tuple[Variable, ...]) -> tuple[Table, ...]:
    features = [(v.name, v.cardinality + 1) for v in variables[:-1]]
    c = (variables[-1].name, variables[-1].cardinality + 1)
    return tuple(
        Table(f"the pair statistics of {a!r} and {b!r}", ((a, sa), (b, sb), c), bounded=False)
        for i, (a, sa) in enumerate(features)
        for b, sb in features[i + 1 :]
    )


_LIMITS: ContextVar[TrainingLimits] = ContextVar("bnserve_training_limits", default=DEFAULT_LIMITS)


@contextmanager
def within(limits: TrainingLimits) -> Iterator[None]:
    """The limits the searches inside the block read (``current``), set by ``fit``."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def current() -> TrainingLimits:
    """The limits of the fit at hand (the defaults outside one)."""
    return _LIMITS.get()


def allows(cells: int) -> bool:
    """Whether a search may count a candidate table of ``cells`` cells: one past the cell
    limit is never counted, and that candidate never chosen (its CPT would be refused)."""
    return current().allows(cells)
