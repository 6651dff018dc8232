"""The installed bnserve version: the trainer records it in each model, the server reports it."""

from __future__ import annotations

import importlib.metadata


def code_version() -> str:
    """The installed bnserve version, or "unknown" when running from a source tree."""
    try:
        return importlib.metadata.version("bnserve")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
