"""Aliases move atomically; selectors resolve by version, alias, or the default rule."""

from __future__ import annotations

import pytest

from bnserve.store.db import ModelStore
from bnserve.store.errors import NotFound
from tests.model_factory import random_model


@pytest.fixture
def three_versions(model_store, rng):
    for _ in range(3):
        model_store.publish("m", random_model(rng, n_features=2))
    return model_store


def test_set_then_move_an_alias(three_versions):
    store = three_versions
    store.set_alias("m", "staging", 2)
    assert store.resolve("m", alias="staging") == 2
    assert store.load("m", alias="staging").aliases == ("staging",)

    store.set_alias("m", "staging", 3)

    assert store.resolve("m", alias="staging") == 3
    assert store.load("m", version=2).aliases == ()
    assert dict(store.list_models()[0].aliases) == {"staging": 3}


def test_default_selector_is_production_else_latest(three_versions, rng):
    store = three_versions
    assert store.resolve("m") == 3
    assert store.load("m").version == 3

    store.set_alias("m", "production", 1)
    store.publish("m", random_model(rng, n_features=2))

    assert store.resolve("m") == 1  # production is pinned, the newer version waits
    assert store.load("m").version == 1
    assert store.resolve("m", version=4) == 4


def test_publish_sets_its_aliases_on_the_new_version(three_versions, rng):
    store = three_versions
    store.set_alias("m", "production", 1)

    version = store.publish("m", random_model(rng, n_features=2), aliases=["production", "canary", "production"])

    assert version == 4
    assert store.load("m").aliases == ("canary", "production")
    assert dict(store.list_models()[0].aliases) == {"canary": 4, "production": 4}


def test_aliases_belong_to_their_model(three_versions, rng):
    store = three_versions
    store.publish("other", random_model(rng, n_features=2), aliases=["production"])
    assert store.resolve("m") == 3
    with pytest.raises(NotFound, match="model 'm' has no alias 'production'"):
        store.resolve("m", alias="production")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda s: s.resolve("nope"), "model 'nope' not found", id="resolve-model"),
        pytest.param(lambda s: s.load("nope", alias="production"), "model 'nope' not found", id="load-model"),
        pytest.param(lambda s: s.resolve("m", version=9), "model 'm' has no version 9", id="resolve-version"),
        pytest.param(lambda s: s.load("m", version=9), "model 'm' has no version 9", id="load-version"),
        pytest.param(lambda s: s.load("m", alias="ghost"), "model 'm' has no alias 'ghost'", id="load-alias"),
        pytest.param(lambda s: s.set_alias("m", "staging", 7), "model 'm' has no version 7", id="set_alias-version"),
        pytest.param(lambda s: s.set_alias("nope", "staging", 1), "model 'nope' not found", id="set_alias-model"),
    ],
)
def test_not_found_names_what_is_missing(three_versions, call, message):
    with pytest.raises(NotFound, match=message):
        call(three_versions)
    assert dict(three_versions.list_models()[0].aliases) == {}


def test_a_listing_never_names_an_aliased_version_it_does_not_list(store_url, rng):
    """Publishes with an alias commit between the listing's reads (PostgreSQL reads each
    statement at its own snapshot): every alias still names a version the listing has, so
    a server polling the store never serves an alias whose version it thinks is missing."""
    from sqlalchemy import event

    with ModelStore(store_url) as store, ModelStore(store_url) as other:
        store.publish("m", random_model(rng), aliases=["production"])
        injected = []

        @event.listens_for(store.engine, "before_cursor_execute")
        def publish_in_between(conn, cursor, statement, parameters, context, executemany) -> None:
            if "model_versions" in statement or "model_aliases" in statement:
                injected.append(other.publish("m", random_model(rng), aliases=["production"]))

        [summary] = store.list_models()
        event.remove(store.engine, "before_cursor_execute", publish_in_between)
        assert injected == [2, 3]
        assert set(summary.aliases.values()) <= set(summary.versions), summary


def test_remove_an_alias(three_versions):
    """Issue 15: an alias can be removed; the version it named stays, and removing it again is NotFound."""
    store = three_versions
    store.set_alias("m", "staging", 2)
    assert store.remove_alias("m", "staging") == 2
    assert store.load("m", version=2).aliases == ()
    assert dict(store.list_models()[0].aliases) == {}
    with pytest.raises(NotFound, match="no alias 'staging'"):
        store.resolve("m", alias="staging")
    with pytest.raises(NotFound, match="model 'm' has no alias 'staging'"):
        store.remove_alias("m", "staging")
    with pytest.raises(NotFound):
        store.remove_alias("absent", "staging")
