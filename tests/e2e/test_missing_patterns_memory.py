"""Many distinct patterns of missing features do not grow `server serve`'s memory beyond its
plan budget (issue 17, item 2: 150 such rows took the server from 114 MB to 1.35 GB, and a
1,000-row request of them failed INTERNAL with a MemoryError).

A real server process, the issue's model (KDB k = 3, 20 features x 12 states), 1,000
single-row Predicts each with its own random 30 % of features missing, then one 1,000-row
request of such rows: every answer is OK (none of these rows is too large to sum out; a
refusal would be RESOURCE_EXHAUSTED naming the row, never INTERNAL), and the server's RSS
grows by less than the plan budget plus a small margin for the interpreter's own. Measured:
34 MiB of growth with the 16 MiB budget, 76 MiB without one (--plan-cache-bytes 4 GiB), so
the bound of 48 MiB tells the two apart.
"""

from __future__ import annotations

import grpc
import numpy as np

from bench.load import rss_mib
from bench.serving import MODEL_NAME, Server, temporary_store
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from tests.model_factory import kdb_model
from tests.reliability import record

BUDGET_MIB = 16
MARGIN_MIB = 32  # the interpreter's own growth: arenas, grpc buffers, metric series
SINGLE_ROWS = 1_000
MISSING_SHARE = 0.3


def test_a_thousand_missing_patterns_stay_within_the_plan_budget():
    rng = np.random.default_rng(17)
    model = kdb_model(rng, n_features=20, states=12, k=3)
    names = [v.name for v in model.features]
    codes = rng.integers(0, 12, size=(SINGLE_ROWS + 1_000, len(names)))
    codes[rng.random(codes.shape) < MISSING_SHARE] = -1
    outcomes: dict[str, int] = {}
    with (
        temporary_store(model) as url,
        Server(url, extra=("--plan-cache-bytes", str(BUDGET_MIB * 2**20))) as server,
        grpc.insecure_channel(server.target) as channel,
    ):
        stub = predictor_pb2_grpc.PredictorStub(channel)

        def predict(rows: np.ndarray) -> str:
            dense = pb.DenseBatch(features=names, codes=rows.ravel().tolist())
            try:
                stub.Predict(pb.PredictRequest(model=MODEL_NAME, dense=dense), timeout=120)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
                assert "row" in error.details()
                return error.code().name
            return "OK"

        predict(codes[:1])
        before = rss_mib(server.pids()[0])
        for i in range(SINGLE_ROWS):
            code = predict(codes[i : i + 1])
            outcomes[code] = outcomes.get(code, 0) + 1
        batch = predict(codes[SINGLE_ROWS:])
        after = rss_mib(server.pids()[0])
    assert outcomes == {"OK": SINGLE_ROWS} and batch == "OK", (outcomes, batch)
    assert after - before < BUDGET_MIB + MARGIN_MIB, f"RSS {before:.0f} -> {after:.0f} MiB"
    record(
        f"hostile: {SINGLE_ROWS:,} distinct missing patterns (KDB k=3, 20 x 12 states)",
        "sqlite",
        requests=SINGLE_ROWS + 1,
        errors=0,
        faults=SINGLE_ROWS + 1,
        lost=0,
        plan_budget_mib=BUDGET_MIB,
        rss_before_mib=round(before, 1),
        rss_after_mib=round(after, 1),
        single_rows_ok=outcomes.get("OK", 0),
        single_rows_refused=outcomes.get("RESOURCE_EXHAUSTED", 0),
        thousand_row_request=batch,
    )
