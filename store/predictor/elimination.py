"""Exact marginalisation of missing features: barren nodes, missing components, variable elimination.

Used by ``compiled`` for rows with missing values. Barren variables (missing, with
every descendant missing too) sum out to one and are skipped. The other missing
variables of a row fall into *components* (linked when they share a CPT's family), and
Σ over the missing variables of the product of CPTs is the product over components of
Σ over that component's variables of the CPTs whose family meets it; CPTs with no
missing variable are plain lookups. So a plan is built (and cached) per component, not
per row pattern, and rows with different patterns share it. Works for any DAG, not
only when the missing variables are leaves.

A plan holds no CPT data: it indexes one flat table of the network's log CPTs
(``LogTables``), which every plan of the network shares. Its working memory is bounded: rows
go in chunks (``MAX_CHUNK_CELLS``), and a component whose single row would need more than
``MAX_ROW_CELLS`` sums over some of its variables' states in turn (``conditioning``); one
whose work would still pass ``MAX_ROW_WORK`` is refused (``TooComplex``) before any work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bnserve.store.errors import TooComplex
from bnserve.store.model import Node

einsum: Any = np.einsum  # called in its sublist form, which numpy's type stubs do not describe
BATCH = 0  # einsum label of the row axis
MAX_CHUNK_CELLS = 1 << 22  # rows x working cells per row, per chunk: bounds the working memory (32 MiB)
MAX_ROW_CELLS = 1 << 22  # working cells of one row beyond which variables are conditioned on (32 MiB)
MAX_ROW_WORK = 1 << 28  # cells one row's elimination may work through, conditioning included; more is refused
KEPT_TAIL_CELLS = 1024  # a group keeps its factors' cell offsets up to this many (8 KiB)
OBJECT_BYTES = 1024  # Python objects beside the arrays, per group and step of a plan (measured with tracemalloc)
RESCALE_EVERY = 4  # products of factors <= 1 between rescales: no underflow unless entries < 1e-75


def ancestors(nodes: Sequence[Node], name: str) -> frozenset[str]:
    """The ancestors of node ``name`` (itself excluded): O(arcs)."""
    parents = {n.name: n.parents for n in nodes}
    stack, seen = list(parents[name]), set()
    while stack:
        v = stack.pop()
        if v not in seen:
            seen.add(v)
            stack.extend(parents[v])
    return frozenset(seen)


def descendant_matrix(m: int, parents: np.ndarray, starts: np.ndarray, children: np.ndarray) -> np.ndarray:
    """bool (m, m): [x, y] when y is a descendant of x, for a DAG over 0..m-1 whose arcs are
    ``children[starts[i]:starts[i + 1]]`` of each parent ``parents[i]`` (sorted). Built from the
    leaves up, one row per node: O(m²) bits, no Python structure of that size."""
    kids = {int(p): children[a:b] for p, a, b in zip(parents, starts, [*starts[1:], children.size])}
    below = np.zeros((m, m), dtype=bool)
    done = np.zeros(m, dtype=bool)
    for root in range(m):  # depth first, each node's row once all its children's rows are done
        stack = [root]
        while stack:
            node = stack[-1]
            if done[node]:
                stack.pop()
                continue
            todo = [int(c) for c in kids.get(node, ()) if not done[c]]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if node in kids:
                below[node, kids[node]] = True
                below[node] |= below[kids[node]].any(axis=0)
            done[node] = True
    return below


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


class LogTables:
    """Every node's log CPT in its own axis order (node, *parents), in one flat float64 array.

    One per network, shared by all its plans (which index it through ``table_layout``), so
    a plan copies no CPT data. Built when a row first needs elimination.
    """

    def __init__(self, nodes: Sequence[Node]):
        cpts = [np.asarray(n.cpt, dtype=np.float64).reshape(-1) for n in nodes]
        with np.errstate(divide="ignore"):
            self.table = np.log(np.concatenate(cpts)) if cpts else np.zeros(0)

    @property
    def nbytes(self) -> int:
        return self.table.nbytes


def table_layout(nodes: Sequence[Node]) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Node name -> (where its CPT starts in ``LogTables.table``, the stride of each family axis)."""
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    offset = 0
    for n in nodes:
        shape = np.shape(n.cpt)
        out[n.name] = offset, tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        offset += math.prod(shape)
    return out


class _Group:
    """The factors of one elimination whose free variables are the same: how a batch of rows
    picks each factor's slice from ``LogTables.table`` and sums them into one log factor.

    Per factor (row): ``offsets`` of its CPT; ``cols``/``strides`` of its observed family
    members (padded with stride 0); ``free``, the stride of each free variable in its
    CPT (every factor of a group has them all in its family); ``own``, the input column of a
    node outside the component that may be missing and barren in a row (-1 for the others),
    or None when there is none. Where each free cell sits in each factor's CPT (``_tails``)
    is kept when small (``KEPT_TAIL_CELLS``), else worked out per call: kept, it would be
    as large as the CPT slices it indexes.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        scope: Sequence[str],
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        component: frozenset[str],
        class_name: str,
        layout: Mapping[str, tuple[int, tuple[int, ...]]],
    ):
        self.shape = tuple(cards[v] for v in scope)
        self.size = math.prod(self.shape)
        families = [(n.name, *n.parents) for n in nodes]
        observed = [[i for i, v in enumerate(f) if v not in scope] for f in families]
        width = max(map(len, observed), default=0)
        self.cols = np.zeros((len(nodes), width), dtype=np.intp)
        self.strides = np.zeros((len(nodes), width), dtype=np.intp)
        self.offsets = np.array([layout[n.name][0] for n in nodes], dtype=np.intp)
        self.free = np.array(
            [[layout[n.name][1][f.index(v)] for v in scope] for n, f in zip(nodes, families)], dtype=np.intp
        ).reshape(len(nodes), len(scope))
        for k, (n, family, axes) in enumerate(zip(nodes, families, observed)):
            self.cols[k, : len(axes)] = [feature_index[family[i]] for i in axes]
            self.strides[k, : len(axes)] = [layout[n.name][1][i] for i in axes]
        own = np.array(
            [feature_index[n.name] if n.name not in component and n.name != class_name else -1 for n in nodes],
            dtype=np.intp,
        )
        self.own = own if (own >= 0).any() else None
        self._kept_tails = self._tails() if len(nodes) * self.size <= KEPT_TAIL_CELLS else None

    @property
    def nbytes(self) -> int:
        arrays = (self.cols, self.strides, self.offsets, self.free, self.own, self._kept_tails)
        return sum(a.nbytes for a in arrays if a is not None)

    def _tails(self) -> np.ndarray:
        """(factors, size): where each cell of the free variables sits in each factor's CPT."""
        nodes, ndim = self.offsets.size, len(self.shape)
        tail = np.zeros((nodes,) + (1,) * ndim, dtype=np.intp)
        for j, card in enumerate(self.shape):
            axis = np.arange(card, dtype=np.intp).reshape((1,) * (j + 1) + (card,) + (1,) * (ndim - j - 1))
            tail = tail + axis * self.free[:, j].reshape((nodes,) + (1,) * ndim)
        return tail.reshape(nodes, -1)

    def __call__(self, table: np.ndarray, codes: np.ndarray, clipped: np.ndarray) -> np.ndarray:
        """(rows, *shape) sum of the factors' log entries; a barren factor counts as log 1 = 0."""
        rows = codes.shape[0]
        base = self.offsets + (clipped[:, self.cols] * self.strides).sum(axis=-1)  # (rows, nodes)
        tails = self._kept_tails if self._kept_tails is not None else self._tails()
        values = table[base[:, :, None] + tails]  # (rows, nodes, size)
        if self.own is not None:
            values[(codes[:, self.own] < 0) & (self.own >= 0)] = 0.0
        return values.sum(axis=1).reshape(rows, *self.shape)


def _groups(
    nodes: Sequence[Node], class_name: str, component: frozenset[str], order: Mapping[str, int]
) -> dict[tuple[str, ...], list[Node]]:
    """The factors grouped by their free variables (the component's and the class), in ``order``."""
    groups: dict[tuple[str, ...], list[Node]] = {}
    for n in nodes:
        free = sorted((v for v in (n.name, *n.parents) if v in component or v == class_name), key=order.__getitem__)
        groups.setdefault(tuple(free), []).append(n)
    return groups


@dataclass(frozen=True)
class _Steps:
    """An elimination order as pairwise einsums: per step (input slots, their sublists, each
    product's sublist); ``final_slots``, whose scopes are () or (class,); ``row_cells``, an
    upper bound on the cells one row keeps at once (every group's gather, factor and step
    result, and two products of the largest size), which sizes the chunks."""

    steps: list[tuple[tuple[int, ...], list[list[int]], list[list[int]]]]
    n_slots: int
    final_slots: tuple[int, ...]
    row_cells: int


def _plan_steps(
    groups: Mapping[tuple[str, ...], Sequence[Node]],
    class_name: str,
    cards: Mapping[str, int],
    order: Mapping[str, int],
) -> _Steps:
    """Fix the elimination order (greedy min-size, ties by ``order``) and, per step, the
    pairwise einsums that multiply the factors holding the variable (pairwise: no einsum
    operand limit, and room to rescale) and sum it out with the last one."""
    scopes = list(groups)
    live = dict(enumerate(scopes))  # slot -> scope of the factor in it
    holders: dict[str, set[int]] = {}  # variable -> live slots whose scope holds it
    for k, scope in live.items():
        for v in scope:
            holders.setdefault(v, set()).add(k)
    next_slot = len(scopes)
    steps: list[tuple[tuple[int, ...], list[list[int]], list[list[int]]]] = []
    sizes = [math.prod(cards[v] for v in s) for s in scopes]
    largest = max(sizes, default=1)
    cells = sum(sizes) + max((2 * size * len(groups[s]) for s, size in zip(scopes, sizes)), default=0)

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
        steps.append((slots, subs, outs))
        cells += math.prod(cards[u] for u in result)
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
    return _Steps(steps, next_slot, tuple(live), cells + 2 * largest)


def conditioning(
    nodes: Sequence[Node],
    class_name: str,
    cards: Mapping[str, int],
    component: frozenset[str],
    order: Mapping[str, int],
) -> tuple[str, ...]:
    """The component's variables to sum over one state at a time, so that eliminating the
    rest needs at most ``MAX_ROW_CELLS`` per row: none when it already does, else chosen
    greedily, each the one that leaves the smallest elimination. Memory is traded for
    repeated work; ``TooComplex`` when one row's work would pass ``MAX_ROW_WORK``."""

    def row_cells(rest: frozenset[str]) -> int:
        return _plan_steps(_groups(nodes, class_name, rest, order), class_name, cards, order).row_cells

    chosen: list[str] = []
    rest = component
    cells = row_cells(rest)
    while rest and cells > MAX_ROW_CELLS and math.prod(cards[v] for v in chosen) * cells <= MAX_ROW_WORK:
        best = min(sorted(rest, key=order.__getitem__), key=lambda v: row_cells(rest - {v}))
        chosen.append(best)
        rest = rest - {best}
        cells = row_cells(rest)
    work = math.prod(cards[v] for v in chosen) * cells
    if work > MAX_ROW_WORK:
        raise TooComplex(
            f"the missing values of {', '.join(sorted(component, key=order.__getitem__))} are linked through "
            f"their CPTs: summing them out exactly would work through about {work:.1e} table cells for one row, more "
            f"than the {MAX_ROW_WORK:.1e} allowed; send values for some of them"
        )
    return tuple(chosen)


class Elimination:
    """Sums the missing variables out of a product of CPTs, for a batch of rows at once.

    Built once per missing component. Factors are grouped by their free variables (the
    component's and the class); each group (``_Group``) picks every factor's slice for a
    row's observed codes from the shared log table, so the group's product is a sum of
    logs. A factor whose own node is outside the component but missing in a row is barren
    there (any missing family member outside the component makes it so) and counts as 1
    for that row. The elimination order and every einsum's sublists are fixed here
    (``_plan_steps``). Factors are rescaled per row to a maximum of 1 (each group as it
    leaves log space, then after each step and every ``RESCALE_EVERY`` products within
    one) and the log of the scale is carried, so long products do not underflow.

    When one row would need more than ``MAX_ROW_CELLS``, the ``conditioning`` variables
    are set to each joint state in turn, the rest eliminated, and the results summed
    (log-sum-exp): the same exact sum in less memory and more time.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        class_name: str,
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        component: frozenset[str],
        order: Mapping[str, int],
        layout: Mapping[str, tuple[int, tuple[int, ...]]],
    ):
        self.n_classes = cards[class_name]
        condition = conditioning(nodes, class_name, cards, component, order)
        self._condition_cols = np.array([feature_index[v] for v in condition], dtype=np.intp)
        states = np.indices([cards[v] for v in condition], dtype=np.intp)  # (conditioned, *their cards)
        self._condition_states = states.reshape(len(condition), -1).T if condition else states.reshape(1, 0)
        rest = component.difference(condition)
        groups = _groups(nodes, class_name, rest, order)
        self._groups = [_Group(g, s, cards, feature_index, rest, class_name, layout) for s, g in groups.items()]
        self._steps = _plan_steps(groups, class_name, cards, order)
        self.row_cells = self._steps.row_cells
        self._chunk = max(1, MAX_CHUNK_CELLS // self.row_cells)

    @property
    def nbytes(self) -> int:
        """Its arrays, plus ``OBJECT_BYTES`` for the Python objects of itself, each group and each step."""
        arrays = sum(g.nbytes for g in self._groups) + self._condition_cols.nbytes + self._condition_states.nbytes
        return arrays + OBJECT_BYTES * (1 + len(self._groups) + len(self._steps.steps))

    def __call__(self, codes: np.ndarray, table: np.ndarray) -> np.ndarray:
        """log of the summed product, (rows, n_classes), for int codes (rows, n_features), -1 = missing,
        rows >= 1; ``table``: the network's ``LogTables.table``."""
        if self._condition_cols.size == 0:
            return self._chunks(codes, table)
        log = np.full((codes.shape[0], self.n_classes), -np.inf)
        codes = codes.copy()
        for states in self._condition_states:
            codes[:, self._condition_cols] = states
            log = np.logaddexp(log, self._chunks(codes, table))
        return log

    def _chunks(self, codes: np.ndarray, table: np.ndarray) -> np.ndarray:
        if codes.shape[0] <= self._chunk:
            return self._log_sum(codes, table)
        return np.concatenate(
            [self._log_sum(codes[i : i + self._chunk], table) for i in range(0, codes.shape[0], self._chunk)]
        )

    def _log_sum(self, codes: np.ndarray, table: np.ndarray) -> np.ndarray:
        rows = codes.shape[0]
        log_scale = np.zeros(rows)
        slots: list[Any] = [None] * self._steps.n_slots  # a factor per slot while it is live (einsum's sublists: ints)
        clipped = np.maximum(codes, 0)
        for k, group in enumerate(self._groups):
            log = group(table, codes, clipped).reshape(rows, -1)  # (rows, group size)
            peak = log.max(axis=1)
            peak = np.where(np.isfinite(peak), peak, 0.0)
            log_scale += peak
            slots[k] = np.exp(log - peak[:, None]).reshape(rows, *group.shape)
        k = len(self._groups)
        for inputs, subs, outs in self._steps.steps:
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
            for slot in self._steps.final_slots:
                log += np.log(slots[slot]).reshape(rows, -1)
        return log


def _rescale(factor: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    """Divide each row's slice by its maximum (left alone when all zero); add log(max) to log_scale."""
    rows = factor.shape[0]
    peak = factor.reshape(rows, -1).max(axis=1)
    peak = np.where(peak > 0, peak, 1.0)
    log_scale += np.log(peak)
    return factor / peak.reshape((rows,) + (1,) * (factor.ndim - 1))
