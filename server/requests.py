"""Turn the wire forms of a Predict request into the coded matrix the model takes.

This is the boundary: every name, label and code is checked here (with a message
naming it), so the compiled model can trust its input.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from store.errors import InvalidInput
from store.inference import CompiledModel, check_codes

MISSING = -1
MAX_LABELS_IN_MESSAGE = 20


def _allowed(states: tuple[str, ...]) -> str:
    shown = ", ".join(repr(s) for s in states[:MAX_LABELS_IN_MESSAGE])
    more = len(states) - MAX_LABELS_IN_MESSAGE
    return shown + (f", … ({more} more)" if more > 0 else "")


def _feature_column(compiled: CompiledModel, name: str, class_name: str) -> int:
    column = compiled.feature_index.get(name)
    if column is None:
        if name == class_name:
            raise InvalidInput(f"{name!r} is the class variable; send features only")
        raise InvalidInput(f"unknown feature {name!r}")
    return column


def codes_from_instances(
    compiled: CompiledModel, class_name: str, instances: Iterable[Mapping[str, str]]
) -> np.ndarray:
    """(rows, n_features) codes from label maps; an absent feature or empty label is missing."""
    rows = list(instances)
    codes = np.full((len(rows), len(compiled.features)), MISSING, dtype=np.int64)
    for r, values in enumerate(rows):
        for name, label in values.items():
            column = _feature_column(compiled, name, class_name)
            if label == "":
                continue
            variable = compiled.features[column]
            try:
                codes[r, column] = variable.code_of(label)
            except KeyError:
                raise InvalidInput(
                    f"instance {r}: feature {name!r} has no state {label!r}; allowed: {_allowed(variable.states)}"
                ) from None
    return codes


def codes_from_dense(
    compiled: CompiledModel, class_name: str, features: list[str], flat_codes: Iterable[int]
) -> np.ndarray:
    """(rows, n_features) codes from a row-major DenseBatch; unlisted features are missing."""
    flat = np.fromiter(flat_codes, dtype=np.int64)
    if not features:
        if flat.size:
            raise InvalidInput("dense batch has codes but no features")
        return np.empty((0, len(compiled.features)), dtype=np.int64)
    columns = [_feature_column(compiled, name, class_name) for name in features]
    if len(set(columns)) != len(columns):
        seen: set[str] = set()
        dup = next(n for n in features if n in seen or seen.add(n))
        raise InvalidInput(f"dense batch lists feature {dup!r} twice")
    if flat.size % len(features):
        raise InvalidInput(
            f"dense batch has {flat.size} codes, not a multiple of its {len(features)} features"
        )
    given = flat.reshape(-1, len(features))
    codes = np.full((given.shape[0], len(compiled.features)), MISSING, dtype=np.int64)
    codes[:, columns] = given
    return check_codes(compiled, codes)
