"""Which raw texts are missing values: the one rule for every reader of raw values.

The empty text is always missing. Beside it, the *missing markers*: the texts the model's
training data was read with as missing (``trainer fit --na-values``, default
``DEFAULT_MISSING_MARKERS``), recorded in its metadata (``preprocessing.na_values``) so
batch scoring and the server read a value as the training data was read
(``recorded_markers``; ``Variable.with_markers`` makes the variable code them missing).

The default is what R (``NA``, and ``NaN`` for a numeric NaN), pandas (``NaN``, ``nan``,
``N/A``, ``NULL``, ``<NA>``, ``#N/A``, …) and Weka (``?``) write or read as missing. Not
``None`` nor ``missing`` or ``-``: those are labels in real data (an alley type, a credit
history) more often than markers, and pandas writes a None as the empty text anyway.

Here too, by name, the policies for a value unseen in training (read as missing, or
refused: ``UNKNOWN_POLICIES``, the rule itself in ``unseen``), so that a command line's
flags name them without importing numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bnserve.store.errors import InvalidInput

PREPROCESSING = "preprocessing"  # the metadata key of how the training data was read
NA_VALUES = "na_values"  # its key of the missing markers
DEFAULT_MISSING_MARKERS = ("?", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "NULL", "null", "#N/A", "<NA>")
READ_AS_MISSING = "missing"  # an unseen value is read as missing (the default)
REFUSE = "error"  # an unseen value is refused
UNKNOWN_POLICIES = (READ_AS_MISSING, REFUSE)
DEFAULT_UNKNOWN = READ_AS_MISSING
LEGACY_MISSING_MARKERS = ("?",)  # the default before the markers were recorded: a model without the record
# spellings of missing that are not in the default, or that a model may not have been read with:
# an unknown value among them suggests --na-values (pandas' list, and Weka's)
COMMON_MARKERS = frozenset(
    (*DEFAULT_MISSING_MARKERS, "None", "#NA", "#N/A N/A", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN")
)


def recorded_markers(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The missing markers a model records (beside the empty text): its training data's
    ``preprocessing.na_values``; ``LEGACY_MISSING_MARKERS`` for a model trained before they
    were recorded; none for a model that records no preprocessing (imported, hand-made)."""
    preprocessing = metadata.get(PREPROCESSING)
    if not isinstance(preprocessing, Mapping):
        return ()
    markers = preprocessing.get(NA_VALUES)
    if markers is None:
        return LEGACY_MISSING_MARKERS
    if not isinstance(markers, list | tuple) or not all(isinstance(m, str) for m in markers):
        raise InvalidInput(f"metadata {PREPROCESSING}.{NA_VALUES} must be a list of texts, got {markers!r}")
    return tuple(markers)
