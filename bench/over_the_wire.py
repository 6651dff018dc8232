"""Predict over the wire: the real server process on loopback, this process the client.

    python bench/over_the_wire.py [--quick]

The model: KDB (k = 2) fitted on random rows of n = 50 features with 4 states and c = 3
classes (``bench.serving.kdb_on_random_data``), published to a temporary SQLite store and
served by ``server serve`` in its own process.

- Single row: ``bnserve.v1.Predictor/Predict`` with one dense row of all 50 codes and
  with the friendly ``instances`` form, timed call by call and interleaved with the
  floor: ``bench/bare_echo.py``, a bare ``grpc.server`` in a process of its own that
  echoes the bytes of an Echo request as large as the dense Predict's, called by the same
  client through the same generated stub. No code of ours runs on the floor's path.
  p50 and p99, each as a ratio to the floor's. Goal: p50 <= 1.3x the floor, both forms.
  Also reported, interleaved with them: ``bnserve.v1.Diagnostics/Echo`` served by our
  server (its interceptors and thread pool, no work) against the same floor.
- Batch: a dense Predict of 1,000 rows answered as flat arrays (``dense_response``), rows per second, against the same rows through
  ``bnserve.store.predictor.compile_model(model).predict_proba`` in this process, interleaved
  round by round; medians. Goal: >= 0.25 of the in-process rate.
"""

from __future__ import annotations

import pathlib
import sys
import time

import grpc
import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from typing import TYPE_CHECKING

from bench.serving import (
    MODEL_NAME,
    Server,
    bare_echo,
    kdb_on_random_data,
    main_of,
    p50_p99,
    result,
    temporary_store,
)
from bnserve.server.api import diagnostics_pb2, diagnostics_pb2_grpc, predictor_pb2, predictor_pb2_grpc
from bnserve.store.predictor import compile_model

if TYPE_CHECKING:
    from bnserve.store.model import Model
    from bnserve.trainer.data import EncodedData


ITEM = "4 over the wire"
LATENCY_GOAL = 1.3
THROUGHPUT_GOAL = 0.25
BATCH = 1000
BOUNDS = {  # what bounds a missed goal, by measurement (bench/run.py puts it in docs/performance.md)
    "single-row Predict (dense) p50 µs vs a bare gRPC echo server": (
        "Borderline: 1.24-1.40 across runs of 2026-11-26, against an echo with none of our code (a bare "
        "grpc.server in its own process). In the same runs, our own Echo on the asyncio server, with "
        "interceptors and no work, measured 1.06-1.21 of it. What is left is the Predict itself. The same server "
        "answering a cached reply instead of predicting measured 576 µs against 683 µs for the real Predict, "
        "so the work costs about 107 µs of wall time. The same code in a tight loop takes about 40 µs. With a "
        "gap of 0.5-2 ms between calls, this VM's CPU runs cold, and every numpy call pays several times its "
        "warm cost (np.zeros(3): 0.3 µs warm, 3 µs after a gap)."
    ),
    "single-row Predict (instances) p50 µs vs a bare gRPC echo server": (
        "Borderline: 1.28-1.39 across runs of 2026-11-26, for the reasons of the dense form. The friendly form "
        "is now decoded through per-model lookup tables (requests.FeatureTables), so it costs what the dense "
        "form costs: in process, a 50-feature row decodes in about 15 µs (33 µs before; bench/wire_codec.py), "
        "and about half of that is protobuf making each map entry's two strings."
    ),
    f"{BATCH}-row dense Predict rows/s vs in-process predict_proba": (
        "Borderline, 0.25-0.26 across runs. A 1,000-row call (50 KB in, 24 KB out) takes about 2.0 ms of server "
        "CPU and 0.47 ms of client CPU, where the work itself is about 1 ms: parsing the request 154 µs, "
        "predict_proba 667 µs, building and serialising the flat response 154 µs (measured alone, "
        "`PredictRequest.FromString`, `CompiledModel.predict_proba`, `DensePredictions`). "
        "The other millisecond is the Python gRPC server's transport, and the hand-off to the work pool "
        "(a request over 32 rows runs there; about 100-200 µs), paid once per call on the same 2 cores as "
        "the client."
    ),
}


def _single_row(
    channel: grpc.Channel, floor_channel: grpc.Channel, data: EncodedData, calls: int
) -> dict[str, np.ndarray]:
    """Seconds per call, interleaved: the bare floor's Echo, our Echo, dense Predict, instances Predict."""
    predictor = predictor_pb2_grpc.PredictorStub(channel)
    echo = diagnostics_pb2_grpc.DiagnosticsStub(channel)
    bare = diagnostics_pb2_grpc.DiagnosticsStub(floor_channel)
    names = [v.name for v in data.features]
    rows = data.X[: min(1000, len(data.X))]
    dense = [
        predictor_pb2.PredictRequest(model=MODEL_NAME, dense=predictor_pb2.DenseBatch(features=names, codes=r.tolist()))
        for r in rows
    ]
    instances = [
        predictor_pb2.PredictRequest(
            model=MODEL_NAME,
            instances=[predictor_pb2.Instance(values={v.name: v.states[c] for v, c in zip(data.features, r)})],
        )
        for r in rows
    ]
    floor = diagnostics_pb2.EchoRequest(payload=bytes(dense[0].ByteSize()))
    kinds = {
        "floor": lambda i: bare.Echo(floor),
        "Echo": lambda i: echo.Echo(floor),
        "dense": lambda i: predictor.Predict(dense[i % len(dense)]),
        "instances": lambda i: predictor.Predict(instances[i % len(instances)]),
    }
    for call in kinds.values():  # warm up: connections, code paths
        for i in range(100):
            call(i)
    times = {k: np.empty(calls) for k in kinds}
    clock = time.perf_counter
    for i in range(calls):
        for kind, call in kinds.items():
            t0 = clock()
            call(i)
            times[kind][i] = clock() - t0
    return times


def _batch(channel: grpc.Channel, data: EncodedData, model: Model, rounds: int) -> tuple[float, float]:
    """(rows/s over the wire, rows/s in process), medians of interleaved rounds."""
    predictor = predictor_pb2_grpc.PredictorStub(channel)
    names = [v.name for v in data.features]
    rows = np.ascontiguousarray(data.X[:BATCH], dtype=np.int64)
    request = predictor_pb2.PredictRequest(
        model=MODEL_NAME,
        dense=predictor_pb2.DenseBatch(features=names, codes=rows.ravel().tolist()),
        dense_response=True,
    )
    compiled = compile_model(model)
    reply = predictor.Predict(request)  # warm up, and the answers agree
    np.testing.assert_allclose(
        np.reshape(reply.dense.probabilities, (BATCH, -1)), compiled.predict_proba(rows), atol=1e-12
    )
    wire, local = np.empty(rounds), np.empty(rounds)
    clock = time.perf_counter
    for r in range(rounds):
        t0 = clock()
        predictor.Predict(request)
        wire[r] = clock() - t0
        t0 = clock()
        compiled.predict_proba(rows)
        local[r] = clock() - t0
    return BATCH / float(np.median(wire)), BATCH / float(np.median(local))


def run(quick: bool = False) -> list[dict]:
    calls, rounds = (400, 10) if quick else (3000, 60)
    data, model = kdb_on_random_data()
    with temporary_store(model) as url, Server(url) as server, bare_echo() as floor_target:
        with grpc.insecure_channel(server.target) as channel, grpc.insecure_channel(floor_target) as floor_channel:
            times = _single_row(channel, floor_channel, data, calls)
            wire_rate, local_rate = _batch(channel, data, model, rounds)
    f50, f99 = p50_p99(times["floor"])
    out = []
    for kind, label in (("dense", "Predict (dense)"), ("instances", "Predict (instances)"), ("Echo", "our Echo")):
        p50, p99 = p50_p99(times[kind])
        goal = kind != "Echo"
        out.append(
            result(
                ITEM,
                f"single-row {label} p50 µs vs a bare gRPC echo server",
                p50 * 1e6,
                f50 * 1e6,
                f"≤ {LATENCY_GOAL}" if goal else "—",
                p50 / f50 <= LATENCY_GOAL if goal else None,
            )
        )
        out.append(
            result(ITEM, f"single-row {label} p99 µs vs a bare gRPC echo server", p99 * 1e6, f99 * 1e6, "—", None)
        )
    out.append(
        result(
            ITEM,
            f"{BATCH}-row dense Predict rows/s vs in-process predict_proba",
            wire_rate,
            local_rate,
            f"≥ {THROUGHPUT_GOAL}",
            wire_rate / local_rate >= THROUGHPUT_GOAL,
        )
    )
    return out


def main() -> int:
    return main_of(
        run,
        __doc__,
        "KDB k=2, 50 features x 4 states, 3 classes; server on loopback, one client process",
        "fewer calls (under 30 s)",
    )


if __name__ == "__main__":
    sys.exit(main())
