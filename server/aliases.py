"""Which versions of a model the server holds, and where its aliases point when a version is refused.

Pure: ``choose`` is given what the store lists, where the aliases pointed as served before,
and ``outcome``, which says of one version whether it loads (the caller loads it; each
version is asked about at most once, and only when a rule needs it). The rules:

- every aliased version is held. An alias whose version is refused stays at the version it
  named as served before, when that one is still listed and loads: the previous good
  version keeps answering for it until the alias moves again (``held``). With nothing to
  fall back on it names the refused version, so a call for it is refused, naming why;
- the newest version that loads is held (the default, without a ``production`` alias);
- a version deleted between the listing and its load (``GONE``) is left out, and so is
  every alias naming it.

Which version a call's selector names among those is ``bnserve.store.model.names.resolve_version``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


class Outcome(enum.Enum):
    LOADED = "loaded"
    REFUSED = "refused"  # for any reason but the store's own failure, which ends the refresh
    GONE = "gone"  # deleted since the catalogue was read


@dataclass(frozen=True)
class Choice:
    versions: tuple[int, ...]  # as listed, less those gone
    aliases: dict[str, int]  # alias -> the version that answers for it
    held: dict[str, int]  # alias -> the refused version the store names, for an alias held back
    loaded: tuple[int, ...]  # the versions to hold


def choose(
    versions: Sequence[int],
    aliases: Mapping[str, int],
    served_before: Mapping[str, int],
    outcome: Callable[[int], Outcome],
) -> Choice:
    """The versions to hold and the aliases as served, by the rules above."""
    asked: dict[int, Outcome] = {}

    def ask(version: int) -> Outcome:
        if version not in asked:
            asked[version] = outcome(version)
        return asked[version]

    served, held = dict(aliases), {}
    for alias, version in sorted(aliases.items()):
        if ask(version) is not Outcome.REFUSED:
            continue
        previous = served_before.get(alias)
        if previous is not None and previous in versions and previous != version and ask(previous) is Outcome.LOADED:
            served[alias], held[alias] = previous, version
    for version in sorted(versions, reverse=True):
        if ask(version) is Outcome.LOADED:
            break
    gone = {v for v, o in asked.items() if o is Outcome.GONE}
    return Choice(
        tuple(v for v in versions if v not in gone),
        {a: v for a, v in served.items() if v not in gone},
        held,
        tuple(sorted(v for v, o in asked.items() if o is Outcome.LOADED)),
    )
