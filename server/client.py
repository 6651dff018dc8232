"""``Client``: call a running ``server serve`` from Python without writing gRPC plumbing.

``predict`` takes rows as a list of dicts, a pandas DataFrame (columns by name) or a 2-D
integer array of state codes (the dense form, columns in the model's feature order); columns
the model does not know, the class column among them, are left out (``extra_columns``). It sends
them in batches of at most ``batch_rows`` (the server's ``--max-rows`` is 100,000 by
default) and at most ``batch_bytes`` (a batch larger on the wire is split: the server
admits a request by its size, ``--max-connection-inflight-bytes``) and at most ``batch_cells``
rows × the model's features (what a request's rows decode to on the server), and returns the labels and the class probabilities as numpy arrays. Every call has
a deadline, and a call the server could not take (UNAVAILABLE: it is starting, draining or
unreachable) is tried again with exponential backoff while the deadline lasts. Any other
error is raised as it came, a ``grpc.RpcError`` with the server's status and message.

The client does not trust the server: a reply is bounded in size (``max_receive_bytes``,
counted after decompression and again as what parsing it would allocate) and checked
against what was asked before any array is built from it; one that fails is an
``InvalidReply`` naming what was wrong. A token is not sent in plaintext beyond loopback
unless ``insecure_token=True`` says so.
"""

from __future__ import annotations

import ipaddress
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import grpc
import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2

from bnserve.server.api import predictor_pb2 as pb
from bnserve.store.errors import BnServeError
from bnserve.store.model.variable import NUMERIC

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TIMEOUT = 30.0  # seconds, per call to a method of Client, retries included
DEFAULT_BATCH_ROWS = 10_000
# Half the largest request a server admits at its defaults (--max-connection-inflight-bytes
# 192 MiB over the parse factor 24, bnserve.server.limits): larger batches gain nothing.
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
# Rows × the model's features of one Predict: the server decodes every row to a code of every
# feature of the model (int64), however few values it sends, and predicts on them, so a request's
# memory there grows with this, not with its bytes: 10,000 rows up to 100 features, fewer of a
# wider model (about 32 bytes a cell, measured on a 36-feature model: 10,000 sparse rows of an
# 800-feature model would take about 0.25 GB as one request).
DEFAULT_BATCH_CELLS = 1_000_000
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # the server's default --max-message-bytes
MAX_CLASSES = 65_536  # a Predict reply naming more classes is refused before they are read
SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]  # Check, asked by health() (Watch is a stream)
# how gRPC words a reply past grpc.max_receive_message_length, as sent or once decompressed
TOO_LARGE = ("Received message larger than max", "Decompressed message larger than max")
EXTRA_COLUMNS = ("ignore", "error")  # Client.predict(extra_columns=...): leave out, or let the server refuse

T = TypeVar("T", bound=Message)


class InvalidReply(BnServeError):
    """The server's reply is not one this client can use: larger than ``max_receive_bytes``,
    not a valid message, or not an answer to what was asked. The message names what was wrong."""


class PlaintextToken(ValueError):
    """A token would go in plaintext beyond loopback, and ``insecure_token`` did not allow it."""


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

    def to_frame(self) -> pd.DataFrame:
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
    ``batch_rows``, ``batch_bytes``: the most rows, and bytes on the wire, of one Predict;
    ``batch_cells``: the most rows × the model's features (the features sent, when the
    client did not ask the model's).
    ``max_receive_bytes``: the largest reply taken, decompressed, and the most parsing one may
    allocate (``InvalidReply`` beyond). ``insecure_token``: send ``token`` over plaintext to
    an address other than loopback (refused otherwise: anyone on the path could read it).
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
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        batch_cells: int = DEFAULT_BATCH_CELLS,
        max_receive_bytes: int = MAX_MESSAGE_BYTES,
        insecure_token: bool = False,
        options: Sequence[tuple[str, Any]] = (),
    ):
        if timeout <= 0 or retries < 0 or min(batch_rows, batch_bytes, batch_cells, max_receive_bytes) < 1:
            raise ValueError(
                "timeout must be positive, retries non-negative, batch_rows, batch_bytes, batch_cells and "
                "max_receive_bytes at least 1"
            )
        if (certificate_chain is None) != (private_key is None):
            raise ValueError("give certificate_chain and private_key together (a client certificate and its key)")
        secure = tls or root_certificates is not None or certificate_chain is not None
        if token and not secure and not insecure_token and not _is_loopback(target):
            raise PlaintextToken(
                f"refusing to send the token in plaintext to {target}, where anyone on the path could read it: "
                "turn TLS on (tls=True or root_certificates), or pass insecure_token=True if the path is "
                "protected otherwise (a service mesh, a VPN)"
            )
        channel_options = [
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # gRPC waits up to 2 min between attempts to reconnect, failing calls meanwhile; the
            # retries here pause at most 2 s, so the channel tries again as soon as they do
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
            *options,
        ]
        if secure:
            credentials = grpc.ssl_channel_credentials(
                _pem(root_certificates), _pem(private_key), _pem(certificate_chain)
            )
            self._channel = grpc.secure_channel(target, credentials, options=channel_options)
        else:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        # each method's replies come as bytes, parsed by _call once their size is checked
        self._methods: dict[str, grpc.UnaryUnaryMultiCallable] = {
            m.name: self._channel.unary_unary(f"/{service.full_name}/{m.name}", request_serializer=_serialize)
            for service in (SERVICE, HEALTH)
            for m in service.methods
            if not m.server_streaming
        }
        self.target, self.timeout, self.retries, self.batch_rows = target, timeout, retries, batch_rows
        self.batch_bytes, self.batch_cells, self.max_receive_bytes = batch_bytes, batch_cells, max_receive_bytes

    def _rows_per_request(self, features: int) -> int:
        """``batch_rows``, fewer for a model of many features: at most ``batch_cells`` rows × features."""
        return max(1, min(self.batch_rows, self.batch_cells // max(features, 1)))

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
        whose columns are ``features`` (default: the model's features, in order, a derived
        feature's code included: codes are the caller's own). A derived feature (its
        ``projection`` in ``metadata``) takes no value in a dict or a DataFrame: the server
        computes it from its inputs' numbers. Batches go
        to one version: the first batch's, pinned for the rest, so an alias that moves
        meanwhile cannot split the answer between two models. ``unknown``: a label no
        training row had is read as missing (``"missing"``, or ``""``: the server's default)
        or refused (``"error"``), as ``PredictRequest.unknown``.

        ``extra_columns``: what to do with a column (or dict key) of ``rows`` that is not one
        of the version's features, such as the class column of a training frame. "ignore"
        (default, as ``trainer predict``): it is left out, as a derived feature's column is,
        which costs one metadata call to learn the features (and pins the version from the
        start); "error": every column is sent and the server refuses the call
        (INVALID_ARGUMENT) naming the first it does not know or that is derived. A code
        array's columns are ``features`` either way.
        """
        if extra_columns not in EXTRA_COLUMNS:
            raise ValueError(f"extra_columns must be one of {', '.join(EXTRA_COLUMNS)}, got {extra_columns!r}")
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        codes = isinstance(rows, np.ndarray) and rows.dtype.kind in "iu"
        classes = None  # the version's classes, once known: every reply must name them
        width = 0  # the version's features, once known: rows × features bound a batch (batch_cells)
        nominal: set[str] = set()  # its nominal features, once known
        derived: set[str] = set()  # its derived features, once known
        if (codes and features is None) or (not codes and extra_columns == "ignore"):
            # the version's own features, pinned: so that codes mean what they meant, and the
            # columns kept are the ones that version knows
            known_version = self.metadata(model, version=version, alias=alias, timeout=deadline - time.monotonic())
            known, version, alias = known_version["features"], known_version["version"], None
            classes = tuple(known_version["classes"])
            nominal = {v["name"] for v in known_version["variables"] if v["kind"] != NUMERIC}
            derived = {v["name"] for v in known_version["variables"] if v["projection"] is not None}
            width = len(known)
        if codes:
            names = list(known if features is None else features)
            _check_codes(rows, names)
            requests = _batches(
                len(rows),
                self._rows_per_request(width or len(names)),
                self.batch_bytes,
                lambda a, b: pb.PredictRequest(dense=pb.DenseBatch(features=names, codes=rows[a:b].ravel().tolist())),
            )
        else:
            # a derived feature is computed by the server from its inputs: its column is not sent
            sent = set(known) - derived if extra_columns == "ignore" else None
            instances = _instances(rows, keep=sent, nominal=nominal)
            widest = width or max((len(i.values) + len(i.numbers) for i in instances), default=0)
            requests = _batches(
                len(instances),
                self._rows_per_request(widest),
                self.batch_bytes,
                lambda a, b: pb.PredictRequest(instances=instances[a:b], unknown=unknown),
            )
        labels, probabilities = [], []
        for request in requests:
            request.model, request.dense_response = model, True
            if version is not None:
                request.version = version
            elif alias is not None:
                request.alias = alias
            reply = self._call("Predict", request, pb.PredictResponse, deadline)
            codes_of_rows, proba, classes = _predictions(reply, model, _rows_of(request), version, classes)
            version, alias = reply.version, None  # the rest of the batches go to the same version
            labels.append(codes_of_rows)
            probabilities.append(proba)
        assert classes is not None and version is not None  # at least one request went
        return Predictions(
            model,
            version,
            classes,
            np.asarray(classes, dtype=object)[np.concatenate(labels)],
            np.concatenate(probabilities),
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
        role, kind, states, cuts, and ``projection``: a derived feature's inputs, centres and
        weights, None for any other), features (in the model's order: a code array's
        columns), arcs, metadata; with ``include_parameters``, its CPTs."""
        request = _metadata_request(model, version, alias)
        request.include_parameters = include_parameters
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        reply = self._call("GetModelMetadata", request, pb.ModelMetadata, deadline)
        return _metadata_dict(reply, model, version)

    def list_models(self, *, timeout: float | None = None) -> list[ModelSummary]:
        """Every model the server serves, by name."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        reply = self._call("ListModels", pb.ListModelsRequest(), pb.ListModelsResponse, deadline)
        names = [m.name for m in reply.models]
        _require(all(names) and len(set(names)) == len(names), "ListModels", "a model name is empty or repeated")
        for m in reply.models:
            _require(
                all(v >= 1 for v in m.versions) and all(v >= 1 for v in m.aliases.values()) and m.latest_version >= 0,
                "ListModels",
                f"model {m.name!r} has a version below 1",
            )
        return [
            ModelSummary(m.name, tuple(m.versions), dict(m.aliases), m.latest_version)
            for m in sorted(reply.models, key=lambda m: m.name)
        ]

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """The server's grpc.health.v1 status of ``service`` ("": the server as a whole): SERVING,
        NOT_SERVING, or SERVICE_UNKNOWN (a gRPC error, e.g. UNAVAILABLE, is raised as it came)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        request = health_pb2.HealthCheckRequest(service=service)
        reply = self._call("Check", request, health_pb2.HealthCheckResponse, deadline)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    # ------------------------------------------------------------------ plumbing

    def _call(self, method: str, request: Message, reply_type: type[T], deadline: float) -> T:
        """``method(request)`` before ``deadline``, tried again after UNAVAILABLE (backoff 0.1 s,
        doubling to 2 s, with jitter) up to ``retries`` times; the last error is raised as it came.
        The reply comes as bytes and is parsed here, so that its size is checked first."""
        call = self._methods[method]
        attempt = 0
        while True:
            try:
                data = call(request, timeout=max(deadline - time.monotonic(), 0.001), metadata=self._metadata)
                return _parse(reply_type, data, self.max_receive_bytes)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED and exc.details().startswith(TOO_LARGE):
                    raise InvalidReply(
                        f"the {method} reply is larger than max_receive_bytes ({self.max_receive_bytes} bytes)"
                    ) from exc
                pause = min(2.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0)
                if code not in RETRYABLE or attempt >= self.retries or time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            attempt += 1


def _instances(rows: Any, keep: set[str] | None = None, nominal: AbstractSet[str] = frozenset()) -> list[pb.Instance]:
    """The friendly form of a DataFrame or a sequence of dicts: text values for labels,
    numbers for numbers; None and NaN left out (missing); with ``keep``, only those columns.
    A whole number in a ``nominal`` feature (an integer-coded column, read by pandas as
    numbers: 12, or 12.0 beside a missing value) goes as its label, "12", as the trainer read it."""
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
                if str(feature) in nominal and float(value).is_integer():
                    instance.values[str(feature)] = str(int(value))
                else:
                    instance.numbers[str(feature)] = float(value)
            else:
                instance.values[str(feature)] = str(value)
        instances.append(instance)
    return instances


def _check_codes(codes: np.ndarray, features: Sequence[str]) -> None:
    if codes.ndim != 2 or codes.shape[1] != len(features):
        raise ValueError(
            f"codes must be a 2-D array of {len(features)} columns ({', '.join(features)}), got shape {codes.shape}"
        )


def _batches(
    rows: int, batch_rows: int, batch_bytes: int, request: Callable[[int, int], pb.PredictRequest]
) -> Iterator[pb.PredictRequest]:
    """``request(start, stop)`` over the rows in order, ``batch_rows`` at a time, each halved
    until it is at most ``batch_bytes`` on the wire (a single row goes whatever its size).
    No rows still make one request: the server answers it with no predictions."""
    for start in range(0, max(rows, 1), batch_rows):
        pending = [(start, min(start + batch_rows, rows))]
        while pending:
            a, b = pending.pop()
            built = request(a, b)
            if b - a > 1 and built.ByteSize() > batch_bytes:
                middle = (a + b) // 2
                pending += [(middle, b), (a, middle)]  # the first half is taken first
            else:
                yield built


def _metadata_request(model: str, version: int | None, alias: str | None) -> pb.GetModelMetadataRequest:
    request = pb.GetModelMetadataRequest(model=model)
    if version is not None:
        request.version = version
    elif alias is not None:
        request.alias = alias
    return request


def _metadata_dict(reply: pb.ModelMetadata, model: str, version: int | None) -> dict[str, Any]:
    """The version's description as a dict, once every field read is one a version can have."""
    what = "GetModelMetadata"
    _require(reply.name == model, what, f"names model {reply.name!r}, not {model!r}")
    _require_version(reply.version, version, what)
    names = [v.name for v in reply.variables]
    _require(all(names) and len(set(names)) == len(names), what, "a variable name is empty or repeated")
    for v in reply.variables:
        _require(v.role in ("feature", "class"), what, f"variable {v.name!r} has role {v.role!r}")
        _require(len(set(v.states)) == len(v.states), what, f"variable {v.name!r} repeats a state")
        cuts = np.asarray(v.cuts, dtype=np.float64)
        _require(bool(np.all(np.isfinite(cuts)) and np.all(np.diff(cuts) > 0)), what, f"{v.name!r} has bad cuts")
        terms = np.asarray([*v.centres, *v.weights], dtype=np.float64)
        _require(
            len(v.inputs) == len(v.centres) == len(v.weights)
            and set(v.inputs) <= set(names)
            and bool(np.all(np.isfinite(terms))),
            what,
            f"{v.name!r} has a bad derivation",
        )
    classes = [list(v.states) for v in reply.variables if v.role == "class"]
    _require(len(classes) == 1 and 1 <= len(classes[0]) <= MAX_CLASSES, what, "there is not one class variable")
    _require(all(a.parent in names and a.child in names for a in reply.arcs), what, "an arc names an unknown variable")
    variables = [
        {
            "name": v.name,
            "role": v.role,
            "kind": v.kind,
            "states": list(v.states),
            "cuts": list(v.cuts),
            "projection": {"inputs": list(v.inputs), "centres": list(v.centres), "weights": list(v.weights)}
            if v.inputs
            else None,
        }
        for v in reply.variables
    ]
    doc: dict[str, Any] = {
        "name": reply.name,
        "version": reply.version,
        "aliases": list(reply.aliases),
        "algorithm": reply.algorithm,
        "combination": reply.combination,
        "class_variable": reply.class_variable,
        "parameters": _json_object(reply.parameters_json, "parameters_json"),
        "variables": variables,
        "features": [v["name"] for v in variables if v["role"] == "feature"],
        "classes": classes[0],
        "arcs": [(a.parent, a.child, a.network) for a in reply.arcs],
        "metadata": _json_object(reply.metadata_json, "metadata_json"),
        "created_at_ms": reply.created_at_ms,
        "checksum": reply.checksum,
    }
    if reply.cpts:
        doc["cpts"] = [
            {"node": c.node, "parents": list(c.parents), "network": c.network, "table": _cpt_table(c)}
            for c in reply.cpts
        ]
    return doc


def _cpt_table(cpt: pb.Cpt) -> np.ndarray:
    shape = tuple(cpt.shape)
    _require(
        len(shape) <= 32 and all(n >= 0 for n in shape) and math.prod(shape) == len(cpt.values),
        "GetModelMetadata",
        f"the CPT of {cpt.node!r} has {len(cpt.values)} values for shape {shape[:32]}",
    )
    table = np.asarray(cpt.values, dtype=np.float64).reshape(shape)
    _require(bool(np.all((table >= 0) & (table <= 1))), "GetModelMetadata", f"the CPT of {cpt.node!r} is not in [0, 1]")
    return table


def _json_object(text: str, field: str) -> dict[str, Any]:
    """A JSON object from a reply; malformed or too deeply nested JSON is an InvalidReply."""
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError) as exc:
        raise InvalidReply(f"invalid GetModelMetadata reply: {field} is not JSON ({type(exc).__name__})") from None
    _require(isinstance(value, dict), "GetModelMetadata", f"{field} is not a JSON object")
    return value


def _rows_of(request: pb.PredictRequest) -> int:
    if request.HasField("dense"):
        return len(request.dense.codes) // max(len(request.dense.features), 1)
    return len(request.instances)


def _predictions(
    reply: pb.PredictResponse, model: str, rows: int, version: int | None, classes: tuple[str, ...] | None
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The label codes and probabilities of a Predict reply to ``rows`` rows, and its classes
    (``classes``, when known), once each is what was asked. Counts are checked before anything
    is read out, so what the reply makes the client build is bounded by the rows it sent."""
    what = "Predict"
    _require(reply.model == model, what, f"names model {reply.model!r}, not {model!r}")
    _require_version(reply.version, version, what)
    k = len(reply.classes)
    expected = f"{len(classes)}" if classes is not None else f"1 to {MAX_CLASSES}"
    _require(k == len(classes) if classes is not None else 1 <= k <= MAX_CLASSES, what, f"{k} classes, not {expected}")
    n_labels, n_proba = len(reply.dense.labels), len(reply.dense.probabilities)
    _require(n_labels == rows, what, f"{n_labels} labels for {rows} rows")
    _require(n_proba == rows * k, what, f"{n_proba} probabilities for {rows} rows of {k} classes")
    names = tuple(reply.classes)
    _require(classes is None or names == classes, what, f"classes {names[:5]} are not the version's {classes}")
    _require(len(set(names)) == k, what, "a class is named twice")
    labels = np.asarray(reply.dense.labels, dtype=np.intp)
    _require(not labels.size or int(labels.max()) < k, what, f"label code {labels.max() if labels.size else 0} >= {k}")
    proba = np.asarray(reply.dense.probabilities, dtype=np.float64).reshape(rows, k)
    _require(bool(np.all((proba >= 0) & (proba <= 1))), what, "a probability is not in [0, 1]")
    _require(bool(np.all(np.abs(proba.sum(axis=1) - 1) <= 1e-6)), what, "a row's probabilities do not sum to 1")
    return labels, proba, names


def _require(ok: bool, method: str, problem: str) -> None:
    if not ok:
        raise InvalidReply(f"invalid {method} reply: {problem}")


def _require_version(got: int, asked: int | None, method: str) -> None:
    _require(got >= 1 and asked in (None, got), method, f"version {got}, asked {asked}")


# What parsing allocates, as upb does (measured: ~95 bytes per empty message, ~33 per empty
# string): per message, per other field, and per byte of a packed field of each type.
_MESSAGE_COST, _FIELD_COST = 128, 32
_PACKED_COST = {
    FieldDescriptor.TYPE_INT32: 4,
    FieldDescriptor.TYPE_UINT32: 4,
    FieldDescriptor.TYPE_SINT32: 4,
    FieldDescriptor.TYPE_ENUM: 4,
    FieldDescriptor.TYPE_BOOL: 1,
    FieldDescriptor.TYPE_INT64: 8,
    FieldDescriptor.TYPE_UINT64: 8,
    FieldDescriptor.TYPE_SINT64: 8,
}  # varints: at most one value a byte; fixed-width values take in memory what they take on the wire


def _parse(reply_type: type[T], data: bytes, budget: int) -> T:
    """``data`` parsed as ``reply_type``, if parsing would allocate at most ``budget`` bytes:
    a few KB of wire can hold millions of empty messages, each a parsed object."""
    _parse_cost(cast(Descriptor, reply_type.DESCRIPTOR), data, budget)
    try:
        return reply_type.FromString(data)
    except (DecodeError, RecursionError) as exc:
        raise InvalidReply(f"invalid {reply_type.__name__} reply: not a valid message ({exc})") from None


def _parse_cost(descriptor: Descriptor, data: bytes, budget: int) -> int:
    """What parsing ``data`` as ``descriptor`` allocates, by the costs above, walking the wire
    format (iteratively: the schema's depth, not the reply's); InvalidReply past ``budget``."""
    name = descriptor.name
    cost = 0
    stack = [(descriptor, 0, len(data))]
    while stack:
        message, pos, end = stack.pop()
        while pos < end:
            key, pos = _varint(data, pos, end, name)
            field, wire = message.fields_by_number.get(key >> 3), key & 7
            if wire == 0:
                pos = _varint(data, pos, end, name)[1]
                cost += _FIELD_COST
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
                cost += _FIELD_COST
            elif wire == 2:
                length, pos = _varint(data, pos, end, name)
                if pos + length > end:
                    raise InvalidReply(f"invalid {name} reply: a field runs past the end of its message")
                if field is not None and field.message_type is not None:
                    stack.append((field.message_type, pos, pos + length))
                    cost += _MESSAGE_COST
                elif field is not None and field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
                    cost += _FIELD_COST + length
                else:  # a packed array, or a field this client does not know (kept as bytes)
                    cost += length * _PACKED_COST.get(field.type, 1) if field is not None else length
                pos += length
            else:
                raise InvalidReply(f"invalid {name} reply: wire type {wire} (groups are not in bnserve's API)")
            if cost > budget:
                raise InvalidReply(f"invalid {name} reply: parsing it would take more than {budget} bytes")
        if pos != end:
            raise InvalidReply(f"invalid {name} reply: a field runs past the end of its message")
    return cost


def _varint(data: bytes, pos: int, end: int, name: str) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
    raise InvalidReply(f"invalid {name} reply: a truncated or overlong varint")


def _is_loopback(target: str) -> bool:
    """Whether ``target`` (``host:port``, ``[v6]:port``, ``ipv4:…``, ``dns:///…``, ``unix:…``)
    stays on this machine: localhost, 127.0.0.0/8, ::1 or a Unix socket."""
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        target = target.removeprefix(scheme)
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    if target.startswith("["):
        host = target[1 : target.find("]")]
    else:
        host = target.rsplit(":", 1)[0] if target.count(":") == 1 else target
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serialize(request: Message) -> bytes:
    return request.SerializeToString()


def _pem(value: bytes | str | None) -> bytes | None:
    """PEM bytes as given, or read from the file a str names."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as file:
        return file.read()
