"""The repository keeps serving through bad versions and store outages, and follows the store."""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
import weakref
from contextlib import contextmanager

import numpy as np
import pytest
import sqlalchemy as sa
from prometheus_client import REGISTRY

from bnserve.server.loading import collector_paused
from bnserve.server.on_demand import Busy
from bnserve.server.poller import Poller
from bnserve.server.repository import FULL_READ_EVERY, ModelRepository
from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidModel, NotFound
from bnserve.store.model import Model
from bnserve.store.predictor.compiled import TABLE_PRECISION
from tests.model_factory import kdb_model, random_model


def _corrupt_one_blob(url: str, version: int) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        node, data = conn.execute(
            sa.text("SELECT node, data FROM cpts WHERE version = :v ORDER BY node LIMIT 1"), {"v": version}
        ).one()
        flipped = bytes([data[0] ^ 0xFF]) + bytes(data[1:])
        conn.execute(
            sa.text("UPDATE cpts SET data = :d WHERE version = :v AND node = :n"),
            {"d": flipped, "v": version, "n": node},
        )
    engine.dispose()


def test_a_corrupt_version_is_refused_and_the_previous_keeps_serving(model_store, store_url, rng):
    model_store.publish("m", random_model(rng))
    repo = ModelRepository(model_store)
    repo.refresh()
    assert repo.get("m")[0].version == 1
    model_store.publish("m", random_model(rng))
    _corrupt_one_blob(store_url, 2)
    repo.refresh()
    served, entry = repo.get("m")
    assert served.version == 1 and 2 in entry.refused
    with pytest.raises(InvalidModel, match="version 2 was refused"):
        repo.get("m", version=2)
    # a later good version is taken up again
    model_store.publish("m", random_model(rng))
    repo.refresh()
    assert repo.get("m")[0].version == 3


def test_an_alias_moved_to_a_corrupt_version_stays_at_the_previous_one(model_store, store_url, rng):
    """`trainer fit --alias production` of a version that is then refused: production keeps
    answering from the version it named before; a new start has nothing to fall back on."""
    model_store.publish("m", random_model(rng), aliases=["production"])
    repo = ModelRepository(model_store)
    repo.refresh()
    model_store.publish("m", random_model(rng), aliases=["production"])
    _corrupt_one_blob(store_url, 2)
    for _ in range(2):  # and it stays so on the next poll
        repo.refresh()
        assert repo.get("m")[0].version == 1
        assert repo.get("m", alias="production")[0].version == 1
        assert repo.entry("m").aliases == {"production": 1}
    fresh = ModelRepository(model_store)
    fresh.refresh()
    with pytest.raises(InvalidModel, match="version 2 was refused"):
        fresh.get("m")
    model_store.publish("m", random_model(rng), aliases=["production"])
    repo.refresh()
    assert repo.get("m", alias="production")[0].version == 3


def test_aliases_and_on_demand_versions(model_store, rng):
    for _ in range(3):
        model_store.publish("m", random_model(rng))
    model_store.set_alias("m", "staging", 1)
    repo = ModelRepository(model_store)
    repo.refresh()
    entry = repo.entry("m")
    assert sorted(entry.loaded) == [1, 3]  # the aliased one and the latest
    assert repo.get("m")[0].version == 3
    assert repo.get("m", alias="staging")[0].version == 1
    assert repo.get("m", version=2)[0].version == 2  # loaded on demand
    with pytest.raises(NotFound):
        repo.get("m", alias="production")
    model_store.set_alias("m", "production", 2)
    repo.refresh()
    assert repo.get("m")[0].version == 2
    model_store.remove_alias("m", "staging")  # trainer unalias: gone on the next poll
    repo.refresh()
    with pytest.raises(NotFound):
        repo.get("m", alias="staging")
    assert repo.get("m", version=1)[0].version == 1


def test_a_deleted_version_or_model_is_dropped_on_the_next_poll(model_store, rng):
    """Issue 15: `trainer delete` of a version (on demand, latest, or aliased with --force) or of
    a whole model; after the next poll the server answers NotFound for it, as for one never published."""
    for _ in range(4):
        model_store.publish("m", random_model(rng))
    model_store.set_alias("m", "staging", 1)
    repo = ModelRepository(model_store)
    repo.refresh()
    assert repo.get("m", version=2)[0].version == 2  # now held on demand
    assert sorted(repo.entry("m").loaded) == [1, 4]

    model_store.delete("m", 2)
    model_store.delete("m", 4)
    model_store.delete("m", 1, force=True)
    repo.refresh()

    for version in (1, 2, 4):
        with pytest.raises(NotFound, match=f"model 'm' has no version {version}"):
            repo.get("m", version=version)
    with pytest.raises(NotFound, match="model 'm' has no alias 'staging'"):
        repo.get("m", alias="staging")
    assert repo.get("m")[0].version == 3
    assert sorted(repo.entry("m").loaded) == [3]
    assert ("m", 2) not in repo._resident.on_demand.keys()  # its compiled tables are let go

    model_store.delete("m")
    repo.refresh()
    with pytest.raises(NotFound, match="model 'm' not found"):
        repo.get("m")
    model_store.publish("m", random_model(rng))  # the name again: numbers go on
    repo.refresh()
    assert repo.get("m")[0].version == 5


def test_a_version_deleted_while_the_server_reads_the_store_is_skipped(model_store, store_url, rng):
    """The catalogue lists version 2, then a delete commits before it is loaded: the poll
    still succeeds and serves version 1, and nothing of version 2 is left."""
    model_store.publish("m", random_model(rng), aliases=["production"])
    model_store.publish("m", random_model(rng), aliases=["production"])
    repo = ModelRepository(model_store)
    deleted = []

    @sa.event.listens_for(model_store.engine, "after_cursor_execute")
    def delete_after_the_listing(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM model_versions" in statement and not deleted:
            with ModelStore(store_url) as other:
                deleted.append(other.delete("m", 2, force=True))

    repo.refresh()
    sa.event.remove(model_store.engine, "after_cursor_execute", delete_after_the_listing)
    assert deleted
    assert repo.get("m")[0].version == 1
    assert repo.entry("m").versions == (1,) and repo.entry("m").aliases == {}
    with pytest.raises(NotFound):
        repo.get("m", version=2)
    repo.refresh()
    assert repo.entry("m").versions == (1,)


def test_a_store_outage_keeps_the_loaded_models_serving(tmp_path, rng):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        model = random_model(rng)
        store.publish("m", model)
        repo = ModelRepository(store)
        poller = Poller(repo, interval=60)
        assert poller.poll_once()
        store.dispose()
        (tmp_path / "store.db").rename(tmp_path / "moved.db")
        (tmp_path / "store.db").mkdir()  # the path is now unusable as a database
        assert not poller.poll_once()
        served, _ = repo.get("m")
        codes = np.zeros((1, len(model.features)), dtype=np.int64)
        assert served.compiled.predict_proba(codes).shape == (1, model.class_variable.cardinality)


# ------------------------------------------------------------------ incremental polls (issue 16)


def _selects(store) -> list[str]:
    seen: list[str] = []

    def note(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", note)
    return seen


def test_a_poll_with_nothing_written_reads_one_row_and_keeps_the_snapshot(model_store, rng):
    for name in ("a", "b", "c"):
        model_store.publish(name, random_model(rng), aliases=["production"])
    repo = ModelRepository(model_store)
    repo.refresh()
    before = repo.snapshot
    selects = _selects(model_store)
    repo.refresh()
    assert repo.snapshot is before
    assert len(selects) == 1 and "count(" in selects[0].lower()


def test_one_alias_moved_reads_and_rebuilds_only_its_model(model_store, rng):
    for name in ("a", "b", "c"):
        model_store.publish(name, random_model(rng))
        model_store.publish(name, random_model(rng))
    repo = ModelRepository(model_store)
    repo.refresh()
    before = repo.snapshot.models
    model_store.set_alias("b", "production", 1)
    selects = _selects(model_store)
    repo.refresh()
    after = repo.snapshot.models
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"].aliases == {"production": 1} and repo.get("b")[0].version == 1
    unfiltered = {s.split("FROM ")[1].split()[0] for s in selects if "WHERE" not in s}
    assert unfiltered == {"models"}  # each model's write count; versions and aliases of b alone


def test_a_writer_that_does_not_count_is_seen_within_a_full_read_cycle(model_store, store_url, rng):
    """A trainer of a release before schema 0005 moves an alias without counting the write
    (here: by hand): the server sees it at the latest on its FULL_READ_EVERY-th poll."""
    model_store.publish("m", random_model(rng), aliases=["production"])
    model_store.publish("m", random_model(rng))
    repo = ModelRepository(model_store)
    repo.refresh()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE model_aliases SET version = 2 WHERE alias = 'production'"))
    engine.dispose()
    polls = 0
    while repo.get("m")[0].version != 2:
        assert polls < FULL_READ_EVERY
        repo.refresh()
        polls += 1
    assert polls == FULL_READ_EVERY  # the first full read after the move, not an incremental one


# ------------------------------------------------------------------ failure isolation (issue 17 item 3)


def _deep_params(url: str, name: str, version: int) -> None:
    """Version ``version`` of ``name`` gets a params_json nested 200,000 deep (as a hostile writer could)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE model_versions SET params_json = :deep WHERE version = :v "
                "AND model_id = (SELECT id FROM models WHERE name = :n)"
            ),
            {"deep": "[" * 200_000 + "]" * 200_000, "v": version, "n": name},
        )
    engine.dispose()


def uncompilable(rng) -> Model:
    """Passes validate(), fails compile: its metadata asks for a table dtype that does not exist."""
    model = random_model(rng)
    return dataclasses.replace(model, metadata={**model.metadata, TABLE_PRECISION: {"dtype": "float16"}}).validate()


def _failures(name: str) -> float:
    return REGISTRY.get_sample_value("bnserve_model_load_failures_total", {"model": name}) or 0.0


def test_one_bad_version_is_refused_alone_and_every_other_model_keeps_updating(model_store, store_url, rng):
    """A compile failure (an InvalidInput, not a checksum or validation error) aborted the
    whole refresh: no model followed the store any more, and a new server never got ready."""
    model_store.publish("a", random_model(rng), aliases=["production"])
    model_store.publish("b", random_model(rng))
    repo = ModelRepository(model_store)
    repo.refresh()
    failures = _failures("a")
    model_store.publish("a", random_model(rng), aliases=["production"])
    _deep_params(store_url, "a", 2)
    model_store.publish("a", uncompilable(rng))
    model_store.publish("b", random_model(rng))
    repo.refresh()
    assert repo.get("b")[0].version == 2
    assert repo.get("a")[0].version == 1 and repo.entry("a").aliases == {"production": 1}
    assert sorted(repo.entry("a").refused) == [2, 3]
    assert "JSON nested too deeply" in repo.entry("a").refused[2]
    assert "float16" in repo.entry("a").refused[3]
    for version in (2, 3):
        with pytest.raises(InvalidModel, match=f"version {version} was refused at load"):
            repo.get("a", version=version)
    assert _failures("a") == failures + 2
    fresh = ModelRepository(model_store)
    fresh.refresh()
    assert fresh.ready and fresh.get("b")[0].version == 2


def test_a_start_reads_the_versions_in_selects_that_do_not_grow_with_the_models(model_store, store_url, rng):
    """Issue 30: the first refresh reads its versions in one bulk read, not nine selects each;
    a bad version among them is still refused alone, and its model falls back to the last good one."""
    model_store.publish("bad", random_model(rng))
    model_store.publish("bad", random_model(rng))
    _corrupt_one_blob(store_url, 2)
    counts = []
    for models in (2, 10):
        while len(model_store.list_models()) < models + 1:
            model_store.publish(f"m{len(model_store.list_models())}", random_model(rng), aliases=["production"])
        seen: list[str] = []

        def note(conn, cursor, statement, *rest) -> None:
            seen.append(statement)

        failures = _failures("bad")
        repo = ModelRepository(model_store)
        sa.event.listen(model_store.engine, "before_cursor_execute", note)
        repo.refresh()
        sa.event.remove(model_store.engine, "before_cursor_execute", note)
        counts.append(len(seen))
        assert repo.get("bad")[0].version == 1 and list(repo.entry("bad").refused) == [2]
        assert _failures("bad") == failures + 1
        assert all(repo.get(f"m{i}", alias="production")[0].version == 1 for i in range(1, models + 1))
    assert counts[0] == counts[1]


def test_versions_with_one_checksum_share_one_compiled_model(model_store, rng):
    model = random_model(rng)
    for name in ("a", "b"):
        model_store.publish(name, model)
    model_store.publish("a", random_model(rng), aliases=["staging"])
    model_store.publish("a", model)
    repo = ModelRepository(model_store)
    repo.refresh()
    one = repo.get("b")[0]
    assert repo.get("a")[0].compiled is one.compiled and repo.get("a")[0].model is one.model
    assert repo.get("a", version=1)[0].compiled is one.compiled  # on demand too
    assert repo.get("a", alias="staging")[0].compiled is not one.compiled


def test_lazy_compiles_a_version_on_its_first_request(model_store, rng):
    model_store.publish("a", random_model(rng))
    model_store.publish("b", uncompilable(rng))
    repo = ModelRepository(model_store, lazy=True)
    repo.refresh()
    assert not any(s.is_compiled for e in repo.snapshot.models.values() for s in e.loaded.values())
    assert repo.get_resident("a") is None  # a compile is work for a thread, not the event loop
    assert repo.get("a")[0].compiled.predict_proba(np.zeros((1, 4), dtype=np.intp)).shape[0] == 1
    assert repo.get_resident("a")[0].is_compiled
    failures = _failures("b")
    for _ in range(2):
        with pytest.raises(InvalidModel, match="model 'b' version 1 was refused at load: .*float16"):
            repo.get("b")
    assert _failures("b") == failures + 1
    repo.refresh()
    assert 1 in repo.entry("b").refused


def test_lazy_compiles_the_new_versions_of_a_model_in_use_at_load(model_store, rng):
    """Once a model has answered, its new versions compile off the request path, where a bad
    one is refused and its alias stays at the version it named, as without lazy."""
    model_store.publish("a", random_model(rng), aliases=["production"])
    repo = ModelRepository(model_store, lazy=True)
    repo.refresh()
    repo.get("a")
    model_store.publish("a", random_model(rng))
    model_store.publish("a", uncompilable(rng), aliases=["production"])
    repo.refresh()
    assert repo.entry("a").loaded[2].is_compiled
    assert repo.get("a")[0].version == 1 and 3 in repo.entry("a").refused


# ------------------------------------------------------------------ a store that hangs (issue 17 item 4)


@contextmanager
def hanging(store, thread_prefix: str, table: str):
    """Statements reading ``table`` from threads named ``thread_prefix``… block until released:
    a store that stops answering, for those calls only. Yields (entered, release) events."""
    entered, release = threading.Event(), threading.Event()
    calls = []

    def hang(conn, cursor, statement, parameters, context, executemany) -> None:
        if threading.current_thread().name.startswith(thread_prefix) and f"FROM {table}" in statement:
            calls.append(statement)
            entered.set()
            release.wait(60)

    sa.event.listen(store.engine, "before_cursor_execute", hang)
    try:
        yield entered, release, calls
    finally:
        release.set()
        sa.event.remove(store.engine, "before_cursor_execute", hang)


def _in_thread(name: str, call) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(call()), name=name, daemon=True)
    thread.start()
    return thread, out


def test_a_hanging_on_demand_load_delays_only_the_requests_for_that_version(model_store, rng):
    for _ in range(3):
        model_store.publish("m", random_model(rng))
    model_store.publish("n", random_model(rng))
    repo = ModelRepository(model_store)
    repo.refresh()
    repo.get("m", version=1)  # held on demand now
    with hanging(model_store, "store-load", "cpts") as (entered, release, calls):
        first, got_first = _in_thread("load-v2-a", lambda: repo.get("m", version=2))
        assert entered.wait(30)
        second, got_second = _in_thread("load-v2-b", lambda: repo.get("m", version=2))
        others, got_others = _in_thread("others", lambda: [repo.get("m", version=1), repo.get("n"), repo.get("m")])
        others.join(30)
        assert not others.is_alive(), "a request for a loaded version waited for another version's load"
        assert [s.version for s, _ in got_others[0]] == [1, 1, 3]
        assert repo.get_resident("m", version=1) is not None and repo.get_resident("m", version=2) is None
        assert first.is_alive() and second.is_alive()
        release.set()
        first.join(30)
        second.join(30)
    assert got_first[0][0] is got_second[0][0] and got_first[0][0].version == 2
    assert len(calls) == 1  # one load for both requests


def test_a_poll_that_hangs_is_warned_about_and_counted_once(model_store, rng, caplog):
    model_store.publish("m", random_model(rng))
    repo = ModelRepository(model_store)
    poller = Poller(repo, interval=60, stall_seconds=0.2)
    assert poller.poll_once()
    stalls = REGISTRY.get_sample_value("bnserve_store_poll_stalls_total") or 0.0
    with hanging(model_store, "poll", "models") as (entered, release, _):
        polling, done = _in_thread("poll", poller.poll_once)
        assert entered.wait(30)
        deadline = time.monotonic() + 30
        while REGISTRY.get_sample_value("bnserve_store_poll_stalls_total") == stalls:
            assert time.monotonic() < deadline, "the stalled poll was never counted"
            time.sleep(0.05)
        assert repo.get("m")[0].version == 1  # still serving
        release.set()
        polling.join(30)
    assert done == [True]
    assert REGISTRY.get_sample_value("bnserve_store_poll_stalls_total") == stalls + 1
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("store poll still running after 0 s" in m and "the store may be hanging" in m for m in messages)
    assert any(m.startswith("the stalled store poll ended after ") for m in messages)
    poller.stop()


# ------------------------------------------------------------------ versions loaded on demand (issue 27 item 3)


def _loads(result: str) -> float:
    return REGISTRY.get_sample_value("bnserve_version_loads_total", {"result": result}) or 0.0


def _kept(repo: ModelRepository) -> list[int]:
    return sorted(version for _, version in repo._resident.on_demand.keys())


def test_versions_loaded_on_demand_are_kept_within_a_budget_of_bytes(model_store, rng):
    """Versions 1..4 of one shape (so of one size) with the latest, 5, resident: a budget of
    two versions' compiled tables keeps the two used last; a budget smaller than one version
    serves it to its call and keeps nothing."""
    for _ in range(5):
        model_store.publish("m", kdb_model(rng, n_features=4, states=3, k=0))
    probe = ModelRepository(model_store)
    probe.refresh()
    size = probe.get("m", version=1)[0].nbytes
    probe.close()
    repo = ModelRepository(model_store, version_cache_bytes=2 * size)
    repo.refresh()
    loaded = _loads("loaded")
    for version in (1, 2):
        repo.get("m", version=version)
    assert repo.get_resident("m", version=1) is not None  # 1 used last: 2 goes first
    repo.get("m", version=3)
    assert _kept(repo) == [1, 3] and repo._resident.on_demand.nbytes == 2 * size
    assert REGISTRY.get_sample_value("bnserve_version_cache_bytes") == 2 * size
    for version in (1, 3, 1, 3):
        assert repo.get("m", version=version)[0].version == version
    assert _loads("loaded") == loaded + 3  # each read once
    repo.close()

    tight = ModelRepository(model_store, version_cache_bytes=size - 1)
    tight.refresh()
    loaded = _loads("loaded")
    for _ in range(2):
        assert tight.get("m", version=1)[0].version == 1
    assert _kept(tight) == [] and _loads("loaded") == loaded + 2
    tight.close()


def test_a_caller_that_stops_waiting_frees_its_place_and_the_load_goes_on(model_store, rng):
    """--max-load-waiters 1: a second caller is refused (UNAVAILABLE) while the first waits;
    once the first cancels its wait, another caller takes its place, and the one load serves it."""
    for _ in range(3):
        model_store.publish("m", random_model(rng))
    repo = ModelRepository(model_store, max_load_waiters=1)
    repo.refresh()
    with hanging(model_store, "store-load", "cpts") as (entered, release, calls):
        first, _ = repo.locate("m", version=1)
        assert entered.wait(30)
        with pytest.raises(Busy, match="model 'm' version 1 has 1 calls waiting for its load") as error:
            repo.locate("m", version=1)
        assert error.value.code == "UNAVAILABLE"
        assert first.cancel()
        second, _ = repo.locate("m", version=1)
        assert not second.done()
        release.set()
        assert second.result(30).version == 1
    assert len(calls) == 1
    repo.close()


def test_loads_beyond_the_bound_are_refused_and_a_queued_one_ends_at_close(model_store, rng):
    """--store-threads 1: 4 versions may be loading or queued; a fifth is refused at once. At
    close, the loads still queued end their callers' waits (UNAVAILABLE), not hang them."""
    for _ in range(6):
        model_store.publish("m", random_model(rng))
    repo = ModelRepository(model_store, store_threads=1)
    repo.refresh()
    with hanging(model_store, "store-load", "cpts") as (entered, release, _):
        waiting = [repo.locate("m", version=v)[0] for v in (1, 2, 3, 4)]
        assert entered.wait(30)
        with pytest.raises(Busy, match="model 'm' version 5 needs a load from the store, and 4 loads are pending"):
            repo.locate("m", version=5)
        repo.close()
        for queued in waiting[1:]:
            with pytest.raises(Busy, match="the server is stopping"):
                queued.result(30)
        release.set()
        assert waiting[0].result(30).version == 1  # the load running when it closed ends as it would have


def test_a_bulk_load_pauses_the_collector_and_leaves_it_as_it_found_it_collecting_what_it_held_back():
    """The pause is the bulk load's alone: the collector is on again afterwards (even when the
    load fails), the cycles made meanwhile are collected, and a collector someone else turned
    off stays off."""

    class Cycle:
        pass

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        cycle = Cycle()
        cycle.me = cycle  # type: ignore[attr-defined]
        gone = weakref.ref(cycle)
        del cycle
    assert gc.isenabled() and gone() is None
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the store failed")
    assert gc.isenabled()
    with collector_paused(False):
        assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
