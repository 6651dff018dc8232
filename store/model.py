"""The model contract: any Bayesian network classifier as variables, DAGs and CPTs.

One representation serves every learner (NB, TAN, KDB, FKDB, K2 networks whose class
has parents, ensembles). ``validate`` runs on every publish and every load.

CPT axis order: a node's CPT has shape ``(card(node), card(parents[0]), ...)`` in the
order of ``Node.parents``; ``cpt[:, j0, j1, ...]`` is the distribution of the node given
that parent configuration and sums to 1.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from bnserve.store.discretization import interval_codes, parse_number
from bnserve.store.errors import InvalidModel

CLASS = "class"
FEATURE = "feature"
ROLES = (CLASS, FEATURE)

NOMINAL = "nominal"
NUMERIC = "numeric"
KINDS = (NOMINAL, NUMERIC)

SINGLE = "single"
MEAN_JOINT = "mean_joint"          # AODE-like: P(c, x) is the mean of the members' joints
MEAN_POSTERIOR = "mean_posterior"  # bagged ensembles: P(c | x) is the mean of the members' posteriors
COMBINATIONS = (SINGLE, MEAN_JOINT, MEAN_POSTERIOR)

MAX_NAME_LENGTH = 256
NORMALISATION_TOLERANCE = 1e-9
CPT_DTYPE = np.dtype("<f8")


@dataclass(frozen=True)
class Variable:
    """A column of the data: its ordered states and how a raw value becomes a state.

    ``kind`` nominal: the raw value is the state label itself. ``kind`` numeric: the raw
    value is a number, and ``cuts`` (ascending) split the line into the intervals that are
    the states (``store.discretization``); the interval label is accepted too.
    """

    name: str
    states: tuple[str, ...]
    role: str = FEATURE
    kind: str = NOMINAL
    cuts: tuple[float, ...] = ()

    @property
    def cardinality(self) -> int:
        return len(self.states)

    def code_of(self, label: str) -> int:
        """State code of a state label; raises ``KeyError`` for an unknown one."""
        return self._index()[label]

    def code_of_value(self, text: str) -> int:
        """State code of a raw value as text: a state label, or for a numeric variable a
        number (its interval). Raises ``KeyError`` when it is neither; NaN is neither."""
        code = self._index().get(text)
        if code is not None or self.kind != NUMERIC:
            if code is None:
                raise KeyError(text)
            return code
        number = parse_number(text)
        if number is None or math.isnan(number):
            raise KeyError(text)
        return int(interval_codes(self.cuts, np.array([number]))[0])

    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_label_index")
        if cached is None:
            cached = {s: i for i, s in enumerate(self.states)}
            object.__setattr__(self, "_label_index", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """Plain data; ``cuts`` only for a numeric variable, so nominal models keep their checksums."""
        d: dict[str, Any] = {"name": self.name, "states": list(self.states), "role": self.role, "kind": self.kind}
        if self.kind == NUMERIC:
            d["cuts"] = list(self.cuts)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Variable":
        return Variable(d["name"], tuple(d["states"]), d.get("role", FEATURE), d.get("kind", NOMINAL),
                        tuple(float(c) for c in d.get("cuts", ())))


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

    def validate(self) -> "Model":
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
        _validate_cuts(v)
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
    for i, net in enumerate(model.networks):
        _validate_network(net, i, cards, classes[0].name)
    for label, value in (("params", model.params), ("metadata", model.metadata)):
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidModel(f"model {label} are not JSON-serialisable: {exc}") from None


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
    if len(v.states) != len(v.cuts) + 1:
        raise InvalidModel(
            f"numeric variable {v.name!r} has {len(v.cuts)} cut points, so needs {len(v.cuts) + 1} states, "
            f"not {len(v.states)}"
        )


def _validate_network(net: Network, index: int, cards: Mapping[str, int], class_name: str) -> None:
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
        if not np.all(np.isfinite(cpt)):
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a non-finite entry")
        if np.any(cpt < 0):
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a negative entry")
        sums = cpt.sum(axis=0)
        tol = max(NORMALISATION_TOLERANCE, 8 * np.finfo(cpt.dtype).eps * cards[node.name])
        if not np.all(np.abs(sums - 1.0) <= tol):
            worst = float(np.max(np.abs(sums - 1.0)))
            raise InvalidModel(f"{where}: CPT of {node.name!r} has a distribution summing to 1{worst:+.3g}")


# ---------------------------------------------------------------- serialisation


def array_to_blob(array: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    """(dtype string, shape, little-endian C-order bytes): data only, never pickle."""
    arr = np.asarray(array)
    le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return le.dtype.str, tuple(int(s) for s in arr.shape), np.ascontiguousarray(le).tobytes()


def blob_to_array(dtype: str, shape: Sequence[int], data: bytes) -> np.ndarray:
    """Inverse of ``array_to_blob``; checks the byte count against dtype and shape."""
    dt = np.dtype(dtype)
    if dt.kind != "f" or dt.byteorder not in ("<", "|", "="):
        raise InvalidModel(f"CPT dtype {dtype!r} is not a little-endian float type")
    count = math.prod(shape)
    if len(data) != count * dt.itemsize:
        raise InvalidModel(f"CPT blob has {len(data)} bytes, expected {count * dt.itemsize} for {dtype} {tuple(shape)}")
    return np.frombuffer(data, dtype=dt).reshape(tuple(shape)).copy()


def structure_dict(model: Model) -> dict[str, Any]:
    """Everything but the CPT values, as plain JSON-able data."""
    return {
        "algorithm": model.algorithm,
        "combination": model.combination,
        "params": model.params,
        "metadata": model.metadata,
        "variables": [v.to_dict() for v in model.variables],
        "networks": [
            [{"name": n.name, "parents": list(n.parents)} for n in net.nodes] for net in model.networks
        ],
    }


def canonical_checksum(model: Model) -> str:
    """sha256 of the canonical JSON of the structure followed by every CPT blob in order."""
    h = hashlib.sha256()
    h.update(json.dumps(structure_dict(model), sort_keys=True, separators=(",", ":")).encode())
    for net in model.networks:
        for node in net.nodes:
            dtype, shape, data = array_to_blob(node.cpt)
            h.update(f"|{node.name}|{dtype}|{shape}|".encode())
            h.update(data)
    return h.hexdigest()
