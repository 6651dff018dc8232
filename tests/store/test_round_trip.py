"""Publish then load gives back the same model, bit for bit, on both backends."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from bnserve.store.db.rows import Decoder
from bnserve.store.model import CLASS, MEAN_POSTERIOR, Model, Network, Node, Variable
from bnserve.store.model.serialization import canonical_json, structure_dict, structure_json
from tests.model_factory import random_model


def assert_same_model(loaded: Model, original: Model) -> None:
    assert loaded.variables == original.variables
    assert (loaded.algorithm, loaded.combination) == (original.algorithm, original.combination)
    assert loaded.params == json.loads(json.dumps(original.params))
    assert loaded.metadata == json.loads(json.dumps(original.metadata))
    assert len(loaded.networks) == len(original.networks)
    for got, want in zip(loaded.networks, original.networks):
        assert [(n.name, n.parents) for n in got.nodes] == [(n.name, n.parents) for n in want.nodes]
        for g, w in zip(got.nodes, want.nodes):
            assert g.cpt.dtype == w.cpt.dtype.newbyteorder("<"), g.name
            assert g.cpt.shape == w.cpt.shape, g.name
            assert g.cpt.tobytes() == w.cpt.astype(w.cpt.dtype.newbyteorder("<")).tobytes(), g.name
    assert loaded.checksum() == original.checksum()


MODELS = {
    "single-dag": dict(n_features=5),
    "class-root-float32": dict(n_features=4, class_has_parents=False, dtype=np.float32),
    "ensemble-mean-joint": dict(n_features=4, n_networks=3, all_features=False),
    "ensemble-mean-posterior": dict(n_features=3, n_networks=2, combination=MEAN_POSTERIOR, cardinalities=(3, 4)),
    "numeric-features": dict(n_features=5, numeric=0.6, cardinalities=(1, 4)),
    "derived-features": dict(n_features=4, numeric=1.0, derived=2, cardinalities=(2, 4)),
}


@pytest.mark.parametrize("kind", MODELS)
def test_round_trip_is_bit_identical(model_store, kind):
    original = random_model(np.random.default_rng(len(kind)), **MODELS[kind])

    version = model_store.publish("rt", original, aliases=["production"])
    loaded = model_store.load("rt", version=version)

    assert (loaded.name, loaded.version, loaded.aliases) == ("rt", 1, ("production",))
    assert loaded.checksum == original.checksum()
    assert isinstance(loaded.created_at_ms, int) and loaded.created_at_ms > 0
    assert_same_model(loaded.model, original)


def test_round_trip_of_unusual_labels_and_byte_order(model_store):
    """Unicode and punctuation in names and labels, an empty label, a big-endian CPT."""
    cls = Variable("Klasse ü", ("ja", "nein", ""), CLASS)
    feat = Variable('x "quoted", 1', ("α", "β/γ"))
    cpt = np.array([[0.25, 0.5, 0.125], [0.75, 0.5, 0.875]], dtype=">f8")
    original = Model(
        (cls, feat),
        (Network((Node(feat.name, (cls.name,), cpt), Node(cls.name, (), np.array([0.5, 0.25, 0.25])))),),
        "naive-bayes",
        params={"alpha": 0.5, "names": ["ü", 'q"']},
        metadata={"note": "snow ☃", "nested": {"k": [1, 2.5, None, False]}},
    ).validate()

    loaded = model_store.load("odd", version=model_store.publish("odd", original)).model

    assert_same_model(loaded, original)
    assert loaded.networks[0].node(feat.name).cpt.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(loaded.networks[0].node(feat.name).cpt, cpt)


def test_versions_number_from_one_per_model(model_store, rng):
    assert [model_store.publish("a", random_model(rng)) for _ in range(3)] == [1, 2, 3]
    assert model_store.publish("b", random_model(rng)) == 1
    assert model_store.load("a", version=2).version == 2


def test_list_models_reads_the_catalogue(model_store, rng):
    assert model_store.list_models() == []
    for name in ("zeta", "Alpha", "mid.v2", "zeta"):
        model_store.publish(name, random_model(rng, n_features=2))
    model_store.set_alias("zeta", "production", 1)

    summaries = model_store.list_models()

    assert [s.name for s in summaries] == ["Alpha", "mid.v2", "zeta"]
    zeta = summaries[2]
    assert (zeta.versions, dict(zeta.aliases), zeta.latest_version) == ((1, 2), {"production": 1}, 2)
    assert (summaries[0].versions, dict(summaries[0].aliases)) == ((1,), {})


def test_reopening_the_store_keeps_everything(store_url, rng):
    from bnserve.store.db import ModelStore

    original = random_model(rng)
    with ModelStore(store_url) as first:
        first.publish("kept", original, aliases=["production"])
    with ModelStore(store_url) as second:  # migrations already at head: a no-op
        loaded = second.load("kept")
    assert loaded.aliases == ("production",)
    assert_same_model(loaded.model, original)


@pytest.mark.parametrize("seed", range(6))
def test_the_checksummed_text_is_the_canonical_json_of_the_structure_with_variables_encoded_once(seed):
    """A bulk load encodes each shared variable once (``Decoder.variable_json``) and splices
    it into the structure's text: that text must be exactly the canonical JSON of
    ``structure_dict``, or every stored checksum would stop matching."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, n_features=4, numeric=0.5, n_networks=1 + seed % 2)
    first = model.variables[1].with_missing_state()
    model = dataclasses.replace(
        model,
        variables=(model.variables[0], first, *model.variables[2:]),
        params={"z": 1, "a": ["é", {"y": None, "b": 2.5}]},
        metadata={"note": "ünïcode", "nested": {"k": [1, 2]}},
    )
    decoder = Decoder()
    want = canonical_json(structure_dict(model))
    assert structure_json(model) == want
    assert structure_json(model, decoder.variable_json) == want
    assert structure_json(model, decoder.variable_json) == want  # from the cache
    assert want == json.dumps(structure_dict(model), sort_keys=True, separators=(",", ":"))
