"""Serving a model's log tables in float32: whether it suffices (``float32_error``), and the
choice recorded in the model's metadata (``with_table_precision``, ``trainer fit --precision``)
that ``compile_model`` reads."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from bnserve.store.errors import InvalidInput

if TYPE_CHECKING:
    from bnserve.store.model import Model

FLOAT32_ERROR_BOUND = 1e-5  # |P32 - P64| at most this: the precision suffices (well below any decision margin)
PRECISION_CHECK_ROWS = 10_000


def float32_error(model: Model, rows: int = PRECISION_CHECK_ROWS, seed: int = 0) -> float:
    """The largest |P32(c|x) - P64(c|x)| over ``rows`` random instances: every feature's state
    drawn uniformly (so unlikely combinations, where log-joints are largest, are tried too),
    one in ten values missing. Needs no data, so it checks any model, however it was made."""
    import numpy as np  # here, not at the top: the command line's flags read this module's constants

    from bnserve.store.predictor.compiled import compile_model

    rng = np.random.default_rng(seed)
    cards = np.array([v.cardinality for v in model.features], dtype=np.int64)
    codes = (rng.random((rows, len(cards))) * cards).astype(np.int64)
    codes[rng.random(codes.shape) < 0.1] = -1
    p64 = compile_model(model, dtype=np.float64).predict_proba(codes)
    p32 = compile_model(model, dtype=np.float32).predict_proba(codes)
    return float(np.max(np.abs(p64 - p32))) if rows else 0.0


PRECISIONS = ("float64", "float32", "auto")


def with_table_precision(model: Model, precision: str) -> Model:
    """``model`` with the dtype the server should compile its tables in, and why, in its metadata.

    ``float64`` (the default) changes nothing. ``float32`` halves the tables; ``auto`` takes
    float32 where the precision suffices: the largest posterior error over random instances
    (``float32_error``) is at most ``FLOAT32_ERROR_BOUND``. Either way the
    metadata's ``table_precision`` records the dtype, the error measured and the bound.
    """
    if precision not in PRECISIONS:
        raise InvalidInput(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "float64":
        return model
    from bnserve.store.predictor.compiled import TABLE_PRECISION

    error = float32_error(model)
    suffices = error <= FLOAT32_ERROR_BOUND
    dtype = "float32" if precision == "float32" or suffices else "float64"
    record = {
        "dtype": dtype,
        "requested": precision,
        "float32_max_abs_error": float(f"{error:.3g}"),
        "bound": FLOAT32_ERROR_BOUND,
        "random_instances_checked": PRECISION_CHECK_ROWS,
    }
    return replace(model, metadata={**model.metadata, TABLE_PRECISION: record}).validate()
