"""The bnserve.v1.Predictor servicer: protobuf to the data plane and back, nothing more.

Errors are raised as ``bnserve.store.errors`` kinds and mapped to status codes by
``bnserve.server.interceptors``.
"""

from __future__ import annotations

import json

import grpc
import numpy as np

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.server.dataplane import DataPlane
from bnserve.server.limits import Work
from bnserve.server.requests import codes_from_dense, codes_from_instances, dense_work, instances_work
from bnserve.server.responses import predict_response
from bnserve.server.served import ServedModel
from bnserve.store.errors import InvalidInput
from bnserve.store.model import REFUSE, Variable, unknown_policy


def _selector(request: pb.PredictRequest | pb.GetModelMetadataRequest) -> dict:
    which = request.WhichOneof("selector")
    if which == "version":
        if request.version <= 0:
            raise InvalidInput(f"version must be positive, got {request.version}")
        return {"version": request.version}
    if which == "alias":
        return {"alias": request.alias}
    return {}


def _unknown(request: pb.PredictRequest) -> str:
    """The request's policy for values unseen in training (``unknown``; "" the default).
    ``unseen_as_missing``, which asked for what is now the default, may not contradict it."""
    unknown = unknown_policy(request.unknown, "unknown")
    if request.unseen_as_missing and unknown == REFUSE:
        raise InvalidInput("unseen_as_missing contradicts unknown 'error'; set unknown alone")
    return unknown


class PredictorServicer(predictor_pb2_grpc.PredictorServicer):
    def __init__(self, dataplane: DataPlane):
        self._dataplane = dataplane

    async def Predict(self, request: pb.PredictRequest, context: grpc.aio.ServicerContext) -> pb.PredictResponse:
        if request.instances and request.HasField("dense"):
            raise InvalidInput("set either instances or dense, not both")
        unknown = _unknown(request)

        def measure(served: ServedModel) -> Work:
            if request.HasField("dense"):
                dense = request.dense
                return dense_work(served.compiled, dense.features, dense.codes, dense.values)
            return instances_work(served.compiled, request.instances)

        def decode(served: ServedModel) -> np.ndarray:
            if request.HasField("dense"):
                dense = request.dense
                return codes_from_dense(served.compiled, served.class_name, dense.features, dense.codes, dense.values)
            unseen: dict[int, int] = {}
            codes = codes_from_instances(
                served.compiled, served.class_name, ((i.values, i.numbers) for i in request.instances), unknown, unseen
            )
            served.record_unseen(unseen)
            return codes

        def encode(served: ServedModel, proba: np.ndarray, winners: np.ndarray) -> pb.PredictResponse:
            classes = served.compiled.classes  # one Prediction per row, or two flat arrays; no message per row
            return predict_response(served.name, served.version, classes, proba, winners, request.dense_response)

        return await self._dataplane.predict(request.model, measure, decode, encode, context, **_selector(request))

    async def GetModelMetadata(
        self, request: pb.GetModelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelMetadata:
        served, entry = await self._dataplane.model(request.model, **_selector(request))
        aliases = entry.aliases_of(served.version)
        if request.include_parameters:  # every CPT as a list: work for the pool, not the event loop
            return await self._dataplane.offload(model_metadata, served, aliases, True)
        return model_metadata(served, aliases, False)

    async def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListModelsResponse:
        models = self._dataplane.models().models
        return pb.ListModelsResponse(
            models=[
                pb.ModelSummary(
                    name=e.name, versions=e.versions, aliases=dict(e.aliases), latest_version=max(e.versions)
                )
                for e in sorted(models.values(), key=lambda e: e.name)
            ]
        )


def model_metadata(served: ServedModel, aliases: tuple[str, ...], include_parameters: bool) -> pb.ModelMetadata:
    model = served.model
    reply = pb.ModelMetadata(
        name=served.name,
        version=served.version,
        aliases=aliases,
        algorithm=model.algorithm,
        parameters_json=json.dumps(dict(model.params), sort_keys=True),
        metadata_json=json.dumps(dict(model.metadata), sort_keys=True),
        combination=model.combination,
        class_variable=model.class_variable.name,
        created_at_ms=served.created_at_ms,
        checksum=served.checksum,
        variables=[_variable(v) for v in model.variables],
    )
    for i, net in enumerate(model.networks):
        reply.networks.add(nodes=[n.name for n in net.nodes])
        reply.arcs.extend(pb.Arc(parent=p, child=c, network=i) for p, c in net.arcs)
        if include_parameters:
            reply.cpts.extend(
                pb.Cpt(node=n.name, parents=n.parents, shape=n.cpt.shape, values=n.cpt.ravel().tolist(), network=i)
                for n in net.nodes
            )
    return reply


def _variable(v: Variable) -> pb.Variable:
    """A variable as GetModelMetadata lists it: a derived feature with its projection."""
    reply = pb.Variable(
        name=v.name, role=v.role, states=v.states, kind=v.kind, cuts=v.cuts, missing_state=v.missing_state
    )
    if v.projection is not None:
        reply.inputs.extend(v.projection.inputs)
        reply.centres.extend(v.projection.centres)
        reply.weights.extend(v.projection.weights)
    return reply
