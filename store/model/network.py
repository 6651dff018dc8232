"""The model contract: any Bayesian network classifier as variables, DAGs and CPTs.

One representation serves every learner (NB, TAN, KDB, FKDB, K2 networks whose class
has parents, ensembles). ``validate`` runs on every publish and every load.

CPT axis order: a node's CPT has shape ``(card(node), card(parents[0]), ...)`` in the
order of ``Node.parents``; ``cpt[:, j0, j1, ...]`` is the distribution of the node given
that parent configuration and sums to 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidModel
from bnserve.store.model.names import MAX_NAME_LENGTH
from bnserve.store.model.serialization import canonical_checksum
from bnserve.store.model.variable import CLASS, FEATURE, KINDS, MISSING_LABEL, NOMINAL, NUMERIC, ROLES, Variable

SINGLE = "single"
MEAN_JOINT = "mean_joint"  # AODE-like: P(c, x) is the mean of the members' joints
MEAN_POSTERIOR = "mean_posterior"  # bagged ensembles: P(c | x) is the mean of the members' posteriors
PRODUCT_JOINT = "product_joint"  # log-linear pooling: P(c | x) is proportional to the product of the members' joints
COMBINATIONS = (SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT)

NORMALISATION_TOLERANCE = 1e-9
VECTOR_CHECK_CELLS = 1 << 20  # CPT entries of a model up to which validate checks them together (8 MiB)
CPT_DTYPE = np.dtype("<f8")


@dataclass(frozen=True)
class Node:
    """One node of a DAG: its parents (ordered) and its CPT, axes (node, *parents)."""

    name: str
    parents: tuple[str, ...]
    cpt: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True)
class Network:
    """A DAG over a subset of the model's variables (the class always included)."""

    nodes: tuple[Node, ...]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def arcs(self) -> list[tuple[str, str]]:
        """(parent, child) pairs, in node order then parent order."""
        return [(p, n.name) for n in self.nodes for p in n.parents]

    def topological_order(self) -> list[str]:
        """Node names, parents before children; raises InvalidModel on a cycle."""
        parents = {n.name: n.parents for n in self.nodes}
        order: list[str] = []
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        for start in parents:
            if state.get(start) == 2:
                continue
            stack = [(start, iter(parents[start]))]
            state[start] = 1
            while stack:
                name, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[name] = 2
                    order.append(name)
                elif nxt not in parents:
                    raise InvalidModel(f"node {name!r} has parent {nxt!r}, which is not a node of the network")
                elif state.get(nxt) == 1:
                    raise InvalidModel(f"the network has a cycle through {nxt!r}")
                elif state.get(nxt) is None:
                    state[nxt] = 1
                    stack.append((nxt, iter(parents[nxt])))
        return order


@dataclass(frozen=True)
class Model:
    """A classifier: variables, one or more networks, how to combine them, and metadata.

    ``params`` are the learner's hyper-parameters; ``metadata`` holds the rest
    (training summary, data fingerprint, evaluation, creation time, code version).
    Both must be JSON-serialisable.
    """

    variables: tuple[Variable, ...]
    networks: tuple[Network, ...]
    algorithm: str
    combination: str = SINGLE
    params: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def class_variable(self) -> Variable:
        return next(v for v in self.variables if v.role == CLASS)

    @property
    def features(self) -> list[Variable]:
        return [v for v in self.variables if v.role == FEATURE]

    def variable(self, name: str) -> Variable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def validate(self) -> Model:
        """Check the whole contract; raise InvalidModel naming the first fault. Returns self."""
        _validate(self)
        return self

    def checksum(self) -> str:
        """sha256 over the canonical bytes of structure, parameters and CPTs."""
        return canonical_checksum(self)


def _validate(model: Model) -> None:
    if not model.algorithm or len(model.algorithm) > MAX_NAME_LENGTH:
        raise InvalidModel("the model needs an algorithm name of at most 256 characters")
    if model.combination not in COMBINATIONS:
        raise InvalidModel(f"unknown combination {model.combination!r}; expected one of {COMBINATIONS}")
    if not model.variables:
        raise InvalidModel("the model has no variables")
    names: set[str] = set()
    for v in model.variables:
        if not isinstance(v.name, str) or not v.name or len(v.name) > MAX_NAME_LENGTH:
            raise InvalidModel(f"variable name {v.name!r} must be a non-empty string of at most 256 characters")
        if v.name in names:
            raise InvalidModel(f"variable {v.name!r} appears twice")
        names.add(v.name)
        if v.role not in ROLES:
            raise InvalidModel(f"variable {v.name!r} has unknown role {v.role!r}")
        if v.kind not in KINDS:
            raise InvalidModel(f"variable {v.name!r} has unknown kind {v.kind!r}")
        if not v.states:
            raise InvalidModel(f"variable {v.name!r} has no states")
        if len(set(v.states)) != len(v.states):
            raise InvalidModel(f"variable {v.name!r} has duplicate state labels")
        if any(not isinstance(s, str) for s in v.states):
            raise InvalidModel(f"variable {v.name!r} has a state label that is not a string")
        if v.missing_state and (v.role == CLASS or v.states[-1] != MISSING_LABEL):
            raise InvalidModel(
                f"variable {v.name!r}: a missing state belongs to a feature, as its last state {MISSING_LABEL!r}"
            )
        _validate_cuts(v)
    derived = [v for v in model.variables if v.projection is not None]
    if derived:  # the lookup once, for the few that need it (it was made per variable: n^2 a load)
        by_name = {u.name: u for u in model.variables}
        for v in derived:
            _validate_projection(v, by_name)
    classes = [v for v in model.variables if v.role == CLASS]
    if len(classes) != 1:
        raise InvalidModel(f"the model needs exactly one class variable, found {len(classes)}")
    if classes[0].cardinality < 2:
        raise InvalidModel(f"class variable {classes[0].name!r} needs at least two states")
    if not model.networks:
        raise InvalidModel("the model has no network")
    if model.combination == SINGLE and len(model.networks) != 1:
        raise InvalidModel(f"combination 'single' needs one network, found {len(model.networks)}")
    cards = {v.name: v.cardinality for v in model.variables}
    values_pass = _cpt_values_pass(model.networks)
    for i, net in enumerate(model.networks):
        _validate_network(net, i, cards, classes[0].name, values_pass)
    for label, value in (("params", model.params), ("metadata", model.metadata)):
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidModel(f"model {label} are not JSON-serialisable: {exc}") from None


def _validate_projection(v: Variable, by_name: Mapping[str, Variable]) -> None:
    """A derived feature reads distinct numeric features that are not derived themselves,
    with a finite centre and weight each."""
    p = v.projection
    if p is None:
        return
    if v.kind != NUMERIC or v.role != FEATURE:
        raise InvalidModel(f"variable {v.name!r}: only a numeric feature is derived from others")
    if not p.inputs or len(set(p.inputs)) != len(p.inputs) or not len(p.inputs) == len(p.centres) == len(p.weights):
        raise InvalidModel(f"derived feature {v.name!r} needs distinct inputs, each with one centre and one weight")
    if not all(math.isfinite(x) for x in (*p.centres, *p.weights)):
        raise InvalidModel(f"derived feature {v.name!r} has a centre or weight that is not finite")
    for name in p.inputs:
        u = by_name.get(name)
        if u is None or u.kind != NUMERIC or u.role != FEATURE or u.projection is not None:
            raise InvalidModel(f"derived feature {v.name!r} reads {name!r}, which is not a numeric feature of its own")


def _validate_cuts(v: Variable) -> None:
    if v.kind == NOMINAL:
        if v.cuts:
            raise InvalidModel(f"nominal variable {v.name!r} has cut points")
        return
    if v.role == CLASS:
        raise InvalidModel(f"the class {v.name!r} must be nominal")
    cuts = np.asarray(v.cuts, dtype=np.float64)
    if not np.all(np.isfinite(cuts)) or np.any(np.diff(cuts) <= 0):
        raise InvalidModel(f"numeric variable {v.name!r} needs finite, strictly increasing cut points")
    intervals = len(v.states) - v.missing_state
    if intervals != len(v.cuts) + 1:
        raise InvalidModel(
            f"numeric variable {v.name!r} has {len(v.cuts)} cut points, so needs {len(v.cuts) + 1} interval states"
            f"{' and its missing state' if v.missing_state else ''}, not {len(v.states)} states"
        )


def _cpt_values_pass(networks: tuple[Network, ...]) -> bool:
    """Whether every CPT of ``networks`` is float64, finite, non-negative and normalised within
    a margin under the tolerance, checked over all of them in a few numpy calls (a load of a
    thousand versions made some ten calls per node). True means the per-node value checks
    pass too: the margin covers any difference between two orders of summing a column.
    False: those checks run, and name the first fault. Past ``VECTOR_CHECK_CELLS`` entries
    (whose index arrays would take memory) the per-node checks run, as they cost little there."""
    cpts = [node.cpt for net in networks for node in net.nodes]
    if not cpts or not all(isinstance(c, np.ndarray) and c.dtype == CPT_DTYPE and c.ndim and c.size for c in cpts):
        return False
    if sum(c.size for c in cpts) > VECTOR_CHECK_CELLS:
        return False
    flat = np.concatenate([c.ravel() for c in cpts])
    if not (np.isfinite(flat).all() and flat.min() >= 0):
        return False
    sizes = np.array([c.size for c in cpts])
    cards = np.array([c.shape[0] for c in cpts])
    columns = sizes // cards  # parent configurations of each CPT, each a column summing to 1
    firsts = np.cumsum(columns) - columns  # each CPT's first column among all
    position = np.arange(flat.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    column = position % np.repeat(columns, sizes) + np.repeat(firsts, sizes)
    sums = np.bincount(column, weights=flat, minlength=int(columns.sum()))
    eps = np.finfo(CPT_DTYPE).eps
    margin = np.maximum(NORMALISATION_TOLERANCE, 8 * eps * cards) - 2 * eps * cards
    return bool(np.all(np.abs(sums - 1.0) <= np.repeat(margin, columns)))


def _validate_network(net: Network, index: int, cards: Mapping[str, int], class_name: str, values_pass: bool) -> None:
    where = f"network {index}"
    seen: set[str] = set()
    for node in net.nodes:
        if node.name not in cards:
            raise InvalidModel(f"{where}: node {node.name!r} is not a variable of the model")
        if node.name in seen:
            raise InvalidModel(f"{where}: node {node.name!r} appears twice")
        seen.add(node.name)
        if len(set(node.parents)) != len(node.parents):
            raise InvalidModel(f"{where}: node {node.name!r} lists a parent twice")
        if node.name in node.parents:
            raise InvalidModel(f"{where}: node {node.name!r} is its own parent")
    if class_name not in seen:
        raise InvalidModel(f"{where}: the class {class_name!r} is not a node")
    net.topological_order()  # parents exist among the nodes, no cycle
    for node in net.nodes:
        cpt = node.cpt
        if not isinstance(cpt, np.ndarray) or cpt.dtype.kind != "f":
            raise InvalidModel(f"{where}: CPT of {node.name!r} must be a floating-point numpy array")
        expected = (cards[node.name],) + tuple(cards[p] for p in node.parents)
        if cpt.shape != expected:
            raise InvalidModel(f"{where}: CPT of {node.name!r} has shape {cpt.shape}, expected {expected}")
        if values_pass:
            continue
        if not np.all(np.isfinite(cpt)):
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a non-finite entry")
        if np.any(cpt < 0):
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a negative entry")
        sums = cpt.sum(axis=0)
        tol = max(NORMALISATION_TOLERANCE, 8 * np.finfo(cpt.dtype).eps * cards[node.name])
        if not np.all(np.abs(sums - 1.0) <= tol):
            worst = float(np.max(np.abs(sums - 1.0)))
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a distribution summing to 1{worst:+.3g}")
