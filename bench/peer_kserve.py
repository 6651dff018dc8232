"""A peer server: KServe's Python model server with scikit-learn's CategoricalNB, same rows.

    python bench/peer_kserve.py [--quick]

Ours: ``server serve`` with the benchmark model (KDB k = 2 on random rows of 50 features
with 4 states and 3 classes, ``bench.serving``). The peer: ``CategoricalNB`` fitted on
the same rows, saved with joblib and served by ``kserve.ModelServer`` through a
``kserve.Model`` whose ``predict`` calls ``predict_proba`` (``bench/kserve_model.py``).
Both speak the Open Inference Protocol over gRPC on loopback, and one client drives
both: ``tritonclient.grpc`` (bnserve's test extra), sending one INT32 tensor ``codes``
[batch, 50] and asking for the FP32 output ``probabilities`` [batch, 3]; the same bytes
go to each. Calls alternate between the servers.

- single-row ModelInfer latency, p50 and p99, ours / theirs (lower is better);
- 1,000-row ModelInfer throughput in rows per second, ours / theirs (higher is better);
- and, to tell the servers from the models, the same 1,000 rows through each model's
  own ``predict_proba`` in process (ours in this process, theirs in the peer's Python):
  KDB reads a three-variable CPT per feature where naive Bayes reads a two-variable one.

No goal was set for this comparison; the ratios are reported as measured. KServe pins
its own grpcio, protobuf and fastapi, so it lives in its own virtual environment,
``bench/.peer-venv`` (git-ignored), created on first use with the versions below; the
peer server runs as a subprocess of that environment's Python. If it cannot be created
or the server does not start, ``run`` raises with the error.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile
import time
import venv

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from typing import Any

from bench.serving import (
    MODEL_NAME,
    Server,
    free_port,
    kdb_on_random_data,
    main_of,
    p50_p99,
    result,
    temporary_store,
)
from bnserve.store.predictor import compile_model

ITEM = "7 peer (KServe)"
PEER_VENV = pathlib.Path(__file__).resolve().parent / ".peer-venv"
PEER_SCRIPT = pathlib.Path(__file__).resolve().parent / "kserve_model.py"
PEER_PACKAGES = ["kserve==0.21.0", "scikit-learn==1.9.1", "joblib"]
PEER_MODEL = "categorical-nb"
BATCH = 1000
GOAL = 2.0  # issue 16: twice KServe's single-row calls/s (half its p50) and its 1,000-row rows/s
BOUNDS = {  # what bounds a missed goal, by measurement (bench/run.py puts it in docs/performance.md)
    "single-row ModelInfer p50 µs, ours (KDB) vs KServe (CategoricalNB)": (
        "Both servers are Python gRPC servers on the same transport. Their floor is a bare grpc echo, about "
        "470-600 µs p50 on this machine (item 4), and KServe's p50 is about 1.1-1.6 ms. Half of KServe's would "
        "be below that floor. Ours is 1.35-1.4x the floor (item 4), and 0.65-0.67x KServe's (1.5x as many calls)."
    ),
    f"{BATCH}-row ModelInfer rows/s, ours vs KServe": (
        "1.26x when run alone on 2026-11-26. Our KDB's predict_proba alone is 2.1-2.6x CategoricalNB's "
        "(last row). The rest of a 1,000-row call is grpc's transport and the tensors' bytes, decoded "
        "column by column (tensors.read_inputs), and it costs the two servers about alike."
    ),
}


def peer_python() -> pathlib.Path:
    """The peer environment's Python, creating the environment first if it is missing."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".installed"
    if marker.exists() and marker.read_text() == " ".join(PEER_PACKAGES):
        return python
    print(f"creating {PEER_VENV} with {', '.join(PEER_PACKAGES)} (once)", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(PEER_VENV)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], capture_output=True, text=True
    )
    if install.returncode != 0:
        raise RuntimeError(f"cannot install the peer ({' '.join(PEER_PACKAGES)}):\n{install.stderr[-3000:]}")
    marker.write_text(" ".join(PEER_PACKAGES))
    return python


class PeerServer:
    """bench/kserve_model.py serve, from the peer environment, on free loopback ports."""

    def __init__(self, python: pathlib.Path, model_path: str):
        self.grpc_port, self.http_port = free_port(), free_port()
        self.target = f"127.0.0.1:{self.grpc_port}"
        self._log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [
                str(python),
                str(PEER_SCRIPT),
                "serve",
                "--model",
                model_path,
                "--name",
                PEER_MODEL,
                "--grpc-port",
                str(self.grpc_port),
                "--http-port",
                str(self.http_port),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, client: Any, timeout: float = 120.0) -> None:  # a tritonclient.grpc.InferenceServerClient
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if client.is_model_ready(PEER_MODEL):
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        self.stop()
        self._log.seek(0)
        raise RuntimeError(f"the KServe peer did not become ready; its output:\n{self._log.read()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def _infer(client: Any, model: str, codes: np.ndarray) -> Any:  # a tritonclient InferResult
    import tritonclient.grpc as tc

    tensor = tc.InferInput("codes", list(codes.shape), "INT32")
    tensor.set_data_from_numpy(codes)
    return client.infer(model, [tensor], outputs=[tc.InferRequestedOutput("probabilities")])


def run(quick: bool = False) -> list[dict]:
    import tritonclient.grpc as tc

    calls, rounds = (300, 8) if quick else (2000, 40)
    python = peer_python()
    data, model = kdb_on_random_data()
    rows = np.ascontiguousarray(data.X, dtype=np.int32)
    with tempfile.TemporaryDirectory(prefix="bnserve-peer-") as tmp:
        np.savez(f"{tmp}/rows.npz", X=data.X, y=data.y, cards=np.array(data.cards))
        fit = subprocess.run(
            [str(python), str(PEER_SCRIPT), "fit", "--rows", f"{tmp}/rows.npz", "--out", f"{tmp}/model.joblib"],
            capture_output=True,
            text=True,
        )
        if fit.returncode != 0:
            raise RuntimeError(f"fitting CategoricalNB in the peer environment failed:\n{fit.stderr[-3000:]}")
        peer = PeerServer(python, f"{tmp}/model.joblib")
        try:
            with temporary_store(model) as url, Server(url) as ours:
                clients = {
                    "ours": (tc.InferenceServerClient(ours.target), MODEL_NAME),
                    "theirs": (tc.InferenceServerClient(peer.target), PEER_MODEL),
                }
                peer.wait_ready(clients["theirs"][0])
                for client, name in clients.values():  # both answer distributions over 3 classes
                    proba = _infer(client, name, rows[:5]).as_numpy("probabilities")
                    assert proba.shape == (5, 3) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)
                    for i in range(100):  # warm up
                        _infer(client, name, rows[i : i + 1])
                single = {k: np.empty(calls) for k in clients}
                clock = time.perf_counter
                for i in range(calls):
                    row = rows[i % len(rows)][None]
                    for kind, (client, name) in clients.items():
                        t0 = clock()
                        _infer(client, name, row)
                        single[kind][i] = clock() - t0
                batch = {k: np.empty(rounds) for k in clients}
                for r in range(rounds):
                    block = rows[(r * BATCH) % (len(rows) - BATCH) :][:BATCH]
                    for kind, (client, name) in clients.items():
                        t0 = clock()
                        _infer(client, name, block)
                        batch[kind][r] = clock() - t0
                for client, _ in clients.values():
                    client.close()
            timed = subprocess.run(
                [
                    str(python),
                    str(PEER_SCRIPT),
                    "time",
                    "--model",
                    f"{tmp}/model.joblib",
                    "--rows",
                    f"{tmp}/rows.npz",
                    "--batch",
                    str(BATCH),
                    "--rounds",
                    str(rounds),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            their_local = BATCH / float(timed.stdout.split()[-1])
        finally:
            peer.stop()
    compiled = compile_model(model)
    local_rows = rows[:BATCH].astype(np.int64)
    local = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        compiled.predict_proba(local_rows)
        local.append(time.perf_counter() - t0)
    our_local = BATCH / float(np.median(local))
    (o50, o99), (t50, t99) = p50_p99(single["ours"]), p50_p99(single["theirs"])
    ours_rate, their_rate = BATCH / float(np.median(batch["ours"])), BATCH / float(np.median(batch["theirs"]))
    return [
        result(
            ITEM,
            "single-row ModelInfer p50 µs, ours (KDB) vs KServe (CategoricalNB)",
            o50 * 1e6,
            t50 * 1e6,
            f"≤ {1 / GOAL:g}",
            o50 / t50 <= 1 / GOAL,
        ),
        result(ITEM, "single-row ModelInfer p99 µs, ours vs KServe", o99 * 1e6, t99 * 1e6, "—", None),
        result(
            ITEM,
            f"{BATCH}-row ModelInfer rows/s, ours vs KServe",
            ours_rate,
            their_rate,
            f"≥ {GOAL:g}",
            ours_rate / their_rate >= GOAL,
        ),
        result(
            ITEM,
            f"{BATCH}-row predict_proba in process rows/s, KDB vs CategoricalNB (the models alone)",
            our_local,
            their_local,
            "—",
            None,
        ),
    ]


def main() -> int:
    return main_of(
        run,
        __doc__,
        "one tritonclient client, both servers on loopback",
        "fewer calls (under 30 s once the peer is installed)",
    )


if __name__ == "__main__":
    sys.exit(main())
