"""Parameter estimation: a learned structure plus the data give a ``Network`` of Laplace CPTs."""

from __future__ import annotations

from bnserve.store.model import CPT_DTYPE, Network, Node
from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.structure import Structure


def estimate(structure: Structure, data: EncodedData) -> Network:
    """One node per variable the structure names (in variable order: features, then the
    class), CPT axes (node, *parents). A feature the structure leaves out is not a node.

    O(n (m + v^(k+2))) for n nodes, m rows, v states, k+1 parents.
    """
    index = {v.name: i for i, v in enumerate(data.features)}
    index[data.class_variable.name] = -1
    names = [v.name for v in data.variables if v.name in structure.parents]
    families = [[index[f] for f in (name, *structure.parents[name])] for name in names]
    counts = data.family_counts(families)  # one pass for every family when the rows are streamed
    return Network(tuple(
        Node(name, tuple(structure.parents[name]), stats.laplace_cpt_from_counts(c).astype(CPT_DTYPE, copy=False))
        for name, c in zip(names, counts)
    ))
