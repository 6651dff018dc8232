"""A derived feature: a linear combination of numeric inputs, then cut points like any numeric one.

Where the class follows a direction across numeric columns (R's ``crabs``: a ratio of shell
measurements), no table over the intervals of one column holds it; a linear discriminant
of those columns does, as one more numeric feature. Its ``Projection`` is preprocessing that
is part of the model, as cut points are: the value of a row is
``sum(weights[i] * (x[i] - centres[i]))`` over its ``inputs`` (numeric features of the same
model, by name), a missing input counting as its centre (the training mean), and no value
(missing) when every input is missing. A number that is not read (a text that is no
number) is missing here; its own feature refuses or counts it as the unseen-value rule says.

Every reader of raw values (the trainer's files, ``trainer predict``, the server's requests)
codes the other features first, keeping the numbers of the inputs, then the derived ones
with ``derive_codes``; a request never sends a derived feature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bnserve.store.model.discretization import interval_codes

if TYPE_CHECKING:
    from bnserve.store.model.variable import Variable


@dataclass(frozen=True)
class Projection:
    """``sum(weights[i] * (x[i] - centres[i]))`` over ``inputs``; a missing input is 0 in the sum."""

    inputs: tuple[str, ...]
    centres: tuple[float, ...]
    weights: tuple[float, ...]

    def values(self, numbers: Sequence[np.ndarray]) -> np.ndarray:
        """float64 value per row from each input's numbers (same order as ``inputs``, NaN
        missing); NaN where every input is missing."""
        total = np.zeros(len(numbers[0]) if numbers else 0, dtype=np.float64)
        present = np.zeros(total.shape, dtype=bool)
        for x, centre, weight in zip(numbers, self.centres, self.weights):
            x = np.asarray(x, dtype=np.float64)
            seen = ~np.isnan(x)
            total += np.where(seen, (x - centre) * weight, 0.0)
            present |= seen
        total[~present] = np.nan
        return total

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "centres": list(self.centres), "weights": list(self.weights)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Projection:
        return Projection(
            tuple(str(n) for n in d["inputs"]),
            tuple(float(c) for c in d["centres"]),
            tuple(float(w) for w in d["weights"]),
        )


def derived_inputs(features: Sequence[Variable]) -> frozenset[str]:
    """The names of the features some derived feature of ``features`` reads."""
    return frozenset(name for v in features if v.projection is not None for name in v.projection.inputs)


def derive_codes(features: Sequence[Variable], codes: np.ndarray, numbers: Mapping[str, np.ndarray]) -> None:
    """Write each derived feature's column of ``codes`` (rows, len(features)): its projection
    of the inputs' ``numbers`` (float64 per row by name, NaN missing; an input absent from
    ``numbers`` is missing in every row), then its cut points (-1 where it is missing)."""
    nothing = np.full(codes.shape[0], np.nan)
    for j, variable in enumerate(features):
        projection = variable.projection
        if projection is None:
            continue
        values = projection.values([numbers.get(name, nothing) for name in projection.inputs])
        column = interval_codes(variable.cuts, values)
        if variable.missing_state:
            column[column < 0] = variable.missing_code
        codes[:, j] = column
