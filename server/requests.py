"""Turn the wire forms of a prediction request into the coded matrix the model takes.

This is the boundary: every name, label and code is checked here (with a message
naming it), so the compiled model can trust its input. Both APIs come through here:
Predict's instances and dense batches, and the Open Inference Protocol's feature
columns and codes (``bnserve.server.tensors`` decodes its tensors first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NoReturn

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import MISSING, NOMINAL, NUMERIC, UNKNOWN, Variable
from bnserve.store.model.discretization import interval_codes
from bnserve.store.predictor import CompiledModel, check_codes

_NO_CODES = np.empty(0, dtype=np.int64)
_NO_VALUES = np.empty(0, dtype=np.float64)
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
            codes[r, column] = _code_of_text(compiled.features[column], label, f"instance {r}", unseen_as_missing)
        for name, number in numbers.items():
            variable = _numeric_feature(compiled, name, class_name, f"instance {r}")
            if name in values:
                raise InvalidInput(f"instance {r}: feature {name!r} is in both values and numbers")
            codes[r, compiled.feature_index[name]] = interval_codes(variable.cuts, np.array([number]))[0]
    return codes


def codes_from_columns(
    compiled: CompiledModel,
    class_name: str,
    rows: int,
    texts: Mapping[str, Sequence[str]],
    numbers: Mapping[str, np.ndarray],
) -> np.ndarray:
    """(rows, n_features) codes from one column of ``rows`` raw values per feature.

    ``texts`` columns hold what an instance's text values hold (a state label, or for a
    numeric feature a number; "" is missing); ``numbers`` columns hold raw numbers of
    numeric features (NaN is missing). Unlisted features are missing.
    """
    codes = np.full((rows, len(compiled.features)), MISSING, dtype=np.int64)
    for name, column in texts.items():
        j = _feature_column(compiled, name, class_name)
        variable = compiled.features[j]
        coded = variable.codes_of(column)
        unknown = np.flatnonzero(coded == UNKNOWN)
        if unknown.size:
            _refuse(variable, column[int(unknown[0])], f"row {int(unknown[0])}")
        codes[:, j] = coded
    for name, numeric in numbers.items():
        variable = _numeric_feature(compiled, name, class_name)
        if name in texts:
            raise InvalidInput(f"feature {name!r} is given both as text and as numbers")
        codes[:, compiled.feature_index[name]] = interval_codes(variable.cuts, numeric)
    return codes


def _code_of_text(variable: Variable, text: str, where: str, unseen_as_missing: bool = False) -> int:
    """The state code of one raw text value (``Variable.code_of``); an unseen label of a
    nominal feature is missing when ``unseen_as_missing``; anything else unknown is refused."""
    code = variable.code_of(text)
    if code != UNKNOWN:
        return code
    if unseen_as_missing and variable.kind == NOMINAL:
        return MISSING
    _refuse(variable, text, where)


def _refuse(variable: Variable, text: str, where: str) -> NoReturn:
    number = " or a number" if variable.kind == NUMERIC else ""
    raise InvalidInput(
        f"{where}: feature {variable.name!r} has no state {text!r}; allowed: {_allowed(variable.states)}{number}"
    )


def _numeric_feature(compiled: CompiledModel, name: str, class_name: str, where: str = "") -> Variable:
    """The variable of a feature sent as a number, which only a numeric feature takes."""
    variable = compiled.features[_feature_column(compiled, name, class_name)]
    if variable.kind != NUMERIC:
        prefix = f"{where}: " if where else ""
        raise InvalidInput(f"{prefix}feature {name!r} is nominal; send its state label as text, not a number")
    return variable


def codes_from_dense(
    compiled: CompiledModel,
    class_name: str,
    features: Sequence[str],
    flat_codes: Sequence[int] | np.ndarray,
    flat_values: Sequence[float] | np.ndarray = (),
) -> np.ndarray:
    """(rows, n_features) codes from a row-major DenseBatch (state codes, or raw values);
    unlisted features are missing.

    The flat sequences may be protobuf repeated fields: numpy copies those in one step
    (``np.asarray``), where iterating them element by element costs a Python object each.
    A batch listing every feature in the model's order (the bulk caller's usual form) is
    used as it is, without a scatter into a matrix of missing codes.
    """
    flat = np.asarray(flat_codes, dtype=np.int64) if len(flat_codes) else _NO_CODES
    raw = np.asarray(flat_values, dtype=np.float64) if len(flat_values) else _NO_VALUES
    if flat.size and raw.size:
        raise InvalidInput("dense batch has both codes and values; send one of them")
    size = max(flat.size, raw.size)
    features = list(features)
    if not features:
        if size:
            raise InvalidInput("dense batch has codes but no features")
        return np.empty((0, len(compiled.features)), dtype=np.int64)
    in_model_order = features == list(compiled.feature_index)
    if in_model_order:
        columns = list(range(len(features)))
    else:
        columns = [_feature_column(compiled, name, class_name) for name in features]
        if len(set(columns)) != len(columns):
            dup = next(n for k, n in enumerate(features) if n in features[:k])
            raise InvalidInput(f"dense batch lists feature {dup!r} twice")
    if size % len(features):
        what = "values" if raw.size else "codes"
        raise InvalidInput(f"dense batch has {size} {what}, not a multiple of its {len(features)} features")
    if raw.size:
        given = _codes_from_values(compiled, columns, raw.reshape(-1, len(features)))
    else:
        given = flat.reshape(-1, len(features))
    if in_model_order:
        return check_codes(compiled, given)
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
            raise InvalidInput(
                f"feature {variable.name!r} is nominal: row {row} has value {values[row]!r}, "
                f"expected a state code from 0 to {variable.cardinality - 1} or NaN (missing)"
            )
        codes[:, j] = np.where(missing, MISSING, values).astype(np.int64)
    return codes
