"""`server serve --workers N`: N worker processes answering on one port, and their parent.

One Python process runs one request at a time in Python (the GIL), so one process uses
about one core. The parent here starts N workers, each a fresh interpreter running
``python -m bnserve.server.cli serve --worker-of PARENT_PID ...`` (never a fork: grpc's threads
and fork do not mix). Every worker binds the same port with SO_REUSEPORT, once it has
read the store, and the kernel spreads incoming connections over the listening workers
(per connection, by a hash of its addresses; a connection stays with its worker).

The parent:
- checks first what would make every worker fail alike: it reads the TLS and token
  files (each worker reads them again, from the same paths, passed as flags: no key or
  token is ever on a command line), opens the store once (its schema checked: a bad
  URL or a store behind fails here, not in N workers), and binds the port itself with
  SO_REUSEPORT, holding it (bound, not listening: it takes no connections) so that the
  port is ours from the start, and so that ``--port 0`` picks one port for all workers;
- gives the workers a fresh temporary ``PROMETHEUS_MULTIPROC_DIR`` and serves the merge
  of their metrics on ``--metrics-port`` (prometheus-client's multiprocess mode; see
  ``bnserve.server.metrics`` for how each gauge merges), and deletes it at exit;
- restarts a worker that exits on its own, logging its exit status, after a delay that
  grows while workers keep dying young (so a crash loop does not spin);
- on SIGTERM or SIGINT sends SIGTERM to every worker (each drains for
  ``--grace-seconds``, as a lone server does), waits for them, and exits 0.

Workers run in a session of their own, so a terminal's Ctrl-C reaches the parent only,
which forwards it; a worker whose parent dies shuts itself down.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any

from bnserve.server.app import load_security, verify_keys
from bnserve.server.config import ServeConfig
from bnserve.store.db import STORE_URL_ENV

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2  # how often the parent looks at its workers
YOUNG_SECONDS = 10.0  # a worker that dies younger than this counts towards backoff
MAX_RESTART_DELAY = 30.0
STOP_MARGIN_SECONDS = 10.0  # beyond the grace, before a worker that will not stop is killed
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass
class Worker:
    """One slot: its process (None while waiting to be restarted)."""

    index: int
    process: subprocess.Popen | None = None
    started: float = 0.0
    restart_at: float = 0.0
    young_deaths: int = 0


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) with SO_REUSEPORT, not listening: holds the port for
    the workers (who bind it the same way) and picks one when ``port`` is 0."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot bind gRPC port {host}:{port}: {exc.strerror or exc}") from None
    return sock


class Supervisor:
    """The parent of ``count`` workers serving ``config`` (whose ``port`` may be 0)."""

    def __init__(self, config: ServeConfig, count: int | None = None):
        """``count`` workers (default ``config.workers``)."""
        count = config.workers if count is None else count
        if count < 2:
            raise ValueError("a supervisor runs at least 2 workers")
        from bnserve.store.db import ModelStore

        load_security(config)  # a bad certificate, key or token file fails here, once
        verify_keys(config)
        ModelStore(
            config.store_url, timeouts=config.store_timeouts
        ).dispose()  # fails here, once, on a bad URL or store
        self._reservation = reserve_port(config.host, config.port)
        self.port = self._reservation.getsockname()[1]
        self.config = config
        self.metrics_dir = tempfile.mkdtemp(prefix="bnserve-metrics-")
        self.metrics_port = -1
        self._http_server: Any = None  # the metrics server once it runs
        self._workers = [Worker(i) for i in range(count)]
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ workers

    def _command(self) -> list[str]:
        c = self.config
        command = [
            sys.executable,
            "-m",
            "bnserve.server.cli",
            "serve",
            "--worker-of",
            str(os.getpid()),
            "--host",
            c.host,
            "--port",
            str(self.port),
            "--metrics-port",
            "-1",
            "--poll-seconds",
            repr(c.poll_seconds),
            "--poll-stall-seconds",
            repr(c.poll_stall_seconds),
            "--compile",
            c.compile,
            "--grace-seconds",
            repr(c.grace_seconds),
            "--threads",
            str(c.threads),
            "--log-level",
            c.log_level,
            "--max-rows",
            str(c.max_rows),
            "--max-message-bytes",
            str(c.max_message_bytes),
            "--max-metadata-bytes",
            str(c.max_metadata_bytes),
            "--max-streams-per-connection",
            str(c.max_streams_per_connection),
            "--idle-seconds",
            repr(c.idle_seconds),
            "--max-inflight-bytes",
            str(c.max_inflight_bytes),
            "--max-connection-inflight-bytes",
            str(c.max_connection_inflight_bytes),
            "--max-connections",
            str(c.max_connections),
            "--body-seconds",
            repr(c.body_seconds),
            "--plan-cache-bytes",
            str(c.plan_cache_bytes),
            "--store-threads",
            str(c.store_threads),
            "--max-load-waiters",
            str(c.max_load_waiters),
            "--version-cache-bytes",
            str(c.version_cache_bytes),
            "--store-connect-timeout",
            repr(c.store_connect_timeout),
            "--store-statement-timeout",
            repr(c.store_statement_timeout),
        ]
        for flag, path in (
            ("--tls-cert", c.tls_cert),
            ("--tls-key", c.tls_key),
            ("--tls-client-ca", c.tls_client_ca),
            ("--auth-token-file", c.auth_token_file),
            ("--verify-key", c.verify_key),
        ):
            if path is not None:  # file paths only; a worker reads the files itself
                command += [flag, os.path.abspath(path)]
        return command

    def _start(self, worker: Worker) -> None:
        # the store URL goes by the environment, not the command line that ps shows
        env = dict(os.environ, **{MULTIPROC_ENV: self.metrics_dir, STORE_URL_ENV: self.config.store_url})
        worker.process = subprocess.Popen(self._command(), env=env, start_new_session=True)
        worker.started = time.monotonic()
        log.info("worker %d started (pid %d)", worker.index, worker.process.pid)

    def _reap(self, worker: Worker) -> None:
        """A worker exited on its own: log it, drop its live gauges, schedule its restart."""
        from prometheus_client import multiprocess

        process = worker.process
        assert process is not None, "only a worker that ran is reaped"
        code = process.returncode
        status = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        multiprocess.mark_process_dead(process.pid, self.metrics_dir)
        lifetime = time.monotonic() - worker.started
        worker.young_deaths = worker.young_deaths + 1 if lifetime < YOUNG_SECONDS else 0
        delay = min(MAX_RESTART_DELAY, 0.5 * 2 ** (worker.young_deaths - 1)) if worker.young_deaths else 0.0
        worker.process = None
        worker.restart_at = time.monotonic() + delay
        log.error(
            "worker %d (pid %d) exited (%s) after %.1f s; restarting it in %.1f s",
            worker.index,
            process.pid,
            status,
            lifetime,
            delay,
        )

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process is not None]

    # ------------------------------------------------------------------ run

    def _serve_metrics(self) -> None:
        if self.config.metrics_port < 0:
            return
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        from bnserve.server.metrics import serve_metrics

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.metrics_dir)
        self._http_server = serve_metrics(self.config.metrics_port, self.config.host, registry)
        self.metrics_port = self._http_server.server_address[1]

    def stop(self) -> None:
        """Ask for the graceful shutdown (from a signal handler or another thread)."""
        self._stopping.set()

    def run(self) -> int:
        """Start the workers, keep them running until ``stop``, then drain them; returns 0."""
        try:
            self._serve_metrics()
            for worker in self._workers:
                self._start(worker)
            log.info(
                "gRPC on %s:%d with %d workers, metrics on :%d",
                self.config.host,
                self.port,
                len(self._workers),
                self.metrics_port,
            )
            while not self._stopping.wait(POLL_SECONDS):
                now = time.monotonic()
                for worker in self._workers:
                    if worker.process is not None and worker.process.poll() is not None:
                        self._reap(worker)
                    if worker.process is None and now >= worker.restart_at and not self._stopping.is_set():
                        self._start(worker)
            self._drain()
        finally:
            self._close()
        return 0

    def _drain(self) -> None:
        from prometheus_client import multiprocess

        running = [w.process for w in self._workers if w.process is not None and w.process.poll() is None]
        log.info("shutting down %d worker(s)", len(running))
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.config.grace_seconds + STOP_MARGIN_SECONDS
        for process in running:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker pid %d did not stop within the grace; killing it", process.pid)
                process.kill()
                process.wait()
        for worker in self._workers:
            if worker.process is not None:
                multiprocess.mark_process_dead(worker.process.pid, self.metrics_dir)
        log.info("stopped")

    def _close(self) -> None:
        for worker in self._workers:  # only if run() failed half-way: never leave workers behind
            if worker.process is not None and worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
        if self._http_server is not None:
            self._http_server.shutdown()
        self._reservation.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)


def serve_workers(config: ServeConfig) -> int:
    """Run ``config.workers`` workers until SIGTERM or SIGINT, then shut them down gracefully."""
    supervisor = Supervisor(config)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        supervisor.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return supervisor.run()
