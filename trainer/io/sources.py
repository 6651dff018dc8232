"""Where data come from: files (``.gz`` read transparently), URLs that fsspec opens
(``s3://``, ``gs://``, ``https://``…, with the fsspec package for the protocol), sets of
files named by a glob pattern, the built-in data sets, and the format a file's name says
it is in."""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
from collections.abc import Callable
from importlib import resources
from pathlib import PurePath
from typing import IO, Any, cast
from urllib.parse import parse_qsl, urlsplit

from bnserve.store.errors import InvalidInput
from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS, ReadLimits

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


ByteCounter = Callable[[int], None]  # told the size of each read, in the file's bytes (before any gunzip)


def open_binary(source: str, counted: ByteCounter | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS) -> IO[bytes]:
    """The bytes of a file or a built-in data set, gunzipped when the name ends in ``.gz``
    (InvalidInput past ``limits.max_decompressed`` bytes); ``counted`` is told how many of
    the file's bytes each read took (for a progress bar)."""
    if counted is not None:
        return _gunzipped(source, io.BufferedReader(_Counted(_file_bytes(source), counted)), limits)
    return _gunzipped(source, _file_bytes(source), limits)


def _file_bytes(source: str) -> IO[bytes]:
    """The file's own bytes (not gunzipped)."""
    if source.startswith(BUILTIN_PREFIX):
        name = source[len(BUILTIN_PREFIX) :]
        if name not in BUILTIN_DATASETS:
            raise InvalidInput(
                f"unknown built-in data set {redacted_url(source)!r}; known: {', '.join(BUILTIN_DATASETS)}"
            )
        return resources.files("bnserve.trainer.io.datasets").joinpath(BUILTIN_DATASETS[name]).open("rb")
    try:
        return _fsspec_open(source) if is_url(source) else open(source, "rb")
    except OSError as exc:
        raise InvalidInput(f"{redacted_url(source)}: cannot open: {redacted_urls(str(exc.strerror or exc))}") from None


def _gunzipped(source: str, raw: IO[bytes], limits: ReadLimits) -> IO[bytes]:
    gzipped = source.endswith(".gz") or source.startswith(BUILTIN_PREFIX)  # the built-ins are gzipped
    if not gzipped:
        return raw
    inflated = cast(IO[bytes], gzip.GzipFile(fileobj=raw))
    if limits.max_decompressed is None:
        return inflated
    return io.BufferedReader(_Bounded(inflated, limits.max_decompressed, lambda: limits.too_much_decompressed(source)))


def size_of(source: str) -> int | None:
    """The size in bytes of a local file; None for a URL, a built-in or a file that cannot be read."""
    if source.startswith(BUILTIN_PREFIX) or is_url(source):
        return None
    try:
        return os.path.getsize(source)
    except OSError:
        return None


class _Counted(io.RawIOBase):
    """A binary stream that tells ``counted`` the size of each read."""

    def __init__(self, raw: IO[bytes], counted: ByteCounter):
        self._raw, self._counted = raw, counted

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        if n:
            self._counted(n)
        return n

    def readall(self) -> bytes:  # in blocks of a MiB, not RawIOBase's 8 KiB
        blocks = []
        while block := self._raw.read(1 << 20):
            self._counted(len(block))
            blocks.append(block)
        return b"".join(blocks)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Bounded(io.RawIOBase):
    """A stream that raises ``error()`` once more than ``limit`` bytes have been read from it."""

    def __init__(self, raw: IO[bytes], limit: int, error: Callable[[], Exception]):
        self._raw, self._left, self._error = raw, limit, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        self._left -= n or 0
        if self._left < 0:
            raise self._error()
        return n

    def readall(self) -> bytes:  # in blocks of a MiB, not RawIOBase's 8 KiB
        blocks = []
        while block := self._raw.read(1 << 20):
            self._left -= len(block)
            if self._left < 0:
                raise self._error()
            blocks.append(block)
        return b"".join(blocks)

    def close(self) -> None:
        self._raw.close()
        super().close()


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PATTERN = re.compile(r"[*?[]")


def is_url(source: str) -> bool:
    """A ``scheme://`` address, opened through fsspec."""
    return _URL.match(source) is not None


# A query parameter that carries a credential: a signature, token, key or password (the
# X-Amz-* of an S3 presigned URL, Azure's sig, access_token, api_key…).
_SECRET_QUERY = re.compile(
    r"(?i)^(x-amz-.*|x-goog-.*|.*(sig|signature|token|key|pass(word|wd)?|pwd|secret|credential).*)$"
)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>:,.;)]")
HIDDEN = "***"


def redacted_url(source: str) -> str:
    """``source`` as it may be shown: for a URL, the password of its ``user:password@`` and
    the value of every credential-like query parameter (``_SECRET_QUERY``) as ***, the
    scheme, user, host and path kept; anything else as is. The one rule for data URLs: every
    message, note or line of output that names a data source goes through it (or through
    ``redacted_urls``)."""
    if not is_url(source):
        return source
    scheme, rest = source.split("://", 1)
    path, hook, query = rest.partition("?")
    # The password runs from the first ':' (before any '/') to the last '@' before the query,
    # as in the store's URLs: a '/' or '@' written unencoded in it hides no tail of it.
    colon, at = path.find(":"), path.rfind("@")
    if 0 <= colon < at and "/" not in path[:colon]:
        path = path[: colon + 1] + HIDDEN + path[at:]
    if hook:
        query, hash_, fragment = query.partition("#")
        parts = []
        for part in query.split("&"):
            key = parse_qsl(part, keep_blank_values=True)[0][0] if "=" in part else part
            parts.append(part.split("=", 1)[0] + "=" + HIDDEN if "=" in part and _SECRET_QUERY.match(key) else part)
        query = "&".join(parts) + hash_ + fragment
    return f"{scheme}://{path}{hook}{query}"


def redacted_urls(text: str) -> str:
    """``text`` (an error, a note) with each URL in it shown by ``redacted_url``: the last
    guard, for a URL a library wrote into its own message."""
    return _URL_IN_TEXT.sub(lambda m: redacted_url(m[0]), text)


def source_name(source: str) -> str:
    """What a model's metadata says its data came from: the file name alone (for a URL, the
    last segment of its path; ``builtin:NAME`` as is). Never the directory, host,
    credentials or query string: every client of the server can read the metadata."""
    return PurePath(urlsplit(source).path if is_url(source) else source).name


def is_pattern(source: str) -> bool:
    """A glob pattern (``*``, ``?``, ``[``) naming a set of files, not a file of that name."""
    return _PATTERN.search(source) is not None and (is_url(source) or not os.path.exists(source))


def expand(source: str) -> list[str]:
    """The files ``source`` names, sorted: those a glob pattern matches (``is_pattern``),
    local or through fsspec, else ``source`` itself."""
    if not is_pattern(source):
        return [source]
    if is_url(source):
        fs, path = _filesystem(source)
        matches = [fs.unstrip_protocol(p) for p in sorted(fs.glob(path))]
    else:
        matches = sorted(p for p in glob.glob(source) if os.path.isfile(p))
    if not matches:
        raise InvalidInput(f"{redacted_url(source)}: no file matches the pattern")
    return matches


def _filesystem(source: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise InvalidInput(f"{redacted_url(source)}: reading a URL needs fsspec: pip install 'bnserve[dask]'") from None
    try:
        return cast(tuple[Any, str], fsspec.core.url_to_fs(source))
    except (ImportError, ValueError) as exc:  # no package for the protocol, or an unknown one
        raise InvalidInput(f"{redacted_url(source)}: {redacted_urls(str(exc))}") from None


def _fsspec_open(source: str) -> IO[bytes]:
    fs, path = _filesystem(source)
    try:
        return cast(IO[bytes], fs.open(path, "rb"))
    except FileNotFoundError:
        raise InvalidInput(f"{redacted_url(source)}: cannot open: no such file") from None


def open_text(
    source: str, counted: ByteCounter | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> io.TextIOBase:
    """UTF-8 text (a leading BOM dropped), line endings left to the parser."""
    return io.TextIOWrapper(open_binary(source, counted, limits), encoding="utf-8-sig", newline="")
