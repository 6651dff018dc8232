"""The missing-value policies (``--missing``), by name: their own module, so that a command
line's parser reads them without importing the preprocessing, and through it numpy and the
statistics (``trainer --version`` and ``--help`` import neither)."""

from __future__ import annotations

AVAILABLE_CASE = "available-case"
IMPUTE = "impute"
STATE = "state"
MISSING_POLICIES = (AVAILABLE_CASE, IMPUTE, STATE)
