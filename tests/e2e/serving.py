"""Helpers for the end-to-end tests: real CLI processes, free ports, health, /metrics, versions
written straight into the tables."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import grpc
import numpy as np
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bnserve.store.db.rows import model_to_rows
from bnserve.store.db.tables import (
    SqlArc,
    SqlCpt,
    SqlModel,
    SqlModelAlias,
    SqlModelVersion,
    SqlModelVersionTag,
    SqlVariable,
)
from bnserve.store.model import Model

BIN = pathlib.Path(sys.executable).parent


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (a server's workers)."""
    return [int(p) for p in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def environment(pid: int) -> dict[str, str]:
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def status(pid: int, key: str) -> int:
    """A /proc/PID/status figure (VmRSS, VmHWM, VmSize), in bytes."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} for process {pid}")


def store_of(directory: pathlib.Path, model: Model, name: str = "m") -> str:
    """The URL of a new SQLite store in ``directory`` holding ``model`` as ``name`` version 1."""
    from bnserve.store.db import ModelStore, upgrade_store

    url = f"sqlite:///{directory / 'store.db'}"
    upgrade_store(url)
    with ModelStore(url) as store:
        store.publish(name, model)
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=300, env=env)


def wait_serving(channel: grpc.Channel, timeout: float = 60.0) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    raise AssertionError("server did not report SERVING")


@dataclass(frozen=True)
class Served:
    """A running ``server serve``: its channel, its gRPC port and its metrics port."""

    channel: grpc.Channel
    port: int
    metrics_port: int


@contextmanager
def serving(store: str) -> Iterator[Served]:
    """A real ``server serve`` process on ``store``, on free loopback ports, SERVING; killed after."""
    port, metrics_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            str(BIN / "server"),
            "serve",
            "--store",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            str(metrics_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        wait_serving(channel)
        yield Served(channel, port, metrics_port)
    finally:
        channel.close()
        proc.kill()
        proc.wait(timeout=10)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def sample_value(text: str, name: str, **labels: str) -> float:
    """Value of the first sample of `name` whose labels include `labels`."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} {labels} in /metrics")


@dataclass(frozen=True)
class Outcome:
    """One Predict call of a ``PredictLoop``: when (time.monotonic) it started and ended, its
    status code name, and for an answer the version and the probabilities (rows × classes)."""

    thread: int
    started: float
    ended: float
    code: str
    version: int = 0
    probabilities: np.ndarray | None = None
    details: str = ""


class PredictLoop:
    """``threads`` client threads, each on a TCP connection of its own, calling Predict with
    ``request`` back to back (a deadline of ``timeout`` seconds each) until ``stop``; every
    call's ``Outcome`` is kept, in order per thread. A call never hangs the loop: a call
    that outlives its deadline is a DEADLINE_EXCEEDED outcome."""

    def __init__(self, target: str, request, threads: int = 2, timeout: float = 30.0, stop_on_error: bool = False):
        self.target, self.request, self.timeout = target, request, timeout
        self.stop_on_error = stop_on_error
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"predict-loop-{i}", daemon=True) for i in range(threads)
        ]

    def __enter__(self) -> PredictLoop:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.timeout + 30)
        assert not any(t.is_alive() for t in self._threads), "a client thread hangs"
        return self.outcomes

    def _run(self, thread: int) -> None:
        from bnserve.server.api import predictor_pb2_grpc

        with grpc.insecure_channel(self.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    reply = stub.Predict(self.request, timeout=self.timeout)
                except grpc.RpcError as exc:
                    outcome = Outcome(thread, started, time.monotonic(), exc.code().name, details=exc.details() or "")
                else:
                    n = len(reply.classes)
                    proba = (
                        np.array(reply.dense.probabilities).reshape(-1, n)
                        if reply.HasField("dense")
                        else np.array([p.probabilities for p in reply.predictions])
                    )
                    outcome = Outcome(thread, started, time.monotonic(), "OK", reply.version, proba)
                with self._lock:
                    self.outcomes.append(outcome)
                if outcome.code != "OK":
                    if self.stop_on_error:
                        return
                    self._stop.wait(0.05)  # no busy loop against a server that is gone

    def snapshot(self) -> list[Outcome]:
        with self._lock:
            return list(self.outcomes)

    def codes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.snapshot():
            counts[o.code] = counts.get(o.code, 0) + 1
        return counts

    def wait_for(self, predicate, what: str, timeout: float = 60.0) -> None:
        """Until ``predicate(outcomes so far)`` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.snapshot()):
                return
            time.sleep(0.05)
        raise AssertionError(f"never saw {what}; calls so far by status: {self.codes()}")


def wait_until(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"never saw {what}")


def write_version(
    url: str,
    name: str,
    version: int,
    model: Model,
    *,
    flip_a_cpt_byte: bool = False,
    alias: str | None = None,
    params_json: str | None = None,
    columns: dict | None = None,
    tags: dict | None = None,
) -> None:
    """Insert ``model`` as ``version`` of ``name`` straight into the tables, in one transaction
    with moving ``alias`` to it, as a writer that does not count its writes (a trainer before
    schema 0005) would; with ``flip_a_cpt_byte`` one byte of its first CPT blob is changed after
    its sha256 was taken; ``params_json`` replaces the stored parameters; ``columns`` are more
    ``model_versions`` values (description, signature_key, signature) and ``tags`` its tags."""
    rows = model_to_rows(model)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            model_id = conn.execute(sa.select(SqlModel.id).where(SqlModel.name == name)).scalar_one()
            keyed = rows.keyed(model_id, version, time.time_ns() // 1_000_000)
            cpts = [dict(r) for r in keyed.cpts]
            if flip_a_cpt_byte:
                cpts[0]["data"] = bytes([cpts[0]["data"][0] ^ 0xFF]) + cpts[0]["data"][1:]
            header = keyed.header if params_json is None else {**keyed.header, "params_json": params_json}
            conn.execute(sa.insert(SqlModelVersion), [{**header, **(columns or {})}])
            if tags:
                conn.execute(
                    sa.insert(SqlModelVersionTag),
                    [{"model_id": model_id, "version": version, "key": k, "value": v} for k, v in tags.items()],
                )
            conn.execute(sa.insert(SqlVariable), keyed.variables)
            conn.execute(sa.insert(SqlCpt), cpts)
            if keyed.arcs:
                conn.execute(sa.insert(SqlArc), keyed.arcs)
            if alias is not None:
                conn.execute(
                    sa.update(SqlModelAlias)
                    .where(SqlModelAlias.model_id == model_id, SqlModelAlias.alias == alias)
                    .values(version=version)
                )
    finally:
        engine.dispose()
