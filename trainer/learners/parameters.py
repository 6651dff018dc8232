"""Parameter estimation: a learned structure plus the data give a ``Network`` of CPTs, each
from its family's counts (available-case: the rows where the whole family is present) by
the estimator the user names (``--estimator``):

- ``laplace`` (default): P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|);
- ``dirichlet:A``: a symmetric Dirichlet prior of A per cell, (N(x, pa) + A) / (N(pa) + A |X|)
  (Weka's BayesNet SimpleEstimator uses A = 0.5); ``laplace`` is ``dirichlet:1``;
- ``m:M``: Cestnik's m-estimate, (N(x, pa) + M p(x)) / (N(pa) + M), shrinking every
  parent configuration towards the node's Laplace marginal p(x) = (N(x) + 1) / (N + |X|);
  a node without parents gets (N(x) + M / |X|) / (N + M);
- ``hdp``: hierarchical Dirichlet process smoothing (Petitjean et al. 2018, ``hdp``):
  P(x | c, pa1, ..., pak) shrinks towards P(x | c, pa1, ..., pa(k-1)) and so on to P(x),
  with concentrations sampled, tied by level;
- ``alr`` or ``alr:LAMBDA``: discriminative CPTs (Zaidi et al. 2017, ``discriminative``),
  fitted to P(c | x) on the rows from the Laplace estimates, penalised by LAMBDA (default 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CPT_DTYPE, PRODUCT_JOINT, SINGLE, Network, Node
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.structure import Structure
from bnserve.trainer.stats import joint_counts

LAPLACE, DIRICHLET, M_ESTIMATE, HDP, ALR = "laplace", "dirichlet", "m", "hdp", "alr"
ESTIMATORS = (LAPLACE, DIRICHLET, M_ESTIMATE, HDP, ALR)
ALR_STRENGTH = 1.0  # λ of alr when not given
HDP_ITERATIONS = 30  # Gibbs sweeps per family (see ``hdp``)


@dataclass(frozen=True)
class Estimator:
    """How a family's counts become its CPT. ``strength``: A for dirichlet, M for m, the
    number of Gibbs sweeps for hdp, λ for alr; ``seed`` seeds hdp's sampler (each family draws from
    its own stream, so a model is reproducible whatever else is learned beside it)."""

    kind: str = LAPLACE
    strength: float = 1.0
    seed: int = 0

    @staticmethod
    def parse(text: str) -> Estimator:
        """``laplace``, ``dirichlet:A``, ``m:M``, ``hdp[:SWEEPS]`` or ``alr[:LAMBDA]``."""
        kind, sep, value = str(text).strip().partition(":")
        if kind not in ESTIMATORS:
            raise InvalidInput(
                f"estimator must be one of laplace, dirichlet:A, m:M, hdp[:SWEEPS], alr[:LAMBDA]; got {text!r}"
            )
        if kind == LAPLACE:
            if sep:
                raise InvalidInput(f"estimator laplace takes no value (it is dirichlet:1); got {text!r}")
            return Estimator()
        if kind == HDP:
            sweeps = _number(text, value, int) if sep else HDP_ITERATIONS
            if sweeps < 1:
                raise InvalidInput(f"estimator hdp: the number of sweeps must be positive; got {text!r}")
            return Estimator(HDP, float(sweeps))
        if kind == ALR and not sep:
            return Estimator(ALR, ALR_STRENGTH)
        if not sep:
            raise InvalidInput(f"estimator {kind} needs a value, e.g. {kind}:{'0.5' if kind == DIRICHLET else '2'}")
        strength = _number(text, value, float)
        if not 0 < strength < float("inf"):
            raise InvalidInput(f"estimator {kind}: the value must be a finite positive number; got {text!r}")
        return Estimator(kind, strength)

    def __str__(self) -> str:
        if self.kind == LAPLACE:
            return LAPLACE
        if self.kind == HDP:
            return HDP if self.strength == HDP_ITERATIONS else f"{HDP}:{int(self.strength)}"
        if self.kind == ALR and self.strength == ALR_STRENGTH:
            return ALR
        return f"{self.kind}:{self.strength:g}"

    @property
    def needs_rows(self) -> bool:
        """Whether it estimates from the rows themselves, not only their counts."""
        return self.kind == ALR

    def cpt(self, counts: np.ndarray, family: int = 0) -> np.ndarray:
        """The CPT (float64, axes as ``counts``: node, *parents) of the ``family``-th family."""
        counts = counts.astype(np.float64)
        if self.kind in (LAPLACE, DIRICHLET):
            return (counts + self.strength) / (counts.sum(axis=0, keepdims=True) + self.strength * counts.shape[0])
        if self.kind == M_ESTIMATE:
            states = counts.shape[0]
            marginal = counts.reshape(states, -1).sum(axis=1)
            prior = (marginal + 1.0) / (marginal.sum() + states) if counts.ndim > 1 else np.full(states, 1.0 / states)
            prior = prior.reshape((states,) + (1,) * (counts.ndim - 1))
            return (counts + self.strength * prior) / (counts.sum(axis=0, keepdims=True) + self.strength)

        if self.kind == ALR:
            raise ValueError("alr estimates from the rows, not a family's counts: see estimate")
        return self.cpts([counts], first=family)[0]

    def cpts(self, counts: Sequence[np.ndarray], first: int = 0) -> list[np.ndarray]:
        """``cpt`` of each family's counts, the i-th being family ``first + i``; hdp samples
        them together (``hdp.hdp_cpts``: a network's sweeps cost one table's numpy calls),
        each family from its own stream, so its CPTs are those of one family at a time."""
        return self.networks_cpts([counts], first)[0]

    def networks_cpts(self, networks: Sequence[Sequence[np.ndarray]], first: int = 0) -> list[list[np.ndarray]]:
        """``cpts`` of each network's families (each network's i-th family is family ``first +
        i``), every network's tables sampled together by hdp: an ensemble of n networks (AODE's,
        ESKDB's) costs the numpy calls of one, with the CPTs of each network estimated alone."""
        if self.kind != HDP:
            return [[self.cpt(c, first + i) for i, c in enumerate(counts)] for counts in networks]
        tables = [c.astype(np.float64) for counts in networks for c in counts]
        if any(c.size and not np.array_equal(c, np.rint(c)) for c in tables):
            raise InvalidInput("estimator hdp samples from whole counts: its row weights must be whole numbers")
        from bnserve.trainer.learners.hdp import hdp_cpts  # scipy.special: imported for hdp only

        rngs = [np.random.default_rng([self.seed, first + i]) for counts in networks for i in range(len(counts))]
        flat = iter(hdp_cpts(tables, sweeps=int(self.strength), rngs=rngs))
        return [[next(flat) for _ in counts] for counts in networks]


LAPLACE_ESTIMATOR = Estimator()


def _number(text: str, value: str, kind: type) -> float:
    try:
        return kind(value)
    except ValueError:
        raise InvalidInput(f"estimator {text!r}: {value!r} is not a number") from None


def estimate(structure: Structure, data: TrainingView, estimator: Estimator = LAPLACE_ESTIMATOR) -> Network:
    """One node per variable the structure names (in variable order: features, then the
    class), CPT axes (node, *parents). A feature the structure leaves out is not a node.

    O(n (m + v^(k+2))) for n nodes, m rows, v states, k+1 parents (hdp: times its sweeps).
    ``alr`` fits the CPTs on the rows and may add arcs (see ``discriminative``).
    """
    return estimate_all([(structure, data)], estimator)[0]


def estimate_all(
    members: Sequence[tuple[Structure, TrainingView]],
    estimator: Estimator = LAPLACE_ESTIMATOR,
    combination: str = SINGLE,
) -> list[Network]:
    """``estimate`` of each (structure, data), hdp sampling every network's tables at once
    (``Estimator.networks_cpts``): the same networks as one at a time, in fewer numpy calls.
    Networks pooled by ``product_joint`` are estimated together (``pooled``)."""
    if combination == PRODUCT_JOINT:
        from bnserve.trainer.learners.pooled import pooled_networks  # scipy.optimize, for alr

        alr = estimator.kind == ALR
        return pooled_networks(
            members,
            partial(estimate_all, estimator=LAPLACE_ESTIMATOR if alr else estimator),
            estimator.strength if alr else None,
        )
    if estimator.kind == ALR:
        from bnserve.trainer.learners.discriminative import alr_network  # scipy.optimize: for alr only

        return [
            alr_network(structure, data, estimator.strength, partial(_laplace, data=data))
            for structure, data in members
        ]
    nodes = [_families(structure, data) for structure, data in members]
    counts = [data.family_counts(families) for (_, data), (_, families) in zip(members, nodes)]
    return [
        Network(
            tuple(
                Node(name, tuple(structure.parents[name]), cpt.astype(CPT_DTYPE, copy=False))
                for name, cpt in zip(names, cpts)
            )
        )
        for (structure, _), (names, _), cpts in zip(members, nodes, estimator.networks_cpts(counts))
    ]


def _laplace(structure: Structure, data: TrainingView) -> Network:
    return estimate(structure, data)


def _families(structure: Structure, data: TrainingView) -> tuple[list[str], list[list[int]]]:
    """The structure's nodes (in variable order) and each one's family as column indices (-1: the class)."""
    index = {v.name: i for i, v in enumerate(data.features)}
    index[data.class_variable.name] = -1
    names = [v.name for v in data.variables if v.name in structure.parents]
    return names, [[index[f] for f in (name, *structure.parents[name])] for name in names]


def laplace_cpt(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """CPT with axes (node, *parents): P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|).

    ``columns[0]`` is the node, the rest its parents in order; counts are available-case
    over all of them, so N(pa) is the sum of N(x, pa) over x. With no parents this is the
    prior (N(x) + 1) / (M + |X|). Returns float64.
    """
    return LAPLACE_ESTIMATOR.cpt(joint_counts(columns, cards))
