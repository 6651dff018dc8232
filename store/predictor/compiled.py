"""Compiled prediction: P(class | observed features) for any model of the contract.

One implementation for the trainer's evaluation and the server. ``compile_model`` turns
every network into one flat log-probability table (``gather``) once;
``CompiledModel.predict_proba`` then costs one fused gather and a sum per batch when the
class's Markov blanket is observed. Rows with missing values take the same gather for the
factors they observe, plus exact marginalisation (``elimination``) of the rest.

Combinations (``bnserve.store.model``):
- ``single``: the network's posterior.
- ``mean_posterior``: mean of the networks' posteriors. Each network needs P(c, x_obs)
  only up to a per-row constant, so only Markov-blanket factors are compiled.
- ``mean_joint``: P(c, x_obs) is the mean over networks of each network's *exact* joint,
  so every non-barren factor is kept (including those that do not involve the class):
  a per-network constant would weight the networks differently and change the answer.
- ``product_joint``: P(c | x_obs) is proportional to the product over networks of each
  network's joint (log-linear pooling): the sum of their log joints, each needed only up
  to a per-row constant, so only Markov-blanket factors are compiled, as for one network.

A feature that is not a node of a network is ignored by that network. A row whose every
class has probability 0 (possible only with zero CPT entries; trained CPTs are smoothed)
gets the uniform distribution rather than NaN; for ``mean_posterior`` this holds per
network, for ``mean_joint`` for the mean joint, for ``product_joint`` for the product.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Mapping

import numpy as np

from bnserve.store.errors import InvalidInput, TooComplex
from bnserve.store.model import MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT, SINGLE, Model, Network, Variable
from bnserve.store.model.markers import recorded_markers
from bnserve.store.predictor.elimination import (
    Elimination,
    FamilyGraph,
    LogTables,
    ancestors,
    component_factors,
    descendant_matrix,
    table_layout,
    unique_rows,
)
from bnserve.store.predictor.gather import LogGather
from bnserve.store.predictor.plans import PlanCache, PlanNotReady, builds_allowed

_NETWORK_KEYS = itertools.count()  # a compiled network's key in a PlanCache that many models share
DENSE_DESCENDANTS = 1024  # features: up to this many a network keeps its descendant relation dense (4 MiB at most)


class ComponentPlan:
    """Sum over one missing component of the CPTs that meet it: (rows, n_classes) log factor.

    Holds index arrays only; the log CPTs are the network's ``LogTables``, passed per call.
    """

    def __init__(
        self,
        network: Network,
        class_name: str,
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        component: frozenset[str],
        layout: Mapping[str, tuple[int, tuple[int, ...]]],
    ):
        nodes = component_factors(network.nodes, component)
        order = {n.name: i for i, n in enumerate(network.nodes)}
        self.component = component
        self.eliminated_nodes = tuple(n.name for n in nodes)
        self._elimination = Elimination(nodes, class_name, cards, feature_index, component, order, layout)

    @property
    def nbytes(self) -> int:
        return self._elimination.nbytes

    def __call__(self, codes: np.ndarray, table: np.ndarray) -> np.ndarray:
        """(rows, n_classes) log factor; codes (rows, n_features), -1 = missing; table: ``LogTables.table``."""
        return self._elimination(codes, table)


class CompiledNetwork:
    """One network's fast-path node list and what its missing-value path needs.

    ``fast_nodes``: the nodes summed on the fast path (the class and its children; every
    node when ``exact``); ``relevant``: the features they read (the class's Markov blanket;
    all when ``exact``). A row with missing values still takes the fast-path entries of
    the nodes whose family is observed; each component of its non-barren missing
    variables that holds a relevant feature adds an eliminated factor (``ComponentPlan``,
    kept per component in ``plans``, as is the ``LogTables`` they all read); the other
    components are constant in the class.
    """

    def __init__(
        self,
        network: Network,
        class_name: str,
        cards: Mapping[str, int],
        feature_index: Mapping[str, int],
        exact: bool,
        plans: PlanCache,
    ):
        self.network = network
        self.plans = plans
        self._key = next(_NETWORK_KEYS)
        self.exact = exact
        self._class_name = class_name
        self._cards = cards
        self._feature_index = feature_index
        fast = [n for n in network.nodes if exact or n.name == class_name or class_name in n.parents]
        self.fast = tuple(fast)
        self.fast_nodes = tuple(n.name for n in fast)
        self.feature_names = tuple(n.name for n in network.nodes if n.name != class_name)
        self.feature_cols = np.array([feature_index[v] for v in self.feature_names], dtype=np.intp)
        blanket = {v for n in fast for v in (n.name, *n.parents) if v != class_name}
        self.relevant = np.array([v in blanket for v in self.feature_names], dtype=bool)

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays, the missing-value relations and ``_below_t`` (float32, features
        squared) counted built or not (the relations are built to count them)."""
        relations = self._relations
        dense = 4 * len(self.feature_names) ** 2 if relations.dense else 0
        return self.feature_cols.nbytes + self.relevant.nbytes + relations.nbytes + dense

    @functools.cached_property
    def _relations(self) -> Relations:
        """What finding a row's barren features and components needs, built at first need, not
        at compile: only rows with missing values read it, and it was a quarter of compiling a
        thousand models at a server's start."""
        return Relations(self.network, self._class_name, self.feature_names)

    def _relations_built(self) -> Relations:
        """``_relations``, which the event loop does not build (O(arcs): work for the pool)."""
        if "_relations" not in self.__dict__ and not builds_allowed():
            raise PlanNotReady((self._key, "relations"))
        return self._relations

    @functools.cached_property
    def _below_t(self) -> np.ndarray | None:
        """float32 (m, m): [y, x] when feature y is a descendant of x; None past DENSE_DESCENDANTS
        features or without arcs between features. Built at first need, not at compile: only rows
        with missing values read it, and a server compiling a thousand models spent a fifth of
        its compile here."""
        relations = self._relations_built()
        if not relations.dense:
            return None
        if not builds_allowed():  # the event loop: O(features x arcs) is work for the pool
            raise PlanNotReady((self._key, "descendants"))
        below = descendant_matrix(
            len(self.feature_names), relations.arc_parents, relations.arc_starts, relations.arc_children
        )
        return below.T.astype(np.float32)

    @functools.cached_property
    def _layout(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        """``table_layout`` of its nodes, which only the missing-value plans read: built with the first."""
        return table_layout(self.network.nodes)

    def plan(self, component: bytes) -> ComponentPlan:
        """The plan of one component (a bool mask over ``feature_names``, as bytes), from ``plans``."""
        return self.plans.get((self._key, component), lambda: self._build_plan(component))

    def _build_plan(self, component: bytes) -> ComponentPlan:
        flags = np.frombuffer(component, dtype=bool)
        members = frozenset(v for v, m in zip(self.feature_names, flags) if m)
        return ComponentPlan(self.network, self._class_name, self._cards, self._feature_index, members, self._layout)

    def add_missing(self, log: np.ndarray, codes: np.ndarray, missing: np.ndarray) -> None:
        """Add every relevant missing component's log factor to ``log`` (rows, n_classes) in place.

        codes: int (rows, n_features), -1 = missing; missing: ``codes < 0``.
        """
        local = missing[:, self.feature_cols]
        live = local & ~self._barren(local)
        rows = np.flatnonzero(live[:, self.relevant].any(axis=1))
        if rows.size == 0:
            return
        table = self.plans.get((self._key, None), lambda: LogTables(self.network.nodes)).table
        for component, these in self._row_components(live[rows], rows):
            try:
                plan = self.plan(component.tobytes())
            except TooComplex as exc:
                raise TooComplex(f"row {int(these[0])}: {exc.message}") from None
            log[these] += plan(codes[these], table)

    def _barren(self, missing: np.ndarray) -> np.ndarray:
        """bool (rows, m): the barren features of each row of ``missing`` (rows, m), those
        missing, not an ancestor of the class, and with no observed descendant.

        Up to DENSE_DESCENDANTS features, one product with the descendant matrix. Beyond, no
        (m, m) array: from the missing non-ancestors down, a feature with a child that is not
        barren is not barren either, one gather over the arcs per level of the longest chain
        of missing features.
        """
        relations = self._relations_built()
        barren = missing & ~relations.above_class
        if relations.arc_children.size == 0:
            return barren
        if self._below_t is not None:
            return barren & ~(((~missing).astype(np.float32) @ self._below_t) > 0)
        while True:
            child_kept = np.logical_or.reduceat(~barren[:, relations.arc_children], relations.arc_starts, axis=1)
            lost = barren[:, relations.arc_parents] & child_kept
            if not lost.any():
                return barren
            barren[:, relations.arc_parents] &= ~child_kept

    def _row_components(self, live: np.ndarray, rows: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(component as a bool mask over the network's features, the rows that have it), for
        each distinct relevant component of the rows' non-barren missing variables ``live`` (rows, m)."""
        m = live.shape[1]
        graph = self._relations_built().graph
        if rows.size == 1:
            for members in graph.components_of(np.flatnonzero(live[0]).tolist()):
                component = np.zeros(m, dtype=bool)
                component[members] = True
                if component[self.relevant].any():
                    yield component, rows
            return
        patterns, group = unique_rows(live)
        labels = graph.label_components(patterns)
        pattern_of, root = np.nonzero(labels == np.arange(m))
        members = labels[pattern_of] == root[:, None]  # (pattern components, m)
        wanted = members[:, self.relevant].any(axis=1)
        pattern_of, members = pattern_of[wanted], members[wanted]
        components, component_of = unique_rows(members)
        # expand (pattern, component) pairs to (row, component) pairs, grouped by component
        order = np.argsort(group, kind="stable")
        counts = np.bincount(group, minlength=patterns.shape[0])
        starts = np.cumsum(counts) - counts
        per_pair = counts[pattern_of]
        first = np.repeat(starts[pattern_of] - (np.cumsum(per_pair) - per_pair), per_pair)
        pair_rows = rows[order[first + np.arange(per_pair.sum())]]
        pair_component = np.repeat(component_of, per_pair)
        by_component = np.argsort(pair_component, kind="stable")
        pair_rows = pair_rows[by_component]
        bounds = np.searchsorted(pair_component[by_component], np.arange(components.shape[0] + 1))
        for k, component in enumerate(components):
            yield component, pair_rows[bounds[k] : bounds[k + 1]]


class Relations:
    """A network's relations between features that its rows with missing values read:
    ``above_class[x]``, feature x is an ancestor of the class; the arcs between features,
    sorted by parent (``arc_parents``/``arc_starts`` into ``arc_children``); ``dense``, whether
    the descendant matrix is kept (``DENSE_DESCENDANTS``); and the ``graph`` of features that
    share a CPT's family. Features are indexed as in ``feature_names``."""

    def __init__(self, network: Network, class_name: str, feature_names: tuple[str, ...]):
        local = {v: i for i, v in enumerate(feature_names)}
        above = ancestors(network.nodes, class_name)
        self.above_class = np.array([v in above for v in feature_names], dtype=bool)
        arcs = sorted(
            (local[p], local[n.name]) for n in network.nodes if n.name in local for p in n.parents if p in local
        )
        self.arc_children = np.array([c for _, c in arcs], dtype=np.intp)
        self.arc_parents, self.arc_starts = np.unique(np.array([p for p, _ in arcs], dtype=np.intp), return_index=True)
        self.dense = bool(arcs) and len(local) <= DENSE_DESCENDANTS
        self.graph = FamilyGraph(
            len(local),
            [
                (local[a], local[b])
                for n in network.nodes
                for a in (n.name, *n.parents)
                for b in (n.name, *n.parents)
                if a != b and class_name not in (a, b)
            ],
        )

    @property
    def nbytes(self) -> int:
        return self.above_class.nbytes + self.arc_children.nbytes + self.arc_parents.nbytes + self.graph.nbytes


class CompiledModel:
    """A model ready to predict: flat tables per network plus the combination rule.

    ``classes`` is the output column order; ``features`` (and ``feature_index``) the input
    column order, ``model.features`` reading the missing markers the model records
    (``markers.recorded_markers``: "NA" in a request is missing where the training file's
    "NA" was). ``nbytes`` counts the compiled arrays; what the
    missing-value path builds lazily (per missing component) is kept in ``plans``, a
    ``PlanCache`` bounded in bytes, its own or one shared with other models. ``dtype`` is
    the fast-path table's (``compile_model``).
    """

    def __init__(self, model: Model, dtype: np.dtype | type = np.float64, plans: PlanCache | None = None):
        class_var = model.class_variable
        self.classes: tuple[str, ...] = class_var.states
        markers = recorded_markers(model.metadata)
        self.features: tuple[Variable, ...] = tuple(v.with_markers(markers) for v in model.features)
        self.feature_index: Mapping[str, int] = {v.name: i for i, v in enumerate(self.features)}
        self.cardinalities = np.array([v.cardinality for v in self.features], dtype=np.intp)
        # where a feature has a missing state (--missing state), a missing value (-1) is that state
        missing_codes = np.array([v.missing_code for v in self.features], dtype=np.intp)
        self._missing_codes = missing_codes if (missing_codes >= 0).any() else None
        self.combination = model.combination
        cards = {v.name: v.cardinality for v in model.variables}
        exact = model.combination == MEAN_JOINT
        self.plans = PlanCache() if plans is None else plans
        self.networks = tuple(
            CompiledNetwork(net, class_var.name, cards, self.feature_index, exact, self.plans) for net in model.networks
        )
        self.dtype = np.dtype(dtype)
        self._gather = LogGather(
            [net.fast for net in self.networks], [class_var.name], cards, self.feature_index, self.dtype
        )

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes of its compiled arrays (its networks' missing-value relations built to count them)."""
        return self._gather.nbytes + self.cardinalities.nbytes + sum(net.nbytes for net in self.networks)

    def network_log_joints(self, codes: np.ndarray) -> np.ndarray:
        """(rows, networks, n_classes): each network's log P(c, x_obs); exact for mean_joint,
        otherwise up to a constant per row and network."""
        if codes.size == 0 or codes.min() >= 0:  # one call, no mask, on the fast path
            return self._gather(codes)
        if self._missing_codes is not None:
            codes = np.where(codes < 0, self._missing_codes, codes)
            if codes.min() >= 0:
                return self._gather(codes)
        missing = codes < 0
        log = self._gather(np.maximum(codes, 0), skip=self._gather.nodes_reading(missing))
        for j, net in enumerate(self.networks):
            net.add_missing(log[:, j], codes, missing)
        return log

    def predict_log_joint(self, codes: np.ndarray) -> np.ndarray:
        """(rows, n_classes) log scores whose softmax is the posterior.

        ``single``: log P(c, x_obs) up to a constant per row; ``mean_joint``: exactly the
        log of the mean joint; ``product_joint``: the sum of the networks' log joints, up to
        a constant per row. Undefined for ``mean_posterior``.
        """
        if self.combination == MEAN_POSTERIOR:
            raise InvalidInput("predict_log_joint is undefined for combination 'mean_posterior'")
        log = self.network_log_joints(codes)
        if self.combination == SINGLE:
            return log[:, 0]
        if self.combination == PRODUCT_JOINT:
            return log.sum(axis=1)
        return _logsumexp(log, axis=1) - math.log(log.shape[1])

    def predict_proba(self, codes: np.ndarray) -> np.ndarray:
        """float64 (rows, n_classes), rows sum to 1; codes int (rows, n_features), -1 = missing."""
        if codes.shape[0] == 0:
            return np.empty((0, len(self.classes)))
        if self.combination == MEAN_POSTERIOR:
            return _normalise(self.network_log_joints(codes)).mean(axis=1)
        return _normalise(self.predict_log_joint(codes))

    def predict_log_proba(self, codes: np.ndarray) -> np.ndarray:
        """log ``predict_proba``, computed in log space: finite where a probability is too
        small for a float64 (the log of ``predict_proba`` would be -inf there)."""
        if codes.shape[0] == 0:
            return np.empty((0, len(self.classes)))
        if self.combination == MEAN_POSTERIOR:
            per_network = _log_normalise(self.network_log_joints(codes))
            return _logsumexp(per_network, axis=1) - math.log(per_network.shape[1])
        return _log_normalise(self.predict_log_joint(codes))


TABLE_PRECISION = "table_precision"  # the metadata key: {"dtype": ..., and the check behind it}
TABLE_DTYPES: dict[str, np.dtype] = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32)}


def compile_model(
    model: Model, *, dtype: np.dtype | type | str | None = None, plans: PlanCache | None = None
) -> CompiledModel:
    """Compile a (validated) model once; the result is immutable apart from its plan cache.

    ``plans``: where its missing-value plans are kept (``PlanCache``); None gives it its own,
    of the default budget.

    ``dtype``: the fast-path log table's; None takes the model's own choice, its metadata's
    ``table_precision.dtype`` (``trainer fit --precision``), float64 when it makes none.
    float32 halves the table and rounds each log entry to about 6e-8 relative (sums are
    still accumulated in float64, and missing values are still eliminated in float64);
    ``float32_error`` measures what that does to the posteriors.
    """
    if dtype is None:
        chosen = str((model.metadata.get(TABLE_PRECISION) or {}).get("dtype", "float64"))
        if chosen not in TABLE_DTYPES:
            raise InvalidInput(
                f"metadata {TABLE_PRECISION}.dtype must be one of {', '.join(TABLE_DTYPES)}, got {chosen!r}"
            )
        dtype = TABLE_DTYPES[chosen]
    table_dtype = np.dtype(dtype)
    if table_dtype not in TABLE_DTYPES.values():
        raise InvalidInput(f"compiled tables are float64 or float32, not {table_dtype}")
    return CompiledModel(model, table_dtype, plans)


def check_codes(compiled: CompiledModel, codes: np.ndarray) -> np.ndarray:
    """Validate coded input at the boundary: 2-D integer (rows, n_features), each code in [-1, card).

    Returns the codes as an intp array; raises InvalidInput naming the offending feature.
    """
    arr = np.asarray(codes)
    n = len(compiled.features)
    if arr.ndim != 2:
        raise InvalidInput(f"codes must be a 2-D array (rows, {n} features), got {arr.ndim}-D shape {arr.shape}")
    if arr.shape[1] != n:
        raise InvalidInput(
            f"codes have {arr.shape[1]} columns, but the model expects {n} features "
            f"({', '.join(v.name for v in compiled.features)})"
        )
    if arr.dtype.kind not in "iu":
        raise InvalidInput(f"codes must be integers, got dtype {arr.dtype}")
    bad = (arr < -1) | (arr >= compiled.cardinalities)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        var = compiled.features[col]
        raise InvalidInput(
            f"feature {var.name!r} has code {int(arr[row, col])} in row {row}; "
            f"allowed codes are -1 (missing) to {var.cardinality - 1}"
        )
    return arr.astype(np.intp, copy=False)


def _logsumexp(log: np.ndarray, axis: int) -> np.ndarray:
    """Stable log(sum(exp(log))) along ``axis``; -inf where every term is -inf."""
    peak = np.max(log, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(log - peak).sum(axis=axis)) + np.squeeze(peak, axis=axis)


def _log_normalise(log: np.ndarray) -> np.ndarray:
    """log of ``_normalise(log)`` without leaving log space: uniform where every entry is -inf."""
    impossible = ~np.isfinite(log.max(axis=-1, keepdims=True))
    log = np.where(impossible, 0.0, log)
    return log - _logsumexp(log, axis=-1)[..., None]


def _normalise(log: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; uniform where every entry is -inf."""
    peak = log.max(axis=-1, keepdims=True)
    if not math.isfinite(peak.sum()):  # one reduction; a finite sum means every peak is finite
        impossible = ~np.isfinite(peak)
        log = np.where(impossible, 0.0, log)
        peak = np.where(impossible, 0.0, peak)
    p = np.exp(log - peak)
    p /= p.sum(axis=-1, keepdims=True)
    return p
