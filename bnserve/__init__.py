"""bnserve's Python API: learn Bayesian network classifiers in a notebook and move them to
and from the model store, and call a running server.

- ``BayesNetClassifier``: a scikit-learn classifier over every learner (``pip install 'bnserve[sklearn]'``).
- ``publish(classifier, name, aliases, store)`` and ``load("name@alias", store)``.
- ``Client(target, …)``: ``predict``, ``metadata``, ``list_models`` against ``server serve``.

The names load on first use, so ``from bnserve import Client`` imports neither the trainer
nor scikit-learn. The packages underneath are ``bnserve.store``, ``bnserve.trainer`` and
``bnserve.server``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bnserve.client import Client, Predictions
    from bnserve.estimator import BayesNetClassifier
    from bnserve.models import load, load_model, publish

_WHERE = {
    "BayesNetClassifier": "bnserve.estimator",
    "Client": "bnserve.client",
    "Predictions": "bnserve.client",
    "load": "bnserve.models",
    "load_model": "bnserve.models",
    "publish": "bnserve.models",
}

__all__ = ["BayesNetClassifier", "Client", "Predictions", "load", "load_model", "publish"]  # the keys of _WHERE


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'bnserve' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
