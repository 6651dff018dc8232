"""What ``trainer fit`` tells about the data once they are typed: one line per column (its
role, kind, states or cut points, missing share) and warnings on what looks like a file
read wrong: a column that is numeric but for a few tokens, a nominal feature with about
a state per row (an identifier) or with more states than its rows support (``_many_states``).
Real files go wrong silently; this is where it shows.

From the counts the fit has anyway (``state_counts``), never another pass over the data.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

import numpy as np

from bnserve.store.model import CLASS, NUMERIC, Variable
from bnserve.store.model.discretization import number_of
from bnserve.store.model.variable import whole_number
from bnserve.trainer.data.columns import is_numeric_column
from bnserve.trainer.data.encoded import EncodedData
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.view import TrainingView
from bnserve.trainer.io import redacted_url
from bnserve.trainer.stats import value_counts

MAX_LINES = 30  # columns listed; the others are counted, but for those with a warning
MAX_TOKENS = 3  # a numeric column "but for" at most this many distinct texts...
TOKEN_SHARE = 0.05  # ...or for texts in fewer than this share of its rows
ID_SHARE = 0.9  # a nominal feature with states for this share of its rows is an identifier
ID_MIN_ROWS = 20  # (when it has more rows than this)
MANY_STATES_FLOOR = 32  # a nominal feature with more states than this and than √rows: see _many_states
SHOWN_STATES = 4
SHOWN_CUTS = 2
MAX_NAME = 24
MAX_STATES_TEXT = 28


@dataclass(frozen=True)
class ColumnFacts:
    """A variable with the rows of each of its states and its missing values (None: not known)."""

    variable: Variable
    counts: np.ndarray
    missing: int | None


def state_counts(data: TrainingView) -> list[tuple[np.ndarray, int | None]]:
    """Per feature, the rows of each state and the rows missing, from what the fit holds:
    the coded rows (with ``--missing impute``, the rows as read) or, streamed, N(xi, c)
    (weighted rows streamed: their weights, and the rows missing are not known)."""
    if not isinstance(data, EncodedData):
        tables = [table.sum(axis=1) for table in data.statistics.class_feature]
        return [(c, None if data.weighted else _missing(v, c, data.n_rows)) for v, c in zip(data.features, tables)]
    out: list[tuple[np.ndarray, int | None]] = []
    for j, v in enumerate(data.features):
        counts = value_counts(data.X[:, j], v.cardinality)
        if data.columns is None or v.projection is not None:  # a derived feature: no column of its own
            missing = _missing(v, counts, data.n_rows)
        elif data.columns.states[j] is None:  # numeric: the NaNs read, before any imputation
            missing = int(np.isnan(data.columns.values(j)).sum())
        else:
            missing = int(np.count_nonzero(data.columns.codes[:, j] < 0))
        out.append((counts, missing))
    return out


def _missing(variable: Variable, counts: np.ndarray, rows: int) -> int:
    return int(counts[-1]) if variable.missing_state else rows - int(counts.sum())


def column_facts(data: TrainingView) -> list[ColumnFacts]:
    """Every column's facts, the class last (never missing: rows without one are dropped)."""
    facts = [ColumnFacts(v, counts, missing) for v, (counts, missing) in zip(data.features, state_counts(data))]
    return [*facts, ColumnFacts(data.class_variable, data.class_totals(), None)]


def warnings_of(facts: list[ColumnFacts], preprocessing: Preprocessing | None) -> dict[str, str]:
    """Column name -> what looks wrong with it, and what to pass to read it right."""
    preprocessing = preprocessing or Preprocessing()
    found = {}
    for f in facts:
        v = f.variable
        if v.kind == NUMERIC or v.name in preprocessing.nominal:
            continue
        feature = v.role != CLASS  # a class of numbers or of a value per row is refused before
        tokens = _numbers_but_for(f, preprocessing.na_values) if feature else None
        identifier = _identifier(f) if feature else None
        many = feature and not identifier and _many_states(f)
        numeric = _numeric_but_for(f, tokens, many)
        warning = numeric or identifier or (_many_states_warning(f) if many else None) or _lookalikes(f)
        if warning:
            found[v.name] = warning
    return found


def _labels_and_counts(f: ColumnFacts) -> tuple[tuple[str, ...], np.ndarray]:
    """The states that are values read (not ``--missing state``'s) and their rows."""
    if f.variable.missing_state:
        return f.variable.states[:-1], f.counts[:-1]
    return f.variable.states, f.counts


def _seen(f: ColumnFacts) -> tuple[list[str], np.ndarray]:
    """``_labels_and_counts`` of the values some row has (not a declared domain's others)."""
    labels, counts = _labels_and_counts(f)
    seen = np.flatnonzero(counts)
    return [labels[i] for i in seen.tolist()], counts[seen]


@dataclass(frozen=True)
class _Tokens:
    """The texts that keep a column of numbers nominal: shown, their rows, the --na-values to pass."""

    shown: str
    rows: int
    flag: str


def _numbers_but_for(f: ColumnFacts, na_values: tuple[str, ...]) -> _Tokens | None:
    """A nominal column whose values are numbers but for a few texts (or texts in few rows);
    the --na-values to pass keep those given (which replace the default)."""
    labels, counts = _seen(f)
    numbers = np.array([number_of(s) for s in labels], dtype=np.float64)
    tokens = np.isnan(numbers)
    if not tokens.any() or tokens.all():
        return None
    token_rows, rows = int(counts[tokens].sum()), int(counts.sum())
    if not (tokens.sum() <= MAX_TOKENS or token_rows < TOKEN_SHARE * rows) or 2 * token_rows >= rows:
        return None
    if not is_numeric_column(f.variable.name, None, numbers[~tokens], Preprocessing(), counts[~tokens]):
        return None  # the numbers alone would be whole-number codes: nominal all the same
    names = [s for s, t in zip(labels, tokens.tolist()) if t]
    more = f" and {len(names) - MAX_TOKENS} more" if len(names) > MAX_TOKENS else ""
    shown = ", ".join(repr(s) for s in names[:MAX_TOKENS]) + more
    return _Tokens(shown, token_rows, shlex.quote(",".join(dict.fromkeys((*na_values, *names)))))


def _numeric_but_for(f: ColumnFacts, tokens: _Tokens | None, many: bool) -> str | None:
    """The texts to declare missing; with ``many`` (``_many_states``) also what it costs and
    the other ways out."""
    if tokens is None:
        return None
    labels, counts = _seen(f)
    name = shlex.quote(f.variable.name)
    support = f", more than its {int(counts.sum()):,} rows support{_root(counts)}" if many else ""
    others = f" (or --numeric {name}), or --ignore {name} to leave it out" if many else ""
    return (
        f"column {f.variable.name!r} is numeric but for the value(s) {tokens.shown} ({tokens.rows:,} rows); it was "
        f"read as nominal with {len(labels):,} states{support}; pass --na-values {tokens.flag} to read it as "
        f"numeric{others}"
    )


def _many_states(f: ColumnFacts) -> bool:
    """A nominal feature with more states than √rows (and than ``MANY_STATES_FLOOR``): a
    table of it and one other such column has more cells than there are rows, so every CPT
    a dependence learner builds on it is mostly empty, and with k such parents it grows as
    states^(k+1) (issue 26: three columns of numbers with an 'NA' text, 352, 160 and 183
    states in 4,454 rows, asked for tens of GB). No curated data set has such a column:
    it is most likely a number column read as text, or an identifier."""
    labels, counts = _seen(f)
    return len(labels) > max(MANY_STATES_FLOOR, math.sqrt(int(counts.sum())))


def _root(counts: np.ndarray) -> str:
    return f" (√rows = {math.isqrt(int(counts.sum()))})"


def _many_states_warning(f: ColumnFacts) -> str:
    labels, counts = _seen(f)
    name = shlex.quote(f.variable.name)
    return (
        f"column {f.variable.name!r} is nominal with {len(labels):,} states for {int(counts.sum()):,} rows, more "
        f"than its rows support{_root(counts)}: probably numeric or an identifier; pass --numeric {name} if it "
        f"holds numbers (and --na-values for its missing markers), or --ignore {name} to leave it out"
    )


def _identifier(f: ColumnFacts) -> str | None:
    """A nominal feature with (about) a state per row: an identifier, useless to a classifier."""
    labels, counts = _seen(f)
    rows = int(counts.sum())
    if rows <= ID_MIN_ROWS or len(labels) < ID_SHARE * rows:
        return None
    return (
        f"column {f.variable.name!r} has {len(labels):,} distinct values in {rows:,} rows, about one per row "
        f"(an identifier?); pass --ignore {shlex.quote(f.variable.name)} to leave it out"
    )


def _lookalikes(f: ColumnFacts) -> str | None:
    """A nominal column with states that are one value written two ways ("Male", "male";
    "1", "1.0"): most likely one value split in two by the way the file was written."""
    labels, _ = _seen(f)
    groups: dict[object, list[str]] = {}
    for label in labels:
        number = number_of(label)
        groups.setdefault(label.casefold() if math.isnan(number) else number, []).append(label)
    alike = [g for g in groups.values() if len(g) > 1]
    if not alike:
        return None
    shown = "; ".join(" and ".join(repr(s) for s in g) for g in alike[:MAX_TOKENS])
    more = f" (and {len(alike) - MAX_TOKENS} more such groups)" if len(alike) > MAX_TOKENS else ""
    return (
        f"column {f.variable.name!r} has states that differ only in case or in how a number is written: "
        f"{shown}{more}; they are learned as different values"
    )


def summary_text(data: TrainingView) -> tuple[str, list[str]]:
    """The summary table (one line per column, at most ``MAX_LINES`` but for the columns
    with a warning, marked "(!)"), and the warnings, to be shown after it."""
    facts = column_facts(data)
    warnings = warnings_of(facts, data.preprocessing)
    rows = data.n_rows
    dropped = f", {data.n_rows_dropped:,} without a class dropped" if data.n_rows_dropped else ""
    dropped += _weights(data)
    lines = [
        f"{redacted_url(data.source)}: {rows:,} rows{dropped}, {len(facts) - 1:,} features, class {data.class_variable.name!r}"
    ]
    shown = [f for i, f in enumerate(facts) if i < MAX_LINES or f.variable.name in warnings or i == len(facts) - 1]
    table = [("column", "role", "kind", "states", "missing")]
    table += [_row(f, rows, f.variable.name in warnings) for f in shown]
    widths = [max(len(r[k]) for r in table) for k in range(4)]
    lines += ["  " + "  ".join(r[k].ljust(widths[k]) for k in range(4)) + "  " + r[4].rjust(7) for r in table]
    if len(shown) < len(facts):
        lines.append(f"  … and {len(facts) - len(shown):,} more columns")
    return "\n".join(lines), list(warnings.values())


def _weights(data: TrainingView) -> str:
    """ ", weighted by column 'w' (total weight 4.5)", when the rows are weighted."""
    if not data.weighted:
        return ""
    column = data.preprocessing.weight if data.preprocessing is not None else None
    by = f" by column {column!r}" if column else ""
    return f", weighted{by} (total weight {data.total_weight():,.6g})"


def _row(f: ColumnFacts, rows: int, warned: bool) -> tuple[str, str, str, str, str]:
    v = f.variable
    name = (v.name if len(v.name) <= MAX_NAME else v.name[: MAX_NAME - 1] + "…") + (" (!)" if warned else "")
    labels, _ = _labels_and_counts(f)
    if v.kind == NUMERIC:
        cuts = ", ".join(format(c, ".5g") for c in v.cuts[:SHOWN_CUTS]) + (", …" if len(v.cuts) > SHOWN_CUTS else "")
        kind = f"numeric, {len(v.cuts)} cuts: {cuts}" if len(v.cuts) > 1 else f"numeric, cut at {cuts}"
        kind = kind if v.cuts else "numeric, not cut"
        states = f"{len(v.states):,}"
    else:
        whole = bool(labels) and all(whole_number(s) is not None for s in labels)
        kind = "nominal, whole-number codes" if whole else "nominal"
        shown = ", ".join(v.states[:SHOWN_STATES]) + (", …" if len(v.states) > SHOWN_STATES else "")
        states = f"{len(v.states):,}: {shown if len(shown) <= MAX_STATES_TEXT else shown[: MAX_STATES_TEXT - 1] + '…'}"
    missing = "-" if f.missing is None or v.role == CLASS else f"{100 * f.missing / max(rows, 1):.1f}%"
    return name, v.role, kind, states, missing
