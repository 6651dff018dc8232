"""Concurrent publishers get distinct, gap-free versions, and every version loads complete
(on SQLite and PostgreSQL: the `store_url` fixture)."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
from sqlalchemy import create_engine, text

from bnserve.store.db import ModelStore
from tests.model_factory import random_model
from tests.reliability import record

NAME = "contended"


def model_for(worker: int, k: int):
    return random_model(np.random.default_rng([worker, k]), n_features=3)


def assert_all_versions_load(url: str, published: list[tuple[int, int, int]]) -> None:
    """published: (worker, k, version) triples. Each version loads, equals what its publisher
    sent, and has exactly its model's rows in every table (counted directly); no other rows."""
    versions = sorted(v for _, _, v in published)
    assert versions == list(range(1, len(published) + 1))
    with ModelStore(url) as store:
        for worker, k, version in published:
            assert store.load(NAME, version=version).checksum == model_for(worker, k).checksum()
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            for table, count in (
                ("variables", lambda m: len(m.variables)),
                ("cpts", lambda m: sum(len(n.nodes) for n in m.networks)),
                ("arcs", lambda m: sum(len(n.arcs) for n in m.networks)),
            ):
                stored = dict(conn.execute(text(f"SELECT version, count(*) FROM {table} GROUP BY version")).all())
                expected = {v: count(model_for(w, k)) for w, k, v in published}
                assert {v: stored.get(v, 0) for v in set(stored) | set(expected)} == expected, table
    finally:
        engine.dispose()


def test_threads_sharing_a_store_publish_distinct_versions(model_store, store_url):
    n_threads, per_thread = 4, 3
    start = threading.Barrier(n_threads)
    published: list[tuple[int, int, int]] = []
    errors: list[BaseException] = []

    def publish(worker: int) -> None:
        try:
            start.wait(timeout=30)
            for k in range(per_thread):
                published.append((worker, k, model_store.publish(NAME, model_for(worker, k))))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert_all_versions_load(store_url, published)


def _publish_from_process(url: str, worker: int, per_process: int, start, results) -> None:
    """Child: open its own store on a (possibly unmigrated) database, then publish.

    Puts exactly one message: (worker, [(k, version), ...], error or None).
    """
    done: list[tuple[int, int]] = []
    try:
        start.wait(timeout=30)
        with ModelStore(url, create=True) as store:
            start.wait(timeout=30)
            for k in range(per_process):
                done.append((k, store.publish(NAME, model_for(worker, k))))
    except BaseException as exc:
        results.put((worker, done, repr(exc)))
    else:
        results.put((worker, done, None))


def test_processes_each_with_its_own_store_publish_distinct_versions(empty_url):
    """The processes also create the new store's schema at once: one does, the others wait."""
    store_url = empty_url
    """Also opens the stores concurrently on an empty database: the migrations serialise."""
    n_processes, per_process = 4, 2
    context = multiprocessing.get_context("fork")  # the child needs no import of this test module
    start = context.Barrier(n_processes)
    results = context.Queue()
    processes = [
        context.Process(target=_publish_from_process, args=(store_url, w, per_process, start, results))
        for w in range(n_processes)
    ]
    for p in processes:
        p.start()
    reports = [results.get(timeout=60) for _ in range(n_processes)]
    for p in processes:
        p.join(timeout=60)

    assert [(worker, error) for worker, _, error in reports if error] == []
    assert [p.exitcode for p in processes] == [0] * n_processes
    published = [(worker, k, version) for worker, done, _ in reports for k, version in done]
    assert_all_versions_load(store_url, published)
    record(
        "concurrent publishers (processes) of one model",
        "postgresql" if store_url.startswith("postgresql") else "sqlite",
        versions=len(published),
        errors=0,
        lost=0,
        publishers=n_processes,
    )
