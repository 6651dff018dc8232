"""Exact marginalisation of missing features: barren nodes, missing components, variable elimination.

Used by ``compiled`` for rows with missing values. Barren variables (missing, with
every descendant missing too) sum out to one and are skipped. The other missing
variables of a row fall into *components* (linked when they share a CPT's family), and
Σ over the missing variables of the product of CPTs is the product over components of
Σ over that component's variables of the CPTs whose family meets it; CPTs with no
missing variable are plain lookups. So a plan is built (and cached) per component, not
per row pattern, and rows with different patterns share it. Works for any DAG, not
only when the missing variables are leaves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bnserve.store.model import Node
from bnserve.store.predictor.gather import LogGather

einsum: Any = np.einsum  # called in its sublist form, which numpy's type stubs do not describe
BATCH = 0  # einsum label of the row axis
MAX_CHUNK_CELLS = 1 << 22  # rows x largest factor per row, per chunk: bounds the working memory
RESCALE_EVERY = 4  # products of factors <= 1 between rescales: no underflow unless entries < 1e-75


def descendants(nodes: Sequence[Node]) -> dict[str, frozenset[str]]:
    """Each node's descendants (itself excluded)."""
    children: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        for p in n.parents:
            children[p].append(n.name)
    out: dict[str, frozenset[str]] = {}
    for n in nodes:
        stack, seen = list(children[n.name]), set()
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(children[v])
        out[n.name] = frozenset(seen)
    return out


def component_factors(nodes: Sequence[Node], component: frozenset[str]) -> list[Node]:
    """The CPTs to eliminate for one component of non-barren missing variables: those whose
    family meets it, in network order. They form one connected group (the component is
    connected through shared families), so either none of them involves the class and
    their sum is a constant, or the class is in the result."""
    return [n for n in nodes if not component.isdisjoint((n.name, *n.parents))]


def unique_rows(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, inverse) of a bool (rows, m) array; faster than np.unique(axis=0)."""
    if mask.shape[1] <= 62:
        keys = mask @ (np.int64(1) << np.arange(mask.shape[1], dtype=np.int64))
    else:
        packed = np.ascontiguousarray(np.packbits(mask, axis=1))
        keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return mask[first], inverse.reshape(-1)


class FamilyGraph:
    """Which variables share a CPT's family: the edges that link missing variables.

    ``src``/``dst``: directed edges over local variable indices 0..m-1, sorted by src;
    ``sources``/``starts``: each distinct source and where its run of edges begins.
    """

    def __init__(self, m: int, edges: Sequence[tuple[int, int]]):
        pairs = sorted(set(edges))
        self.src = np.array([a for a, _ in pairs], dtype=np.intp)
        self.dst = np.array([b for _, b in pairs], dtype=np.intp)
        self.sources, self.starts = np.unique(self.src, return_index=True)
        self._adjacent: list[list[int]] = [[] for _ in range(m)]
        for a, b in pairs:
            self._adjacent[a].append(b)

    def components_of(self, missing: Sequence[int]) -> list[list[int]]:
        """The components of one pattern's missing variables (local indices), each sorted;
        a plain graph search, cheaper than ``label_components`` for a single row."""
        todo = set(missing)
        out = []
        for start in missing:
            if start in todo:
                todo.discard(start)
                component, stack = [start], [start]
                while stack:
                    for v in self._adjacent[stack.pop()]:
                        if v in todo:
                            todo.discard(v)
                            component.append(v)
                            stack.append(v)
                out.append(sorted(component))
        return out

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.src, self.dst, self.sources, self.starts))

    def label_components(self, patterns: np.ndarray) -> np.ndarray:
        """Component labels of the missing variables of many patterns at once.

        patterns: bool (patterns, m), True = missing. Returns int (patterns, m): for a
        missing variable the smallest index in its component, ``m`` for an observed one.
        Min-label propagation with pointer jumping, vectorised over patterns.
        """
        n_patterns, m = patterns.shape
        labels = np.where(patterns, np.arange(m), m)
        if self.src.size == 0:
            return labels
        sentinel = np.full((n_patterns, 1), m)
        while True:
            extended = np.hstack([labels, sentinel])
            new = labels.copy()
            neighbours = np.minimum.reduceat(extended[:, self.dst], self.starts, axis=1)
            new[:, self.sources] = np.minimum(new[:, self.sources], neighbours)
            new = np.where(patterns, new, m)
            new = np.where(patterns, np.take_along_axis(np.hstack([new, sentinel]), new, axis=1), m)
            if np.array_equal(new, labels):
                return labels
            labels = new


class Elimination:
    """Sums the missing variables out of a product of CPTs, for a batch of rows at once.

    Built once per missing component. Factors are grouped by their free variables (the
    component's and the class); each group is one ``LogGather`` whose trailing axes are
    those variables, so a row's observed codes pick every factor's slice in one gather and
    the group's product is a sum of logs. A factor whose own node is outside the
    component but missing in a row is barren there (any missing family member outside the
    component makes it so) and counts as 1 for that row. The elimination order (greedy
    min-size, ties by ``order``) and every einsum's sublists are fixed here. Factors are
    rescaled per row to a maximum of 1 (each group as it leaves log space, then after
    each step and every ``RESCALE_EVERY`` products within one) and the log of the scale
    is carried, so long products do not underflow.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        class_name: str,
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        component: frozenset[str],
        order: Mapping[str, int],
    ):
        self.n_classes = cards[class_name]
        groups: dict[tuple[str, ...], list[Node]] = {}
        for n in nodes:
            free = sorted((v for v in (n.name, *n.parents) if v in component or v == class_name), key=order.__getitem__)
            groups.setdefault(tuple(free), []).append(n)
        scopes = list(groups)
        self._gathers = [LogGather([groups[s]], s, cards, feature_index) for s in scopes]
        self._shapes = [tuple(cards[v] for v in s) for s in scopes]
        own = [
            np.array(
                [feature_index[n.name] if n.name not in component and n.name != class_name else -1 for n in groups[s]],
                dtype=np.intp,
            )
            for s in scopes
        ]
        self._own = [o if (o >= 0).any() else None for o in own]  # column of a node that may be barren
        self._plan_steps(scopes, class_name, cards, order)

    def _plan_steps(
        self, scopes: list[tuple[str, ...]], class_name: str, cards: Mapping[str, int], order: Mapping[str, int]
    ) -> None:
        """Fix the elimination order and, per step, the pairwise einsums that multiply the
        factors holding the variable (pairwise: no einsum operand limit, and room to
        rescale) and sum it out with the last one."""
        live = dict(enumerate(scopes))  # slot -> scope of the factor in it
        holders: dict[str, set[int]] = {}  # variable -> live slots whose scope holds it
        for k, scope in live.items():
            for v in scope:
                holders.setdefault(v, set()).add(k)
        next_slot = len(scopes)
        self._steps: list[tuple[tuple[int, ...], list[list[int]], list[list[int]]]] = []
        largest = max((math.prod(cards[v] for v in s) for s in scopes), default=1)

        def cost(v: str) -> tuple[int, int]:  # size of the product that eliminating v builds
            return math.prod(cards[u] for u in {u for k in holders[v] for u in live[k]}), order[v]

        costs = {v: cost(v) for v in holders if v != class_name}
        while costs:
            var = min(costs, key=costs.__getitem__)
            del costs[var]
            slots = tuple(sorted(holders.pop(var)))
            union = sorted({u for k in slots for u in live[k]}, key=order.__getitem__)
            largest = max(largest, math.prod(cards[u] for u in union))
            label = {u: i + 1 for i, u in enumerate(union)}
            subs = [[BATCH, *(label[u] for u in live[k])] for k in slots]
            outs: list[list[int]] = []
            acc: set[str] = set(live[slots[0]])
            for k in slots[1:]:
                acc |= set(live[k])
                outs.append([BATCH, *(label[u] for u in union if u in acc)])
            result = tuple(u for u in union if u != var)
            if outs:
                outs[-1] = [BATCH, *(label[u] for u in result)]
            else:
                outs.append([BATCH, *(label[u] for u in result)])
            self._steps.append((slots, subs, outs))
            for k in slots:
                for u in live.pop(k):
                    if u != var:
                        holders[u].discard(k)
            live[next_slot] = result
            for u in result:
                holders[u].add(next_slot)
                if u in costs:
                    costs[u] = cost(u)
            next_slot += 1
        self._n_slots = next_slot
        self._final_slots = tuple(live)  # each scope is () or (class,)
        self._chunk = max(1, MAX_CHUNK_CELLS // largest)

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        """log of the summed product, (rows, n_classes), for int codes (rows, n_features), -1 = missing, rows >= 1."""
        if codes.shape[0] <= self._chunk:
            return self._log_sum(codes)
        return np.concatenate(
            [self._log_sum(codes[i : i + self._chunk]) for i in range(0, codes.shape[0], self._chunk)]
        )

    def _log_sum(self, codes: np.ndarray) -> np.ndarray:
        rows = codes.shape[0]
        log_scale = np.zeros(rows)
        slots: list[Any] = [None] * self._n_slots  # a factor per slot while it is live (einsum's sublists: ints)
        clipped = np.maximum(codes, 0)
        for k, (gather, shape, own) in enumerate(zip(self._gathers, self._shapes, self._own)):
            skip = None if own is None else (codes[:, own] < 0) & (own >= 0)
            log = gather(clipped, skip)[:, 0]  # (rows, prod(shape))
            peak = log.max(axis=1)
            peak = np.where(np.isfinite(peak), peak, 0.0)
            log_scale += peak
            slots[k] = np.exp(log - peak[:, None]).reshape(rows, *shape)
        k = len(self._gathers)
        for inputs, subs, outs in self._steps:
            acc, acc_sub = slots[inputs[0]], subs[0]
            if len(inputs) == 1:
                acc = einsum(acc, acc_sub, outs[0])
            for i, (slot, sub, out) in enumerate(zip(inputs[1:], subs[1:], outs), start=1):
                acc = einsum(acc, acc_sub, slots[slot], sub, out)
                acc_sub = out
                if i % RESCALE_EVERY == 0 and i < len(outs):
                    acc = _rescale(acc, log_scale)
            acc = _rescale(acc, log_scale)
            for slot in inputs:
                slots[slot] = None
            slots[k] = acc
            k += 1
        log = np.broadcast_to(log_scale[:, None], (rows, self.n_classes)).copy()
        with np.errstate(divide="ignore"):
            for slot in self._final_slots:
                log += np.log(slots[slot]).reshape(rows, -1)
        return log


def _rescale(factor: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    """Divide each row's slice by its maximum (left alone when all zero); add log(max) to log_scale."""
    rows = factor.shape[0]
    peak = factor.reshape(rows, -1).max(axis=1)
    peak = np.where(peak > 0, peak, 1.0)
    log_scale += np.log(peak)
    return factor / peak.reshape((rows,) + (1,) * (factor.ndim - 1))
