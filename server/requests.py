"""Turn the wire forms of a Predict request into the coded matrix the model takes.

This is the boundary: every name, label and code is checked here (with a message
naming it), so the compiled model can trust its input.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from store.errors import InvalidInput
from store.discretization import interval_codes
from store.inference import CompiledModel, check_codes
from store.model import NOMINAL, NUMERIC

MISSING = -1
MAX_LABELS_IN_MESSAGE = 20


def _allowed(states: tuple[str, ...]) -> str:
    shown = ", ".join(repr(s) for s in states[:MAX_LABELS_IN_MESSAGE])
    more = len(states) - MAX_LABELS_IN_MESSAGE
    return shown + (f", … ({more} more)" if more > 0 else "")


def _feature_column(compiled: CompiledModel, name: str, class_name: str) -> int:
    column = compiled.feature_index.get(name)
    if column is None:
        if name == class_name:
            raise InvalidInput(f"{name!r} is the class variable; send features only")
        raise InvalidInput(f"unknown feature {name!r}")
    return column


def codes_from_instances(
    compiled: CompiledModel,
    class_name: str,
    instances: Iterable[tuple[Mapping[str, str], Mapping[str, float]]],
    unseen_as_missing: bool = False,
) -> np.ndarray:
    """(rows, n_features) codes from (text values, numbers) maps, one pair per row.

    A text value is a state label or, for a numeric feature, a number; an empty text, an
    absent feature or a NaN number is missing. With ``unseen_as_missing`` a text that is
    not a state of a nominal feature counts as missing instead of being refused.
    """
    rows = list(instances)
    codes = np.full((len(rows), len(compiled.features)), MISSING, dtype=np.int64)
    for r, (values, numbers) in enumerate(rows):
        for name, label in values.items():
            column = _feature_column(compiled, name, class_name)
            if label == "":
                continue
            variable = compiled.features[column]
            try:
                codes[r, column] = variable.code_of_value(label)
            except KeyError:
                if unseen_as_missing and variable.kind == NOMINAL:
                    continue
                number = " or a number" if variable.kind == NUMERIC else ""
                raise InvalidInput(
                    f"instance {r}: feature {name!r} has no state {label!r}; "
                    f"allowed: {_allowed(variable.states)}{number}"
                ) from None
        for name, number in numbers.items():
            column = _feature_column(compiled, name, class_name)
            variable = compiled.features[column]
            if variable.kind != NUMERIC:
                raise InvalidInput(f"instance {r}: feature {name!r} is nominal; send its state label in values")
            if name in values:
                raise InvalidInput(f"instance {r}: feature {name!r} is in both values and numbers")
            codes[r, column] = interval_codes(variable.cuts, np.array([number]))[0]
    return codes


def codes_from_dense(
    compiled: CompiledModel,
    class_name: str,
    features: list[str],
    flat_codes: Iterable[int],
    flat_values: Iterable[float] = (),
) -> np.ndarray:
    """(rows, n_features) codes from a row-major DenseBatch (state codes, or raw values);
    unlisted features are missing."""
    flat = np.fromiter(flat_codes, dtype=np.int64)
    raw = np.fromiter(flat_values, dtype=np.float64)
    if flat.size and raw.size:
        raise InvalidInput("dense batch has both codes and values; send one of them")
    size = max(flat.size, raw.size)
    if not features:
        if size:
            raise InvalidInput("dense batch has codes but no features")
        return np.empty((0, len(compiled.features)), dtype=np.int64)
    columns = [_feature_column(compiled, name, class_name) for name in features]
    if len(set(columns)) != len(columns):
        seen: set[str] = set()
        dup = next(n for n in features if n in seen or seen.add(n))
        raise InvalidInput(f"dense batch lists feature {dup!r} twice")
    if size % len(features):
        what = "values" if raw.size else "codes"
        raise InvalidInput(
            f"dense batch has {size} {what}, not a multiple of its {len(features)} features"
        )
    if raw.size:
        given = _codes_from_values(compiled, columns, raw.reshape(-1, len(features)))
    else:
        given = flat.reshape(-1, len(features))
    codes = np.full((given.shape[0], len(compiled.features)), MISSING, dtype=np.int64)
    codes[:, columns] = given
    return check_codes(compiled, codes)


def _codes_from_values(compiled: CompiledModel, columns: list[int], raw: np.ndarray) -> np.ndarray:
    """Raw dense values to codes: numeric features through their cut points, nominal
    features as whole-number codes; NaN is missing."""
    codes = np.empty(raw.shape, dtype=np.int64)
    for j, column in enumerate(columns):
        variable = compiled.features[column]
        values = raw[:, j]
        if variable.kind == NUMERIC:
            codes[:, j] = interval_codes(variable.cuts, values)
            continue
        missing = np.isnan(values)
        bad = ~missing & ((values != np.round(values)) | (values < 0) | (values >= variable.cardinality))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidInput(f"feature {variable.name!r} is nominal: row {row} has value {values[row]!r}, "
                               f"expected a state code from 0 to {variable.cardinality - 1} or NaN (missing)")
        codes[:, j] = np.where(missing, MISSING, values).astype(np.int64)
    return codes
