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
A network's tables are sampled together (``hdp_cpts``): their trees are independent, so each
depth of all of them is stacked and one step updates it, each table drawing from its own
generator in the order it would alone (the same CPTs as one table at a time, in the numpy
calls of one: 4.5x less time on wine's candidates).
Only nodes under which some data lie are sampled; a configuration never seen gets its
parent's distribution (its own posterior mean with no counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln

from bnserve.trainer.learners.axes import axis_last, last_axis_to

ROOT_CONCENTRATION = 2.0  # the root's, fixed; also every depth's starting value
CONCENTRATION_SHAPE, CONCENTRATION_RATE = 2.0, 1.0  # Gamma prior on each depth's concentration
MAX_CONCENTRATION = 4000.0
CONCENTRATION_EVERY = 5  # sweeps between concentration draws
WINDOW = 10  # a table count moves at most this far in one step
SPANS = (2, 4, 8, 2 * WINDOW + 1)  # the widths counts are drawn in, by how many values they may take
BUCKETED_ROWS = 2048  # fewer counts at once are drawn in one width: numpy calls cost more than columns
MAX_TABLES = 10000  # and stays at most this (as the paper's code), which bounds the cached rows
EXACT_STIRLING_MAX_N = 2048  # log S(n, t) from the recurrence up to here, saddle point beyond


def hdp_cpt(counts: np.ndarray, *, sweeps: int, rng: np.random.Generator) -> np.ndarray:
    """CPT (float64, axes as ``counts``: node, parent 1, ..., parent k) smoothed by an HDP whose
    levels are the parents in axis order: P(x) -> P(x | pa1) -> ... -> P(x | pa1..pak)."""
    return hdp_cpts([counts], sweeps=sweeps, rngs=[rng])[0]


def hdp_cpts(counts: Sequence[np.ndarray], *, sweeps: int, rngs: Sequence[np.random.Generator]) -> list[np.ndarray]:
    """``hdp_cpt`` of each table, each with its own generator, sampled together: the trees are
    independent, so one numpy step updates a level of all of them, and a network's sweeps cost
    the numpy calls of one table, not of each (the draws, and so the CPTs, are those of one
    table at a time)."""
    forest = _Forest([np.asarray(c) for c in counts])
    initial = forest.probabilities()
    if forest.sampled.any():
        burn_in = sweeps // 10
        total = [np.zeros_like(p) for p in initial]
        for sweep in range(sweeps):
            for level in range(forest.depth, 0, -1):
                forest.sample_tables(level, rngs)
            if (sweep + CONCENTRATION_EVERY // 2) % CONCENTRATION_EVERY == 0:
                for level in range(1, forest.depth + 1):
                    forest.sample_concentration(level, rngs)
            if sweep >= burn_in:
                for level, p in enumerate(forest.probabilities()):
                    total[level] += p
        mean = [p / (sweeps - burn_in) for p in total]
    return [forest.to_cpt(f, mean if forest.sampled[f] else initial) for f in range(len(forest.trees))]


def hdp_probabilities(counts: np.ndarray, tables: Sequence[np.ndarray], concentrations: Sequence[float]) -> np.ndarray:
    """The HDP's posterior mean given table counts and concentrations: the deterministic step
    the sampler averages. ``counts``: the data, axes (node, pa1..pak); ``tables[l-1]``: the
    table counts of depth l (l = 1..k), axes (node, pa1..pal); ``concentrations``: k + 1
    values, the root's first. With n(x) the counts of a node (its data at the leaves, the
    sum of its children's table counts inside), N their sum and c its depth's concentration,

        P(x | node) = (n(x) + c P(x | parent node)) / (N + c),  P(x | parent of root) = 1/|X|.
    """
    forest = _Forest([np.asarray(counts)])
    depth = forest.depth
    if len(tables) != depth or len(concentrations) != depth + 1:
        raise ValueError(f"hdp: {depth} table arrays and {depth + 1} concentrations expected")
    for level, t in enumerate(tables, start=1):
        forest.t[level] = _flat(np.asarray(t), forest.states).astype(np.int64)
    for level in range(depth - 1, -1, -1):
        forest.n[level] = forest.children_sum(level + 1, forest.t[level + 1])
    forest.concentrations[0] = np.asarray(concentrations, dtype=np.float64)
    return forest.to_cpt(0, forest.probabilities())


def _flat(array: np.ndarray, states: int) -> np.ndarray:
    """(node, pa1..pal) -> (configurations in C order, node)."""
    return axis_last(array, 0).reshape(-1, states)


@dataclass(frozen=True)
class _Table:
    """One CPT's tree: its shape, and its counts and starting table counts per depth (each
    (configurations, states); the children of configuration p at depth l are p * cards[l] + v
    at depth l + 1)."""

    shape: tuple[int, ...]
    n: list[np.ndarray]
    t: list[np.ndarray]

    @property
    def states(self) -> int:
        return self.shape[0]

    @property
    def cards(self) -> tuple[int, ...]:
        return self.shape[1:]

    @property
    def depth(self) -> int:
        return len(self.shape) - 1

    @staticmethod
    def of(counts: np.ndarray) -> _Table:
        counts = np.rint(np.asarray(counts, dtype=np.float64)).astype(np.int64)
        states, cards, depth = counts.shape[0], counts.shape[1:], counts.ndim - 1
        n: list[np.ndarray] = [np.zeros(0, np.int64)] * (depth + 1)
        t: list[np.ndarray] = [np.zeros(0, np.int64)] * (depth + 1)
        n[depth] = _flat(counts, states)
        # bottom up: a start satisfying 1 <= t <= n where n >= 1 (the paper's initialisation)
        for level in range(depth, 0, -1):
            t[level] = _initial_tables(n[level], ROOT_CONCENTRATION)
            n[level - 1] = t[level].reshape(-1, cards[level - 1], states).sum(axis=1)
        t[0] = (n[0] > 0).astype(np.int64)  # the root's base is fixed: one table per state seen
        return _Table(counts.shape, n, t)


class _Forest:
    """The trees of several CPTs, each depth's configurations of every tree stacked (trees in
    order, states padded with zeros to the widest), with per row its tree, its parent row one
    depth up and its last parent's value; one concentration per tree and depth."""

    def __init__(self, counts: Sequence[np.ndarray]) -> None:
        self.trees = trees = [_Table.of(c) for c in counts]
        self.states = max(tree.states for tree in trees)
        self.depth = max(tree.depth for tree in trees)
        levels = range(self.depth + 1)
        # a tree with nothing to sample keeps its start: no parents, one state or no data
        self.sampled = np.array([tree.depth > 0 and tree.states > 1 and tree.n[0].sum() > 0 for tree in trees])
        self.concentrations = np.full((len(trees), self.depth + 1), ROOT_CONCENTRATION)
        self.log_concentrations = np.full_like(self.concentrations, np.log(ROOT_CONCENTRATION))  # each as a scalar's
        self.start: list[np.ndarray] = []  # per depth, each tree's first row (-1: not that deep)
        self.tree_of, self.parent_of, self.value_of = [], [], []
        self.n, self.t, self.leaf = [], [], []
        for level in levels:
            deep = [f for f, tree in enumerate(trees) if tree.depth >= level]
            sizes = [len(trees[f].n[level]) for f in deep]
            starts = np.full(len(trees), -1, dtype=np.int64)
            starts[deep] = np.cumsum(sizes) - sizes
            self.start.append(starts)
            rows = [np.arange(size) for size in sizes]
            self.tree_of.append(np.repeat(np.array(deep, dtype=np.int64), sizes))
            card = [trees[f].cards[level - 1] if level else 1 for f in deep]
            up = [self.start[level - 1][f] if level else f for f in deep]  # the root's parent: its tree's base
            self.parent_of.append(np.concatenate([u + r // c for u, r, c in zip(up, rows, card)]))
            self.value_of.append(np.concatenate([r % c for r, c in zip(rows, card)]))
            self.n.append(self._stacked([trees[f].n[level] for f in deep]))
            self.t.append(self._stacked([trees[f].t[level] for f in deep]))
            self.leaf.append(np.isin(self.tree_of[level], [f for f in deep if trees[f].depth == level]))
        self.n_total = [n.sum(axis=1) for n in self.n]
        self.most = max((int(tree.n[-1].sum()) for tree in trees), default=0)  # no count, even a root's, is more
        self.small = self.most <= EXACT_STIRLING_MAX_N
        self._cache_leaf_rows()
        # the sampled configurations with data, split by their last parent's value (siblings apart)
        seen = [np.zeros(len(n), dtype=bool) for n in self.n]
        for level in range(self.depth, -1, -1):
            seen[level] |= self.leaf[level] & (self.n[level].sum(axis=1) > 0) & self.sampled[self.tree_of[level]]
            if level:
                seen[level - 1][self.parent_of[level][seen[level]]] = True
        self.seen = seen
        self.groups = [
            [
                np.flatnonzero(seen[level] & (self.value_of[level] == v))
                for v in range(int(self.value_of[level].max()) + 1)
            ]
            if level and len(seen[level])
            else []
            for level in levels
        ]
        # per depth, the seen rows (tree by tree) and the trees whose concentration is drawn there,
        # each with its run of those rows
        self.seen_rows = [np.flatnonzero(s) for s in seen]
        self.drawn: list[list[tuple[int, int, int]]] = []
        for level in levels:
            ends = np.searchsorted(self.tree_of[level][self.seen_rows[level]], np.arange(len(trees) + 1))
            self.drawn.append(
                [
                    (f, int(ends[f]), int(ends[f + 1]))
                    for f, tree in enumerate(trees)
                    if level and self.sampled[f] and tree.depth >= level
                ]
            )

    def _stacked(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        out = np.zeros((sum(len(a) for a in arrays), self.states), dtype=np.int64)
        row = 0
        for a in arrays:
            out[row : row + len(a), : a.shape[1]] = a
            row += len(a)
        return out

    def children_sum(self, level: int, t: np.ndarray) -> np.ndarray:
        """The sum of each row's children's ``t`` (rows of depth ``level``), by row of depth ``level`` - 1."""
        out = np.zeros((len(self.n[level - 1]), self.states), dtype=np.int64)
        np.add.at(out, self.parent_of[level], t)
        return out

    def sample_tables(self, level: int, rngs: Sequence[np.random.Generator]) -> None:
        """One Gibbs step for every table count of depth ``level`` (>= 1), given the rest; each
        tree draws from its own generator, in the order it would alone. A count's candidates
        are the values its window allows (``_allowed``); counts are drawn in buckets by how
        many there are (``SPANS``), so a few large counts do not widen every row to the window."""
        n, t, parent_n, parent_t = self.n[level], self.t[level], self.n[level - 1], self.t[level - 1]
        parent_total = self.n_total[level - 1]
        log_cs = self.log_concentrations[:, level]
        c_parents = self.concentrations[:, level - 1]
        steps = [(nodes, np.nonzero(n[nodes] >= 2)) for nodes in self.groups[level]]  # n = 0 or 1 forces t = n
        uniforms = self._uniforms(level, [nodes[node_of] for nodes, (node_of, _) in steps], rngs)
        for (nodes, (node_of, x)), r in zip(steps, uniforms):
            if node_of.size == 0:
                continue
            at = nodes[node_of]
            parents = self.parent_of[level][at]
            tree = self.tree_of[level][at]
            n_x, t_x = n[at, x], t[at, x]
            np_x, pt_x = parent_n[parents, x], parent_t[parents, x]
            first, spans = _allowed(n_x, t_x, np_x, pt_x)
            new = t_x.copy()  # a count with one allowed value keeps it
            lower = 1
            for upper in SPANS if len(at) >= BUCKETED_ROWS else (max(2, int(spans.max())),):
                rows = np.flatnonzero((spans > lower) & (spans <= upper))
                lower = upper
                if rows.size == 0:
                    continue
                f = tree[rows]
                new[rows] = self._draw(
                    level, at[rows], x[rows], n_x[rows], t_x[rows], np_x[rows], pt_x[rows],
                    first[rows], spans[rows], upper, log_cs[f][:, None], c_parents[f][:, None],
                    parent_total[parents[rows]], r[rows],
                )  # fmt: skip
            delta = new - t_x
            t[at, x] = new
            parent_n[parents, x] += delta  # one child per parent in a group: (parent, x) pairs are distinct
            np.add.at(parent_total, parents, delta)

    def _uniforms(
        self, level: int, steps: Sequence[np.ndarray], rngs: Sequence[np.random.Generator]
    ) -> list[np.ndarray]:
        """A uniform for each row of each step (rows tree by tree), each tree's in the order its
        steps use them, drawn by one call per tree: a generator's n draws are its first n."""
        trees = [self.tree_of[level][rows] for rows in steps]
        order = np.concatenate([np.zeros(0, np.int64), *trees])
        by_tree = np.argsort(order, kind="stable")  # each tree's rows in the order they are used
        sizes = np.bincount(order, minlength=len(rngs)).tolist()
        drawn = np.concatenate([np.zeros(0), *(rngs[f].random(k) for f, k in enumerate(sizes) if k)])
        r = np.empty(len(order))
        r[by_tree] = drawn
        return np.split(r, np.cumsum([len(rows) for rows in steps])[:-1])

    def _draw(
        self,
        level: int,
        at: np.ndarray,
        x: np.ndarray,
        n_x: np.ndarray,
        t_x: np.ndarray,
        np_x: np.ndarray,
        pt_x: np.ndarray,
        first: np.ndarray,
        spans: np.ndarray,
        width: int,
        log_c: np.ndarray,
        c_parent: np.ndarray,
        parent_total: np.ndarray,
        r: np.ndarray,
    ) -> np.ndarray:
        """Each row's new table count among its ``spans`` allowed values from ``first`` on
        (``width`` columns, those past a row's span not allowed), by the uniform draw ``r``.
        Columns no row allows add exact zeros to the cumulative sums, so the draw is the one
        the whole window gives."""
        candidates = first[:, None] + np.arange(width)
        allowed = np.arange(width) < spans[:, None]
        parent_candidates = np_x[:, None] - t_x[:, None] + candidates
        safe = np.where(allowed, candidates, 1)
        np_safe = np.where(allowed, parent_candidates, np.maximum(pt_x, 1)[:, None])
        if self.small:  # every count within the exact table: index it directly
            table = _exact_log_stirling(self.most)
            stirling = table[n_x[:, None], safe] + table[np_safe, pt_x[:, None]]
        else:
            stirling = self._log_stirling_own(level, at, x, n_x, safe) + log_stirling(
                np_safe, np.broadcast_to(pt_x[:, None], safe.shape)
            )
        log_p = stirling + safe * log_c - gammaln(c_parent + (parent_total - t_x)[:, None] + safe)
        log_p = np.where(allowed, log_p, -np.inf)
        log_p -= log_p.max(axis=1, keepdims=True)
        cumulative = np.cumsum(np.exp(log_p), axis=1)
        chosen = (cumulative < (r * cumulative[:, -1])[:, None]).sum(axis=1)
        return candidates[np.arange(len(at)), chosen]

    def _cache_leaf_rows(self) -> None:
        """log S(n, 1..min(n, MAX_TABLES)) once for each leaf count past the exact table: the
        leaves' counts never change, and the saddle point is the costly part of a sweep."""
        self.leaf_offset, chunks, used = [], [], 0
        for level, n in enumerate(self.n):
            big = (n > EXACT_STIRLING_MAX_N) & self.leaf[level][:, None]
            lengths = np.minimum(n[big], MAX_TABLES)
            first = np.cumsum(lengths) - lengths  # each count's row within this depth's chunk
            offset = np.full(n.shape, -1, dtype=np.int64)
            offset[big] = used + first
            rows = np.repeat(n[big], lengths)
            chunks.append(log_stirling(rows, np.arange(rows.size) - np.repeat(first, lengths) + 1))
            self.leaf_offset.append(offset)
            used += rows.size
        self.leaf_rows = np.concatenate(chunks)

    def _log_stirling_own(
        self, level: int, at: np.ndarray, x: np.ndarray, n_x: np.ndarray, t: np.ndarray
    ) -> np.ndarray:
        offset = self.leaf_offset[level][at, x]
        cached = offset >= 0
        if not cached.any():
            return log_stirling(np.broadcast_to(n_x[:, None], t.shape), t)
        out = np.empty(t.shape)
        out[~cached] = log_stirling(np.broadcast_to(n_x[~cached][:, None], t[~cached].shape), t[~cached])
        out[cached] = self.leaf_rows[offset[cached][:, None] + t[cached] - 1]
        return out

    def sample_concentration(self, level: int, rngs: Sequence[np.random.Generator]) -> None:
        """Du's auxiliary-variable draw of the concentration each tree shares at depth ``level``
        (the sums of every tree at once; only the draws tree by tree)."""
        rows = self.seen_rows[level]
        totals = self.n[level][rows].sum(axis=1).astype(np.float64)
        tables = np.concatenate([[0], np.cumsum(self.t[level][rows].sum(axis=1))]).tolist()
        for f, a, b in self.drawn[level]:
            q = np.maximum(rngs[f].beta(self.concentrations[f, level], totals[a:b]), 1e-75)
            rate = CONCENTRATION_RATE - np.log(q).sum()
            shape = CONCENTRATION_SHAPE + (tables[b] - tables[a])
            self.concentrations[f, level] = min(MAX_CONCENTRATION, rngs[f].gamma(shape, 1.0 / rate))
            self.log_concentrations[f, level] = np.log(self.concentrations[f, level])

    def probabilities(self) -> list[np.ndarray]:
        """Each depth's P(x | configuration), (rows, states), top down; a tree's CPT is its leaves'."""
        states = np.array([tree.states for tree in self.trees])
        p = np.where(np.arange(self.states) < states[:, None], 1.0 / states[:, None], 0.0)  # the root's base
        out = []
        for level in range(self.depth + 1):
            n = self.n[level].astype(np.float64)
            c = self.concentrations[self.tree_of[level], level][:, None]
            base = p[self.parent_of[level]]
            p = (n + c * base) / (n.sum(axis=1, keepdims=True) + c)
            out.append(p)
        return out

    def to_cpt(self, f: int, levels: Sequence[np.ndarray]) -> np.ndarray:
        tree = self.trees[f]
        start = self.start[tree.depth][f]
        leaves = levels[tree.depth][start : start + len(tree.n[tree.depth]), : tree.states]
        cpt = last_axis_to(leaves.reshape(*tree.cards, tree.states), 0)
        return np.ascontiguousarray(cpt / cpt.sum(axis=0, keepdims=True))


def _allowed(n_x: np.ndarray, t_x: np.ndarray, np_x: np.ndarray, pt_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first value a table count may take in one step and how many it may take (a run):
    within ``WINDOW`` of its value, 1 to min(n, ``MAX_TABLES``), and its parent's count n never
    below the parent's table count."""
    first = np.maximum(np.maximum(1, t_x - WINDOW), pt_x - np_x + t_x)
    last = np.minimum(np.minimum(n_x, MAX_TABLES), t_x + WINDOW)
    return first, last - first + 1


def _initial_tables(n: np.ndarray, c: float) -> np.ndarray:
    """t = n for n <= 1, else about the expected number of tables, c (psi(c + n) - psi(c))."""
    expected = np.floor(c * (digamma(c + n) - digamma(c))).astype(np.int64)
    return np.where(n <= 1, n, np.maximum(1, expected))


_STIRLING = [np.zeros((1, 1))]  # the exact table made so far: log S(0, 0) = 0


def _exact_log_stirling(n_max: int = EXACT_STIRLING_MAX_N) -> np.ndarray:
    """log S(n, t) for n, t <= ``n_max`` at least (at most EXACT_STIRLING_MAX_N) by S(n+1, t) =
    S(n, t-1) + n S(n, t). Made as large as asked, in powers of two, and kept: a row depends on
    the row before only, so a smaller table holds the same values, and a set of a few hundred
    rows costs a sixteenth of the whole table's 0.065 s and 34 MB (once in each worker)."""
    if _STIRLING[0].shape[0] > n_max:
        return _STIRLING[0]
    size = min(EXACT_STIRLING_MAX_N + 1, max(64, 1 << n_max.bit_length()))
    table = np.full((size, size), -np.inf)
    table[0, 0] = 0.0
    for n in range(size - 1):
        table[n + 1, 1:] = np.logaddexp(table[n, :-1], np.log(n) + table[n, 1:]) if n else table[n, :-1]
    _STIRLING[0] = table
    return table


def log_stirling(n: np.ndarray, t: np.ndarray) -> np.ndarray:
    """log of the unsigned Stirling number of the first kind S(n, t) (-inf where S = 0):
    exact for small n, else exact at t in {1, n-1, n} and the saddle point of the generating
    function (x)_n = sum_t S(n, t) x^t in between (log error below 0.09, smooth in t)."""
    n, t = np.asarray(n, dtype=np.int64), np.asarray(t, dtype=np.int64)
    small = n <= EXACT_STIRLING_MAX_N
    exact = _exact_log_stirling(min(int(max(n.max(initial=0), t.max(initial=0))), EXACT_STIRLING_MAX_N))
    if small.all():
        return exact[n, t]
    out = np.empty(np.broadcast(n, t).shape)
    n, t = np.broadcast_to(n, out.shape), np.broadcast_to(t, out.shape)
    out[small] = exact[n[small], t[small]]
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
