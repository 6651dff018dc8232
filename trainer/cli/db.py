"""``trainer db upgrade``: the one command that migrates a store's schema."""

from __future__ import annotations

import argparse

from bnserve.store.timeouts import timeouts_of
from bnserve.trainer.cli.flags import (
    _store_flag,
)


def add_db(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="the store's database schema")
    db = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    q = db.add_parser(
        "upgrade",
        help="create the store's tables, or migrate them to this bnserve's schema; run once "
        "before servers and trainers of a new version use the store",
    )
    _store_flag(q)
    q.set_defaults(run=_db)


def _db(args: argparse.Namespace) -> int:
    """``trainer db upgrade``: the one command that migrates a store's schema."""
    from bnserve.store.db import redacted, resolve_store_url, upgrade_store

    url = resolve_store_url(args.store)
    before, after = upgrade_store(url, timeouts_of(args))
    if before == after:
        print(f"the store at {redacted(url)} is at schema revision {after}, this bnserve's; nothing to do")
    else:
        print(f"upgraded the store at {redacted(url)} from schema revision {before or 'none'} to {after}")
    return 0
