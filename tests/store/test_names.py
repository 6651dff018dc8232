"""Names, aliases and versions are checked before any database work."""

from __future__ import annotations

import re

import pytest

from bnserve.store.errors import InvalidInput
from tests.model_factory import random_model

BAD_NAMES = ["", "-lead", ".hidden", "has space", "slash/y", "x" * 129, "ümlaut", "new\nline", "tail\n", 7, None]
GOOD_NAMES = ["a", "A9", "9a", "model.v2_final-3", "x" * 128, "123"]
BAD_ALIASES = [n for n in BAD_NAMES if n is not None] + ["123", "0"]  # None means "no alias"


def refused(call, subject: object, what: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(f"{what} {subject!r}")):
        call()


def test_bad_model_names_are_refused_everywhere(model_store, rng):
    model = random_model(rng, n_features=1)
    for name in BAD_NAMES:
        refused(lambda: model_store.publish(name, model), name, "model name")
        refused(lambda: model_store.resolve(name), name, "model name")
        refused(lambda: model_store.load(name), name, "model name")
        refused(lambda: model_store.set_alias(name, "production", 1), name, "model name")
    assert model_store.list_models() == []


def test_bad_aliases_are_refused_everywhere(model_store, rng):
    model = random_model(rng, n_features=1)
    model_store.publish("m", model)
    for alias in BAD_ALIASES:
        refused(lambda: model_store.publish("m", model, aliases=["ok", alias]), alias, "alias")
        refused(lambda: model_store.resolve("m", alias=alias), alias, "alias")
        refused(lambda: model_store.load("m", alias=alias), alias, "alias")
        refused(lambda: model_store.set_alias("m", alias, 1), alias, "alias")
    [summary] = model_store.list_models()
    assert (summary.versions, dict(summary.aliases)) == ((1,), {})


def test_good_names_are_accepted(model_store, rng):
    for name in GOOD_NAMES:
        assert model_store.publish(name, random_model(rng, n_features=1), aliases=[name[:127] + "a"]) == 1
    assert [s.name for s in model_store.list_models()] == sorted(GOOD_NAMES)


def test_bad_versions_are_refused(model_store, rng):
    model_store.publish("m", random_model(rng, n_features=1))
    for version in (0, -1, True, "2", 1.0):
        refused(lambda: model_store.resolve("m", version=version), version, "version")
        refused(lambda: model_store.set_alias("m", "production", version), version, "version")


def test_a_version_and_an_alias_together_are_refused(model_store, rng):
    model_store.publish("m", random_model(rng, n_features=1), aliases=["production"])
    with pytest.raises(InvalidInput, match="not both"):
        model_store.load("m", version=1, alias="production")


def test_publishing_something_that_is_not_a_model_is_refused(model_store, rng):
    with pytest.raises(InvalidInput, match="expected a store.model.Model, got dict"):
        model_store.publish("m", {"not": "a model"})
    with pytest.raises(InvalidInput, match="aliases must be a list"):
        model_store.publish("m", random_model(rng, n_features=1), aliases="production")
    assert model_store.list_models() == []


def test_a_cpt_larger_than_one_store_value_is_refused_before_any_row(model_store, rng, monkeypatch):
    """SQLite answered such a CPT with "string or blob too big" after serialising the whole
    model (issue 26); the store says which table and which limit first. The limit is scaled
    down: a real one would take a GB to build."""
    from bnserve.store.db import rows

    model = random_model(rng, n_features=2)
    node = max((n for n in model.networks[0].nodes), key=lambda n: n.cpt.nbytes)
    monkeypatch.setattr(rows, "MAX_VALUE_BYTES", node.cpt.nbytes - 1)
    message = f"publishing model 'big': the CPT of {node.name!r} (network 0, shape {node.cpt.shape}) takes"
    with pytest.raises(InvalidInput, match=re.escape(message)) as refusal:
        model_store.publish("big", model)
    assert "--max-cpt-cells" in refusal.value.message and model_store.list_models() == []
    monkeypatch.setattr(rows, "MAX_VALUE_BYTES", node.cpt.nbytes)
    assert model_store.publish("big", model) == 1
