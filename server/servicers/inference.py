"""The Open Inference Protocol (KServe v2) servicer, inference.GRPCInferenceService.

Translation only, as ``predictor`` is for bnserve.v1: the tensors are decoded and encoded
by ``bnserve.server.tensors``, their values coded by ``bnserve.server.requests``; errors
are raised as ``bnserve.store.errors`` kinds and mapped to status codes by
``bnserve.server.interceptors``.
"""

from __future__ import annotations

import grpc
import numpy as np

from bnserve.server.api import grpc_service_pb2 as pb
from bnserve.server.api import grpc_service_pb2_grpc
from bnserve.server.dataplane import DataPlane
from bnserve.server.limits import Work
from bnserve.server.served import ServedModel
from bnserve.server.tensors import (
    check_inputs,
    codes_from_inputs,
    input_metadata,
    output_metadata,
    read_inputs,
    requested_outputs,
    unknown_parameter,
    write_outputs,
)
from bnserve.store.errors import InvalidInput, InvalidModel, NotFound, StoreRefused, StoreUnavailable
from bnserve.store.version import code_version

SERVER_NAME = "bnserve"
PLATFORM = "bnserve"


def parse_version(text: str) -> int | None:
    """A request's model version: "" is the default (None), else a positive whole number."""
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()) or int(text) == 0:
        raise InvalidInput(
            f"model version {text!r} is not a version number; send a positive whole number, "
            "or nothing for the default version"
        )
    return int(text)


class InferenceServicer(grpc_service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, dataplane: DataPlane):
        self._dataplane = dataplane

    async def ServerLive(
        self, request: pb.ServerLiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(
        self, request: pb.ServerReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self._dataplane.ready())

    async def ModelReady(
        self, request: pb.ModelReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelReadyResponse:
        """Readiness is an answer, not an error: an unknown or unloadable model is not ready."""
        version = parse_version(request.version)
        if not self._dataplane.ready():
            return pb.ModelReadyResponse(ready=False)
        try:
            await self._dataplane.model(request.name, version=version)
        except (NotFound, InvalidModel, StoreUnavailable, StoreRefused):
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    async def ServerMetadata(
        self, request: pb.ServerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(name=SERVER_NAME, version=code_version(), extensions=[])

    async def ModelMetadata(
        self, request: pb.ModelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelMetadataResponse:
        served, entry = await self._dataplane.model(request.name, version=parse_version(request.version))
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=served.name,
            versions=[str(v) for v in sorted(entry.versions) if v not in entry.refused],
            platform=PLATFORM,
            inputs=[tensor(name=n, datatype=d, shape=s) for n, d, s in input_metadata(served.compiled)],
            outputs=[tensor(name=n, datatype=d, shape=s) for n, d, s in output_metadata(served.compiled)],
        )

    async def ModelInfer(
        self, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelInferResponse:
        outputs = requested_outputs(request)  # checks of the request alone: before any lookup
        unknown = unknown_parameter(request)

        def measure(served: ServedModel) -> Work:
            return check_inputs(request, served.compiled, served.class_name)

        def decode(served: ServedModel) -> np.ndarray:
            unseen: dict[int, int] = {}
            codes = codes_from_inputs(served.compiled, served.class_name, read_inputs(request), unknown, unseen)
            served.record_unseen(unseen)
            return codes

        def encode(served: ServedModel, proba: np.ndarray, winners: np.ndarray) -> pb.ModelInferResponse:
            response = pb.ModelInferResponse(model_name=served.name, model_version=str(served.version), id=request.id)
            write_outputs(response, outputs, served.compiled.classes, proba, winners)
            return response

        return await self._dataplane.predict(
            request.model_name,
            measure,
            decode,
            encode,
            context,
            version=parse_version(request.model_version),
        )
