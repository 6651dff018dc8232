"""What changed between two catalogues (model name -> its versions and aliases), as data.

Pure: nothing here reads the store or keeps state. The repository asks which models to
build again (``changed``), folds an incremental read into the catalogue it holds
(``updated``), and logs what a refresh changed in what it serves (``diff``). The changes
of ``diff(before, after)`` applied to ``before`` give ``after`` (``apply``; a property
tests/server/test_catalogue.py checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar


class Listed(Protocol):
    """What the diff reads of a model: the store's ``ModelSummary`` and the served ``ModelEntry`` alike."""

    @property
    def versions(self) -> tuple[int, ...]: ...

    @property
    def aliases(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class Listing:
    versions: tuple[int, ...]  # ascending
    aliases: Mapping[str, int]  # alias -> version


@dataclass(frozen=True)
class VersionAdded:
    name: str
    version: int

    def __str__(self) -> str:
        return f"added {self.name} version {self.version}"


@dataclass(frozen=True)
class VersionDropped:
    name: str
    version: int

    def __str__(self) -> str:
        return f"dropped {self.name} version {self.version}: deleted from the store"


@dataclass(frozen=True)
class AliasSet:
    name: str
    alias: str
    version: int

    def __str__(self) -> str:
        return f"alias {self.alias} of {self.name} set to version {self.version}"


@dataclass(frozen=True)
class AliasMoved:
    name: str
    alias: str
    was: int
    version: int

    def __str__(self) -> str:
        return f"alias {self.alias} of {self.name} moved from version {self.was} to version {self.version}"


@dataclass(frozen=True)
class AliasRemoved:
    name: str
    alias: str
    was: int

    def __str__(self) -> str:
        return f"alias {self.alias} of {self.name} removed (it named version {self.was})"


Change = VersionAdded | VersionDropped | AliasSet | AliasMoved | AliasRemoved
T = TypeVar("T")


def diff(before: Mapping[str, Listed], after: Mapping[str, Listed]) -> list[Change]:
    """Per model, by name: the versions dropped, the versions added, then each alias set,
    moved or removed (by alias)."""
    changes: list[Change] = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        old_versions = set(was.versions) if was is not None else set()
        new_versions = set(now.versions) if now is not None else set()
        changes += [VersionDropped(name, v) for v in sorted(old_versions - new_versions)]
        changes += [VersionAdded(name, v) for v in sorted(new_versions - old_versions)]
        old_aliases = dict(was.aliases) if was is not None else {}
        new_aliases = dict(now.aliases) if now is not None else {}
        for alias in sorted(old_aliases.keys() | new_aliases.keys()):
            if alias not in new_aliases:
                changes.append(AliasRemoved(name, alias, old_aliases[alias]))
            elif alias not in old_aliases:
                changes.append(AliasSet(name, alias, new_aliases[alias]))
            elif old_aliases[alias] != new_aliases[alias]:
                changes.append(AliasMoved(name, alias, old_aliases[alias], new_aliases[alias]))
    return changes


def apply(before: Mapping[str, Listed], changes: Iterable[Change]) -> dict[str, Listing]:
    """``before`` with ``changes`` made; a model left with no version and no alias is gone."""
    versions = {name: set(listed.versions) for name, listed in before.items()}
    aliases = {name: dict(listed.aliases) for name, listed in before.items()}
    for change in changes:
        held, named = versions.setdefault(change.name, set()), aliases.setdefault(change.name, {})
        if isinstance(change, VersionAdded):
            held.add(change.version)
        elif isinstance(change, VersionDropped):
            held.discard(change.version)
        elif isinstance(change, AliasRemoved):
            del named[change.alias]
        else:
            named[change.alias] = change.version
    return {n: Listing(tuple(sorted(versions[n])), aliases[n]) for n in sorted(versions) if versions[n] or aliases[n]}


def changed(before: Mapping[str, T], after: Mapping[str, T]) -> set[str]:
    """The names whose listing differs (added, removed, or any version or alias)."""
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def updated(catalogue: Mapping[str, T], changes: Mapping[str, T | None]) -> dict[str, T]:
    """``catalogue`` with an incremental read folded in: name -> its new listing, or None if deleted."""
    result = dict(catalogue)
    for name, listing in changes.items():
        if listing is None:
            result.pop(name, None)
        else:
            result[name] = listing
    return result
