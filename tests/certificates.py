"""Test certificates made with the ``openssl`` command: a CA, a server certificate it
signed (SAN IP:127.0.0.1 and DNS:localhost), a client certificate it signed, and a
second, unrelated CA with a server and a client certificate of its own.

Import as ``from tests.certificates import make_pki``. EC P-256 keys, valid for two days.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Pair  # signed the two below
    server: Pair
    client: Pair
    other_ca: Pair  # unrelated to ca; signed the two below
    other_server: Pair
    other_client: Pair


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


def _key_and_request(directory: Path, name: str, subject: str) -> Path:
    _openssl(
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
        cwd=directory,
    )
    return directory / f"{name}.csr"


def _ca(directory: Path, name: str) -> Pair:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-subj",
        f"/CN=bnserve test {name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )
    return Pair(directory / f"{name}.pem", directory / f"{name}.key")


def _signed(directory: Path, ca: Pair, name: str, subject: str, extensions: str) -> Pair:
    _key_and_request(directory, name, subject)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        str(ca.cert),
        "-CAkey",
        str(ca.key),
        "-CAcreateserial",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        cwd=directory,
    )
    return Pair(directory / f"{name}.pem", directory / f"{name}.key")


SERVER_EXT = (
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
    "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
)
CLIENT_EXT = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    other_ca = _ca(directory, "other-ca")
    return Pki(
        ca=ca,
        server=_signed(directory, ca, "server", "/CN=localhost", SERVER_EXT),
        client=_signed(directory, ca, "client", "/CN=bnserve test client", CLIENT_EXT),
        other_ca=other_ca,
        other_server=_signed(directory, other_ca, "other-server", "/CN=localhost", SERVER_EXT),
        other_client=_signed(directory, other_ca, "other-client", "/CN=bnserve test other client", CLIENT_EXT),
    )
