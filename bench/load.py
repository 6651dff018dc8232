"""Bounded load: a real `server serve` under N concurrent streams for a while, nothing lost.

    python bench/load.py [--quick] [--streams 8,32] [--seconds 180] [--json OUT]

One server process (the benchmark model of ``bench.serving``: KDB k = 2, 50 features, 3
classes, on a SQLite store) and one client process per phase with N threads, each on a
TCP connection of its own, calling Predict back to back for the phase's duration: 80 %
single-row calls, 20 % batches of 16 rows (dense codes), every answer checked for its
row count and version. Phases: 8 then 32 streams, 3 minutes each (``--quick``: 8 then 32
streams, 10 s each, about 30 s in all). Before the first phase a 5 s warm-up at 8 streams.

Reported per phase: requests sent, errors by status code, p50 and p99 latency seen by the
client, requests/s, the server's CPU (cores busy), and the server's RSS after the warm-up
and at the end of each phase. Asserted (exit code 1 otherwise): no call failed, and the
server's RSS grew by less than ``RSS_BOUND_MIB`` from after the warm-up to the end.

Latency and rate are what this machine gave while the clients shared its cores with the
server; they are reported, not judged. ``bench/reliability.py`` runs this with the fault
tests and writes ``docs/reliability.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pathlib
import sys
import threading
import time

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from typing import TYPE_CHECKING, Any

from bench.serving import (
    MODEL_NAME,
    OWN_CONNECTION,
    Server,
    cpu_seconds,
    kdb_on_random_data,
    p50_p99,
    temporary_store,
)

if TYPE_CHECKING:
    from multiprocessing.queues import Queue


RSS_BOUND_MIB = 50.0  # growth of the server's RSS over the whole run, after the warm-up
BATCH_ROWS = 16
BATCH_SHARE = 0.2  # one call in five is a batch
FULL: dict[str, Any] = {"streams": (8, 32), "seconds": 180.0, "warmup": 5.0}
QUICK: dict[str, Any] = {"streams": (8, 32), "seconds": 10.0, "warmup": 5.0}


def rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def requests(features: list[str], rows: np.ndarray) -> tuple[list, list]:
    """The single-row and the batch requests the streams cycle through."""
    from bnserve.server.api import predictor_pb2 as pb

    def request(block: np.ndarray) -> pb.PredictRequest:
        return pb.PredictRequest(model=MODEL_NAME, dense=pb.DenseBatch(features=features, codes=block.ravel().tolist()))

    singles = [request(rows[i : i + 1]) for i in range(64)]
    batches = [request(rows[i : i + BATCH_ROWS]) for i in range(0, 64 * BATCH_ROWS, BATCH_ROWS)]
    return singles, batches


def client(target: str, streams: int, seconds: float, features: list[str], rows: np.ndarray, out: Queue) -> None:
    """A client process: ``streams`` threads calling Predict for ``seconds``; puts its figures on ``out``."""
    import grpc

    from bnserve.server.api import predictor_pb2_grpc

    singles, batches = requests(features, rows)
    latencies: list[list[float]] = [[] for _ in range(streams)]
    errors: list[dict[str, int]] = [{} for _ in range(streams)]
    wrong: list[int] = [0] * streams
    versions: list[set[int]] = [set() for _ in range(streams)]
    deadline = [0.0]

    def start_clock() -> None:  # run by the barrier before it releases anyone: no thread sees no deadline
        deadline[0] = time.monotonic() + seconds

    start = threading.Barrier(streams + 1, action=start_clock)

    def stream(i: int) -> None:
        rng = np.random.default_rng(i)
        with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            stub.Predict(singles[0], timeout=60)  # connected before the clock starts
            start.wait()
            k = 0
            while time.monotonic() < deadline[0]:
                batch = rng.random() < BATCH_SHARE
                request = (batches if batch else singles)[k % 64]
                k += 1
                t0 = time.perf_counter()
                try:
                    reply = stub.Predict(request, timeout=60)
                except grpc.RpcError as exc:
                    errors[i][exc.code().name] = errors[i].get(exc.code().name, 0) + 1
                    continue
                latencies[i].append(time.perf_counter() - t0)
                versions[i].add(reply.version)
                if len(reply.predictions) != (BATCH_ROWS if batch else 1):
                    wrong[i] += 1

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    start.wait()
    began = deadline[0] - seconds
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    merged: dict[str, int] = {}
    for e in errors:
        for code, n in e.items():
            merged[code] = merged.get(code, 0) + n
    out.put(
        {
            "latencies": [x for lat in latencies for x in lat],
            "errors": merged,
            "wrong_answers": sum(wrong),
            "versions": sorted(set().union(*versions)),
            "elapsed": elapsed,
        }
    )


def phase(server: Server, streams: int, seconds: float, features: list[str], rows: np.ndarray) -> dict:
    context = multiprocessing.get_context("spawn")  # a fresh process: grpc and fork do not mix
    out = context.Queue()
    pid = server.pid
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    process = context.Process(target=client, args=(server.target, streams, seconds, features, rows, out))
    process.start()
    figures = out.get(timeout=seconds + 300)
    process.join(timeout=60)
    cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - t0
    latencies = figures.pop("latencies")
    answered = len(latencies)
    errors = sum(figures["errors"].values())
    p50, p99 = p50_p99(latencies) if latencies else (float("nan"), float("nan"))
    return {
        "streams": streams,
        "seconds": round(figures["elapsed"], 1),
        "requests": answered + errors,
        "answered": answered,
        "errors": errors,
        "errors_by_status": figures["errors"],
        "wrong_answers": figures["wrong_answers"],
        "versions": figures["versions"],
        "rate": answered / figures["elapsed"],
        "p50_ms": p50 * 1e3,
        "p99_ms": p99 * 1e3,
        "server_cores": cpu / wall,
        "rss_end_mib": rss_mib(pid),
    }


def run(
    streams: tuple[int, ...] = QUICK["streams"], seconds: float = QUICK["seconds"], warmup: float = QUICK["warmup"]
) -> dict:
    """The load test; its figures (``ok`` says whether both assertions held)."""
    data, model = kdb_on_random_data(rows=2000)
    features = [v.name for v in data.features]
    rows = data.X[: 64 * BATCH_ROWS]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    with temporary_store(model) as url, Server(url) as server:
        rss_start_process = rss_mib(server.pid)
        warm = phase(server, 8, warmup, features, rows)
        rss_start = rss_mib(server.pid)
        phases = [phase(server, n, seconds, features, rows) for n in streams]
        rss_end = rss_mib(server.pid)
        server.stop()
        log = server.output()
    errors = sum(p["errors"] + p["wrong_answers"] for p in phases) + warm["errors"] + warm["wrong_answers"]
    growth = rss_end - rss_start
    return {
        "started": started,
        "streams": list(streams),
        "seconds": seconds,
        "warmup": warmup,
        "batch_rows": BATCH_ROWS,
        "batch_share": BATCH_SHARE,
        "phases": phases,
        "warmup_phase": warm,
        "requests": sum(p["requests"] for p in phases) + warm["requests"],
        "errors": errors,
        "rss_at_start_mib": rss_start_process,
        "rss_after_warmup_mib": rss_start,
        "rss_end_mib": rss_end,
        "rss_growth_mib": growth,
        "rss_bound_mib": RSS_BOUND_MIB,
        "traceback_in_log": "Traceback" in log,
        "ok": errors == 0 and growth < RSS_BOUND_MIB and "Traceback" not in log,
    }


def table(result: dict) -> str:
    lines = [
        "| streams | seconds | requests | errors | p50 ms | p99 ms | requests/s | server cores | RSS at end MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in result["phases"]:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(p["errors_by_status"].items())) or "0"
        lines.append(
            f"| {p['streams']} | {p['seconds']:.0f} | {p['requests']:,} | {errors} | {p['p50_ms']:.2f} | "
            f"{p['p99_ms']:.2f} | {p['rate']:,.0f} | {p['server_cores']:.2f} | {p['rss_end_mib']:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 s per phase instead of 3 minutes")
    parser.add_argument("--streams", help="comma-separated stream counts, one phase each (default 8,32)")
    parser.add_argument("--seconds", type=float, help="seconds per phase")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    form = dict(QUICK if args.quick else FULL)
    if args.streams:
        form["streams"] = tuple(int(s) for s in args.streams.split(","))
    if args.seconds:
        form["seconds"] = args.seconds
    result = run(**form)
    print(table(result))
    print(
        f"server RSS: {result['rss_at_start_mib']:.1f} MiB at start, {result['rss_after_warmup_mib']:.1f} after "
        f"the warm-up, {result['rss_end_mib']:.1f} at the end: growth {result['rss_growth_mib']:+.1f} MiB "
        f"(bound {RSS_BOUND_MIB:.0f}); errors {result['errors']}"
    )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
