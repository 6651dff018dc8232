"""What both prediction APIs do with a request, written once: the row limit, the version the
request names, decoding its rows, the caller's deadline, the prediction, the metrics. The
servicers (bnserve.v1.Predictor and the Open Inference Protocol) only translate their wire
forms into a ``decode`` and an ``encode`` and call ``predict``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
import numpy as np

from bnserve.server.limits import check_rows, check_still_wanted
from bnserve.server.repository import ModelEntry, ModelRepository, ServedModel

Response = TypeVar("Response")


class DataPlane:
    """The served models, as the servicers reach them."""

    def __init__(self, repository: ModelRepository, max_rows: int, ready: Callable[[], bool]):
        """``max_rows``: the most rows a request may hold; ``ready``: what health reports."""
        self.repository = repository
        self.max_rows = max_rows
        self.ready = ready

    def model(self, name: str, version: int | None = None, alias: str | None = None) -> tuple[ServedModel, ModelEntry]:
        """The compiled version a selector names (the repository's ``get``)."""
        return self.repository.get(name, version, alias)

    def predict(
        self,
        name: str,
        rows: int,
        decode: Callable[[ServedModel], np.ndarray],
        encode: Callable[[ServedModel, np.ndarray, np.ndarray], Response],
        context: grpc.ServicerContext | Any,
        version: int | None = None,
        alias: str | None = None,
    ) -> Response:
        """Answer one request of ``rows`` rows (counted from its wire form, before decoding).

        ``decode(served)``: the request's rows as codes (rows, features) for that model;
        ``encode(served, proba, winners)``: the response from the class probabilities and
        each row's most probable class. The request is counted once answered.
        """
        started = time.perf_counter()
        check_rows(rows, self.max_rows)
        served, _ = self.repository.get(name, version, alias)
        codes = decode(served)
        check_still_wanted(context)
        proba = served.compiled.predict_proba(codes)
        winners = np.argmax(proba, axis=1)
        response = encode(served, proba, winners)
        served.record(winners, started)
        return response
