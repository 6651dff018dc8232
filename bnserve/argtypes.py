"""The argument types both command lines share, and the bounds a setting is checked against.

Two halves, standard library only, so that ``store``, ``trainer`` and ``server`` may all
import this module (tests/test_architecture.py: the one module below the three packages):

- bounds (``whole``, ``seconds``, ``one_of``): a function of a value that returns what is
  wrong with it (``"must be at least 1"``), or None. A frozen settings class checks its
  fields with them in ``__post_init__`` (``server.config.ServeConfig``), so that flags,
  ``BNSERVE_*`` variables and Python callers meet the same rule;
- argparse types (``whole_number``, ``number``, ``positive_seconds``, ``limit``,
  ``converted``, ``delimiter``, ``choice``, ``file_path``): text to value, a usage error
  (``argparse.ArgumentTypeError``) naming what was expected when the text is not one.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any

Bound = Callable[[Any], "str | None"]  # what is wrong with a value, or None


def whole(minimum: int | None = None, maximum: int | None = None) -> Bound:
    """A whole number (not a bool) within [minimum, maximum]."""

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be a whole number"
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            if maximum is None:
                return "must be at least 1" if minimum == 1 else f"must be {minimum} or more"
            return f"must be at most {maximum}" if minimum is None else f"must be from {minimum} to {maximum}"
        return None

    return check


def seconds(*, zero: bool = False) -> Bound:
    """A finite number of seconds, more than 0 (or 0 or more, with ``zero``)."""

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return "must be a number of seconds"
        if value < 0 or (value == 0 and not zero):
            return "must be 0 or more seconds" if zero else "must be more than 0 seconds"
        return None

    return check


def one_of(options: Sequence[str], *, case: bool = True) -> Bound:
    """One of ``options`` (in any case, without ``case``)."""

    def check(value: Any) -> str | None:
        text = value if case or not isinstance(value, str) else value.upper()
        return None if text in options else f"must be one of {', '.join(options)}"

    return check


def text(value: Any) -> str | None:
    """A string that is not blank (a host, a file path)."""
    return None if isinstance(value, str) and value.strip() else "must be a non-empty string"


# ---------------------------------------------------------------------- argparse types


def whole_number(minimum: int | None = None, unit: str = "whole number") -> Callable[[str], int]:
    """A whole number of at least ``minimum`` (None: any)."""
    bound = whole(minimum)

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {unit}, got {text!r}") from None
        problem = bound(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{problem}, got {value}")
        return value

    parse.__name__ = unit  # argparse names the type in its errors
    return parse


def number(unit: str = "number") -> Callable[[str], float]:
    """Any finite number (its bounds are the settings' to check)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a {unit}, got {text!r}")
        return value

    parse.__name__ = unit
    return parse


def positive_seconds(*, zero: bool = False) -> Callable[[str], float]:
    """A number of seconds more than 0 (or 0 or more, with ``zero``)."""
    bound, parse_number = seconds(zero=zero), number("number of seconds")

    def parse(text: str) -> float:
        value = parse_number(text)
        problem = bound(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{problem}, got {text}")
        return value

    parse.__name__ = "seconds"
    return parse


def limit(parse: Callable[[str], int | None], unit: str, none: Any = None) -> Callable[[str], Any]:
    """A positive number of ``unit`` as ``parse`` reads it, or ``none`` for the text none."""

    def parse_limit(text: str) -> Any:
        if text.strip().lower() == "none":
            return none
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or value < 1:
            raise argparse.ArgumentTypeError(f"expected a positive number of {unit} or none, got {text!r}")
        return value

    return parse_limit


def converted(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its ValueError's message is the usage error."""

    def parse_text(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse_text.__name__ = getattr(parse, "__name__", "value")
    return parse_text


def delimiter(text: str) -> str:
    """One character; ``tab`` or ``\\t`` for a tab."""
    text = "\t" if text in ("tab", "\\t") else text
    if len(text) != 1 or text in '\r\n"':
        raise argparse.ArgumentTypeError(f"a delimiter is one character (not a quote or a line end), got {text!r}")
    return text


def choice(options: Sequence[str]) -> Callable[[str], str]:
    """One of ``options``, exactly."""

    def parse(text: str) -> str:
        if text not in options:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(options)}, got {text!r}")
        return text

    return parse


def file_path(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file path, got an empty string")
    return text
