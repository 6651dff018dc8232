"""Transport security and authentication for the gRPC port.

TLS: ``server serve --tls-cert FILE --tls-key FILE`` serves the gRPC port over TLS;
``--tls-client-ca FILE`` also requires every client to present a certificate signed by
that CA (mutual TLS). The files are read once, at start; a file that cannot be read or
does not hold what it should is an error then, naming the file (never its contents).

Bearer token: ``--auth-token-file FILE`` holds one token per line (several lines let a
token be rotated: every listed one is accepted; blank lines and the whitespace around a
token are ignored). Every call but grpc.health.v1.Health must then carry the metadata
``authorization: Bearer <token>``, else it fails with UNAUTHENTICATED. The file is read
at start (empty is an error) and read again when it changes (its mtime, size or inode,
looked at no more than once a second): a mounted Kubernetes Secret can be updated in
place. A change that leaves the file unreadable or empty is logged and ignored: the
tokens read last stay in force.

Nothing here logs or prints a token or the contents of a key.
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bnserve.store.errors import BnServeError

if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)

UNAUTHENTICATED_MESSAGE = "missing or invalid bearer token"
AUTHORIZATION = "authorization"  # gRPC metadata keys are lower case
BEARER = "bearer "
RELOAD_CHECK_SECONDS = 1.0
PUBLIC_SERVICES = frozenset({"grpc.health.v1.Health"})  # reachable without a token: probes


class SecurityConfigError(BnServeError):
    """A certificate, key or token file that cannot be used (exit code 1 at start)."""

    code = "FAILED_PRECONDITION"


# ---------------------------------------------------------------------------- TLS


@dataclass(frozen=True)
class TlsMaterial:
    """The PEM bytes grpc needs, read and checked."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None  # set: clients must present a certificate this CA signed

    def server_credentials(self) -> grpc.ServerCredentials:
        import grpc

        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def read_file(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SecurityConfigError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None


def _no_password() -> bytes:
    raise SecurityConfigError("encrypted")


def check_certificates(data: bytes, path: str, flag: str) -> bytes:
    """``data`` (returned) holds at least one PEM certificate that OpenSSL parses."""
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise SecurityConfigError(f"{flag} {path}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it")
    try:
        ssl.create_default_context(cadata=data.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError):
        raise SecurityConfigError(f"{flag} {path}: not a valid PEM certificate file") from None
    return data


def check_private_key(data: bytes, path: str, flag: str) -> bytes:
    """``data`` (returned) looks like an unencrypted PEM private key."""
    if b"PRIVATE KEY-----" not in data:
        raise SecurityConfigError(f"{flag} {path}: no PEM private key (-----BEGIN ... PRIVATE KEY-----) in it")
    if b"ENCRYPTED" in data:
        raise SecurityConfigError(f"{flag} {path}: the private key is encrypted; give it unencrypted")
    return data


def load_tls(cert: str, key: str, client_ca: str | None = None) -> TlsMaterial:
    """Read and check the server's certificate chain, its private key (which must match
    the certificate, and not be encrypted) and, for mutual TLS, the client CA bundle."""
    chain = read_file(cert, "--tls-cert")
    private_key = read_file(key, "--tls-key")
    ca = read_file(client_ca, "--tls-client-ca") if client_ca is not None else None
    check_certificates(chain, cert, "--tls-cert")
    check_private_key(private_key, key, "--tls-key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except SecurityConfigError:
        raise SecurityConfigError(f"--tls-key {key}: the private key is encrypted; give it unencrypted") from None
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or ""
        if "MISMATCH" in reason.upper():
            raise SecurityConfigError(f"--tls-key {key}: does not match the certificate in --tls-cert {cert}") from None
        raise SecurityConfigError(f"--tls-key {key}: not a valid PEM private key for --tls-cert {cert}") from None
    if ca is not None and client_ca is not None:
        check_certificates(ca, client_ca, "--tls-client-ca")
    return TlsMaterial(chain, private_key, ca)


# ---------------------------------------------------------------------------- bearer token


def parse_tokens(data: bytes, path: str, flag: str = "--auth-token-file") -> tuple[bytes, ...]:
    """The tokens in a token file: one per line, blank lines and surrounding whitespace
    ignored. Each must be printable ASCII without spaces (what a metadata value can carry)."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise SecurityConfigError(f"{flag} {path}: holds non-ASCII bytes; a token is printable ASCII") from None
    tokens = []
    for number, line in enumerate(text.splitlines(), 1):
        token = line.strip()
        if not token:
            continue
        if any(not ("!" <= c <= "~") for c in token):
            raise SecurityConfigError(
                f"{flag} {path}: line {number} holds a space or a control character inside its token"
            )
        tokens.append(token.encode("ascii"))
    if not tokens:
        raise SecurityConfigError(f"{flag} {path}: holds no token (the file is empty or blank)")
    return tuple(dict.fromkeys(tokens))


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_mtime_ns, st.st_size, st.st_ino


class TokenFile:
    """The accepted bearer tokens, read from ``path`` at construction (errors raise
    SecurityConfigError) and again when the file changes (looked at once a second at most,
    from the calls that need the tokens)."""

    def __init__(self, path: str):
        self.path = path
        try:
            stamp = _stamp(os.stat(path))
        except OSError as exc:
            raise SecurityConfigError(f"--auth-token-file {path}: cannot read it: {exc.strerror or exc}") from None
        self._tokens = parse_tokens(read_file(path, "--auth-token-file"), path)
        self._stamp: tuple[int, int, int] | None = stamp  # None: the file could not be read last time
        self._next_check = time.monotonic() + RELOAD_CHECK_SECONDS
        self._reloading = threading.Lock()

    def __len__(self) -> int:
        return len(self._tokens)

    def tokens(self) -> tuple[bytes, ...]:
        if time.monotonic() >= self._next_check and self._reloading.acquire(blocking=False):
            try:
                self._next_check = time.monotonic() + RELOAD_CHECK_SECONDS
                self._reload_if_changed()
            finally:
                self._reloading.release()
        return self._tokens

    def _reload_if_changed(self) -> None:
        try:
            stamp = _stamp(os.stat(self.path))
        except OSError as exc:
            if self._stamp is not None:
                log.warning(
                    "--auth-token-file %s: cannot read it (%s); the previous tokens stay in force",
                    self.path,
                    exc.strerror or exc,
                )
                self._stamp = None
            return
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            tokens = parse_tokens(read_file(self.path, "--auth-token-file"), self.path)
        except SecurityConfigError as exc:
            log.warning("%s; the previous tokens stay in force", exc.message)
            return
        self._tokens = tokens
        log.info("--auth-token-file %s changed: %d token(s) now accepted", self.path, len(tokens))

    def authorized(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> bool:
        """Whether call metadata (``(key, value)`` pairs) carries ``authorization: Bearer
        <one of the tokens>``; compared in constant time, against every token."""
        value = None
        for key, v in metadata or ():
            if key == AUTHORIZATION:
                value = v
                break
        if value is None:
            return False
        if isinstance(value, str):
            try:
                value = value.encode("ascii")
            except UnicodeEncodeError:
                return False
        if len(value) <= len(BEARER) or value[: len(BEARER)].lower() != BEARER.encode():
            return False
        presented = value[len(BEARER) :].strip()
        match = False
        for token in self.tokens():
            match |= hmac.compare_digest(presented, token)
        return match


def is_protected(service: str) -> bool:
    """Whether calls to ``service`` (its full name) need the bearer token when one is set."""
    return service not in PUBLIC_SERVICES
