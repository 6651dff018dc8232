"""The repository keeps serving through bad versions and store outages, and follows the store."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from bnserve.server.repository import ModelRepository, Poller
from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidModel, NotFound
from tests.model_factory import random_model


def _corrupt_one_blob(url: str, version: int) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        node, data = conn.execute(
            sa.text("SELECT node, data FROM cpts WHERE version = :v ORDER BY node LIMIT 1"), {"v": version}
        ).one()
        flipped = bytes([data[0] ^ 0xFF]) + bytes(data[1:])
        conn.execute(sa.text("UPDATE cpts SET data = :d WHERE version = :v AND node = :n"),
                     {"d": flipped, "v": version, "n": node})
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
    assert not [key for key in repo._on_demand if key[:2] == ("m", 2)]  # its compiled tables are let go

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
