"""What a learner is: a name, its declared parameters, and a function from data to structures.

Each family module lists its learners in a module-level ``LEARNERS`` tuple; ``registry``
finds them by name, ``bnserve.trainer.fit`` runs them and the CLI builds its flags from the
declared ``Param``s (through ``index``, which ``python -m bnserve.trainer.learners.registry``
rewrites), so adding a learner touches one module and that generated index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bnserve.store.errors import InvalidInput
from bnserve.store.model import SINGLE
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.sizing import Table, pair_tables
from bnserve.trainer.learners.structure import Structure


@dataclass(frozen=True)
class Param:
    """A hyper-parameter: ``--name`` on the command line (``_`` becomes ``-``).

    ``type`` converts command-line text; ``check`` validates a value from anywhere and
    returns the value to use, raising InvalidInput with a message naming the parameter.
    """

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    check: Callable[[str, Any], Any] | None = None
    needs_rows: bool = False  # when given, the learner needs the rows themselves, not only their counts

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def value(self, given: Any) -> Any:
        value = self.default if given is None else given
        return self.check(self.name, value) if self.check and value is not None else value


@dataclass(frozen=True)
class Member:
    """One network of a model: its structure, and the rows its CPTs are estimated on."""

    structure: Structure
    data: TrainingView


@dataclass(frozen=True)
class Learned:
    """A learner's result: one member for a single network, several for an ensemble.

    ``metadata``: JSON-able facts about the search (selected features, scores, …) that
    the model keeps.
    """

    members: tuple[Member, ...]
    combination: str = SINGLE
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def single(structure: Structure, data: TrainingView, **metadata: Any) -> Learned:
        return Learned((Member(structure, data),), SINGLE, metadata)


CROSS_VALIDATES = "it scores its candidates by cross-validation accuracy on the rows, which counts every row once"


@dataclass(frozen=True)
class Learner:
    """``learn(data, **params)`` returns a ``Learned`` (or a bare ``Structure`` for one network).

    ``counts_only``: the learner reads nothing of the rows but their counts (the pairwise
    statistics and the families' counts), which add up over blocks of rows: it can learn
    from a file streamed in chunks (``--chunk-rows``), unless a given parameter ``needs_rows``.
    ``reads_pairs``: it reads the pairwise statistics (``stats.PairStatistics``), which ``fit``
    also counts for the arcs of any network that has them; sized before the search.
    ``unweighted``: why it refuses row weights (``--weight``, ``sample_weight``); "" when it
    takes them, its statistics being sums of counts that a weight scales.
    """

    name: str
    learn: Callable[..., Learned | Structure]
    summary: str
    params: tuple[Param, ...] = ()
    counts_only: bool = False
    reads_pairs: bool = True
    unweighted: str = "it has not been taught to count rows by their weights"

    def takes(self, name: str) -> bool:
        """Whether it declares a parameter of this name (learners may declare one name with
        their own default and help, of the same type)."""
        return any(p.name == name for p in self.params)

    def streams(self, given: Mapping[str, Any]) -> bool:
        """Whether it can learn from counts alone with the parameters ``given`` (None = not given)."""
        needing = {p.name for p in self.params if p.needs_rows}
        return self.counts_only and not any(given.get(name) is not None for name in needing)

    def search_tables(self, data: TrainingView) -> list[Table]:
        """The tables its search counts before it has a structure (sized by ``fit`` first)."""
        return pair_tables(data) if self.reads_pairs else []

    def run(self, data: TrainingView, given: Mapping[str, Any]) -> tuple[Learned, dict[str, Any]]:
        """Check ``given`` against the declared parameters, fill defaults, learn."""
        if data.weighted and self.unweighted:
            raise InvalidInput(f"algorithm {self.name!r} does not take row weights: {self.unweighted}")
        declared = {p.name: p for p in self.params}
        for name in given:
            if name not in declared:
                raise InvalidInput(f"algorithm {self.name!r} takes no {name}")
        values = {p.name: p.value(given.get(p.name)) for p in self.params}
        result = self.learn(data, **values)
        if isinstance(result, Structure):
            result = Learned.single(result, data)
        return result, values


# ------------------------------------------------------------------ parameter checks


def int_or_range(text: str) -> int | list[int]:
    """Command-line text "2" -> 2, "0..3" -> [0, 1, 2, 3] (a range is for --algo auto)."""
    low, sep, high = text.partition("..")
    try:
        return list(range(int(low), int(high) + 1)) if sep else int(text)
    except ValueError:
        raise ValueError(f"expected an integer or a range like 0..3, got {text!r}") from None


def non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise InvalidInput(f"{name} must be a finite non-negative number, got {value!r}")
    return float(value)


def probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise InvalidInput(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def one_of(*choices: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if value not in choices:
            raise InvalidInput(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    return check
