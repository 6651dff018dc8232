"""Bulk loading (issue 30): ``ModelStore.load_many`` reads many versions in a few selects,
however many, each verified as ``load`` verifies one, and refuses a bad version alone.
SQLite and PostgreSQL; tampering is done by writing the tables directly."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sqlalchemy as sa

from bnserve.store.db import ModelStore
from bnserve.store.db.model_store import LOAD_CHUNK
from bnserve.store.db.rows import model_to_rows
from bnserve.store.db.tables import SqlCpt, SqlModel, SqlModelVersion
from bnserve.store.errors import IntegrityError, InvalidModel, NotFound
from bnserve.store.predictor import compile_model
from bnserve.store.signing import KeyRing, SigningKey, generate
from tests.model_factory import random_model
from tests.store.test_round_trip import assert_same_model
from tests.store.test_signing import execute

Key = tuple[str, int]


def publish_many(store: ModelStore, n: int, seed: int = 0, signer: SigningKey | None = None) -> list[Key]:
    """``n`` models of assorted shapes, some aliased, tagged or described, and a second
    version of the first; their (name, version) keys."""
    rng = np.random.default_rng(seed)
    keys = []
    for i in range(n):
        model = random_model(rng, n_features=2 + i % 4, n_networks=1 + i % 2, numeric=0.3 * (i % 2))
        version = store.publish(
            f"m{i}",
            model,
            aliases=["production", "blue"] if i % 2 else [],
            description=f"model {i}" if i % 3 else None,
            tags={"team": "ml", "i": str(i)} if i % 3 == 0 else None,
            signer=signer,
        )
        keys.append((f"m{i}", version))
    keys.append(("m0", store.publish("m0", random_model(rng), aliases=["staging"], signer=signer)))
    return keys


def statements(store: ModelStore) -> list[str]:
    """Every statement the store's engine sends from now on."""
    seen: list[str] = []
    sa.event.listen(
        store.engine, "before_cursor_execute", lambda conn, cursor, statement, *rest: seen.append(statement)
    )
    return seen


def of(name: str, table=SqlCpt):
    """The where clause of model ``name``'s rows in ``table``."""
    return table.model_id == sa.select(SqlModel.id).where(SqlModel.name == name).scalar_subquery()


def flip_a_cpt_byte(url: str, name: str) -> None:
    """One byte of one CPT blob of ``name``'s version 1 changed, its sha256 left as published."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            node, data = conn.execute(
                sa.select(SqlCpt.node, SqlCpt.data).where(of(name), SqlCpt.version == 1).order_by(SqlCpt.node).limit(1)
            ).one()
            conn.execute(
                sa.update(SqlCpt)
                .where(of(name), SqlCpt.version == 1, SqlCpt.node == node)
                .values(data=bytes([data[0] ^ 0xFF]) + data[1:])
            )
    finally:
        engine.dispose()


def test_a_bulk_load_equals_the_single_loads_version_for_version(model_store):
    keys = publish_many(model_store, 7)
    wanted = [*reversed(keys), keys[0]]  # any order, a repeat read once
    many = model_store.load_many(wanted)
    assert list(many) == list(reversed(keys))
    for key in keys:
        bulk, single = many[key], model_store.load(key[0], version=key[1])
        assert isinstance(bulk, type(single))
        assert dataclasses.replace(bulk, model=None) == dataclasses.replace(single, model=None)
        assert_same_model(bulk.model, single.model)
    assert many[("m1", 1)].aliases == ("blue", "production") and many[("m0", 2)].aliases == ("staging",)
    assert dict(many[("m0", 1)].tags) == {"i": "0", "team": "ml"} and many[("m2", 1)].description == "model 2"


def test_the_number_of_selects_does_not_grow_with_the_versions(model_store):
    keys = publish_many(model_store, 12)
    counts = []
    for n in (2, len(keys)):
        seen = statements(model_store)
        loaded = model_store.load_many(keys[:n])
        assert all(not isinstance(v, Exception) for v in loaded.values())
        counts.append(len(seen))
    assert counts[0] == counts[1] <= 8  # six selects, and the transaction's own statements


def test_versions_past_one_chunk_are_read_in_a_few_selects_per_chunk(model_store, monkeypatch):
    keys = publish_many(model_store, 5)
    monkeypatch.setattr("bnserve.store.db.model_store.LOAD_CHUNK", 2)
    seen = statements(model_store)
    loaded = model_store.load_many(keys)
    assert all(not isinstance(v, Exception) for v in loaded.values()) and len(loaded) == 6
    assert sum(s.lstrip().upper().startswith("SELECT") for s in seen) == 3 * 6  # chunks of 2, 2 and 2
    assert LOAD_CHUNK >= 100


def test_a_version_with_an_altered_cpt_is_refused_alone(model_store, store_url):
    keys = publish_many(model_store, 6)
    flip_a_cpt_byte(store_url, "m3")
    loaded = model_store.load_many([*keys, ("m3", 7), ("nobody", 1)])
    refused = loaded[("m3", 1)]
    assert isinstance(refused, IntegrityError) and "model 'm3' version 1: CPT of node" in refused.message
    with pytest.raises(IntegrityError) as single:
        model_store.load("m3", version=1)
    assert single.value.message == refused.message
    assert all(not isinstance(loaded[k], Exception) for k in keys if k != ("m3", 1))
    assert isinstance(loaded[("m3", 7)], NotFound) and isinstance(loaded[("nobody", 1)], NotFound)


def test_a_version_whose_model_breaks_the_contract_is_refused_alone(model_store, store_url):
    """Rows whose checksums agree but whose model fails validate(): refused by its InvalidModel."""
    keys = publish_many(model_store, 3)
    with ModelStore(store_url) as store:
        original = store.load("m1", version=1).model
    net = original.networks[0]
    broken = dataclasses.replace(net.nodes[0], cpt=np.full_like(net.nodes[0].cpt, 0.9))  # rows sum past 1
    networks = (dataclasses.replace(net, nodes=(broken, *net.nodes[1:])), *original.networks[1:])
    forged = dataclasses.replace(original, networks=networks)
    rows = model_to_rows(forged)
    cpt = rows.cpts[0]
    execute(
        store_url,
        sa.update(SqlCpt)
        .where(of("m1"), SqlCpt.network == 0, SqlCpt.node == cpt["node"])
        .values(data=cpt["data"], sha256=cpt["sha256"]),
        sa.update(SqlModelVersion).where(of("m1", SqlModelVersion)).values(checksum=rows.header["checksum"]),
    )
    loaded = model_store.load_many(keys)
    assert isinstance(loaded[("m1", 1)], InvalidModel)
    assert all(not isinstance(loaded[k], Exception) for k in keys if k != ("m1", 1))


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[SigningKey, KeyRing]:
    private, public, _ = generate(str(tmp_path_factory.mktemp("keys")))
    return SigningKey.read(private), KeyRing.read(public)


def test_a_version_with_a_forged_signature_is_refused_alone_by_a_reader_with_the_key(store_url, keys):
    signer, ring = keys
    with ModelStore(store_url) as store:
        published = publish_many(store, 5, signer=signer)
    execute(store_url, sa.update(SqlModelVersion).where(of("m2", SqlModelVersion)).values(description="approved"))
    with ModelStore(store_url, verify=ring) as store:
        loaded = store.load_many(published)
        with pytest.raises(IntegrityError) as single:
            store.load("m2", version=1)
    refused = loaded[("m2", 1)]
    assert isinstance(refused, IntegrityError) and refused.message == single.value.message
    assert "does not match" in refused.message
    assert all(not isinstance(loaded[k], Exception) and loaded[k].signature for k in published if k != ("m2", 1))


def test_versions_of_one_schema_share_their_decoded_variables_and_each_its_cpt_bytes(model_store):
    """What a thousand models of a few schemas repeat is decoded once per bulk read (the same
    Variable objects), and each version's float64 CPTs are views of one array, one copy of
    its bytes: issue 30, a start spent some 2 ms a version rebuilding."""
    rng = np.random.default_rng(5)
    models = {name: random_model(rng, cardinalities=(2, 2), n_networks=2) for name in ("a", "b")}
    keys = [(name, model_store.publish(name, model)) for name, model in models.items()]
    many = model_store.load_many(keys)
    a, b = (many[key].model for key in keys)
    assert a.variables == b.variables and all(x is y for x, y in zip(a.variables, b.variables))
    for key in keys:
        model = many[key].model
        cpts = [node.cpt for net in model.networks for node in net.nodes]
        assert len({id(c.base) for c in cpts}) == 1 and cpts[0].base is not None
        assert all(c.flags.writeable and c.dtype == np.dtype("<f8") for c in cpts)
        assert_same_model(model, models[key[0]])


def test_a_version_mixing_float_types_and_a_big_endian_cpt_round_trips_in_a_bulk_read(model_store):
    """The CPTs not stored as little-endian float64 take the long way, beside the others."""
    rng = np.random.default_rng(6)
    model = random_model(rng, n_features=4)
    net = model.networks[0]
    nodes = list(net.nodes)
    nodes[1] = dataclasses.replace(nodes[1], cpt=nodes[1].cpt.astype(np.float32))
    nodes[2] = dataclasses.replace(nodes[2], cpt=nodes[2].cpt.astype(">f8"))
    mixed = dataclasses.replace(model, networks=(dataclasses.replace(net, nodes=tuple(nodes)),)).validate()
    plain = random_model(rng)
    keys = [("mixed", model_store.publish("mixed", mixed)), ("plain", model_store.publish("plain", plain))]
    many = model_store.load_many(keys)
    assert_same_model(many[keys[0]].model, mixed)
    assert_same_model(many[keys[1]].model, plain)
    assert many[keys[0]].model.networks[0].nodes[1].cpt.dtype == np.float32


def test_versions_of_one_bulk_read_compile_to_features_that_share_their_lookups(model_store):
    """The features a compiled model reads requests with (each Variable with its model's
    missing markers) are shared by the versions that share their Variables, with the label
    lookups built from them once, not once a version."""
    rng = np.random.default_rng(7)
    keys = []
    for name in ("a", "b"):
        model = random_model(rng, cardinalities=(2, 2))
        model = dataclasses.replace(model, metadata={**model.metadata, "preprocessing": {"na_values": ["NA", "?"]}})
        keys.append((name, model_store.publish(name, model)))
    loaded = model_store.load_many(keys)
    a, b = (compile_model(loaded[key].model) for key in keys)
    assert a.features == b.features and all(x is y for x, y in zip(a.features, b.features))
    assert all(v.markers == {"NA", "?"} and v.code_of("NA") == v.missing_code for v in a.features)
    assert a.features[0].label_codes() is b.features[0].label_codes()


def test_a_bulk_read_decodes_each_distinct_json_text_once(model_store, monkeypatch):
    """States, cuts and shapes repeat across versions of a few schemas: decoded once each,
    and only the header's params and metadata once per version."""
    rng = np.random.default_rng(8)
    keys = [(f"s{i}", model_store.publish(f"s{i}", random_model(rng, cardinalities=(3, 3)))) for i in range(12)]
    texts: list[str] = []
    loads = json.loads
    monkeypatch.setattr("bnserve.store.db.rows.json.loads", lambda text: texts.append(text) or loads(text))
    loaded = model_store.load_many(keys)
    assert all(not isinstance(v, Exception) for v in loaded.values())
    repeated = [t for t in texts if texts.count(t) > 1 and not t.startswith("{")]
    assert not repeated and len(texts) < 2 * len(keys) + 40
