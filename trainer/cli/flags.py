"""Argument types and the flags several subcommands share; ``UsageError`` (exit code 2)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from bnserve.argtypes import delimiter, limit
from bnserve.store.errors import InvalidInput
from bnserve.store.model.markers import DEFAULT_MISSING_MARKERS as DEFAULT_NA_VALUES  # light: not preprocessing
from bnserve.store.model.markers import DEFAULT_UNKNOWN, UNKNOWN_POLICIES
from bnserve.store.model.names import parse_ref
from bnserve.store.timeouts import add_timeout_flags, timeouts_of
from bnserve.trainer.data.budget import (
    DEFAULT_MEMORY_BUDGET,
    IN_MEMORY_PER_FILE_BYTE,
    parse_size,
)
from bnserve.trainer.io import FORMATS
from bnserve.trainer.io.limits import COLUMNS_FLAG, DECOMPRESSED_FLAG, DEFAULT_MAX_COLUMNS
from bnserve.trainer.learners.registry import AUTO, LEARNERS

if TYPE_CHECKING:
    from bnserve.store.db import ModelStore
    from bnserve.trainer.learners.parameters import Estimator

PROG = "trainer"


NO_LIMIT = "none"  # --max-decompressed none, told apart from not given (None)
SIGNING_KEY_ENV = "BNSERVE_SIGNING_KEY"  # --signing-key of every command that publishes


class UsageError(Exception):
    """A bad command line: exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage and sys.exit(2)
        raise UsageError(message)


def _texts(text: str) -> tuple[str, ...]:
    """A comma-separated list of texts ('' for none)."""
    return tuple(t for t in text.split(",") if t)


def _reading_flags(p: argparse.ArgumentParser, as_trained: bool = False) -> None:
    """--format, --na-values, --delimiter and --keep-whitespace: how a data file's texts are
    read. ``as_trained`` (predict): by default as the model's training data was read."""
    p.add_argument("--format", dest="fmt", choices=FORMATS, help="file format (default: from the extension)")
    default = "the model's, else " if as_trained else ""
    p.add_argument(
        "--na-values",
        type=_texts,
        default=None if as_trained else DEFAULT_NA_VALUES,
        metavar="TEXT[,TEXT…]",
        help=f"texts read as a missing value, beside the empty one (default {default}{','.join(DEFAULT_NA_VALUES)}; "
        "'' for none)",
    )
    p.add_argument(
        "--delimiter",
        type=delimiter,
        metavar="CHAR",
        help="the field separator of a CSV or TSV file, when not a comma (CSV) or a tab (TSV): e.g. ';', '|', tab",
    )
    p.add_argument(
        "--keep-whitespace",
        action="store_true",
        help="keep the spaces around a value (by default ' Male' is read as 'Male'"
        + ("; default: as the model was trained)" if as_trained else ")"),
    )
    p.add_argument(
        COLUMNS_FLAG,
        type=limit(int, "columns"),
        default=DEFAULT_MAX_COLUMNS,
        metavar="N",
        help=f"refuse a data file of more columns (default {DEFAULT_MAX_COLUMNS:,}; none: no limit)",
    )
    p.add_argument(
        DECOMPRESSED_FLAG,
        type=limit(parse_size, "bytes (e.g. 8GiB)", none=NO_LIMIT),
        metavar="SIZE",
        help="refuse a .gz data file that decompresses to more, e.g. 8GiB; none: no limit (default: for a file "
        f"read whole, what fits --memory-budget, {DEFAULT_MEMORY_BUDGET // IN_MEMORY_PER_FILE_BYTE >> 20} MiB "
        "by default; none for one read in chunks)",
    )


def _unknown_flag(p: argparse.ArgumentParser) -> None:
    """--unknown (predict, evaluate --test): what a value unseen in training becomes
    (``bnserve.store.model.unseen``)."""
    p.add_argument(
        "--unknown",
        choices=UNKNOWN_POLICIES,
        default=DEFAULT_UNKNOWN,
        help="a value no training row had: 'missing' reads it as missing (summed out) and counts it on stderr; "
        "'error' refuses the file, naming the column and value (default %(default)s)",
    )


def _quiet_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress bars or notes on stderr (bars show only when stderr is a terminal)",
    )


def _store_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="URL",
        help="SQLAlchemy URL of the model store (default: $BNSERVE_STORE_URL, else the file "
        "$BNSERVE_STORE_URL_FILE names, else sqlite:///bnserve.db)",
    )
    add_timeout_flags(p)


def _alias_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--alias",
        dest="aliases",
        action="append",
        default=[],
        metavar="ALIAS",
        help="point this alias (e.g. production) at the new version, in the same transaction; repeat for more",
    )


def _annotation_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--description", metavar="TEXT", help="a description of the new version (up to 1000 characters)")
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        type=_tag,
        metavar="KEY=VALUE",
        help="tag the new version (KEY like a model name, VALUE up to 256 characters); repeat for more",
    )


def _signing_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--signing-key",
        metavar="FILE",
        default=os.environ.get(SIGNING_KEY_ENV) or None,
        help="sign the new version with this Ed25519 private key (PEM, readable by its owner only; "
        f"`trainer keygen` makes one; default ${SIGNING_KEY_ENV}): a server with --verify-key loads only signed versions",
    )


def _tag(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _algorithms(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in names if a not in LEARNERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm {', '.join(unknown) or repr(text)}; expected some of {', '.join(LEARNERS)}"
        )
    return list(dict.fromkeys(names))


def _algorithms_or_auto(text: str) -> list[str]:
    """As ``_algorithms``, with ``auto`` allowed among them (evaluate)."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    learners = [a for a in names if a != AUTO]
    if learners or not names:
        _algorithms(",".join(learners) or text)  # raises on an unknown name or an empty list
    return list(dict.fromkeys(names))


def _estimator(text: str) -> Estimator:
    from bnserve.trainer.learners.parameters import Estimator

    try:
        return Estimator.parse(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _parse_ref(ref: str) -> tuple[str, int | None, str | None]:
    """NAME, NAME:VERSION or NAME@ALIAS; a bad one is a usage error."""
    try:
        return parse_ref(ref)
    except InvalidInput as exc:
        raise UsageError(f"NAME[:VERSION|@ALIAS] {ref!r}: {exc.message}") from None


def _check_flag(check: Callable[[Any], Any], value: Any, flag: str) -> None:
    """Run a store name rule on a command-line value; a failure is a usage error."""
    try:
        check(value)
    except InvalidInput as exc:
        raise UsageError(f"{flag}: {exc.message}") from None


def _check_store_url(cli_value: str | None) -> None:
    """Refuse a store URL that cannot be used (syntax, driver), without connecting."""
    from bnserve.store.db import resolve_store_url
    from bnserve.store.db.engine import create_store_engine

    create_store_engine(resolve_store_url(cli_value)).dispose()


def _open_store(args: argparse.Namespace, create: bool = False, verify: Any = None) -> ModelStore:
    """The SQL store of --store, imported here so that ``evaluate`` needs no database driver.
    ``create``: a command that writes sets up a new, empty store (an existing one must be at
    this code's schema); ``verify``: a ``KeyRing`` whose signatures every load must carry."""
    from bnserve.store.db import ModelStore, resolve_store_url

    return ModelStore(resolve_store_url(args.store), create=create, timeouts=timeouts_of(args), verify=verify)
