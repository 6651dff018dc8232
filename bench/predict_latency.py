"""Single-row Predict latency over loopback, against a no-work gRPC call as the floor.

    python bench/predict_latency.py [--calls 2000] [--algo fkdb] [--k 2]

Trains on the packaged chess data into a temporary SQLite store, starts the real
`server serve` process, and times from a client in this process, interleaved:
a one-row Predict (all 36 features, friendly form), a one-row dense Predict, and a
grpc.health.v1 Check (the floor: same server, same channel, no model work). Prints
p50/p99 in microseconds and the ratio to the floor's.
"""

from __future__ import annotations

import argparse
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from server.api import predictor_pb2 as pb
from server.api import predictor_pb2_grpc
from store.sql import ModelStore
from trainer.data import load
from trainer.fit import fit

BIN = pathlib.Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--algo", default="fkdb")
    parser.add_argument("--k", type=int, default=2)
    args = parser.parse_args()

    data = load("builtin:chess")
    model = fit(args.algo, data, k=args.k if args.algo in ("kdb", "fkdb") else None)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        with ModelStore(url) as store:
            store.publish("chess", model)
        port = free_port()
        server = subprocess.Popen(
            [str(BIN / "server"), "serve", "--store", url, "--host", "127.0.0.1", "--port", str(port),
             "--metrics-port", "-1", "--log-level", "WARNING"],
        )
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            health = health_pb2_grpc.HealthStub(channel)
            stub = predictor_pb2_grpc.PredictorStub(channel)
            deadline = time.monotonic() + 60
            while True:
                try:
                    if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == 1:
                        break
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("server did not become SERVING")
                time.sleep(0.1)

            names = [v.name for v in data.features]
            rows = data.X[: min(args.calls, len(data.X))]
            friendly = [
                pb.PredictRequest(model="chess", instances=[pb.Instance(values={
                    v.name: v.states[c] for v, c in zip(data.features, row)})])
                for row in rows
            ]
            dense = [pb.PredictRequest(model="chess", dense=pb.DenseBatch(features=names, codes=row.tolist()))
                     for row in rows]
            floor_request = health_pb2.HealthCheckRequest()
            calls = {
                "health Check (floor)": lambda i: health.Check(floor_request),
                "Predict, 1 row, instances": lambda i: stub.Predict(friendly[i % len(friendly)]),
                "Predict, 1 row, dense": lambda i: stub.Predict(dense[i % len(dense)]),
            }
            for call in calls.values():  # warm up
                for i in range(200):
                    call(i)
            times = {name: np.empty(args.calls) for name in calls}
            for i in range(args.calls):
                for name, call in calls.items():
                    t0 = time.perf_counter()
                    call(i)
                    times[name][i] = time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait(timeout=30)

    floor = times["health Check (floor)"]
    f50, f99 = np.percentile(floor, 50), np.percentile(floor, 99)
    print(f"{args.algo} k={args.k} on chess (36 features), {args.calls} calls each, loopback, one client")
    print(f"{'call':28} {'p50 µs':>8} {'p99 µs':>8} {'p50/floor':>10} {'p99/floor':>10}")
    for name, t in times.items():
        p50, p99 = np.percentile(t, 50), np.percentile(t, 99)
        print(f"{name:28} {p50 * 1e6:8.0f} {p99 * 1e6:8.0f} {p50 / f50:10.2f} {p99 / f99:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
