"""Publishing a model as a new version (``fit`` and ``import``), its flags and signing key
checked before any work."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from bnserve.store.model.names import check_alias, check_description, check_model_name, check_tags
from bnserve.trainer.cli.flags import (
    UsageError,
    _check_flag,
    _check_store_url,
    _open_store,
)
from bnserve.trainer.cli.learning import _describe

if TYPE_CHECKING:
    from bnserve.store.model import Model


def _check_publish_flags(args: argparse.Namespace) -> None:
    """--name, --alias, --description and --tag of fit and import, checked before any work."""
    _check_flag(check_model_name, args.name, "--name")
    for alias in args.aliases:
        _check_flag(check_alias, alias, "--alias")
    _check_flag(check_description, args.description, "--description")
    keys = [key for key, _ in args.tags]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise UsageError(f"--tag: the key {', '.join(map(repr, twice))} is given more than once")
    _check_flag(check_tags, dict(args.tags), "--tag")
    args.signer = None
    if args.signing_key is not None:
        from bnserve.store.signing import SigningKey

        args.signer = SigningKey.read(args.signing_key)  # KeyFileError naming the file: exit 1


def check_store_meanwhile(store: str | None) -> Callable[[], None]:
    """Check the --store URL (``_check_store_url``: mostly importing SQLAlchemy, about 0.5 s
    of one core), then import the store's repository ``_publish`` opens (its mapped tables:
    0.15 s more), in a background thread while the data are read, on the cores the parse
    leaves, rather than after the training; the function returned waits for it and raises
    what the check raised. Called before the training, and before any error of the reading
    is reported, a URL that cannot be used is refused as if it were checked first."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            _check_store_url(store)
        except BaseException as exc:  # raised in the main thread by ``checked``
            failed.append(exc)
            return
        with contextlib.suppress(Exception):  # imported again by ``_publish``, which says what failed
            importlib.import_module("bnserve.store.db.model_store")

    thread = threading.Thread(target=run, name="checking the store", daemon=True)
    thread.start()

    def checked() -> None:
        thread.join()
        if failed:
            raise failed[0]

    return checked


def _publish(args: argparse.Namespace, model: Model) -> int:
    """Publish ``model`` as the next version of ``--name`` with ``--alias``es, and say so. The
    store is opened only now: bad input never reaches it (a new store is created)."""
    with _open_store(args, create=True) as store:
        version = store.publish(
            args.name,
            model,
            tuple(args.aliases),
            description=args.description,
            tags=dict(args.tags),
            signer=args.signer,
        )
    aliases = ", ".join(args.aliases) if args.aliases else "none"
    estimator = model.metadata.get("estimator", "laplace")
    described = _describe(
        model.algorithm, {**model.params, **({"estimator": estimator} if estimator != "laplace" else {})}
    )
    signed = f"; signed by key {args.signer.key_id}" if args.signer is not None else ""
    print(f"published {args.name} version {version} ({described}); aliases: {aliases}{signed}")
    return 0
