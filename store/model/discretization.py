"""Raw numbers to interval states: the one implementation the trainer and the server share.

A numeric variable with ascending cut points ``c_0 < … < c_{m-1}`` has m + 1 states, the
intervals ``(-inf, c_0], (c_0, c_1], …, (c_{m-1}, inf)`` (Weka's convention: a value equal
to a cut point falls in the lower interval). A value outside the training range falls in
an edge interval.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

import numpy as np


def interval_codes(cuts: Sequence[float], values: np.ndarray) -> np.ndarray:
    """int32 state code of each value; NaN gives -1 (missing)."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.searchsorted(np.asarray(cuts, dtype=np.float64), values, side="left").astype(np.int32)
    codes[np.isnan(values)] = -1
    return codes


def interval_code(cuts: Sequence[float], value: float) -> int:
    """``interval_codes`` of one number (not NaN), without an array: the server codes an
    instance's values one at a time."""
    return bisect.bisect_left(cuts, value)


def interval_labels(cuts: Sequence[float]) -> tuple[str, ...]:
    """State labels in Weka's style, e.g. ``(-inf-2.45]``, ``(2.45-4.75]``, ``(4.75-inf)``;
    ``(-inf-inf)`` when there is no cut. Cut points print as their shortest exact repr."""
    bounds = ["-inf", *(repr(float(c)) for c in cuts), "inf"]
    return tuple(f"({lo}-{hi}{')' if hi == 'inf' else ']'}" for lo, hi in itertools.pairwise(bounds))


def number_of(text: str) -> float:
    """The number a raw text value stands for: ASCII decimal notation ("12", "-3.5", "1e3",
    blanks around it) or an infinity. NaN when it stands for none: an empty or non-numeric
    text, "nan" itself (NaN is no value here), and what Python's float reads beyond ASCII
    decimals, such as other scripts' digits ("١٣", "１２") and digit groups ("1_000")."""
    if not text.isascii() or "_" in text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan
