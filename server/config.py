"""What ``server serve`` runs with: every setting and its default, in one place (the CLI's
flags and ``BNSERVE_*`` variables take their defaults from here)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from bnserve.server.limits import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_ROWS
from bnserve.store.predictor import DEFAULT_PLAN_CACHE_BYTES
from bnserve.store.timeouts import DEFAULT_TIMEOUTS, StoreTimeouts


@dataclass(frozen=True)
class ServeConfig:
    store_url: str
    host: str = "0.0.0.0"
    port: int = 50051
    metrics_port: int = 9464
    poll_seconds: float = 10.0
    poll_stall_seconds: float = 60.0  # a poll running longer is warned about and counted (a store that hangs)
    compile: str = "eager"  # when a loaded version is compiled: "eager" at load, "lazy" on its first request
    grace_seconds: float = 5.0
    threads: int = 16
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_rows: int = DEFAULT_MAX_ROWS
    max_streams_per_connection: int = 100  # calls one client connection may have open at once
    idle_seconds: float = 300.0  # a connection with no call open for this long is closed
    plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES  # missing-value plans kept, all models together
    worker: bool = False  # one of several processes on the port, started by a parent (bnserve.server.app)
    tls_cert: str | None = None  # PEM certificate chain; with tls_key, the port speaks TLS only
    tls_key: str | None = None  # PEM private key (unencrypted) of tls_cert
    tls_client_ca: str | None = None  # PEM CA bundle: clients must present a certificate it signed
    auth_token_file: str | None = None  # bearer tokens, one a line: every call but health needs one
    workers: int = 1  # processes sharing the port (server.workers); 1: this process serves
    log_level: str = "INFO"
    store_connect_timeout: float = DEFAULT_TIMEOUTS.connect_seconds  # seconds; bnserve.store.timeouts
    store_statement_timeout: float = DEFAULT_TIMEOUTS.statement_seconds  # seconds, 0: no limit

    @property
    def store_timeouts(self) -> StoreTimeouts:
        return StoreTimeouts(self.store_connect_timeout, self.store_statement_timeout)


DEFAULTS = {f.name: f.default for f in fields(ServeConfig) if f.name != "store_url"}
