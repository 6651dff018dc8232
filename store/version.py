"""The installed bnserve version: the trainer records it in each model, the server reports
it, and both command lines print it (``--version``)."""

from __future__ import annotations

import argparse
import importlib.metadata
from functools import cache
from typing import Any


@cache
def code_version() -> str:
    """The installed bnserve version, or "unknown" when running from a source tree. Read once
    per process: every fit records it, and reading the packages' metadata costs milliseconds
    (auto's search fits hundreds of models on a small file)."""
    try:
        return importlib.metadata.version("bnserve")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class VersionAction(argparse.Action):
    """``--version`` of both command lines: print "PROG VERSION" and exit. The version is looked
    up only when asked: reading the installed packages' metadata costs tens of milliseconds."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(f"{parser.prog} {code_version()}")
        parser.exit()
