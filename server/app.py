"""Wiring: store -> repository -> gRPC server with health, reflection and metrics.

The gRPC server is ``grpc.aio``: one asyncio event loop, on a thread of its own, receives
every call and answers the small ones itself; a large request goes to the work pool
(``--threads``; see ``bnserve.server.dataplane``), a load from the store to threads of its
own (``--store-threads``; ``bnserve.server.on_demand``). A call waiting for its body or a
held stream (Health.Watch) costs a coroutine, not a thread, so no number of idle or slow
clients can take the threads the work needs. ``App``'s own methods are synchronous, called
from any thread; they run what the server needs on its loop.

One port serves bnserve.v1.Predictor, bnserve.v1.Diagnostics (Echo, the no-work floor)
and the Open Inference Protocol's inference.GRPCInferenceService, whose readiness is
the health status.

Health reports NOT_SERVING until the store has been read once, and again from the
moment a graceful shutdown starts (SIGTERM/SIGINT), so probes and load balancers
stop sending before in-flight calls are drained.

A worker of ``server serve --workers N`` (``bnserve.server.workers`` starts them) differs in
two ways: it binds its port with SO_REUSEPORT, shared with its sibling workers, and
only once it has read the store, so the kernel never hands a connection to a worker
that cannot answer yet; and it stops when its parent is gone.

With ``tls_cert``/``tls_key`` the gRPC port speaks TLS only (mutual TLS with
``tls_client_ca``), and with ``auth_token_file`` every call but health needs a bearer
token (see ``bnserve.server.security``). Both are read, and checked, before anything else, so a
bad file fails the start. The metrics port stays plain HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent import futures
from types import FrameType
from typing import Any, TypeVar

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection, reflection_pb2

from bnserve.server.admission import Admission
from bnserve.server.api import (
    diagnostics_pb2,
    diagnostics_pb2_grpc,
    grpc_service_pb2,
    grpc_service_pb2_grpc,
    predictor_pb2,
    predictor_pb2_grpc,
)
from bnserve.server.config import ServeConfig
from bnserve.server.dataplane import DataPlane
from bnserve.server.interceptors import ServerInterceptor
from bnserve.server.metrics import METRICS, serve_metrics
from bnserve.server.poller import Poller
from bnserve.server.repository import ModelRepository
from bnserve.server.security import TlsMaterial, TokenFile, load_tls
from bnserve.server.servicers.diagnostics import DiagnosticsServicer
from bnserve.server.servicers.inference import InferenceServicer
from bnserve.server.servicers.predictor import PredictorServicer
from bnserve.store.db import ModelStore
from bnserve.store.signing import KeyRing

log = logging.getLogger(__name__)
T = TypeVar("T")
KEEPALIVE_SECONDS = 60

PREDICTOR = predictor_pb2.DESCRIPTOR.services_by_name["Predictor"]
DIAGNOSTICS = diagnostics_pb2.DESCRIPTOR.services_by_name["Diagnostics"]
INFERENCE = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
REFLECTION = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]


def load_security(config: ServeConfig) -> tuple[TlsMaterial | None, TokenFile | None]:
    """Read and check the TLS files and the token file of ``config`` (SecurityConfigError
    naming the file otherwise)."""
    tls = None
    if config.tls_cert is not None or config.tls_key is not None:
        if config.tls_cert is None or config.tls_key is None:
            raise ValueError("tls_cert and tls_key go together")
        tls = load_tls(config.tls_cert, config.tls_key, config.tls_client_ca)
    elif config.tls_client_ca is not None:
        raise ValueError("tls_client_ca needs tls_cert and tls_key")
    tokens = TokenFile(config.auth_token_file) if config.auth_token_file is not None else None
    return tls, tokens


def verify_keys(config: ServeConfig) -> KeyRing | None:
    """The public keys of ``--verify-key`` (KeyFileError naming the file), or None: versions load unsigned."""
    return None if config.verify_key is None else KeyRing.read(config.verify_key)


class App:
    """A running server; ``stop`` drains it. Ports are the bound ones (0 picks a free port)."""

    def __init__(self, config: ServeConfig):
        self.config = config
        self.tls, self.tokens = load_security(config)
        self.store = ModelStore(config.store_url, timeouts=config.store_timeouts, verify=verify_keys(config))
        self.repository = ModelRepository(
            self.store,
            config.plan_cache_bytes,
            lazy=config.compile == "lazy",
            version_cache_bytes=config.version_cache_bytes,
            store_threads=config.store_threads,
            max_load_waiters=config.max_load_waiters,
        )
        self.serving = threading.Event()  # what health reports for our services
        self._pool = futures.ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="rpc")
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="grpc-loop", daemon=True)
        self._loop_thread.start()
        self.port = config.port
        try:
            self._run(self._build())
        except BaseException:
            self._close_loop()
            raise
        self.poller = Poller(self.repository, config.poll_seconds, config.poll_stall_seconds)
        self.metrics_port = config.metrics_port
        self._stopped = threading.Event()
        self._lifecycle = threading.Lock()  # a worker's late start vs stop
        self.failure: BaseException | None = None  # why a worker could not start listening

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _build(self) -> None:
        """The grpc.aio server, its services and (but for a worker) its port: on the loop,
        which grpc.aio binds the server to."""
        config = self.config
        self.health = HealthServicer()
        admission = Admission(
            config.max_inflight_bytes, config.max_connection_inflight_bytes, config.max_connections, config.body_seconds
        )
        self.grpc_server = grpc.aio.server(
            interceptors=[ServerInterceptor(self.tokens, config.max_message_bytes, admission)],
            options=[
                ("grpc.max_receive_message_length", config.max_message_bytes),
                ("grpc.max_send_message_length", config.max_message_bytes),
                # A call's headers beyond this are refused (RESOURCE_EXHAUSTED) as they
                # arrive: grpc's soft limit refuses some calls above it, its hard limit all.
                ("grpc.max_metadata_size", config.max_metadata_bytes),
                ("grpc.absolute_max_metadata_size", config.max_metadata_bytes),
                # grpc sets SO_REUSEPORT by default on Linux: a lone server turns it off so
                # that a port another process holds is an error, not a silent share.
                ("grpc.so_reuseport", 1 if config.worker else 0),
                # What one client connection may hold: its open calls, and how long it stays
                # without any; a ping every KEEPALIVE_SECONDS finds a peer that is gone.
                ("grpc.max_concurrent_streams", config.max_streams_per_connection),
                ("grpc.max_connection_idle_ms", round(config.idle_seconds * 1000)),
                ("grpc.keepalive_time_ms", KEEPALIVE_SECONDS * 1000),
            ],
        )
        dataplane = DataPlane(self.repository, config.max_rows, ready=self.serving.is_set, pool=self._pool)
        predictor_pb2_grpc.add_PredictorServicer_to_server(PredictorServicer(dataplane), self.grpc_server)
        diagnostics_pb2_grpc.add_DiagnosticsServicer_to_server(DiagnosticsServicer(), self.grpc_server)
        grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(dataplane), self.grpc_server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        services = (PREDICTOR, DIAGNOSTICS, INFERENCE, HEALTH, REFLECTION)
        METRICS.initialize_grpc(services)
        reflection.enable_server_reflection(
            [s.full_name for s in services], self.grpc_server, pool=reflection_pool(services)
        )
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        if not config.worker:
            self._bind()

    def _bind(self) -> None:
        address = f"{self.config.host}:{self.config.port}"
        try:
            if self.tls is not None:
                self.port = self.grpc_server.add_secure_port(address, self.tls.server_credentials())
            else:
                self.port = self.grpc_server.add_insecure_port(address)
        except RuntimeError as exc:  # grpc raises where it returned 0 before
            raise OSError(f"cannot bind gRPC port {address}: {exc}") from None
        if self.port == 0:
            raise OSError(f"cannot bind gRPC port {address} (in use, or not an address of this machine?)")

    def security_summary(self) -> str:
        """For the log: how the gRPC port is secured (names files, never their contents)."""
        if self.tls is None:
            parts = ["plaintext"]
        elif self.tls.client_ca is None:
            parts = ["TLS"]
        else:
            parts = ["mutual TLS: client certificates required"]
        if self.tokens is not None:
            parts.append(
                f"bearer token required but for health, {len(self.tokens)} token(s) from {self.config.auth_token_file}"
            )
        return ", ".join(parts)

    async def _set_health(self, status: int) -> None:
        for service in ("", PREDICTOR.full_name, DIAGNOSTICS.full_name, INFERENCE.full_name):
            await self.health.set(service, status)
        if status == health_pb2.HealthCheckResponse.SERVING:
            self.serving.set()
        else:
            self.serving.clear()

    def start(self, on_failure: Callable[[], None] | None = None) -> App:
        """Start serving. A worker listens from a background thread once the store is read;
        should that fail, ``failure`` says why and ``on_failure`` is called."""
        if self.metrics_port >= 0:
            http_server = serve_metrics(self.metrics_port, self.config.host)
            self.metrics_port = http_server.server_address[1]
            self._http_server = http_server
        if self.config.worker:
            threading.Thread(target=self._listen_when_ready, args=(on_failure,), name="first-load", daemon=True).start()
            return self
        self._run(self.grpc_server.start())
        log.info(
            "gRPC on %s:%d (%s), metrics on :%d",
            self.config.host,
            self.port,
            self.security_summary(),
            self.metrics_port,
        )
        threading.Thread(target=self._become_ready, name="first-load", daemon=True).start()
        return self

    def _read_store_once(self) -> bool:
        """Poll until the store is read once (True), or until stopped (False)."""
        while not self._stopped.is_set() and not self.poller.poll_once():
            self._stopped.wait(min(self.config.poll_seconds, 1.0))
        return not self._stopped.is_set()

    def _become_ready(self) -> None:
        """Poll until the store is read once, then go SERVING; the poller keeps it fresh."""
        if not self._read_store_once():
            return
        with self._lifecycle:
            if self._stopped.is_set():
                return
            self._run(self._set_health(health_pb2.HealthCheckResponse.SERVING))
        n = len(self.repository.snapshot.models)
        log.info("store read: %d model(s); serving", n)
        self.poller.start()

    async def _listen(self) -> None:
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        self._bind()
        await self.grpc_server.start()

    def _listen_when_ready(self, on_failure: Callable[[], None] | None) -> None:
        """A worker: read the store, go SERVING, and only then bind the shared port and start."""
        if not self._read_store_once():
            return
        with self._lifecycle:
            if self._stopped.is_set():
                return
            try:
                self._run(self._listen())
            except Exception as exc:  # e.g. the port is held by a process that does not share it
                self.failure = exc
                log.error("cannot serve: %s", exc)
                if on_failure is not None:
                    on_failure()
                return
            self.poller.start()
        n = len(self.repository.snapshot.models)
        log.info(
            "store read: %d model(s); serving gRPC on %s:%d (%s)",
            n,
            self.config.host,
            self.port,
            self.security_summary(),
        )

    async def _drain(self) -> None:
        self.serving.clear()
        await self.health.enter_graceful_shutdown()
        await self.grpc_server.stop(self.config.grace_seconds)

    def stop(self) -> None:
        """Graceful: NOT_SERVING, refuse new calls, let in-flight ones finish within the grace."""
        with self._lifecycle:
            if self._stopped.is_set():
                return
            self._stopped.set()
        self._run(self._drain())
        self._pool.shutdown(wait=False, cancel_futures=True)  # idle pool threads end now
        self.poller.stop()
        self.repository.close()
        if hasattr(self, "_http_server"):
            self._http_server.shutdown()
        self._close_loop()
        self.store.dispose()
        log.info("stopped")

    def _close_loop(self) -> None:
        """Stop the loop once the tasks grpc left on it are cancelled and ended: a call that
        arrived as the drain ended may still have one, and closing the loop over it would
        destroy it pending (asyncio logs that, and grpc a GeneratorExit traceback)."""
        try:
            self._run(_end_leftover_tasks())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join()
        self._loop.close()


LEFTOVER_TASK_SECONDS = 1.0


async def _end_leftover_tasks() -> None:
    """Cancel every other task on this loop and give them ``LEFTOVER_TASK_SECONDS`` to end."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=LEFTOVER_TASK_SECONDS)


def reflection_pool(services: tuple[ServiceDescriptor, ...]) -> descriptor_pool.DescriptorPool:
    """One pool with the files of every served service and their imports, for reflection:
    the inference service's descriptors live in a pool of their own (see proto/generate.py)."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        pool.AddSerializedFile(file.serialized_pb)
        added.add(file.name)

    for service in services:
        add(service.file)
    return pool


def serve(config: ServeConfig, parent_pid: int | None = None) -> int:
    """Run until SIGTERM or SIGINT, then shut down gracefully.

    ``parent_pid``: this is a worker of that process (``config.worker``); it also shuts
    down when that process is gone. Returns 1 when a worker could not start listening.
    """
    app = App(config)
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    app.start(on_failure=done.set)
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(parent_pid, done), name="parent-watch", daemon=True).start()
    # Not a bare done.wait(): the kernel may deliver SIGTERM to one of grpc's threads, and
    # Python runs the handler only when the main thread next runs bytecode; blocked in an
    # untimed wait it never would, and the server would ignore the signal.
    while not done.wait(SIGNAL_POLL_SECONDS):
        pass
    app.stop()
    code = 1 if app.failure is not None else 0
    _exit_if_threads_linger(code)
    return code


LINGER_SECONDS = 2.0
SIGNAL_POLL_SECONDS = 0.2  # how often the main thread wakes to run a signal handler that is due


def _exit_if_threads_linger(code: int) -> None:
    """Once ``stop`` returns, grpc has answered or cancelled every call; a thread still at
    work (a cancelled call's handler) must not hold the process past its grace, as the
    interpreter's exit would: give them ``LINGER_SECONDS``, then exit anyway, naming them."""
    deadline = time.monotonic() + LINGER_SECONDS
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in others if t.is_alive()]
    if left:
        log.warning(
            "threads still running %.0f s after the drain: %s; exiting without them", LINGER_SECONDS, ", ".join(left)
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _watch_parent(parent_pid: int, done: threading.Event) -> None:
    """Set ``done`` once this process's parent is no longer ``parent_pid`` (it died; we were
    re-parented), so an orphaned worker does not serve on alone."""
    while not done.wait(1.0):
        if os.getppid() != parent_pid:
            log.warning("parent %d is gone, shutting down", parent_pid)
            done.set()
