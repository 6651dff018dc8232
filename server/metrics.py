"""Every Prometheus metric the server exposes, declared once, in one registry.

``Metrics(registry)`` declares them all in ``registry``; ``METRICS``, in the global one, is
what ``/metrics`` serves and what the server records into. A test passes a
``CollectorRegistry()`` of its own and reads its counts alone. A model version's children
are looked up once, when it is loaded (``ModelMetrics``), never per request.

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
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
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

BATCH_ROWS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
LOAD_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
VERSION_LOAD_RESULTS = ("loaded", "refused", "failed")
SHED_REASONS = ("waiters", "pending")


class Metrics:
    """The server's metrics, registered in ``registry``: one instance per registry (a second
    in the same registry is a ``ValueError``, duplicated timeseries)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY):
        self.registry = registry
        counter, gauge = partial(Counter, registry=registry), partial(Gauge, registry=registry)
        histogram = partial(Histogram, registry=registry)
        self.grpc_started = counter("grpc_server_started_total", "RPCs started on the server.", GRPC_LABELS)
        self.grpc_handled = counter(
            "grpc_server_handled_total",
            "RPCs completed on the server, by status code.",
            GRPC_LABELS + ("grpc_code",),
        )
        self.grpc_handling_seconds = histogram(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its completion on the server.",
            GRPC_LABELS,
            buckets=LATENCY_BUCKETS,
        )
        self.prediction_rows = counter("bnserve_prediction_rows_total", "Rows predicted, per model.", ("model",))
        self.predicted_class_rows = counter(
            "bnserve_predicted_class_rows_total",
            "Rows predicted, per model and most probable class.",
            ("model", "class"),
        )
        self.unknown_values = counter(
            "bnserve_unknown_values_total",
            "Values unseen in training read as missing (request policy unknown=missing), per model and feature; "
            "a series appears at its first count, for a feature of a loaded model only.",
            ("model", "feature"),
        )
        self.request_seconds = histogram(
            "bnserve_request_seconds",
            "Time to answer one prediction request (Predict or ModelInfer) in the handler, per model: "
            "what grpc_server_handling_seconds measures per method, here per model.",
            ("model",),
            buckets=LATENCY_BUCKETS,
        )
        self.request_rows = histogram(
            "bnserve_request_rows",
            "Rows per prediction request (batch size), per model.",
            ("model",),
            buckets=BATCH_ROWS_BUCKETS,
        )
        self.model_info = gauge(
            "bnserve_model_info",
            "1 for each model version the server holds compiled; aliases comma-separated.",
            ("model", "version", "algorithm", "aliases"),
            multiprocess_mode="livemax",
        )
        self.model_load_seconds = histogram(
            "bnserve_model_load_seconds",
            "Time to read one model version from the store and compile it.",
            buckets=LOAD_BUCKETS,
        )
        self.model_load_failures = counter(
            "bnserve_model_load_failures_total",
            "Model versions refused at load: a checksum, validation or compile failure, or any other error loading one.",
            ("model",),
        )
        self.plan_cache_bytes = gauge(
            "bnserve_plan_cache_bytes",
            "Bytes held by the cache of missing-value plans (at most --plan-cache-bytes per process).",
            multiprocess_mode="livesum",
        )
        self.version_loads = counter(
            "bnserve_version_loads_total",
            "Loads from the store of versions not in memory, asked for by a call, by result: loaded, refused (the "
            "version is refused at load) or failed (the store failed or timed out, or the version was deleted).",
            ("result",),
        )
        self.version_calls_shed = counter(
            "bnserve_version_calls_shed_total",
            "Calls for a version not in memory refused at once (UNAVAILABLE), by reason: waiters (--max-load-waiters "
            "calls already wait for that version) or pending (every load slot of --store-threads is taken).",
            ("reason",),
        )
        self.version_load_waiters = gauge(
            "bnserve_version_load_waiters",
            "Calls waiting for a version to load from the store (each holds no thread).",
            multiprocess_mode="livesum",
        )
        self.version_cache_bytes = gauge(
            "bnserve_version_cache_bytes",
            "Bytes of compiled tables of the versions kept after a load on demand "
            "(at most --version-cache-bytes per process).",
            multiprocess_mode="livesum",
        )
        for result in VERSION_LOAD_RESULTS:  # every known series from 0, so rate() sees the first
            self.version_loads.labels(result)
        for reason in SHED_REASONS:
            self.version_calls_shed.labels(reason)
        self.inflight_bytes = gauge(
            "bnserve_inflight_request_bytes",
            "Bytes charged to calls in flight (a request's wire size times the parse factor), "
            "at most --max-inflight-bytes.",
            multiprocess_mode="livesum",
        )
        self.store_poll_errors = counter("bnserve_store_poll_errors_total", "Polls of the model store that failed.")
        self.store_poll_stalls = counter(
            "bnserve_store_poll_stalls_total",
            "Polls of the model store still running after --poll-stall-seconds (a store that hangs), each counted once.",
        )
        self.store_last_success = gauge(
            "bnserve_store_last_success_timestamp_seconds",
            "Unix time of the last successful poll of the model store.",
            multiprocess_mode="livemin",
        )

    def model(self, name: str, classes: Sequence[str]) -> ModelMetrics:
        """The children of one model (its ``classes``, in code order), looked up once."""
        return ModelMetrics(self, name, classes)

    def drop_model_info(self, *labels: str) -> None:
        """A version is no longer held: remove its series, or in multiprocess mode (which
        cannot remove one) set it to 0."""
        if MULTIPROCESS:
            self.model_info.labels(*labels).set(0)
        else:
            self.model_info.remove(*labels)

    def initialize_grpc(self, services: Iterable[ServiceDescriptor]) -> None:
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
                self.grpc_started.labels(*labels)
                self.grpc_handled.labels(*labels, "OK")
                self.grpc_handling_seconds.labels(*labels)


class ModelMetrics:
    """One model's children of the prediction metrics, made once when a version is loaded so
    the hot path only increments. Versions of one name share their series."""

    def __init__(self, metrics: Metrics, name: str, classes: Sequence[str]):
        self._metrics = metrics
        self._name = name
        self._rows = metrics.prediction_rows.labels(name)
        self._per_class = tuple(metrics.predicted_class_rows.labels(name, c) for c in classes)
        self._batch = metrics.request_rows.labels(name)
        self._seconds = metrics.request_seconds.labels(name)

    def record(self, winners: np.ndarray, started: float) -> None:
        """Count one answered request: its rows, their most probable classes (codes), its
        batch size, and its time since ``started`` (``time.perf_counter()`` when the handler began)."""
        rows = len(winners)
        self._rows.inc(rows)
        self._batch.observe(rows)
        self._seconds.observe(time.perf_counter() - started)
        if rows == 1:
            self._per_class[int(winners[0])].inc()
        elif rows:
            for c, n in enumerate(np.bincount(winners, minlength=len(self._per_class)).tolist()):
                if n:
                    self._per_class[c].inc(n)

    def record_unseen(self, unseen: Mapping[str, int]) -> None:
        """Count values unseen in training read as missing: feature name -> how many. The
        caller passes this model's features only, so what a client sends cannot add series."""
        for feature, n in unseen.items():
            self._metrics.unknown_values.labels(self._name, feature).inc(n)


METRICS = Metrics()  # the global registry's, which /metrics serves


def serve_metrics(port: int, host: str, registry: CollectorRegistry = REGISTRY) -> Any:
    """Serve /metrics on ``host:port`` (0: any free port); returns the HTTP server. A port
    that cannot be bound is an OSError naming it."""
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise OSError(f"cannot bind the metrics port {host}:{port}: {exc.strerror or exc}") from None
    return server
