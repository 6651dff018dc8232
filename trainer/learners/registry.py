"""Every learner, collected from the ``LEARNERS`` tuple of each module of this package."""

from __future__ import annotations

import importlib
import pkgutil

import bnserve.trainer.learners as package
from bnserve.trainer.learners.base import Learner, Param


def _collect() -> dict[str, Learner]:
    found: dict[str, Learner] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for learner in getattr(module, "LEARNERS", ()):
            if learner.name in found:
                raise RuntimeError(f"learner {learner.name!r} is defined twice")
            found[learner.name] = learner
    return dict(sorted(found.items()))


def _parameters(learners: dict[str, Learner]) -> dict[str, Param]:
    """Every declared parameter once; a name shared by learners must mean the same type."""
    params: dict[str, Param] = {}
    for learner in learners.values():
        for p in learner.params:
            seen = params.setdefault(p.name, p)
            if seen.type is not p.type:
                raise RuntimeError(f"parameter {p.name!r} is declared with two types")
    return params


LEARNERS: dict[str, Learner] = _collect()
PARAMETERS: dict[str, Param] = _parameters(LEARNERS)
