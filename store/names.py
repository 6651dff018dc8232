"""Rules for model names and aliases, checked before any database work."""

from __future__ import annotations

import numbers
import re

from bnserve.store.errors import InvalidInput

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 characters from [A-Za-z0-9._-], starting with a letter or digit"


def check_model_name(name: object) -> str:
    """``name`` itself if it is a valid model name; InvalidInput naming it otherwise."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidInput(f"model name {name!r} is invalid: use {NAME_RULE}")
    return name


def check_alias(alias: object) -> str:
    """``alias`` itself if valid: a model-name-like word that is not all digits (not a version)."""
    if not isinstance(alias, str) or not NAME_RE.fullmatch(alias):
        raise InvalidInput(f"alias {alias!r} is invalid: use {NAME_RULE}")
    if alias.isdigit():
        raise InvalidInput(f"alias {alias!r} is invalid: an alias cannot be all digits (it would read as a version)")
    return alias


def check_version(version: object) -> int:
    """``version`` as an int if it is a positive integer (bool refused)."""
    if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 1:
        raise InvalidInput(f"version {version!r} is invalid: versions are integers from 1")
    return int(version)
