"""Every Prometheus metric the server exposes, declared once.

The grpc_server_* names and labels follow the go-grpc-prometheus convention that
dashboards already expect. Per-model labels are bounded by the models in the store.

With ``server serve --workers N`` each worker records into prometheus-client's
multiprocess files (``PROMETHEUS_MULTIPROC_DIR``, set by the parent before the worker
starts) and the parent serves their merge (``bnserve.server.workers``). Counters and histograms
are summed over every worker that ever ran in this server's life, so they never go back
when a worker is replaced. Gauges say how to merge (``multiprocess_mode``, ignored in a
single process):

- ``bnserve_model_info``: ``livemax``, 1 when at least one live worker holds the
  version. Not ``liveall``, which adds a ``pid`` label and one series per worker, so the
  series would no longer be one per version held as in a single process; not ``max``,
  which also counts the files of dead workers, so a version a dead worker held would
  read 1 for ever. A multiprocess gauge cannot drop a series, so a version no longer
  held reads 0 there instead of disappearing.
- ``bnserve_plan_cache_bytes`` and ``bnserve_version_cache_bytes``: ``livesum``, the bytes
  every live worker's cache holds together, what the pod's memory sees;
  ``bnserve_version_load_waiters``: ``livesum`` too, the calls waiting in every live worker.
- ``bnserve_store_last_success_timestamp_seconds``: ``livemin``, the stalest live
  worker's last successful poll (every worker polls the store itself), which is what a
  staleness alert must see.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:
    from google.protobuf.descriptor import ServiceDescriptor

# prometheus-client's own test for multiprocess mode (prometheus_client.values).
MULTIPROCESS = "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ

LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
GRPC_LABELS = ("grpc_type", "grpc_service", "grpc_method")

GRPC_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", GRPC_LABELS)
GRPC_HANDLED = Counter(
    "grpc_server_handled_total", "RPCs completed on the server, by status code.", GRPC_LABELS + ("grpc_code",)
)
GRPC_HANDLING_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time from the start of an RPC to its completion on the server.",
    GRPC_LABELS,
    buckets=LATENCY_BUCKETS,
)

PREDICTION_ROWS = Counter("bnserve_prediction_rows_total", "Rows predicted, per model.", ("model",))
PREDICTED_CLASS_ROWS = Counter(
    "bnserve_predicted_class_rows_total", "Rows predicted, per model and most probable class.", ("model", "class")
)
UNKNOWN_VALUES = Counter(
    "bnserve_unknown_values_total",
    "Values unseen in training read as missing (request policy unknown=missing), per model and feature; "
    "a series appears at its first count, for a feature of a loaded model only.",
    ("model", "feature"),
)
REQUEST_SECONDS = Histogram(
    "bnserve_request_seconds",
    "Time to answer one prediction request (Predict or ModelInfer) in the handler, per model: "
    "what grpc_server_handling_seconds measures per method, here per model.",
    ("model",),
    buckets=LATENCY_BUCKETS,
)
BATCH_ROWS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
REQUEST_ROWS = Histogram(
    "bnserve_request_rows",
    "Rows per prediction request (batch size), per model.",
    ("model",),
    buckets=BATCH_ROWS_BUCKETS,
)
MODEL_INFO = Gauge(
    "bnserve_model_info",
    "1 for each model version the server holds compiled; aliases comma-separated.",
    ("model", "version", "algorithm", "aliases"),
    multiprocess_mode="livemax",
)
MODEL_LOAD_SECONDS = Histogram(
    "bnserve_model_load_seconds",
    "Time to read one model version from the store and compile it.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0),
)
MODEL_LOAD_FAILURES = Counter(
    "bnserve_model_load_failures_total",
    "Model versions refused at load: a checksum, validation or compile failure, or any other error loading one.",
    ("model",),
)
PLAN_CACHE_BYTES = Gauge(
    "bnserve_plan_cache_bytes",
    "Bytes held by the cache of missing-value plans (at most --plan-cache-bytes per process).",
    multiprocess_mode="livesum",
)
VERSION_LOADS = Counter(
    "bnserve_version_loads_total",
    "Loads from the store of versions not in memory, asked for by a call, by result: loaded, refused (the "
    "version is refused at load) or failed (the store failed or timed out, or the version was deleted).",
    ("result",),
)
VERSION_CALLS_SHED = Counter(
    "bnserve_version_calls_shed_total",
    "Calls for a version not in memory refused at once (UNAVAILABLE), by reason: waiters (--max-load-waiters "
    "calls already wait for that version) or pending (every load slot of --store-threads is taken).",
    ("reason",),
)
VERSION_LOAD_WAITERS = Gauge(
    "bnserve_version_load_waiters",
    "Calls waiting for a version to load from the store (each holds no thread).",
    multiprocess_mode="livesum",
)
VERSION_CACHE_BYTES = Gauge(
    "bnserve_version_cache_bytes",
    "Bytes of compiled tables of the versions kept after a load on demand (at most --version-cache-bytes per process).",
    multiprocess_mode="livesum",
)
for _result in ("loaded", "refused", "failed"):  # every known series from 0, so rate() sees the first
    VERSION_LOADS.labels(_result)
for _reason in ("waiters", "pending"):
    VERSION_CALLS_SHED.labels(_reason)
INFLIGHT_BYTES = Gauge(
    "bnserve_inflight_request_bytes",
    "Bytes charged to calls in flight (a request's wire size times the parse factor), at most --max-inflight-bytes.",
    multiprocess_mode="livesum",
)
STORE_POLL_ERRORS = Counter("bnserve_store_poll_errors_total", "Polls of the model store that failed.")
STORE_POLL_STALLS = Counter(
    "bnserve_store_poll_stalls_total",
    "Polls of the model store still running after --poll-stall-seconds (a store that hangs), each counted once.",
)
STORE_LAST_SUCCESS = Gauge(
    "bnserve_store_last_success_timestamp_seconds",
    "Unix time of the last successful poll of the model store.",
    multiprocess_mode="livemin",
)


def drop_model_info(*labels: str) -> None:
    """A version is no longer held: remove its series, or in multiprocess mode (which
    cannot remove one) set it to 0."""
    if MULTIPROCESS:
        MODEL_INFO.labels(*labels).set(0)
    else:
        MODEL_INFO.remove(*labels)


def initialize_grpc(services: Iterable[ServiceDescriptor]) -> None:
    """Create every method's grpc_server_* series at 0 (go-grpc-prometheus's
    InitializeMetrics): a series that first appears with its first call hides that call
    from rate() and increase()."""
    for service in services:
        for method in service.methods:
            kind = {
                (False, False): "UNARY",
                (False, True): "SERVER_STREAM",
                (True, False): "CLIENT_STREAM",
                (True, True): "BIDI_STREAM",
            }[method.client_streaming, method.server_streaming]
            labels = (kind, service.full_name, method.name)
            GRPC_STARTED.labels(*labels)
            GRPC_HANDLED.labels(*labels, "OK")
            GRPC_HANDLING_SECONDS.labels(*labels)


def serve_metrics(port: int, host: str, registry: CollectorRegistry = REGISTRY) -> Any:
    """Serve /metrics on ``host:port`` (0: any free port); returns the HTTP server. A port
    that cannot be bound is an OSError naming it."""
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise OSError(f"cannot bind the metrics port {host}:{port}: {exc.strerror or exc}") from None
    return server
