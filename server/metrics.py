"""Every Prometheus metric the server exposes, declared once.

The grpc_server_* names and labels follow the go-grpc-prometheus convention that
dashboards already expect. Per-model labels are bounded by the models in the store.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
GRPC_LABELS = ("grpc_type", "grpc_service", "grpc_method")

GRPC_STARTED = Counter(
    "grpc_server_started_total", "RPCs started on the server.", GRPC_LABELS
)
GRPC_HANDLED = Counter(
    "grpc_server_handled_total", "RPCs completed on the server, by status code.", GRPC_LABELS + ("grpc_code",)
)
GRPC_HANDLING_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time from the start of an RPC to its completion on the server.",
    GRPC_LABELS,
    buckets=LATENCY_BUCKETS,
)

PREDICTION_ROWS = Counter(
    "bnserve_prediction_rows_total", "Rows predicted, per model.", ("model",)
)
MODEL_INFO = Gauge(
    "bnserve_model_info",
    "1 for each model version the server holds compiled; aliases comma-separated.",
    ("model", "version", "algorithm", "aliases"),
)
MODEL_LOAD_SECONDS = Histogram(
    "bnserve_model_load_seconds",
    "Time to read one model version from the store and compile it.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0),
)
MODEL_LOAD_FAILURES = Counter(
    "bnserve_model_load_failures_total",
    "Model versions refused at load (checksum or validation failure).",
    ("model",),
)
STORE_POLL_ERRORS = Counter(
    "bnserve_store_poll_errors_total", "Polls of the model store that failed."
)
STORE_LAST_SUCCESS = Gauge(
    "bnserve_store_last_success_timestamp_seconds",
    "Unix time of the last successful poll of the model store.",
)
