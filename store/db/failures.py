"""A database's errors sorted by what retrying would do, into the ``store.errors`` kinds.

- a value the database refuses (too long, out of range, past a limit of its own):
  ``InvalidInput``, INVALID_ARGUMENT;
- a state it refuses (a constraint of its own other than a unique key, a schema that is
  not this code's, a corrupt file): ``StoreRefused``, FAILED_PRECONDITION;
- a role that may not: ``PermissionDenied``;
- a connection, a timeout, a lock, a shortage: ``StoreUnavailable``, UNAVAILABLE, which
  clients retry;
- a unique key taken by a concurrent write: a race, which the store's writes retry
  themselves (``Conflict``, ABORTED, elsewhere).

PostgreSQL says which by its SQLSTATE class (psycopg's ``sqlstate``), SQLite by its result
code (``sqlite_errorname``); a driver's error with neither is a failure to reach the database.
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

from bnserve.store.db.url import redacted
from bnserve.store.errors import BnServeError, Conflict, InvalidInput, PermissionDenied, StoreRefused, StoreUnavailable

RACE, VALUE, REFUSED, PERMISSION, TRANSIENT = "race", "value", "refused", "permission", "transient"

VALUE_CLASSES = {"22", "54"}  # data exception (too long, out of range); program limit exceeded (index row size)
# connection; transaction rollback (serialisation, deadlock); insufficient resources; lock not
# available; operator intervention (statement timeout, shutdown); system error
TRANSIENT_CLASSES = {"08", "40", "53", "55", "57", "58"}
VALUE_CODES = {"TOOBIG", "RANGE", "MISMATCH"}  # SQLite primary result codes, the same way
TRANSIENT_CODES = {"BUSY", "LOCKED", "IOERR", "CANTOPEN", "FULL", "PROTOCOL", "INTERRUPT", "NOMEM"}


def translate(exc: sa_exc.SQLAlchemyError, what: str, store: str) -> BnServeError:
    """The ``store.errors`` kind of a database error (a race is ``Conflict`` here; the writer
    that retries one itself asks ``kind_of`` first). The message carries the driver's
    first line only, without any secret of the ``store`` URL in it."""
    detail = redacted(store, first_line(exc))
    kind = kind_of(exc)
    if kind == RACE:
        return Conflict(f"{what}: a concurrent write took the same key; try again: {detail}")
    if kind == VALUE:
        return InvalidInput(f"{what}: the database refused a value: {detail}")
    if kind == PERMISSION:
        return PermissionDenied(f"{what}: the store's role may not do this: {detail}")
    if kind == TRANSIENT:
        return StoreUnavailable(f"{what}: the store failed: {detail}")
    return StoreRefused(f"{what}: the database refused it: {detail}")


def kind_of(exc: sa_exc.SQLAlchemyError) -> str:
    """RACE, VALUE, PERMISSION, TRANSIENT or REFUSED (whatever retrying cannot mend)."""
    if isinstance(exc, sa_exc.TimeoutError | sa_exc.DisconnectionError):  # the pool's wait; a dropped connection
        return TRANSIENT
    if isinstance(exc, sa_exc.IntegrityError):
        return RACE if _is_unique_violation(exc) else REFUSED
    orig = getattr(exc, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None) or ""
    sqlite = (getattr(orig, "sqlite_errorname", None) or "").removeprefix("SQLITE_").partition("_")[0]
    if sqlstate == "42501" or sqlite == "READONLY":  # insufficient_privilege; a file it may not write
        return PERMISSION
    if sqlstate[:2] in VALUE_CLASSES or sqlite in VALUE_CODES or isinstance(exc, sa_exc.DataError):
        return VALUE
    if sqlstate[:2] in TRANSIENT_CLASSES or sqlite in TRANSIENT_CODES:
        return TRANSIENT
    if not sqlstate and not sqlite and isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        return TRANSIENT  # the driver could not reach the database: no code to read
    return REFUSED


def first_line(exc: sa_exc.SQLAlchemyError) -> str:
    """The driver's own first line (not SQLAlchemy's, which adds the statement)."""
    error = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _is_unique_violation(exc: sa_exc.IntegrityError) -> bool:
    sqlstate = getattr(exc.orig, "sqlstate", None)  # psycopg
    if sqlstate is not None:
        return sqlstate == "23505"
    return getattr(exc.orig, "sqlite_errorname", "") in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY")
