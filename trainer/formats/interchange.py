"""What BIF and XMLBIF have in common: a parsed network, and the one way it becomes a ``Model``.

Each reader parses its syntax into a ``Declared`` network (variables with their states and
properties, one CPT per variable in our axis order (node, *parents), source lines for the
messages); ``to_model`` then applies the import rules once for both formats: the class
the user names, every other variable a nominal feature unless our own ``bnserve.*``
properties say otherwise, CPT columns renormalised only when they are off by rounding,
and the contract checked by ``Model.validate``. The writers' helpers live here too, so
both formats write the same properties and refuse ensembles the same way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bnserve.store.errors import InvalidInput, InvalidModel
from bnserve.store.model import (
    CLASS,
    FEATURE,
    NOMINAL,
    NORMALISATION_TOLERANCE,
    NUMERIC,
    SINGLE,
    Model,
    Network,
    Node,
    Variable,
)
from bnserve.trainer.io import source_name
from bnserve.trainer.learners.sizing import CPT_CELLS_FLAG, DEFAULT_MAX_CPT_CELLS

QUIET_TOLERANCE = 1e-6  # off by less: rounding in the file, renormalised without a note
MAX_TOLERANCE = 1e-3  # off by more: the file is wrong, not rounded

NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
PROPERTY_PREFIX = "bnserve."
KIND_PROPERTY = "bnserve.kind"
CUTS_PROPERTY = "bnserve.cuts"
ROLE_PROPERTY = "bnserve.role"


@dataclass
class DeclaredVariable:
    """A variable as the file declares it; ``properties`` keeps only ``bnserve.*`` ones."""

    name: str
    states: tuple[str, ...]
    line: int | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class DeclaredCpt:
    """A variable's probability block: parents in file order, CPT axes (node, *parents).

    Readers fill ``cpt`` after ``check_declarations`` has passed, since reading the
    values needs every parent's states."""

    name: str
    parents: tuple[str, ...]
    line: int | None = None
    cpt: np.ndarray | None = None


@dataclass
class Declared:
    """A whole file: variables and CPTs in file order; ``source`` is the path as the user
    gave it (messages name it so), the metadata keeps its file name."""

    source: str
    format: str
    network_name: str
    variables: list[DeclaredVariable]
    cpts: list[DeclaredCpt]


def where(source: str, line: int | None, variable: str | None = None) -> str:
    """The message prefix every import error shares: ``FILE: line N: variable 'X': ``."""
    parts = [source]
    if line is not None:
        parts.append(f"line {line}")
    if variable is not None:
        parts.append(f"variable {variable!r}")
    return ": ".join(parts) + ": "


def split_property(text: str) -> tuple[str, str] | None:
    """``key = value`` as (key, value); None when the text has no ``=``."""
    key, sep, value = text.partition("=")
    return (key.strip(), value.strip()) if sep else None


def configuration(parents: tuple[str, ...], states: Mapping[str, tuple[str, ...]], index: tuple[int, ...]) -> str:
    """A parent configuration for a message, e.g. ``(A=a1, B=b0)``."""
    return "(" + ", ".join(f"{p}={states[p][i]}" for p, i in zip(parents, index)) + ")"


# ---------------------------------------------------------------- import


def to_model(declared: Declared, class_name: str | None) -> Model:
    """The ``Model`` a parsed file stands for; InvalidInput naming the file and variable otherwise.

    ``class_name`` None: the variable our own export marked ``bnserve.role = class``.
    """
    src = declared.source
    by_name = {v.name: v for v in declared.variables}
    names = ", ".join(by_name)
    if class_name is None:
        marked = [v.name for v in declared.variables if v.properties.get(ROLE_PROPERTY) == CLASS]
        if len(marked) != 1:
            raise InvalidInput(f"{src}: name the class variable with --class; the variables are: {names}")
        class_name = marked[0]
    elif class_name not in by_name:
        raise InvalidInput(f"{src}: there is no variable {class_name!r} to be the class; the variables are: {names}")
    variables = tuple(_variable(src, v, CLASS if v.name == class_name else FEATURE) for v in declared.variables)
    states = {v.name: v.states for v in variables}
    renormalised: dict[str, float] = {}
    nodes = []
    for block in declared.cpts:
        assert block.cpt is not None, "the reader fills every CPT"
        cpt, worst = _normalised(src, block, states)
        if worst > QUIET_TOLERANCE:
            renormalised[block.name] = worst
        nodes.append(Node(block.name, block.parents, cpt))
    metadata: dict[str, object] = {
        "source": source_name(src),
        "network": declared.network_name,
        "format": declared.format,
    }
    if renormalised:
        metadata["renormalised"] = renormalised
    model = Model(variables, (Network(tuple(nodes)),), f"imported-{declared.format}", SINGLE, {}, metadata)
    try:
        return model.validate()
    except InvalidModel as exc:
        cycle = "cycle" in exc.message
        raise InvalidInput(f"{src}: {'the arcs do not form a DAG: ' if cycle else ''}{exc.message}") from None


def check_declarations(
    src: str,
    variables: list[DeclaredVariable],
    blocks: list[DeclaredCpt],
    max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS,
) -> None:
    """Each variable declared once and given one probability block over declared parents,
    whose CPT holds at most ``max_cpt_cells`` probabilities (None: no limit): checked before
    any CPT is built, since a few lines declaring many parents ask for an array of any size."""
    by_name: dict[str, DeclaredVariable] = {}
    for v in variables:
        if v.name in by_name:
            first = by_name[v.name].line
            raise InvalidInput(
                where(src, v.line, v.name)
                + "is declared twice"
                + (f" (first on line {first})" if first is not None else "")
            )
        by_name[v.name] = v
    seen: dict[str, DeclaredCpt] = {}
    for block in blocks:
        if block.name not in by_name:
            raise InvalidInput(where(src, block.line, block.name) + "has a probability block but is not declared")
        if block.name in seen:
            raise InvalidInput(where(src, block.line, block.name) + "has a second probability block")
        for parent in block.parents:
            if parent not in by_name:
                raise InvalidInput(where(src, block.line, block.name) + f"unknown parent {parent!r}")
        seen[block.name] = block
    for v in variables:
        if v.name not in seen:
            raise InvalidInput(where(src, v.line, v.name) + "has no probability block")
    for block in blocks:
        card = len(by_name[block.name].states)
        configurations = math.prod(len(by_name[p].states) for p in block.parents)
        if max_cpt_cells is not None and card * configurations > max_cpt_cells:
            raise InvalidInput(
                where(src, block.line, block.name)
                + f"its CPT would hold {card * configurations:,} probabilities ({card} states × "
                f"{configurations:,} configurations of {len(block.parents)} parents), more than the limit of "
                f"{max_cpt_cells:,} ({CPT_CELLS_FLAG} raises it)"
            )


def _variable(src: str, declared: DeclaredVariable, role: str) -> Variable:
    """Nominal unless the file carries our ``bnserve.kind = numeric`` and ``bnserve.cuts``."""
    kind = declared.properties.get(KIND_PROPERTY, NOMINAL)
    if kind not in (NOMINAL, NUMERIC):
        raise InvalidInput(where(src, declared.line, declared.name) + f"unknown {KIND_PROPERTY} {kind!r}")
    if kind == NOMINAL:
        return Variable(declared.name, declared.states, role)
    text = declared.properties.get(CUTS_PROPERTY)
    try:
        cuts = json.loads(text) if text is not None else None
    except ValueError:
        cuts = None
    if not isinstance(cuts, list) or not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cuts):
        raise InvalidInput(
            where(src, declared.line, declared.name)
            + f"a numeric variable needs {CUTS_PROPERTY} = [a list of numbers], got {text!r}"
        )
    return Variable(declared.name, declared.states, role, NUMERIC, tuple(float(c) for c in cuts))


def _normalised(src: str, block: DeclaredCpt, states: Mapping[str, tuple[str, ...]]) -> tuple[np.ndarray, float]:
    """(CPT, worst |column sum - 1|): untouched when it already passes the contract, rescaled
    when off by at most MAX_TOLERANCE, InvalidInput naming the parent configuration beyond."""
    cpt = block.cpt
    assert cpt is not None, "readers fill the CPT before the model is built"
    sums = cpt.sum(axis=0)
    deviation = np.abs(sums - 1.0)
    worst = float(deviation.max()) if deviation.size else 0.0
    if worst > MAX_TOLERANCE:
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(deviation)), deviation.shape))
        raise InvalidInput(
            where(src, block.line, block.name) + f"the probabilities for {configuration(block.parents, states, index)} "
            f"sum to {float(sums[index]):.6g}, not 1"
        )
    if worst <= NORMALISATION_TOLERANCE:  # as written: an exact round trip stays exact
        return cpt, worst
    return cpt / sums, worst


# ---------------------------------------------------------------- export


def single_network(model: Model, network: int | None, fmt: str) -> tuple[tuple[Variable, ...], Network]:
    """The variables and DAG a one-network format writes: the model's only network, or
    member ``network`` of an ensemble. Variables that are not nodes are left out (they
    do not change any prediction)."""
    count = len(model.networks)
    if network is None:
        if count != 1:
            raise InvalidInput(
                f"the model has {count} networks ({model.combination} of {model.algorithm}); "
                f"{fmt} holds one network: export one with --network I (0..{count - 1}), "
                "or draw them all with --format dot"
            )
        network = 0
    elif not 0 <= network < count:
        raise InvalidInput(
            f"--network {network}: the model has {count} network{'s' if count != 1 else ''} (0..{count - 1})"
        )
    net = model.networks[network]
    nodes = {n.name for n in net.nodes}
    return tuple(v for v in model.variables if v.name in nodes), net


def export_properties(variable: Variable) -> list[tuple[str, str]]:
    """Our ``bnserve.*`` properties of a variable, so that a re-import restores it exactly."""
    props = []
    if variable.role == CLASS:
        props.append((ROLE_PROPERTY, CLASS))
    if variable.kind == NUMERIC:
        props.append((KIND_PROPERTY, NUMERIC))
        props.append((CUTS_PROPERTY, "[" + ", ".join(repr(float(c)) for c in variable.cuts) + "]"))
    return props


def format_probability(value: float) -> str:
    """``repr`` of the float: the shortest text that parses back to the same double."""
    return repr(float(value))


def parse_probability(text: str) -> float | None:
    """The number a decimal literal stands for; None for anything else (``nan``, ``inf``,
    ``1_0`` and other texts Python's ``float`` would accept are not probabilities)."""
    if not NUMBER_RE.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
