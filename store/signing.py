"""Signed versions: who may publish a model a server will load.

The version checksum proves only that the rows were not changed *by accident*: anyone who
can write the store can change a CPT and recompute it. A publisher holding an Ed25519
private key signs each version's ``signed_message`` (model name, version number, content
checksum, description and tags); a server holding the public keys (``KeyRing``) loads only
versions signed by one of them. The servers never hold what signs (docs/design.md, Signed
models).

Key files are PEM: the private key unencrypted PKCS#8 (``openssl genpkey -algorithm
ed25519`` or ``trainer keygen``), public keys SubjectPublicKeyInfo, several in one file for
a rotation. ``cryptography`` is imported only when a key is read, so a command that signs
nothing does not pay for it. Nothing here logs or prints a private key.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bnserve.store.errors import BnServeError, IntegrityError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

MESSAGE_FORMAT = "bnserve-version-signature-v1"  # changes if what is signed ever changes
KEY_ID_HEX = 16  # characters of sha256(raw public key) that name a key
SIGNATURE_HEX = 128  # an Ed25519 signature: 64 bytes
PRIVATE_KEY_FILE = "signing-key.pem"  # the names ``trainer keygen`` writes
PUBLIC_KEY_FILE = "verify-key.pem"
_PEM_PUBLIC = b"-----BEGIN PUBLIC KEY-----"


class KeyFileError(BnServeError):
    """A key file that cannot be used: unreadable, not an Ed25519 PEM key, or readable by others."""

    code = "FAILED_PRECONDITION"


@dataclass(frozen=True)
class Signature:
    """What a version row stores: the signer's key id and the signature, both in hex."""

    key_id: str
    value: str


def signed_message(name: str, version: int, checksum: str, description: str | None, tags: Mapping[str, str]) -> bytes:
    """The bytes a version's signature covers: canonical JSON (sorted keys, ASCII), so a
    text can never run into the next field. The version number is in it: a signed version
    copied under a newer number (to pass as the latest) does not verify."""
    document = {
        "format": MESSAGE_FORMAT,
        "name": name,
        "version": version,
        "checksum": checksum,
        "description": description,
        "tags": dict(sorted(tags.items())),
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def key_id(public: Ed25519PublicKey) -> str:
    """The short name of a public key: the start of the sha256 of its 32 raw bytes."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return hashlib.sha256(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()[:KEY_ID_HEX]


class SigningKey:
    """An Ed25519 private key, read from ``path`` (``--signing-key``)."""

    def __init__(self, key: Ed25519PrivateKey, path: str):
        self._key = key
        self.path = path
        self.key_id = key_id(key.public_key())

    def __repr__(self) -> str:
        return f"SigningKey({self.path!r}, key_id={self.key_id!r})"

    @classmethod
    def read(cls, path: str, flag: str = "--signing-key") -> SigningKey:
        """The key in ``path``; KeyFileError naming the file when it cannot be read, is not
        an unencrypted Ed25519 private key, or is readable by users other than its owner."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        data = _read(path, flag)
        _check_private_mode(path, flag)
        try:
            key: Any = load_pem_private_key(data, password=None)
        except TypeError:
            raise KeyFileError(f"{flag} {path}: the private key is encrypted; give it unencrypted") from None
        except ValueError:
            raise KeyFileError(f"{flag} {path}: not a PEM private key (make one with `trainer keygen`)") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"{flag} {path}: a {type(key).__name__.removeprefix('_')}, not an Ed25519 private key")
        return cls(key, path)

    def sign(self, message: bytes) -> Signature:
        return Signature(self.key_id, self._key.sign(message).hex())

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        return self._key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


class KeyRing:
    """The public keys a reader accepts signatures of, by key id (several: a rotation)."""

    def __init__(self, keys: Mapping[str, Ed25519PublicKey], path: str):
        self._keys = dict(keys)
        self.path = path

    def __repr__(self) -> str:
        return f"KeyRing({self.path!r}, key_ids={sorted(self._keys)!r})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    @classmethod
    def read(cls, path: str, flag: str = "--verify-key") -> KeyRing:
        """Every PEM public key in ``path`` (one or more, concatenated); KeyFileError naming
        the file when there is none or one is not an Ed25519 public key."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        data = _read(path, flag)
        if b"PRIVATE KEY-----" in data:
            raise KeyFileError(
                f"{flag} {path}: holds a private key; give the public key (`trainer keygen` writes both)"
            )
        blocks = [_PEM_PUBLIC + block for block in data.split(_PEM_PUBLIC)[1:]]
        if not blocks:
            raise KeyFileError(f"{flag} {path}: no PEM public key ({_PEM_PUBLIC.decode()}) in it")
        keys: dict[str, Ed25519PublicKey] = {}
        for i, block in enumerate(blocks, 1):
            try:
                key: Any = load_pem_public_key(block)
            except ValueError:
                raise KeyFileError(f"{flag} {path}: public key {i} is not a valid PEM public key") from None
            if not isinstance(key, Ed25519PublicKey):
                raise KeyFileError(f"{flag} {path}: public key {i} is not an Ed25519 key")
            keys[key_id(key)] = key
        return cls(keys, path)

    def check(
        self,
        name: str,
        version: int,
        checksum: str,
        description: str | None,
        tags: Mapping[str, str],
        signature: Signature | None,
    ) -> None:
        """IntegrityError naming the version unless ``signature`` is one of our keys' over
        exactly these fields."""
        from cryptography.exceptions import InvalidSignature

        where = f"model {name!r} version {version}"
        if signature is None:
            raise IntegrityError(f"{where} is unsigned, and this reader accepts signed versions only ({self.path})")
        key = self._keys.get(signature.key_id)
        if key is None:
            raise IntegrityError(
                f"{where} is signed by key {signature.key_id}, which is not among the keys in {self.path} "
                f"({', '.join(self.key_ids)})"
            )
        try:
            key.verify(bytes.fromhex(signature.value), signed_message(name, version, checksum, description, tags))
        except (InvalidSignature, ValueError):
            raise IntegrityError(
                f"{where}: its signature (key {signature.key_id}) does not match its content, description and tags; "
                "the stored rows were altered or forged"
            ) from None


def generate(directory: str) -> tuple[str, str, str]:
    """A new key pair in ``directory`` (created if missing): the private key readable by its
    owner only, the public key for the servers; (private path, public path, key id). An
    existing key file is never overwritten."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    key = Ed25519PrivateKey.generate()
    private = os.path.join(directory, PRIVATE_KEY_FILE)
    public = os.path.join(directory, PUBLIC_KEY_FILE)
    try:
        os.makedirs(directory, exist_ok=True)
        for path in (private, public):
            if os.path.lexists(path):
                raise KeyFileError(f"{path} already exists; keygen never overwrites a key (move it away first)")
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        _write_new(private, pem, 0o600)
        _write_new(public, SigningKey(key, private).public_pem(), 0o644)
    except OSError as exc:
        raise KeyFileError(f"cannot write the keys into {directory}: {exc.strerror or exc}") from None
    return private, public, key_id(key.public_key())


def _write_new(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # whatever the umask


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise KeyFileError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None


def _check_private_mode(path: str, flag: str) -> None:
    """A private key that other users may read is refused, as ssh refuses one: whoever can
    read it can sign. (A Kubernetes Secret mounts 0644 unless told: set defaultMode 0400.)"""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"{flag} {path}: the private key is readable by other users (mode {mode:04o}); "
            f"make it readable by its owner only: chmod 600 {path}"
        )
