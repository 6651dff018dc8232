"""Learn a model: run a learner by name, estimate each member's CPTs, record how it was made."""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bnserve.store.errors import InvalidInput
from bnserve.store.model import NUMERIC, Model, Network
from bnserve.store.model.markers import PREPROCESSING
from bnserve.store.version import code_version
from bnserve.trainer.data import EncodedData, TrainingView
from bnserve.trainer.io import source_name
from bnserve.trainer.learners.base import Learned, Learner, Member
from bnserve.trainer.learners.parameters import ALR, LAPLACE_ESTIMATOR, Estimator, estimate_all
from bnserve.trainer.learners.registry import LEARNERS
from bnserve.trainer.learners.sizing import DEFAULT_LIMITS, Table, TrainingLimits, cpt_tables, within
from bnserve.trainer.stats import feature_columns


def fit(
    algo: str,
    data: TrainingView,
    estimator: Estimator | str | None = None,
    *,
    limits: TrainingLimits = DEFAULT_LIMITS,
    record: bool = True,
    **params: Any,
) -> Model:
    """Learn ``algo`` on ``data``. ``params`` are the learner's declared parameters; a
    parameter left out (or None) takes its default, one the learner does not declare is refused.
    ``estimator`` (an ``Estimator`` or its text, default laplace) estimates every CPT; the
    metadata records it.

    ``limits``: the tables are sized before they are built (the search's statistics before
    the search, the CPTs before they are estimated); past a limit the fit is refused with
    ``sizing.TooLarge`` (an InvalidInput) naming the columns, their states and the flag. Weighted data
    (``TrainingView.weighted``) are refused by a learner that cannot take weights, naming it
    and why; the metadata records the weight column and the total weight.

    ``record`` False: a model to score and throw away (a cross-validation fold), without what
    only a kept model's metadata needs: the data's fingerprint (a hash of every row) and each
    arc's conditional mutual information (laode on dermatology's 34 features: 1,122 arcs, a tenth of
    its fit)."""
    estimator = Estimator.parse(estimator) if isinstance(estimator, str) else estimator or LAPLACE_ESTIMATOR
    learner = LEARNERS.get(algo)
    if learner is None:
        raise InvalidInput(f"unknown algorithm {algo!r}; expected one of {', '.join(LEARNERS)}")
    given = {name: value for name, value in params.items() if value is not None}
    with _fingerprint_aside(data) if record else nullcontext(lambda: "") as fingerprint:
        data = column_major(data)
        with within(limits):
            limits.check(learner.search_tables(data), algo)
            learned, values = learn(learner, data, given, limits)
            limits.check(estimate_tables(learned.members, estimator, data.n_rows), algo)
            _count_pairs_first(learned.members, data)
            networks = tuple(
                estimate_all([(m.structure, m.data) for m in learned.members], estimator, learned.combination)
            )
    metadata: dict[str, Any] = {
        "training": {
            "source": source_name(data.source),  # the file name: the metadata is shown to every client
            "rows": data.n_rows,
            "rows_dropped": data.n_rows_dropped,
            "features": len(data.features),
            "class_counts": data.class_counts(),
            **({"chunk_rows": data.chunk_rows} if data.chunk_rows else {}),
            **(_weights(data) if data.weighted else {}),
        },
        **({"data_fingerprint": fingerprint()} if record else {}),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "code_version": code_version(),
        "estimator": str(estimator),
        **learned.metadata,
    }
    if data.preprocessing is not None:
        numeric = [v.name for v in data.features if v.kind == NUMERIC]
        metadata[PREPROCESSING] = data.preprocessing.describe(numeric)
    if record:
        metadata["arc_cmi"] = arc_cmi(networks, data)
    if len(learned.members) == 1:
        structure = learned.members[0].structure
        metadata["order"] = list(structure.order)
        metadata["order_scores"] = list(structure.scores)
    params = {name: value for name, value in values.items() if value is not None}  # None = off
    return Model(data.variables, networks, algo, learned.combination, params, metadata).validate()


KEPT_NODES = 10_000  # a structure kept on its rows (``learn``) up to this many nodes over its members


def learn(
    learner: Learner, data: TrainingView, given: Mapping[str, Any], limits: TrainingLimits
) -> tuple[Learned, dict[str, Any]]:
    """``learner.run(data, given)``, kept on rows held in memory (``EncodedData.learnt``) and
    read from there when asked again: a structure does not depend on the estimator, and auto
    fits its best structures again with others on the same folds (eskdb's leave-one-out
    selection was a third of its fit with hdp). Kept when every member is on the rows
    themselves (not a sample) and the members hold at most ``KEPT_NODES`` nodes."""
    key = (learner.name, tuple(sorted(given.items())), limits)
    if not isinstance(data, EncodedData) or not _hashable(key):
        return learner.run(data, given)
    if key in data.learnt:
        structures, combination, metadata, values = data.learnt[key]
        members = tuple(Member(s, data) for s in structures)
        return Learned(members, combination, copy.deepcopy(metadata)), dict(values)
    learned, values = learner.run(data, given)
    members = learned.members
    if all(m.data is data for m in members) and sum(len(m.structure.parents) for m in members) <= KEPT_NODES:
        structures = tuple(m.structure for m in members)
        kept = (structures, learned.combination, copy.deepcopy(learned.metadata), dict(values))
        data.learnt[key] = kept  # the metadata a copy: this fit's model may be changed by its caller
    return learned, values


def _hashable(key: Hashable) -> bool:
    try:
        hash(key)
    except TypeError:  # a parameter given as a list, say
        return False
    return True


HASH_ASIDE_CELLS = 1 << 20  # coded cells from which the fingerprint is hashed on a thread beside the fit


@contextmanager
def _fingerprint_aside(data: TrainingView) -> Iterator[Callable[[], str]]:
    """What gives ``data``'s fingerprint: hashed on a thread beside the counts (sha256 and numpy's
    copies let go of the GIL) from ``HASH_ASIDE_CELLS`` coded cells (and for streamed data);
    below, hashed when asked, since a thread's start and join cost more than such a hash, and
    auto's search fits hundreds of models on a small file."""
    if isinstance(data, EncodedData) and data.X.size < HASH_ASIDE_CELLS:
        yield data.fingerprint
        return
    with ThreadPoolExecutor(1) as hashing:
        yield hashing.submit(data.fingerprint).result


def estimate_tables(members: Sequence[Member], estimator: Estimator, rows: int) -> list[Table]:
    """Every table ``estimate`` will build for these members (alr: also its design matrix,
    one entry per row and node)."""
    tables = [t for m in members for t in cpt_tables(m.structure, m.data, estimator.kind)]
    if estimator.kind == ALR:
        nodes = sum(len(m.structure.parents) for m in members)
        tables.append(Table("the alr design matrix", (("rows", rows), ("nodes", nodes)), 2, bounded=False))
    return tables


def _weights(data: TrainingView) -> dict[str, Any]:
    """What the metadata records of the rows' weights: their column (None: given as an array) and total."""
    column = data.preprocessing.weight if data.preprocessing is not None else None
    return {"weight_column": column, "total_weight": data.total_weight()}


def column_major(data: TrainingView) -> TrainingView:
    """The same data with ``X`` in column-major (Fortran) order, copied once if it is not.

    Every statistic reads whole feature columns, many times (the pairwise matrices read each
    column n times). In row-major order a column's values are ``n`` int32s apart, so each
    value costs a cache line from memory; once the data outgrow the cache that made fits
    superlinear in the rows. The values, and so every result, are the same.
    """
    if not isinstance(data, EncodedData) or data.X.flags.f_contiguous:  # streamed data hold no rows
        return data
    return replace(data, X=feature_columns(data.X).T)


def _count_pairs_first(members: Sequence[Member], data: TrainingView) -> None:
    """Count ``data``'s pairwise statistics before the CPTs when a member on those rows has an
    arc between two features: ``arc_cmi`` reads them afterwards anyway, and the families of
    the class and at most two features are then summed out of them (``family_counts``), not
    counted again (an AODE's n (n - 1); auto's laode on promoters: 3,306 per fit)."""
    if not isinstance(data, EncodedData) or data.weighted:
        return
    names = {v.name for v in data.features}
    if any(
        m.data is data
        and any(p in names for node, parents in m.structure.parents.items() if node in names for p in parents)
        for m in members
    ):
        data.statistics  # noqa: B018 -- counted now, kept on the data


def arc_cmi(networks: tuple[Network, ...], data: TrainingView) -> list[list]:
    """[parent, child, I(child; parent | C) in nats] for every arc between two features, once
    per pair: how strong the dependence each arc models is (drawn on ``trainer export --format dot``).
    From the data's pairwise statistics (counted only when there is such an arc)."""
    index = {v.name: j for j, v in enumerate(data.features)}
    arcs = list(dict.fromkeys((p, c) for net in networks for p, c in net.arcs if p in index and c in index))
    if not arcs:
        return []
    cmi = data.statistics.cmi_matrix()
    return [[p, c, round(float(cmi[index[c], index[p]]), 6)] for p, c in arcs]
