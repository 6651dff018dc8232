"""Which database is the store: the URL from the command line, the environment or a
mounted file, how it is parsed, and how it (or an error about it) is shown without its secrets."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from urllib.parse import unquote

from sqlalchemy import URL, make_url
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
        if redacted(cli_value) != cli_value:  # it holds a secret
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


def parse_store_url(url: str) -> URL:
    """The SQLAlchemy URL of a store string; InvalidInput, showing it redacted, for one that is
    not a URL or is ambiguous: an unencoded '@' in the password makes SQLAlchemy take the
    password's tail for the host, which the driver then prints in its own errors."""
    shown = redacted(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise InvalidInput(
            f"store URL {shown} cannot be used: {redacted(url, str(exc))} "
            "(expected dialect+driver://user:password@host:port/database, e.g. "
            "postgresql+psycopg://bnserve@db:5432/models or sqlite:///bnserve.db)"
        ) from None
    userinfo = _userinfo(url)
    if userinfo is not None and "@" in url[userinfo[0] : userinfo[1]]:
        raise InvalidInput(
            f"store URL {shown} cannot be used: it holds more than one '@' after the user name; "
            "write an '@' in the password (or database or query) as %40"
        )
    return parsed


# A parameter that holds a secret, in a URL's query (``?password=…&…``) or a libpq
# keyword/value string (``password='…' host=…``): its value, quoted or up to the next
# ``&key=`` or blank.
_SECRET_PARAMETER = re.compile(
    r"(?i)([\w.-]*(?:pass(?:word|wd)?|pwd|secret|token))(\s*=\s*)('(?:[^'\\]|\\.)*'|.*?(?=&[^&=\s]*=|\s|$))"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
HIDDEN = "***"


def redacted(store: str, message: str | None = None) -> str:
    """``store``, any store string a user gave (a URL, a libpq keyword/value string, a mistyped
    mix), with every secret in it shown as ***; given ``message`` (an error about that store,
    e.g. the driver's), the message with the store and each of its secrets so hidden.

    The password of ``user:password@host`` runs from the first ':' to the last '@', with or
    without a scheme, so an unencoded '@' in it hides no tail; the value of every
    password-like parameter is hidden too. The one place that decides what is secret in a
    store string: everything that prints a store location or an error about it calls this."""
    if message is not None:
        message = message.replace(store, redacted(store))
        for secret in sorted(_secrets(store), key=len, reverse=True):
            message = message.replace(secret, HIDDEN)
        return message
    text = _SECRET_PARAMETER.sub(lambda m: m[1] + m[2] + HIDDEN, store)
    userinfo = _userinfo(text)
    if userinfo is not None:
        text = text[: userinfo[0]] + HIDDEN + text[userinfo[1] :]
    return text


def _userinfo(text: str) -> tuple[int, int] | None:
    """Where the password of ``user:password@`` lies in ``text`` (first ':' after the scheme,
    if any, to the last '@'); None without one."""
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme else 0
    at = text.rfind("@", start)
    colon = text.find(":", start, at) if at > 0 else -1
    return (colon + 1, at) if colon >= 0 else None


def _secrets(store: str) -> set[str]:
    """Each secret of ``store`` as written and as a driver would see it (unquoted, decoded)."""
    found = [m[3] for m in _SECRET_PARAMETER.finditer(store)]
    userinfo = _userinfo(store)
    if userinfo is not None:
        found.append(store[userinfo[0] : userinfo[1]])
    variants = {v for s in found for v in (s, s.strip("'"), unquote(s), unquote(s.strip("'")))}
    return {v for v in variants if v}
