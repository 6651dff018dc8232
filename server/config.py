"""What ``server serve`` runs with: every setting, its default and its bounds, in one place.
The CLI's flags and ``BNSERVE_*`` variables take their defaults from here, and every
``ServeConfig`` checks itself, so a flag, a variable and a Python caller meet one rule."""

from __future__ import annotations

from dataclasses import dataclass, fields

from bnserve.argtypes import Bound, one_of, seconds, text, whole
from bnserve.server.limits import (
    DEFAULT_BODY_SECONDS,
    DEFAULT_MAX_CONNECTION_INFLIGHT_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_INFLIGHT_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_METADATA_BYTES,
    DEFAULT_MAX_ROWS,
)
from bnserve.server.on_demand import DEFAULT_MAX_LOAD_WAITERS, DEFAULT_STORE_THREADS, DEFAULT_VERSION_CACHE_BYTES
from bnserve.store.errors import InvalidInput
from bnserve.store.predictor import DEFAULT_PLAN_CACHE_BYTES
from bnserve.store.timeouts import DEFAULT_TIMEOUTS, StoreTimeouts

ENV_PREFIX = "BNSERVE_"  # each setting may come from BNSERVE_<FIELD> (e.g. BNSERVE_GRACE_SECONDS)
COMPILE_MODES = ("eager", "lazy")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
MAX_PORT = 65535
MAX_GRPC_BYTES = 2**31 - 1  # gRPC's message limits are C ints
MIN_METADATA_BYTES = 1024  # below it, a call's own headers (:path, :authority, te, a token) would not fit


class ConfigError(InvalidInput):
    """A setting out of its bounds; the message names the field, its flag and its variable."""


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
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES  # a call's headers; more is refused on them
    max_rows: int = DEFAULT_MAX_ROWS
    max_streams_per_connection: int = 100  # calls one client connection may have open at once
    idle_seconds: float = 300.0  # a connection with no call open for this long is closed
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES  # charged to calls in flight; more is refused
    max_connection_inflight_bytes: int = DEFAULT_MAX_CONNECTION_INFLIGHT_BYTES  # the same, per connection
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # connections with calls open; others' calls are refused
    body_seconds: float = DEFAULT_BODY_SECONDS  # a call's request message must arrive within this
    plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES  # missing-value plans kept, all models together
    store_threads: int = DEFAULT_STORE_THREADS  # threads loading versions not in memory, apart from `threads`
    max_load_waiters: int = DEFAULT_MAX_LOAD_WAITERS  # calls one version's load may have waiting
    version_cache_bytes: int = DEFAULT_VERSION_CACHE_BYTES  # compiled tables of versions loaded on demand, kept
    worker: bool = False  # one of several processes on the port, started by a parent (bnserve.server.app)
    tls_cert: str | None = None  # PEM certificate chain; with tls_key, the port speaks TLS only
    tls_key: str | None = None  # PEM private key (unencrypted) of tls_cert
    tls_client_ca: str | None = None  # PEM CA bundle: clients must present a certificate it signed
    auth_token_file: str | None = None  # bearer tokens, one a line: every call but health needs one
    verify_key: str | None = None  # PEM Ed25519 public keys: only versions signed by one of them load
    workers: int = 1  # processes sharing the port (server.workers); 1: this process serves
    log_level: str = "INFO"
    store_connect_timeout: float = DEFAULT_TIMEOUTS.connect_seconds  # seconds; bnserve.store.timeouts
    store_statement_timeout: float = DEFAULT_TIMEOUTS.statement_seconds  # seconds, 0: no limit

    def __post_init__(self) -> None:
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            problem = None if value is None and name in OPTIONAL else bound(value)
            if problem is not None:
                raise ConfigError(f"{name} {problem}, got {value!r} ({flag_of(name)}, {ENV_PREFIX}{name.upper()})")

    @property
    def store_timeouts(self) -> StoreTimeouts:
        return StoreTimeouts(self.store_connect_timeout, self.store_statement_timeout)


BOUNDS: dict[str, Bound] = {
    "store_url": text,
    "host": text,
    "port": whole(0, MAX_PORT),  # 0: a free port, picked at start
    "metrics_port": whole(-1, MAX_PORT),  # -1: no metrics endpoint; 0: a free port
    "poll_seconds": seconds(),  # 0 would poll without pause
    "poll_stall_seconds": seconds(),
    "compile": one_of(COMPILE_MODES),
    "grace_seconds": seconds(zero=True),  # 0: in-flight calls are cancelled at once
    "threads": whole(1),
    "max_message_bytes": whole(1, MAX_GRPC_BYTES),
    "max_metadata_bytes": whole(MIN_METADATA_BYTES, MAX_GRPC_BYTES),
    "max_rows": whole(1),
    "max_streams_per_connection": whole(1),
    "idle_seconds": seconds(),
    "max_inflight_bytes": whole(1),
    "max_connection_inflight_bytes": whole(1),
    "max_connections": whole(1),
    "body_seconds": seconds(),
    "plan_cache_bytes": whole(0),  # 0: no plan is kept
    "store_threads": whole(1),
    "max_load_waiters": whole(1),
    "version_cache_bytes": whole(0),  # 0: a version loaded on demand serves the calls that waited, and is let go
    "tls_cert": text,
    "tls_key": text,
    "tls_client_ca": text,
    "auth_token_file": text,
    "verify_key": text,
    "workers": whole(1),
    "log_level": one_of(LOG_LEVELS, case=False),
    "store_connect_timeout": seconds(),
    "store_statement_timeout": seconds(zero=True),  # 0: no limit
}
OPTIONAL = {"tls_cert", "tls_key", "tls_client_ca", "auth_token_file", "verify_key"}  # None: not given


def flag_of(name: str) -> str:
    """The ``server serve`` flag of a setting (every one has a flag but ``worker``, set by a parent)."""
    return "--store" if name == "store_url" else "--" + name.replace("_", "-")


DEFAULTS = {f.name: f.default for f in fields(ServeConfig) if f.name != "store_url"}
