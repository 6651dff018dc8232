"""Read Weka's ARFF into a ``RawTable``: the header declares each column's type.

``numeric``/``real``/``integer`` and ``date`` columns are declared numeric (dates become
seconds since the Unix epoch, UTC); ``{labels}`` nominal with its domain in declared
order; ``string`` nominal without one. Rows are dense (comma-separated) or sparse
(``{index value, ...}``: omitted values are 0, or a nominal column's first label, as in
Weka); a trailing instance weight ``{w}`` is ignored. ``?`` is missing. Every value is
checked against its declaration, so a bad file fails here naming line, column and value.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import NoReturn

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import NOMINAL, NUMERIC
from bnserve.store.model.discretization import number_of
from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS, ReadLimits
from bnserve.trainer.io.sources import ByteCounter, open_text
from bnserve.trainer.io.table import Declared, RawTable, cells_array, check_header, seconds_texts

DEFAULT_DATE_FORMAT = "yyyy-MM-dd'T'HH:mm:ss"

# One value: '...' or "..." (backslash escapes), or bare text without quotes, commas,
# braces or leading/trailing blanks. Groups: single-quoted, double-quoted, bare.
_VALUE = r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([^,'"{}\s](?:[^,'"{}]*[^,'"{}\s])?)"""
_DENSE_FIELD = re.compile(rf"\s*(?:{_VALUE})?\s*(,|$)")
_SPARSE_ENTRY = re.compile(rf"\s*([0-9]+)\s+(?:{_VALUE})\s*(,|(?=\}}))")
_SPARSE_INDEX = re.compile(r"\s*([0-9]+)\s+")
_SPARSE_END = re.compile(r"\s*\}\s*(?:,?\s*\{[^{}'\"]*\})?$")  # "}" and an optional weight "{w}"
_WEIGHT = re.compile(r"[,\s]\s*\{[^{}'\"]*\}$")  # a dense row's trailing weight
_SPECIAL = re.compile(r"['\"{}]")  # a dense row without these splits on commas alone
_QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_KEYWORD = re.compile(r"@([A-Za-z]+)(?=\s|$)")
# An attribute name or date format: quoted, or bare up to a blank or a brace.
_NAME = re.compile(r"""\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([^\s'"{}]+))""")
_JAVA_DATE = re.compile(r"'([^']*)'|([A-Za-z])\2*|.", re.S)
_JAVA_FIELDS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S", "SSS": "%f"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def read_arff(source: str, counted: ByteCounter | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS) -> RawTable:
    """Parse an ARFF file (``.gz`` transparently) into a ``RawTable`` with ``declared`` filled;
    ``counted``: as ``open_binary``'s."""
    text = open_text(source, counted, limits)
    try:
        with text:
            return _parse(source, enumerate(text, start=1), limits)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text: {exc.reason}") from None
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: cannot read: {exc}") from None


def _parse(source: str, numbered: Iterator[tuple[int, str]], limits: ReadLimits) -> RawTable:
    names: list[str] = []
    name_lines: list[int] = []
    columns: list[_Column] = []
    lineno = 0
    for lineno, raw in numbered:  # the header
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        keyword = _keyword(line)
        if keyword == "relation":
            continue
        if keyword == "attribute":
            limits.check_columns(source, len(names) + 1, lineno)
            name, column = _attribute(source, lineno, line)
            names.append(name)
            name_lines.append(lineno)
            columns.append(column)
            continue
        if keyword == "data":
            if line[len("@data") :].strip():
                raise InvalidInput(f"{source}: line {lineno}: put the rows on the lines after @data")
            break
        what = f"@{keyword}" if keyword else repr(line[:40])
        raise InvalidInput(f"{source}: line {lineno}: unexpected {what} before @data")
    else:
        if lineno == 0:
            raise InvalidInput(f"{source}: line 1: the file is empty")
        raise InvalidInput(f"{source}: line {lineno}: no @data section")
    if not columns:
        raise InvalidInput(f"{source}: line {lineno}: @data before any @attribute")
    check_header(source, names, name_lines)

    width = len(columns)
    defaults = [c.default for c in columns]
    rows: list[list[str]] = []
    lines: list[int] = []
    for lineno, raw in numbered:  # the data: one parse per row, split on commas when it can
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        if line[0] == "{":
            row = _sparse(source, lineno, line, names, defaults)
        else:
            keyword = _keyword(line) if line[0] == "@" else ""
            if keyword in ("attribute", "relation", "data"):
                named = _NAME.match(line, 1 + len(keyword))
                what = f"@{keyword} {_value(*named.group(1, 2, 3))!r}" if named else f"@{keyword}"
                raise InvalidInput(f"{source}: line {lineno}: {what} after @data")
            weight = _WEIGHT.search(line)
            if weight:
                line = line[: weight.start()].rstrip()
            if _SPECIAL.search(line):
                row = _dense(source, lineno, line, names)
            else:
                row = [value.strip() for value in line.split(",")]
                if "?" in row:
                    row = ["" if value == "?" else value for value in row]
        rows.append(row)
        lines.append(lineno)
    line_numbers = np.asarray(lines, dtype=np.int64)
    cells = cells_array(source, rows, line_numbers, width, unit="values")
    for j, column in enumerate(columns):  # check and convert column by column, not row by row
        cells[:, j] = column.check(source, names[j], cells[:, j], line_numbers)
    return RawTable.of_cells(source, names, cells, line_numbers, tuple(c.declared for c in columns))


def _keyword(line: str) -> str:
    match = _KEYWORD.match(line)
    return match.group(1).lower() if match else ""


# ---------------------------------------------------------------- the header


class _Column:
    """A declared attribute: its ``Declared`` type, the value a sparse row omits, and the
    check (and, for dates, conversion) of its cells."""

    def __init__(self, declared: Declared, default: str, date_format: str | None = None, java_format: str = ""):
        self.declared = declared
        self.default = default
        self.date_format = date_format  # for strptime; java_format as the file gives it, for messages
        self.java_format = java_format

    def check(self, source: str, name: str, values: np.ndarray, lines: np.ndarray) -> np.ndarray:
        """The column's cells, checked against the declaration (dates converted to seconds)."""
        present = values != ""
        if self.date_format is not None:
            return self._dates(source, name, values, present, lines)
        labels = self.declared.labels
        if self.declared.kind == NUMERIC:
            try:
                values[present].astype(np.float64)
                return values
            except ValueError:
                ok = np.fromiter(map(_is_number, values.tolist()), dtype=bool, count=values.size)
                problem = "is not a number"
        elif labels is not None:
            ok = np.fromiter(map(set(labels).union(("",)).__contains__, values.tolist()), dtype=bool, count=values.size)
            problem = f"is not one of the declared labels {{{', '.join(labels)}}}"
        else:
            return values
        bad = np.flatnonzero(~ok)
        if bad.size == 0:
            return values
        r = int(bad[0])
        raise InvalidInput(f"{source}: line {lines[r]}: column {name!r}: value {values[r]!r} {problem}")

    def _dates(self, source: str, name: str, values: np.ndarray, present: np.ndarray, lines: np.ndarray) -> np.ndarray:
        """Each distinct date parsed once, to microseconds, then written as seconds."""
        micros: dict[str, int] = {}
        assert self.date_format is not None
        for value in set(values[present].tolist()):
            try:
                moment = datetime.strptime(value, self.date_format).replace(tzinfo=UTC)
            except ValueError:
                r = int(np.flatnonzero(values == value)[0])
                raise InvalidInput(
                    f"{source}: line {lines[r]}: column {name!r}: value {value!r} does not match the date "
                    f"format {self.java_format!r}"
                ) from None
            micros[value] = (moment - _EPOCH) // _MICROSECOND
        out = np.full(values.shape, "", dtype=object)
        if micros:
            ticks = np.fromiter(map(micros.__getitem__, values[present].tolist()), dtype=np.int64)
            out[present] = seconds_texts(ticks, 10**6)
        return out


def _is_number(value: str) -> bool:
    return value == "" or not math.isnan(number_of(value))


def _attribute(source: str, lineno: int, line: str) -> tuple[str, _Column]:
    """``@attribute NAME TYPE`` -> the name and its column."""
    rest = line[len("@attribute") :]
    match = _NAME.match(rest)
    if not match:
        _unparsable(source, lineno, rest, "attribute name")
    name = _value(*match.group(1, 2, 3))
    where = f"{source}: line {lineno}: attribute {name!r}"
    kind = rest[match.end() :].strip()
    if not kind:
        raise InvalidInput(f"{where}: no type")
    if kind.startswith("{"):
        if not kind.endswith("}"):
            raise InvalidInput(f"{where}: the label list {kind!r} has no closing '}}'")
        inner = kind[1:-1].strip()
        labels = tuple(_dense(source, lineno, inner)) if inner else ()
        if "" in labels:
            raise InvalidInput(f"{where}: the label list has an empty label")
        repeated = [label for label, n in Counter(labels).items() if n > 1]
        if repeated:
            raise InvalidInput(f"{where}: the label list repeats {repeated[0]!r}")
        return name, _Column(Declared(NOMINAL, labels), labels[0] if labels else "")
    word, tail = (kind.split(None, 1) + [""])[:2]
    word = word.lower()
    if word in ("numeric", "real", "integer", "string") and tail and not tail.startswith("%"):
        raise InvalidInput(f"{where}: unexpected {tail!r} after the type {word!r}")
    if word in ("numeric", "real", "integer"):
        return name, _Column(Declared(NUMERIC), "0")
    if word == "string":
        return name, _Column(Declared(NOMINAL, None), "")  # Weka's omitted string is not well defined: missing
    if word == "date":
        java = DEFAULT_DATE_FORMAT
        if tail:
            quoted = _NAME.match(tail)
            if not quoted or tail[quoted.end() :].strip():
                raise InvalidInput(f"{where}: cannot read the date format {tail!r}")
            java = _value(*quoted.group(1, 2, 3))
        fmt = _strptime_format(where, java)
        return name, _Column(Declared(NUMERIC), _EPOCH.strftime(fmt), fmt, java)
    if word == "relational":
        raise InvalidInput(f"{where}: relational (multi-instance) attributes are not supported")
    raise InvalidInput(
        f"{where}: unknown type {word!r}; expected numeric, real, integer, string, date or {{label, ...}}"
    )


def _strptime_format(where: str, java: str) -> str:
    """Java SimpleDateFormat -> strptime, for the common fields (yyyy yy MM dd HH mm ss SSS)."""
    out: list[str] = []
    for match in _JAVA_DATE.finditer(java):
        literal = match.group(1)
        if literal is not None:  # quoted text; '' is a quote
            out.append((literal or "'").replace("%", "%%"))
        elif match.group(2):
            field = _JAVA_FIELDS.get(match.group(0))
            if field is None:
                raise InvalidInput(
                    f"{where}: date format {java!r}: {match.group(0)!r} is not supported "
                    f"(supported: {' '.join(_JAVA_FIELDS)})"
                )
            out.append(field)
        else:
            out.append(match.group(0).replace("%", "%%"))
    return "".join(out)


# ---------------------------------------------------------------- rows and values


def _value(single: str | None, double: str | None, bare: str | None) -> str:
    """A matched value from its groups: quoted ones unescaped, a bare ``?`` or nothing missing ("")."""
    if bare is not None:
        return "" if bare == "?" else bare
    quoted = single if single is not None else double
    if quoted is None:
        return ""  # an empty field
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), quoted) if "\\" in quoted else quoted


def _dense(source: str, lineno: int, line: str, names: list[str] | None = None) -> list[str]:
    """Comma-separated values, quoted or bare; ``names`` name the columns in messages."""
    values: list[str] = []
    pos = 0
    while True:
        match = _DENSE_FIELD.match(line, pos)
        if match is None:
            _unparsable(source, lineno, line[pos:], _where(names, len(values)))
        values.append(_value(*match.group(1, 2, 3)))
        if not match.group(4):
            return values
        pos = match.end()


def _sparse(source: str, lineno: int, line: str, names: list[str], defaults: list[str]) -> list[str]:
    """``{index value, ...}`` over a copy of the defaults; indexes are 0-based."""
    if not line.endswith("}"):  # its own "}" or a weight's
        raise InvalidInput(f"{source}: line {lineno}: the sparse row has no closing '}}'")
    row = list(defaults)
    seen: set[int] = set()
    pos = 1
    while not line[pos:].lstrip().startswith("}"):
        match = _SPARSE_ENTRY.match(line, pos)
        if match is None:
            head = _SPARSE_INDEX.match(line, pos)  # the trouble is in the value, if there is an index
            if head is None:
                _unparsable(source, lineno, line[pos:], f"sparse entry {len(seen) + 1}")
            _unparsable(source, lineno, line[head.end() :], _where(names, int(head.group(1))))
        index = int(match.group(1))
        if index >= len(row):
            raise InvalidInput(
                f"{source}: line {lineno}: sparse index {index} is out of range: "
                f"the header declares {len(row)} attributes (indexes 0 to {len(row) - 1})"
            )
        if index in seen:
            raise InvalidInput(f"{source}: line {lineno}: column {names[index]!r}: sparse index {index} repeated")
        seen.add(index)
        row[index] = _value(*match.group(2, 3, 4))
        pos = match.end()
    if not _SPARSE_END.match(line, pos):
        _unparsable(source, lineno, line[pos:], "the end of the sparse row")
    return row


def _where(names: list[str] | None, index: int) -> str:
    """Column ``index`` by name when there is one, else by position."""
    return f"column {names[index]!r}" if names is not None and index < len(names) else f"value {index + 1}"


def _unparsable(source: str, lineno: int, text: str, what: str) -> NoReturn:
    """Raise the most useful message for text the value grammar does not match."""
    text = text.lstrip(" \t,")
    if text[:1] in ("'", '"') and not _QUOTED.match(text):
        raise InvalidInput(f"{source}: line {lineno}: {what}: unterminated quote in {text[:40]!r}")
    raise InvalidInput(f"{source}: line {lineno}: {what}: cannot parse {text[:40]!r}")
