"""Where data come from: files (``.gz`` read transparently), the built-in data sets, and
the format a file's name says it is in."""

from __future__ import annotations

import gzip
import io
from importlib import resources
from typing import IO, cast

from bnserve.store.errors import InvalidInput

BUILTIN_PREFIX = "builtin:"
BUILTIN_DATASETS = {"chess": "chess.csv.gz"}

FORMATS = ("csv", "tsv", "arff", "parquet")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".arff": "arff", ".parquet": "parquet", ".pq": "parquet"}


def format_of(source: str) -> str:
    """The format a file's extension names (``.gz`` looked through), CSV when none does."""
    if source.startswith(BUILTIN_PREFIX):
        source = BUILTIN_DATASETS.get(source[len(BUILTIN_PREFIX) :], "")
    name = source.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    dot = name.rfind(".")
    return EXTENSIONS.get(name[dot:], "csv") if dot >= 0 else "csv"


def open_binary(source: str) -> IO[bytes]:
    """The bytes of a file or a built-in data set, gunzipped when the name ends in ``.gz``."""
    if source.startswith(BUILTIN_PREFIX):
        name = source[len(BUILTIN_PREFIX) :]
        if name not in BUILTIN_DATASETS:
            raise InvalidInput(f"unknown built-in data set {source!r}; known: {', '.join(BUILTIN_DATASETS)}")
        raw = resources.files("bnserve.trainer.io.datasets").joinpath(BUILTIN_DATASETS[name]).open("rb")
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw))
    try:
        if source.endswith(".gz"):
            return cast(IO[bytes], gzip.open(source, "rb"))
        return open(source, "rb")
    except OSError as exc:
        raise InvalidInput(f"{source}: cannot open: {exc.strerror or exc}") from None


def open_text(source: str) -> io.TextIOBase:
    """UTF-8 text (a leading BOM dropped), line endings left to the parser."""
    return io.TextIOWrapper(open_binary(source), encoding="utf-8-sig", newline="")
