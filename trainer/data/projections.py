"""Learning derived features: the numeric columns' linear discriminants (``--projections lda``).

Fisher's LDA on the training rows: the numeric columns of more than two distinct values,
each centred on its (weighted) mean with a missing value read as that mean, and scaled by
its standard deviation; the directions that best separate the class means against the
pooled within-class scatter, at most classes - 1 of them (``MAX_DIRECTIONS`` at most).
Each direction is a ``Projection`` of the raw columns (the scale folded into the weights)
and becomes one more numeric feature, cut into intervals as any numeric column is
(``encoded.prepare``). Why: ``bench/projections.py`` (docs/training.md). numpy loads with
the first fit: a command line's parser reads the names here (``trainer --help`` imports no numpy).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from bnserve.store.model.projection import Projection

LDA = "lda"
NONE = "none"
PROJECTIONS = (NONE, LDA)
MAX_DIRECTIONS = 8  # a class of many states gets its strongest directions only
RANK_TOLERANCE = 1e-9  # an eigenvalue under this share of the largest is no direction
MIN_INPUTS = 2  # columns of more than two values a direction needs


def projectable(numbers: np.ndarray) -> list[int]:
    """The columns of ``numbers`` (rows, columns; NaN missing) a direction may read: those of
    more than two values (a two-valued column is a flag, cut as it is)."""
    import numpy as np

    return [j for j in range(numbers.shape[1]) if np.unique(numbers[:, j][~np.isnan(numbers[:, j])]).size > 2]


def discriminants(
    names: tuple[str, ...], numbers: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None
) -> list[Projection]:
    """The linear discriminants of the columns ``numbers`` (rows, len(names); NaN missing)
    for the class codes ``y``, strongest first; none unless two columns have more than two
    values (``MIN_INPUTS``: a discriminant of one column is that column again, a duplicate
    feature that naive Bayes would count twice)."""
    import numpy as np

    from bnserve.store.model.projection import Projection

    keep = projectable(numbers)
    if len(keep) < MIN_INPUTS or n_classes < 2:
        return []
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    X = numbers[:, keep]
    present = ~np.isnan(X)
    centres = (np.where(present, X, 0.0) * w[:, None]).sum(axis=0) / (present * w[:, None]).sum(axis=0)
    Z = np.where(present, X - centres, 0.0)
    scales = np.sqrt((Z**2 * w[:, None]).sum(axis=0) / w.sum())
    scales[scales == 0] = 1.0
    Z /= scales
    total = w.sum()
    mass = np.bincount(y, w, minlength=n_classes)
    seen = mass > 0
    means = np.stack([np.bincount(y, w * Z[:, j], minlength=n_classes) for j in range(Z.shape[1])], axis=1).astype(
        np.float64
    )
    means[seen] /= mass[seen, None]
    within = Z - means[y]
    Sw = (within * w[:, None]).T @ within / total
    Sb = (means[seen] * (mass[seen] / total)[:, None]).T @ means[seen]  # the overall mean is 0
    s, U = np.linalg.eigh(Sw)
    rank = s > RANK_TOLERANCE * max(float(s.max()), np.finfo(float).tiny)
    whiten = U[:, rank] / np.sqrt(s[rank])
    values, vectors = np.linalg.eigh(whiten.T @ Sb @ whiten)
    order = np.argsort(values)[::-1]
    top = [k for k in order if values[k] > RANK_TOLERANCE * max(float(values.max()), np.finfo(float).tiny)]
    directions = whiten @ vectors[:, top[: min(int(seen.sum()) - 1, MAX_DIRECTIONS)]]
    inputs = tuple(names[j] for j in keep)
    projections = []
    for d in directions.T:
        d = d * np.sign(d[np.argmax(np.abs(d))])  # one sign, whatever the solver's
        projections.append(Projection(inputs, tuple(centres.tolist()), tuple((d / scales).tolist())))
    return projections


def derived_names(count: int, taken: Collection[str]) -> list[str]:
    """``ld1``, ``ld2``, …, each with ``_`` appended until no column of the data has its name."""
    names = []
    for k in range(1, count + 1):
        name = f"ld{k}"
        while name in taken:
            name += "_"
        names.append(name)
    return names
