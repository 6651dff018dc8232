"""A package's names loaded on first use (PEP 562), so that importing one light submodule
of a package (a constant, a name rule) does not import every heavy one beside it.

Standard library only: every package may import it (tests/test_architecture.py's BASE).
A package lists where each name lives and sets its module's ``__getattr__`` and
``__dir__`` from ``exports``; the same names imported under ``if TYPE_CHECKING:`` keep
them visible to mypy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose name ``n`` lives in its
    submodule ``where[n]`` (relative, e.g. ``"model_store"``); a loaded name is kept."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
