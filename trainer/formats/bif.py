"""BIF, the Bayesian network Interchange Format (JavaBayes; written by pgmpy, bnlearn,
GeNIe, pyAgrum): read it into a ``Model`` and write a one-network ``Model`` as BIF.

    network "name" { }
    variable X { type discrete [ 2 ] { x0, x1 }; property "k = v" ; }
    probability ( X | P1, P2 ) { (p1v, p2v) 0.1, 0.9; default 0.5, 0.5; }
    probability ( R ) { table 0.3, 0.7; }

Value order. A ``table`` lists the whole CPT with the *last* variable of the header
varying fastest: ``probability ( X | A, B )`` is the row-major order of the axes
(X, A, B), our own axis order, so the child varies slowest (JavaBayes'
``DiscreteFunction`` indexes values this way; pgmpy and pyAgrum read it so). A row
``(a, b) …`` gives X's distribution for that configuration; ``default`` gives the one for
every configuration no row names. Separators between items are commas or blanks;
names and states are bare words or double-quoted strings; ``//`` and ``/* */`` are
comments. The writer quotes a name only when it is not a plain word, writes one row per
parent configuration (the form every reader accepts), numbers as ``repr(float)``, and our
``bnserve.*`` properties inside the variable block as ``property bnserve.cuts = [1.5] ;``
(bare like pgmpy's, since pyAgrum refuses a quoted property; the reader takes both).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Model
from bnserve.trainer.formats.interchange import (
    DEFAULT_MAX_CPT_CELLS,
    PROPERTY_PREFIX,
    Declared,
    DeclaredCpt,
    DeclaredVariable,
    check_declarations,
    configuration,
    export_properties,
    format_probability,
    parse_probability,
    single_network,
    split_property,
    to_model,
    where,
)

FORMAT = "bif"

_TOKEN_RE = re.compile(
    r"""(?P<space>\s+)
      | (?P<line_comment>//[^\n]*)
      | (?P<block_comment>/\*.*?\*/)
      | (?P<open_comment>/\*)
      | (?P<string>"(?:[^"\\\n]|\\.)*")
      | (?P<open_string>")
      | (?P<punct>[{}()\[\];,|])
      | (?P<word>[^\s{}()\[\];,|"]+)""",
    re.S | re.X,
)
_PLAIN_RE = re.compile(r"[^\s{}()\[\];,|\"\\]+")  # a word to our lexer, and to pgmpy's


@dataclass(frozen=True)
class _Token:
    kind: str  # word, string, punct, end
    text: str  # unquoted for strings
    line: int
    start: int
    end: int

    @property
    def is_name(self) -> bool:
        return self.kind in ("word", "string")


def read_bif(path: str | Path, class_name: str | None, max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS) -> Model:
    """The model a BIF file describes; InvalidInput naming the file, line and variable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return to_model(parse_bif(text, str(path), max_cpt_cells), class_name)


def parse_bif(text: str, source: str, max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS) -> Declared:
    """Parse BIF text (``source`` names it in messages) into the format-neutral declaration;
    a CPT of more than ``max_cpt_cells`` probabilities is refused before it is built."""
    return _Parser(text, source, max_cpt_cells).parse()


def write_bif(model: Model, name: str = "bnserve", network: int | None = None) -> str:
    """BIF text of the model's only network (or member ``network`` of an ensemble)."""
    variables, net = single_network(model, network, FORMAT)
    by_name = {v.name: v for v in variables}
    out = [f"network {_quote(name)} {{\n}}\n"]
    for v in variables:
        out.append(f"variable {_quote(v.name)} {{\n")
        out.append(f"    type discrete [ {v.cardinality} ] {{ {', '.join(_quote(s) for s in v.states)} }};\n")
        for key, value in export_properties(v):
            out.append(f"    property {key} = {value} ;\n")  # bare, as pgmpy writes and pyAgrum reads
        out.append("}\n")
    for node in net.nodes:
        values = np.asarray(node.cpt, dtype=np.float64)
        header = _quote(node.name) + (" | " + ", ".join(_quote(p) for p in node.parents) if node.parents else "")
        out.append(f"probability ( {header} ) {{\n")
        if not node.parents:
            out.append(f"    table {', '.join(format_probability(x) for x in values)};\n")
        for index in itertools.product(*(range(by_name[p].cardinality) for p in node.parents)) if node.parents else ():
            states = ", ".join(_quote(by_name[p].states[i]) for p, i in zip(node.parents, index))
            column = values[(slice(None), *index)]  # type: ignore[arg-type]  # numpy's stubs: a mixed index
            out.append(f"    ( {states} ) {', '.join(format_probability(x) for x in column)};\n")
        out.append("}\n")
    return "".join(out)


def _quote(name: str) -> str:
    """A bare word when it lexes as one (other readers, pgmpy and pyAgrum among them, do
    not take quoted names), else a quoted string."""
    plain = _PLAIN_RE.fullmatch(name) and "//" not in name and "/*" not in name
    return name if plain else _quote_string(name)


def _quote_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text[1:-1])


# ---------------------------------------------------------------- reading


@dataclass
class _Block:
    """A probability block before its values are placed: they need the parents' states."""

    header: DeclaredCpt
    table: list[tuple[float, int]] | None = None
    default: list[tuple[float, int]] | None = None
    rows: list[tuple[tuple[str, ...], list[tuple[float, int]], int]] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str, source: str, max_cpt_cells: int | None):
        self.text = text
        self.source = source
        self.max_cpt_cells = max_cpt_cells
        self.tokens = self._tokenize()
        self.i = 0

    # -- tokens

    def _tokenize(self) -> list[_Token]:
        tokens: list[_Token] = []
        line = 1
        pos = 0
        while pos < len(self.text):
            m = _TOKEN_RE.match(self.text, pos)
            assert m is not None  # the word alternative matches any other character
            kind = m.lastgroup
            if kind == "open_comment":
                raise self._error(line, "a /* comment is never closed")
            if kind == "open_string":
                raise self._error(line, "a quoted string is not closed on its line")
            if kind in ("word", "punct"):
                tokens.append(_Token(kind, m.group(), line, m.start(), m.end()))
            elif kind == "string":
                tokens.append(_Token(kind, _unquote(m.group()), line, m.start(), m.end()))
            line += m.group().count("\n")
            pos = m.end()
        tokens.append(_Token("end", "", line, pos, pos))
        return tokens

    def _error(self, line: int | None, message: str, variable: str | None = None) -> InvalidInput:
        return InvalidInput(where(self.source, line, variable) + message)

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind != "end":
            self.i += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind == "punct" and token.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str, variable: str | None = None, opened: int | None = None) -> _Token:
        token = self.next()
        if token.kind == "punct" and token.text == text:
            return token
        if token.kind == "end":
            block = f" (the block opened on line {opened} is not closed)" if opened is not None else ""
            raise self._error(token.line, f"the file ends where {text!r} {what} was expected{block}", variable)
        raise self._error(token.line, f"expected {text!r} {what}, found {token.text!r}", variable)

    def name(self, what: str, variable: str | None = None) -> _Token:
        token = self.next()
        if not token.is_name:
            found = "the end of the file" if token.kind == "end" else repr(token.text)
            raise self._error(token.line, f"expected {what}, found {found}", variable)
        return token

    def skip_statement(self, variable: str | None, opened: int) -> str:
        """Up to and past the next ';' (an attribute we do not use); returns its raw text."""
        start = self.peek().start
        while True:
            token = self.next()
            if token.kind == "end":
                raise self._error(token.line, f"the file ends inside the block opened on line {opened}", variable)
            if token.kind == "punct" and token.text == ";":
                return self.text[start : token.start].strip()
            if token.kind == "punct" and token.text in "{}":
                raise self._error(token.line, f"expected ';' before {token.text!r}", variable)

    # -- grammar

    def parse(self) -> Declared:
        network_name = ""
        variables: list[DeclaredVariable] = []
        blocks: list[_Block] = []
        while (token := self.next()).kind != "end":
            keyword = token.text if token.kind == "word" else None
            if keyword == "network":
                network_name = self._network()
            elif keyword == "variable":
                variables.append(self._variable(token))
            elif keyword == "probability":
                blocks.append(self._probability(token))
            else:
                raise self._error(token.line, f"expected 'network', 'variable' or 'probability', found {token.text!r}")
        headers = [b.header for b in blocks]
        check_declarations(self.source, variables, headers, self.max_cpt_cells)
        states = {v.name: v.states for v in variables}
        for block in blocks:
            block.header.cpt = self._values(block, states)
        return Declared(self.source, FORMAT, network_name, variables, headers)

    def _network(self) -> str:
        words = []
        while self.peek().is_name:
            words.append(self.next().text)
        opened = self.expect("{", "after the network name").line
        depth = 1
        while depth:  # network properties: nothing we keep
            token = self.next()
            if token.kind == "end":
                raise self._error(token.line, f"the network block opened on line {opened} is not closed")
            if token.kind == "punct" and token.text in "{}":
                depth += 1 if token.text == "{" else -1
        return " ".join(words)

    def _variable(self, keyword: _Token) -> DeclaredVariable:
        name = self.name("a variable name after 'variable'").text
        opened = self.expect("{", "after the variable name", name).line
        states: tuple[str, ...] | None = None
        properties: dict[str, str] = {}
        while not self.accept("}"):
            token = self.next()
            if token.kind == "end":
                raise self._error(token.line, f"the file ends inside the variable block opened on line {opened}", name)
            if token.kind == "word" and token.text == "type":
                states = self._type(name, opened)
            elif token.kind == "word" and token.text == "property":
                text = self.skip_statement(name, opened)
                if len(text) >= 2 and text[0] == text[-1] == '"':
                    text = _unquote(text)
                pair = split_property(text)
                if pair and pair[0].startswith(PROPERTY_PREFIX):
                    properties[pair[0]] = pair[1]
            elif token.kind == "punct" and token.text == ";":
                continue
            else:
                self.skip_statement(name, opened)
        if states is None:
            raise self._error(keyword.line, "has no 'type discrete [ n ] { … };' declaration", name)
        return DeclaredVariable(name, states, keyword.line, properties)

    def _type(self, name: str, opened: int) -> tuple[str, ...]:
        kind = self.name("a type after 'type'", name)
        if kind.text != "discrete":
            raise self._error(kind.line, f"only discrete variables can be read, not {kind.text!r}", name)
        self.expect("[", "after 'discrete'", name)
        count_token = self.next()
        if not (count_token.kind == "word" and count_token.text.isascii() and count_token.text.isdigit()):
            raise self._error(count_token.line, f"expected the number of states, found {count_token.text!r}", name)
        self.expect("]", "after the number of states", name)
        self.expect("{", "before the states", name)
        states = []
        while not self.accept("}"):
            if self.accept(","):
                continue
            states.append(self.name("a state name or '}'", name).text)
        self.expect(";", "after the states", name, opened)
        if len(states) != int(count_token.text):
            raise self._error(count_token.line, f"declares {count_token.text} states but lists {len(states)}", name)
        return tuple(states)

    def _probability(self, keyword: _Token) -> _Block:
        self.expect("(", "after 'probability'")
        child = self.name("the variable of the probability block").text
        parents = []
        while not self.accept(")"):
            if self.accept("|") or self.accept(","):
                continue
            parents.append(self.name("a parent name or ')'", child).text)
        opened = self.expect("{", "to open the probability block", child).line
        block = _Block(DeclaredCpt(child, tuple(parents), keyword.line))
        while not self.accept("}"):
            token = self.next()
            if token.kind == "end":
                raise self._error(token.line, f"the probability block opened on line {opened} is not closed", child)
            if token.kind == "word" and token.text in ("table", "default"):
                if getattr(block, token.text) is not None:
                    raise self._error(token.line, f"a second {token.text!r}", child)
                setattr(block, token.text, self._numbers(child, opened))
            elif token.kind == "punct" and token.text == "(":
                states = []
                while not self.accept(")"):
                    if self.accept(","):
                        continue
                    states.append(self.name("a parent state or ')'", child).text)
                block.rows.append((tuple(states), self._numbers(child, opened), token.line))
            elif token.kind == "punct" and token.text == ";":
                continue
            elif token.kind == "word" and token.text == "property":
                self.skip_statement(child, opened)
            else:
                raise self._error(
                    token.line, f"expected 'table', 'default' or '( parent states )', found {token.text!r}", child
                )
        return block

    def _numbers(self, variable: str, opened: int) -> list[tuple[float, int]]:
        """Probabilities up to ';', each with its line."""
        values = []
        while not self.accept(";"):
            if self.accept(","):
                continue
            token = self.next()
            if token.kind == "end":
                raise self._error(token.line, f"the probability block opened on line {opened} is not closed", variable)
            value = parse_probability(token.text) if token.kind == "word" else None
            if value is None:
                raise self._error(token.line, f"{token.text!r} is not a probability", variable)
            if value < 0:
                raise self._error(token.line, f"negative probability {token.text}", variable)
            values.append((value, token.line))
        return values

    def _values(self, block: _Block, states: dict[str, tuple[str, ...]]) -> np.ndarray:
        """The CPT, axes (node, *parents): the table, then rows over it, then the default
        for every configuration still empty."""
        h = block.header
        card = len(states[h.name])
        parent_cards = tuple(len(states[p]) for p in h.parents)
        configs = math.prod(parent_cards)
        cpt = np.full((card, *parent_cards), np.nan)
        if block.table is not None:
            if len(block.table) != card * configs:
                raise self._error(
                    block.table[0][1] if block.table else h.line,
                    f"the table has {len(block.table)} probabilities, expected {card * configs} "
                    f"({card} states × {configs} parent configurations)",
                    h.name,
                )
            cpt[...] = np.array([v for v, _ in block.table]).reshape(cpt.shape)
        codes = {p: {s: i for i, s in enumerate(states[p])} for p in h.parents}
        given: dict[tuple[int, ...], int] = {}
        for labels, values, line in block.rows:
            if len(labels) != len(h.parents):
                raise self._error(
                    line,
                    f"a row names {len(labels)} parent states, expected {len(h.parents)} "
                    f"({', '.join(h.parents) or 'no parents'})",
                    h.name,
                )
            index = []
            for parent, label in zip(h.parents, labels):
                code = codes[parent].get(label)
                if code is None:
                    raise self._error(
                        line,
                        f"parent {parent!r} has no state {label!r}; its states are {', '.join(states[parent])}",
                        h.name,
                    )
                index.append(code)
            key = tuple(index)
            if key in given:
                raise self._error(
                    line,
                    f"the configuration {configuration(h.parents, states, key)} "
                    f"is given twice (first on line {given[key]})",
                    h.name,
                )
            given[key] = line
            cpt[(slice(None), *key)] = self._column(values, card, line, h.name)  # type: ignore[index]  # as above
        if block.default is not None:
            line = block.default[0][1] if block.default else h.line or 0
            default = self._column(block.default, card, line, h.name)
            empty = np.isnan(cpt).all(axis=0)
            cpt[:, empty] = default[:, None]
        missing = np.argwhere(np.isnan(cpt).any(axis=0))
        if len(missing):
            key = tuple(int(i) for i in missing[0])
            raise self._error(
                h.line,
                f"no probabilities for the configuration "
                f"{configuration(h.parents, states, key)} (no row, table or default)",
                h.name,
            )
        return cpt

    def _column(self, values: list[tuple[float, int]], card: int, line: int, name: str) -> np.ndarray:
        if len(values) != card:
            raise self._error(line, f"{len(values)} probabilities where {name!r} has {card} states", name)
        return np.array([v for v, _ in values])
