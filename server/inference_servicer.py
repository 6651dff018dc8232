"""The Open Inference Protocol (KServe v2) servicer, inference.GRPCInferenceService.

Translation only, as ``server.servicer`` is for bnserve.v1: the tensors are decoded and
encoded by ``server.tensors``, their values coded by ``server.requests``; errors are
raised as ``store.errors`` kinds and mapped to status codes by ``server.interceptors``.
"""

from __future__ import annotations

import time
from typing import Callable

import grpc
import numpy as np

from bnserve.server.api import grpc_service_pb2 as pb
from bnserve.server.api import grpc_service_pb2_grpc
from bnserve.server.repository import ModelRepository
from bnserve.server.limits import DEFAULT_MAX_ROWS, check_rows, check_still_wanted, infer_rows
from bnserve.server.tensors import codes_from_inputs, input_metadata, output_metadata, read_inputs, requested_outputs, write_outputs
from bnserve.store.errors import InvalidInput, InvalidModel, NotFound, StoreUnavailable
from bnserve.store.version import code_version

SERVER_NAME = "bnserve"
PLATFORM = "bnserve"


def parse_version(text: str) -> int | None:
    """A request's model version: "" is the default (None), else a positive whole number."""
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()) or int(text) == 0:
        raise InvalidInput(f"model version {text!r} is not a version number; send a positive whole number, "
                           "or nothing for the default version")
    return int(text)


class InferenceServicer(grpc_service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, repository: ModelRepository, ready: Callable[[], bool], max_rows: int = DEFAULT_MAX_ROWS):
        """``ready`` says whether the server is ready: what its health service reports;
        ``max_rows`` the most rows a request may hold (its inputs' first dimension)."""
        self._repository = repository
        self._ready = ready
        self._max_rows = max_rows

    def ServerLive(self, request: pb.ServerLiveRequest, context: grpc.ServicerContext) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request: pb.ServerReadyRequest, context: grpc.ServicerContext) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self._ready())

    def ModelReady(self, request: pb.ModelReadyRequest, context: grpc.ServicerContext) -> pb.ModelReadyResponse:
        """Readiness is an answer, not an error: an unknown or unloadable model is not ready."""
        version = parse_version(request.version)
        if not self._ready():
            return pb.ModelReadyResponse(ready=False)
        try:
            self._repository.get(request.name, version=version)
        except (NotFound, InvalidModel, StoreUnavailable):
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    def ServerMetadata(self, request: pb.ServerMetadataRequest, context: grpc.ServicerContext) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(name=SERVER_NAME, version=code_version(), extensions=[])

    def ModelMetadata(self, request: pb.ModelMetadataRequest, context: grpc.ServicerContext) -> pb.ModelMetadataResponse:
        served, entry = self._repository.get(request.name, version=parse_version(request.version))
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=served.name,
            versions=[str(v) for v in sorted(entry.versions) if v not in entry.refused],
            platform=PLATFORM,
            inputs=[tensor(name=n, datatype=d, shape=s) for n, d, s in input_metadata(served.compiled)],
            outputs=[tensor(name=n, datatype=d, shape=s) for n, d, s in output_metadata(served.compiled)],
        )

    def ModelInfer(self, request: pb.ModelInferRequest, context: grpc.ServicerContext) -> pb.ModelInferResponse:
        started = time.perf_counter()
        check_rows(infer_rows(request), self._max_rows)
        served, _ = self._repository.get(request.model_name, version=parse_version(request.model_version))
        compiled = served.compiled
        outputs = requested_outputs(request)
        codes = codes_from_inputs(compiled, served.class_name, read_inputs(request))
        check_still_wanted(context)
        proba = compiled.predict_proba(codes)
        response = pb.ModelInferResponse(model_name=served.name, model_version=str(served.version), id=request.id)
        write_outputs(response, outputs, compiled.classes, proba)
        served.record(np.argmax(proba, axis=1), started)
        return response
