"""The HDP sampler one table at a time, as it was before ``hdp.hdp_cpts`` sampled a network's
tables together: the slow obvious reference the batched sampler must equal draw for draw."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from bnserve.trainer.learners.hdp import (
    CONCENTRATION_EVERY,
    CONCENTRATION_RATE,
    CONCENTRATION_SHAPE,
    EXACT_STIRLING_MAX_N,
    MAX_CONCENTRATION,
    MAX_TABLES,
    ROOT_CONCENTRATION,
    WINDOW,
    _exact_log_stirling,
    _initial_tables,
    log_stirling,
)


def one_tree_cpt(counts: np.ndarray, *, sweeps: int, rng: np.random.Generator) -> np.ndarray:
    """CPT (float64, axes as ``counts``: node, parent 1, ..., parent k) smoothed by an HDP whose
    levels are the parents in axis order: P(x) -> P(x | pa1) -> ... -> P(x | pa1..pak)."""
    tree = _Tree(counts)
    if tree.depth == 0 or tree.states == 1 or tree.n[0].sum() == 0:
        return tree.to_cpt(tree.probabilities(tree.concentrations))  # nothing to sample
    burn_in = sweeps // 10
    total = np.zeros_like(tree.n[-1], dtype=np.float64)
    for sweep in range(sweeps):
        for level in range(tree.depth, 0, -1):
            tree.sample_tables(level, rng)
        if (sweep + CONCENTRATION_EVERY // 2) % CONCENTRATION_EVERY == 0:
            for level in range(1, tree.depth + 1):
                tree.sample_concentration(level, rng)
        if sweep >= burn_in:
            total += tree.probabilities(tree.concentrations)
    return tree.to_cpt(total / (sweeps - burn_in))


def _flat(array: np.ndarray, states: int) -> np.ndarray:
    """(node, pa1..pal) -> (configurations in C order, node)."""
    return np.moveaxis(array, 0, -1).reshape(-1, states)


class _Tree:
    """Counts n, table counts t (each depth: (configurations, states)) and concentrations.
    The children of configuration p at depth l are p * cards[l] + v at depth l + 1."""

    def __init__(self, counts: np.ndarray) -> None:
        counts = np.rint(np.asarray(counts, dtype=np.float64)).astype(np.int64)
        self.shape = counts.shape
        self.states = counts.shape[0]
        self.cards = list(counts.shape[1:])
        self.depth = len(self.cards)
        leaves = _flat(counts, self.states)
        self.n: list[np.ndarray] = [np.zeros(0, np.int64)] * (self.depth + 1)
        self.t: list[np.ndarray] = [np.zeros(0, np.int64)] * (self.depth + 1)
        self.n[self.depth] = leaves
        self.concentrations = np.full(self.depth + 1, ROOT_CONCENTRATION)
        # bottom up: a start satisfying 1 <= t <= n where n >= 1 (the paper's initialisation)
        for level in range(self.depth, 0, -1):
            self.t[level] = _initial_tables(self.n[level], ROOT_CONCENTRATION)
            self.n[level - 1] = self.t[level].reshape(-1, self.cards[level - 1], self.states).sum(axis=1)
        self.t[0] = (self.n[0] > 0).astype(np.int64)  # the root's base is fixed: one table per state seen
        self.n_total = [n.sum(axis=1) for n in self.n]
        self.small = int(leaves.sum()) <= EXACT_STIRLING_MAX_N  # no count, even the root's, can outgrow it
        self._cache_leaf_rows(leaves)
        # the configurations with data, split by their last parent's value (siblings apart)
        data = leaves.sum(axis=1) > 0
        seen = [data]
        for level in range(self.depth, 0, -1):
            seen.insert(0, seen[0].reshape(-1, self.cards[level - 1]).any(axis=1))
        self.seen = seen
        self.groups = [
            [
                np.flatnonzero(seen[level].reshape(-1, self.cards[level - 1])[:, v]) * self.cards[level - 1] + v
                for v in range(self.cards[level - 1])
            ]
            if level
            else []
            for level in range(self.depth + 1)
        ]

    def sample_tables(self, level: int, rng: np.random.Generator) -> None:
        """One Gibbs step for every table count of depth ``level`` (>= 1), given the rest."""
        n, t, parent_n, parent_t = self.n[level], self.t[level], self.n[level - 1], self.t[level - 1]
        parent_total = self.n_total[level - 1]
        log_c, c_parent = np.log(self.concentrations[level]), self.concentrations[level - 1]
        offsets = np.arange(-WINDOW, WINDOW + 1)
        card = self.cards[level - 1]
        for nodes in self.groups[level]:
            if nodes.size == 0:
                continue
            movable = n[nodes] >= 2  # n = 0 or 1 forces t = n
            if not movable.any():
                continue
            node_of, x = np.nonzero(movable)
            at = nodes[node_of]
            parents = at // card
            n_x, t_x = n[at, x], t[at, x]
            candidates = t_x[:, None] + offsets
            np_x = parent_n[parents, x][:, None] - t_x[:, None] + candidates
            allowed = (candidates >= 1) & (candidates <= np.minimum(n_x, MAX_TABLES)[:, None])
            allowed &= np_x >= parent_t[parents, x][:, None]
            safe = np.where(allowed, candidates, 1)
            np_safe = np.where(allowed, np_x, np.maximum(parent_t[parents, x], 1)[:, None])
            pt_x = parent_t[parents, x][:, None]
            if self.small:  # every count within the exact table: index it directly
                table = _exact_log_stirling()
                stirling = table[n_x[:, None], safe] + table[np_safe, pt_x]
            else:
                stirling = self._log_stirling_own(level, at, x, n_x, safe) + log_stirling(
                    np_safe, np.broadcast_to(pt_x, safe.shape)
                )
            log_p = stirling + safe * log_c - gammaln(c_parent + (parent_total[parents] - t_x)[:, None] + safe)
            log_p = np.where(allowed, log_p, -np.inf)
            log_p -= log_p.max(axis=1, keepdims=True)
            cumulative = np.cumsum(np.exp(log_p), axis=1)
            u = rng.random(len(at)) * cumulative[:, -1]
            chosen = (cumulative < u[:, None]).sum(axis=1)
            new = candidates[np.arange(len(at)), chosen]
            delta = new - t_x
            t[at, x] = new
            parent_n[parents, x] += delta  # one child per parent in a group: (parent, x) pairs are distinct
            np.add.at(parent_total, parents, delta)

    def _cache_leaf_rows(self, leaves: np.ndarray) -> None:
        """log S(n, 1..min(n, MAX_TABLES)) once for each leaf count past the exact table: the
        leaves' counts never change, and the saddle point is the costly part of a sweep."""
        big = leaves > EXACT_STIRLING_MAX_N
        lengths = np.minimum(leaves[big], MAX_TABLES)
        self.leaf_offset = np.full(leaves.shape, -1, dtype=np.int64)
        self.leaf_offset[big] = np.cumsum(lengths) - lengths
        n = np.repeat(leaves[big], lengths)
        t = np.arange(n.size) - np.repeat(self.leaf_offset[big], lengths) + 1
        self.leaf_rows = log_stirling(n, t)

    def _log_stirling_own(
        self, level: int, at: np.ndarray, x: np.ndarray, n_x: np.ndarray, t: np.ndarray
    ) -> np.ndarray:
        big = n_x > EXACT_STIRLING_MAX_N
        if level < self.depth or not big.any():
            return log_stirling(np.broadcast_to(n_x[:, None], t.shape), t)
        out = np.empty(t.shape)
        out[~big] = _exact_log_stirling()[n_x[~big][:, None], t[~big]]
        out[big] = self.leaf_rows[self.leaf_offset[at[big], x[big]][:, None] + t[big] - 1]
        return out

    def sample_concentration(self, level: int, rng: np.random.Generator) -> None:
        """Du's auxiliary-variable draw of the concentration shared by depth ``level``."""
        seen = self.seen[level]
        totals = self.n[level].sum(axis=1)[seen].astype(np.float64)
        c = self.concentrations[level]
        q = np.maximum(rng.beta(c, totals), 1e-75)
        rate = CONCENTRATION_RATE - np.log(q).sum()
        shape = CONCENTRATION_SHAPE + self.t[level][seen].sum()
        self.concentrations[level] = min(MAX_CONCENTRATION, rng.gamma(shape, 1.0 / rate))

    def probabilities(self, concentrations: np.ndarray) -> np.ndarray:
        """The leaves' P(x | configuration), (configurations, states), top down."""
        p = np.full((1, self.states), 1.0 / self.states)
        for level in range(self.depth + 1):
            n, c = self.n[level].astype(np.float64), concentrations[level]
            base = np.repeat(p, self.cards[level - 1], axis=0) if level else p
            p = (n + c * base) / (n.sum(axis=1, keepdims=True) + c)
        return p

    def to_cpt(self, leaves: np.ndarray) -> np.ndarray:
        cpt = np.moveaxis(leaves.reshape(*self.shape[1:], self.states), -1, 0)
        return np.ascontiguousarray(cpt / cpt.sum(axis=0, keepdims=True))
