"""Cut points for numeric columns: supervised MDL (Fayyad & Irani 1993), equal frequency,
equal width, proportional k-interval (Yang & Webb). Applying cut points is ``bnserve.store.model.discretization``, shared with the server.

Every method sees one column as its value table: the distinct present values (NaN =
missing is left out), ascending, with the class counts of each. The table is additive, so
a file streamed in chunks gives the same cut points as the whole file in memory. Each
returns ascending cut points; no cut means one interval, ``(-inf-inf)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.trainer.stats import row_entropies

MDL = "mdl"
EQUAL_FREQUENCY = "equal-frequency"
EQUAL_WIDTH = "equal-width"
PKID = "pkid"
WPKID = "wpkid"
LOG2 = math.log(2.0)


@dataclass(frozen=True)
class Method:
    """A discretisation method: ``mdl``, ``pkid``, ``wpkid``, or ``equal-frequency``/``equal-width``
    with ``bins``.

    ``mdl`` with ``bins`` (``mdl:N``) gives a column MDL leaves uncut N equal-frequency
    intervals instead of one: a column that says nothing of the class alone may say much
    with others (poker-hand's card ranks), and one interval hides it from every learner."""

    name: str = MDL
    bins: int = 0

    @staticmethod
    def parse(text: str) -> Method:
        """``mdl``, ``mdl:N`` (N >= 2), ``pkid``, ``wpkid``, ``equal-frequency:N`` or ``equal-width:N`` (N >= 1)."""
        name, _, bins = text.strip().partition(":")
        if name in (MDL, PKID, WPKID) and not bins:
            return Method(name)
        if name == MDL and bins.isascii() and bins.isdigit() and int(bins) >= 2:
            return Method(MDL, int(bins))
        if name in (EQUAL_FREQUENCY, EQUAL_WIDTH) and bins.isascii() and bins.isdigit() and int(bins) >= 1:
            return Method(name, int(bins))
        raise InvalidInput(
            f"bad discretisation {text!r}; expected mdl, mdl:N, pkid, wpkid, equal-frequency:N or equal-width:N"
        )

    def __str__(self) -> str:
        return self.name if not self.bins else f"{self.name}:{self.bins}"

    def cuts(
        self, values: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None = None
    ) -> tuple[float, ...]:
        """Cut points for one column's raw values (NaN = missing) and the rows' classes (and weights)."""
        return self.cuts_from_table(*value_table(values, y, n_classes, weights))

    def cuts_from_table(self, values: np.ndarray, counts: np.ndarray) -> tuple[float, ...]:
        """Cut points from a value table: distinct values ascending, counts (values, classes)."""
        if values.size == 0:
            return ()
        if self.name == MDL:
            cuts = mdl_cuts_from_table(values, counts)
            return cuts or (equal_frequency_cuts_from_table(values, counts.sum(axis=1), self.bins) if self.bins else ())
        if self.name == EQUAL_FREQUENCY:
            return equal_frequency_cuts_from_table(values, counts.sum(axis=1), self.bins)
        if self.name in (PKID, WPKID):
            rows = counts.sum(axis=1)
            return equal_frequency_cuts_from_table(values, rows, proportional_bins(float(rows.sum()), self.name))
        return equal_width_cuts(values, self.bins)


def value_table(
    values: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct present values of a column, ascending, and N(value, class) as (d, c) int64
    (with ``weights``: float64 sums of the rows' weights)."""
    present = ~np.isnan(values)
    distinct, inverse = np.unique(values[present], return_inverse=True)
    flat = inverse * n_classes + y[present]
    mass = None if weights is None else weights[present]
    return distinct, np.bincount(flat, mass, minlength=distinct.size * n_classes).reshape(distinct.size, n_classes)


def merge_value_tables(tables: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One value table from several (e.g. one per chunk of rows): the union of the values,
    counts added."""
    values = np.concatenate([v for v, _ in tables])
    counts = np.concatenate([c for _, c in tables])
    distinct, inverse = np.unique(values, return_inverse=True)
    merged = np.zeros((distinct.size, counts.shape[1]), dtype=counts.dtype)
    np.add.at(merged, inverse, counts)
    return distinct, merged


def mdl_cuts(x: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[float, ...]:
    """Fayyad & Irani's MDL cut points of present values ``x`` with classes ``y``."""
    return mdl_cuts_from_table(*value_table(x, y, n_classes))


def mdl_cuts_from_table(values: np.ndarray, counts: np.ndarray) -> tuple[float, ...]:
    """Fayyad & Irani's recursive minimum-entropy splits with the MDL stopping rule.

    O(d·c) per interval split over the d distinct values (after the O(m log m) sort that
    made the table). A split of S into S1, S2 is kept when
    Gain > (log2(N - 1) + log2(3^k - 2) - [k·H(S) - k1·H(S1) - k2·H(S2)]) / N,
    with k, k1, k2 the numbers of classes present; cuts are midpoints between neighbours.
    """
    cuts: list[float] = []
    stack = [(0, values.size)]
    while stack:
        lo, hi = stack.pop()
        split = _best_mdl_split(counts[lo:hi])
        if split is None:
            continue
        at = lo + split  # the cut lies between values[at - 1] and values[at]
        cuts.append(_midpoint(values[at - 1], values[at]))
        stack.extend([(lo, at), (at, hi)])
    return tuple(sorted(cuts))


def _best_mdl_split(block: np.ndarray) -> int | None:
    """Index i (1..d-1) splitting the block's distinct values into [:i] and [i:] with the least
    class entropy, if it passes the MDL criterion; else None. Ties go to the first."""
    if block.shape[0] < 2:
        return None
    left = np.cumsum(block, axis=0)[:-1]
    total = block.sum(axis=0)
    right = total - left
    n = float(total.sum())
    n_left = left.sum(axis=1)
    h_left, h_right = row_entropies(left) / LOG2, row_entropies(right) / LOG2
    weighted = (n_left * h_left + (n - n_left) * h_right) / n
    i = int(np.argmin(weighted))
    h = float(row_entropies(total[None, :])[0]) / LOG2
    gain = h - float(weighted[i])
    k, k1, k2 = (int(np.count_nonzero(c)) for c in (total, left[i], right[i]))
    delta = math.log2(3**k - 2) - (k * h - k1 * h_left[i] - k2 * h_right[i])
    if gain > (math.log2(n - 1) + delta) / n:
        return i + 1
    return None


def equal_frequency_cuts(x: np.ndarray, bins: int) -> tuple[float, ...]:
    """Cuts near the sorted values' ranks m·i/bins, so each interval holds about m/bins rows."""
    values, counts = np.unique(x, return_counts=True)
    return equal_frequency_cuts_from_table(values, counts, bins)


def equal_frequency_cuts_from_table(values: np.ndarray, counts: np.ndarray, bins: int) -> tuple[float, ...]:
    """``equal_frequency_cuts`` from distinct values and how often each occurs. Ties are never
    split: a rank that falls inside a run of equal values moves to the nearer end of the run
    (the lower one on a draw), so there may be fewer intervals."""
    ends = np.cumsum(counts)  # the run of values[g] holds ranks ends[g-1] .. ends[g]-1
    m = int(ends[-1])
    cuts = set()
    for i in range(1, bins):
        r = round(m * i / bins)
        g = int(np.searchsorted(ends, r, side="right"))  # the run holding rank r
        start = int(ends[g - 1]) if g else 0
        if g >= values.size:
            continue
        below = r - start if g > 0 else None  # cut between runs g-1 and g
        above = int(ends[g]) - r if g + 1 < values.size else None  # cut between runs g and g+1
        if below is not None and (above is None or below <= above):
            cuts.add(_midpoint(values[g - 1], values[g]))
        elif above is not None:
            cuts.add(_midpoint(values[g], values[g + 1]))
    return tuple(sorted(cuts))


def proportional_bins(n: float, name: str = PKID) -> int:
    """How many intervals proportional k-interval discretisation gives n present values (Yang
    & Webb 2001): ``pkid`` about sqrt(n) intervals of about sqrt(n) rows, so both grow with the
    data; ``wpkid`` (2003) at least 30 rows an interval, t(t + 30) = n, less variance when n is small."""
    if name == WPKID:
        return max(1, int(math.sqrt(225.0 + n) - 15.0))
    return max(1, int(math.sqrt(n)))


def equal_width_cuts(x: np.ndarray, bins: int) -> tuple[float, ...]:
    """bins intervals of equal width between the smallest and largest finite value (``inf``
    and ``-inf`` fall in the last and the first: with them the width was infinite, no cut)."""
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return ()
    low, high = float(np.min(finite)), float(np.max(finite))
    if not high > low:
        return ()
    cuts = [low + (high - low) * i / bins for i in range(1, bins)]
    return tuple(sorted({c for c in cuts if low <= c < high}))


def _midpoint(a: float, b: float) -> float:
    """The midpoint (a + b) / 2, as Weka computes it, written with the fewest digits that stay
    within a millionth of the gap of it (12.185, not 12.184999999999999), so interval labels
    read cleanly; always a <= cut < b (a falls in the lower interval, b in the upper).
    Between ``-inf`` and b there is no midpoint: the cut is the one below b from a millionth
    of b's size (at least 1e-6) below it, finite as a model's cut points must be (between a
    and ``inf``: a)."""
    a, b = float(a), float(b)
    if a == -math.inf:
        if b == math.inf:
            return 0.0
        a = b - 1e-6 * max(abs(b), 1.0)
    mid = (a + b) / 2.0
    for digits in range(1, 18):
        cut = float(f"{mid:.{digits}g}")
        if a <= cut < b and abs(cut - mid) <= 1e-6 * (b - a):
            return cut
    return mid if a <= mid < b else a
