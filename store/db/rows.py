"""One version of a ``Model`` as table rows, and back again with every checksum verified.

Arrays travel as ``array_to_blob`` bytes (never pickle); each CPT row carries the sha256
of its bytes and the version row carries ``canonical_checksum`` of the whole model, so
a load notices any stored byte that changed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Row as SqlRow

from bnserve.store.errors import IntegrityError, InvalidInput, InvalidModel
from bnserve.store.model import CPT_DTYPE, NUMERIC, Model, Network, Node, Variable
from bnserve.store.model.projection import Projection
from bnserve.store.model.serialization import (
    Blob,
    array_to_blob,
    blob_to_array,
    canonical_checksum,
    checksum_of,
    structure_json,
    variable_json,
)

Row = dict[str, Any]  # column values to write
Stored = SqlRow[Any]  # a version's header row as read back (model_store), read by name
Values = Sequence[Any]  # any other row read back: (model_id, version, *TABLE_COLUMNS)

# The columns a load reads of each table, in the order ``rows_to_model`` unpacks them (after the
# ``(model_id, version)`` key): tuples unpacked, not rows read by name, in the loop over every node
VARIABLE_COLUMNS = ("name", "role", "kind", "states_json", "cuts_json", "missing_state", "projection_json")
CPT_COLUMNS = ("network", "node", "node_position", "dtype", "shape_json", "data", "sha256")
ARC_COLUMNS = ("network", "child", "position", "parent")


@dataclass(frozen=True)
class VersionRows:
    """Column values of one version, without the ``(model_id, version)`` key; insert in field order."""

    header: Row  # model_versions
    variables: list[Row]
    cpts: list[Row]
    arcs: list[Row]

    def keyed(self, model_id: int, version: int, created_at_ms: int) -> VersionRows:
        key = {"model_id": model_id, "version": version}
        return VersionRows(
            {**self.header, **key, "created_at_ms": created_at_ms},
            [{**r, **key} for r in self.variables],
            [{**r, **key} for r in self.cpts],
            [{**r, **key} for r in self.arcs],
        )


MAX_VALUE_BYTES = (
    1_000_000_000  # one value the store keeps: SQLite's default SQLITE_MAX_LENGTH; PostgreSQL's bytea holds 1 GB
)


def check_value_sizes(name: str, model: Model) -> None:
    """Refuse, before any row is built, a model with a CPT the store could not keep in one
    value ("string or blob too big" from SQLite after the whole model was serialised)."""
    for k, net in enumerate(model.networks):
        for node in net.nodes:
            if node.cpt.nbytes > MAX_VALUE_BYTES:
                raise InvalidInput(
                    f"publishing model {name!r}: the CPT of {node.name!r} (network {k}, shape {node.cpt.shape}) takes "
                    f"{node.cpt.nbytes:,} bytes, past the {MAX_VALUE_BYTES:,} one value of the store may hold; "
                    "train it within --max-cpt-cells"
                )


def model_to_rows(model: Model) -> VersionRows:
    """The rows of a model that has passed ``validate()``."""
    header = {
        "algorithm": model.algorithm,
        "combination": model.combination,
        "class_variable": model.class_variable.name,
        "params_json": _dumps(model.params),
        "metadata_json": _dumps(model.metadata),
        "checksum": canonical_checksum(model),
    }
    variables = [
        {
            "position": i,
            "name": v.name,
            "role": v.role,
            "kind": v.kind,
            "states_json": _dumps(list(v.states)),
            "cuts_json": _dumps(list(v.cuts)) if v.kind == NUMERIC else None,
            "missing_state": v.missing_state,
            "projection_json": _dumps(v.projection.to_dict()) if v.projection is not None else None,
        }
        for i, v in enumerate(model.variables)
    ]
    cpts: list[Row] = []
    arcs: list[Row] = []
    for k, net in enumerate(model.networks):
        for j, node in enumerate(net.nodes):
            dtype, shape, data = array_to_blob(node.cpt)
            cpts.append(
                {
                    "network": k,
                    "node": node.name,
                    "node_position": j,
                    "dtype": dtype,
                    "shape_json": _dumps(list(shape)),
                    "data": data,
                    "sha256": _sha256(data),
                }
            )
            arcs.extend(
                {"network": k, "child": node.name, "position": p, "parent": parent}
                for p, parent in enumerate(node.parents)
            )
    return VersionRows(header, variables, cpts, arcs)


class Decoder:
    """Decodes the rows of many versions, sharing what they repeat: the JSON texts of states,
    cuts and shapes (a thousand models of a few schemas repeat a few dozen) and the Variables
    themselves (immutable). One per bulk read; a fresh one for each single load."""

    def __init__(self) -> None:
        self._texts: dict[str, Any] = {}
        self._variables: dict[tuple[Any, ...], Variable] = {}
        self._variable_texts: dict[Variable, str] = {}
        self._sizes: dict[str, int] = {}

    def json(self, text: str) -> Any:
        """``json.loads(text)``, lists as tuples, once per distinct text (read only: shared)."""
        value = self._texts.get(text, _UNSEEN)
        if value is _UNSEEN:
            value = json.loads(text)
            if isinstance(value, list):
                value = tuple(value)
            self._texts[text] = value
        return value

    def variable_json(self, variable: Variable) -> str:
        """Its ``canonical_json``, the part of a version's checksummed text, once per distinct variable."""
        text = self._variable_texts.get(variable)
        if text is None:
            text = self._variable_texts[variable] = variable_json(variable)
        return text

    def float64_bytes(self, shape_json: str) -> int:
        """The bytes of a float64 CPT of the shape ``shape_json`` names, when it names one as
        a publish writes it (non-negative whole numbers); else -1, which no blob's length is."""
        size = self._sizes.get(shape_json)
        if size is None:
            shape = self.json(shape_json)
            whole = type(shape) is tuple and all(type(s) is int and s >= 0 for s in shape)
            size = self._sizes[shape_json] = math.prod(shape) * CPT_DTYPE.itemsize if whole else -1
        return size

    def variable(self, row: Values) -> Variable:
        """The Variable of a row of ``VARIABLE_COLUMNS`` (after the key)."""
        key: tuple[Any, ...] = tuple(row[2:])
        variable = self._variables.get(key)
        if variable is None:
            name, role, kind, states_json, cuts_json, missing_state, projection_json = key
            variable = self._variables[key] = Variable(
                name,
                tuple(self.json(states_json)),
                role,
                kind,
                tuple(self.json(cuts_json)) if cuts_json is not None else (),
                bool(missing_state),
                Projection.from_dict(json.loads(projection_json)) if projection_json is not None else None,
            )
        return variable


_UNSEEN = object()
_F8 = CPT_DTYPE.str  # the dtype a publish stores every float64 CPT as


def rows_to_model(
    name: str,
    header: Stored,
    variables: Sequence[Values],
    cpts: Sequence[Values],
    arcs: Sequence[Values],
    decoder: Decoder | None = None,
) -> Model:
    """Rebuild the model of one version; IntegrityError naming model, version and node on any mismatch.

    The rows are those of the tables (``model_versions``, ``variables``, ``cpts``, ``arcs``),
    the header by name, the others ``(model_id, version, *TABLE_COLUMNS)``: ``variables`` in
    position order, ``cpts`` in (network, node_position) order, ``arcs`` in (network, child,
    position) order. Does not run ``validate()``. ``decoder``: shared
    by the versions of one bulk read.
    """
    where = f"model {name!r} version {header.version}"
    try:
        decoder = decoder or Decoder()
        model, blobs = _rebuild(where, header, variables, cpts, arcs, decoder)
        computed = checksum_of(structure_json(model, decoder.variable_json), blobs)
    except (ValueError, TypeError, KeyError) as exc:  # JSON or shapes that are not what we wrote
        raise IntegrityError(f"{where}: stored rows cannot be decoded: {exc}") from None
    except RecursionError:  # JSON nested deeper than the interpreter's stack: never written by a publish
        raise IntegrityError(f"{where}: stored rows cannot be decoded: JSON nested too deeply") from None
    if computed != header.checksum:
        raise IntegrityError(
            f"{where}: checksum mismatch (stored {header.checksum[:16]}..., computed {computed[:16]}...); "
            "the stored rows were altered"
        )
    if model.class_variable.name != header.class_variable:
        raise IntegrityError(f"{where}: class variable column says {header.class_variable!r}, the variables disagree")
    return model


def _rebuild(
    where: str,
    header: Stored,
    variables: Sequence[Values],
    cpts: Sequence[Values],
    arcs: Sequence[Values],
    decoder: Decoder,
) -> tuple[Model, list[Blob]]:
    """The model, and its CPTs' blobs as ``array_to_blob`` gives them (for its checksum)."""
    parents: dict[tuple[int, str], list[str]] = defaultdict(list)
    for _, _, network, child, position, parent in arcs:
        listed = parents[(network, child)]
        if position != len(listed):
            raise IntegrityError(f"{where}: parents of node {child!r} in network {network} have a gap")
        listed.append(parent)
    networks: list[list[tuple[str, tuple[str, ...]]]] = []
    blobs: list[Blob] = []
    arrays: list[np.ndarray | None] = []  # None: a float64 CPT, a view of ``flat`` below
    for _, _, network, node, node_position, dtype, shape_json, data, sha256 in cpts:
        if network == len(networks):
            networks.append([])
        if network != len(networks) - 1 or node_position != len(networks[-1]):
            raise IntegrityError(f"{where}: node {node!r} is out of place in network {network}")
        if _sha256(data) != sha256:
            raise IntegrityError(
                f"{where}: CPT of node {node!r} in network {network} fails its sha256 check; "
                "the stored bytes were altered"
            )
        shape = decoder.json(shape_json)
        if dtype == _F8 and len(data) == decoder.float64_bytes(shape_json):
            blobs.append((node, _F8, shape, data))  # what array_to_blob gives of its array
            arrays.append(None)
        else:
            try:
                cpt = blob_to_array(dtype, shape, data)
            except InvalidModel as exc:
                raise IntegrityError(
                    f"{where}: CPT of node {node!r} in network {network} cannot be decoded: {exc.message}"
                ) from None
            blobs.append((node, *array_to_blob(cpt)))
            arrays.append(cpt)
        networks[-1].append((node, tuple(parents.pop((network, node), ()))))
    if parents:
        (network, child), _ = next(iter(parents.items()))
        raise IntegrityError(f"{where}: arcs into node {child!r} of network {network}, which has no CPT")
    # the float64 CPTs as views of one array: one copy of the version's bytes, not one per node
    flat = np.frombuffer(b"".join(b[3] for b, a in zip(blobs, arrays) if a is None), dtype=CPT_DTYPE).copy()
    nodes: list[Node] = []
    at = 0
    for (node, node_parents), (_, _, shape, data), own in zip((n for net in networks for n in net), blobs, arrays):
        if own is None:
            size = len(data) // CPT_DTYPE.itemsize
            own, at = flat[at : at + size].reshape(shape), at + size
        nodes.append(Node(node, node_parents, own))
    built: list[Network] = []
    for net in networks:
        built.append(Network(tuple(nodes[: len(net)])))
        nodes = nodes[len(net) :]
    model = Model(
        variables=tuple(decoder.variable(v) for v in variables),
        networks=tuple(built),
        algorithm=header.algorithm,
        combination=header.combination,
        params=json.loads(header.params_json),
        metadata=json.loads(header.metadata_json),
    )
    return model, blobs


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
