"""Model names, aliases, versions, and a version's description and tags: the rules every
caller checks before any database work, and the one rule that says which version a request means."""

from __future__ import annotations

import numbers
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence

from bnserve.store.errors import InvalidInput, NotFound

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 characters from [A-Za-z0-9._-], starting with a letter or digit"
DEFAULT_ALIAS = "production"  # what a request naming neither a version nor an alias gets, when it is set
DESCRIPTION_LENGTH = 1000  # characters
MAX_NAME_LENGTH = 256  # characters of a variable's, a state's or an algorithm's name in a model
TAG_VALUE_LENGTH = 256  # characters; a tag's key follows NAME_RULE
MAX_TAGS = 32  # per version
# What a terminal acts on instead of showing: C0 controls, DEL, C1 controls (U+009B is a
# CSI: ESC [), and the bidirectional controls that reorder what follows them (marks,
# embeddings, overrides, isolates).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(text: str, keep: str = "") -> str:
    """``text`` safe to print on a terminal: each ``_CONTROL`` character but those in ``keep``
    written as a visible escape (``\\x1b``, ``\\u202e``). The one rule for every name, label,
    description and tag the command lines print."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else _escape(m[0]), text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _check_printable(what: str, text: str, keep: str = "") -> None:
    """InvalidInput naming the first ``_CONTROL`` character of ``text`` not in ``keep`` by its
    code point (and name, when it has one)."""
    for match in _CONTROL.finditer(text):
        if match[0] not in keep:
            name = unicodedata.name(match[0], "")
            raise InvalidInput(
                f"{what} is invalid: it holds the control character U+{ord(match[0]):04X}{f' {name}' if name else ''}"
            )


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


def check_description(description: object) -> str | None:
    """A version's free text: at most ``DESCRIPTION_LENGTH`` characters, no control character
    (C0, DEL, C1, bidirectional: ``_CONTROL``) but newline and tab; "" or None for none."""
    if description is None or description == "":
        return None
    if not isinstance(description, str):
        raise InvalidInput(f"description {description!r} is invalid: expected a text")
    if len(description) > DESCRIPTION_LENGTH:
        raise InvalidInput(
            f"description is invalid: {len(description)} characters, at most {DESCRIPTION_LENGTH} are kept"
        )
    _check_printable("description", description, keep="\n\t")
    return description


def check_tags(tags: object) -> dict[str, str]:
    """A version's tags as a dict: at most ``MAX_TAGS``, keys by ``NAME_RULE``, values one line
    of at most ``TAG_VALUE_LENGTH`` characters ("" allowed)."""
    if not isinstance(tags, Mapping):
        raise InvalidInput(f"tags {tags!r} are invalid: expected a mapping of key to value")
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"tags are invalid: {len(tags)} of them, at most {MAX_TAGS} per version")
    for key, value in tags.items():
        if not isinstance(key, str) or not NAME_RE.fullmatch(key):
            raise InvalidInput(f"tag key {key!r} is invalid: use {NAME_RULE}")
        if not isinstance(value, str):
            raise InvalidInput(f"tag {key!r} has the value {value!r}: expected a text")
        if len(value) > TAG_VALUE_LENGTH:
            raise InvalidInput(
                f"tag {key!r} is invalid: its value has {len(value)} characters, at most {TAG_VALUE_LENGTH}"
            )
        _check_printable(f"tag {key!r}", value)
    return dict(sorted(tags.items()))


def check_version(version: object) -> int:
    """``version`` as an int if it is a positive integer (bool refused)."""
    if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 1:
        raise InvalidInput(f"version {version!r} is invalid: versions are integers from 1")
    return int(version)


def check_selector(name: str, version: int | None, alias: str | None) -> tuple[int | None, str | None]:
    """A checked (version, alias) selector of model ``name``: at most one of them."""
    check_model_name(name)
    if version is not None and alias is not None:
        raise InvalidInput(
            f"model {name!r}: give a version or an alias, not both (version {version!r}, alias {alias!r})"
        )
    return (None if version is None else check_version(version)), (None if alias is None else check_alias(alias))


def parse_ref(ref: str) -> tuple[str, int | None, str | None]:
    """(name, version, alias) of ``NAME``, ``NAME:VERSION`` or ``NAME@ALIAS``, each part
    checked (names and aliases never contain ':' or '@')."""
    name, version, alias = ref, None, None
    if "@" in ref:
        name, _, alias = ref.partition("@")
        check_alias(alias)
    elif ":" in ref:
        name, _, text = ref.partition(":")
        if not (text.isascii() and text.isdigit() and int(text) > 0):
            raise InvalidInput(f"bad version {text!r} in {ref!r}; expected NAME, NAME:VERSION or NAME@ALIAS")
        version = int(text)
    check_model_name(name)
    return name, version, alias


def resolve_version(
    name: str,
    versions: Sequence[int],
    aliases: Mapping[str, int],
    version: int | None = None,
    alias: str | None = None,
    unusable: Collection[int] = (),
) -> int:
    """The version a selector names among a model's ``versions``: ``version`` itself; the
    version ``alias`` points at; neither: the ``DEFAULT_ALIAS`` if set, else the newest
    version not in ``unusable`` (what the caller knows it cannot load). NotFound names what
    is missing."""
    if version is not None:
        if version not in versions:
            raise NotFound(f"model {name!r} has no version {version}")
        return version
    if alias is not None:
        if alias not in aliases:
            raise NotFound(f"model {name!r} has no alias {alias!r}")
        return aliases[alias]
    if DEFAULT_ALIAS in aliases:
        return aliases[DEFAULT_ALIAS]
    usable = [v for v in versions if v not in unusable]
    if not usable:
        raise NotFound(
            f"model {name!r} has no version that could be loaded" if versions else f"model {name!r} has no versions"
        )
    return max(usable)
