"""A model as data only: arrays as little-endian bytes with dtype and shape, never pickle,
and the checksum over the canonical bytes that every load verifies."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bnserve.store.errors import InvalidModel

if TYPE_CHECKING:
    from bnserve.store.model.network import Model
    from bnserve.store.model.variable import Variable


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
    return {**_without_variables(model), "variables": [v.to_dict() for v in model.variables]}


def canonical_json(value: Any) -> str:
    """The one JSON text the checksum hashes: keys sorted at every level, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def variable_json(variable: Variable) -> str:
    """One variable's part of ``structure_json``."""
    return canonical_json(variable.to_dict())


def structure_json(model: Model, variable_json: Callable[[Variable], str] = variable_json) -> str:
    """``canonical_json(structure_dict(model))``, each variable's part from ``variable_json``:
    a bulk load encodes once a variable its versions share (it was most of the text)."""
    text = canonical_json({**_without_variables(model), "variables": []})
    assert text.endswith(',"variables":[]}'), "variables sorts last, so its list closes the text"
    return f"{text[:-3]}[{','.join(variable_json(v) for v in model.variables)}]}}"


def _without_variables(model: Model) -> dict[str, Any]:
    """``structure_dict`` but its variables."""
    return {
        "algorithm": model.algorithm,
        "combination": model.combination,
        "params": model.params,
        "metadata": model.metadata,
        "networks": [[{"name": n.name, "parents": list(n.parents)} for n in net.nodes] for net in model.networks],
    }


def canonical_checksum(model: Model) -> str:
    """sha256 of the canonical JSON of the structure followed by every CPT blob in order."""
    blobs = ((node.name, *array_to_blob(node.cpt)) for net in model.networks for node in net.nodes)
    return checksum_of(structure_json(model), blobs)


Blob = tuple[str, str, tuple[int, ...], bytes]  # (node, dtype, shape, data): what array_to_blob gives, named


def checksum_of(structure: str, blobs: Iterable[Blob]) -> str:
    """``canonical_checksum`` from its parts, ``structure`` its ``structure_json``: a loader
    hashes the blobs it read where they are what ``array_to_blob`` gives of the arrays it
    made of them, without making them again."""
    h = hashlib.sha256()
    h.update(structure.encode())
    for name, dtype, shape, data in blobs:
        h.update(f"|{name}|{dtype}|{shape}|".encode())
        h.update(data)
    return h.hexdigest()
