"""Hierarchical Dirichlet process estimates of a CPT (Petitjean, Buntine, Webb & Zaidi 2018,
"Accurate parameter estimation for Bayesian network classifiers using hierarchical
Dirichlet processes", Machine Learning 107:1303-1331).

For a node X with parents pa1..pak (in the structure's order: the class first for the
KDB family) the distributions form a tree: P(x) at the root (depth 0), P(x | pa1) at
depth 1, ..., P(x | pa1..pak) at the leaves (depth k). Each is drawn from a Dirichlet
process (discount 0) whose base is its parent's distribution, so a configuration seen
rarely borrows from the coarser ones above it. The data sit at the leaves; an inner
node "sees" its children's table counts t (the number of draws they made from it).

Inference is collapsed Gibbs sampling of the table counts: given the rest, t(j, x) of a
node j has posterior proportional to S(n, t) c^t S(n_parent, t_parent) / (c_parent)_N_parent
(S: unsigned Stirling numbers of the first kind, (c)_N the rising factorial), sampled in a
window of +-10 around its value as the paper does. One concentration per depth (tying by
level), resampled every few sweeps with the auxiliary-variable scheme of Du (2012):
q ~ Beta(c, N) per node, c ~ Gamma(2 + sum T, 1 + sum -log q). The root's concentration
stays 2, its base uniform. The estimate is the posterior mean of the leaves'
probabilities, averaged over the sweeps after a burn-in of a tenth.

Vectorised with numpy: a sweep visits each depth, then each value v of that depth's last
parent, and updates every table count of the nodes whose last parent is v at once, every
state x together. Those nodes have different parents, so across nodes this is an exact
Gibbs step; across the states of one node it is a blocked approximation, each state's
count drawn given the others' values from the start of the step (they meet only in the
parent's total, one term of the conditional; sampling them one by one, as the paper does,
cost |X| times as many numpy calls and moved no estimate beyond the seeds' spread).
Only nodes under which some data lie are sampled; a configuration never seen gets its
parent's distribution (its own posterior mean with no counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.special import digamma, gammaln

ROOT_CONCENTRATION = 2.0  # the root's, fixed; also every depth's starting value
CONCENTRATION_SHAPE, CONCENTRATION_RATE = 2.0, 1.0  # Gamma prior on each depth's concentration
MAX_CONCENTRATION = 4000.0
CONCENTRATION_EVERY = 5  # sweeps between concentration draws
WINDOW = 10  # a table count moves at most this far in one step
MAX_TABLES = 10000  # and stays at most this (as the paper's code), which bounds the cached rows
EXACT_STIRLING_MAX_N = 2048  # log S(n, t) from the recurrence up to here, saddle point beyond


def hdp_cpt(counts: np.ndarray, *, sweeps: int, rng: np.random.Generator) -> np.ndarray:
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


def hdp_probabilities(counts: np.ndarray, tables: Sequence[np.ndarray], concentrations: Sequence[float]) -> np.ndarray:
    """The HDP's posterior mean given table counts and concentrations: the deterministic step
    the sampler averages. ``counts``: the data, axes (node, pa1..pak); ``tables[l-1]``: the
    table counts of depth l (l = 1..k), axes (node, pa1..pal); ``concentrations``: k + 1
    values, the root's first. With n(x) the counts of a node (its data at the leaves, the
    sum of its children's table counts inside), N their sum and c its depth's concentration,

        P(x | node) = (n(x) + c P(x | parent node)) / (N + c),  P(x | parent of root) = 1/|X|.
    """
    tree = _Tree(counts)
    if len(tables) != tree.depth or len(concentrations) != tree.depth + 1:
        raise ValueError(f"hdp: {tree.depth} table arrays and {tree.depth + 1} concentrations expected")
    for level, t in enumerate(tables, start=1):
        tree.t[level] = _flat(np.asarray(t), tree.states).astype(np.int64)
    for level in range(tree.depth - 1, -1, -1):
        tree.n[level] = tree.t[level + 1].reshape(-1, tree.cards[level], tree.states).sum(axis=1)
    return tree.to_cpt(tree.probabilities(np.asarray(concentrations, dtype=np.float64)))


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


def _initial_tables(n: np.ndarray, c: float) -> np.ndarray:
    """t = n for n <= 1, else about the expected number of tables, c (psi(c + n) - psi(c))."""
    expected = np.floor(c * (digamma(c + n) - digamma(c))).astype(np.int64)
    return np.where(n <= 1, n, np.maximum(1, expected))


@lru_cache(maxsize=1)
def _exact_log_stirling() -> np.ndarray:
    """log S(n, t) for n, t <= EXACT_STIRLING_MAX_N by S(n+1, t) = S(n, t-1) + n S(n, t)."""
    size = EXACT_STIRLING_MAX_N + 1
    table = np.full((size, size), -np.inf)
    table[0, 0] = 0.0
    for n in range(size - 1):
        table[n + 1, 1:] = np.logaddexp(table[n, :-1], np.log(n) + table[n, 1:]) if n else table[n, :-1]
    return table


def log_stirling(n: np.ndarray, t: np.ndarray) -> np.ndarray:
    """log of the unsigned Stirling number of the first kind S(n, t) (-inf where S = 0):
    exact for small n, else exact at t in {1, n-1, n} and the saddle point of the generating
    function (x)_n = sum_t S(n, t) x^t in between (log error below 0.09, smooth in t)."""
    n, t = np.asarray(n, dtype=np.int64), np.asarray(t, dtype=np.int64)
    small = n <= EXACT_STIRLING_MAX_N
    if small.all():
        return _exact_log_stirling()[n, t]
    out = np.empty(np.broadcast(n, t).shape)
    n, t = np.broadcast_to(n, out.shape), np.broadcast_to(t, out.shape)
    out[small] = _exact_log_stirling()[n[small], t[small]]
    big = ~small
    nb, tb = n[big].astype(np.float64), t[big].astype(np.float64)
    value = np.full(nb.shape, -np.inf)
    value[tb == nb] = 0.0
    value[tb == 1] = gammaln(nb[tb == 1])
    value[tb == nb - 1] = np.log(nb[tb == nb - 1]) + np.log(nb[tb == nb - 1] - 1) - np.log(2.0)
    middle = (tb > 1) & (tb < nb - 1)
    value[middle] = _saddle_log_stirling(nb[middle], tb[middle])
    out[big] = value
    return out


def _saddle_log_stirling(n: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Saddle point of (x)_n / x^(t+1): x(psi(x+n) - psi(x)) = t, solved by Newton in log x."""
    x = t / np.log1p(n / t)
    for _ in range(4):  # fixed point of x log(1 + n/x) = t: a close start
        x = t / np.log1p(n / x)
    log_x = np.log(x)
    for _ in range(10):
        x = np.exp(log_x)
        mean = x * (digamma(x + n) - digamma(x))
        variance = mean + x * x * (_trigamma(x + n) - _trigamma(x))
        log_x -= (mean - t) / variance
    x = np.exp(log_x)
    variance = x * (digamma(x + n) - digamma(x)) + x * x * (_trigamma(x + n) - _trigamma(x))
    return gammaln(x + n) - gammaln(x) - t * log_x - 0.5 * np.log(2 * np.pi * variance)


def _trigamma(x: np.ndarray) -> np.ndarray:
    """psi'(x) for x > 0: ten steps of psi'(x) = psi'(x + 1) + 1/x^2, then the asymptotic
    series (error below 1e-11); scipy's zeta(2, x) is several times slower on big arrays."""
    shifted = x + 10.0
    head = sum(1.0 / (x + i) ** 2 for i in range(10))
    inv = 1.0 / shifted
    inv2 = inv * inv
    tail = inv + inv2 / 2 + inv * inv2 * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))
    return head + tail
