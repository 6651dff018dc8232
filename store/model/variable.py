"""A variable of the model contract, and the one rule that turns a raw value into its state code.

Every reader of raw values codes them here: the trainer its data files, the server its
requests. A raw value is text: ``""`` is missing; a state label is that state; for a
numeric variable a number (or the label of its interval) is the interval it falls in; for a
nominal variable whose states are whole numbers (codes such as 5, 7, 10, 12), a number equal
to one of them is that state ("14.0" and "1.4e1" are "14"; "14.5" is unknown).
A feature trained with ``--missing state`` has one more state, its last, labelled
``MISSING_LABEL``: there a missing value (``""``, or code -1 in a coded array) is that state.
A variable ``with_markers`` also codes those texts missing: the markers its model's training
data was read with (``markers.recorded_markers``), so a request reads as the file did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model.discretization import interval_code, interval_codes, number_of
from bnserve.store.model.projection import Projection

CLASS = "class"
FEATURE = "feature"
ROLES = (CLASS, FEATURE)

NOMINAL = "nominal"
NUMERIC = "numeric"
KINDS = (NOMINAL, NUMERIC)

MISSING = -1  # the state code of a missing value, in every coded array
UNKNOWN = -2  # what ``Variable.code_of`` gives a value that is neither missing nor a state
MISSING_LABEL = "(missing)"  # the label of the state a missing value is, with ``missing_state``
MAX_EXACT_INTEGER = 2**53  # past it, a float no longer tells whole numbers apart


def whole_number(label: str) -> int | None:
    """The integer ``label`` is written as Python writes it ("14", "-3"; not "014", "+3",
    "14.0"), else None. States that are all such labels are codes, ordered and matched by number."""
    digits = label[1:] if label[:1] == "-" else label
    if not (digits.isascii() and digits.isdigit()) or str(int(label)) != label:
        return None
    return int(label)


@dataclass(frozen=True)
class Variable:
    """A column of the data: its ordered states and how a raw value becomes a state.

    ``kind`` nominal: the raw value is the state label itself. ``kind`` numeric: the raw
    value is a number, and ``cuts`` (ascending) split the line into the intervals that are
    the states (``discretization``); the interval label is accepted too. ``projection``: a
    numeric feature derived from other numeric features of the model (``projection``), never
    read from a raw value of its own. ``missing_state``:
    the last state is "missing" (``MISSING_LABEL``), learned like the others. ``markers``:
    texts read as missing beside ``""`` (``with_markers``); not part of the contract (not
    compared, not serialised): how the values of one model's inputs are read.
    """

    name: str
    states: tuple[str, ...]
    role: str = FEATURE
    kind: str = NOMINAL
    cuts: tuple[float, ...] = ()
    missing_state: bool = False
    projection: Projection | None = None
    markers: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def cardinality(self) -> int:
        return len(self.states)

    def with_missing_state(self) -> Variable:
        """This variable with a last state ``MISSING_LABEL`` that a missing value takes
        (``--missing state``); a state already labelled so is refused, naming the column."""
        if MISSING_LABEL in self.states:
            raise InvalidInput(f"column {self.name!r}: the value {MISSING_LABEL!r} clashes with --missing state")
        return replace(self, states=(*self.states, MISSING_LABEL), missing_state=True)

    def with_markers(self, markers: Iterable[str]) -> Variable:
        """This variable reading the texts ``markers`` as missing, as the training data was
        read: a marker is missing even where it is also a state label (the training rows
        never had it as a state). Kept per set of markers, so the versions that share a
        Variable (a bulk load) share this one too, and its ``label_codes``."""
        markers = frozenset(markers)
        if markers == self.markers:
            return self
        kept: dict[frozenset[str], Variable] | None = self.__dict__.get("_with_markers")
        if kept is None:
            kept = {}
            object.__setattr__(self, "_with_markers", kept)
        variable = kept.get(markers)
        if variable is None:
            variable = kept[markers] = replace(self, markers=markers)
        return variable

    @property
    def missing_code(self) -> int:
        """The code a missing value takes: the last state with ``missing_state``, else MISSING."""
        return len(self.states) - 1 if self.missing_state else MISSING

    def code_of(self, text: str) -> int:
        """The state code of one raw value: MISSING for ``""``, a state label's index, for
        a numeric variable a number's interval (NaN is no number), for a whole-number-coded
        one a number equal to a state; UNKNOWN otherwise."""
        code = self.label_codes().get(text)
        if code is not None:
            return code
        if self.kind == NUMERIC:
            number = number_of(text)
            if not math.isnan(number):
                return interval_code(self.cuts, number)
        by_number = self._number_index()
        return by_number.get(number_of(text), UNKNOWN) if by_number else UNKNOWN

    def codes_of(self, texts: Sequence[str]) -> np.ndarray:
        """int32 ``code_of`` of every text, the common case in C: one dict lookup per text,
        then the numbers of a numeric variable through one ``interval_codes``."""
        codes = np.fromiter(map(self.label_codes().get, texts, repeat(UNKNOWN)), dtype=np.int32, count=len(texts))
        if self.kind == NUMERIC:
            unknown = np.flatnonzero(codes == UNKNOWN)
            if unknown.size:
                numbers = np.fromiter(
                    (number_of(texts[r]) for r in unknown.tolist()), dtype=np.float64, count=unknown.size
                )
                codes[unknown] = np.where(np.isnan(numbers), UNKNOWN, interval_codes(self.cuts, numbers))
        elif by_number := self._number_index():
            for r in np.flatnonzero(codes == UNKNOWN).tolist():
                codes[r] = by_number.get(number_of(texts[r]), UNKNOWN)
        return codes

    def label_codes(self) -> dict[str, int]:
        """Text -> code for every state label, ``""`` and the ``markers`` (missing):
        ``code_of``'s first and common case, one dict built once per variable; the server's
        request tables share it. Read only."""
        cached = self.__dict__.get("_label_index")
        if cached is None:
            cached = {s: i for i, s in enumerate(self.states)}
            cached.update(dict.fromkeys(("", *self.markers), self.missing_code))
            object.__setattr__(self, "_label_index", cached)
        return cached

    def _number_index(self) -> dict[float, int]:
        """Number -> code of a nominal variable whose states (but a missing state) are all
        ``whole_number`` labels; empty for any other variable."""
        cached = self.__dict__.get("_number_index_cache")
        if cached is None:
            labels = self.states[:-1] if self.missing_state else self.states
            numbers = [whole_number(s) for s in labels] if self.kind == NOMINAL else [None]
            whole = all(n is not None and abs(n) <= MAX_EXACT_INTEGER for n in numbers)
            cached = {float(n): i for i, n in enumerate(numbers) if n is not None} if whole and labels else {}
            object.__setattr__(self, "_number_index_cache", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """Plain data; ``cuts`` only for a numeric variable and ``missing_state`` only when set,
        so the models made before them keep their checksums."""
        d: dict[str, Any] = {"name": self.name, "states": list(self.states), "role": self.role, "kind": self.kind}
        if self.kind == NUMERIC:
            d["cuts"] = list(self.cuts)
        if self.missing_state:
            d["missing_state"] = True
        if self.projection is not None:
            d["projection"] = self.projection.to_dict()
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Variable:
        return Variable(
            d["name"],
            tuple(d["states"]),
            d.get("role", FEATURE),
            d.get("kind", NOMINAL),
            tuple(float(c) for c in d.get("cuts", ())),
            d.get("missing_state", False) is True,
            Projection.from_dict(d["projection"]) if d.get("projection") is not None else None,
        )
