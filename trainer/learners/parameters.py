"""Parameter estimation: a learned structure plus the data give a ``Network`` of Laplace CPTs,
P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|), each count over the rows where its family is present."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bnserve.store.model import CPT_DTYPE, Network, Node
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.structure import Structure
from bnserve.trainer.stats import joint_counts


def estimate(structure: Structure, data: TrainingView) -> Network:
    """One node per variable the structure names (in variable order: features, then the
    class), CPT axes (node, *parents). A feature the structure leaves out is not a node.

    O(n (m + v^(k+2))) for n nodes, m rows, v states, k+1 parents.
    """
    index = {v.name: i for i, v in enumerate(data.features)}
    index[data.class_variable.name] = -1
    names = [v.name for v in data.variables if v.name in structure.parents]
    families = [[index[f] for f in (name, *structure.parents[name])] for name in names]
    counts = data.family_counts(families)  # one pass for every family when the rows are streamed
    return Network(
        tuple(
            Node(name, tuple(structure.parents[name]), laplace_cpt_from_counts(c).astype(CPT_DTYPE, copy=False))
            for name, c in zip(names, counts)
        )
    )


def laplace_cpt(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """CPT with axes (node, *parents): P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|).

    ``columns[0]`` is the node, the rest its parents in order; counts are available-case
    over all of them, so N(pa) is the sum of N(x, pa) over x. With no parents this is the
    prior (N(x) + 1) / (M + |X|). Returns float64.
    """
    return laplace_cpt_from_counts(joint_counts(columns, cards))


def laplace_cpt_from_counts(counts: np.ndarray) -> np.ndarray:
    """``laplace_cpt`` from the family's table of counts, axes (node, *parents)."""
    counts = counts.astype(np.float64)
    return (counts + 1.0) / (counts.sum(axis=0, keepdims=True) + counts.shape[0])
