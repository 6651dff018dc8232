"""The peer of bench/peer_kserve.py: scikit-learn's CategoricalNB served by KServe.

Runs in the peer's own virtual environment (bench/.peer-venv, which bench/peer_kserve.py
creates), never in bnserve's: KServe pins its own grpcio, protobuf and fastapi. Imports
nothing of bnserve.

    python bench/kserve_model.py fit --rows ROWS.npz --out MODEL.joblib
    python bench/kserve_model.py serve --model MODEL.joblib --name NAME --grpc-port P --http-port Q
    python bench/kserve_model.py time --model MODEL.joblib --rows ROWS.npz --batch 1000 --rounds 40

``fit``: CategoricalNB on the rows (``X`` state codes, ``y`` classes, ``cards`` states
per feature), saved with joblib, as a KServe user would ship a model. ``serve``: a
``kserve.Model`` whose ``predict`` takes one INT32 input ``codes`` [batch, features] and
returns ``probabilities`` FP32 [batch, classes] (``predict_proba``), on the Open Inference
Protocol over gRPC (and KServe's REST port, which the benchmark does not use). ``time``:
the median seconds of one ``predict_proba`` on the first ``batch`` rows, in process.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np


def fit(rows: str, out: str) -> None:
    import joblib
    from sklearn.naive_bayes import CategoricalNB

    data = np.load(rows)
    model = CategoricalNB(min_categories=data["cards"]).fit(data["X"], data["y"])
    joblib.dump(model, out)


def time_batch(model_path: str, rows: str, batch: int, rounds: int) -> None:
    import time

    import joblib

    classifier = joblib.load(model_path)
    codes = np.ascontiguousarray(np.load(rows)["X"][:batch], dtype=np.int32)
    classifier.predict_proba(codes)
    seconds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        classifier.predict_proba(codes)
        seconds.append(time.perf_counter() - t0)
    print(float(np.median(seconds)))


def serve(model_path: str, name: str, grpc_port: int, http_port: int) -> None:
    import joblib
    import kserve
    from kserve import InferOutput, InferRequest, InferResponse

    class CategoricalNBModel(kserve.Model):
        def __init__(self) -> None:
            super().__init__(name)
            self.classifier: Any = None  # a fitted CategoricalNB, once loaded

        def load(self) -> bool:
            self.classifier = joblib.load(model_path)
            self.ready = True
            return self.ready

        def predict(self, payload: InferRequest, headers: dict[str, str] | None = None) -> InferResponse:
            codes = payload.inputs[0].as_numpy()
            proba = self.classifier.predict_proba(codes).astype(np.float32)
            output = InferOutput(name="probabilities", shape=list(proba.shape), datatype="FP32")
            output.set_data_from_numpy(proba, binary_data=True)
            return InferResponse(response_id=payload.id, model_name=self.name, infer_outputs=[output])

    model = CategoricalNBModel()
    model.load()
    kserve.ModelServer(grpc_port=grpc_port, http_port=http_port, workers=1, enable_latency_logging=False).start([model])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--rows", required=True)
    f.add_argument("--out", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--model", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--grpc-port", type=int, required=True)
    s.add_argument("--http-port", type=int, required=True)
    t = sub.add_parser("time")
    t.add_argument("--model", required=True)
    t.add_argument("--rows", required=True)
    t.add_argument("--batch", type=int, default=1000)
    t.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    if args.command == "fit":
        fit(args.rows, args.out)
    elif args.command == "time":
        time_batch(args.model, args.rows, args.batch, args.rounds)
    else:
        serve(args.model, args.name, args.grpc_port, args.http_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
