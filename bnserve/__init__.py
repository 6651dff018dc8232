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
import os
from typing import TYPE_CHECKING, Any


def _source_root() -> str | None:
    """The clone this facade runs from, if it does: the folder holding ``pyproject.toml``
    and the packages' folders ``store/``, ``trainer/`` and ``server/`` beside ``bnserve/``.
    None in an installed copy, where setuptools put those folders inside ``bnserve/``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    marks = ("pyproject.toml", *(os.path.join(folder, "__init__.py") for folder in ("store", "trainer", "server")))
    return root if all(os.path.isfile(os.path.join(root, mark)) for mark in marks) else None


# From a clone (its root on sys.path, e.g. ``python -c`` run there), this folder shadows any
# installed bnserve, so ``bnserve.store`` must be found as ``<root>/store``: the clone's root
# joins the package's path, as pyproject.toml's package-dir maps it in a wheel.
if (_root := _source_root()) is not None:
    __path__.append(_root)

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
