"""Models between a notebook and the model store: ``publish`` a fitted classifier as a new
version, ``load`` one back as a fitted classifier. The store is the one ``trainer`` and
``server`` use: a SQLAlchemy URL, by default ``$BNSERVE_STORE_URL`` (else
``sqlite:///bnserve.db``), or an open ``ModelStore``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from bnserve.store.model import Model
from bnserve.store.model.names import check_alias, check_description, check_model_name, check_tags, parse_ref

if TYPE_CHECKING:  # the estimator needs scikit-learn, which the core install lacks
    from bnserve.estimator import BayesNetClassifier
    from bnserve.store.db import ModelStore  # SQLAlchemy: imported when a store is opened

SKLEARN_EXTRA = "pip install 'bnserve[sklearn]'"


def publish(
    classifier: BayesNetClassifier | Model,
    name: str,
    aliases: Sequence[str] = (),
    store: str | ModelStore | None = None,
    *,
    description: str | None = None,
    tags: Mapping[str, str] | None = None,
    signing_key: str | None = None,
) -> int:
    """Publish a fitted classifier (or a ``Model``) as the next version of ``name``, with
    ``aliases`` (e.g. ``["production"]``) pointed at it in the same transaction, and the
    version's ``description`` and ``tags`` (as ``trainer fit --description --tag``), signed
    with the Ed25519 private key in the file ``signing_key`` if given (``--signing-key``);
    returns the version. Everything is checked before the store is opened."""
    model = classifier if isinstance(classifier, Model) else _fitted_model(classifier)
    aliases = [aliases] if isinstance(aliases, str) else list(aliases)
    check_model_name(name)
    for alias in aliases:
        check_alias(alias)
    check_description(description)
    check_tags({} if tags is None else tags)
    signer = None
    if signing_key is not None:
        from bnserve.store.signing import SigningKey

        signer = SigningKey.read(signing_key, "signing_key")
    with _opened(store, create=True) as opened:
        return opened.publish(name, model, aliases, description=description, tags=tags, signer=signer)


def load(ref: str, store: str | ModelStore | None = None) -> BayesNetClassifier:
    """The version ``ref`` names (``NAME``, ``NAME:VERSION`` or ``NAME@ALIAS``; ``NAME``
    alone: its production alias, else its latest version) as a fitted classifier (needs
    scikit-learn; ``load_model`` does not)."""
    try:
        from bnserve.estimator import from_model
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in ("sklearn", "pandas"):
            raise
        raise ModuleNotFoundError(
            f"bnserve.load returns a scikit-learn classifier, and {missing} is not installed: "
            f"{SKLEARN_EXTRA} (or take the Model itself with bnserve.load_model)",
            name=missing,
        ) from exc
    return from_model(load_model(ref, store))


def load_model(ref: str, store: str | ModelStore | None = None) -> Model:
    """The ``Model`` itself (variables, networks, CPTs, metadata) of the version ``ref`` names."""
    name, version, alias = parse_ref(ref)
    with _opened(store) as opened:
        return opened.load(name, version=version, alias=alias).model


def _fitted_model(classifier: BayesNetClassifier) -> Model:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(classifier, "model_")
    return classifier.model_


@contextmanager
def _opened(store: str | ModelStore | None, create: bool = False) -> Iterator[ModelStore]:
    """``store`` itself if open (left open), else the store at that URL, closed after use."""
    from bnserve.store.db import ModelStore, resolve_store_url

    if isinstance(store, ModelStore):
        yield store
        return
    with ModelStore(resolve_store_url(store), create=create) as opened:
        yield opened
