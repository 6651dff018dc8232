"""``Client``: call a running ``server serve`` from Python without writing gRPC plumbing.

``predict`` takes rows as a list of dicts, a pandas DataFrame (columns by name) or a 2-D
integer array of state codes (the dense form, columns in the model's feature order); columns
the model does not know, the class column among them, are left out (``extra_columns``). It sends
them in batches of at most ``batch_rows`` (the server's ``--max-rows`` is 100,000 by
default) and returns the labels and the class probabilities as numpy arrays. Every call has
a deadline, and a call the server could not take (UNAVAILABLE: it is starting, draining or
unreachable) is tried again with exponential backoff while the deadline lasts. Any other
error is raised as it came, a ``grpc.RpcError`` with the server's status and message.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc

DEFAULT_TIMEOUT = 30.0  # seconds, per call to a method of Client, retries included
DEFAULT_BATCH_ROWS = 10_000
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # the server's default --max-message-bytes
EXTRA_COLUMNS = ("ignore", "error")  # Client.predict(extra_columns=...): leave out, or let the server refuse

T = TypeVar("T")


@dataclass(frozen=True)
class Predictions:
    """What a model answered: ``labels[i]`` the most probable class of row ``i``,
    ``probabilities[i, j]`` P(``classes[j]`` | row ``i``); by the version ``version``."""

    model: str
    version: int
    classes: tuple[str, ...]
    labels: np.ndarray  # object array of str, one per row
    probabilities: np.ndarray  # float64 (rows, len(classes))

    def __len__(self) -> int:
        return int(self.labels.size)

    def to_frame(self):
        """A pandas DataFrame: a ``label`` column, then one probability column per class."""
        import pandas as pd

        frame = pd.DataFrame(self.probabilities, columns=list(self.classes))
        frame.insert(0, "label", self.labels)
        return frame


@dataclass(frozen=True)
class ModelSummary:
    """A model the server holds: its versions (ascending) and aliases (alias -> version)."""

    name: str
    versions: tuple[int, ...]
    aliases: Mapping[str, int]
    latest_version: int


class Client:
    """A channel to a bnserve server at ``target`` (``host:port``).

    TLS: ``tls=True`` trusts the system's roots; ``root_certificates`` (PEM bytes or a file
    path) trusts a private CA and turns TLS on; ``certificate_chain`` and ``private_key`` (PEM
    bytes or paths) present a client certificate (mTLS). ``token``: the bearer token sent
    with every call (``server serve --auth-token-file``). ``timeout``: seconds each method
    may take, retries included; ``retries``: further attempts after UNAVAILABLE.
    ``options``: extra gRPC channel options, e.g. ``[("grpc.ssl_target_name_override", "name")]``.
    """

    def __init__(
        self,
        target: str,
        *,
        tls: bool = False,
        root_certificates: bytes | str | None = None,
        certificate_chain: bytes | str | None = None,
        private_key: bytes | str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 4,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        options: Sequence[tuple[str, Any]] = (),
    ):
        if timeout <= 0 or retries < 0 or batch_rows < 1:
            raise ValueError("timeout must be positive, retries non-negative and batch_rows at least 1")
        if (certificate_chain is None) != (private_key is None):
            raise ValueError("give certificate_chain and private_key together (a client certificate and its key)")
        channel_options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # gRPC waits up to 2 min between attempts to reconnect, failing calls meanwhile; the
            # retries here pause at most 2 s, so the channel tries again as soon as they do
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
            *options,
        ]
        if tls or root_certificates is not None or certificate_chain is not None:
            credentials = grpc.ssl_channel_credentials(
                _pem(root_certificates), _pem(private_key), _pem(certificate_chain)
            )
            self._channel = grpc.secure_channel(target, credentials, options=channel_options)
        else:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        self._stub = predictor_pb2_grpc.PredictorStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.target, self.timeout, self.retries, self.batch_rows = target, timeout, retries, batch_rows

    def __repr__(self) -> str:
        return f"Client({self.target!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    # ------------------------------------------------------------------ calls

    def predict(
        self,
        model: str,
        rows: Any,
        *,
        version: int | None = None,
        alias: str | None = None,
        features: Sequence[str] | None = None,
        unknown: str = "",
        extra_columns: str = "ignore",
        timeout: float | None = None,
    ) -> Predictions:
        """Class probabilities for ``rows`` from ``model`` (its ``version`` or ``alias``;
        neither: its production alias, else its latest version).

        ``rows``: a list of dicts (feature -> value: a state label, or a number for a
        numeric feature; an absent feature or None is missing), a pandas DataFrame (its
        columns by name, NaN/None missing), or a 2-D integer array of state codes (-1 missing)
        whose columns are ``features`` (default: the model's features, in order). Batches go
        to one version: the first batch's, pinned for the rest, so an alias that moves
        meanwhile cannot split the answer between two models. ``unknown``: a label no
        training row had is read as missing (``"missing"``, or ``""``: the server's default)
        or refused (``"error"``), as ``PredictRequest.unknown``.

        ``extra_columns``: what to do with a column (or dict key) of ``rows`` that is not one
        of the version's features, such as the class column of a training frame. "ignore"
        (default, as ``trainer predict``): it is left out, which costs one metadata call to
        learn the features (and pins the version from the start); "error": every column is
        sent and the server refuses the call (INVALID_ARGUMENT) naming the first it does not
        know. A code array's columns are ``features`` either way.
        """
        if extra_columns not in EXTRA_COLUMNS:
            raise ValueError(f"extra_columns must be one of {', '.join(EXTRA_COLUMNS)}, got {extra_columns!r}")
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        codes = isinstance(rows, np.ndarray) and rows.dtype.kind in "iu"
        if (codes and features is None) or (not codes and extra_columns == "ignore"):
            # the version's own features, pinned: so that codes mean what they meant, and the
            # columns kept are the ones that version knows
            reply = self._call(self._stub.GetModelMetadata, _metadata_request(model, version, alias), deadline)
            known, version, alias = [v.name for v in reply.variables if v.role == "feature"], reply.version, None
        if codes:
            requests = _dense_requests(rows, known if features is None else features, self.batch_rows)
        else:
            instances = _instances(rows, keep=set(known) if extra_columns == "ignore" else None)
            requests = (
                pb.PredictRequest(instances=instances[i : i + self.batch_rows], unknown=unknown)
                for i in range(0, max(len(instances), 1), self.batch_rows)
            )
        answers = []
        for request in requests:
            request.model, request.dense_response = model, True
            if version is not None:
                request.version = version
            elif alias is not None:
                request.alias = alias
            reply = self._call(self._stub.Predict, request, deadline)
            version, alias = reply.version, None  # the rest of the batches go to the same version
            answers.append(reply)
        classes = tuple(answers[0].classes)
        labels = np.concatenate([np.asarray(r.dense.labels, dtype=np.intp) for r in answers])
        probabilities = np.concatenate([np.asarray(r.dense.probabilities, dtype=np.float64) for r in answers])
        return Predictions(
            answers[0].model,
            answers[0].version,
            classes,
            np.asarray(classes, dtype=object)[labels],
            probabilities.reshape(labels.size, len(classes)),
        )

    def metadata(
        self,
        model: str,
        *,
        version: int | None = None,
        alias: str | None = None,
        include_parameters: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """What the version is: name, version, aliases, algorithm, parameters, variables (name,
        role, kind, states, cuts), arcs, metadata; with ``include_parameters``, its CPTs."""
        request = _metadata_request(model, version, alias)
        request.include_parameters = include_parameters
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        reply = self._call(self._stub.GetModelMetadata, request, deadline)
        return _metadata_dict(reply)

    def list_models(self, *, timeout: float | None = None) -> list[ModelSummary]:
        """Every model the server serves, by name."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        reply = self._call(self._stub.ListModels, pb.ListModelsRequest(), deadline)
        return [
            ModelSummary(m.name, tuple(m.versions), dict(m.aliases), m.latest_version)
            for m in sorted(reply.models, key=lambda m: m.name)
        ]

    # ------------------------------------------------------------------ plumbing

    def _call(self, method: Callable[..., T], request: Any, deadline: float) -> T:
        """``method(request)`` before ``deadline``, tried again after UNAVAILABLE (backoff 0.1 s,
        doubling to 2 s, with jitter) up to ``retries`` times; the last error is raised as it came."""
        attempt = 0
        while True:
            try:
                return method(request, timeout=max(deadline - time.monotonic(), 0.001), metadata=self._metadata)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                pause = min(2.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0)
                if code not in RETRYABLE or attempt >= self.retries or time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            attempt += 1


def _instances(rows: Any, keep: set[str] | None = None) -> list[pb.Instance]:
    """The friendly form of a DataFrame or a sequence of dicts: text values for labels,
    numbers for numbers; None and NaN left out (missing); with ``keep``, only those columns."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        if keep is not None:
            rows = rows[[c for c in rows.columns if str(c) in keep]]
        rows = rows.to_dict(orient="records")
    if isinstance(rows, Mapping):
        raise TypeError("rows must be a list of dicts, a DataFrame or a code array; wrap one row in a list")
    instances = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i} is a {type(row).__name__}, not a dict of feature -> value")
        instance = pb.Instance()
        for feature, value in row.items():
            if (
                (keep is not None and str(feature) not in keep)
                or value is None
                or (isinstance(value, float) and math.isnan(value))
            ):
                continue
            if isinstance(value, bool | str | np.str_):
                instance.values[str(feature)] = str(value)
            elif isinstance(value, int | float | np.integer | np.floating):
                instance.numbers[str(feature)] = float(value)
            else:
                instance.values[str(feature)] = str(value)
        instances.append(instance)
    return instances


def _dense_requests(codes: np.ndarray, features: Sequence[str], batch_rows: int) -> Iterator[pb.PredictRequest]:
    """The dense form of a code array, ``batch_rows`` rows a request."""
    if codes.ndim != 2 or codes.shape[1] != len(features):
        raise ValueError(
            f"codes must be a 2-D array of {len(features)} columns ({', '.join(features)}), got shape {codes.shape}"
        )
    for start in range(0, max(codes.shape[0], 1), batch_rows):
        part = codes[start : start + batch_rows]
        yield pb.PredictRequest(dense=pb.DenseBatch(features=list(features), codes=part.ravel().tolist()))


def _metadata_request(model: str, version: int | None, alias: str | None) -> pb.GetModelMetadataRequest:
    request = pb.GetModelMetadataRequest(model=model)
    if version is not None:
        request.version = version
    elif alias is not None:
        request.alias = alias
    return request


def _metadata_dict(reply: pb.ModelMetadata) -> dict[str, Any]:
    variables = [
        {"name": v.name, "role": v.role, "kind": v.kind, "states": list(v.states), "cuts": list(v.cuts)}
        for v in reply.variables
    ]
    doc: dict[str, Any] = {
        "name": reply.name,
        "version": reply.version,
        "aliases": list(reply.aliases),
        "algorithm": reply.algorithm,
        "combination": reply.combination,
        "class_variable": reply.class_variable,
        "parameters": json.loads(reply.parameters_json or "{}"),
        "variables": variables,
        "features": [v["name"] for v in variables if v["role"] == "feature"],
        "classes": next((v["states"] for v in variables if v["role"] == "class"), []),
        "arcs": [(a.parent, a.child, a.network) for a in reply.arcs],
        "metadata": json.loads(reply.metadata_json or "{}"),
        "created_at_ms": reply.created_at_ms,
        "checksum": reply.checksum,
    }
    if reply.cpts:
        doc["cpts"] = [
            {
                "node": c.node,
                "parents": list(c.parents),
                "network": c.network,
                "table": np.asarray(c.values, dtype=np.float64).reshape(tuple(c.shape)),
            }
            for c in reply.cpts
        ]
    return doc


def _pem(value: bytes | str | None) -> bytes | None:
    """PEM bytes as given, or read from the file a str names."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as file:
        return file.read()
