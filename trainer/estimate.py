"""Parameter estimation: a learned structure plus the data give a ``Network`` of Laplace CPTs."""

from __future__ import annotations

from store.model import CPT_DTYPE, Network, Node
from trainer import stats
from trainer.data import EncodedData
from trainer.learners.structure import Structure


def estimate(structure: Structure, data: EncodedData) -> Network:
    """One node per variable the structure names (in variable order: features, then the
    class), CPT axes (node, *parents). A feature the structure leaves out is not a node.

    O(n (m + v^(k+2))) for n nodes, m rows, v states, k+1 parents.
    """
    columns = {v.name: data.X[:, i] for i, v in enumerate(data.features)}
    columns[data.class_variable.name] = data.y
    cards = {v.name: v.cardinality for v in data.variables}
    nodes = []
    for var in data.variables:
        if var.name not in structure.parents:
            continue
        family = (var.name, *structure.parents[var.name])
        cpt = stats.laplace_cpt([columns[f] for f in family], [cards[f] for f in family])
        nodes.append(Node(var.name, tuple(structure.parents[var.name]), cpt.astype(CPT_DTYPE, copy=False)))
    return Network(tuple(nodes))
