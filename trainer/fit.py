"""Learn a model: pick a structure learner by name, estimate its CPTs, record how it was made."""

from __future__ import annotations

import importlib.metadata
import numbers
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from store.errors import InvalidInput
from store.model import SINGLE, Model
from trainer.data import EncodedData
from trainer.estimate import estimate
from trainer.learners import kdb, naive_bayes, tan
from trainer.learners.structure import Structure

DEFAULT_K = 2


@dataclass(frozen=True)
class Learner:
    """A structure learner; ``takes_k`` says whether it has the k (max feature parents) parameter."""

    learn: Callable[..., Structure]
    takes_k: bool = False


LEARNERS: dict[str, Learner] = {
    "nb": Learner(naive_bayes.naive_bayes),
    "tan": Learner(tan.tan),
    "kdb": Learner(kdb.kdb, takes_k=True),
    "fkdb": Learner(kdb.fkdb, takes_k=True),
}


def fit(algo: str, data: EncodedData, *, k: int | None = None) -> Model:
    """Learn ``algo`` on ``data``; k defaults to 2 for learners that take it and is refused by the others."""
    learner = LEARNERS.get(algo)
    if learner is None:
        raise InvalidInput(f"unknown algorithm {algo!r}; expected one of {', '.join(LEARNERS)}")
    params: dict[str, int] = {}
    if learner.takes_k:
        k = DEFAULT_K if k is None else k
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise InvalidInput(f"k must be a non-negative integer, got {k!r}")
        params["k"] = int(k)
        structure = learner.learn(data, int(k))
    else:
        if k is not None:
            raise InvalidInput(f"algorithm {algo!r} takes no k")
        structure = learner.learn(data)
    network = estimate(structure, data)
    metadata = {
        "training": {
            "source": data.source,
            "rows": data.n_rows,
            "rows_dropped": data.n_rows_dropped,
            "features": len(data.features),
            "class_counts": data.class_counts(),
        },
        "data_fingerprint": data.fingerprint(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "code_version": code_version(),
        "order": list(structure.order),
        "order_scores": list(structure.scores),
    }
    return Model(data.variables, (network,), algo, SINGLE, params, metadata).validate()


def code_version() -> str:
    """The installed bnserve version, or "unknown" when running from a source tree."""
    try:
        return importlib.metadata.version("bnserve")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
