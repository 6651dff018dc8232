"""CPTs of networks pooled by product (``product_joint``): P(c | x) ∝ Π_m P_m(c, x).

Pooled as each is estimated, m networks would count every feature m times. The pooled
model starts instead from their geometric mean: each member's log-CPTs times 1/m, made
back into CPTs of the member's own DAG by ``discriminative.to_cpts`` (which changes no
P(c | x)). With ``alr`` the weights of every member's CPT entries are fitted together:
one logistic regression over all the members' families, preconditioned by their Laplace
estimates as ``discriminative`` does for one network, starting from and shrunk towards
1/m. For AODE's SPODEs (``laode``) those families are every pair of features with the
class, so the pooled model holds any pairwise interaction (in the spirit of Zaidi et al.
2016's higher-order ALR, here on the SPODEs' own tables). Members must be perfect DAGs
with the class a root and a parent of every feature, as SPODEs are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Network
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.discriminative import Layout, networks_with_cpts, rows_of
from bnserve.trainer.learners.sizing import TooLarge
from bnserve.trainer.learners.structure import Structure

MAX_DESIGN_ENTRIES = 1 << 25  # rows x feature sets of the joint alr fit: its one-hot matrix, about 12 bytes each
# the joint fit stops after this many L-BFGS iterations, not alr's 300: 10-fold CV on the 32
# shared sets gave the same folds' accuracy and log-loss on 30 (converged by then); adult-train
# 86.27 -> 86.39 % and log-loss 0.375 -> 0.323 (early stopping regularises its n-fold weights),
# letter 94.94 -> 94.96 and 0.180 -> 0.184, for a third and a fifth of the fit (docs/training.md)
POOLED_ITERATIONS = 50

Estimate = Callable[[Sequence[tuple[Structure, TrainingView]]], list[Network]]


def pooled_networks(
    members: Sequence[tuple[Structure, TrainingView]], generative: Estimate, alr_strength: float | None
) -> list[Network]:
    """The members' networks for ``product_joint``. ``generative`` estimates them one by one
    (the estimator's own CPTs; Laplace's where ``alr_strength``, alr's λ, is given)."""
    networks = generative(members)
    prior = 1.0 / len(networks)
    cls = members[0][1].class_variable.name
    keys = [[f"{m}:{node.name}" for node in net.nodes] for m, net in enumerate(networks)]
    log_theta = {key: np.log(node.cpt) for net, ks in zip(networks, keys) for key, node in zip(ks, net.nodes)}
    if alr_strength is None:
        phi = {key: prior * table for key, table in log_theta.items()}
    else:
        phi = _fitted(members, networks, keys, log_theta, alr_strength, prior)
    phis = [{node.name: phi[key] for key, node in zip(ks, net.nodes)} for net, ks in zip(networks, keys)]
    return networks_with_cpts(networks, phis, cls)


def _fitted(
    members: Sequence[tuple[Structure, TrainingView]],
    networks: list[Network],
    keys: list[list[str]],
    log_theta: dict[str, np.ndarray],
    strength: float,
    prior: float,
) -> dict[str, np.ndarray]:
    """Every member's weighted log-tables, fitted together on the rows."""
    data = rows_of(members[0][1])
    if any(d is not data for _, d in members):
        raise InvalidInput("estimator alr pools networks fitted on one set of rows")
    axes = {key: (node.name, *node.parents) for net, ks in zip(networks, keys) for key, node in zip(ks, net.nodes)}
    layout = Layout(data.class_variable.name, axes, data)
    entries = data.n_rows * len(layout.groups)
    if entries > MAX_DESIGN_ENTRIES:
        raise TooLarge(
            f"estimator alr on {len(networks)} pooled networks",
            f"{data.n_rows:,} rows x {len(layout.groups):,} feature sets of their tables is {entries:,} "
            f"entries to fit on, over {MAX_DESIGN_ENTRIES:,}; sample fewer rows, or take another estimator",
        )
    return layout.fitted(data, log_theta, strength, prior, POOLED_ITERATIONS)
