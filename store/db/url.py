"""Which database is the store: the URL from the command line, the environment or a
mounted file, and how it is shown without its password."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError

from bnserve.store.errors import InvalidInput

log = logging.getLogger(__name__)

DEFAULT_STORE_URL = "sqlite:///bnserve.db"  # a file in the working directory
STORE_URL_ENV = "BNSERVE_STORE_URL"
STORE_URL_FILE_ENV = "BNSERVE_STORE_URL_FILE"  # a file holding the URL (a mounted Secret)


def resolve_store_url(cli_value: str | None) -> str:
    """--store if given, else $BNSERVE_STORE_URL, else the file named by
    $BNSERVE_STORE_URL_FILE (a mounted Secret: its text, surrounding whitespace dropped),
    else DEFAULT_STORE_URL. A password belongs in the environment or a file, where ``ps``
    does not show it: one on the command line is used, with a warning."""
    if cli_value:
        if has_password(cli_value):
            log.warning(
                "the --store URL holds a password, which the process list shows to every user; "
                "pass it in %s or %s instead",
                STORE_URL_ENV,
                STORE_URL_FILE_ENV,
            )
        return cli_value
    if os.environ.get(STORE_URL_ENV):
        return os.environ[STORE_URL_ENV]
    path = os.environ.get(STORE_URL_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(
                f"{STORE_URL_FILE_ENV}={path}: cannot read the store URL: "
                f"{exc.strerror if isinstance(exc, OSError) else 'not UTF-8 text'}"
            ) from None
        if not text:
            raise InvalidInput(f"{STORE_URL_FILE_ENV}={path}: the file is empty")
        return text
    return DEFAULT_STORE_URL


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password."""
    try:
        return bool(make_url(url).password)
    except ArgumentError:
        return False


def redacted(url: str) -> str:
    """The URL with its password hidden, fit for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
