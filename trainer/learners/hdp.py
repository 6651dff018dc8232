"""Hierarchical Dirichlet process estimates of a CPT (Petitjean, Buntine, Webb & Zaidi 2018)."""

from __future__ import annotations

import numpy as np


def hdp_cpt(counts: np.ndarray, *, sweeps: int, rng: np.random.Generator) -> np.ndarray:
    """CPT (float64, axes as ``counts``: node, parent 1, ..., parent k) smoothed by an HDP whose
    levels are the parents in axis order: P(x) -> P(x | pa1) -> ... -> P(x | pa1..pak)."""
    raise NotImplementedError("hdp: being written")
