"""What a learner is: a name, its declared parameters, and a function from data to structures.

Each family module lists its learners in a module-level ``LEARNERS`` tuple; ``registry``
finds them by name, ``bnserve.trainer.fit`` runs them and the CLI builds its flags from the
declared ``Param``s (through ``index``, which ``python -m bnserve.trainer.learners.registry``
rewrites), so adding a learner touches one module and that generated index. The function is
typed (``Learn``) by what it reads: the ``TrainingView`` (counts alone) or ``EncodedData``
(the rows); its signature is checked against its ``Param``s when the module is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast, get_args

from bnserve.store.errors import InvalidInput
from bnserve.store.model import SINGLE
from bnserve.trainer.data import EncodedData, TrainingView
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

D = TypeVar("D", bound=TrainingView, contravariant=True)


class Learn(Protocol[D]):
    """A learner's function, ``learn(data, **params)`` with its declared parameters by name.

    ``Learn[TrainingView]`` learns from counts alone, so from a file streamed in chunks too;
    ``Learn[EncodedData]`` needs the rows in memory (every learner is one: a function of the
    view also takes the rows).
    """

    def __call__(self, data: D, /, *args: Any, **params: Any) -> Learned | Structure: ...


@dataclass(frozen=True)
class Learner:
    """``learn(data, **params)`` returns a ``Learned`` (or a bare ``Structure`` for one network).

    Built when its family module is imported, it checks ``learn``'s signature against
    ``params`` (``checked_signature``): a mismatch is a TypeError naming the learner and the
    parameter. ``counts_only``, read from that signature: ``learn`` takes a ``TrainingView``,
    so it reads nothing of the rows but their counts (the pairwise statistics and the
    families' counts), which add up over blocks of rows: it can learn from a file streamed in
    chunks (``--chunk-rows``), unless a given parameter ``needs_rows``.
    ``reads_pairs``: it reads the pairwise statistics (``stats.PairStatistics``), which ``fit``
    also counts for the arcs of any network that has them; sized before the search.
    ``unweighted``: why it refuses row weights (``--weight``, ``sample_weight``); "" when it
    takes them, its statistics being sums of counts that a weight scales.
    """

    name: str
    learn: Learn[EncodedData]
    summary: str
    params: tuple[Param, ...] = ()
    reads_pairs: bool = True
    unweighted: str = "it has not been taught to count rows by their weights"
    counts_only: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts_only", checked_signature(self.name, self.learn, self.params))

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
        if isinstance(data, EncodedData):
            result = self.learn(data, **values)
        elif self.counts_only:  # its signature takes the view: checked when it was built
            result = cast("Learn[TrainingView]", self.learn)(data, **values)
        else:
            raise InvalidInput(f"algorithm {self.name!r} needs the rows in memory, not only their counts")
        if isinstance(result, Structure):
            result = Learned.single(result, data)
        return result, values


def checked_signature(name: str, learn: Callable[..., object], params: tuple[Param, ...]) -> bool:
    """Whether ``learn`` learns from counts alone, after checking its signature against the
    ``params`` the learner ``name`` declares: first the data, annotated ``TrainingView`` or
    ``EncodedData``; then each declared parameter and no other, by keyword, any default
    of its own the declared one, able to take None where that is the declared default ("off").
    A TypeError naming the learner and the parameter otherwise: at import, not at a user's fit."""
    where = f"learner {name!r}"
    try:
        signature = inspect.signature(learn, eval_str=True)
    except NameError as exc:  # an annotation naming what the module imports only for mypy
        raise TypeError(f"{where}: its annotations must name what its module imports: {exc}") from None
    if not signature.parameters:
        raise TypeError(f"{where}: its function takes no data")
    data, *taken = signature.parameters.values()
    if data.kind not in (data.POSITIONAL_ONLY, data.POSITIONAL_OR_KEYWORD) or data.default is not data.empty:
        raise TypeError(f"{where}: its first parameter, {data.name!r}, must be the data: positional, no default")
    if data.annotation not in (TrainingView, EncodedData):
        raise TypeError(
            f"{where}: its data parameter {data.name!r} must be a TrainingView (it learns from counts alone) "
            f"or EncodedData (it needs the rows), not {data.annotation!r}"
        )
    declared = {p.name: p for p in params}
    for p in taken:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{where}: its function takes {p}; after the data it takes its parameters by name only")
        if p.name not in declared:
            raise TypeError(
                f"{where}: its function takes {p.name!r}, which it does not declare "
                f"(it declares {', '.join(declared) or 'none'})"
            )
        default = declared[p.name].default
        if p.default is not p.empty and p.default != default:
            raise TypeError(
                f"{where}: parameter {p.name!r} defaults to {p.default!r}, but is declared with {default!r}"
            )
        if default is None and not _takes_none(p.annotation):
            kind = inspect.formatannotation(p.annotation)
            raise TypeError(
                f"{where}: parameter {p.name!r} is declared off (None) by default, but takes {kind}, not None"
            )
    for missing in declared.keys() - {p.name for p in taken}:
        raise TypeError(f"{where}: it declares parameter {missing!r}, which its function does not take")
    return data.annotation is TrainingView


def _takes_none(annotation: object) -> bool:
    return annotation in (inspect.Parameter.empty, Any, object, None) or type(None) in get_args(annotation)


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
