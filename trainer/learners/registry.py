"""Every learner by name, each family's module imported when one of its learners is first used.

The names, where each is defined, and what the command line needs before any learner is
imported (each parameter's flag, type and help; which learners can stream) are in
``index``, written from the modules' ``LEARNERS`` tuples by ``python -m
bnserve.trainer.learners.registry``; tests/trainer/test_registry.py fails when it is stale.
Building ``trainer``'s parser thus imports no learner, numpy or scipy.
"""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bnserve.store.errors import InvalidInput
from bnserve.trainer.learners import index

if TYPE_CHECKING:
    from bnserve.trainer.learners.base import Learner, Param

PACKAGE = "bnserve.trainer.learners"


class _Learners(Mapping[str, "Learner"]):
    """name -> ``Learner``, importing the family module that defines it on first lookup."""

    def __getitem__(self, name: str) -> Learner:
        module = importlib.import_module(f"{PACKAGE}.{index.MODULES[name]}")
        return next(learner for learner in module.LEARNERS if learner.name == name)

    def __iter__(self) -> Iterator[str]:
        return iter(index.MODULES)

    def __contains__(self, name: object) -> bool:  # Mapping's would import the learner's module
        return name in index.MODULES

    def __len__(self) -> int:
        return len(index.MODULES)


class _Parameters(Mapping[str, "Param"]):
    """name -> the ``Param`` its first learner (by name) declares; learners sharing a name share its type."""

    def __getitem__(self, name: str) -> Param:
        owner = index.PARAMETERS[name][0]
        return next(p for p in LEARNERS[owner].params if p.name == name)

    def __iter__(self) -> Iterator[str]:
        return iter(index.PARAMETERS)

    def __contains__(self, name: object) -> bool:
        return name in index.PARAMETERS

    def __len__(self) -> int:
        return len(index.PARAMETERS)


LEARNERS: Mapping[str, Learner] = _Learners()
PARAMETERS: Mapping[str, Param] = _Parameters()
STREAMABLE: tuple[str, ...] = index.STREAMABLE  # the learners that can learn from counts alone (counts_only)


@dataclass(frozen=True)
class Flag:
    """A parameter as the command line takes it: ``--name``, text to value, help by learner."""

    name: str
    type: Callable[[str], Any]
    help: str
    needs_rows: bool

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _text_type(name: str) -> Callable[[str], Any]:
    """A builtin type by name, or a function of ``base`` called through without importing it now."""
    if hasattr(builtins, name):
        return getattr(builtins, name)

    def convert(text: str) -> Any:
        return getattr(importlib.import_module(f"{PACKAGE}.base"), name)(text)

    convert.__name__ = name  # argparse names it in "invalid int_or_range value"
    return convert


FLAGS: dict[str, Flag] = {
    name: Flag(name, _text_type(type_name), text, needs_rows)
    for name, (_, type_name, needs_rows, text) in index.PARAMETERS.items()
}
ROW_FLAGS: tuple[str, ...] = tuple(f.flag for f in FLAGS.values() if f.needs_rows)

# ``auto``'s name and defaults, here because the command line and the training spec read them
# without importing the search (bnserve.trainer.auto uses them)
AUTO = "auto"
DEFAULT_CANDIDATES = tuple(a for a in ("nb", "tan", "kdb", "fkdb", "aode", "skdb", "eskdb", "laode") if a in LEARNERS)
# cell-fits of search (bnserve.trainer.auto.work: rows x features x folds x the candidate's cost
# relative to naive Bayes); about 90 s of today's search on one core, the same on every machine
DEFAULT_WORK_BUDGET = 6_000_000_000


def check_work_budget(budget: int | None) -> None:
    """A work budget is a positive whole number of cell-fits, or None (no limit)."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise InvalidInput(f"--work-budget: expected a positive whole number of cell-fits or none, got {budget!r}")


DEFAULT_KS = (1, 2, 3)
DEFAULT_ESTIMATORS = ("laplace", "hdp", "dirichlet:0.5", "alr")  # the first is stage 1's
# the discretisations auto chooses among for numeric columns (bnserve.trainer.binning); the
# first is what it reads them with before choosing, and keeps where there is no choice
DEFAULT_DISCRETIZATIONS = ("mdl:16", "equal-frequency:5", "equal-frequency:10")


# ------------------------------------------------------------------ writing the index


def collect() -> dict[str, Learner]:
    """Every learner of every module of the package, by name (imports them all)."""
    package = importlib.import_module(PACKAGE)
    found: dict[str, Learner] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name in ("registry", "index"):  # not families: the collectors
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for learner in getattr(module, "LEARNERS", ()):
            if learner.name in found:
                raise RuntimeError(f"learner {learner.name!r} is defined twice")
            found[learner.name] = learner
    return dict(sorted(found.items()))


def declared() -> tuple[dict[str, str], tuple[str, ...], dict[str, tuple[str, str, bool, str]]]:
    """``index``'s MODULES, STREAMABLE and PARAMETERS, from the learners the modules declare."""
    learners = collect()
    modules = {name: _module_of(learner) for name, learner in learners.items()}
    params: dict[str, tuple[str, str, bool, str]] = {}
    for name, learner in learners.items():
        for p in learner.params:
            seen = params.get(p.name)
            if seen is not None and seen[1] != p.type.__name__:
                raise RuntimeError(f"parameter {p.name!r} is declared with two types")
            if seen is None:
                params[p.name] = (name, p.type.__name__, p.needs_rows, _help(learners, p.name))
    return modules, tuple(n for n, learner in learners.items() if learner.counts_only), params


def _module_of(learner: Learner) -> str:
    """The module (of this package, by its short name) whose ``LEARNERS`` holds ``learner``."""
    for info in pkgutil.iter_modules(importlib.import_module(PACKAGE).__path__):
        if learner in getattr(sys.modules.get(f"{PACKAGE}.{info.name}"), "LEARNERS", ()):
            return info.name
    raise RuntimeError(f"learner {learner.name!r} is in no module's LEARNERS")


def index_text() -> str:
    """The text of ``index.py`` (``ruff format`` it after)."""
    modules, streamable, params = declared()
    return "\n".join(
        [
            '"""Written by ``python -m bnserve.trainer.learners.registry`` from the modules\' ``LEARNERS``, then',
            '``ruff format``ted: do not edit. What the command line needs before any learner is imported."""',
            "",
            "# learner -> the module of this package that defines it",
            f"MODULES = {modules!r}",
            "# the learners that can learn from counts alone (from a file read in chunks)",
            f"STREAMABLE = {streamable!r}",
            "# parameter -> (its first learner, its type's name, needs the rows, help by learner)",
            f"PARAMETERS = {params!r}",
            "",
        ]
    )


def _help(learners: dict[str, Learner], name: str) -> str:
    """ "users: help" per distinct declaration of the parameter ``name`` (most learners share one)."""
    by_help: dict[str, list[str]] = {}
    for algo, learner in learners.items():
        for p in learner.params:
            if p.name == name:
                by_help.setdefault(p.help, []).append(algo)
    return "; ".join(f"{', '.join(users)}: {text}" for text, users in by_help.items())


INDEX = Path(__file__).with_name("index.py")

if __name__ == "__main__":
    INDEX.write_text(index_text())
    print(f"wrote {INDEX}")
