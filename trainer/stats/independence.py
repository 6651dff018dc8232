"""G-tests of (conditional) independence, with the rule of at least five cases per cell
that decides whether a test can be trusted (paper 003)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bnserve.trainer.stats.counts import joint_counts
from bnserve.trainer.stats.information import conditional_mutual_information_from_counts, mutual_information_from_counts

MIN_EXPECTED_PER_CELL = 5.0  # the χ² approximation is trusted when N / cells >= this


ALPHA = 0.05


@dataclass(frozen=True)
class IndependenceTest:
    """A G-test: 2·N·I ~ χ²(dof) under independence. ``reliable`` applies the rule of at
    least ``MIN_EXPECTED_PER_CELL`` cases per cell on average; an unreliable test never
    rejects (independence is assumed, as in paper 003)."""

    statistic: float
    dof: int
    p_value: float
    n: float  # rows (an int), or their total weight
    cells: int
    reliable: bool
    alpha: float

    @property
    def rejects_independence(self) -> bool:
        return self.reliable and self.p_value < self.alpha


def _g_test(information: float, n: float, dof: int, cells: int, alpha: float) -> IndependenceTest:
    from scipy.special import chdtrc  # 0.2 s to import: only where a test runs, not on every path to stats

    statistic = 2.0 * n * information
    # chi2.sf(statistic, dof) is chdtrc(dof, statistic) for statistic >= 0, without scipy.stats'
    # argument checks, which cost more than the test on small tables
    p_value = float(chdtrc(dof, statistic)) if dof > 0 else 1.0
    reliable = n > 0 and n / cells >= MIN_EXPECTED_PER_CELL
    return IndependenceTest(statistic, dof, p_value, n, cells, reliable, alpha)


def independence_test(
    x: np.ndarray, c: np.ndarray, card_x: int, card_c: int, alpha: float = ALPHA, weights: np.ndarray | None = None
) -> IndependenceTest:
    """Is X independent of C? G-test over the rows where both are present; dof (|X|-1)(|C|-1).
    ``weights``: each row counts as its weight (N is their sum)."""
    table = joint_counts([x, c], [card_x, card_c], weights=weights)
    return _g_test(
        mutual_information_from_counts(table), table.sum().item(), (card_x - 1) * (card_c - 1), card_x * card_c, alpha
    )


def conditional_independence_test(
    x: np.ndarray,
    y: np.ndarray,
    c: np.ndarray,
    card_x: int,
    card_y: int,
    card_c: int,
    alpha: float = ALPHA,
    weights: np.ndarray | None = None,
) -> IndependenceTest:
    """Is X independent of Y given C? 2·N·I(X;Y|C) ~ χ² with (|X|-1)(|Y|-1)|C| dof (paper 003);
    ``weights``: each row counts as its weight."""
    return conditional_g_test(joint_counts([x, y, c], [card_x, card_y, card_c], weights=weights), alpha)


def independence_given_test(
    x: np.ndarray,
    y: np.ndarray,
    given: Sequence[np.ndarray],
    card_x: int,
    card_y: int,
    given_cards: Sequence[int],
    alpha: float = ALPHA,
    complete: bool = False,
) -> IndependenceTest:
    """``conditional_independence_test`` given several columns as one joined variable C (all
    their value combinations, C-ordered), counted in one pass without joining them first:
    the same table, so the same test, as with ``joint_column(given)``. ``complete``: no
    column has a missing value (``joint_counts``)."""
    table = joint_counts([x, y, *given], [card_x, card_y, *given_cards], complete)
    return conditional_g_test(table.reshape(card_x, card_y, -1), alpha)


def conditional_g_test(table: np.ndarray, alpha: float) -> IndependenceTest:
    """The G-test of X ⊥ Y | C on a table N(x, y, c)."""
    card_x, card_y, card_c = table.shape
    return _g_test(
        conditional_mutual_information_from_counts(table),
        table.sum().item(),
        (card_x - 1) * (card_y - 1) * card_c,
        card_x * card_y * card_c,
        alpha,
    )
