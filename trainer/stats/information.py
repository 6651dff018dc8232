"""Information measures from tables of counts, in nats: entropy, I(X;C), I(X;Y|C), Zhang's
dependence-derivative I_D (paper 004), and the conditional gain metrics of Info-AS (paper 002)."""

from __future__ import annotations

import numpy as np

from bnserve.trainer.stats.counts import joint_counts


def entropy(counts: np.ndarray) -> float:
    """H of the distribution proportional to ``counts`` (any shape), in nats; 0 for no mass."""
    n = np.asarray(counts, dtype=np.float64).ravel()
    total = n.sum()
    if total <= 0:
        return 0.0
    n = n[n > 0]
    return float(max(0.0, -np.sum(n * np.log(n / total)) / total))


def row_entropies(counts: np.ndarray) -> np.ndarray:
    """H of each row of a 2-D table of counts, in nats (0 for an empty row): one call
    scores every candidate split of a discretiser."""
    n = np.asarray(counts, dtype=np.float64)
    total = n.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(n > 0, n * np.log(n / total), 0.0)
        h = -terms.sum(axis=1) / total[:, 0]
    return np.where(total[:, 0] > 0, np.maximum(h, 0.0), 0.0)


def mutual_information_from_counts(n_ab: np.ndarray) -> float:
    """I(A;B) from a 2-D table of counts N(a, b), in nats."""
    n = np.asarray(n_ab, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0
    n_a = n.sum(axis=1, keepdims=True)
    n_b = n.sum(axis=0, keepdims=True)
    nz = n > 0
    ratio = (n * total)[nz] / (n_a * n_b)[nz]
    return float(max(0.0, np.sum(n[nz] * np.log(ratio)) / total))


def conditional_mutual_information_from_counts(n_xyc: np.ndarray) -> float:
    """I(X;Y|C) from a 3-D table of counts N(x, y, c), in nats."""
    n = np.asarray(n_xyc, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0
    n_c = n.sum(axis=(0, 1))[None, None, :]
    n_xc = n.sum(axis=1)[:, None, :]
    n_yc = n.sum(axis=0)[None, :, :]
    nz = n > 0
    ratio = (n * n_c)[nz] / (n_xc * n_yc)[nz]
    return float(max(0.0, np.sum(n[nz] * np.log(ratio)) / total))


def mutual_information(
    x: np.ndarray, c: np.ndarray, card_x: int, card_c: int, weights: np.ndarray | None = None
) -> float:
    """I(X;C) over the rows where both are present (each counted as its weight, if given), in nats."""
    return mutual_information_from_counts(joint_counts([x, c], [card_x, card_c], weights=weights))


def conditional_mutual_information(
    x: np.ndarray, y: np.ndarray, c: np.ndarray, card_x: int, card_y: int, card_c: int
) -> float:
    """I(X;Y|C) over the rows where all three are present, in nats."""
    return conditional_mutual_information_from_counts(joint_counts([x, y, c], [card_x, card_y, card_c]))


def dependence_derivative_information_from_counts(n_xyc: np.ndarray) -> float:
    """Zhang's I_D(X;Y|C) (paper 004, eq. 17; eq. 18-19 for more than two classes) from N(x, y, c).

    With d_c(x, y) = ln p(x|y,c)/p(x|c) = ln p(x,y|c)/(p(x|c) p(y|c)):
    two classes: sum over (x, y) of p(x, y) (d_+ - d_-)^2 (eq. 17);
    more: sum over (x, y, c) of p(x, y) (d_c - Avg)^2 with Avg the mean of d_c over the
    classes at that (x, y) (eq. 19 read per cell, so that for two classes eq. 18 is half of
    eq. 17). p(x, y) is the observed frequency; p(x, y|c) is Laplace-smoothed per cell,
    (N(x,y,c) + 1) / (N(c) + |X||Y|), and p(x|c), p(y|c) are its marginals, which keeps
    I_D symmetric. A class with no rows is left out; fewer than two classes give 0.
    """
    n = np.asarray(n_xyc, dtype=np.float64)
    total = n.sum()
    n_c = n.sum(axis=(0, 1))
    present = n_c > 0
    if total <= 0 or np.count_nonzero(present) < 2:
        return 0.0
    two_classes = n.shape[2] == 2
    n = n[:, :, present]
    p = (n + 1.0) / (n_c[present] + n.shape[0] * n.shape[1])
    d = np.log(p) - np.log(p.sum(axis=1, keepdims=True)) - np.log(p.sum(axis=0, keepdims=True))
    if two_classes:
        spread = (d[:, :, 0] - d[:, :, 1]) ** 2
    else:
        spread = ((d - d.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)
    return float(np.sum(n.sum(axis=2) * spread) / total)


GAIN_FLOOR = 1e-12  # nats; a conditional gain at or below this is rounding noise and counts as 0


def xlogx(n: np.ndarray) -> float:
    n = n[n > 0]
    return float(np.sum(n * np.log(n)))


def conditional_information_metrics(counts: np.ndarray) -> tuple[float, float, float]:
    """(CIG, CGR, CDC) of an attribute A given a set Δ, from counts N(c, a, l) (paper 002, Defs 4.1–4.3).

    Axis 2 runs over the instantiations l of Δ (only occurring ones need a layer). With
    p_l = N_l / N and the per-layer entropies H_C_l, H_A_l, H_Cell_l (eqs. 3–5):
    CIG = Σ p_l (H_C_l + H_A_l − H_Cell_l) = I(C;A|Δ); CGR = CIG / Σ p_l H_A_l;
    CDC = 1 − d_N = CIG / Σ p_l H_Cell_l; a ratio with a zero denominator is 0 (the
    paper's footnote 3), and CIG ≤ GAIN_FLOOR counts as 0. Nats. O(cells).
    """
    n = np.asarray(counts, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0, 0.0, 0.0
    layers = xlogx(n.sum(axis=(0, 1)))
    h_c = (layers - xlogx(n.sum(axis=1))) / total  # Σ_l p_l H_C_l
    h_a = (layers - xlogx(n.sum(axis=0))) / total  # Σ_l p_l H_A_l
    h_cell = (layers - xlogx(n)) / total  # Σ_l p_l H_Cell_l
    gain = h_c + h_a - h_cell
    if gain <= GAIN_FLOOR:
        return 0.0, 0.0, 0.0
    return gain, (gain / h_a if h_a > 0 else 0.0), (gain / h_cell if h_cell > 0 else 0.0)
