"""Shared by the serving benchmarks: the model they serve, the real server process, figures.

- ``kdb_on_random_data``: the benchmark model, KDB (k = 2) fitted on random rows of n = 50
  features and c = 3 classes, with the rows. The generator here is deliberately minimal and
  private (``bench/synthetic.py`` is the suite's real one).
- ``Server``: ``server serve`` as a subprocess on free loopback ports, SERVING before it is
  handed out, stopped with SIGTERM (a graceful drain) on exit.
- ``p50_p99``, ``result``, ``print_table``: what every module reports, as the suite runner
  takes it: dicts with ``item``, ``measurement``, ``ours``, ``peer``, ``ratio``, ``goal``, ``met``.

Every figure is a ratio to a peer timed in the same run, interleaved with ours, because
other processes share the machine's cores.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Protocol

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bnserve.store.db import ModelStore
from bnserve.store.model import Model
from bnserve.trainer.data import EncodedData

# Where our commands (trainer, server) are run from: this environment's, or a folder of an
# earlier commit's commands (bench.baseline.baseline_commands) that bench/before_after.py points
# it at. Read through ``program``.
BIN = pathlib.Path(sys.executable).parent
MODEL_NAME = "bench"
# Channels that must not share a TCP connection (grpc pools subchannels per target and
# arguments across channels of a process otherwise): one connection per channel.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def program(name: str, commands: pathlib.Path | None = None) -> str:
    """The path of the command ``name`` (``trainer``, ``server``) in ``commands``, else in ``BIN``."""
    return str((commands or BIN) / name)


# --------------------------------------------------------------------------- model


def kdb_on_random_data(
    n_features: int = 50, n_classes: int = 3, k: int = 2, rows: int = 5000, n_states: int = 4, seed: int = 0
) -> tuple[EncodedData, Model]:
    """The benchmark model (KDB, ``k`` feature parents) and the rows it was fitted on: a sample
    of ``bench.synthetic``'s random k-dependence network, the suite's one data generator."""
    from bench.synthetic import random_network, sample
    from bnserve.trainer.fit import fit

    network = random_network(seed, n_features=n_features, max_states=n_states, n_classes=n_classes, k=k)
    data = sample(network, rows, seed + 1)
    return data, fit("kdb", data, k=k)


def publish(model: Model, directory: str | os.PathLike) -> str:
    """A SQLite store in ``directory`` holding ``model`` as ``MODEL_NAME`` version 1; its URL."""
    url = f"sqlite:///{pathlib.Path(directory) / 'bench.db'}"
    with ModelStore(url, create=True) as store:
        store.publish(MODEL_NAME, model, aliases=("production",))
    return url


# --------------------------------------------------------------------------- server process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(target: str, timeout: float = 60.0, process: subprocess.Popen | None = None) -> None:
    """Until grpc.health.v1 says SERVING at ``target``; fails early if ``process`` exits."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the server at {target} exited with code {process.returncode}")
            try:
                if (
                    health.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                    == health_pb2.HealthCheckResponse.SERVING
                ):
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"the server at {target} did not report SERVING within {timeout} s")


@dataclass
class Server:
    """``server serve`` on loopback: ``target`` is host:port, ``metrics_port`` -1 when off."""

    store_url: str
    workers: int = 1
    threads: int | None = None
    metrics: bool = False
    extra: tuple[str, ...] = ()
    commands: pathlib.Path | None = None  # another commit's (bench.baseline.baseline_commands), not BIN
    port: int = 0
    metrics_port: int = -1
    process: subprocess.Popen | None = field(default=None, repr=False)
    _log: IO[str] | None = field(default=None, repr=False)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> Server:
        self.port = free_port()
        self.metrics_port = free_port() if self.metrics else -1
        command = [
            program("server", self.commands),
            "serve",
            "--store",
            self.store_url,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--metrics-port",
            str(self.metrics_port),
            "--log-level",
            "WARNING",
        ]
        if self.workers != 1:
            command += ["--workers", str(self.workers)]
        if self.threads is not None:
            command += ["--threads", str(self.threads)]
        self._log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(command + list(self.extra), stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_serving(self.target, timeout, self.process)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{exc}; its output:\n{self.output()}") from None
        return self

    @property
    def pid(self) -> int:
        """The server's process (with workers, their supervisor)."""
        assert self.process is not None, "not started"
        return self.process.pid

    def pids(self) -> list[int]:
        """The serving processes: the workers when there are several, else the server."""
        if self.workers == 1:
            return [self.pid]
        children = pathlib.Path(f"/proc/{self.pid}/task/{self.pid}/children")
        return [int(p) for p in children.read_text().split()]

    def output(self) -> str:
        assert self._log is not None, "not started"
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()


class BenchRun(Protocol):
    """A serving bench's ``run``: one dict per figure (``result``)."""

    def __call__(self, quick: bool = False) -> list[dict]: ...


@contextlib.contextmanager
def bare_echo() -> Iterator[str]:
    """``bench/bare_echo.py`` in its own process (the floor of a call, none of our code on
    its path); yields its target, host:port."""
    port = free_port()
    script = pathlib.Path(__file__).with_name("bare_echo.py")
    process = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE, text=True)
    try:
        if process.stdout is None or process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"bench/bare_echo.py did not start (exit {process.poll()})")
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def temporary_store(model: Model) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bnserve-bench-") as tmp:
        yield publish(model, tmp)


# --------------------------------------------------------------------------- figures


def p50_p99(seconds: np.ndarray | list[float]) -> tuple[float, float]:
    a = np.asarray(seconds, dtype=float)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def result(
    item: str, measurement: str, ours: float, peer: float, goal: str, met: bool | None, ratio: float | None = None
) -> dict:
    """One reported figure. ``ratio`` defaults to ours / peer; ``goal`` says which way is good."""
    if ratio is None:
        ratio = ours / peer if peer else float("nan")
    return {
        "item": item,
        "measurement": measurement,
        "ours": ours,
        "peer": peer,
        "ratio": ratio,
        "goal": goal,
        "met": met,
    }


def number(x: object) -> str:
    """A figure as the tables print it: three significant digits, whole numbers from 1,000."""
    if isinstance(x, float):
        return f"{x:,.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def print_table(results: list[dict], file: IO[str] = sys.stdout) -> None:
    print("| item | measurement | ours | peer | ratio | goal | met |", file=file)
    print("|---|---|---|---|---|---|---|", file=file)
    for r in results:
        met = {True: "yes", False: "**no**", None: "—"}[r["met"]]
        print(
            f"| {r['item']} | {r['measurement']} | {number(r['ours'])} | {number(r['peer'])} | "
            f"{r['ratio']:.2f} | {r['goal']} | {met} |",
            file=file,
        )


def main_of(run: BenchRun, doc: str, heading: str, quick_help: str) -> int:
    """The command line of a serving bench run alone: ``--quick``, then its table."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args()
    t0 = time.monotonic()
    results = run(quick=args.quick)
    print(f"{heading}; {time.monotonic() - t0:.0f} s")
    print_table(results)
    return 0
