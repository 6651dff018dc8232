"""Decoding and encoding a friendly Predict in process: the Python a call costs around the prediction.

    python bench/wire_codec.py [--quick]

The model and rows of ``bench.serving`` (KDB k = 2, 50 features with 4 states, 3 classes).
A PredictRequest of 1 and of 1,000 rows in the friendly ``instances`` form, every feature
a state label, parsed from its bytes once. Ours: what the Predictor servicer does with it
besides ``predict_proba`` — ``codes_from_instances`` (the per-model lookup tables), then
``predict_response`` of the probabilities, serialised as gRPC will. The floor: protobuf's
own C work on the same two messages, parsing the request's bytes and serialising the
response. Blocks of calls alternate between the two; medians of the blocks' means. No
goal: the figures compare versions of this code (``docs/development.md``).
"""

from __future__ import annotations

import pathlib
import sys
import time
from collections.abc import Callable

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from typing import TYPE_CHECKING

from bench.serving import MODEL_NAME, kdb_on_random_data, main_of, result
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.requests import codes_from_instances
from bnserve.server.responses import predict_response
from bnserve.store.predictor import compile_model

if TYPE_CHECKING:
    from bnserve.store.predictor import CompiledModel
    from bnserve.trainer.data import EncodedData


ITEM = "wire codec"
SIZES = (1, 1000)


def friendly_request(data: EncodedData, rows: int) -> bytes:
    """The serialised PredictRequest of the first ``rows`` rows, each feature's state label."""
    instances = [pb.Instance(values={v.name: v.states[c] for v, c in zip(data.features, row)}) for row in data.X[:rows]]
    return pb.PredictRequest(model=MODEL_NAME, instances=instances).SerializeToString()


def per_call(calls: dict[str, Callable[[], object]], block: int, rounds: int) -> dict[str, float]:
    """Seconds per call of each callable: the median over rounds of a block's mean, the
    blocks alternating between the callables."""
    for call in calls.values():  # warm up
        for _ in range(block):
            call()
    means: dict[str, list[float]] = {name: [] for name in calls}
    clock = time.perf_counter
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = clock()
            for _ in range(block):
                call()
            means[name].append((clock() - t0) / block)
    return {name: float(np.median(m)) for name, m in means.items()}


def run(quick: bool = False) -> list[dict]:
    data, model = kdb_on_random_data()
    compiled = compile_model(model)
    out = []
    for rows in SIZES:
        block = max(1, (200 if quick else 2000) // rows)
        seconds = _timings(
            compiled, model.class_variable.name, friendly_request(data, rows), block, 10 if quick else 40
        )
        out.append(
            result(
                ITEM,
                f"{rows}-row friendly Predict, decode + encode µs vs protobuf's parse + serialise",
                seconds["ours"] * 1e6,
                seconds["floor"] * 1e6,
                "—",
                None,
            )
        )
    return out


def _timings(compiled: CompiledModel, class_name: str, wire: bytes, block: int, rounds: int) -> dict[str, float]:
    request = pb.PredictRequest.FromString(wire)
    instances = request.instances

    def decode() -> np.ndarray:
        return codes_from_instances(compiled, class_name, ((i.values, i.numbers) for i in instances))

    proba = compiled.predict_proba(decode())
    winners = np.argmax(proba, axis=1)
    response = predict_response(MODEL_NAME, 1, compiled.classes, proba, winners, False)

    def ours() -> bytes:
        decode()
        return predict_response(MODEL_NAME, 1, compiled.classes, proba, winners, False).SerializeToString()

    def floor() -> bytes:
        pb.PredictRequest.FromString(wire)
        return response.SerializeToString()

    return per_call({"ours": ours, "floor": floor}, block, rounds)


def main() -> int:
    return main_of(
        run, __doc__, "KDB k=2, 50 features x 4 states, 3 classes; in process", "fewer rounds (a few seconds)"
    )


if __name__ == "__main__":
    sys.exit(main())
