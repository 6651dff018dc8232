"""Turn the wire forms of a prediction request into the coded matrix the model takes.

This is the boundary: every name, label and code is checked here (with a message
naming it), so the compiled model can trust its input; a value unseen in training is
read as missing (and counted) or refused by the store's one rule
(``bnserve.store.model.unseen``). Both APIs come through here:
Predict's instances and dense batches, and the Open Inference Protocol's feature
columns and codes (``bnserve.server.tensors`` decodes its tensors first).

A derived feature (``Variable.projection``) is never sent: every form that carries raw
values keeps the numbers of its inputs and codes it with the store's ``derive_codes``, after
the other features; naming it there is refused (``value_column``). State codes (a dense
batch's ``codes``, the ``codes`` tensor) are the caller's own, a derived feature's included.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NoReturn

import numpy as np

from bnserve.server.limits import INLINE_ROWS, Work
from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, MISSING, NUMERIC, UNKNOWN, Variable, settle_unknown, unseen_code
from bnserve.store.model.discretization import interval_code, interval_codes, number_of
from bnserve.store.model.projection import Projection, derive_codes, derived_inputs
from bnserve.store.predictor import CompiledModel, check_codes

_NO_CODES = np.empty(0, dtype=np.int64)
_NO_VALUES = np.empty(0, dtype=np.float64)
MAX_LABELS_IN_MESSAGE = 20


def _allowed(states: tuple[str, ...]) -> str:
    shown = ", ".join(repr(s) for s in states[:MAX_LABELS_IN_MESSAGE])
    more = len(states) - MAX_LABELS_IN_MESSAGE
    return shown + (f", … ({more} more)" if more > 0 else "")


def feature_column(compiled: CompiledModel, name: str, class_name: str) -> int:
    """The column of a feature the request names; an unknown name, or the class's, is refused."""
    column = compiled.feature_index.get(name)
    if column is None:
        if name == class_name:
            raise InvalidInput(f"{name!r} is the class variable; send features only")
        raise InvalidInput(f"unknown feature {name!r}")
    return column


def value_column(compiled: CompiledModel, name: str, class_name: str) -> int:
    """The column of a feature the request sends a raw value of (``feature_column``); a
    derived feature is refused: its value is computed from its inputs', which are sent."""
    column = feature_column(compiled, name, class_name)
    projection = compiled.features[column].projection
    if projection is not None:
        raise InvalidInput(f"{_derived(name, projection)}; send those")
    return column


def _derived(name: str, projection: Projection) -> str:
    return f"feature {name!r} is derived from {_allowed(projection.inputs)}"


@dataclass(frozen=True)
class FeatureTables:
    """What decoding a request looks up, built once per compiled model (``tables_of``) so a
    value costs a dict lookup or two: ``column``, name -> column of each feature a raw value
    is sent for (a derived feature is not: its name misses, and ``value_column`` refuses
    it); per column ``labels``, text -> code of every state label and "" and missing marker
    (``Variable.label_codes``, shared with the variable), and ``cuts``, a numeric feature's
    cut points (None: nominal). A text not in ``labels`` (a number, "14.0", an unseen label)
    takes ``Variable.code_of``. ``inputs``: the features derived ones read, whose numbers
    are kept (none: the model has no derived feature); ``terms``: the number of inputs
    summed over the derived features (p each), the work per row of computing them."""

    column: Mapping[str, int]
    labels: tuple[Mapping[str, int], ...]
    cuts: tuple[tuple[float, ...] | None, ...]
    inputs: frozenset[str] = frozenset()
    terms: int = 0

    @staticmethod
    def of(compiled: CompiledModel) -> FeatureTables:
        features = compiled.features
        projections = [v.projection for v in features if v.projection is not None]
        column = compiled.feature_index
        if projections:
            column = {v.name: j for j, v in enumerate(features) if v.projection is None}
        return FeatureTables(
            column,
            tuple(v.label_codes() for v in features),
            tuple(v.cuts if v.kind == NUMERIC else None for v in features),
            derived_inputs(features),
            sum(len(p.inputs) for p in projections),
        )


_TABLES: weakref.WeakKeyDictionary[CompiledModel, FeatureTables] = weakref.WeakKeyDictionary()


def tables_of(compiled: CompiledModel) -> FeatureTables:
    """The model's ``FeatureTables``, built on its first request and dropped with it."""
    tables = _TABLES.get(compiled)
    if tables is None:
        tables = _TABLES[compiled] = FeatureTables.of(compiled)
    return tables


def codes_from_instances(
    compiled: CompiledModel,
    class_name: str,
    instances: Iterable[tuple[Mapping[str, str], Mapping[str, float]]],
    unknown: str = DEFAULT_UNKNOWN,
    unseen: dict[int, int] | None = None,
) -> np.ndarray:
    """(rows, n_features) codes from (text values, numbers) maps, one pair per row.

    A text value is a state label or, for a numeric feature, a number; an empty text, an
    absent feature or a NaN number is missing. A text no training row had is what
    ``unknown`` makes of it (``unseen_code``: missing, counted per column in ``unseen``, or
    refused). Values are looked up in the model's ``FeatureTables``; what they miss is
    coded, or refused, one value at a time in the same order, so the first error is the same.
    Derived features are coded last, from the numbers of their inputs (``_instance_numbers``).
    """
    tables = tables_of(compiled)
    column_of, labels, cuts_of = tables.column.get, tables.labels, tables.cuts
    listed = None
    if tables.inputs:  # read twice: coded, then their inputs' numbers
        instances = listed = list(instances)
    blank = [MISSING] * len(labels)
    flat: list[int] = []
    r = -1
    for r, (values, numbers) in enumerate(instances):
        row = blank.copy()
        for name, text in values.items():
            j = column_of(name)
            if j is None or (code := labels[j].get(text)) is None:
                j = value_column(compiled, name, class_name)
                variable = compiled.features[j]
                code = variable.code_of(text)
                if code == UNKNOWN:
                    code = unseen_code(variable, unknown)
                    if code == UNKNOWN:
                        _refuse(variable, text, f"instance {r}")
                    if unseen is not None:
                        unseen[j] = unseen.get(j, 0) + 1
            row[j] = code
        for name, number in numbers.items():
            j = column_of(name)
            if j is None or (cuts := cuts_of[j]) is None or name in values:
                _numeric_feature(compiled, name, class_name, f"instance {r}")
                raise InvalidInput(f"instance {r}: feature {name!r} is in both values and numbers")
            row[j] = MISSING if math.isnan(number) else interval_code(cuts, number)
        flat += row
    codes = np.array(flat, dtype=np.int64).reshape(r + 1, len(blank))
    if listed is not None:
        derive_codes(compiled.features, codes, _instance_numbers(tables, listed))
    return codes


def _instance_numbers(
    tables: FeatureTables, instances: Sequence[tuple[Mapping[str, str], Mapping[str, float]]]
) -> dict[str, np.ndarray]:
    """The numbers of the features derived ones read, per row (NaN missing), from instances
    already coded (so every name and text in them is one the model takes, and none is in
    both maps): a number sent, or a text read as one (``_text_number``). One pass over what
    each instance sends, a list store per input value: not a lookup per input and row."""
    columns = {name: [math.nan] * len(instances) for name in tables.inputs}
    for r, (values, numbers) in enumerate(instances):
        for name, number in numbers.items():
            if (column := columns.get(name)) is not None:
                column[r] = number
        for name, text in values.items():
            if (column := columns.get(name)) is not None:
                column[r] = _text_number(text, tables.labels[tables.column[name]])
    return {name: np.array(column, dtype=np.float64) for name, column in columns.items()}


def _text_number(text: str, labels: Mapping[str, int]) -> float:
    """The number a text value of a numeric feature gives a derived feature: the number it
    is written as; NaN (missing) for a text its ``labels`` code (an interval label, "", a
    missing marker: a marker such as "-999" is no number here, as it was in training)."""
    return math.nan if text in labels else number_of(text)


def codes_from_columns(
    compiled: CompiledModel,
    class_name: str,
    rows: int,
    texts: Mapping[str, Sequence[str]],
    numbers: Mapping[str, np.ndarray],
    unknown: str = DEFAULT_UNKNOWN,
    unseen: dict[int, int] | None = None,
) -> np.ndarray:
    """(rows, n_features) codes from one column of ``rows`` raw values per feature.

    ``texts`` columns hold what an instance's text values hold (a state label, or for a
    numeric feature a number; "" is missing); ``numbers`` columns hold raw numbers of
    numeric features (NaN is missing). Unlisted features are missing. The text columns
    are looked up in the model's ``FeatureTables`` into one array; if a name or a text
    misses them, they are coded (or refused) again column by column with
    ``Variable.codes_of``, in order, so the first error is the same. ``unknown`` and
    ``unseen``: as ``codes_from_instances``. Derived features are coded last, from the
    numbers of their inputs' columns.
    """
    tables = tables_of(compiled)
    column_of, labels = tables.column.get, tables.labels
    columns: list[int] = []
    flat: list[int] = []
    for name, column in texts.items():
        j = column_of(name)
        if j is None:
            break
        columns.append(j)
        flat += map(labels[j].get, column, repeat(UNKNOWN))
    given = np.fromiter(flat, dtype=np.int64, count=len(flat)).reshape(len(columns), rows)
    if len(columns) < len(texts) or (given == UNKNOWN).any():
        columns, given = _text_columns(compiled, class_name, rows, texts, unknown, unseen)
    codes = np.full((rows, len(labels)), MISSING, dtype=np.int64)
    codes[:, columns] = given.T
    for name, numeric in numbers.items():
        variable = _numeric_feature(compiled, name, class_name)
        if name in texts:
            raise InvalidInput(f"feature {name!r} is given both as text and as numbers")
        codes[:, compiled.feature_index[name]] = interval_codes(variable.cuts, numeric)
    if tables.inputs:
        derive_codes(compiled.features, codes, _column_numbers(tables, texts, numbers))
    return codes


def _column_numbers(
    tables: FeatureTables, texts: Mapping[str, Sequence[str]], numbers: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The numbers of the features derived ones read, from columns already coded; an input
    not sent is left out (missing in every row)."""
    out: dict[str, np.ndarray] = {}
    for name in tables.inputs:
        if name in numbers:
            out[name] = np.asarray(numbers[name], dtype=np.float64)
        elif name in texts:
            labels, column = tables.labels[tables.column[name]], texts[name]
            out[name] = np.fromiter((_text_number(t, labels) for t in column), dtype=np.float64, count=len(column))
    return out


def _text_columns(
    compiled: CompiledModel,
    class_name: str,
    rows: int,
    texts: Mapping[str, Sequence[str]],
    unknown: str,
    unseen: dict[int, int] | None,
) -> tuple[list[int], np.ndarray]:
    """(columns, codes (len(columns), rows)) of text columns, one ``Variable.codes_of`` each:
    numbers as text, whole numbers such as "14.0", unseen texts as ``settle_unknown`` says,
    and the first unknown name or text left refused."""
    columns: list[int] = []
    given = np.empty((len(texts), rows), dtype=np.int64)
    for k, (name, column) in enumerate(texts.items()):
        j = value_column(compiled, name, class_name)
        variable = compiled.features[j]
        coded = variable.codes_of(column)
        settled = settle_unknown(variable, coded, unknown)
        if settled.size and unseen is not None:
            unseen[j] = unseen.get(j, 0) + settled.size
        left = np.flatnonzero(coded == UNKNOWN)
        if left.size:
            _refuse(variable, column[int(left[0])], f"row {int(left[0])}")
        given[k] = coded
        columns.append(j)
    return columns, given


def _refuse(variable: Variable, text: str, where: str) -> NoReturn:
    number = " or a number" if variable.kind == NUMERIC else ""
    raise InvalidInput(
        f"{where}: feature {variable.name!r} has no state {text!r}; allowed: {_allowed(variable.states)}{number}"
    )


def _numeric_feature(compiled: CompiledModel, name: str, class_name: str, where: str = "") -> Variable:
    """The variable of a feature sent as a number, which only a numeric feature takes (a
    derived one is not sent: ``value_column``)."""
    variable = compiled.features[value_column(compiled, name, class_name)]
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
    used as it is, without a scatter into a matrix of missing codes. The feature names are
    checked before the data is read.

    Codes are the caller's own, a derived feature's included. Raw values code derived
    features from their inputs' columns (an input not listed is missing); a batch of values
    names one only when it lists every feature in the model's order, its column all NaN
    (``_codes_from_values``), and is refused otherwise (``value_column``).
    """
    check_feature_count(compiled, len(features), "dense batch lists")
    features = list(features)
    in_model_order = features == list(compiled.feature_index)
    if in_model_order:
        columns = list(range(len(features)))
    else:
        column_of = value_column if len(flat_values) and not len(flat_codes) else feature_column
        columns = [column_of(compiled, name, class_name) for name in features]
        if len(set(columns)) != len(columns):
            dup = next(n for k, n in enumerate(features) if n in features[:k])
            raise InvalidInput(f"dense batch lists feature {dup!r} twice")
    flat = np.asarray(flat_codes, dtype=np.int64) if len(flat_codes) else _NO_CODES
    raw = np.asarray(flat_values, dtype=np.float64) if len(flat_values) else _NO_VALUES
    if flat.size and raw.size:
        raise InvalidInput("dense batch has both codes and values; send one of them")
    size = max(flat.size, raw.size)
    if not features:
        if size:
            raise InvalidInput("dense batch has codes but no features")
        return np.empty((0, len(compiled.features)), dtype=np.int64)
    if size % len(features):
        what = "values" if raw.size else "codes"
        raise InvalidInput(f"dense batch has {size} {what}, not a multiple of its {len(features)} features")
    values = raw.reshape(-1, len(features))
    given = _codes_from_values(compiled, columns, values) if raw.size else flat.reshape(-1, len(features))
    if in_model_order:
        codes = given
    else:
        codes = np.full((given.shape[0], len(compiled.features)), MISSING, dtype=np.int64)
        codes[:, columns] = given
    if raw.size and (inputs := tables_of(compiled).inputs):
        derive_codes(compiled.features, codes, {n: values[:, k] for k, n in enumerate(features) if n in inputs})
    return check_codes(compiled, codes)


def _codes_from_values(compiled: CompiledModel, columns: list[int], raw: np.ndarray) -> np.ndarray:
    """Raw dense values to codes: numeric features through their cut points, nominal
    features as whole-number codes; NaN is missing. A derived feature's column (listed in
    the model's order) must be all NaN: it is left missing here, computed in ``codes_from_dense``."""
    codes = np.empty(raw.shape, dtype=np.int64)
    for j, column in enumerate(columns):
        variable = compiled.features[column]
        values = raw[:, j]
        if variable.projection is not None:
            sent = np.flatnonzero(~np.isnan(values))
            if sent.size:
                row = int(sent[0])
                raise InvalidInput(
                    f"dense batch: {_derived(variable.name, variable.projection)}, which are sent; its column "
                    f"must be NaN, computed from theirs: row {row} has {float(values[row])!r}"
                )
            codes[:, j] = MISSING
            continue
        if variable.kind == NUMERIC:
            codes[:, j] = interval_codes(variable.cuts, values)
            continue
        missing = np.isnan(values)
        bad = ~missing & ((values != np.round(values)) | (values < 0) | (values >= variable.cardinality))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidInput(
                f"feature {variable.name!r} is nominal: row {row} has value {float(values[row])!r}, "
                f"expected a state code from 0 to {variable.cardinality - 1} or NaN (missing)"
            )
        codes[:, j] = np.where(missing, MISSING, values).astype(np.int64)
    return codes


def check_feature_count(compiled: CompiledModel, count: int, what: str) -> None:
    """Refuse more feature names than the model has (some would be unknown or repeated)
    before any is looked up: their number, not the model, would set the work."""
    if count > len(compiled.features):
        raise InvalidInput(f"{what} {count} features; the model has {len(compiled.features)} features")


def derived_work(compiled: CompiledModel, rows: int) -> int:
    """The elements computing ``rows`` rows of the model's derived features walks: each
    one's inputs per row (``FeatureTables.terms``), beside what the request carries."""
    return rows * tables_of(compiled).terms


def dense_work(compiled: CompiledModel, features: Sequence[str], codes: Sized, values: Sized) -> Work:
    """The work of a DenseBatch, from its field lengths alone (``limits.Work``); raw values
    compute the derived features too (``derived_work``), codes carry theirs."""
    check_feature_count(compiled, len(features), "dense batch lists")
    size = max(len(codes), len(values))
    rows = size // max(len(features), 1)
    return Work(rows, size + len(features) + (derived_work(compiled, rows) if len(values) else 0))


def instances_work(compiled: CompiledModel, instances: Sequence[Any]) -> Work:
    """The work of Predict's instances, derived features computed included (``derived_work``);
    each instance's names are counted (and refused beyond the model's features) only when
    the rows are few enough to answer on the loop: more go to the pool, where
    ``codes_from_instances`` refuses the first unknown name."""
    rows = len(instances)
    if rows > INLINE_ROWS:
        return Work(rows, rows + derived_work(compiled, rows))
    names = 0
    for r, instance in enumerate(instances):
        values, numbers = len(instance.values), len(instance.numbers)
        check_feature_count(compiled, max(values, numbers), f"instance {r} has")
        names += values + numbers
    return Work(rows, names + derived_work(compiled, rows))
