"""One version of a ``Model`` as table rows, and back again with every checksum verified.

Arrays travel as ``array_to_blob`` bytes (never pickle); each CPT row carries the sha256
of its bytes and the version row carries ``canonical_checksum`` of the whole model, so
a load notices any stored byte that changed.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Row as SqlRow

from bnserve.store.errors import IntegrityError, InvalidInput, InvalidModel
from bnserve.store.model import NUMERIC, Model, Network, Node, Variable
from bnserve.store.model.serialization import array_to_blob, blob_to_array, canonical_checksum

Row = dict[str, Any]  # column values to write
Stored = SqlRow[Any]  # a row as read back (model_store)


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


def rows_to_model(
    name: str,
    header: Stored,
    variables: Sequence[Stored],
    cpts: Sequence[Stored],
    arcs: Sequence[Stored],
) -> Model:
    """Rebuild the model of one version; IntegrityError naming model, version and node on any mismatch.

    The rows are those of the tables (``model_versions``, ``variables``, ``cpts``, ``arcs``):
    ``variables`` in position order, ``cpts`` in (network, node_position) order, ``arcs``
    in (network, child, position) order. Does not run ``validate()``.
    """
    where = f"model {name!r} version {header.version}"
    try:
        model = _rebuild(where, header, variables, cpts, arcs)
        computed = canonical_checksum(model)
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
    variables: Sequence[Stored],
    cpts: Sequence[Stored],
    arcs: Sequence[Stored],
) -> Model:
    parents: dict[tuple[int, str], list[str]] = defaultdict(list)
    for arc in arcs:
        listed = parents[(arc.network, arc.child)]
        if arc.position != len(listed):
            raise IntegrityError(f"{where}: parents of node {arc.child!r} in network {arc.network} have a gap")
        listed.append(arc.parent)
    networks: list[list[Node]] = []
    for row in cpts:
        if row.network == len(networks):
            networks.append([])
        if row.network != len(networks) - 1 or row.node_position != len(networks[-1]):
            raise IntegrityError(f"{where}: node {row.node!r} is out of place in network {row.network}")
        cpt = _decode_cpt(where, row)
        networks[-1].append(Node(row.node, tuple(parents.pop((row.network, row.node), ())), cpt))
    if parents:
        (network, child), _ = next(iter(parents.items()))
        raise IntegrityError(f"{where}: arcs into node {child!r} of network {network}, which has no CPT")
    return Model(
        variables=tuple(
            Variable(
                v.name,
                tuple(json.loads(v.states_json)),
                v.role,
                v.kind,
                tuple(json.loads(v.cuts_json)) if v.cuts_json is not None else (),
                bool(v.missing_state),
            )
            for v in variables
        ),
        networks=tuple(Network(tuple(nodes)) for nodes in networks),
        algorithm=header.algorithm,
        combination=header.combination,
        params=json.loads(header.params_json),
        metadata=json.loads(header.metadata_json),
    )


def _decode_cpt(where: str, row: Stored) -> np.ndarray:
    what = f"{where}: CPT of node {row.node!r} in network {row.network}"
    if _sha256(row.data) != row.sha256:
        raise IntegrityError(f"{what} fails its sha256 check; the stored bytes were altered")
    try:
        return blob_to_array(row.dtype, json.loads(row.shape_json), row.data)
    except InvalidModel as exc:
        raise IntegrityError(f"{what} cannot be decoded: {exc.message}") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
