"""catalogue_changes: a reader learns what was written since its last read, and nothing else.

Each write transaction counts in its model's ``models.writes``; a read with nothing
written costs one aggregate row; a writer that does not count (a trainer of a release
before schema 0005, rows written by hand) is seen by a full read only. SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bnserve.store.db import ModelSummary
from bnserve.store.db.engine import create_store_engine
from bnserve.store.errors import NotFound
from tests.model_factory import random_model


@pytest.fixture
def two_models(model_store, rng):
    model_store.publish("m", random_model(rng), aliases=["production"])
    model_store.publish("m", random_model(rng))
    model_store.publish("n", random_model(rng))
    return model_store


def _statements(store) -> list[str]:
    seen: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda c, cur, stmt, *a: seen.append(stmt))
    return seen


def test_a_full_read_lists_every_model_and_the_next_read_with_nothing_written_one_row(two_models):
    full = two_models.catalogue_changes()
    assert full.models == {
        "m": ModelSummary("m", (1, 2), {"production": 1}),
        "n": ModelSummary("n", (1,), {}),
    }
    statements = _statements(two_models)
    again = two_models.catalogue_changes(full.mark)
    assert again.models == {} and again.mark == full.mark
    assert [s for s in statements if s.lstrip().upper().startswith("SELECT")] == [
        next(s for s in statements if "count(" in s.lower())
    ]


@pytest.mark.parametrize(
    "write, expected",
    [
        (lambda s, m: s.publish("m", m), ModelSummary("m", (1, 2, 3), {"production": 1})),
        (lambda s, m: s.publish("o", m, aliases=["staging"]), ModelSummary("o", (1,), {"staging": 1})),
        (lambda s, m: s.set_alias("m", "production", 2), ModelSummary("m", (1, 2), {"production": 2})),
        (lambda s, m: s.remove_alias("m", "production"), ModelSummary("m", (1, 2), {})),
        (lambda s, m: s.delete("m", 2), ModelSummary("m", (1,), {"production": 1})),
        (lambda s, m: s.delete("m", force=True), None),
    ],
    ids=["publish", "new model", "alias moved", "alias removed", "version deleted", "model deleted"],
)
def test_each_write_is_read_and_only_its_model(two_models, rng, write, expected):
    mark = two_models.catalogue_changes().mark
    write(two_models, random_model(rng))
    changes = two_models.catalogue_changes(mark)
    name = "o" if expected is not None and expected.name == "o" else "m"
    assert changes.models == {name: expected}
    assert two_models.catalogue_changes(changes.mark).models == {}  # and once only


def test_a_write_that_fails_counts_nothing(two_models):
    mark = two_models.catalogue_changes().mark
    with pytest.raises(NotFound):
        two_models.set_alias("m", "production", 7)  # no version 7: rolled back
    assert two_models.catalogue_changes(mark).models == {}


def test_a_writer_that_does_not_count_is_seen_by_a_full_read(two_models, store_url):
    """An alias moved by a trainer of a release before schema 0005 (here: by hand) leaves
    models.writes as it was: the next read of what changed misses it, a full read does not."""
    mark = two_models.catalogue_changes().mark
    engine = create_store_engine(store_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE model_aliases SET version = 2 WHERE alias = 'production'"))
    engine.dispose()
    assert two_models.catalogue_changes(mark).models == {}
    assert two_models.catalogue_changes().models["m"].aliases == {"production": 2}
