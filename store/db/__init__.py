"""SQL persistence of models: versioned, immutable, aliased, deletable, in SQLite (the embedded
default) or PostgreSQL, same code. ``model_store.ModelStore`` is the repository; the
mapped rows (``tables``) and their conversion (``rows``) never leave it. Which database
(``url``), how to open it (``engine``) and its schema and migrations (``schema``).

The names load on first use (``bnserve.lazy``): SQLAlchemy and alembic are imported when a
store is opened or a URL resolved, not by a command line that only builds its parser."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bnserve import lazy

if TYPE_CHECKING:
    from bnserve.store.db.model_store import (
        CatalogueChanges,
        CatalogueMark,
        Deleted,
        ModelStore,
        ModelSummary,
        ModelVersion,
        VersionSummary,
    )
    from bnserve.store.db.schema import UPGRADE_COMMAND, upgrade_store
    from bnserve.store.db.url import DEFAULT_STORE_URL, STORE_URL_ENV, STORE_URL_FILE_ENV, redacted, resolve_store_url

__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_URL_ENV",
    "STORE_URL_FILE_ENV",
    "UPGRADE_COMMAND",
    "CatalogueChanges",
    "CatalogueMark",
    "Deleted",
    "ModelStore",
    "ModelSummary",
    "ModelVersion",
    "VersionSummary",
    "redacted",
    "resolve_store_url",
    "upgrade_store",
]

_SCHEMA = ("UPGRADE_COMMAND", "upgrade_store")
_URL = ("DEFAULT_STORE_URL", "STORE_URL_ENV", "STORE_URL_FILE_ENV", "redacted", "resolve_store_url")

__getattr__, __dir__ = lazy.exports(
    __name__, {name: "schema" if name in _SCHEMA else "url" if name in _URL else "model_store" for name in __all__}
)
