"""Missing-value plans: kept in a cache bounded in bytes, holding no copy of the CPTs; a row
too large to eliminate at once is conditioned on some of its missing variables, and one
whose work would still be too large is refused, all against the slow reference."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput, TooComplex
from bnserve.store.model import SINGLE
from bnserve.store.predictor import PlanCache, compile_model, elimination
from bnserve.store.predictor.compiled import ComponentPlan
from bnserve.store.predictor.elimination import LogTables
from tests.model_factory import kdb_model
from tests.reference import coded_rows, models, reference_proba

TOL = 1e-9


class _Blob:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_the_cache_keeps_the_most_recently_used_entries_within_its_budget():
    held: list[int] = []
    cache = PlanCache(100, on_change=held.append)
    built: list[str] = []

    def get(key: str, size: int = 40) -> _Blob:
        return cache.get(key, lambda: built.append(key) or _Blob(size))

    a = get("a")
    get("b")
    assert get("a") is a and built == ["a", "b"]  # a hit moves "a" to the back
    get("c")  # 120 bytes: "b", the least recently used, goes
    assert cache.nbytes == 80 and len(cache) == 2
    get("b")
    assert built == ["a", "b", "c", "b"]
    big = get("big", 101)  # larger than the whole budget: built for this call, not kept
    assert big.nbytes == 101 and get("big", 101) is not big and cache.nbytes == 80
    assert held == [40, 80, 80, 80]
    with pytest.raises(InvalidInput, match="0 bytes or more, got -1"):
        PlanCache(-1)


def _rows(model, n: int, missing: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, v.cardinality, size=n) for v in model.features])
    codes[rng.random(codes.shape) < missing] = -1
    return codes


def test_plans_index_the_shared_log_tables_instead_of_copying_the_cpts():
    """Each plan of a 12-state k = 3 classifier used to carry a log copy of every CPT it
    touched (~0.5 MB each); now it holds index arrays only, a few KB."""
    model = kdb_model(np.random.default_rng(1), n_features=12)
    compiled = compile_model(model)
    for row in _rows(model, 40, 0.4, seed=2):
        compiled.predict_proba(row[None])
    plans = [v for v in compiled.plans.values() if isinstance(v, ComponentPlan)]
    cpt_bytes = {n.name: n.cpt.size * 8 for n in model.networks[0].nodes}
    assert len(plans) > 20
    for plan in plans:
        assert plan.nbytes * 10 < sum(cpt_bytes[name] for name in plan.eliminated_nodes)
    tables = [v for v in compiled.plans.values() if isinstance(v, LogTables)]
    assert len(tables) == 1 and tables[0].nbytes == sum(cpt_bytes.values())  # one log copy, shared


def test_memory_stays_within_the_budget_and_answers_do_not_depend_on_it():
    """Many distinct missing patterns: what the cache holds stays under its budget, what the
    process holds after the calls grows by no more than that, and the answers are those of a
    cache that keeps nothing (every plan rebuilt per call) and of one that keeps everything."""
    model = kdb_model(np.random.default_rng(3), n_features=12)
    rows = _rows(model, 60, 0.4, seed=4)
    tables = sum(n.cpt.size * 8 for n in model.networks[0].nodes)
    budget = tables + 256 * 1024  # the shared tables and a few dozen plans
    bounded = compile_model(model, plans=PlanCache(budget))
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        got = np.vstack([bounded.predict_proba(row[None]) for row in rows])
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert 0 < bounded.plans.nbytes <= budget
    assert grown <= budget + 256 * 1024  # and the answers
    nothing = compile_model(model, plans=PlanCache(0))
    np.testing.assert_allclose(nothing.predict_proba(rows), got, rtol=0, atol=1e-12)
    assert len(nothing.plans) == 0 and nothing.plans.nbytes == 0
    np.testing.assert_allclose(
        compile_model(model, plans=PlanCache(1 << 40)).predict_proba(rows), got, rtol=0, atol=1e-12
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), st.sampled_from([1, 40, 400]))
def test_conditioned_elimination_equals_the_reference(monkeypatch, data, row_cells):
    """With ``MAX_ROW_CELLS`` tiny, elimination sums over some (at 1: all) of a component's
    variables one joint state at a time; the answer is still exact."""
    monkeypatch.setattr(elimination, "MAX_ROW_CELLS", row_cells)
    model = data.draw(models(SINGLE))
    codes = data.draw(coded_rows(model))
    codes = np.vstack([codes, np.full((1, codes.shape[1]), -1)])
    got = compile_model(model, plans=PlanCache(0)).predict_proba(codes)
    np.testing.assert_allclose(got, reference_proba(model, codes), rtol=0, atol=TOL)


def test_conditioning_keeps_a_large_component_within_the_row_bound():
    """A row of a 12-state k = 3 classifier with 8 linked missing features: eliminating them
    at once would need more than MAX_ROW_CELLS; conditioned, each pass needs less, and the
    answer is the one of the unconditioned elimination."""
    model = kdb_model(np.random.default_rng(5), n_features=12)
    row = _rows(model, 1, 0.0, seed=6)
    row[0, :8] = -1
    compiled = compile_model(model)
    conditioned = compiled.predict_proba(row)
    plan = next(v for v in compiled.plans.values() if isinstance(v, ComponentPlan))
    assert plan._elimination.row_cells <= elimination.MAX_ROW_CELLS
    assert plan._elimination._condition_cols.size >= 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(elimination, "MAX_ROW_CELLS", 1 << 40)
        at_once = compile_model(model).predict_proba(row)
    np.testing.assert_allclose(conditioned, at_once, rtol=0, atol=1e-12)


def test_a_row_whose_elimination_is_too_much_work_is_refused_naming_it(monkeypatch):
    monkeypatch.setattr(elimination, "MAX_ROW_WORK", 1_000)
    model = kdb_model(np.random.default_rng(7), n_features=6, states=4)
    rows = _rows(model, 3, 0.0, seed=8)
    rows[1, :4] = -1
    compiled = compile_model(model)
    with pytest.raises(
        TooComplex,
        match=r"^row 1: the missing values of f0, f1, f2, f3 are linked through their "
        r"CPTs: .* send values for some of them$",
    ) as refused:
        compiled.predict_proba(rows)
    assert refused.value.code == "RESOURCE_EXHAUSTED"
    assert compiled.predict_proba(rows[[0, 2]]).shape == (2, 3)  # the other rows are fine alone


def test_cached_plans_only_refuses_to_build_and_then_answers_from_the_cache():
    """The server's event loop predicts inside ``cached_plans_only``: a row needing a plan the
    cache lacks raises PlanNotReady (the request goes to the work pool, which builds it);
    once built, the same row is answered inline, equal to the reference."""
    from bnserve.store.predictor.plans import PlanNotReady, cached_plans_only

    rng = np.random.default_rng(11)
    model = kdb_model(rng, n_features=8, states=3, k=2)
    compiled = compile_model(model)
    codes = np.array([[rng.integers(v.cardinality) for v in model.features]])
    codes[0, [1, 2, 5]] = -1
    with cached_plans_only(), pytest.raises(PlanNotReady):
        compiled.predict_proba(codes)
    built = compiled.predict_proba(codes)  # outside: builds and keeps the plans
    with cached_plans_only():
        inline = compiled.predict_proba(codes)
    assert np.array_equal(inline, built)
    assert np.allclose(inline, reference_proba(model, codes), atol=TOL)


def test_the_descendant_relation_is_built_by_the_first_missing_value_not_at_compile(monkeypatch):
    """A server compiling a thousand models spent a fifth of its compile on the descendant
    relation, which only rows with missing values read: built on their first need, counted
    in the compiled bytes from the start, and the answers are the reference's."""
    built = []
    real = elimination.descendant_matrix
    monkeypatch.setattr("bnserve.store.predictor.compiled.descendant_matrix", lambda *a: built.append(a) or real(*a))
    model = kdb_model(np.random.default_rng(4), n_features=5, states=3, k=2)
    compiled = compile_model(model)
    before = compiled.nbytes, [net.nbytes for net in compiled.networks]
    assert built == []
    rng = np.random.default_rng(5)
    codes = np.stack([rng.integers(v.cardinality, size=30) for v in model.features], axis=1)
    np.testing.assert_allclose(compiled.predict_proba(codes), reference_proba(model, codes), rtol=1e-9)
    assert built == []  # no missing value, no need
    codes[::2, 1] = -1
    codes[1::3, 3] = -1
    np.testing.assert_allclose(compiled.predict_proba(codes), reference_proba(model, codes), rtol=1e-9)
    assert len(built) == len(compiled.networks)
    assert [net.nbytes for net in compiled.networks] == before[1] and compiled.nbytes == before[0]
    assert all(net._below_t.nbytes == 4 * len(net.feature_names) ** 2 for net in compiled.networks)


def test_the_descendant_relation_is_not_built_on_the_event_loop():
    """A row whose missing features are all barren needs no plan, only the descendant
    relation: under ``cached_plans_only`` (the server's event loop) its first build, work in
    the features times the arcs, is handed to the pool as a plan is; then answered inline.
    The relations it is built from (ancestors, arcs, family graph) are not built by a
    compile either (a thousand of them were a quarter of a server's compile), nor on the loop."""
    from bnserve.store.predictor.plans import PlanNotReady, cached_plans_only

    model = kdb_model(np.random.default_rng(12), n_features=8, states=3, k=2)
    compiled = compile_model(model)
    net = compiled.networks[0]
    parents = {p for n in model.networks[0].nodes for p in n.parents}
    leaf = next(i for i, v in enumerate(model.features) if v.name not in parents)  # barren when missing
    codes = np.array([[1] * len(model.features)])
    codes[0, leaf] = -1
    assert "_relations" not in vars(net)
    with cached_plans_only(), pytest.raises(PlanNotReady):
        compiled.predict_proba(codes)
    assert "_below_t" not in vars(net) and "_relations" not in vars(net)
    built = compiled.predict_proba(codes)
    with cached_plans_only():
        inline = compiled.predict_proba(codes)
    assert np.array_equal(inline, built) and "_below_t" in vars(net)
    assert np.allclose(inline, reference_proba(model, codes), atol=TOL)
