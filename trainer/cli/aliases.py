"""``trainer alias``, ``unalias`` and ``delete``: move aliases, remove versions."""

from __future__ import annotations

import argparse

from bnserve.argtypes import whole_number
from bnserve.store.model.names import check_alias, check_model_name
from bnserve.trainer.cli.flags import (
    UsageError,
    _check_flag,
    _open_store,
    _parse_ref,
    _store_flag,
)


def add_alias(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("alias", help="point an alias at a version")
    p.add_argument("name")
    p.add_argument("version", type=whole_number(1))
    p.add_argument("alias")
    _store_flag(p)
    p.set_defaults(run=_alias)


def add_unalias(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("unalias", help="remove an alias (the version it named stays)")
    p.add_argument("name")
    p.add_argument("alias")
    _store_flag(p)
    p.set_defaults(run=_unalias)


def add_delete(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("delete", help="delete a model version, or every version of a model")
    p.add_argument("ref", metavar="NAME[:VERSION]")
    p.add_argument(
        "--force", action="store_true", help="also remove the aliases that point at what is deleted (refused otherwise)"
    )
    _store_flag(p)
    p.set_defaults(run=_delete)


def _alias(args: argparse.Namespace) -> int:
    _check_flag(check_model_name, args.name, "NAME")
    _check_flag(check_alias, args.alias, "ALIAS")
    with _open_store(args) as store:
        store.set_alias(args.name, args.alias, args.version)
    print(f"{args.name}: alias {args.alias} -> version {args.version}")
    return 0


def _unalias(args: argparse.Namespace) -> int:
    _check_flag(check_model_name, args.name, "NAME")
    _check_flag(check_alias, args.alias, "ALIAS")
    with _open_store(args) as store:
        version = store.remove_alias(args.name, args.alias)
    print(f"{args.name}: alias {args.alias} removed (it named version {version})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    if "@" in args.ref:
        raise UsageError(f"delete takes NAME or NAME:VERSION, not an alias ({args.ref!r}); remove one with unalias")
    name, version, _ = _parse_ref(args.ref)
    with _open_store(args) as store:
        deleted = store.delete(name, version, force=args.force)
    numbers = ", ".join(map(str, deleted.versions))
    if version is None:
        line = f"deleted model {name} (version{'s' if len(deleted.versions) > 1 else ''} {numbers})"
    else:
        line = f"deleted {name} version {numbers}"
    if deleted.aliases:
        removed = ", ".join(f"{a} (version {v})" for a, v in deleted.aliases.items())
        line += f"; removed the alias{'es' if len(deleted.aliases) > 1 else ''} {removed}"
    print(line)
    return 0
