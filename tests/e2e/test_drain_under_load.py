"""SIGTERM while 8 client threads keep large Predict calls in flight: `server serve` drains.

Real `server serve` (and `--workers 2`) on a SQLite store, 8 threads each sending back to
back a dense batch of the benchmark model (50 features), which keeps calls in flight on
the server at every moment. The server's own counts come from its last /metrics scrape.

Handlers that fit in the grace (the claim's condition): 20,000-row batches (measured on 2
cores: 14 ms alone, at most 0.25 s with 8 in flight) and a 5 s grace, 20 times that.

- One process whose drain a health Watch holds open to the grace (so /metrics answers
  until every call is counted, and the connections stay up well past the last answer):
  every Predict whose handler began was completed OK and its client got that answer (the
  server's started count equals the client's OK count; some were in flight at the
  signal); no call was cut at the grace; every other call never reached a handler and
  ended UNAVAILABLE (refused: the port closed) or CANCELLED (grpc core resets a call its
  transport took but the Python server had not yet picked up when the shutdown began);
  calls started once the process has exited are UNAVAILABLE; health turns NOT_SERVING;
  the process exits 0 at the end of the grace (plus its teardown).
- Nothing holding the drain (1 and 2 workers): a process exits 0 as soon as its calls in
  flight are done, long before the grace. It closes its connections right then, and the
  answer of a call it completed can be lost there (its client gets UNAVAILABLE "Stream
  removed ... Connection reset by peer" or CANCELLED): measured in 2 of 80 drains with
  2 workers. So the claim holds for a process whose drain outlasts its last answer, and
  this test bounds the loss by those failures.

Handlers that outlive the grace: 100,000-row batches (0.6 s each with 8 in flight) and a
0.1 s grace. grpc ends the calls still open at the grace with UNAVAILABLE "Cancelling all
calls" (not CANCELLED), so calls the server began are missing from the answers; nothing
else fails; the process still exits 0, within the grace plus the 2 s it gives lingering
handlers (``LINGER_SECONDS``) and a margin. The server logs nothing about the calls it
cut, unless their handlers are still running 2 s after the drain ("exiting without them").

``tests/e2e/test_train_serve.py::test_sigterm_drains_and_exits`` is the idle case.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import dataclass

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.serving import MODEL_NAME, Server, kdb_on_random_data, temporary_store
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.app import LINGER_SECONDS
from tests.e2e.serving import Outcome, PredictLoop, scrape
from tests.reliability import record

THREADS = 8
BATCH = 20_000  # 14 ms alone, at most 0.25 s with 8 in flight (measured, 2 cores)
GRACE = 5.0  # 20 times the slowest such call: the claim's condition, with room
BIG_BATCH = 100_000  # 0.13 s alone, median 0.6 s with 8 in flight
SHORT_GRACE = 0.1  # far shorter than those handlers: the grace runs out
MARGIN = 3.0  # beyond grace (+ LINGER_SECONDS): the signal poll, the teardown, a slow machine
SCRAPE_SECONDS = 0.02  # a drain with nothing holding it lasts about 0.1 s past its last call
CUT_AT_GRACE = "Cancelling all calls"  # grpc's details for a call it ends when the grace runs out


@pytest.fixture(scope="module")
def benchmark_store():
    """(store URL, {rows: a dense Predict request of that many random rows})."""
    data, model = kdb_on_random_data(rows=2000)
    cards = np.array([v.cardinality for v in data.features])
    requests = {}
    for n in (BATCH, BIG_BATCH):
        rows = np.minimum(np.random.default_rng(1).integers(0, 4, size=(n, len(cards))), cards - 1)
        requests[n] = pb.PredictRequest(
            model=MODEL_NAME,
            dense_response=True,
            dense=pb.DenseBatch(features=[v.name for v in data.features], codes=rows.ravel().tolist()),
        )
    with temporary_store(model) as url:
        yield url, requests


class HealthWatch:
    """A Health.Watch stream opened now: every status it receives, until the stream ends."""

    def __init__(self, target: str):
        self.statuses: list[str] = []
        self.ended_with = ""
        self._channel = grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        self._stream = health_pb2_grpc.HealthStub(self._channel).Watch(health_pb2.HealthCheckRequest(service=""))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for reply in self._stream:
                self.statuses.append(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
        except grpc.RpcError as exc:
            self.ended_with = exc.code().name
        finally:
            self._channel.close()

    def join(self) -> None:
        self._thread.join(timeout=30)


class LastScrape:
    """Scrapes /metrics once now, then every SCRAPE_SECONDS until it fails (the server closes
    it once its gRPC server has stopped, after the drain): ``text`` is then the last one,
    complete when the drain lasted longer than the calls (a held Watch), possibly not
    otherwise. The first scrape is taken before the caller goes on, so on a loaded machine
    a drain shorter than a thread's first turn still leaves one (it had left none)."""

    def __init__(self, port: int):
        self._port = port
        self.text = scrape(port)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(SCRAPE_SECONDS)
            try:
                self.text = scrape(self._port)
            except OSError:
                return

    def join(self) -> str:
        self._thread.join(timeout=30)
        return self.text


def predict_counts(text: str) -> tuple[float, dict[str, float]]:
    """(Predict calls the server started, those it completed by status code) from /metrics."""
    started, handled = 0.0, {}
    for line in text.splitlines():
        if 'grpc_method="Predict"' not in line:
            continue
        if line.startswith("grpc_server_started_total{"):
            started += float(line.rsplit(" ", 1)[1])
        elif line.startswith("grpc_server_handled_total{"):
            code = line.split('grpc_code="', 1)[1].split('"', 1)[0]
            handled[code] = handled.get(code, 0.0) + float(line.rsplit(" ", 1)[1])
    return started, handled


@dataclass
class Drain:
    """What one SIGTERM under load gave: every call, when the signal went and the process
    exited (time.monotonic), its exit code, its last /metrics and its output."""

    outcomes: list[Outcome]
    signalled: float
    exited: float
    exit_code: int
    metrics: str
    log: str
    health: HealthWatch | None

    def codes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.outcomes:
            counts[o.code] = counts.get(o.code, 0) + 1
        return counts

    def in_flight(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.started < self.signalled < o.ended]

    def around_the_signal(self) -> str:
        """For a failure's message: the calls that ended after the signal and were not
        refused at connect, with their times from the signal, and the server's log."""
        lines = [
            f"thread {o.thread}: {o.started - self.signalled:+.3f} s .. {o.ended - self.signalled:+.3f} s "
            f"{o.code} {o.details[:120]}"
            for o in sorted(self.outcomes, key=lambda o: o.started)
            if o.ended > self.signalled and "Failed to connect" not in o.details
        ]
        return "\n".join(lines + [f"exit after {self.exited - self.signalled:.3f} s; log:", self.log])


def sigterm_under_load(url: str, request, workers: int, grace: float, watch: bool) -> Drain:
    """Start the server, load it with THREADS back-to-back callers, SIGTERM it once each has
    had an answer, and keep calling until every thread has called after its exit."""
    with Server(
        url,
        workers=workers,
        metrics=True,
        extra=(
            "--grace-seconds",
            str(grace),
            "--log-level",
            "INFO",
            # 8 calls of 100,000 rows are charged 8 x 120 MB: all admitted, drained
            "--max-inflight-bytes",
            str(2**31),
            "--max-connection-inflight-bytes",
            str(2**31),
        ),
    ) as server:
        health = HealthWatch(server.target) if watch else None
        with PredictLoop(server.target, request, threads=THREADS, timeout=120) as calls:
            calls.wait_for(lambda o: len(o) >= THREADS, f"{THREADS} answers before the signal", timeout=120)
            metrics = LastScrape(server.metrics_port)
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            try:
                exit_code = server.process.wait(timeout=grace + LINGER_SECONDS + 60)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
                raise AssertionError(
                    f"no exit within {grace + LINGER_SECONDS + 60} s of SIGTERM; its output:\n{server.output()}"
                ) from None
            exited = time.monotonic()
            calls.wait_for(
                lambda o: {x.thread for x in o if x.started > exited} == set(range(THREADS)),
                "a call from every thread after the exit",
            )
            outcomes = calls.stop()
        if health is not None:
            health.join()
        final = metrics.join()
        server.stop()
        return Drain(outcomes, signalled, exited, exit_code, final, server.output(), health)


def assert_common(drain: Drain, workers: int) -> None:
    """What holds however the drain went: only OK, UNAVAILABLE and CANCELLED; calls made
    once the process had exited are refused; every process took the signal once, exit 0."""
    codes = drain.codes()
    cut = {(o.code, o.details.split(" (")[0]) for o in drain.outcomes if o.code != "OK"}
    assert drain.exit_code == 0, drain.log
    assert set(codes) <= {"OK", "UNAVAILABLE", "CANCELLED"}, cut
    assert drain.in_flight(), "no call was in flight at the signal"
    assert {o.code for o in drain.outcomes if o.started > drain.exited} == {"UNAVAILABLE"}
    assert drain.log.count("received SIGTERM, shutting down") == 1 + (workers if workers > 1 else 0), drain.log
    assert "Traceback" not in drain.log, drain.log


def test_sigterm_under_load_answers_every_call_it_began(benchmark_store):
    """One process, its drain held open to the grace by the Watch: the exact claim."""
    url, requests = benchmark_store
    workers = 1
    drain = sigterm_under_load(url, requests[BATCH], workers, GRACE, watch=True)
    assert_common(drain, workers)
    codes = drain.codes()
    started, handled = predict_counts(drain.metrics)
    exit_seconds = drain.exited - drain.signalled
    assert exit_seconds < GRACE + MARGIN, (exit_seconds, drain.log)
    # no handler outlived the grace: nothing was cut when it ran out, nothing lingered
    assert not [o for o in drain.outcomes if CUT_AT_GRACE in o.details], drain.around_the_signal()
    assert "exiting without them" not in drain.log, drain.log
    # every call whose handler began: completed OK by the server, and that answer received
    assert started > 0 and handled == {"OK": started}, (started, handled)
    assert codes["OK"] == started, f"{codes}, server started {started}\n{drain.around_the_signal()}"
    drained = [o for o in drain.in_flight() if o.code == "OK"]
    assert drained, "no call in flight at the signal was answered"
    # so every call that did not get OK never reached a handler: refused, or reset by grpc core
    health = drain.health
    assert "NOT_SERVING" in health.statuses[health.statuses.index("SERVING") :], health.statuses
    print(
        f"workers={workers}: {codes}; in flight at SIGTERM {len(drain.in_flight())} ({len(drained)} answered OK); "
        f"server started {started:.0f}, handled {handled}; exit after {exit_seconds:.2f} s; "
        f"health {health.statuses} then {health.ended_with}"
    )
    record(
        f"SIGTERM under load (--workers {workers}, {THREADS} threads of {BATCH:,}-row batches)",
        "sqlite",
        requests=len(drain.outcomes),
        errors=0,
        faults=1,
        lost=0,
        answered=codes["OK"],
        in_flight_at_signal=len(drain.in_flight()),
        in_flight_completed=len(drained),
        never_started_unavailable=codes.get("UNAVAILABLE", 0),
        never_started_cancelled=codes.get("CANCELLED", 0),
        exit_code=drain.exit_code,
        exit_seconds=round(exit_seconds, 2),
    )


LOST_AT_CLOSE = "Stream removed"  # a call on a connection the draining server reset


@pytest.mark.parametrize("workers", [1, 2])
def test_with_nothing_holding_the_drain_the_exit_comes_once_the_calls_end(benchmark_store, workers):
    """No Watch: a process's drain ends with its last call, long before the grace, and it
    closes its connections then. The answer of a call it completed may be lost at that
    moment (measured: in 2 of 80 such drains with 2 workers, one answer): its client gets
    UNAVAILABLE "Stream removed (... Connection reset by peer ... Server shutdown)" or
    CANCELLED. Asserted: the exit before the grace, nothing cut at the grace, and with 2
    workers (the parent's /metrics outlives the workers' drains, so its counts are
    complete) every call the server began answered OK but for at most that many lost;
    with 1 worker /metrics closes with the drain, so its counts are not compared."""
    url, requests = benchmark_store
    drain = sigterm_under_load(url, requests[BATCH], workers, GRACE, watch=False)
    assert_common(drain, workers)
    codes = drain.codes()
    exit_seconds = drain.exited - drain.signalled
    assert exit_seconds < GRACE, (exit_seconds, drain.log)
    assert not [o for o in drain.outcomes if CUT_AT_GRACE in o.details], drain.around_the_signal()
    assert "exiting without them" not in drain.log, drain.log
    lost = 0.0
    if workers > 1:
        started, handled = predict_counts(drain.metrics)
        assert started > 0 and handled == {"OK": started}, (started, handled)
        lost = started - codes["OK"]
        at_close = [
            o
            for o in drain.outcomes
            if o.ended > drain.signalled and (o.code == "CANCELLED" or LOST_AT_CLOSE in o.details)
        ]
        assert 0 <= lost <= len(at_close), f"{codes}, server started {started}\n{drain.around_the_signal()}"
    print(f"workers={workers}: {codes}; answers lost at close {lost:.0f}; exit after {exit_seconds:.2f} s")
    record(
        f"SIGTERM under load, nothing holding the drain (--workers {workers}, {THREADS} threads of "
        f"{BATCH:,}-row batches)",
        "sqlite",
        requests=len(drain.outcomes),
        errors=0,
        faults=1,
        answers_lost_at_close=int(lost),
        answered=codes["OK"],
        cancelled=codes.get("CANCELLED", 0),
        unavailable=codes.get("UNAVAILABLE", 0),
        exit_code=drain.exit_code,
        exit_seconds=round(exit_seconds, 2),
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_when_the_grace_runs_out_calls_still_at_work_end_unavailable_and_the_exit_is_bounded(benchmark_store, workers):
    url, requests = benchmark_store
    drain = sigterm_under_load(url, requests[BIG_BATCH], workers, SHORT_GRACE, watch=False)
    assert_common(drain, workers)
    codes = drain.codes()
    started, _ = predict_counts(drain.metrics)  # its handled counts may miss the cut calls' end
    exit_seconds = drain.exited - drain.signalled
    assert exit_seconds < SHORT_GRACE + LINGER_SECONDS + MARGIN, (exit_seconds, drain.log)
    # calls the server began are missing from the answers: grpc ended them at the grace
    cut = [o for o in drain.outcomes if CUT_AT_GRACE in o.details]
    assert started - codes["OK"] >= 1, (codes, started)
    assert len(cut) >= started - codes["OK"], (codes, started, len(cut))
    assert {o.code for o in cut} == {"UNAVAILABLE"}
    assert all(o.started < drain.exited and o.ended > drain.signalled for o in cut)
    lingered = "exiting without them" in drain.log
    print(
        f"workers={workers}: {codes}; server started {started:.0f}; cut at the grace {len(cut)}; "
        f"exit after {exit_seconds:.2f} s; handlers lingered: {lingered}"
    )
    record(
        f"SIGTERM under load, grace {SHORT_GRACE} s run out (--workers {workers}, {THREADS} threads of "
        f"{BIG_BATCH:,}-row batches)",
        "sqlite",
        requests=len(drain.outcomes),
        errors=0,
        faults=1,
        lost=0,
        answered=codes["OK"],
        cut_at_grace=len(cut),
        unavailable=codes.get("UNAVAILABLE", 0),
        cancelled=codes.get("CANCELLED", 0),
        exit_code=drain.exit_code,
        exit_seconds=round(exit_seconds, 2),
    )
