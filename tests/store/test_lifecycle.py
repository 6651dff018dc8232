"""Issue 15's lifecycle in the store: delete a version or a whole model, never reuse its
number, a description and tags on each version, one catalogue row per version."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event

from bnserve.store.db import ModelStore, upgrade_store
from bnserve.store.db.engine import create_store_engine
from bnserve.store.db.schema import MIGRATIONS_DIR, head_revision
from bnserve.store.errors import InUse, InvalidInput, NotFound, SchemaMismatch
from tests.model_factory import random_model

VERSION_TABLES = ("model_versions", "model_aliases", "model_version_tags", "variables", "cpts", "arcs")


def _rows_of(url: str, version: int) -> dict[str, int]:
    """Rows per table that belong to ``version`` (of any model)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        counts = {
            t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t} WHERE version = :v"), {"v": version}).scalar()
            for t in VERSION_TABLES
        }
    engine.dispose()
    return counts


@pytest.fixture
def three_versions(model_store, rng):
    for i in range(3):
        model_store.publish("m", random_model(rng, n_features=3), description=f"take {i + 1}", tags={"run": str(i)})
    return model_store


def test_delete_a_version_removes_every_row_of_it(three_versions, store_url):
    store = three_versions
    assert _rows_of(store_url, 2)["model_version_tags"] == 1 and _rows_of(store_url, 2)["cpts"] > 0
    kept = store.load("m", version=3).checksum

    deleted = store.delete("m", 2)

    assert (deleted.name, deleted.versions, dict(deleted.aliases)) == ("m", (2,), {})
    assert set(_rows_of(store_url, 2).values()) == {0}
    assert store.list_models()[0].versions == (1, 3)
    assert store.load("m", version=3).checksum == kept and store.load("m", version=1).version == 1
    with pytest.raises(NotFound, match="model 'm' has no version 2"):
        store.load("m", version=2)
    with pytest.raises(NotFound, match="model 'm' has no version 2"):
        store.delete("m", 2)


def test_a_deleted_number_is_never_given_again(three_versions, rng):
    """Versions are immutable: whoever still holds m:3 must never get another model under it."""
    store = three_versions
    store.delete("m", 3)
    assert store.resolve("m") == 2
    assert store.publish("m", random_model(rng)) == 4
    store.delete("m")
    assert store.list_models() == []
    assert store.publish("m", random_model(rng)) == 5


def test_a_version_written_without_the_high_water_mark_is_not_taken_again(three_versions, store_url, rng):
    """A writer that does not keep models.last_version (a trainer of the release before
    schema 0004 during a rolling upgrade, or rows written by hand) leaves the mark behind
    the table: the next publish still takes the number above every version there is."""
    store = three_versions
    engine = create_store_engine(store_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE models SET last_version = 1 WHERE name = 'm'"))
    engine.dispose()
    assert store.publish("m", random_model(rng)) == 4
    assert store.publish("m", random_model(rng)) == 5


def test_a_version_an_alias_names_is_deleted_only_by_force(three_versions, store_url):
    store = three_versions
    store.set_alias("m", "production", 2)
    store.set_alias("m", "staging", 2)
    store.set_alias("m", "canary", 3)

    with pytest.raises(InUse, match=r"still named by the aliases production \(version 2\), staging \(version 2\)"):
        store.delete("m", 2)
    assert _rows_of(store_url, 2)["cpts"] > 0 and store.resolve("m") == 2  # refused: nothing changed

    deleted = store.delete("m", 2, force=True)

    assert dict(deleted.aliases) == {"production": 2, "staging": 2}
    assert dict(store.list_models()[0].aliases) == {"canary": 3}
    assert store.resolve("m") == 3  # no production alias now: the latest


def test_delete_a_whole_model(three_versions, store_url, rng):
    store = three_versions
    store.publish("other", random_model(rng), aliases=["production"])
    store.set_alias("m", "staging", 1)
    with pytest.raises(InUse, match=r"deleting model 'm': still named by the alias staging \(version 1\)"):
        store.delete("m")

    deleted = store.delete("m", force=True)

    assert (deleted.versions, dict(deleted.aliases)) == ((1, 2, 3), {"staging": 1})
    assert [s.name for s in store.list_models()] == ["other"]
    assert _rows_of(store_url, 2) == dict.fromkeys(VERSION_TABLES, 0)
    for call in (
        lambda: store.resolve("m"),
        lambda: store.load("m", version=1),
        lambda: store.delete("m"),
        lambda: store.list_versions("m"),
    ):
        with pytest.raises(NotFound, match="model 'm' not found"):
            call()
    assert store.load("other").aliases == ("production",)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("absent",), NotFound, "model 'absent' not found"),
        (("absent", 1), NotFound, "model 'absent' not found"),
        (("m", 9), NotFound, "model 'm' has no version 9"),
        (("m", 0), InvalidInput, "version 0 is invalid"),
        (("bad name",), InvalidInput, "model name 'bad name' is invalid"),
    ],
)
def test_delete_names_what_is_missing_or_wrong(three_versions, args, error, message):
    with pytest.raises(error, match=message):
        three_versions.delete(*args)
    assert three_versions.list_models()[0].versions == (1, 2, 3)


def test_a_listing_never_names_an_aliased_version_a_delete_removed(store_url, rng):
    """A forced delete commits between the listing's reads: the listing still sees one
    state of the store (before it), never an alias whose version it does not list."""
    with ModelStore(store_url) as store, ModelStore(store_url) as other:
        store.publish("m", random_model(rng), aliases=["production"])
        store.publish("m", random_model(rng))
        deleted = []

        @event.listens_for(store.engine, "before_cursor_execute")
        def delete_in_between(conn, cursor, statement, parameters, context, executemany) -> None:
            if "model_versions" in statement and not deleted:
                deleted.append(other.delete("m", 1, force=True))

        [summary] = store.list_models()
        event.remove(store.engine, "before_cursor_execute", delete_in_between)
        assert deleted and set(summary.aliases.values()) <= set(summary.versions), summary
        assert store.list_models()[0].versions == (2,)


# ------------------------------------------------------------------ description and tags


def test_description_and_tags_are_kept_outside_the_checksum(model_store, rng):
    model = random_model(rng)
    model_store.publish("m", model, description="first try\n\tindented", tags={"team": "risk", "ticket": ""})
    model_store.publish("m", model)
    first, second = model_store.load("m", version=1), model_store.load("m", version=2)
    assert (first.description, dict(first.tags)) == ("first try\n\tindented", {"team": "risk", "ticket": ""})
    assert (second.description, dict(second.tags)) == (None, {})
    assert first.checksum == second.checksum == model.checksum()


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"description": "x" * 1001}, "1001 characters, at most 1000"),
        ({"description": "bell\x07"}, "control character"),
        ({"description": 5}, "expected a text"),
        ({"tags": {"has space": "v"}}, "tag key 'has space' is invalid"),
        ({"tags": {"": "v"}}, "tag key '' is invalid"),
        ({"tags": {"k": "x" * 257}}, "257 characters, at most 256"),
        ({"tags": {"k": "two\nlines"}}, "control character"),
        ({"tags": {"k": 3}}, "expected a text"),
        ({"tags": {f"k{i}": "v" for i in range(33)}}, "33 of them, at most 32"),
        ({"tags": "k=v"}, "expected a mapping"),
    ],
)
def test_bad_description_or_tags_are_refused_and_nothing_is_written(model_store, rng, annotations, message):
    with pytest.raises(InvalidInput, match=message):
        model_store.publish("m", random_model(rng), **annotations)
    assert model_store.list_models() == []


def test_list_versions_one_row_per_version_without_reading_a_blob(three_versions, rng):
    store = three_versions
    store.publish("a", random_model(rng, algorithm="nb"), aliases=["production", "canary"])
    store.set_alias("m", "staging", 2)
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda c, cur, stmt, *a: statements.append(stmt))

    rows = store.list_versions()

    assert not any("cpts" in s or "variables" in s or "arcs" in s for s in statements), statements
    assert [(r.name, r.version, r.algorithm, r.aliases, r.description, dict(r.tags)) for r in rows] == [
        ("a", 1, "nb", ("canary", "production"), None, {}),
        ("m", 1, "random-dag", (), "take 1", {"run": "0"}),
        ("m", 2, "random-dag", ("staging",), "take 2", {"run": "1"}),
        ("m", 3, "random-dag", (), "take 3", {"run": "2"}),
    ]
    assert rows[1].created_at_ms == store.load("m", version=1).created_at_ms
    assert [r.version for r in store.list_versions("m")] == [1, 2, 3]
    with pytest.raises(NotFound, match="model 'b' not found"):
        store.list_versions("b")


# ------------------------------------------------------------------ the migration


def _alembic(url: str, action, revision: str) -> None:
    engine = create_store_engine(url)
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["connection"] = connection
        action(config, revision)
    engine.dispose()


@pytest.mark.parametrize("old", ["0003", "0001"])
def test_an_old_store_is_refused_then_upgraded_without_losing_anything(store_url, rng, old):
    """0001 too: its 0002 and 0003 once copied ``variables`` whole on SQLite, which failed
    on a store holding any model (FOREIGN KEY constraint failed)."""
    with ModelStore(store_url) as store:
        for _ in range(3):
            store.publish("m", random_model(rng), aliases=["production"])
        store.publish("n", random_model(rng))
        store.set_alias("m", "staging", 1)
        before = {(s.name, v): store.load(s.name, version=v).checksum for s in store.list_models() for v in s.versions}
    _alembic(store_url, command.downgrade, old)  # the store as an earlier release left it

    with pytest.raises(
        SchemaMismatch, match=f"revision {old}, behind this bnserve's {head_revision()}.*`trainer db upgrade"
    ):
        ModelStore(store_url)
    assert upgrade_store(store_url) == (old, head_revision())

    with ModelStore(store_url) as store:
        after = {(s.name, v): store.load(s.name, version=v).checksum for s in store.list_models() for v in s.versions}
        assert after == before
        assert {s.name: dict(s.aliases) for s in store.list_models()} == {"m": {"production": 3, "staging": 1}, "n": {}}
        assert store.load("m", version=2).description is None
        store.delete("m", 3, force=True)
        assert store.publish("m", random_model(rng), tags={"after": "upgrade"}) == 4  # from the versions it held
        assert store.publish("n", random_model(rng)) == 2
