"""Signed versions (issue 27 item 9): a store opened with a key ring loads only versions
signed by one of its keys over exactly what is stored. Each forgery is made by writing the
tables directly, as anyone with write access to the store can: the unkeyed checksums are
recomputed, so only the signature tells. SQLite and PostgreSQL; key files as users make them.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import sqlalchemy as sa

from bnserve.store.db import ModelStore
from bnserve.store.db.rows import model_to_rows
from bnserve.store.db.tables import SqlCpt, SqlModel, SqlModelVersion, SqlModelVersionTag
from bnserve.store.errors import IntegrityError
from bnserve.store.model import Model
from bnserve.store.signing import KeyFileError, KeyRing, SigningKey, generate, signed_message
from tests.e2e.serving import write_version
from tests.model_factory import random_model

DESCRIPTION = "chess, nb"
TAGS = {"team": "ml", "data": "2026-11"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[SigningKey, KeyRing, SigningKey]:
    """(our signing key, the ring of our public key, another publisher's signing key)."""
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    private, public, _ = generate(str(ours))
    other, _, _ = generate(str(theirs))
    return SigningKey.read(private), KeyRing.read(public), SigningKey.read(other)


def model(seed: int = 1) -> Model:
    return random_model(np.random.default_rng(seed), n_features=3, cardinalities=(2, 3))


def publish_signed(url: str, signer: SigningKey, seed: int = 1) -> int:
    with ModelStore(url) as store:
        return store.publish("m", model(seed), ["production"], description=DESCRIPTION, tags=TAGS, signer=signer)


def load(url: str, ring: KeyRing | None, version: int = 1, name: str = "m"):
    with ModelStore(url, verify=ring) as store:
        return store.load(name, version=version)


def execute(url: str, *statements) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(statement)
    finally:
        engine.dispose()


def version_row(url: str, version: int = 1) -> dict:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(
                conn.execute(sa.select(SqlModelVersion).where(SqlModelVersion.version == version)).one()._mapping
            )
    finally:
        engine.dispose()


def test_a_signed_version_round_trips_and_says_who_signed_it(store_url, keys):
    signer, ring, _ = keys
    assert publish_signed(store_url, signer) == 1
    loaded = load(store_url, ring)
    assert loaded.signature is not None and loaded.signature.key_id == signer.key_id == ring.key_ids[0]
    assert (loaded.description, dict(loaded.tags)) == (DESCRIPTION, dict(sorted(TAGS.items())))
    with ModelStore(store_url) as store:  # a store opened without keys reads it as before
        assert store.load("m").signature == loaded.signature


def forge_content(url: str) -> None:
    """One CPT's rows permuted (still normalised), its sha256 and the version checksum recomputed."""
    with ModelStore(url) as store:
        original = store.load("m", version=1).model
    net = original.networks[0]
    node = net.nodes[0]
    forged_node = dataclasses.replace(node, cpt=np.ascontiguousarray(node.cpt[::-1]))
    forged = dataclasses.replace(original, networks=(dataclasses.replace(net, nodes=(forged_node, *net.nodes[1:])),))
    rows = model_to_rows(forged)
    cpt = rows.cpts[0]
    execute(
        url,
        sa.update(SqlCpt)
        .where(SqlCpt.version == 1, SqlCpt.network == 0, SqlCpt.node == cpt["node"])
        .values(data=cpt["data"], sha256=cpt["sha256"]),
        sa.update(SqlModelVersion).where(SqlModelVersion.version == 1).values(checksum=rows.header["checksum"]),
    )


TAMPERING = {
    "content": (forge_content, "does not match its content, description and tags"),
    "description": (
        lambda url: execute(url, sa.update(SqlModelVersion).values(description="approved by QA")),
        "does not match",
    ),
    "description removed": (
        lambda url: execute(url, sa.update(SqlModelVersion).values(description=None)),
        "does not match",
    ),
    "tag value": (
        lambda url: execute(
            url, sa.update(SqlModelVersionTag).where(SqlModelVersionTag.key == "team").values(value="x")
        ),
        "does not match",
    ),
    "tag added": (
        lambda url: execute(
            url, sa.insert(SqlModelVersionTag).values(model_id=1, version=1, key="approved", value="yes")
        ),
        "does not match",
    ),
    "tag removed": (
        lambda url: execute(url, sa.delete(SqlModelVersionTag).where(SqlModelVersionTag.key == "data")),
        "does not match",
    ),
    "unsigned": (
        lambda url: execute(url, sa.update(SqlModelVersion).values(signature_key=None, signature=None)),
        "is unsigned, and this reader accepts signed versions only",
    ),
    "signature not hex": (
        lambda url: execute(url, sa.update(SqlModelVersion).values(signature="zz" * 64)),
        "does not match",
    ),
}


@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_a_version_altered_in_the_store_is_refused_by_a_reader_with_the_key(store_url, keys, tampering):
    signer, ring, _ = keys
    publish_signed(store_url, signer)
    forge, message = TAMPERING[tampering]
    forge(store_url)
    load(store_url, None)  # the unkeyed checksums pass: without a key it loads, as before signing
    with pytest.raises(IntegrityError, match=f"model 'm' version 1.*{message}"):
        load(store_url, ring)


def test_a_model_renamed_in_the_store_is_refused(store_url, keys):
    signer, ring, _ = keys
    publish_signed(store_url, signer)
    execute(store_url, sa.update(SqlModel).values(name="fraud"))
    load(store_url, None, name="fraud")
    with pytest.raises(IntegrityError, match="model 'fraud' version 1: its signature .* does not match"):
        load(store_url, ring, name="fraud")


def test_a_signed_version_replayed_under_a_newer_number_is_refused(store_url, keys):
    """Version 1's rows and signature copied as version 2, which a selector without alias
    would take as the latest: the number is signed, so it does not verify."""
    signer, ring, _ = keys
    publish_signed(store_url, signer)
    row = version_row(store_url)
    copied = {k: row[k] for k in ("description", "signature_key", "signature")}
    write_version(store_url, "m", 2, model(1), columns=copied, tags=TAGS)
    load(store_url, None, version=2)
    with pytest.raises(IntegrityError, match="model 'm' version 2: its signature .* does not match"):
        load(store_url, ring, version=2)
    assert load(store_url, ring, version=1).version == 1


def test_a_version_signed_by_another_key_is_refused(store_url, keys):
    signer, ring, other = keys
    publish_signed(store_url, other)
    with pytest.raises(IntegrityError, match=f"signed by key {other.key_id}, which is not among the keys in"):
        load(store_url, ring)
    # a signature forged with another key but given our key id fails the check, not the lookup
    row = version_row(store_url)
    forged = other.sign(signed_message("m", 1, row["checksum"], DESCRIPTION, TAGS)).value
    execute(store_url, sa.update(SqlModelVersion).values(signature_key=signer.key_id, signature=forged))
    with pytest.raises(IntegrityError, match="does not match"):
        load(store_url, ring)


def test_a_ring_of_several_keys_accepts_each_for_a_rotation(store_url, keys, tmp_path):
    signer, ring, other = keys
    publish_signed(store_url, signer, seed=1)
    publish_signed(store_url, other, seed=2)
    both = tmp_path / "ring.pem"
    both.write_bytes(open(ring.path, "rb").read() + other.public_pem())
    rotation = KeyRing.read(str(both))
    assert set(rotation.key_ids) == {signer.key_id, other.key_id}
    assert [load(store_url, rotation, v).signature.key_id for v in (1, 2)] == [signer.key_id, other.key_id]


def test_the_message_covers_each_field_canonically():
    base = signed_message("m", 1, "ab", "d", {"a": "1", "b": "2"})
    assert signed_message("m", 1, "ab", "d", {"b": "2", "a": "1"}) == base  # tags in any order
    others = [
        signed_message("n", 1, "ab", "d", {"a": "1", "b": "2"}),
        signed_message("m", 2, "ab", "d", {"a": "1", "b": "2"}),
        signed_message("m", 1, "ac", "d", {"a": "1", "b": "2"}),
        signed_message("m", 1, "ab", None, {"a": "1", "b": "2"}),
        signed_message("m", 1, "ab", "", {"a": "1", "b": "2"}),
        signed_message("m", 1, "ab", "d", {"a": "1"}),
        signed_message("m", 1, "ab", 'd","tags":{}', {"a": "1", "b": "2"}),  # no field runs into the next
    ]
    assert len({base, *others}) == len(others) + 1


# ---------------------------------------------------------------------- key files


def test_keygen_writes_a_private_key_for_its_owner_only_and_never_overwrites(tmp_path):
    private, public, key_id = generate(str(tmp_path / "keys"))
    assert os.stat(private).st_mode & 0o777 == 0o600
    assert SigningKey.read(private).key_id == key_id == KeyRing.read(public).key_ids[0]
    with pytest.raises(KeyFileError, match="already exists; keygen never overwrites"):
        generate(str(tmp_path / "keys"))


def test_key_files_that_cannot_be_used_are_refused_naming_the_file(tmp_path):
    private, public, _ = generate(str(tmp_path))
    os.chmod(private, 0o644)
    with pytest.raises(KeyFileError, match=r"--signing-key .*signing-key.pem: the private key is readable by other"):
        SigningKey.read(private)
    os.chmod(private, 0o600)
    with pytest.raises(KeyFileError, match="--verify-key .*: holds a private key; give the public key"):
        KeyRing.read(private)
    with pytest.raises(KeyFileError, match="--signing-key .*verify-key.pem: not a PEM private key"):
        os.chmod(public, 0o600)
        SigningKey.read(public)
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(KeyFileError, match="no PEM public key"):
        KeyRing.read(str(empty))
    with pytest.raises(KeyFileError, match="cannot read it"):
        KeyRing.read(str(tmp_path / "missing.pem"))
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    p256 = tmp_path / "p256.pem"
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    p256.write_bytes(key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(KeyFileError, match="public key 1 is not an Ed25519 key"):
        KeyRing.read(str(p256))


def test_the_python_publish_signs_with_a_key_file(store_url, keys):
    import bnserve

    signer, ring, _ = keys
    assert bnserve.publish(model(), "m", store=store_url, tags=TAGS, signing_key=signer.path) == 1
    assert load(store_url, ring).signature.key_id == signer.key_id
