"""The one rule for a value unseen in training, shared by the estimator, batch scoring and the server.

``Variable.code_of`` gives UNKNOWN to a raw value that is neither missing nor a state. For
a nominal feature that is a value no training row had (a label, or a whole number outside
its codes): under the policy ``missing`` (the default) it is read as missing, so the
compiled model sums it out exactly (or, with ``--missing state``, takes the missing state,
as an empty value does); under ``error`` it is refused. For a numeric feature every number
falls into an interval, so UNKNOWN there is text that is no number: bad input, refused
under either policy. Callers refuse with their own message (file line or request row) and
count what became missing.
"""

from __future__ import annotations

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model.markers import DEFAULT_UNKNOWN, READ_AS_MISSING, UNKNOWN_POLICIES
from bnserve.store.model.variable import MISSING, NUMERIC, UNKNOWN, Variable


def unknown_policy(value: str, what: str) -> str:
    """``value`` checked as a policy (``""``: the default); ``what`` names where it was given."""
    if value == "":
        return DEFAULT_UNKNOWN
    if value not in UNKNOWN_POLICIES:
        raise InvalidInput(f"{what} must be one of {', '.join(UNKNOWN_POLICIES)}, got {value!r}")
    return value


def unseen_code(variable: Variable, policy: str) -> int:
    """What an UNKNOWN code of ``variable`` becomes: MISSING for an unseen value of a nominal
    feature under ``missing``; else UNKNOWN, which the caller refuses."""
    return MISSING if policy == READ_AS_MISSING and variable.kind != NUMERIC else UNKNOWN


def settle_unknown(variable: Variable, codes: np.ndarray, policy: str) -> np.ndarray:
    """Apply ``unseen_code`` to ``codes`` (one column of ``variable``) in place; returns the
    rows read as missing. Any UNKNOWN left is for the caller to refuse."""
    if unseen_code(variable, policy) == UNKNOWN:
        return np.empty(0, dtype=np.intp)
    rows = np.flatnonzero(codes == UNKNOWN)
    codes[rows] = MISSING
    return rows
