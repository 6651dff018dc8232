"""Publishing a model as a new version (``fit`` and ``import``), its flags and signing key
checked before any work."""

from __future__ import annotations

import argparse
import contextlib
import threading

from bnserve.store.model import Model
from bnserve.store.model.names import check_alias, check_description, check_model_name, check_tags
from bnserve.trainer.cli.flags import (
    UsageError,
    _check_flag,
    _open_store,
)
from bnserve.trainer.cli.learning import _describe


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


def import_store_meanwhile() -> None:
    """Import SQLAlchemy (about 0.5 s, most of opening the store) in a background thread while
    the model is learned, so that publishing at the end waits for it less. Only the
    third-party package: the trainer imports none of it, so the two threads never wait on
    each other's modules."""

    def run() -> None:
        with contextlib.suppress(ImportError):  # the store's own import says what is missing
            import sqlalchemy.orm  # noqa: F401

    threading.Thread(target=run, name="importing sqlalchemy", daemon=True).start()


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
