"""Decomposable family scores: the Cooper–Herskovits (K2) score and BIC's log-likelihood and penalty."""

from __future__ import annotations

import math

import numpy as np

from bnserve.trainer.stats.information import xlogx


def cooper_herskovits_from_counts(counts: np.ndarray) -> float:
    """log of the Cooper–Herskovits (K2) family score from counts N(x, pa), node on axis 0.

    Σ_j [log Γ(r) − log Γ(N_j + r)] + Σ_jk log Γ(N_jk + 1) with r = |X| and j over the
    parent configurations (the other axes, flattened); an unseen configuration adds 0.
    Cooper & Herskovits 1992, eq. (8) with uniform priors. O(cells).
    """
    from scipy.special import gammaln  # 0.2 s to import: for K2's score only

    n = np.asarray(counts, dtype=np.float64)
    r = n.shape[0]
    n = n.reshape(r, -1)
    return float(np.sum(gammaln(r) - gammaln(n.sum(axis=0) + r)) + np.sum(gammaln(n + 1.0)))


def family_log_likelihood(counts: np.ndarray) -> float:
    """Maximised log-likelihood Σ N(x, u) log(N(x, u) / N(u)) of a family from its counts,
    the child on the last axis and every parent configuration u on the others. Nats."""
    n = np.asarray(counts, dtype=np.float64)
    return xlogx(n) - xlogx(n.sum(axis=-1))


def bic_penalty(rows: float, child_states: int, parent_configurations: int) -> float:
    """BIC's (log m / 2) per free parameter: (r - 1) free probabilities per parent configuration
    (m: the rows, or their total weight)."""
    return 0.5 * math.log(max(rows, 1)) * (child_states - 1) * parent_configurations
