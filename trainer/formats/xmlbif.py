"""XMLBIF 0.3 (Cozman's XML interchange format; written by Weka, pgmpy, pyAgrum): read it
into a ``Model`` and write a one-network ``Model`` as XMLBIF.

    <BIF VERSION="0.3"><NETWORK><NAME>n</NAME>
      <VARIABLE TYPE="nature"><NAME>X</NAME><OUTCOME>x0</OUTCOME>…<PROPERTY>k = v</PROPERTY></VARIABLE>
      <DEFINITION><FOR>X</FOR><GIVEN>A</GIVEN><GIVEN>B</GIVEN><TABLE>…</TABLE></DEFINITION>
    </NETWORK></BIF>

Value order: the TABLE is the row-major order of the axes (GIVEN…, FOR), so the FOR
variable varies fastest and the last GIVEN next: one distribution of X after another,
configurations in the order of an odometer over the GIVENs (Weka, pgmpy and pyAgrum all
write it so). We transpose to our (node, *parents) axes.

Safety: the file is parsed by the stdlib's expat into ``xml.etree.ElementTree``
elements; expat never fetches external entities, and a DOCTYPE that declares any entity
is refused outright (no entity expansion at all). Weka's DOCTYPE, which declares only
elements and attributes, is accepted.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.parsers import expat

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
    export_properties,
    format_probability,
    parse_probability,
    single_network,
    split_property,
    to_model,
    where,
)

FORMAT = "xmlbif"
NATURE = "nature"
_SEPARATOR_RE = re.compile(r"[\s,]+")


def read_xmlbif(path: str | Path, class_name: str | None, max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS) -> Model:
    """The model an XMLBIF file describes; InvalidInput naming the file, line and variable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    return to_model(parse_xmlbif(data, str(path), max_cpt_cells), class_name)


def parse_xmlbif(data: bytes, source: str, max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS) -> Declared:
    """Parse XMLBIF bytes (``source`` names it in messages) into the format-neutral declaration;
    a CPT of more than ``max_cpt_cells`` probabilities is refused before its table is read."""
    root, lines = _parse_xml(data, source)
    return _Reader(source, lines, max_cpt_cells).network(root)


def write_xmlbif(model: Model, name: str = "bnserve", network: int | None = None) -> str:
    """XMLBIF 0.3 text of the model's only network (or member ``network`` of an ensemble)."""
    variables, net = single_network(model, network, FORMAT)
    by_name = {v.name: v for v in variables}
    root = ET.Element("BIF", VERSION="0.3")
    network_element = ET.SubElement(root, "NETWORK")
    ET.SubElement(network_element, "NAME").text = name
    for v in variables:
        element = ET.SubElement(network_element, "VARIABLE", TYPE=NATURE)
        ET.SubElement(element, "NAME").text = v.name
        for state in v.states:
            ET.SubElement(element, "OUTCOME").text = state
        for key, value in export_properties(v):
            ET.SubElement(element, "PROPERTY").text = f"{key} = {value}"
    for node in net.nodes:
        element = ET.SubElement(network_element, "DEFINITION")
        ET.SubElement(element, "FOR").text = node.name
        for parent in node.parents:
            ET.SubElement(element, "GIVEN").text = parent
        card = by_name[node.name].cardinality
        rows = np.moveaxis(np.asarray(node.cpt, dtype=np.float64), 0, -1).reshape(-1, card)
        ET.SubElement(element, "TABLE").text = "\n".join(" ".join(format_probability(x) for x in row) for row in rows)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------- reading


def _parse_xml(data: bytes, source: str) -> tuple[ET.Element, dict[ET.Element, int]]:
    """(root element, line of each element): expat feeding ElementTree's TreeBuilder."""
    builder = ET.TreeBuilder()
    lines: dict[ET.Element, int] = {}
    parser = expat.ParserCreate()

    def start(tag: str, attributes: dict[str, str]) -> None:
        lines[builder.start(tag, attributes)] = parser.CurrentLineNumber

    def refuse_entity(name: str, *_: object) -> None:
        raise InvalidInput(
            f"{source}: line {parser.CurrentLineNumber}: the DOCTYPE declares the entity "
            f"{name!r}; files that declare entities are refused"
        )

    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    parser.EntityDeclHandler = refuse_entity
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise InvalidInput(f"{source}: line {exc.lineno}: not well-formed XML: {expat.ErrorString(exc.code)}") from None
    return builder.close(), lines


class _Reader:
    def __init__(self, source: str, lines: dict[ET.Element, int], max_cpt_cells: int | None):
        self.source = source
        self.lines = lines
        self.max_cpt_cells = max_cpt_cells

    def _error(self, element: ET.Element | None, message: str, variable: str | None = None) -> InvalidInput:
        return InvalidInput(
            where(self.source, self.lines.get(element) if element is not None else None, variable) + message
        )

    def _text(self, parent: ET.Element, tag: str, variable: str | None = None) -> str:
        """The stripped text of the one ``tag`` child of ``parent``."""
        found = parent.findall(tag)
        if len(found) != 1:
            raise self._error(parent, f"<{parent.tag}> needs one <{tag}>, found {len(found)}", variable)
        text = (found[0].text or "").strip()
        if not text:
            raise self._error(found[0], f"<{tag}> is empty", variable)
        return text

    def network(self, root: ET.Element) -> Declared:
        if root.tag != "BIF":
            raise self._error(root, f"expected the root element <BIF>, found <{root.tag}>")
        networks = root.findall("NETWORK")
        if len(networks) != 1:
            raise self._error(root, f"expected one <NETWORK>, found {len(networks)}")
        net = networks[0]
        name_element = net.find("NAME")
        name = (name_element.text or "").strip() if name_element is not None else ""
        variables = [self._variable(e) for e in net.findall("VARIABLE")]
        definitions = [(e, self._header(e)) for e in net if e.tag in ("DEFINITION", "PROBABILITY")]
        check_declarations(self.source, variables, [h for _, h in definitions], self.max_cpt_cells)
        states = {v.name: v.states for v in variables}
        for element, header in definitions:
            header.cpt = self._table(element, header, states)
        return Declared(self.source, FORMAT, name, variables, [h for _, h in definitions])

    def _variable(self, element: ET.Element) -> DeclaredVariable:
        name = self._text(element, "NAME")
        kind = element.get("TYPE", NATURE)
        if kind != NATURE:
            raise self._error(element, f'only chance variables (TYPE="nature") can be read, not {kind!r}', name)
        states = tuple((e.text or "").strip() for e in element.findall("OUTCOME"))
        if not states:
            raise self._error(element, "has no <OUTCOME>", name)
        properties = {}
        for e in element.findall("PROPERTY"):
            pair = split_property(e.text or "")
            if pair and pair[0].startswith(PROPERTY_PREFIX):
                properties[pair[0]] = pair[1]
        return DeclaredVariable(name, states, self.lines.get(element), properties)

    def _header(self, element: ET.Element) -> DeclaredCpt:
        name = self._text(element, "FOR")
        parents = tuple((e.text or "").strip() for e in element.findall("GIVEN"))
        return DeclaredCpt(name, parents, self.lines.get(element))

    def _table(self, element: ET.Element, header: DeclaredCpt, states: dict[str, tuple[str, ...]]) -> np.ndarray:
        """The TABLE, axes (GIVEN…, FOR) in the file, as axes (FOR, GIVEN…)."""
        tables = element.findall("TABLE")
        if len(tables) != 1:
            raise self._error(element, f"needs one <TABLE>, found {len(tables)}", header.name)
        table = tables[0]
        words = [w for w in _SEPARATOR_RE.split(table.text or "") if w]
        values = []
        for word in words:
            value = parse_probability(word)
            if value is None:
                raise self._error(table, f"{word!r} is not a probability", header.name)
            if value < 0:
                raise self._error(table, f"negative probability {word}", header.name)
            values.append(value)
        card = len(states[header.name])
        parent_cards = tuple(len(states[p]) for p in header.parents)
        configs = math.prod(parent_cards)
        if len(values) != card * configs:
            raise self._error(
                table,
                f"the table has {len(values)} probabilities, expected {card * configs} "
                f"({card} states × {configs} parent configurations)",
                header.name,
            )
        return np.moveaxis(np.array(values, dtype=np.float64).reshape(*parent_cards, card), -1, 0).copy()
